"""Which graph library int8store builds with: PyTensor or Aesara.

The two cannot share an environment (PyTensor needs numpy >= 2, Aesara 2.9.4,
the last Aesara, numpy < 2), so usually one is installed and that is the
choice. Where a program has already imported one, that one (a classic
tutorial imports Aesara before int8store); ``$INT8STORE_BACKEND`` forces it.
Nothing is imported here: the choice is made from ``sys.modules`` and the
installed packages.
"""

import importlib.util
import os
import sys

from ...errors import ArgumentError, MissingDependencyError

__all__ = ["BACKENDS", "ENVIRONMENT_VARIABLE", "chosen_backend"]

#: The graph libraries int8store runs on, in order of preference.
BACKENDS = ("pytensor", "aesara")
#: The environment variable that forces one (read, never written).
ENVIRONMENT_VARIABLE = "INT8STORE_BACKEND"

_INSTALL = {
    "pytensor": "pip install 'int8store[pytensor]' (Python 3.11-3.13, numpy 2)",
    "aesara": "pip install 'int8store[aesara]' (Python 3.10-3.12, numpy < 2)",
}


def chosen_backend():
    """``"pytensor"`` or ``"aesara"``, as the module docstring says.

    Examples
    --------
    >>> chosen_backend() in BACKENDS
    True
    """
    forced = os.environ.get(ENVIRONMENT_VARIABLE, "").strip().lower()
    if forced:
        if forced not in BACKENDS:
            raise ArgumentError(f"{ENVIRONMENT_VARIABLE}={forced!r} is not one of "
                                f"{', '.join(BACKENDS)}")
        if forced not in sys.modules and not _installed(forced):
            raise MissingDependencyError(
                f"{ENVIRONMENT_VARIABLE}={forced} but {forced} is not installed: "
                f"{_INSTALL[forced]}")
        return forced
    for name in BACKENDS:
        if name in sys.modules:
            return name
    for name in BACKENDS:
        if _installed(name):
            return name
    raise MissingDependencyError(
        "int8store builds its graphs with PyTensor or Aesara, and neither is installed: "
        f"{_INSTALL['pytensor']}, or {_INSTALL['aesara']}")


def _installed(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
