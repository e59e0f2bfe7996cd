"""What convolution and pooling share, library-free: pairs of ints for
their arguments, and the strided positions of a window along an axis.
"""

import numpy as np

__all__ = ["int_pair", "strided"]


def int_pair(value, what, minimum):
    """``value`` (an int, or a pair of ints, each at least ``minimum``) as a
    pair; ``what`` names it in the error."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (value, value)
    try:
        pair = tuple(value)
    except TypeError:
        pair = ()
    if (len(pair) != 2 or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in pair)
            or any(v < minimum for v in pair)):
        raise ValueError(f"{what} must be a pair of ints >= {minimum}, not {value!r}")
    return tuple(int(v) for v in pair)


def strided(offset, count, stride):
    """The slice of ``count`` positions from ``offset``, ``stride`` apart."""
    return slice(offset, offset + stride * (count - 1) + 1, stride)
