"""Validation of class labels: 1-D class numbers (0, 1, ...) that fit int32."""

import numpy as np

from ..errors import EncodingError

__all__ = ["as_int32_labels", "class_count"]

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
    elif labels.dtype.kind not in "biu":  # (numpy counts timedelta64 an integer: no class)
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


# More class numbers than this that no label uses, and ten times more than
# those used, are taken for identifiers, not class numbers (:func:`class_count`).
_MOST_UNUSED_CLASSES = 1024


def class_count(label_arrays, origin):
    """How many outputs a classifier of these labels has: the largest label
    plus one (class numbers 0..K-1, as the classic tutorials take them).
    Refused where the labels look like identifiers instead: more than
    1,024 numbers below the largest that no label uses, and ten times more
    of them than are used (labels 0, 1,000,000, 2,000,000 made a model of
    7 GiB, which died allocating it).

    >>> class_count([np.array([0, 2, 1]), np.array([3])], "d.npz")
    4
    """
    used = np.unique(np.concatenate([np.unique(np.asarray(labels)) for labels in label_arrays]))
    if not used.size:
        return 0
    count = int(used[-1]) + 1
    unused = count - used.size
    if unused > _MOST_UNUSED_CLASSES and unused > 10 * used.size:
        raise EncodingError(
            f"{origin}: labels run to {int(used[-1]):,}, and only {used.size:,} distinct "
            f"values occur: a classifier takes labels as class numbers 0..K-1, one output "
            f"each, so this one would have {count:,} outputs; renumber the classes "
            f"0..{used.size - 1} first")
    return count
