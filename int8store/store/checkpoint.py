"""A tutorial's checkpoint: its best model's parameters in an ``.npz``,
replaced at each improvement as the classic tutorials did, but never left
half-written (an interrupt or a full disk keeps the previous one whole)."""

import numpy as np

from .atomic import atomic_output

__all__ = ["save_checkpoint", "npz_path"]


def npz_path(path):
    """``path`` as ``numpy.savez`` writes it: ``.npz`` added to a name without it."""
    path = str(path)
    return path if path.endswith(".npz") else path + ".npz"


def save_checkpoint(path, *arrays, **named):
    """``numpy.savez(path, *arrays, **named)``, written beside ``path`` and
    renamed over it when complete (at :func:`npz_path`). Returns the path
    written."""
    path = npz_path(path)
    with atomic_output(path, force=True) as temporary:
        with open(temporary, "wb") as f:
            np.savez(f, *arrays, **named)
    return path
