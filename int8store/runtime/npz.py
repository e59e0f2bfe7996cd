"""``.npz`` archives read within the limits: the one reader of ``.npz``
files in int8store, for data sources (:mod:`int8store.sources.npz`), run
checkpoints (:mod:`int8store.training.run`) and saved models
(:mod:`int8store.training.parameters`) alike.

``numpy.load`` allocates what a member's header announces before it reads
a byte: a header of shape (10**12,) float64 in an 80-byte member asks for
7.3 TiB, and an archive cut short is a ``zipfile.BadZipFile`` traceback.
Here opening an archive reads only each ``.npy`` member's header and checks
it: the sizes zip announces (:func:`~.limits.check_zip_member`), a header
numpy writes for arrays of numbers, and the shape and dtype it announces
against the bytes the member really holds. A caller then checks what a
member announces against what it expects (a model's parameter, a label
array) and only then reads it: whole, within the memory ceiling, or a few
rows at a time. Damage of any kind, zip's CRC-32 of each member included,
is one :class:`~int8store.SourceFormatError` naming the file and the member.

Examples
--------
>>> import numpy as np, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "a.npz")
>>> np.savez(path, w=np.arange(6.0).reshape(2, 3))
>>> archive = NpzArchive(path)
>>> member = archive["w"]
>>> member.shape, member.dtype.str, member.read().tolist()
((2, 3), '<f8', [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
"""

import math
import os
import zipfile
import zlib
from contextlib import contextmanager

import numpy as np

from ..errors import SourceFormatError, located, quoted, shortened, shown
from .files import cannot_read, check_regular_file
from .limits import check_memory, check_zip_member, counted_bytes

__all__ = ["NpzArchive", "NpzMember", "describe_array"]

_READ_ERRORS = (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error, NotImplementedError,
                RuntimeError)  # RuntimeError: an encrypted member
_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0,
            (2, 0): np.lib.format.read_array_header_2_0}
#: The most bytes read from a member at once (a whole array is read in such pieces).
_PIECE = 1 << 20


def describe_array(shape, dtype):
    """``(64, 10) float64``: how messages name an array's shape and dtype."""
    return f"{shown(tuple(shape))} {np.dtype(dtype)}"


class NpzArchive:
    """The ``.npy`` members of the ``.npz`` at ``path``, by key (the
    member's name less ``.npy``, as ``numpy.load`` names them), each header
    read and checked (:class:`NpzMember`); members of other names are left
    alone. Nothing but the headers is read.

    Raises :class:`~int8store.SourceFormatError` naming the file for an
    archive that cannot be read (cut short, damaged, not a zip), a member
    named twice, or a header that is not one numpy writes for numbers or
    that announces more or fewer bytes than the member holds.
    """

    def __init__(self, path):
        self.path = str(path)
        check_regular_file(path)
        try:
            size = os.path.getsize(path)
            with zipfile.ZipFile(path) as archive:
                listed = len(archive.infolist())
                announced = _announced_members(archive.fp, size)
                if announced is not None and announced != listed:
                    raise SourceFormatError(
                        f"{self.path}: its zip directory announces {announced:,} members and "
                        f"lists {listed:,}: it is damaged")
                members, others = {}, []
                for info in archive.infolist():
                    if not info.filename.endswith(".npy"):
                        others.append(info.filename)  # (np.load's raw bytes; or a damaged name)
                        continue
                    member = NpzMember(archive, info, self.path, size)
                    if member.key in members:
                        raise SourceFormatError(
                            f"{self.path}: holds two members named "
                            f"{shortened(info.filename)}: it is damaged or not what it claims "
                            "to be")
                    members[member.key] = member
        except _READ_ERRORS as error:
            if isinstance(error, SourceFormatError):
                raise
            if isinstance(error, PermissionError):
                raise cannot_read(self.path, error) from error
            raise SourceFormatError(f"{self.path}: not a readable .npz archive "
                                    f"({quoted(error)}): cut short, damaged, or not an .npz"
                                    ) from error
        self.members = members
        #: The names of members that are not arrays (no ``.npy`` suffix).
        self.others = others

    def __contains__(self, key):
        return key in self.members

    def __getitem__(self, key):
        return self.members[key]

    def keys(self):
        """The members' keys, in the archive's order."""
        return list(self.members)


