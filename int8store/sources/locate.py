"""Where a dataset named by a bare file name is looked for: where the classic
tutorials' ``load_data`` looked.

The classic code used the name as a path when the file was in the working
folder, else ``../data/NAME`` beside the tutorial's own file (its
``__file__``). A user who replaces the tutorial's ``load_data`` with
int8store's keeps that: "beside the tutorial" is beside the file of the code
that called int8store.
"""

import sys
from pathlib import Path

__all__ = ["caller_file", "classic_candidates"]


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
    name itself (the working folder), then ``../data/NAME`` beside ``caller``.
    Only bare names (no folder part) get the second place."""
    path = Path(dataset)
    candidates = [path]
    if caller and path.parent == Path("."):
        candidates.append(Path(caller).resolve().parent.parent / "data" / path.name)
    return candidates
