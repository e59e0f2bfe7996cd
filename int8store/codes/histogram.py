"""How many codes take each of the 256 values: the histogram of a set of
int8 codes (:func:`code_counts`), exact, and what it gives exactly, without
the codes: their sum, and the mean that ``normalize="dataset"`` centres on
(:func:`mean_of_code_counts`).

Histograms of parts of a split add up to the split's, so a split is counted
a piece at a time, and a store records each split's histogram in its
manifest when it is written: the mean is then known before any image is
read.

Images with a channel axis (channels last: ``(rows, cols, channels)``) are
also counted channel by channel (:func:`channel_code_counts`, one row of 256
bins a channel), which gives each channel's mean and standard deviation
exactly (:func:`channel_means`, :func:`channel_stds`): what a per-channel
normalization ``(x - mean_c) / std_c`` takes.
"""

import math
from fractions import Fraction

import numpy as np

from ..errors import ArgumentError

__all__ = ["code_counts", "code_sum", "mean_of_code_counts", "channels_of", "channel_code_counts",
           "channel_means", "channel_stds"]

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
    return float(counts @ _values(encoding) / counts.sum())


def _values(encoding):
    """The 256 values of ``x`` (float64) for codes -128..127, in that order."""
    if encoding.is_codebook:
        return np.asarray(encoding.codebook, dtype=np.float64)
    return np.arange(256, dtype=np.float64) - 128 + encoding.offset


def channels_of(image_shape):
    """How many channels images of ``image_shape`` have: the last axis of a
    3-D shape ``(rows, cols, channels)``; 1 for any other shape (grey
    images, flat vectors: the whole image is one channel)."""
    return int(image_shape[-1]) if len(image_shape) == 3 else 1


def channel_code_counts(codes, channels):
    """The histogram of ``codes`` (int8, channels last: any shape whose size
    is a multiple of ``channels``) channel by channel: int64, shape
    ``(channels, 256)``, row ``c`` as :func:`code_counts` of channel ``c``.
    Its rows add up to :func:`code_counts` of all the codes.

    Examples
    --------
    >>> rgb = np.array([[[-128, 0, 127], [-128, 1, 127]]], dtype=np.int8)  # 1x2 pixels, 3 channels
    >>> counts = channel_code_counts(rgb, 3)
    >>> counts.shape, int(counts[0, 128]), int(counts[1, 0]), int(counts[1, 1]), int(counts[2, 127])
    ((3, 256), 2, 1, 1, 2)
    """
    flat = np.asarray(codes, dtype=np.int8).reshape(-1)
    if flat.size % channels:
        raise ArgumentError(f"{flat.size} codes do not split into {channels} channels")
    pixels = flat.reshape(-1, channels)
    return np.stack([code_counts(pixels[:, c]) for c in range(channels)])


def channel_means(counts, encoding):
    """Each channel's mean of ``x`` (levels ``code + offset`` for an affine
    encoding, the codebook's values for a codebook), from a ``(channels,
    256)`` histogram (:func:`channel_code_counts`): float64, shape
    ``(channels,)``, each the exact mean rounded once (to the nearest float64).

    Examples
    --------
    >>> from int8store.codes.encoding import Encoding
    >>> counts = channel_code_counts(np.array([[0, -128], [1, -128]], np.int8), 2)
    >>> channel_means(counts, Encoding(128, 256)).tolist()   # levels 128 and 129; 0 and 0
    [128.5, 0.0]
    """
    return np.array([float(_moments(row, encoding)[0]) for row in _rows(counts)])


def channel_stds(counts, encoding):
    """Each channel's standard deviation of ``x`` (population: over ``n``,
    not ``n - 1``) from a ``(channels, 256)`` histogram: float64, shape
    ``(channels,)``, the square root of the exact variance (rounded once to
    float64), so within one unit in the last place.

    Examples
    --------
    >>> from int8store.codes.encoding import Encoding
    >>> counts = channel_code_counts(np.array([[0, -128], [2, -128]], np.int8), 2)
    >>> channel_stds(counts, Encoding(128, 256)).tolist()   # levels 128 and 130; 0 and 0
    [1.0, 0.0]
    """
    return np.array([math.sqrt(_moments(row, encoding)[1]) for row in _rows(counts)])


def _rows(counts):
    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 2 or counts.shape[1] != 256:
        raise ArgumentError(f"expected channel code counts of shape (channels, 256), got "
                            f"{counts.shape}")
    return counts


def _moments(counts, encoding):
    """The exact mean and variance (Fractions) of the values counted by one
    row of 256 bins: integer sums for affine levels, the codebook's float64
    values taken as the exact rationals they are."""
    counts = [int(n) for n in np.roll(counts, 128)]  # bin of code c at c + 128
    total = sum(counts)
    if total == 0:
        raise ArgumentError("cannot take the mean of an empty set of codes")
    values = [Fraction(v) for v in _values(encoding).tolist()]
    mean = sum(n * v for n, v in zip(counts, values) if n) / total
    variance = sum(n * (v - mean) ** 2 for n, v in zip(counts, values) if n) / total
    return mean, variance
