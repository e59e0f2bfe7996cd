"""Ceilings on the sizes a file announces, checked before anything is allocated.

Headers announce sizes: an IDX file's dimensions, a pickle's array shapes, an
``.npz`` member's shape, an archive member's length, an HDF5 dataset's shape
and chunks. A damaged or hostile file can announce terabytes in a few bytes,
so every announced size is checked first:

* **against the file**: data stored as it is must be in the file; compressed
  data cannot come to more than :data:`MAX_COMPRESSION_RATIO` times its
  compressed size. That is deflate's own limit (zlib's documentation: 1032:1
  at best), and deflate is what gzip, zip, PNG and HDF5's gzip filter use;
  formats that could compress further (bzip2, xz) are held to it too.
* **against the memory ceiling**, for whatever must be in memory at once (a
  label array, a pickled array, one image, one HDF5 chunk): ``max_memory``
  (``--max-memory`` on the command line), by default half the machine's
  physical memory.

Streamed data (images read a chunk at a time) is held to the first check
only: its memory is bounded by the chunk size.
"""

import fractions
import numbers
import os
import re
import zipfile
from contextlib import contextmanager
from contextvars import ContextVar

from ..errors import ArgumentError, SizeLimitError

__all__ = ["MAX_COMPRESSION_RATIO", "max_memory", "memory_ceiling", "parse_size", "physical_memory",
           "check_in_file", "check_memory", "check_zip_member", "describe_bytes", "counted_bytes",
           "AnnouncedBytes", "limit_address_space"]

#: Most bytes one compressed byte may announce (deflate's best ratio is 1032:1).
MAX_COMPRESSION_RATIO = 1032

_ceiling = ContextVar("int8store_max_memory", default=None)
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "ki": 1024,
          "m": 1000 ** 2, "mb": 1000 ** 2, "mib": 1024 ** 2, "mi": 1024 ** 2,
          "g": 1000 ** 3, "gb": 1000 ** 3, "gib": 1024 ** 3, "gi": 1024 ** 3,
          "t": 1000 ** 4, "tb": 1000 ** 4, "tib": 1024 ** 4, "ti": 1024 ** 4}
# A number of bytes or of units: 4, 1.5, .5, 2e9, 1e+9 (no sign: sizes are positive).
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e\+?([0-9]+))?\s*([a-z]*)\s*")
# More than this many digits is not a size (1e400 bytes), and not worth an exact product.
_MOST_DIGITS = 40


def physical_memory():
    """This machine's physical memory in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def default_max_memory():
    """Half the physical memory (8 GiB where the system does not say)."""
    physical = physical_memory()
    return physical // 2 if physical is not None else 8 << 30


def max_memory():
    """The memory ceiling in force (see :func:`memory_ceiling`)."""
    return _ceiling.get() or default_max_memory()


@contextmanager
def memory_ceiling(nbytes=None):
    """Within the block, the memory ceiling is ``nbytes`` (a number or a size
    such as ``"2GiB"``; None keeps the one in force)."""
    token = _ceiling.set(parse_size(nbytes) if nbytes is not None else _ceiling.get())
    try:
        yield
    finally:
        _ceiling.reset(token)


def parse_size(size, what="max_memory"):
    """Bytes in ``size``: an int, or text such as ``1GiB`` (also ``1Gi``),
    ``512MB``, ``2e9``.

    >>> parse_size("1GiB"), parse_size("512 MB"), parse_size(4096), parse_size("1e+9")
    (1073741824, 512000000, 4096, 1000000000)
    """
    if isinstance(size, numbers.Integral) and not isinstance(size, bool):
        number = int(size)
    else:
        match = _SIZE.fullmatch(str(size).lower())
        if not match or match.group(3) not in _UNITS:
            raise ArgumentError(f"{what}={size!r}: expected a size such as 4GiB, 512MB or a "
                                "number of bytes")
        mantissa, exponent, unit = match.groups()
        exponent = int(exponent or 0)
        if exponent + len(mantissa.split(".")[0].lstrip("0")) > _MOST_DIGITS:
            raise ArgumentError(f"{what}={size!r}: a size too large to be one")
        # Exact (1.5GiB, 36893489T): a float would round a large product.
        exact = fractions.Fraction(mantissa) * 10 ** exponent * _UNITS[unit]
        number = int(exact)
    bare = not isinstance(size, numbers.Number) and not match.group(3)
    hint = f" (a bare number counts bytes: {size}GiB?)" if bare else ""
    if number < 1:
        raise ArgumentError(f"{what}={size!r}: expected a positive size"
                            + (hint if bare and 0 < float(match.group(1)) else ""))
    if not isinstance(size, numbers.Integral) and exact.denominator != 1 and _UNITS[unit] == 1:
        # (1.5 was read as 1 byte: a trial's 1.5 gigabytes)
        raise ArgumentError(f"{what}={size!r}: bytes are counted whole{hint}")
    return number


#: Beyond this, a size is said as a power of two (a header's product of
#: sizes: 2**31 in each of 200 dimensions is past a float's range, and its
#: digits would fill a screen).
_MOST_SAID_BYTES = 1 << 80


def describe_bytes(nbytes):
    """``1.5 GiB``, ``12.0 MiB``, ``512 bytes``; ``over 2**6200 bytes``."""
    if nbytes >= _MOST_SAID_BYTES:
        return f"over 2**{int(nbytes).bit_length() - 1} bytes"  # (a float's too)
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"


def counted_bytes(nbytes):
    """``1,234 bytes``, or :func:`describe_bytes`'s words for a size past counting."""
    return f"{nbytes:,} bytes" if nbytes < _MOST_SAID_BYTES else describe_bytes(nbytes)


