"""The names int8store builds graphs with, on PyTensor or Aesara: get them with
``int8store.backend.activate()`` (importing this module sets the library up
first, through :func:`~.library.set_up`).

The two libraries share their graph model and most module paths
(``graph.basic``, ``tensor.subtensor``, ``compile.mode``, ...): :func:`module`
imports one of those from whichever runs. What differs is named here once:
the tensor variable class, and where ``clone_replace``, ``graph_inputs`` and
``Supervisor`` (the feature that keeps a graph's inputs from being
overwritten) live. (Convolution and pooling, Aesara's own or
int8store's ops on PyTensor, are :mod:`int8store.backend.ops.nnet`'s.)
"""

from importlib import import_module

import numpy as np

from .library import set_up

lib = set_up()  # configured (and corrected) before anything else here imports it
#: ``"pytensor"`` or ``"aesara"``.
NAME = lib.__name__
VERSION = lib.__version__

at = import_module(f"{NAME}.tensor")
function = lib.function
softmax = import_module(f"{NAME}.tensor.special").softmax

if NAME == "aesara":
    from aesara.compile.function.types import Supervisor
    from aesara.graph.basic import clone_replace, graph_inputs, io_toposort
    from aesara.tensor.var import TensorVariable
else:
    from pytensor.graph.replace import clone_replace
    from pytensor.tensor.variable import TensorVariable
    try:  # (moved there from graph.basic in PyTensor 3.x)
        from pytensor.graph.traversal import graph_inputs, io_toposort
    except ImportError:
        from pytensor.graph.basic import graph_inputs, io_toposort
    try:  # (from compile.function.types in PyTensor 3.x)
        from pytensor.compile.aliasing import Supervisor
    except ImportError:
        from pytensor.compile.function.types import Supervisor


__all__ = ["lib", "NAME", "VERSION", "at", "function", "softmax", "clone_replace", "graph_inputs",
           "io_toposort", "Supervisor",
           "TensorVariable", "module", "float_dtype", "float_constant", "shared",
           "FLOAT_DTYPES", "describe"]

#: The float dtypes int8store's views can have.
FLOAT_DTYPES = ("float32", "float64")


def module(path):
    """The running library's module ``path`` (e.g. ``"graph.basic"``)."""
    return import_module(f"{NAME}.{path}")


def describe():
    """One line naming the library and the versions that set the figures:
    ``"PyTensor 3.3.7, numpy 2.5.5, JAX 0.12.0 (cpu)"``."""
    import sys
    parts = [f"{'PyTensor' if NAME == 'pytensor' else 'Aesara'} {VERSION}",
             f"numpy {np.__version__}", f"Python {sys.version.split()[0]}"]
    jax = sys.modules.get("jax")
    if jax is not None:
        parts.append(f"JAX {jax.__version__} ({jax.default_backend()})")
    return ", ".join(parts)


def float_dtype(dtype=None):
    """``dtype`` checked, or the library's ``floatX`` when it is None."""
    from ...errors import ArgumentError

    chosen = str(np.dtype(dtype)) if dtype is not None else lib.config.floatX
    if chosen not in FLOAT_DTYPES:
        given = (f"dtype={dtype!r}" if dtype is not None else
                 f"floatX={chosen} ({NAME}'s, which the float views follow without dtype=)")
        raise ArgumentError(f"{given}: int8store's float views are float32 or float64")
    return chosen


def float_constant(value, dtype):
    """A constant of ``dtype``: a Python float would follow ``floatX`` and may upcast."""
    return at.constant(np.asarray(value, dtype=dtype))


def shared(value, name=None, static_shape=True):
    """A shared variable holding ``value`` (not copied).

    With ``static_shape`` the variable's type records the array's shape, which
    lets the optimizer (and JAX tracing) reason about sizes.
    """
    shape = value.shape if static_shape else None
    return lib.shared(value, name=name, borrow=True, shape=shape)
