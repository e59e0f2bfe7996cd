"""Scoring a whole split, every example once, weighted by its real size.

Pushing a whole split through a model at once is the usual crash at
evaluation time (the activations of 10,000 images at once), and averaging
per-chunk means is wrong whenever the last chunk is smaller. The classic
tutorials dropped the remainder (with batch 600 they scored 9,600 of the
10,000 test images); int8store scores all of them, or only whole chunks when
asked to reproduce the published figures.

Which rows each window of ``chunk`` examples reads and which of its values
count is one plan (:mod:`int8store.order.windows`) for every way a split is
held: in a row on one device, over several devices (each its rows, padding
never counted) or streamed (a plan a shard, each shard loaded in turn). Two
ways to run it:

* :func:`evaluate_in_chunks` calls ``evaluate(start)`` once a window (what
  the C backend's calls, which cost little, do);
* :func:`scoring_function` compiles, from what a classic tutorial gives
  ``function([start], ...)``, a function that scores the split. In JAX mode
  that is one call of one XLA loop over every window of the split (one a
  shard when streamed) returning the sum of the counted values: on a GPU the
  classic way, a call and a host round trip a window, took as long as the
  training itself over a LeNet5 run.
"""

import numbers
import time

import numpy as np

from ..backend import activate, function_mode
from ..codes.vocabulary import check_mode
from ..errors import ArgumentError
from ..order.windows import split_in_a_row

__all__ = ["evaluate_in_chunks", "scoring_function", "SplitScore", "scoring_plans"]


def scoring_plans(split, chunk_size, classic_count=False):
    """The windows that score every example of ``split`` once: ``(starts,
    weights)`` a call (see :mod:`int8store.order.windows`).

    ``split`` is a split (:meth:`~int8store.dataset.split.Split.scoring_plans`:
    held whole, over several devices, or streamed, a plan a shard yielded
    while its shard is loaded), the :class:`~int8store.order.blocks.Blocks`
    of a split over several devices, or a count of examples held in a row.
    ``classic_count``: whole chunks only, as the classic tutorials scored.
    """
    if int(chunk_size) != chunk_size or chunk_size < 1:
        raise ArgumentError(f"chunk_size={chunk_size!r}: expected a positive chunk size")
    if isinstance(split, numbers.Integral):
        yield split_in_a_row(split, chunk_size, classic_count)
    elif hasattr(split, "scoring_plans"):
        yield from split.scoring_plans(int(chunk_size), classic_count)
    else:
        raise ArgumentError(f"n_examples={split!r}: expected a count of examples (an integer) "
                            "or a split")


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
    n_examples : int, SharedDataset, StreamingSplit or Blocks
        How many examples to score, or the split (see :func:`scoring_plans`):
        a streamed split's shards are loaded one after the other (in the
        split's order) and scored with ``evaluate(start)`` reading the shard
        now loaded; over several devices, ``evaluate(start)`` gives each
        device's ``chunk_size / devices`` rows from its local row ``start``,
        padding left out.
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
    if not static:
        return _evaluate_spans(evaluate, n_examples, int(chunk_size), classic_count)
    total, count = 0.0, 0
    for starts, weights in scoring_plans(n_examples, chunk_size, classic_count):
        for start, counted in zip(starts, weights):
            if counted.any():
                total += float(_chunk_values(evaluate, int(start), int(chunk_size))[counted].sum())
        count += int(weights.sum())
    return (total / count if count else float("nan")), count


def _evaluate_spans(evaluate, n_examples, chunk_size, classic_count):
    """:func:`evaluate_in_chunks` with ``evaluate(start, stop)`` giving means,
    over a count of examples held in a row."""
    if not isinstance(n_examples, numbers.Integral):
        raise ArgumentError("a split is scored with static chunks (evaluate(start)); "
                            "evaluate(start, stop) takes a count of examples")
    n_examples = int(n_examples)
    if chunk_size < 1 or n_examples < 0:
        raise ArgumentError(f"chunk_size={chunk_size} and n_examples={n_examples}: expected a "
                            "positive chunk size and a count of examples")
    count = n_examples // chunk_size * chunk_size if classic_count else n_examples
    total = sum(float(evaluate(start, min(start + chunk_size, count))) *
                (min(start + chunk_size, count) - start) for start in range(0, count, chunk_size))
    return (total / count if count else float("nan")), count


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


class SplitScore:
    """What :func:`scoring_function` returns: ``score()`` gives ``(mean,
    count)``, the mean of the per-example values over every example of the
    split (or its whole chunks, with ``classic_count``) and how many it is
    over. :attr:`calls` counts the calls made to the compiled function so
    far (JAX mode: one a split held whole, one a shard streamed) and
    :attr:`seconds` the time they took (in JAX mode each score first waits
    for the training calls before it, which the device may still be
    running: the time is the score's own), :attr:`first_seconds` of it the
    first score's (in JAX mode its program is traced, then compiled or
    loaded from the cache: what the later scores do not pay)."""

    def __init__(self, run, split, chunk_size, classic_count):
        self._run, self.split = run, split
        self.chunk_size, self.classic_count = int(chunk_size), bool(classic_count)
        self.calls, self.seconds, self.first_seconds = 0, 0.0, 0.0

    def __call__(self):
        before, first = self.seconds, self.calls == 0
        result = self._run(self)
        if first:
            self.first_seconds = self.seconds - before
        return result

    def __repr__(self):
        return f"SplitScore({self.split!r}, chunks of {self.chunk_size})"