def check_in_file(announced, stored, what, origin, compressed=False, verb="announces"):
    """Raise :class:`SizeLimitError` if ``announced`` bytes cannot come out of
    ``stored`` bytes of file (as they are, or ``compressed``), saying that
    ``what`` (``verb``) them."""
    limit = stored * MAX_COMPRESSION_RATIO if compressed else stored
    if announced > limit:
        how = (f"{stored:,} compressed bytes, which decompress to at most {limit:,}"
               if compressed else f"{stored:,} bytes")
        raise SizeLimitError(
            f"{origin}: {what} {verb} {counted_bytes(announced)} but the file holds {how}: "
            "it is damaged or not what it claims to be")


def check_memory(announced, what, origin):
    """Raise :class:`SizeLimitError` if ``announced`` bytes exceed the memory ceiling."""
    ceiling = max_memory()
    if announced > ceiling:
        raise SizeLimitError(
            f"{origin}: {what} needs {describe_bytes(announced)} in memory at once, more than "
            f"the ceiling of {describe_bytes(ceiling)} (max_memory=, command line "
            "--max-memory; by default half the physical memory)")


def check_zip_member(info, where, archive_size, whole=True):
    """Check the sizes a zip member (``info``, a :class:`zipfile.ZipInfo`)
    announces before it is read: zipfile allocates the compressed size it
    is told before reading. ``whole``: the member is read at once, so its
    size is held to the memory ceiling too (an ``.npy`` member, read a
    chunk at a time, checks what it reads at once itself)."""
    check_in_file(info.compress_size, archive_size, "its compressed size", where)
    if whole:
        check_memory(info.file_size, "the member", where)
    check_in_file(info.file_size, info.compress_size, "the member", where,
                  compressed=info.compress_type != zipfile.ZIP_STORED)


class AnnouncedBytes:
    """A running total of the bytes a file announces as it is parsed (a
    pickle's strings, one after another), held to both ceilings each time it
    grows, before the bytes are allocated."""

    def __init__(self, what, origin, stored, compressed):
        self.what, self.origin, self.stored, self.compressed = what, origin, stored, compressed
        self.total = 0

    def add(self, nbytes):
        self.check(nbytes)
        self.total += max(0, nbytes)

    def check(self, nbytes):
        """Refuse ``nbytes`` more if the total would pass either ceiling."""
        total = self.total + max(0, nbytes)
        check_in_file(total, self.stored, self.what, self.origin, self.compressed)
        check_memory(total, f"{self.what}'s data", self.origin)

    def room(self):
        """The bytes that may still be announced: a read of unknown length
        (a line) asks for one more at most, and :meth:`add` then refuses it."""
        in_file = self.stored * MAX_COMPRESSION_RATIO if self.compressed else self.stored
        return max(0, min(in_file, max_memory()) - self.total)


def limit_address_space(wanted):
    """Hold this process's address space to ``wanted`` bytes, or to the
    limit it inherited if that is lower (raising it is not allowed);
    returns ``(limit, inherited)``, ``inherited`` whether the inherited
    limit was the lower. For a child that parses a file in C (HDF5): a
    size its damaged metadata announces fails there, not in the machine."""
    import resource

    inherited = [n for n in resource.getrlimit(resource.RLIMIT_AS) if n != resource.RLIM_INFINITY]
    limit = min([wanted, *inherited])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return limit, limit < wanted
