"""Scoring a whole split in chunks, every example once, weighted by its real size.

Pushing a whole split through a model at once is the usual crash at
evaluation time (the activations of 10,000 images at once), and averaging
per-chunk means is wrong whenever the last chunk is smaller. The classic
tutorials dropped the remainder (with batch 600 they scored 9,600 of the
10,000 test images); :func:`evaluate_in_chunks` scores all of them, or only
whole chunks when asked to reproduce the published figures. A streamed
split (:class:`~int8store.StreamingSplit`) is scored the same way, shard by
shard, each loaded in turn.
"""

import numpy as np

from ..errors import ArgumentError

__all__ = ["evaluate_in_chunks"]


def evaluate_in_chunks(evaluate, n_examples, chunk_size, classic_count=False, static=True):
    """The mean of a per-example quantity (error, accuracy, loss) over the first
    ``n_examples`` of a split, computed ``chunk_size`` examples at a time.

    Parameters
    ----------
    evaluate : callable
        With ``static=True`` (the default, what JAX mode needs: one compiled
        chunk size), ``evaluate(start)`` returns the per-example values of the
        ``chunk_size`` examples from ``start``. The last, partial chunk is
        evaluated as the last ``chunk_size`` examples of the split and only
        its examples not yet scored count. With ``static=False``,
        ``evaluate(start, stop)`` returns the mean over ``[start, stop)``,
        weighted by ``stop - start``.
    n_examples : int, StreamingSplit or Blocks
        How many examples to score; or a streamed split, whose shards are
        loaded one after the other (in the split's order) and scored with
        ``evaluate(start)`` reading the shard now loaded; or the blocks of a
        split over several devices (``dataset.blocks``), scored with
        ``evaluate(start)`` giving each device's ``chunk_size / devices``
        rows from its local row ``start``, padding left out.
    chunk_size : int
    classic_count : bool
        Score whole chunks only, dropping the remainder, as the classic
        tutorials did (their published figures).

    Returns
    -------
    (mean, count) : the mean, and how many examples it is over.

    Examples
    --------
    >>> errors = np.array([0, 1, 0, 0, 1, 1, 0], dtype=float)
    >>> evaluate_in_chunks(lambda start: errors[start:start + 3], 7, 3)
    (0.42857142857142855, 7)
    >>> evaluate_in_chunks(lambda start: errors[start:start + 3], 7, 3, classic_count=True)
    (0.5, 6)
    """
    if hasattr(n_examples, "epoch"):
        return _evaluate_stream(evaluate, n_examples, int(chunk_size), classic_count, static)
    if hasattr(n_examples, "rows_per_device"):
        return _evaluate_blocks(evaluate, n_examples, int(chunk_size), classic_count, static)
    n_examples, chunk_size = int(n_examples), int(chunk_size)
    if chunk_size < 1 or n_examples < 0:
        raise ArgumentError(f"chunk_size={chunk_size} and n_examples={n_examples}: expected a "
                            "positive chunk size and a count of examples")
    if static and 0 < n_examples < chunk_size:
        raise ArgumentError(f"chunk_size={chunk_size} is larger than the {n_examples} examples: "
                            "a static chunk cannot fit; use a smaller one")
    whole = n_examples // chunk_size * chunk_size
    count = whole if classic_count else n_examples
    if count == 0:
        return float("nan"), 0
    total = 0.0
    for start in range(0, whole, chunk_size):
        total += _chunk_sum(evaluate, start, start + chunk_size, static, chunk_size)
    rest = count - whole
    if rest:
        if static:
            values = np.asarray(evaluate(n_examples - chunk_size), dtype=np.float64).reshape(-1)
            total += float(values[-rest:].sum())
        else:
            total += _chunk_sum(evaluate, whole, n_examples, static, chunk_size)
    return total / count, count


def _chunk_sum(evaluate, start, stop, static, chunk_size):
    if static:
        return float(_chunk_values(evaluate, start, chunk_size).sum())
    return float(evaluate(start, stop)) * (stop - start)


def _chunk_values(evaluate, start, chunk_size):
    """``evaluate(start)``'s per-example values, checked to be one per example."""
    values = evaluate(start)
    if not getattr(values, "is_fully_addressable", True):  # spread over several processes
        from ..backend.jax.sharding import host_values

        values = host_values(values)
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if values.size != chunk_size:
        raise ArgumentError(f"evaluate({start}) gave {values.size} values for a chunk of "
                            f"{chunk_size}: with static=True it gives one per example")
    return values


def _evaluate_stream(evaluate, stream, chunk_size, classic_count, static):
    """:func:`evaluate_in_chunks` over a streamed split, shard by shard. Only
    the examples of each shard count, and no chunk reaches past real rows:
    a shard's partial chunk is its last ``chunk_size`` own rows (the
    split's last chunk is its last ``chunk_size`` examples, as on a
    resident split), and a short last shard with fewer examples than a
    chunk is evaluated with the examples just before it, which fill its
    other rows (:func:`int8store.streaming.sources.fill_shard`)."""
    if not static:
        raise ArgumentError("a streamed split is scored with static chunks (evaluate(start))")
    if chunk_size < 1 or chunk_size > stream.shard_size:
        raise ArgumentError(f"chunk_size={chunk_size}: expected 1 to the {stream.shard_size} "
                            f"examples of a shard of {stream.name}")
    if classic_count and stream.seed is not None:
        raise ArgumentError(f"classic_count needs {stream.name} in its own order (no seed)")
    limit = stream.n_examples // chunk_size * chunk_size if classic_count else stream.n_examples
    total, count = 0.0, 0
    for shard in stream.passes():
        scored = min(shard.count, limit - shard.start)
        for first in range(0, max(scored, 0), chunk_size):
            base = min(first, max(shard.count - chunk_size, 0))
            values = _chunk_values(evaluate, base, chunk_size)
            total += float(values[first - base:min(scored, first + chunk_size) - base].sum())
        count += max(scored, 0)
    return (total / count if count else float("nan")), count


def _evaluate_blocks(evaluate, blocks, chunk_size, classic_count, static):
    """:func:`evaluate_in_chunks` over a split in blocks on several devices
    (:mod:`int8store.backend.jax.sharding`): windows of ``chunk_size / devices``
    local rows, the same on every device; each real example counts once,
    padding never."""
    if not static:
        raise ArgumentError("a split over several devices is scored with static chunks "
                            "(evaluate(start))")
    width = blocks.per_device(chunk_size)
    if width > blocks.rows_per_device:
        raise ArgumentError(f"chunk_size={chunk_size}: more than the {blocks.rows_per_device} "
                            f"rows of each of {blocks.devices} devices")
    limit = blocks.fewest_rows // width * width if classic_count else blocks.rows_per_device
    starts = list(range(0, limit - width + 1, width))
    if limit % width:
        starts.append(limit - width)  # the last window, overlapping the one before
    seen = np.zeros((blocks.devices, blocks.rows_per_device), dtype=bool)
    total, count = 0.0, 0
    for start in starts:
        values = _chunk_values(evaluate, start, chunk_size).reshape(blocks.devices, width)
        real = blocks.global_rows(start, width) >= 0
        new = real & ~seen[:, start:start + width]
        total += float(values[new].sum())
        count += int(new.sum())
        seen[:, start:start + width] |= real
    return (total / count if count else float("nan")), count
