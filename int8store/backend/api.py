"""The Aesara names int8store builds graphs with: get them with
``int8store.backend.activate()``, which sets Aesara up first.

A second tensor library (PyTensor, the maintained fork) would be added here
and in :mod:`int8store.backend` without touching the rest of the package.
"""

import warnings

import numpy as np

from . import set_up

set_up()  # Aesara configured and corrected before anything else here imports it

with warnings.catch_warnings():
    # conv2d and pooling live only there in Aesara 2.9.4, its last release.
    for deprecated in ("The module `aesara.tensor.nnet` is deprecated",
                       "The module `aesara.tensor.signal` is deprecated",
                       "`aesara.tensor.nnet.basic.logsoftmax` has been moved"):
        warnings.filterwarnings("ignore", message=deprecated, category=DeprecationWarning)
    import aesara
    import aesara.tensor as at
    from aesara.tensor.nnet import conv2d
    from aesara.tensor.signal.pool import pool_2d
    from aesara.tensor.special import softmax
    from aesara.tensor.var import TensorVariable

__all__ = ["aesara", "at", "conv2d", "pool_2d", "softmax", "TensorVariable", "float_dtype",
           "float_constant", "shared", "FLOAT_DTYPES"]

#: The float dtypes int8store's views can have.
FLOAT_DTYPES = ("float32", "float64")


def float_dtype(dtype=None):
    """``dtype`` checked, or Aesara's ``floatX`` when it is None."""
    from ..errors import ArgumentError

    chosen = str(np.dtype(dtype)) if dtype is not None else aesara.config.floatX
    if chosen not in FLOAT_DTYPES:
        raise ArgumentError(f"dtype={dtype!r}: int8store's float views are float32 or float64")
    return chosen


def float_constant(value, dtype):
    """A constant of ``dtype``: a Python float would follow ``floatX`` and may upcast."""
    return at.constant(np.asarray(value, dtype=dtype))


def shared(value, name=None, static_shape=True):
    """An Aesara shared variable holding ``value`` (not copied).

    With ``static_shape`` the variable's type records the array's shape, which
    lets the optimizer (and JAX tracing) reason about sizes.
    """
    shape = value.shape if static_shape else None
    return aesara.shared(value, name=name, borrow=True, shape=shape)
