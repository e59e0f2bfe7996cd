"""The training split's statistics a normalization needs, computed once and
carried to every split: the mean of ``normalize="dataset"``, the
per-channel means and deviations of ``"channel"`` and ``"standard"``.

Both come from histograms of the training split's int8 codes
(:mod:`.histogram`): counted from codes in memory, or read from a store's
manifest, which records them, so that a store streamed or spread over
devices is not read through to normalize it.

And whether the values a normalization leaves are on the scale the
tutorials' learning rates were chosen for (:func:`scale_notice`).
"""

import numpy as np

from .channels import PER_CHANNEL, ChannelStatistics
from .histogram import channel_means, channel_stds, mean_of_code_counts

__all__ = ["normalization_statistics", "scale_notice"]

# A training split whose values' mean or deviation goes beyond this is not
# pixels in [0, 1), nor standardized (whose outliers may be far larger:
# a rare stroke in a z-scored pixel): raw pixel values, 16-bit levels.
_LARGEST_SCALED = 4


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


def scale_notice(encoding, origin, normalize, code_counts):
    """One line saying that ``origin``'s training images hold values far
    from [0, 1) under ``normalize="unit"`` (a codebook of their own values:
    uint16 levels, floats from 0 to 255), which train at chance with the
    tutorials' learning rates; None where they do not. ``code_counts()``
    gives the training split's histogram (asked only for a codebook whose
    values reach beyond the bound), or None (then every value counts once)."""
    if encoding is None or not encoding.is_codebook or normalize != "unit":
        return None  # (the other normalizations scale a codebook to about [-1, 1])
    values = encoding.table(np.float64)
    if np.abs(values).max() <= _LARGEST_SCALED:
        return None
    counts = code_counts()
    counts = np.ones((1, 256), np.int64) if counts is None else np.asarray(counts)[None]
    mean, deviation = channel_means(counts, encoding)[0], channel_stds(counts, encoding)[0]
    if abs(mean) <= _LARGEST_SCALED and deviation <= _LARGEST_SCALED:
        return None
    used = values[np.roll(counts[0], 128) > 0]  # (bin of code c at c + 128)
    return (f"int8store: the images of {origin} hold values {used.min():g} to "
            f"{used.max():g}, not pixels in [0, 1) as the tutorials' learning rates expect: "
            "normalize='standard' (--normalize standard) centres and scales them")
