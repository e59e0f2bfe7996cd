"""How many codes take each of the 256 values: the histogram of a set of
int8 codes (:func:`code_counts`), exact, and what it gives exactly, without
the codes: their sum, and the mean that ``normalize="dataset"`` centres on
(:func:`mean_of_code_counts`).

Histograms of parts of a split add up to the split's, so a split is counted
a piece at a time, and a store records each split's histogram in its
manifest when it is written: the mean is then known before any image is
read.
"""

import numpy as np

from ..errors import ArgumentError

__all__ = ["code_counts", "code_sum", "mean_of_code_counts"]

# Codes counted per bincount: its int64 copy of their pairs stays at 1 MiB
# (the writer counts each chunk as it goes, within a bounded memory).
_PIECE = 1 << 18


def code_counts(codes):
    """How many of ``codes`` (int8, any shape) take each byte value: bin
    ``b`` counts the code whose byte is ``b`` (code ``b`` for ``b < 128``,
    ``b - 256`` above). int64, 256 bins.

    Counted a piece at a time, two codes at once (a bincount of their 16-bit
    pairs, folded), which counts at about twice the speed of one at a time.

    Examples
    --------
    >>> counts = code_counts(np.array([-128, 0, 0, 127], dtype=np.int8))
    >>> int(counts[128]), int(counts[0]), int(counts[127]), int(counts.sum())
    (1, 2, 1, 4)
    """
    flat = np.ascontiguousarray(codes, dtype=np.int8).reshape(-1).view(np.uint8)
    counts = np.zeros(256, dtype=np.int64)
    for start in range(0, len(flat), _PIECE):
        piece = flat[start:start + _PIECE]
        pairs = len(piece) // 2 * 2
        folded = np.bincount(piece[:pairs].view(np.uint16), minlength=1 << 16).reshape(256, 256)
        counts += folded.sum(axis=0) + folded.sum(axis=1)  # the pairs' two bytes
        if pairs < len(piece):
            counts[piece[-1]] += 1
    return counts


def code_sum(counts):
    """The sum of the codes counted by ``counts`` (a Python int, exact)."""
    values = np.arange(256, dtype=np.int64)
    values[128:] -= 256  # bin b holds the code whose byte is b
    return int(np.asarray(counts, dtype=np.int64) @ values)


def mean_of_code_counts(counts, encoding):
    """Mean of ``x`` (levels ``code + offset``, or codebook values) over the
    codes counted by ``counts``, in float64: what ``normalize="dataset"``
    subtracts (:func:`int8store.dataset.symbolic.normalization_mean`)."""
    counts = np.roll(np.asarray(counts, dtype=np.int64), 128)  # bin of code c at c + 128
    if counts.sum() == 0:
        raise ArgumentError("cannot take the mean of an empty set of codes")
    table = (np.asarray(encoding.codebook, dtype=np.float64) if encoding.is_codebook
             else np.arange(256, dtype=np.float64) - 128 + encoding.offset)
    return float(counts @ table / counts.sum())
