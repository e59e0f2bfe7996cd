"""IDX files (the MNIST format): a magic number, big-endian dimensions, raw data."""

import struct
from pathlib import Path

import numpy as np

from ..errors import DatasetNotFoundError, SourceFormatError
from . import SourceData
from ._files import read_maybe_gzipped

__all__ = ["read_idx", "parse_idx", "read_idx_folder", "MNIST_IDX_NAMES"]

# Type code (third byte of the magic number) -> big-endian dtype.
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}

#: The four MNIST files, by (split, role).
MNIST_IDX_NAMES = {
    ("train", "images"): "train-images-idx3-ubyte",
    ("train", "labels"): "train-labels-idx1-ubyte",
    ("test", "images"): "t10k-images-idx3-ubyte",
    ("test", "labels"): "t10k-labels-idx1-ubyte",
}


def parse_idx(data, origin="IDX data"):
    """The array held by the bytes of an IDX file."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_TYPES:
        raise SourceFormatError(
            f"{origin}: not an IDX file: magic number {data[:4].hex() or 'missing'} "
            "(expected two zero bytes, a type code 08-0e and the number of "
            "dimensions, e.g. 00000803 for images, 00000801 for labels)"
        )
    dtype = np.dtype(_IDX_TYPES[data[2]])
    ndim = data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise SourceFormatError(
            f"{origin}: truncated IDX header: {ndim} dimensions need {header} bytes, "
            f"the file has {len(data)}"
        )
    shape = struct.unpack(f">{ndim}I", data[4:header])
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    actual = len(data) - header
    if actual != expected:
        problem = "is truncated" if actual < expected else "has trailing bytes"
        raise SourceFormatError(
            f"{origin}: the header says shape {shape} ({expected} bytes of data) "
            f"but {actual} bytes follow it: the file {problem}"
        )
    array = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="), copy=False)


def read_idx(path):
    """The array in an IDX file, gzipped or not."""
    return parse_idx(read_maybe_gzipped(path), origin=str(path))


def find_idx_file(folder, stem):
    """The file in ``folder`` for ``stem`` (also ``.gz`` and the ``x.idx3`` spelling)."""
    dotted = stem.replace("-idx", ".idx")
    for name in (stem + ".gz", stem, dotted + ".gz", dotted):
        if (folder / name).is_file():
            return folder / name
    return None


def read_idx_folder(folder):
    """The MNIST IDX files in ``folder``: splits ``train`` and ``test``."""
    folder = Path(folder)
    found = {key: find_idx_file(folder, stem) for key, stem in MNIST_IDX_NAMES.items()}
    missing = [MNIST_IDX_NAMES[key] + "[.gz]" for key, path in found.items() if path is None]
    if missing:
        raise DatasetNotFoundError(
            f"{folder}: missing MNIST IDX files: {', '.join(missing)}. "
            "A folder given to load_data must hold all four (gzipped or not)."
        )
    splits = {}
    for split in ("train", "test"):
        images_path, labels_path = found[(split, "images")], found[(split, "labels")]
        images, labels = read_idx(images_path), read_idx(labels_path)
        if images.ndim < 2:
            raise SourceFormatError(
                f"{images_path}: expected images of shape (N, rows, cols), got {images.shape}"
            )
        if labels.ndim != 1:
            raise SourceFormatError(f"{labels_path}: expected 1-D labels, got {labels.shape}")
        if len(images) != len(labels):
            raise SourceFormatError(
                f"{images_path} holds {len(images)} images but {labels_path} holds "
                f"{len(labels)} labels; they must match"
            )
        splits[split] = (images, labels)
    return SourceData(splits, origin=str(folder))
