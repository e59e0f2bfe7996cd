"""Opening files that may be gzipped, with damage reported against the file;
opening a tar archive as one stream and checking what a tar member announces
before it is read (a zip member:
:func:`int8store.runtime.limits.check_zip_member`).

Gzip data is decompressed by ISA-L (the ``isal`` package, a dependency), which
reads MNIST about twice as fast as the standard library's gzip: decompression
is most of the time of loading mnist.pkl.gz or the IDX files.
"""

import gzip
import os
import tarfile
import zlib
from contextlib import contextmanager

from isal import igzip, isal_zlib

from ..codes.precoded import DataEnded
from ..errors import SourceFormatError, located, quoted
from ..runtime.limits import check_in_file
from ..runtime.words import counted

__all__ = ["open_maybe_gzipped", "is_gzipped", "check_tar_member", "check_member_name",
           "is_compressed_tar", "checked_tar_members", "open_tar_stream", "TAR_ERRORS",
           "unreadable_tar"]

_GZIP_MAGIC = b"\x1f\x8b"

# What gzip raises for truncated or corrupt data.
GZIP_ERRORS = (EOFError, zlib.error, isal_zlib.error, gzip.BadGzipFile)
# What reading a damaged tar archive as a stream raises.
TAR_ERRORS = (tarfile.TarError, OSError) + GZIP_ERRORS


def is_gzipped(path):
    with open(path, "rb") as f:
        return f.read(2) == _GZIP_MAGIC


@contextmanager
def open_maybe_gzipped(path):
    """A binary file object on ``path``'s content, gunzipped if it is a gzip file.

    Damaged gzip data raises :class:`SourceFormatError` naming the file.
    """
    opener = igzip.open if is_gzipped(path) else open
    try:
        with opener(path, "rb") as f:
            yield f
    except DataEnded as error:  # (what was gunzipped ends early: the gzip data is whole)
        raise SourceFormatError(str(error)) from error
    except GZIP_ERRORS as error:
        raise SourceFormatError(f"{path}: damaged gzip data ({describe_gzip_error(error)})") from error


def describe_gzip_error(error):
    if isinstance(error, EOFError):
        return "the file is truncated: it ends before the end of the compressed stream"
    return str(error) or type(error).__name__


@contextmanager
def open_tar_stream(path):
    """The tar archive ``path`` read in one pass (tarfile's stream mode),
    compressed or not. Gzip is decompressed by ISA-L here too: faster, and
    clear of the standard library's stream-mode bugs with a gzip header's
    extra field (python/cpython#107396: an AttributeError for a damaged one
    before 3.11.5, Debian 12's 3.11.2 among them; #107398: a sound one
    unreadable before 3.12.8 and 3.13.1)."""
    opener = igzip.open if is_gzipped(path) else open
    with opener(path, "rb") as stream, tarfile.open(fileobj=stream, mode="r|*",
                                                    tarinfo=_EndNoted) as archive:
        yield archive


class _EndNoted(tarfile.TarInfo):
    """A tar header that notes on the archive why its reading ended: tarfile
    ends an archive quietly at a header cut short, missing or damaged after
    the first, as at the zero block that ends a whole one, so a tar cut at
    or inside a header would give fewer images without a word."""

    @classmethod
    def fromtarfile(cls, archive):
        try:
            return super().fromtarfile(archive)
        except tarfile.HeaderError as error:
            archive.int8store_end = (type(error), str(error))  # (not its frames)
            raise


def check_tar_ended(archive, path, count):
    """Refuse a tar stream whose reading stopped before its end-of-archive
    zero block (:class:`_EndNoted`), after ``count`` members."""
    kind, message = getattr(archive, "int8store_end", (tarfile.EOFHeaderError, ""))
    if kind is tarfile.EOFHeaderError:
        return
    why = "it ends" if kind in (tarfile.EmptyHeaderError, tarfile.TruncatedHeaderError) \
        else "it is damaged"
    raise SourceFormatError(
        f"{path}: the tar archive is cut short: {why} after {counted(count, 'member')}, where a "
        f"header or the end-of-archive block should be ({message}); copy it again")


def unreadable_tar(path, error):
    """The :class:`SourceFormatError` for ``error``, one of :data:`TAR_ERRORS`
    raised reading the tar archive ``path``."""
    if isinstance(error, tarfile.ReadError) and str(error) == "unexpected end of data":
        # (tarfile's words for a stream that ends inside a member's bytes)
        return SourceFormatError(f"{path}: the tar archive is cut short: it ends inside a "
                                 "member's data; copy it again")
    return SourceFormatError(f"{path}: not a readable tar archive ({quoted(error)})")


def checked_tar_members(archive, path, layout):
    """``(member, where)`` for each member of the tar stream ``archive``
    (opened ``"r|*"`` on ``path``), ``where`` naming it in messages, once its
    header is checked (:func:`check_tar_member`) and the regular files' sizes
    so far are within what the archive can hold: before the stream is read
    past it (or its bytes unpacked)."""
    stored, compressed = os.path.getsize(path), is_compressed_tar(path)
    total = count = 0
    for member in archive:
        where = located(path, member.name)
        check_tar_member(member, where, layout)
        if member.isfile():
            check_in_file(member.size, stored, "its header", where, compressed=compressed)
            total += member.size
            check_in_file(total, stored, f"the headers of its members up to {member.name}",
                          path, compressed=compressed, verb="announce")
        count += 1
        yield member, where
    check_tar_ended(archive, path, count)


def check_tar_member(member, where, layout):
    """Refuse a tar member that is a link, a sparse file, or named with an
    absolute path or '..' (``layout``: how the archive should name its files,
    for the message)."""
    check_member_name(member.name, where, layout)
    if member.issym() or member.islnk():
        raise SourceFormatError(
            f"{where}: is a {'symbolic' if member.issym() else 'hard'} link to "
            f"{member.linkname}; int8store reads regular files only (archive copies instead)")
    if member.issparse():
        raise SourceFormatError(f"{where}: is a sparse file; int8store reads regular files only")


def check_member_name(name, where, layout):
    """Refuse an archive member named with an absolute path, '..' or a
    backslash, or with no name (zipfile cuts a name at its first NUL byte)."""
    if not name:
        raise SourceFormatError(f"{where.removesuffix(':')}: a member with an empty name; {layout}")
    parts = name.split("/")
    if name.startswith("/") or ".." in parts:
        raise SourceFormatError(f"{where}: a member named with an absolute path or '..'; {layout}")
    if "\\" in name:
        raise SourceFormatError(f"{where}: a member named with a backslash, as a Windows tool "
                                f"writes paths; {layout}, with '/'")


def is_compressed_tar(path):
    """Whether a tar archive is gzip, bzip2 or xz compressed (by its magic bytes)."""
    with open(path, "rb") as f:
        head = f.read(6)
    return head.startswith((b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00"))
