"""Validation of class labels: 1-D class numbers (0, 1, ...) that fit int32."""

import numpy as np

from ..errors import EncodingError

__all__ = ["as_int32_labels"]

_INT32 = np.iinfo(np.int32)


def as_int32_labels(labels, name="labels"):
    """Return ``labels`` as a 1-D int32 array, or raise if that would change them.

    Integral floats (as in some archives) are accepted; fractions, NaN,
    negative numbers (class numbers start at 0; a negative label would index
    the class probabilities from the end) and values beyond int32 are
    refused, never truncated or wrapped.

    Examples
    --------
    >>> as_int32_labels([3, 1, 4]).dtype
    dtype('int32')
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise EncodingError(f"{name}: labels must be 1-D, got shape {labels.shape}")
    if labels.size == 0:
        return labels.astype(np.int32)
    if np.issubdtype(labels.dtype, np.floating):
        if not np.isfinite(labels).all() or not (labels == np.rint(labels)).all():
            raise EncodingError(f"{name}: labels must be integers, got non-integral floats")
    elif not (np.issubdtype(labels.dtype, np.integer) or labels.dtype == np.bool_):
        raise EncodingError(f"{name}: labels must be integers, got dtype {labels.dtype}")
    low, high = labels.min(), labels.max()
    if low < 0:
        raise EncodingError(
            f"{name}: labels must be class numbers from 0; {int((labels < 0).sum())} are "
            f"negative (the smallest is {low}); renumber the classes first"
        )
    if low < _INT32.min or high > _INT32.max:
        raise EncodingError(
            f"{name}: range from {low} to {high}, which does not fit int32 "
            f"({_INT32.min}..{_INT32.max})"
        )
    return labels.astype(np.int32)
