"""The one door between int8store and its graph library: PyTensor or Aesara.

Everything that touches PyTensor, Aesara or JAX lives in this subpackage: which
library runs, its BLAS set-up, corrections of Aesara defects (:mod:`.setup`), convolution and pooling for PyTensor, which has
none (:mod:`.pytensor_nnet`), the modes (:mod:`.modes`), the static-size
minibatch op (:mod:`.minibatch`), placing data on JAX's device
(:mod:`.device`), int8store's JAX conversions (:mod:`.jax_ops`) and its ops
in PyTensor's Numba mode (:mod:`.numba_ops`).

``import int8store`` imports none of it. :func:`activate` is the one entry
point: the first call that builds a graph makes it (or a user, explicitly),
and it does its work once, whether or not the library was imported first:

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

May import: :mod:`int8store.errors`, :mod:`int8store.runtime`,
:mod:`int8store.codes`, :mod:`int8store.order`.
"""

from .ops.nnet import conv2d, pool_2d
from .setup.activation import activate, is_active
from .setup.library import set_up
from .setup.selection import BACKENDS, chosen_backend

__all__ = ["activate", "is_active", "set_up", "tensor_library", "conv2d", "pool_2d",
           "BACKENDS", "chosen_backend"]


def tensor_library():
    """The module int8store builds graphs with, set up: ``pytensor`` or ``aesara``.

    What the bundled tutorials import as the classic ones imported Theano.

    Examples
    --------
    >>> tensor_library().__name__ in ("pytensor", "aesara")
    True
    """
    return activate().lib