class NpzMember:
    """One ``.npy`` member: its ``shape``, ``dtype``, ``fortran`` order and
    ``nbytes``, from its header, checked against the member's stored size;
    ``where`` names it in messages (``FILE:KEY.npy``)."""

    def __init__(self, archive, info, path, archive_size):
        self.path, self.name, self.key = path, info.filename, info.filename[:-4]
        self.where = located(path, info.filename)
        check_zip_member(info, self.where, archive_size, whole=False)
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
            raise SourceFormatError(f"{self.where}: not a readable .npy member "
                                    f"({quoted(error)})") from error
        if self.dtype.hasobject:
            raise SourceFormatError(f"{self.where}: holds Python objects, which are not read")
        if self.dtype.itemsize == 0 or self.dtype.subdtype is not None:
            # (np.load reads neither as announced: a subarray dtype adds axes
            # to the shape, and 10**18 rows of no bytes fit in an empty member)
            raise SourceFormatError(f"{self.where}: its header announces dtype {self.dtype}, "
                                    "which is not one of an array of numbers: it is damaged")
        if any(type(length) is not int for length in self.shape):  # ((True,) passes numpy's check)
            raise SourceFormatError(f"{self.where}: its header announces shape "
                                    f"{shown(self.shape)}, whose lengths are not all "
                                    "integers: it is damaged")
        if any(length < 0 for length in self.shape):
            raise SourceFormatError(f"{self.where}: its header announces shape "
                                    f"{shown(self.shape)}, a negative length: it is damaged")
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize
        if info.file_size != self.offset + self.nbytes:
            raise SourceFormatError(
                f"{self.where}: its header announces shape {shown(self.shape)} of {self.dtype} "
                f"({counted_bytes(self.nbytes)}) but the member holds "
                f"{info.file_size - self.offset:,}: it is damaged")

    def describe(self):
        """``(64, 10) float64``: the shape and dtype its header announces."""
        return describe_array(self.shape, self.dtype)

    def read(self):
        """The whole array (a writable one), once its size is within the
        memory ceiling."""
        check_memory(self.nbytes, f"array of shape {shown(self.shape)}", self.where)
        with self._data() as f:
            data = _read_exactly(f, self.nbytes, self.where)
        return np.frombuffer(data, self.dtype).reshape(self.shape,
                                                      order="F" if self.fortran else "C")

    def chunks(self, rows):
        """The array, ``rows`` along its first axis at a time (a
        Fortran-order array, whose rows are not contiguous, or an array of
        no axis is read whole)."""
        if self.fortran or len(self.shape) < 1:
            array = self.read()
            if not array.ndim:
                yield array
                return
            for start in range(0, len(array), rows):
                yield array[start:start + rows]
            return
        row_bytes = self.nbytes // self.shape[0] if self.shape[0] else 0
        check_memory(min(rows, self.shape[0]) * row_bytes, f"{min(rows, self.shape[0])} rows",
                     self.where)  # (the member is not held whole: a chunk of it is)
        with self._data() as f:
            for start in range(0, self.shape[0], rows):
                count = min(rows, self.shape[0] - start)
                data = _read_exactly(f, count * row_bytes, self.where)
                yield np.frombuffer(data, self.dtype).reshape((count,) + tuple(self.shape[1:]))

    @contextmanager
    def _data(self):
        """The member's data as a file: the archive opened anew (a split's
        images are read long after it was first opened), the header
        skipped; any read error raised as damage of the member."""
        try:
            with zipfile.ZipFile(self.path) as archive, archive.open(self.name) as f:
                f.read(self.offset)
                yield f
        except _READ_ERRORS as error:
            if isinstance(error, SourceFormatError):
                raise
            raise SourceFormatError(f"{self.where}: damaged in the archive "
                                    f"({quoted(error)})") from error


def _announced_members(file, size):
    """The member count that the zip's end-of-directory record announces (a
    damaged member comment or name length can swallow the entries after it,
    which zipfile then does not list), or None: a ZIP64 count, no record."""
    tail = min(size, 22 + 0xFFFF)  # (the record and its longest comment)
    file.seek(size - tail)
    data = file.read(tail)
    at = data.rfind(b"PK\x05\x06")
    if at < 0 or at + 22 > len(data):
        return None
    count = int.from_bytes(data[at + 10:at + 12], "little")
    return None if count == 0xFFFF else count


def _read_exactly(f, nbytes, where):
    """``nbytes`` of ``f`` in a new bytearray, read a piece at a time (no
    second copy of the whole); damage if it ends early."""
    data = bytearray(nbytes)
    view = memoryview(data)
    done = 0
    while done < nbytes:
        got = f.readinto(view[done:done + _PIECE])
        if not got:
            raise SourceFormatError(f"{where}: ends early: the archive is damaged")
        done += got
    return data
