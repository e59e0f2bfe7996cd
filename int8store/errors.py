"""The library's exceptions.

Every error int8store raises derives from :class:`Int8StoreError` and from the
builtin that fits, so callers can catch either (``except ValueError`` keeps
working for code written against the classic tutorials). A message quotes
another library's error through :func:`quoted`, shows a value read from a
file through :func:`shown` and names an archive's member through
:func:`located`, so that it stays one short line whatever the file holds
(:func:`named_by`: the dataset an error is about, where it does not say).
"""

import os
import reprlib
from contextlib import contextmanager

__all__ = [
    "Int8StoreError",
    "ArgumentError",
    "EncodingError",
    "SourceFormatError",
    "SourceReadError",
    "UnsafePickleError",
    "DatasetNotFoundError",
    "DownloadError",
    "OutputExistsError",
    "OutputError",
    "SizeLimitError",
    "StoreFormatError",
    "StoreChecksumError",
    "MissingDependencyError",
    "MinibatchIndexError",
    "StreamError",
    "HelperStartError",
]


class Int8StoreError(Exception):
    """Base class of every error raised by int8store."""


class ArgumentError(Int8StoreError, ValueError):
    """A parameter has a value outside what it accepts."""


class EncodingError(Int8StoreError, ValueError):
    """Data cannot be stored as int8 codes without losing information."""


class SourceFormatError(Int8StoreError, ValueError):
    """A data file is malformed: wrong magic number, truncated, inconsistent."""


class UnsafePickleError(SourceFormatError):
    """A pickle asked for something other than numpy arrays and tuples."""


class SourceReadError(Int8StoreError, OSError):
    """A data file or folder cannot be read: a permission denied, say."""


class DatasetNotFoundError(Int8StoreError, FileNotFoundError):
    """A dataset is neither where it was looked for nor downloadable."""


class DownloadError(Int8StoreError, OSError):
    """A download failed: no mirror answered, or the file did not verify."""


class OutputExistsError(Int8StoreError, FileExistsError):
    """An output file exists and replacing it was not asked for."""


class OutputError(Int8StoreError, OSError):
    """An output cannot be written: unwritable folder, full disk, a folder in the way."""


class SizeLimitError(SourceFormatError):
    """A size announced by a file is beyond what the file can hold or what the
    memory ceiling allows (see :mod:`int8store.runtime.limits`)."""


class StoreFormatError(SourceFormatError):
    """An int8store file is not one, is incomplete, or is of a newer format."""


class StoreChecksumError(StoreFormatError):
    """A dataset of an int8store file does not match its recorded checksum."""


class MissingDependencyError(Int8StoreError, ImportError):
    """An optional dependency (JAX) is needed and not installed."""


class MinibatchIndexError(ArgumentError, IndexError):
    """A minibatch index outside the data."""


class StreamError(Int8StoreError, RuntimeError):
    """A shard of a streamed split could not be read or checked; the message
    names the split and the shard."""


class HelperStartError(Int8StoreError, RuntimeError):
    """One of int8store's helper processes ended, or did not answer, before
    it was ready to serve: the environment's fault (a missing module, a limit
    such as ``ulimit -v``), not the input's; the message names the input and
    the helper's own reason."""


def shortened(text, most=160):
    """``text`` on one line, what cannot be printed escaped (``\\n``), and
    at most ``most`` characters long, its middle left out."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(text) <= most:
        return text
    half = (most - 5) // 2
    return f"{text[:half]} ... {text[-half:]}"


def located(path, name):
    """``FILE:NAME``, how a message names a member of ``path`` (an archive's
    file, an HDF5 dataset): the name as the file gives it, :func:`shortened`."""
    return f"{path}:{shortened(name)}"


def quoted(error, most=160):
    """Another library's words for ``error`` as a message quotes them,
    :func:`shortened`: some quote the file's own bytes (zipfile's "File name
    in directory ... and header ... differ" holds up to 64 KiB of a damaged
    header)."""
    return shortened(str(error) or type(error).__name__, most)


def shown(value, most=100):
    """A value read from a file as a message shows it, of any size or depth:
    its ``repr`` with long numbers, strings and containers cut (reprlib, 3
    levels deep), :func:`shortened`."""
    return shortened(_SHOWN.repr(value), most)


def path_argument(value, name):
    """``value`` where it is a path (``str`` or ``os.PathLike``); else an
    :class:`ArgumentError` naming the argument ``name`` (pathlib's
    TypeError named neither it nor the call)."""
    if isinstance(value, (str, os.PathLike)):
        return value
    raise ArgumentError(f"{name}={shown(value)}: expected a path (a str or os.PathLike)")


_SHOWN = reprlib.Repr()
_SHOWN.maxlevel = 3
_SHOWN.maxstring = 80  # (reprlib's 30 cut "streamed in shards of 280 examples" where it differs)


@contextmanager
def named_by(dataset):
    """Errors about ``dataset`` (a path or a name; anything else: as they
    are) named by it, where they do not name it already (how its splits are
    laid over devices, found once it is read)."""
    try:
        yield
    except ArgumentError as error:
        origin = os.fspath(dataset) if isinstance(dataset, (str, os.PathLike)) else None
        if origin is None or str(error).startswith(origin):
            raise
        raise type(error)(f"{origin}: {error}") from None
