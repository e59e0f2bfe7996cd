"""The one door between int8store and Aesara.

Everything that touches Aesara or JAX lives in this subpackage: the BLAS set-up
(:mod:`.blas`), corrections of Aesara defects (:mod:`.fixes`), the modes
(:mod:`.modes`), the static-size minibatch op (:mod:`.minibatch`), placing data
on JAX's device (:mod:`.device`) and int8store's JAX conversions
(:mod:`.jax_ops`).

``import int8store`` imports none of it. :func:`activate` is the one entry
point: the first call that builds a graph makes it (or a user, explicitly),
and it does its work once, whether or not Aesara was imported first:

1. Aesara gets a BLAS (the bundled OpenBLAS) unless the user chose one;
2. Aesara defects int8store depends on are corrected, on the versions that
   have them;

and it returns :mod:`int8store.backend.api`, the names the rest of the
package builds graphs with. Nothing outside the package changes:
``os.environ`` is as it was after the call, and Aesara's plain modes are left
as Aesara ships them (int8store's JAX conversions apply in int8store's JAX
mode only).
"""

import threading
from importlib import import_module

__all__ = ["activate", "is_active", "set_up"]

_lock = threading.RLock()
_set_up = False
_api = None


def set_up():
    """Steps 1 and 2 above, once."""
    global _set_up
    with _lock:
        if not _set_up:
            from . import blas, fixes

            blas.import_aesara_with_blas()
            fixes.apply_all()
            _set_up = True


def activate():
    """Set up Aesara for int8store (once) and return :mod:`int8store.backend.api`.

    Examples
    --------
    >>> api = activate()
    >>> api.aesara.config.blas__ldflags != ""
    True
    """
    global _api
    if _api is None:
        with _lock:
            set_up()
            _api = import_module(".api", __name__)
    return _api


def is_active():
    """Whether :func:`activate` has run in this process."""
    return _api is not None
