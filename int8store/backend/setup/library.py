"""The graph library, chosen and set up once: :func:`set_up`.

1. the library is chosen (:mod:`.selection`): ``$INT8STORE_BACKEND``
   (``pytensor`` or ``aesara``) if set, else the one the program already
   imported, else the one installed (PyTensor first);
2. it gets a BLAS (the bundled OpenBLAS, :mod:`.blas`) unless the user chose
   one;
3. Aesara defects int8store depends on are corrected (:mod:`.fixes`), on the
   versions that have them.

Nothing outside the package changes: ``os.environ`` is as it was after the
call.
"""

import threading

from .selection import chosen_backend

__all__ = ["set_up"]

_lock = threading.RLock()
_library = None


def set_up():
    """Steps 1 to 3 above, once; returns the library's module."""
    global _library
    with _lock:
        if _library is None:
            from . import blas

            name = chosen_backend()
            library = blas.import_with_blas(name)
            if name == "aesara":
                from . import fixes
                fixes.apply_all()
            _library = library
    return _library
