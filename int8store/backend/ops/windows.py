"""What convolution and pooling share, library-free: pairs of ints for
their arguments, the strided positions of a window along an axis, and
pooling's arguments under Theano's old names (:func:`pool_arguments`).
"""

import numpy as np

from ...errors import ArgumentError

__all__ = ["int_pair", "strided", "pool_arguments"]


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


def pool_arguments(ws=None, stride=None, pad=(0, 0), ds=None, st=None, padding=None):
    """``(ws, stride, pad)`` of a ``pool_2d`` call that may use Theano's old
    names: ``ds`` for ``ws``, ``st`` for ``stride``, ``padding`` for ``pad``
    (the original ``convolutional_mlp.py`` calls ``pool_2d(input=...,
    ds=poolsize, ignore_border=True)``). As Aesara's ``pool_2d``: a name and
    its old name both given is refused, and so is no window; unlike it,
    without a DeprecationWarning (the classic tutorials would print one at
    each run).

    Examples
    --------
    >>> pool_arguments(ds=(2, 2), st=(1, 1))
    ((2, 2), (1, 1), (0, 0))
    """
    for name, value, old, old_value in (("ws", ws, "ds", ds), ("stride", stride, "st", st),
                                        ("pad", pad, "padding", padding)):
        unset = value is None or (name == "pad" and isinstance(value, (tuple, list))
                                  and tuple(value) == (0, 0))  # pad's default
        if old_value is not None and not unset:
            raise ArgumentError(f"pool_2d: {name}={value!r} and {old}={old_value!r}: {old} is "
                                f"Theano's name for {name}; give one of them")
    ws = ds if ds is not None else ws
    if ws is None:
        raise ArgumentError("pool_2d needs the window size: ws (or Theano's ds), e.g. ws=(2, 2)")
    return ws, st if st is not None else stride, padding if padding is not None else pad
