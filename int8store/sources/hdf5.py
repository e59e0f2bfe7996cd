"""HDF5 files: an int8store store (already encoded), or any HDF5 file whose
datasets hold images and labels (found as in :mod:`.named_arrays`)."""

import numpy as np

from ..errors import SourceFormatError
from . import SourceData, Split
from .named_arrays import choose_keys

__all__ = ["read_hdf5", "read_store"]


def read_hdf5(path, keys=None):
    """Splits of an HDF5 file; a store's are returned as int8 codes."""
    from ..store import is_store

    if is_store(path):
        return read_store(path)
    import h5py

    try:
        with h5py.File(path, "r") as f:
            shapes = {}
            f.visititems(lambda name, item: shapes.__setitem__(name, item.shape)
                         if isinstance(item, h5py.Dataset) else None)
            chosen = choose_keys(shapes, path, keys)
            splits = {}
            for split, (image_key, label_key) in chosen.items():
                images, labels = f[image_key], f[label_key][()]
                splits[split] = Split(
                    split, labels, images.shape[1:], images.dtype,
                    _dataset_reader(path, image_key), f"{path}:{image_key}")
                if labels.ndim == 1 and images.shape[0] != len(labels):
                    raise SourceFormatError(
                        f"{path}: {image_key!r} holds {images.shape[0]} images but "
                        f"{label_key!r} holds {len(labels)} labels; they must match")
    except OSError as error:
        raise SourceFormatError(f"{path}: not a readable HDF5 file ({error})") from error
    return SourceData(splits, origin=str(path))


def _dataset_reader(path, key):
    """Chunks of an HDF5 dataset, read a slice at a time from a fresh handle."""
    def read_chunks(rows):
        import h5py
        with h5py.File(path, "r") as f:
            data = f[key]
            for start in range(0, data.shape[0], rows):
                yield data[start:start + rows]
    return read_chunks


def read_store(path, verify=True):
    """A store's splits as int8 codes with their encoding (checksums checked)."""
    from ..store import open_store

    store = open_store(path, verify=False)  # the splits are checked as they are read
    splits = {}
    for name in store.splits:
        codes, labels = store.read_split(name, verify=verify)
        splits[name] = Split.from_arrays(name, codes, labels, f"{path} ({name})")
    return SourceData(splits, origin=str(path), label_names=store.label_names,
                      encoding=store.encoding)
