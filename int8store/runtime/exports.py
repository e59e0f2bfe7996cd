"""Public names imported on first use: :func:`lazy_exports`.

``import int8store`` (and ``int8store.training`` ...) imports none of the
modules its names come from, so that the tools that build no graph (the
``int8store`` command, the readers) never import a graph library, and the
library is set up by the first call that builds a graph. A module lists its
public names and where each lives; :func:`lazy_exports` gives it the
``__getattr__`` and ``__dir__`` (PEP 562) that import each on first use.
Names that moved keep working for a release, with a ``DeprecationWarning``
that says where they live now.
"""

import warnings
from importlib import import_module

__all__ = ["lazy_exports", "MOVED_NAMES_GO_IN"]

#: The release without the names that moved (the README says so too).
MOVED_NAMES_GO_IN = "0.4"


def lazy_exports(namespace, names, moved=None, stacklevel=2):
    """``(__getattr__, __dir__)`` for the module ``namespace`` (its
    ``__name__``): ``names`` maps each public name to the module that
    defines it, relative to ``namespace``'s package (``".steps"``,
    ``"..backend.jax.run_setup"``);
    ``moved`` maps a name that lived here to the module it is now imported
    from (absolute, e.g. ``"int8store.training"``); ``stacklevel``: the
    warning's, as ``warnings.warn`` takes it (3 when the module's own
    ``__getattr__`` calls this one's)."""
    globals_of = import_module(namespace).__dict__
    moved = moved or {}

    def __getattr__(name):
        if name in names:
            value = getattr(import_module(names[name], _package(namespace)), name)
            globals_of[name] = value
            return value
        if name in moved:
            warnings.warn(f"{namespace}.{name} is now {moved[name]}.{name}; the old name goes "
                          f"in {MOVED_NAMES_GO_IN}", DeprecationWarning, stacklevel=stacklevel)
            return getattr(import_module(moved[name]), name)
        raise AttributeError(f"module {namespace!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(globals_of) | set(names))

    return __getattr__, __dir__


def _package(namespace):
    """The package relative names are resolved against: a package is its own."""
    module = import_module(namespace)
    return namespace if hasattr(module, "__path__") else namespace.rpartition(".")[0]
