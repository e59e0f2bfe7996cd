"""IDX files (the MNIST format): a magic number, big-endian dimensions, raw data.

Images are streamed in chunks (gzipped or not), so a converter never holds a
whole file; the size the header announces is checked against what follows.
"""

import math
import re
import struct
from pathlib import Path

import numpy as np

from ..errors import DatasetNotFoundError, SourceFormatError, shown
from ..runtime.limits import check_in_file, check_memory, counted_bytes
from . import SourceData, Split
from ._files import is_gzipped, open_maybe_gzipped

__all__ = ["IdxFile", "parse_idx", "read_idx", "read_idx_folder", "read_idx_files",
           "idx_folder_files", "holds_idx_files", "looks_like_idx", "MNIST_IDX_NAMES"]

# Type code (third byte of the magic number) -> big-endian dtype.
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}

#: The four MNIST files, by (split, role).
MNIST_IDX_NAMES = {
    ("train", "images"): "train-images-idx3-ubyte",
    ("train", "labels"): "train-labels-idx1-ubyte",
    ("test", "images"): "t10k-images-idx3-ubyte",
    ("test", "labels"): "t10k-labels-idx1-ubyte",
}

_SPLIT_WORDS = {"train": "train", "t10k": "test", "test": "test", "valid": "valid",
                "validation": "valid", "val": "valid"}
_ROLE_WORDS = {"images": "images", "idx3": "images", "labels": "labels", "idx1": "labels"}
_BLOCK = 1 << 22


def _parse_magic(magic, origin):
    if len(magic) < 4 or magic[0] != 0 or magic[1] != 0 or magic[2] not in _IDX_TYPES:
        raise SourceFormatError(
            f"{origin}: not an IDX file: magic number {magic[:4].hex() or 'missing'} "
            "(expected two zero bytes, a type code 08-0e and the number of "
            "dimensions, e.g. 00000803 for images, 00000801 for labels)"
        )
    return np.dtype(_IDX_TYPES[magic[2]]), magic[3]


def _parse_dims(dims, ndim, origin, available):
    if len(dims) < 4 * ndim:
        raise SourceFormatError(
            f"{origin}: truncated IDX header: {ndim} dimensions need {4 + 4 * ndim} bytes, "
            f"the file has {available}"
        )
    return struct.unpack(f">{ndim}I", dims[:4 * ndim])


def _size_error(origin, shape, expected, actual):
    problem = "is truncated" if actual < expected else "has trailing bytes"
    return SourceFormatError(
        f"{origin}: the header says shape {shown(tuple(shape))} "
        f"({counted_bytes(expected)} of data) but {actual} bytes follow it: the file {problem}"
    )


def parse_idx(data, origin="IDX data"):
    """The array held by the bytes of an IDX file."""
    dtype, ndim = _parse_magic(data[:4], origin)
    shape = _parse_dims(data[4:], ndim, origin, len(data))
    header = 4 + 4 * ndim
    expected = math.prod(shape) * dtype.itemsize
    if len(data) - header != expected:
        raise _size_error(origin, shape, expected, len(data) - header)
    array = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="), copy=False)


class IdxFile:
    """An IDX file's header, and its data read in chunks along the first axis."""

    def __init__(self, path):
        self.path = Path(path)
        with open_maybe_gzipped(self.path) as f:
            magic = f.read(4)
            self.stored_dtype, ndim = _parse_magic(magic, self.path)
            dims = f.read(4 * ndim)
            self.shape = _parse_dims(dims, ndim, self.path, 4 + len(dims))
        if not self.shape:
            raise SourceFormatError(f"{self.path}: an IDX file of zero dimensions holds no data")
        if 0 in self.shape[1:]:
            raise SourceFormatError(f"{self.path}: the header announces shape {shown(self.shape)}: "
                                    f"an image (or label) dimension of 0 (axis "
                                    f"{self.shape.index(0, 1)})")
        check_memory(math.prod(self.shape[1:]) * self.stored_dtype.itemsize,
                     f"one entry of shape {shown(self.shape[1:])}", self.path)
        self.header_size = 4 + 4 * ndim
        self.dtype = self.stored_dtype.newbyteorder("=")
        # What the header announces must be in the file, before anything is allocated.
        stored = self.path.stat().st_size
        if is_gzipped(self.path):
            check_in_file(self.data_size, stored, f"its header (shape {shown(self.shape)})",
                          self.path, compressed=True)
        elif stored - self.header_size != self.data_size:
            raise _size_error(self.path, self.shape, self.data_size, stored - self.header_size)

    @property
    def data_size(self):
        return math.prod(self.shape) * self.dtype.itemsize

    def chunks(self, rows):
        """Arrays of up to ``rows`` entries along the first axis, in order."""
        row_bytes = self.data_size // self.shape[0] if self.shape[0] else 0
        read = 0
        with open_maybe_gzipped(self.path) as f:
            f.read(self.header_size)
            for start in range(0, self.shape[0], rows):
                count = min(rows, self.shape[0] - start)
                data = f.read(count * row_bytes)
                read += len(data)
                if len(data) != count * row_bytes:
                    raise _size_error(self.path, self.shape, self.data_size, read)
                chunk = np.frombuffer(data, dtype=self.stored_dtype).reshape((count,) + tuple(self.shape[1:]))
                yield chunk.astype(self.dtype, copy=False)
            trailing = sum(len(block) for block in iter(lambda: f.read(_BLOCK), b""))
            if trailing:
                raise _size_error(self.path, self.shape, self.data_size, read + trailing)

    def read(self):
        """The whole array."""
        check_memory(self.data_size, f"its array of shape {shown(self.shape)}", self.path)
        if not self.shape[0]:
            return np.zeros(self.shape, dtype=self.dtype)
        return np.concatenate(list(self.chunks(max(1, self.shape[0]))))


