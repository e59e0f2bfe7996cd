"""Where a dataset named by a bare file name is looked for: where the classic
tutorials' ``load_data`` looked.

The classic code used the name as a path when the file was in the working
folder, else ``../data/NAME`` beside ``logistic_sgd.py``, the file that
defined ``load_data`` (its ``__file__``, symbolic links as they are). A user
who replaces the tutorial's ``load_data`` with int8store's keeps that:
int8store looks beside the file of the code that called it, then, where a
module ``logistic_sgd`` is loaded (the other tutorials, a user's script or
notebook import ``load_data`` from it), beside that module's file.
:func:`find_store` names the store found so, if it is one, and
:func:`recorded_source` what that store was converted from.
"""

import os
import sys
from pathlib import Path

__all__ = ["caller_file", "classic_candidates", "find_store", "recorded_source"]


def caller_file():
    """The ``__file__`` of the innermost caller outside int8store, or None
    (an interactive session)."""
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module != "int8store" and not module.startswith("int8store."):
            return frame.f_globals.get("__file__")
        frame = frame.f_back
    return None


def classic_candidates(dataset, caller=None):
    """The paths the classic tutorials tried for ``dataset``, in order: the
    name itself (the working folder), then ``../data/NAME`` beside ``caller``
    and beside a loaded ``logistic_sgd`` module's file. Only bare names (no
    folder part) get the other places."""
    path = Path(dataset)
    candidates = [path]
    if path.parent != Path("."):
        return candidates
    classic = getattr(sys.modules.get("logistic_sgd"), "__file__", None)
    for beside in filter(None, (caller, classic)):
        # The classic's os.path.join(dirname(__file__), "..", "data", NAME):
        # the file's folder as named, not its link's target (a tutorial linked
        # into a workspace reads the workspace's data), and a folder that ends
        # in ".." (python ../tutorial.py) gone up from, not stripped.
        candidate = Path(os.path.abspath(os.path.join(os.path.dirname(beside), os.pardir,
                                                      "data", path.name)))
        if candidate not in candidates:
            candidates.append(candidate)
    return candidates


def find_store(dataset, caller=None):
    """The path of the int8store store ``dataset`` names, or None: the file
    :func:`load_data` would read (the first of the places it looks that
    exists), when that file is a store."""
    from ..store.reader import is_store

    if not isinstance(dataset, (str, os.PathLike)):
        return None
    found = next((path for path in classic_candidates(dataset, caller or caller_file())
                  if path.is_file()), None)
    return found if found is not None and is_store(found) else None


def recorded_source(dataset, caller=None):
    """The source the store ``dataset`` names was converted from, as its
    manifest records it (``digits (scikit-learn)``, a path); None where
    ``dataset`` names no store."""
    from ..store.reader import open_store

    path = find_store(dataset, caller)
    return None if path is None else open_store(path, verify=False).provenance["source"]
