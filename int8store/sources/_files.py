"""Opening files that may be gzipped, with damage reported against the file.

Gzip data is decompressed by ISA-L (the ``isal`` package, a dependency), which
reads MNIST about twice as fast as the standard library's gzip: decompression
is most of the time of loading mnist.pkl.gz or the IDX files.
"""

import gzip
import zlib
from contextlib import contextmanager

from isal import igzip, isal_zlib

from ..errors import SourceFormatError

__all__ = ["open_maybe_gzipped"]

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
