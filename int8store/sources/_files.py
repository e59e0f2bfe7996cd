"""Opening files that may be gzipped, with damage reported against the file;
checking what a zip member announces before it is read.

Gzip data is decompressed by ISA-L (the ``isal`` package, a dependency), which
reads MNIST about twice as fast as the standard library's gzip: decompression
is most of the time of loading mnist.pkl.gz or the IDX files.
"""

import gzip
import zipfile
import zlib
from contextlib import contextmanager

from isal import igzip, isal_zlib

from ..errors import SourceFormatError
from ..runtime.limits import check_in_file, check_memory

__all__ = ["open_maybe_gzipped", "is_gzipped", "check_zip_member"]

_GZIP_MAGIC = b"\x1f\x8b"

# What gzip raises for truncated or corrupt data.
GZIP_ERRORS = (EOFError, zlib.error, isal_zlib.error, gzip.BadGzipFile)


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
    except GZIP_ERRORS as error:
        raise SourceFormatError(f"{path}: damaged gzip data ({describe_gzip_error(error)})") from error


def describe_gzip_error(error):
    if isinstance(error, EOFError):
        return "the file is truncated: it ends before the end of the compressed stream"
    return str(error) or type(error).__name__


def check_zip_member(info, where, archive_size):
    """Check the sizes a zip member announces before it is read (zipfile
    allocates the compressed size it is told before reading)."""
    check_in_file(info.compress_size, archive_size, "its compressed size", where)
    check_memory(info.file_size, "the member", where)
    check_in_file(info.file_size, info.compress_size, "the member", where,
                  compressed=info.compress_type != zipfile.ZIP_STORED)
