"""The one entry point to the graph library: :func:`activate`.

The first call that builds a graph makes it (or a user, explicitly): it sets
the library up (:func:`~.library.set_up`: which library, its BLAS, fixes of
its defects) once, whether or not the library was imported first, and
returns :mod:`.api`, the names the rest of the package builds graphs with.
``import int8store`` makes no such call.
"""

import threading

__all__ = ["activate", "is_active"]

_lock = threading.Lock()
_api = None


def activate():
    """Set up the graph library for int8store (once) and return
    :mod:`int8store.backend.setup.api`.

    Examples
    --------
    >>> api = activate()
    >>> api.NAME in ("pytensor", "aesara") and api.lib.config.blas__ldflags != ""
    True
    """
    global _api
    if _api is None:
        with _lock:
            from . import api  # set up as it is imported

            _api = api
    return _api


def is_active():
    """Whether :func:`activate` has run in this process."""
    return _api is not None