def scoring_function(inputs, outputs, givens, split, chunk_size, classic_count=False, mode="c"):
    """A compiled function that scores every example of ``split``, built from
    what a classic tutorial gives ``function([start], ...)``.

    Parameters
    ----------
    inputs : list of one integer scalar
        ``[start]``: the first row of a window, which ``givens`` slice from
        (``x[start:start + chunk_size]``).
    outputs : vector variable
        The per-example values of a window (e.g. ``neq(y_pred, y)``), one an
        example of the ``chunk_size`` from ``start``.
    givens : dict
        The windows of the split's stored images and labels.
    split : SharedDataset or StreamingSplit
        The split the givens read (see :func:`scoring_plans`).
    chunk_size : int
        Examples a window (the size the model was built for).
    classic_count : bool
        Whole windows only, as the classic tutorials scored.
    mode : {"c", "jax"}
        As for :func:`~int8store.function_mode`.

    Returns
    -------
    SplitScore
        ``score()`` returns ``(mean, count)``. On the C backend it calls the
        compiled window once a window (:func:`evaluate_in_chunks`); in JAX
        mode it calls int8store's own XLA loop over every window once (one
        call a shard for a streamed split), called directly, and brings one
        number back: integer and boolean values are summed exactly, so the
        counts are those of :func:`evaluate_in_chunks`.

    Examples
    --------
    >>> import numpy as np
    >>> from int8store import SharedDataset, tensor_library
    >>> T = tensor_library().tensor
    >>> data = SharedDataset.from_arrays(np.zeros((7, 4), np.uint8), np.arange(7) % 2,
    ...                                  name="valid", dtype="float64")
    >>> start, x, y = T.lscalar(), T.matrix("x", dtype="float64"), T.ivector("y")
    >>> errors = T.neq(T.argmax(x, axis=1), y)  # all-zero images: the model says 0
    >>> score = scoring_function([start], errors, {x: data.x[start:start + 3],
    ...                          y: data.y[start:start + 3]}, data, chunk_size=3)
    >>> score()
    (0.42857142857142855, 7)
    """
    mode = check_mode(mode)
    if len(inputs) != 1 or getattr(inputs[0], "ndim", None) != 0 \
            or not str(inputs[0].dtype).startswith(("int", "uint")):
        raise ArgumentError(f"inputs={inputs!r}: a split is scored from one input, the first "
                            "row of a window (an integer scalar)")
    if getattr(split, "blocks", False) is None:  # (a split held whole in a row, on one device)
        # A chunk larger than the split, refused before anything is compiled
        # (its windows' slices would compile: a short slice is the classic's).
        split_in_a_row(split.n_examples, chunk_size, classic_count, split.name)
    api = activate()
    (start,) = inputs
    if mode == "c":
        window = api.function([start], outputs, givens=givens, mode=function_mode("c"))
        return SplitScore(lambda score: _score_in_calls(score, window), split, chunk_size,
                          classic_count)
    from ..backend.jax.direct import JaxScore, jax_graph

    from .steps import rebound

    start_in_window = start.type()
    (values,), read = rebound([outputs], givens, {start: start_in_window})
    length = (getattr(values.type, "shape", None) or (None,))[0]
    if values.ndim != 1 or length not in (None, int(chunk_size)):  # (as the C backend's calls)
        raise ArgumentError(
            f"outputs: {values.ndim}-D values for a window of {chunk_size} examples: a split is "
            "scored from one value per example (T.neq(y_pred, y); the classic errors() is "
            "their mean)")
    examples = split if isinstance(split, numbers.Integral) else getattr(split, "n_examples", 0)
    window = JaxScore(jax_graph([start_in_window, *read], [values]),
                      windows=-(-int(examples) // int(chunk_size)))
    return SplitScore(lambda score: _score_in_one_call(score, window), split, chunk_size,
                      classic_count)


def _score_in_calls(score, window):
    """A call a window (the C backend)."""
    def evaluate(start):
        score.calls += 1
        return window(start)

    began = time.perf_counter()
    result = evaluate_in_chunks(evaluate, score.split, score.chunk_size, score.classic_count)
    score.seconds += time.perf_counter() - began
    return result


def _score_in_one_call(score, window):
    """One call a plan (JAX mode): one for a split held whole, one a shard
    streamed."""
    from ..backend.jax.sharding import host_values

    window.wait_for_inputs()  # (the training calls before may still be running)
    began = time.perf_counter()
    totals, count = [], 0
    for starts, weights in scoring_plans(score.split, score.chunk_size, score.classic_count):
        totals.append(window(starts, weights))
        count += int(weights.sum())
        score.calls += 1
    mean = sum(float(host_values(total)) for total in totals) / count if count else float("nan")
    score.seconds += time.perf_counter() - began
    return mean, count
