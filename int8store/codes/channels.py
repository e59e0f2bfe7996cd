"""Per-channel statistics of images stored channels-last, for the
``"channel"`` and ``"standard"`` normalizations: each channel's mean and
standard deviation of ``x`` (levels ``code + offset``, or codebook values),
in float64, from each channel's histogram of codes
(:func:`~int8store.codes.histogram.channel_code_counts`: exact counts, so
the statistics do not depend on how the split was read; a store records
them in its manifest)."""

from dataclasses import dataclass

import numpy as np

from .histogram import channel_code_counts, channel_means, channel_stds

__all__ = ["ChannelStatistics", "PER_CHANNEL"]

#: The normalizations that take each channel's statistics.
PER_CHANNEL = ("channel", "standard")


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
        """Of int8 ``codes`` (channels last) under ``encoding``."""
        return cls.from_counts(channel_code_counts(codes, channels), encoding)

    @classmethod
    def from_counts(cls, counts, encoding):
        """From ``(channels, 256)`` histograms of codes (a constant channel
        gets a deviation of 1: it is centred only)."""
        std = channel_stds(counts, encoding)
        std[std == 0] = 1.0
        return cls(tuple(float(m) for m in channel_means(counts, encoding)),
                   tuple(float(s) for s in std))

    @property
    def channels(self):
        return len(self.mean)
