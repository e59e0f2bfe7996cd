"""A start-up hook for the Aesara stack: the first ``import aesara`` gets a
BLAS. On its own, that import probes for one through ``numpy.distutils``:
on Python 3.12, where numpy 1.26 ships no ``numpy.distutils``, the import
fails, and a program that imports Aesara before int8store (every classic
tutorial) dies before int8store runs a line; on 3.10 and 3.11 the probe finds
no BLAS on most machines and prints eleven lines of numpy's warnings, false
ones, since int8store gives Aesara the wheel's OpenBLAS anyway.

``scripts/setup.sh`` installs this hook in the virtual environment it creates
for the Aesara stack, and nowhere else: a one-line
``int8store-aesara-blas.pth`` in that environment's ``site-packages``, which
Python reads at start-up. The hook waits for the first ``import aesara`` and
runs just that import with int8store's BLAS in ``$AESARA_FLAGS`` (the value
int8store gives Aesara anyway; a ``blas__ldflags`` the user set wins), then
restores the variable: nothing else in the process or its children changes,
and nothing outside that environment is touched.

In an environment of one's own (``pip install int8store[aesara]``), the same
file is written by ``python -m int8store.backend.setup.aesara_hook`` (what
``scripts/setup.sh`` runs; a module the hook never imports):
without it, on Python 3.12, a classic tutorial stops at its first line,
``import theano`` (Aesara), whatever its loader.
"""

import importlib.abc
import importlib.util
import sys

__all__ = ["install"]


class _BlasForAesara(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "aesara":
            return None
        sys.meta_path.remove(self)  # once: the real finders do the rest
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _ImportWithBlas(spec.loader)
        return spec


class _ImportWithBlas(importlib.abc.Loader):
    """The package's own loader, running the import with a BLAS in the flags."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        from .setup.blas import blas_in_aesara_flags

        module.__loader__ = module.__spec__.loader = self._loader
        with blas_in_aesara_flags():
            self._loader.exec_module(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def install():
    """Watch for the first ``import aesara`` (no-op once it was imported)."""
    if "aesara" in sys.modules:
        return
    if not any(isinstance(finder, _BlasForAesara) for finder in sys.meta_path):
        sys.meta_path.insert(0, _BlasForAesara())
