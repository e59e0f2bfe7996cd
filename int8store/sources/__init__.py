"""Readers of image archives. Each returns a :class:`SourceData`: numpy arrays
per split, validated, with the file named in every error.

:func:`read_source` picks the reader for what ``load_data`` was given.
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from ..errors import DatasetNotFoundError, SourceFormatError

__all__ = ["SourceData", "read_source"]


@dataclass
class SourceData:
    """What a reader found.

    Attributes
    ----------
    splits : dict
        ``{split name: (images, labels)}`` in the archive's order; images have
        shape ``(N, ...)``.
    origin : str
        Where the data came from (a path or a dataset name), for messages.
    divisor : int, optional
        For integer pixels, the divisor of their unit scale (see
        :func:`~int8store.quantize`); None keeps the default.
    image_shape : tuple, optional
        Shape of one image when the images are stored as flat vectors.
    """

    splits: dict
    origin: str
    divisor: Optional[int] = None
    image_shape: Optional[tuple] = None
    extra: dict = field(default_factory=dict)

    def check_counts(self):
        """Every split has as many labels as images, or a SourceFormatError."""
        for name, (images, labels) in self.splits.items():
            if len(images) != len(labels):
                raise SourceFormatError(
                    f"{self.origin}: split {name!r} has {len(images)} images but "
                    f"{len(labels)} labels; every image needs exactly one label"
                )
        return self


def read_source(dataset, cache_dir=None):
    """Read ``dataset``: ``"digits"``, ``"mnist"``, or a path (see ``load_data``)."""
    from . import digits, idx, mnist, npz, pickled

    if isinstance(dataset, str) and dataset == "digits":
        return digits.read_digits()
    if isinstance(dataset, str) and dataset == "mnist":
        return mnist.read_mnist(cache_dir)
    path = Path(dataset)
    if not path.exists():
        if path.name == "mnist.pkl.gz":
            # The classic tutorials' default argument: use the cache, as they did.
            return mnist.read_mnist(cache_dir)
        raise DatasetNotFoundError(
            f"{path}: no such file or folder. load_data takes 'digits', 'mnist', "
            "a path to mnist.pkl.gz, a folder of MNIST IDX files, or an .npz file"
        )
    if path.is_dir():
        return idx.read_idx_folder(path)
    name = path.name.lower()
    if name.endswith((".pkl.gz", ".pkl")):
        return pickled.read_mnist_pickle(path)
    if name.endswith(".npz"):
        return npz.read_npz(path)
    raise SourceFormatError(
        f"{path}: unknown kind of file; expected mnist.pkl.gz (or .pkl), .npz, "
        "or a folder holding the four MNIST IDX files"
    )


def as_images(array, origin, what="images"):
    """``array`` checked to be numeric with shape (N, ...), N >= 0."""
    array = np.asarray(array)
    if array.ndim < 2:
        raise SourceFormatError(f"{origin}: {what} must have shape (N, ...), got {array.shape}")
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise SourceFormatError(f"{origin}: {what} have dtype {array.dtype}, expected numbers")
    return array
