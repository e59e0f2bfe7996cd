"""The one place int8store imports its tensor library.

Everything else does ``from int8store.backend import aesara, at`` so that a
second backend (PyTensor, the maintained fork) can be added here without
touching the rest of the package.

Our graphs are float32 whatever the user's ``floatX`` is: :data:`FLOAT` names
that dtype, and :func:`float_constant` makes constants that do not upcast.
"""

import warnings

import numpy as np

# int8store/__init__.py has applied int8store's Aesara defaults (aesara_config)
# before this import: every import of a submodule runs the package first.
with warnings.catch_warnings():
    # Aesara's BLAS probe goes through numpy.distutils, which warns about its
    # own deprecation and about every library it fails to find; Aesara then
    # logs the one line that matters (which BLAS it uses).
    warnings.filterwarnings("ignore", category=UserWarning, module="numpy.distutils")
    warnings.filterwarnings("ignore", message=r"(?s).*numpy\.distutils", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message="msvccompiler is deprecated", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message="Use shutil.which instead of find_executable",
                            category=DeprecationWarning)  # Aesara's own, on Python 3.12
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

from .aesara_fixes import fix_corrmm_make_node

fix_corrmm_make_node()

__all__ = ["aesara", "at", "conv2d", "pool_2d", "softmax", "TensorVariable", "FLOAT",
           "float_constant", "shared"]

#: dtype of every float tensor int8store builds.
FLOAT = "float32"


def float_constant(value):
    """A float32 constant: a Python float would follow ``floatX`` and upcast."""
    return at.constant(np.asarray(value, dtype=FLOAT))


def shared(value, name=None, static_shape=True):
    """An Aesara shared variable holding ``value`` (not copied).

    With ``static_shape`` the variable's type records the array's shape, which
    lets the optimizer (and JAX tracing) reason about sizes.
    """
    shape = value.shape if static_shape else None
    return aesara.shared(value, name=name, borrow=True, shape=shape)
