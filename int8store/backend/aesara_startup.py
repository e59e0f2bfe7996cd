"""A start-up hook for the Aesara stack on Python 3.12, where ``import aesara``
fails on its own: its BLAS probe needs ``numpy.distutils``, which numpy 1.26
does not ship for Python 3.12. A program that imports Aesara before int8store
(every classic tutorial) would die before int8store runs a line.

``scripts/setup.sh`` installs this hook in the virtual environment it creates
for the Aesara stack on Python 3.12, and nowhere else: a one-line
``int8store-aesara-blas.pth`` in that environment's ``site-packages``, which
Python reads at start-up. The hook waits for the first ``import aesara`` and
runs just that import with int8store's BLAS in ``$AESARA_FLAGS`` (the value
int8store gives Aesara anyway; a ``blas__ldflags`` the user set wins), then
restores the variable: nothing else in the process or its children changes,
and nothing outside that environment is touched.
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
        from .blas import blas_in_aesara_flags

        module.__loader__ = module.__spec__.loader = self._loader
        with blas_in_aesara_flags():
            self._loader.exec_module(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def install():
    """Watch for the first ``import aesara`` (no-op where Aesara imports
    without help, or it was already imported)."""
    # By the version, not by looking for numpy.distutils: that would import
    # numpy in every process the environment starts.
    if "aesara" in sys.modules or sys.version_info < (3, 12):
        return
    if not any(isinstance(finder, _BlasForAesara) for finder in sys.meta_path):
        sys.meta_path.insert(0, _BlasForAesara())
