"""A tutorial's checkpoint: its best model's parameters in an ``.npz``,
replaced at each improvement as the classic tutorials did, but never left
half-written (an interrupt or a full disk keeps the previous one whole)."""

import numpy as np

from .atomic import atomic_output

__all__ = ["save_checkpoint"]


def save_checkpoint(path, *arrays, **named):
    """``numpy.savez(path, *arrays, **named)``, written beside ``path`` and
    renamed over it when complete. As with ``numpy.savez``, ``.npz`` is
    added to a name without it. Returns the path written."""
    path = str(path)
    if not path.endswith(".npz"):
        path += ".npz"
    with atomic_output(path, force=True) as temporary:
        with open(temporary, "wb") as f:
            np.savez(f, *arrays, **named)
    return path
