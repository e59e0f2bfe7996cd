"""``.npz`` archives: image and label arrays per split (see :mod:`.named_arrays`)."""

import zipfile

import numpy as np

from ..errors import SourceFormatError
from . import SourceData, Split
from .named_arrays import choose_keys

__all__ = ["read_npz"]

_READ_ERRORS = (zipfile.BadZipFile, OSError, EOFError, ValueError)


def read_npz(path, keys=None):
    """Splits of an ``.npz`` (keys like ``x_train, y_train, x_test, y_test``)."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            shapes = {key: _shape_of(archive, key) for key in archive.files}
            chosen = choose_keys(shapes, path, keys)
            splits = {}
            for split, (image_key, label_key) in chosen.items():
                images, labels = archive[image_key], archive[label_key]
                if labels.ndim != 1:
                    raise SourceFormatError(f"{path}: {label_key!r} must be 1-D, got {labels.shape}")
                splits[split] = Split.from_arrays(split, images, labels, str(path))
    except _READ_ERRORS as error:
        if isinstance(error, SourceFormatError):
            raise
        raise SourceFormatError(f"{path}: not a readable .npz archive ({error})") from error
    return SourceData(splits, origin=str(path))


def _shape_of(archive, key):
    """The shape of an array in the archive, from its header (not its data)."""
    headers = {(1, 0): np.lib.format.read_array_header_1_0,
               (2, 0): np.lib.format.read_array_header_2_0}
    with archive.zip.open(key + ".npy") as f:
        version = np.lib.format.read_magic(f)
        if version in headers:
            return headers[version](f)[0]
    return archive[key].shape
