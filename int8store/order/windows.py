"""Which rows each window of a scoring pass reads, and which of its values
count: plain arithmetic, the same for the C backend's calls a window and JAX
mode's one call a split.

A compiled model scores a fixed number of examples at once (the batch size
its graph was built for), so a split is scored in windows of ``chunk`` rows.
A window is a start (a row, or a local row on each of several devices) and a
row of ``chunk`` weights, 1 for a value that counts and 0 for one already
counted or not an example at all: every example counts exactly once, and no
window reaches past the rows that hold data. A plan is ``(starts, weights)``,
arrays of shapes ``(W,)`` and ``(W, chunk)``, to score with one call (JAX
mode: a loop over the windows inside it) or one call a window (the C
backend).
"""

import numpy as np

from ..errors import ArgumentError

__all__ = ["row_windows", "split_in_a_row", "block_windows", "padded_plan"]


def row_windows(rows, chunk, limit=None):
    """The plan that scores rows ``[0, limit)`` of ``rows`` rows held in a row.

    Windows start every ``chunk`` rows; the last partial one starts at
    ``rows - chunk`` instead (its rows before ``limit``'s remainder were
    counted already), or at 0 when there are fewer than ``chunk`` rows in
    all: then it reads rows past ``rows`` (a streamed shard's buffer holds
    ``chunk`` rows or more), which never count.

    Examples
    --------
    >>> starts, weights = row_windows(7, 3)
    >>> starts.tolist(), weights.astype(int).tolist()
    ([0, 3, 4], [[1, 1, 1], [1, 1, 1], [0, 0, 1]])
    >>> row_windows(7, 3, limit=6)[0].tolist()
    [0, 3]
    """
    rows, chunk = int(rows), int(chunk)
    limit = rows if limit is None else max(0, min(int(limit), rows))
    if chunk < 1:
        raise ArgumentError(f"chunk={chunk}: expected a positive number of rows a window")
    firsts = np.arange(0, limit, chunk, dtype=np.int64)
    starts = np.minimum(firsts, max(rows - chunk, 0))
    position = starts[:, None] + np.arange(chunk)[None, :]
    weights = (position >= firsts[:, None]) & (position < np.minimum(firsts + chunk, limit)[:, None])
    return starts, weights


def split_in_a_row(n_examples, chunk, classic_count=False, name=None):
    """The plan that scores a split of ``n_examples`` held in a row: every
    example, or with ``classic_count`` whole chunks only. A chunk larger
    than the split is refused: no row past it holds data.

    Examples
    --------
    >>> split_in_a_row(7, 3, classic_count=True)[0].tolist()
    [0, 3]
    """
    n_examples, chunk = int(n_examples), int(chunk)
    if n_examples < 0:
        raise ArgumentError(f"n_examples={n_examples}: expected a count of examples")
    if 0 < n_examples < chunk:
        raise ArgumentError(f"{name + ': ' if name else ''}chunk_size={chunk} is larger than "
                            f"the {n_examples} examples: a static chunk cannot fit; use a "
                            "smaller one")
    return row_windows(n_examples, chunk, n_examples // chunk * chunk if classic_count else None)


def block_windows(blocks, chunk, classic_count=False):
    """The plan that scores a split laid over several devices
    (:class:`~int8store.order.blocks.Blocks`): windows of ``chunk / devices``
    local rows from the same local start on every device, the values device
    by device (as the minibatch op gives them over devices); each real
    example counts once, padding never. With ``classic_count``, only the
    windows that every device fills with real rows, as whole minibatches.

    Examples
    --------
    >>> from int8store.order.blocks import Blocks
    >>> starts, weights = block_windows(Blocks(10, 2), 4)
    >>> starts.tolist(), int(weights.sum())
    ([0, 2, 3], 10)
    """
    width = blocks.per_device(int(chunk))
    if width > blocks.rows_per_device:
        raise ArgumentError(f"chunk={chunk}: more than the {blocks.rows_per_device} rows of each "
                            f"of {blocks.devices} devices")
    limit = blocks.fewest_rows // width * width if classic_count else blocks.rows_per_device
    starts = list(range(0, limit - width + 1, width))
    if limit % width:
        starts.append(limit - width)  # the last window, overlapping the one before
    seen = np.zeros((blocks.devices, blocks.rows_per_device), dtype=bool)
    weights = np.zeros((len(starts), int(chunk)), dtype=bool)
    for k, start in enumerate(starts):
        real = blocks.global_rows(start, width) >= 0
        weights[k] = (real & ~seen[:, start:start + width]).reshape(-1)
        seen[:, start:start + width] |= real
    return np.asarray(starts, dtype=np.int64), weights


def padded_plan(plan, windows):
    """``plan`` with windows of no weight added up to ``windows`` (reading
    from row 0): every call of a pass then has one shape, and compiles once."""
    starts, weights = plan
    missing = int(windows) - len(starts)
    if missing < 0:
        raise ArgumentError(f"a plan of {len(starts)} windows cannot be padded to {windows}")
    return (np.concatenate([starts, np.zeros(missing, dtype=starts.dtype)]),
            np.concatenate([weights, np.zeros((missing, weights.shape[1]), dtype=bool)]))
