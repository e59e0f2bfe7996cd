"""``.npz`` archives: image and label arrays per split (see :mod:`.named_arrays`).

Only each member's ``.npy`` header is read up front; what it announces is
checked against the member's stored size (:mod:`int8store.runtime.limits`). Labels are
then read whole, images streamed a chunk of rows at a time (a Fortran-order
array, whose rows are not contiguous, is read whole within the memory ceiling).
"""

import math
import os
import zipfile
import zlib

import numpy as np

from ..errors import SourceFormatError
from ..runtime.limits import check_memory
from . import SourceData, Split
from ._files import check_zip_member
from .named_arrays import choose_keys

__all__ = ["read_npz"]

_READ_ERRORS = (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error, NotImplementedError,
                RuntimeError)  # RuntimeError: an encrypted member
_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0,
            (2, 0): np.lib.format.read_array_header_2_0}


class _Member:
    """One ``.npy`` member: its header, checked against its stored size."""

    def __init__(self, archive, info, path):
        self.name, self.where = info.filename, f"{path}:{info.filename}"
        check_zip_member(info, self.where, os.path.getsize(path))
        try:
            with archive.open(info) as f:
                version = np.lib.format.read_magic(f)
                if version not in _HEADERS:
                    raise SourceFormatError(f"{self.where}: .npy format version {version} is not read")
                self.shape, self.fortran, self.dtype = _HEADERS[version](f, max_header_size=1 << 16)
                self.offset = f.tell()
        except _READ_ERRORS as error:
            if isinstance(error, SourceFormatError):
                raise
            raise SourceFormatError(f"{self.where}: not a readable .npy member ({error})") from error
        if self.dtype.hasobject:
            raise SourceFormatError(f"{self.where}: holds Python objects, which are not read")
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize
        if info.file_size != self.offset + self.nbytes:
            raise SourceFormatError(
                f"{self.where}: its header announces shape {self.shape} ({self.nbytes:,} bytes) "
                f"but the member holds {info.file_size - self.offset:,}: it is damaged")

    def read_all(self, path):
        check_memory(self.nbytes, f"array of shape {self.shape}", self.where)
        return next(self.chunks(path, max(1, self.shape[0] if self.shape else 1), whole=True))

    def chunks(self, path, rows, whole=False):
        """The array, ``rows`` along the first axis at a time."""
        try:
            with zipfile.ZipFile(path) as archive, archive.open(self.name) as f:
                f.read(self.offset)
                if whole or self.fortran or len(self.shape) < 1:
                    check_memory(self.nbytes, f"array of shape {self.shape}", self.where)
                    array = _array(_read_exactly(f, self.nbytes, self.where), self)
                    if whole:
                        yield array
                        return
                    for start in range(0, len(array), rows):
                        yield array[start:start + rows]
                    return
                row_bytes = self.nbytes // self.shape[0] if self.shape[0] else 0
                for start in range(0, self.shape[0], rows):
                    count = min(rows, self.shape[0] - start)
                    data = _read_exactly(f, count * row_bytes, self.where)
                    yield np.frombuffer(data, self.dtype).reshape((count,) + tuple(self.shape[1:]))
        except _READ_ERRORS as error:
            if isinstance(error, SourceFormatError):
                raise
            raise SourceFormatError(f"{self.where}: damaged in the archive ({error})") from error


def _read_exactly(f, nbytes, where):
    data = f.read(nbytes)
    if len(data) != nbytes:
        raise SourceFormatError(f"{where}: ends early: the archive is damaged")
    return data


def _array(data, member):
    order = "F" if member.fortran else "C"
    return np.frombuffer(data, member.dtype).reshape(member.shape, order=order)


def read_npz(path, keys=None):
    """Splits of an ``.npz`` (keys like ``x_train, y_train, x_test, y_test``)."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = {info.filename[:-4]: _Member(archive, info, path)
                       for info in archive.infolist() if info.filename.endswith(".npy")}
    except _READ_ERRORS as error:
        if isinstance(error, SourceFormatError):
            raise
        raise SourceFormatError(f"{path}: not a readable .npz archive ({error})") from error
    chosen = choose_keys({key: m.shape for key, m in members.items()}, path, keys)
    splits = {}
    for split, (image_key, label_key) in chosen.items():
        images, labels = members[image_key], members[label_key].read_all(path)
        if labels.ndim != 1:
            raise SourceFormatError(f"{path}: {label_key!r} must be 1-D, got {labels.shape}")
        if len(images.shape) < 2 or not (np.issubdtype(images.dtype, np.integer)
                                         or np.issubdtype(images.dtype, np.floating)):
            raise SourceFormatError(f"{path}: {image_key!r} must be numbers of shape (N, ...), "
                                    f"got {images.dtype} {images.shape}")
        if images.shape[0] != len(labels):
            raise SourceFormatError(
                f"{path}: split {split!r} has {images.shape[0]} images but {len(labels)} labels; "
                "every image needs exactly one label")
        splits[split] = Split(split, labels, images.shape[1:], images.dtype,
                              lambda rows, m=images: m.chunks(path, rows), str(path))
    return SourceData(splits, origin=str(path))
