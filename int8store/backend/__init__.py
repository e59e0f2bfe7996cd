"""The one door between int8store and its graph library: PyTensor or Aesara.

Everything that touches PyTensor, Aesara or JAX lives in this subpackage, in
three rooms, by what a reader comes for:

* :mod:`.setup`: which library runs, its BLAS, corrections of its defects,
  and :func:`activate`, the one entry point, which returns the library's
  names (:mod:`.setup.api`);
* :mod:`.ops`: int8store's own graph ops and their numpy, C and Numba
  implementations (the static-size minibatch, gathered rows, a shard's order
  in C, conv2d and pool_2d for PyTensor, which has none);
* :mod:`.jax`: JAX mode (int8store's conversions, its own dispatcher), data
  placed on one device or several.

A room imports from the rooms before it in that list, never after; this
module, the door, from all of them. (:mod:`.aesara_startup`, the start-up
hook ``scripts/setup.sh`` installs for the Aesara stack, stays beside the
door: environments set up earlier name it at this path.)

``import int8store`` imports none of the libraries. :func:`activate` is the
one entry point: the first call that builds a graph makes it (or a user,
explicitly), and it does its work once, whether or not the library was
imported first:

1. the library is chosen: ``$INT8STORE_BACKEND`` (``pytensor`` or ``aesara``)
   if set, else the one the program already imported, else the one installed
   (PyTensor first);
2. it gets a BLAS (the bundled OpenBLAS) unless the user chose one;
3. Aesara defects int8store depends on are corrected, on the versions that
   have them;

and it returns :mod:`int8store.backend.setup.api`, the names the rest of the
package builds graphs with. Nothing outside the package changes:
``os.environ`` is as it was after the call, and the library's plain modes
are left as it ships them (int8store's JAX conversions apply in int8store's
JAX mode only; PyTensor's Numba dispatch learns int8store's own op classes
and nothing else).

Here: :func:`activate`, :func:`tensor_library`, :func:`conv2d` and
:func:`pool_2d` (Theano's, on either library), :func:`function_mode` and
:func:`c_mode`.

May import: :mod:`int8store.errors`, :mod:`int8store.runtime`,
:mod:`int8store.codes`, :mod:`int8store.order`.
"""

from ..codes.vocabulary import MODES, check_mode
from ..runtime.exports import lazy_exports
from .setup.activation import activate, is_active
from .setup.c_mode import c_mode
from .setup.library import set_up
from .setup.selection import BACKENDS, chosen_backend

__all__ = ["activate", "is_active", "set_up", "tensor_library", "conv2d", "pool_2d",
           "function_mode", "c_mode", "MODES", "BACKENDS", "chosen_backend"]

_C_MODE = None

# conv2d and pool_2d (the ops, numpy) are imported on first use: the start-up
# hook beside this door runs in every interpreter of an Aesara environment,
# before the program's first line, and must import nothing but the door
# (numpy imported then would ignore the OPENBLAS_NUM_THREADS a program sets
# before its own `import numpy`).
__getattr__, __dir__ = lazy_exports(__name__, {"conv2d": ".ops.nnet", "pool_2d": ".ops.nnet"})


def tensor_library():
    """The module int8store builds graphs with, set up: ``pytensor`` or ``aesara``.

    What the bundled tutorials import as the classic ones imported Theano.

    Examples
    --------
    >>> tensor_library().__name__ in ("pytensor", "aesara")
    True
    """
    return activate().lib


def function_mode(mode):
    """The ``mode=`` argument of ``function`` (PyTensor's or Aesara's) for an
    int8store mode (:data:`MODES`): ``"c"``, the library's C backend on the
    CPU, or ``"jax"``, int8store's JAX mode (:mod:`.jax.mode`) on JAX's
    default device (a GPU when JAX sees one).

    ``"c"`` is Aesara's default mode; on PyTensor, whose default is now
    Numba, it is PyTensor's C backend (:func:`.setup.c_mode.c_mode`):
    int8store's convolution and pooling are numpy-and-BLAS ops, which Numba
    could run only in its slow object mode.

    Examples
    --------
    >>> function_mode("c") is None or function_mode("c").linker is not None
    True
    """
    global _C_MODE
    if check_mode(mode) == "jax":
        from .jax.mode import jax_mode
        return jax_mode()
    api = activate()
    if api.NAME == "aesara":
        return None
    if _C_MODE is None:
        _C_MODE = c_mode(api)
    return _C_MODE
