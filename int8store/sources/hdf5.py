"""HDF5 files: an int8store store (already encoded), or any HDF5 file whose
datasets hold images and labels (found as in :mod:`.named_arrays`).

A store's manifest is checked before HDF5 sees it, so a store is read here.
Any other HDF5 file is parsed in a process of its own, held to a time and a
memory limit (:mod:`.hdf5_process`), and read only if it is self-contained
and honest about its sizes: external links, datasets with external storage
(raw data in another file, such as ``/etc/passwd``) and virtual datasets are
refused, each dataset's shape is checked against the bytes it stores, and
its chunks against :data:`~.hdf5_process.MAX_CHUNK_BYTES`.
"""

import numpy as np

from ..errors import SourceFormatError
from ..runtime.files import check_regular_file
from . import SourceData, Split
from .hdf5_process import Hdf5Process

__all__ = ["read_hdf5", "read_store"]


def read_hdf5(path, keys=None, time_limit=None):
    """Splits of an HDF5 file; a store's are returned as int8 codes.

    ``time_limit``: seconds the HDF5 library may take on one request (listing
    the datasets and reading the labels; reading a chunk of images) for a
    file that is not a store; by default :data:`~.hdf5_process.TIME_LIMIT`.
    """
    from ..store.reader import is_store

    check_regular_file(path)
    if is_store(path):
        return read_store(path)
    process = Hdf5Process(path, time_limit)
    splits = {}
    for split, images_key, image_shape, dtype, labels, labels_key in process.describe(keys):
        if labels.ndim != 1:  # (named here: Split names the images, its origin)
            raise SourceFormatError(f"{path}:{labels_key}: {split} labels must be 1-D, got "
                                    f"shape {labels.shape}")
        splits[split] = Split(split, labels, image_shape, dtype,
                              _dataset_reader(process, images_key, len(labels), image_shape, dtype),
                              f"{path}:{images_key}")
    return SourceData(splits, origin=str(path))


def _dataset_reader(process, key, count, image_shape, dtype):
    """Chunks of an HDF5 dataset, read by the process parsing the file."""
    def read_chunks(rows):
        for start in range(0, count, rows):
            yield process.read(key, start, min(start + rows, count), image_shape, dtype)
    return read_chunks


def read_store(path, verify=True):
    """A store's splits as int8 codes with their encoding, streamed a stored
    chunk at a time and checked as they are read."""
    from ..store.reader import open_store

    store = open_store(path, verify=False)
    splits = {}
    for name in store.splits:
        def read_chunks(rows, name=name):  # the store's own chunks, about 1 MiB each
            return (codes for _, codes in store.chunks(name, verify))

        splits[name] = Split(name, store.read_labels(name, verify), store.image_shape, np.int8,
                             read_chunks, f"{path} ({name})")
    return SourceData(splits, origin=str(path), label_names=store.label_names,
                      encoding=store.encoding, keeps_order=True)
