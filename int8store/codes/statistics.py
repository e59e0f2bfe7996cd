"""The training split's statistics a normalization needs, computed once and
carried to every split: the mean of ``normalize="dataset"``, the
per-channel means and deviations of ``"channel"`` and ``"standard"``.

Both come from histograms of the training split's int8 codes
(:mod:`.histogram`): counted from codes in memory, or read from a store's
manifest, which records them, so that a store streamed or spread over
devices is not read through to normalize it.
"""

from .channels import PER_CHANNEL, ChannelStatistics
from .histogram import mean_of_code_counts

__all__ = ["normalization_statistics"]


def normalization_statistics(normalize, encoding, code_counts, channel_code_counts):
    """``(dataset_mean, channel_statistics)`` for ``normalize``: each None
    where the normalization does not use it. ``code_counts()`` and
    ``channel_code_counts()`` give the training split's histograms
    (:func:`~.histogram.code_counts`, :func:`~.histogram.channel_code_counts`);
    each is asked only if needed."""
    mean = mean_of_code_counts(code_counts(), encoding) if normalize == "dataset" else None
    per_channel = (ChannelStatistics.from_counts(channel_code_counts(), encoding)
                   if normalize in PER_CHANNEL else None)
    return mean, per_channel
