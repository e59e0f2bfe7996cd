"""HDF5 files: an int8store store (already encoded), or any HDF5 file whose
datasets hold images and labels (found as in :mod:`.named_arrays`).

A plain HDF5 file is read only if it is self-contained and honest about its
sizes: external links, datasets with external storage (raw data in another
file, such as ``/etc/passwd``) and virtual datasets are refused, and each
dataset's shape is checked against the bytes it stores and its chunks
against :data:`MAX_CHUNK_BYTES` (:mod:`int8store.limits`).
"""

import math
import numpy as np

from ..errors import SourceFormatError
from ..limits import check_in_file, check_memory, describe_bytes
from . import SourceData, Split
from .named_arrays import choose_keys

__all__ = ["read_hdf5", "read_store", "MAX_CHUNK_BYTES"]

#: Largest HDF5 chunk read: each chunk is decompressed whole, whatever slice is asked.
MAX_CHUNK_BYTES = 256 << 20


def read_hdf5(path, keys=None):
    """Splits of an HDF5 file; a store's are returned as int8 codes."""
    from ..store import is_store, refuse_unreadable_store

    if is_store(path):
        return read_store(path)
    import h5py

    try:
        with h5py.File(path, "r") as f:
            refuse_unreadable_store(path, f.attrs)
            datasets = _datasets(f, path)
            chosen = choose_keys({name: d.shape for name, d in datasets.items()}, path, keys)
            splits = {}
            for split, (image_key, label_key) in chosen.items():
                images, labels = datasets[image_key], datasets[label_key]
                check_memory(labels.nbytes, f"dataset {label_key!r}", path)
                labels = labels[()]
                if labels.ndim == 1 and images.shape[0] != len(labels):
                    raise SourceFormatError(
                        f"{path}: {image_key!r} holds {images.shape[0]} images but "
                        f"{label_key!r} holds {len(labels)} labels; they must match")
                splits[split] = Split(
                    split, labels, images.shape[1:], images.dtype,
                    _dataset_reader(path, image_key), f"{path}:{image_key}")
    except (OSError, KeyError, ValueError, TypeError, RuntimeError) as error:
        if isinstance(error, SourceFormatError):
            raise
        raise SourceFormatError(f"{path}: not a readable HDF5 file ({error})") from error
    return SourceData(splits, origin=str(path))


def _datasets(f, path):
    """``{name: dataset}`` of every dataset reached by hard links, each checked;
    raises on external links, external storage and virtual datasets."""
    import h5py

    found = {}
    pending = [("", f)]  # a stack, not recursion: files can nest groups deeply
    while pending:
        prefix, group = pending.pop()
        for name in group:
            full = f"{prefix}{name}"
            link = group.get(name, getlink=True)
            if isinstance(link, h5py.ExternalLink):
                raise SourceFormatError(
                    f"{path}: {full!r} is an external link to {link.filename}:{link.path}; "
                    "int8store reads self-contained HDF5 files only")
            if isinstance(link, h5py.SoftLink):
                continue  # another name for an object inside the file: listed under its own
            item = group[name]
            if isinstance(item, h5py.Group):
                pending.append((f"{full}/", item))
            elif isinstance(item, h5py.Dataset):
                _check_dataset(item, full, path)
                found[full] = item
    return found


def _check_dataset(dataset, name, path):
    where = f"{path}:{name}"
    if dataset.is_virtual:
        raise SourceFormatError(f"{where}: is a virtual dataset (its data lies in other files); "
                                "int8store reads self-contained HDF5 files only")
    if dataset.external:
        raise SourceFormatError(
            f"{where}: keeps its data in external files ({', '.join(str(e[0]) for e in dataset.external)}); "
            "int8store reads self-contained HDF5 files only")
    if dataset.dtype.kind not in "biuf":
        return  # strings and other kinds are never read as images or labels
    nbytes = math.prod(dataset.shape or ()) * dataset.dtype.itemsize
    if dataset.chunks:
        chunk = math.prod(dataset.chunks) * dataset.dtype.itemsize
        if chunk > MAX_CHUNK_BYTES:
            raise SourceFormatError(
                f"{where}: its chunks hold {describe_bytes(chunk)} each, more than the "
                f"{describe_bytes(MAX_CHUNK_BYTES)} int8store decompresses at once; rechunk it "
                "(h5repack -l CHUNK=...)")
    check_in_file(nbytes, dataset.id.get_storage_size(), f"dataset of shape {dataset.shape}",
                  where, compressed=bool(dataset.compression or dataset.shuffle
                                         or dataset.scaleoffset or dataset.fletcher32))


def _dataset_reader(path, key):
    """Chunks of an HDF5 dataset, read a slice at a time from a fresh handle."""
    def read_chunks(rows):
        import h5py
        try:
            with h5py.File(path, "r") as f:
                data = f[key]
                for start in range(0, data.shape[0], rows):
                    yield data[start:start + rows]
        except (OSError, ValueError, RuntimeError) as error:
            raise SourceFormatError(f"{path}:{key}: cannot be read ({error})") from error
    return read_chunks


def read_store(path, verify=True):
    """A store's splits as int8 codes with their encoding, streamed a stored
    chunk at a time and checked as they are read."""
    from ..store import open_store

    store = open_store(path, verify=False)
    splits = {}
    for name in store.splits:
        def read_chunks(rows, name=name):  # the store's own chunks, about 1 MiB each
            return (codes for _, codes in store.chunks(name, verify))

        splits[name] = Split(name, store.read_labels(name, verify), store.image_shape, np.int8,
                             read_chunks, f"{path} ({name})")
    return SourceData(splits, origin=str(path), label_names=store.label_names,
                      encoding=store.encoding)
