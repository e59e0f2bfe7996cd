"""Per-channel statistics of images stored channels-last, for the
``"channel"`` and ``"standard"`` normalizations: each channel's mean and
standard deviation of ``x`` (levels ``code + offset``, or codebook values),
in float64, from each channel's histogram of codes (exact counts, so the
statistics do not depend on how the split was read)."""

from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError
from .histogram import code_counts

__all__ = ["ChannelStatistics", "channel_counts", "channels_of", "PER_CHANNEL"]

#: The normalizations that take each channel's statistics.
PER_CHANNEL = ("channel", "standard")


def channels_of(image_shape):
    """Channels of images of ``image_shape``: the last axis of a 3-D
    (rows, cols, channels) shape, else 1."""
    return int(image_shape[-1]) if len(image_shape) == 3 else 1


def channel_counts(codes, channels):
    """``(channels, 256)`` int64: each channel's histogram of the int8
    ``codes`` (rows of channels-last pixels; bins as
    :func:`~int8store.codes.histogram.code_counts`)."""
    flat = np.asarray(codes, dtype=np.int8).reshape(-1)
    if flat.size % channels:
        raise ArgumentError(f"{flat.size} codes do not split into {channels} channels")
    pixels = flat.reshape(-1, channels)
    return np.stack([code_counts(pixels[:, c]) for c in range(channels)])


@dataclass(frozen=True)
class ChannelStatistics:
    """Each channel's mean and standard deviation of ``x`` (tuples of floats).

    Examples
    --------
    >>> from int8store.codes.encoding import Encoding
    >>> codes = np.array([[-128, 0, 127, 64]], dtype=np.int8)   # two pixels of 2 channels
    >>> ChannelStatistics.of(codes, Encoding(divisor=255), channels=2)
    ChannelStatistics(mean=(127.5, 160.0), std=(127.5, 32.0))
    """

    mean: tuple
    std: tuple

    @classmethod
    def of(cls, codes, encoding, channels):
        return cls.from_counts(channel_counts(codes, channels), encoding)

    @classmethod
    def from_counts(cls, counts, encoding):
        """From ``(channels, 256)`` histograms of codes."""
        counts = np.roll(np.asarray(counts, dtype=np.int64), 128, axis=-1)  # code c at c + 128
        if counts.ndim != 2 or counts.shape[1] != 256 or (counts.sum(axis=1) == 0).any():
            raise ArgumentError("per-channel statistics need a non-empty histogram of 256 bins "
                                f"per channel, got shape {counts.shape}")
        values = (np.asarray(encoding.codebook, dtype=np.float64) if encoding.is_codebook
                  else np.arange(256, dtype=np.float64) - 128 + encoding.offset)
        total = counts.sum(axis=1)
        mean = counts @ values / total
        variance = (counts * (values[None, :] - mean[:, None]) ** 2).sum(axis=1) / total
        std = np.sqrt(variance)
        std[std == 0] = 1.0  # a constant channel: centred only
        return cls(tuple(float(m) for m in mean), tuple(float(s) for s in std))

    @property
    def channels(self):
        return len(self.mean)