def read_idx(path):
    """The array in an IDX file, gzipped or not."""
    return IdxFile(path).read()


def split_and_role(path):
    """``("train", "images")`` for ``train-images-idx3-ubyte.gz``, etc.; None if unclear."""
    words = re.split(r"[-_.]+", Path(path).name.lower())
    splits = {_SPLIT_WORDS[w] for w in words if w in _SPLIT_WORDS}
    roles = {_ROLE_WORDS[w] for w in words if w in _ROLE_WORDS}
    if len(splits) == 1 and len(roles) == 1:
        return splits.pop(), roles.pop()
    return None


def looks_like_idx(path):
    return "idx" in Path(path).name.lower() and split_and_role(path) is not None


def holds_idx_files(folder):
    return any(looks_like_idx(p) for p in Path(folder).iterdir() if p.is_file())


def read_idx_files(paths):
    """Splits from IDX files paired by name (``train``/``t10k``, ``images``/``labels``)."""
    pairs = {}
    for path in paths:
        key = split_and_role(path)
        if key is None:
            raise SourceFormatError(
                f"{path}: cannot tell the split and role of this IDX file from its name; "
                "expected names like train-images-idx3-ubyte.gz or t10k-labels-idx1-ubyte"
            )
        if key in pairs:
            raise SourceFormatError(f"{path} and {pairs[key]} are both the {key[0]} {key[1]}")
        pairs[key] = Path(path)
    splits = {}
    for split in ("train", "valid", "test"):
        images_path, labels_path = pairs.get((split, "images")), pairs.get((split, "labels"))
        if images_path is None and labels_path is None:
            continue
        if images_path is None or labels_path is None:
            present = images_path or labels_path
            raise DatasetNotFoundError(
                f"{present}: the {split} split has "
                f"{'labels' if images_path is None else 'images'} but no "
                f"{'images' if images_path is None else 'labels'} file"
            )
        images, labels = IdxFile(images_path), read_idx(labels_path)
        if len(images.shape) < 2:
            raise SourceFormatError(
                f"{images_path}: expected images of shape (N, rows, cols), got {images.shape}"
            )
        if labels.ndim != 1:
            raise SourceFormatError(f"{labels_path}: expected 1-D labels, got {labels.shape}")
        if images.shape[0] != len(labels):
            raise SourceFormatError(
                f"{images_path} holds {images.shape[0]} images but {labels_path} holds "
                f"{len(labels)} labels; they must match"
            )
        splits[split] = Split(split, labels, images.shape[1:], images.dtype, images.chunks,
                              str(images_path))
    if not splits:
        raise SourceFormatError(f"{', '.join(map(str, paths))}: no IDX images and labels found")
    return SourceData(splits, origin=", ".join(str(p) for p in paths), keeps_order=True)


def find_idx_file(folder, stem):
    """The file in ``folder`` for ``stem`` (also ``.gz`` and the ``x.idx3``
    spelling), or None. Where the folder holds more than one (a file beside
    its ``.gz``: ``gunzip -k``, a second download), they must hold the same
    data, and the uncompressed one is read: of two that differ, neither is
    chosen behind the user's back (the images of one were paired with the
    labels of another)."""
    found = idx_file_spellings(folder, stem)
    for other in found[1:]:
        if not _same_data(found[0], other):
            raise SourceFormatError(
                f"{folder}: holds both {found[0].name} and {other.name}, and they do not hold "
                "the same data: move the one that is not to be read out of the folder")
    return found[0] if found else None


def idx_file_spellings(folder, stem):
    """The files in ``folder`` named for ``stem``: plain or ``.gz``, and ``x.idx3`` for ``x-idx3``."""
    dotted = stem.replace("-idx", ".idx")
    return [folder / name for name in (stem, stem + ".gz", dotted, dotted + ".gz")
            if (folder / name).is_file()]


def idx_folder_files(folder):
    """The files :func:`read_idx_folder` reads in ``folder``."""
    return [path for stem in MNIST_IDX_NAMES.values()
            for path in idx_file_spellings(Path(folder), stem)]


def _same_data(first, second):
    """Whether two IDX files hold the same bytes once unzipped."""
    with open_maybe_gzipped(first) as a, open_maybe_gzipped(second) as b:
        while True:
            block = a.read(_BLOCK)
            if block != b.read(_BLOCK):
                return False
            if not block:
                return True


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
    source = read_idx_files(list(found.values()))
    source.origin = str(folder)
    return source

