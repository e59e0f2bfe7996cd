"""The int8store file format: one self-describing, checksummed HDF5 file;
how a file is recognised as one, and whether this release reads it.

Layout (format version 3; version 2 differs only in its chunk checksum)::

    user block             the manifest (see :mod:`int8store.store.manifest`): what
                           the data means and the checksum of every byte
    /                      attributes, for other HDF5 tools: format="int8store",
                           format_version, requires_int8store, writer,
                           command_line, source, created, encoding_kind,
                           encoding_offset / encoding_divisor / encoding_precision
                           (affine) or encoding_max_error (lossy codebook),
                           image_shape, axes, splits (their order)
    /encoding/codebook     the 256 values (codebook encodings only)
    /label_names           class names by label (optional)
    /SPLIT/x               int8 codes, shape (N, *image_shape), in chunks of
                           about 1 MiB along N, each with its own checksum
                           (XXH3-128; SHA-256 in format 2: see
                           :mod:`int8store.store.checksums`)
    /SPLIT/y               int32 labels (little-endian), shape (N,)
                           SPLIT attributes: count, code_mean

Each split's entry in the manifest also records the histogram of its codes
(``code_counts``: 256 counts, bin ``b`` for the code whose byte is ``b``;
:mod:`int8store.codes.histogram`), an optional field of format 3 (stores
written before it lack it): ``normalize="dataset"`` takes the training
split's mean from it without reading an image
(:meth:`~int8store.store.reader.Store.code_counts`). For images with a
channel axis (``(rows, cols, channels)``, channels last) it also records
the histogram channel by channel (``channel_code_counts``: ``channels`` rows
of 256 counts; optional too).

A store is recognised by its first bytes (:func:`is_store`: the manifest's
magic, read without HDF5); :func:`readable_format` refuses a newer format
version, naming the release that reads it. The store itself is read by
:mod:`int8store.store.reader`.
"""

import os

from ..errors import StoreChecksumError, StoreFormatError, shortened
from ..runtime.version import package_version
from .checksums import CHUNK_CHECKSUMS
from .manifest import (HDF5_SIGNATURE, MAGIC, MAX_USERBLOCK_BYTES, field, manifest_digest,
                       read_manifest, shown)

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "FIRST_READER", "axes_for", "is_store",
           "readable_format", "refuse_non_store", "refuse_unreadable_store",
           "changed_store_error", "check_same_store"]

FORMAT_NAME = "int8store"
FORMAT_VERSION = 3
#: For each format version, the first int8store release that reads it.
FIRST_READER = {1: "0.1.0", 2: "0.2.0", 3: "0.3.0"}


def axes_for(image_shape):
    """Axis labels of x: ``example`` then ``row, column[, channel]`` or ``feature``."""
    named = {1: ("feature",), 2: ("row", "column"), 3: ("row", "column", "channel")}
    return ("example",) + named.get(len(image_shape), tuple(f"axis{i}" for i in range(1, len(image_shape) + 1)))


def is_store(path):
    """Whether ``path`` starts with an int8store manifest (read without HDF5);
    a pipe or a device is not opened (that could wait for ever): no store."""
    try:
        if not os.path.isfile(path):
            return False
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def readable_format(manifest, path):
    """``(format version, chunk checksum)`` of the store whose manifest is
    ``manifest``, if this release reads it; else raises, saying which
    release does."""
    if field(manifest, "format", str, path) != FORMAT_NAME:
        raise StoreFormatError(f"{path}: not an int8store manifest ({shown(manifest['format'])})")
    version = field(manifest, "format_version", int, path)
    if version > FORMAT_VERSION:
        raise StoreFormatError(
            f"{path}: format version {version} is newer than this int8store "
            f"({package_version()}) reads (up to version {FORMAT_VERSION}); it was written by "
            f"{_said(manifest.get('writer', 'a newer int8store'))}: install int8store >= "
            f"{_said(manifest.get('requires_int8store', 'a newer release'))} to read it")
    if version not in CHUNK_CHECKSUMS:
        raise StoreFormatError(f"{path}: unknown format version {version!r}")
    # Format 2 checked chunks with SHA-256; format 3 names its checksum.
    checksum = manifest.get("chunk_checksum", CHUNK_CHECKSUMS[version])
    if checksum != CHUNK_CHECKSUMS[version]:
        raise StoreFormatError(f"{path}: format version {version} with chunk checksum "
                               f"{shown(checksum)}, which it does not use")
    return version, checksum


def refuse_non_store(path):
    """Raise for ``path``, a file that does not start with a manifest: an
    int8store file this release cannot read, or whose manifest is damaged,
    or not an int8store file."""
    with open(path, "rb") as f:
        head = f.read(len(MAGIC))
        hdf5 = _holds_hdf5(f, os.fstat(f.fileno()).st_size)
    if not head:
        raise StoreFormatError(f"{path}: an empty file (0 bytes), not an int8store file")
    if len(head) == len(MAGIC) and sum(a != b for a, b in zip(head, MAGIC)) <= 2:
        # (a flipped byte of the manifest's first line: a damaged store, not another format)
        raise StoreFormatError(
            f"{path}: damaged: its first line is almost an int8store manifest's ({head!r}); "
            "restore a copy or convert its source again")
    if hdf5:  # (read apart: a damaged file crashed the caller)
        from .plain_hdf5 import root_attributes

        attributes, problem = root_attributes(path)
        if problem is not None:
            raise StoreFormatError(f"{path}: not an int8store file; as an HDF5 file it is "
                                   f"damaged (the HDF5 library {problem})")
        refuse_unreadable_store(path, attributes)
    raise StoreFormatError(
        f"{path}: not an int8store file; convert archives with 'int8store convert'")


def _holds_hdf5(f, size):
    """Whether the open file ``f`` (``size`` bytes) has HDF5's signature where
    the HDF5 library looks for it: at its start, or after a user block of
    512, 1024, 2048, ... bytes (a store's manifest, its first bytes wiped)."""
    offset = 0
    while offset + len(HDF5_SIGNATURE) <= min(size, MAX_USERBLOCK_BYTES + len(HDF5_SIGNATURE)):
        f.seek(offset)
        if f.read(len(HDF5_SIGNATURE)) == HDF5_SIGNATURE:
            return True
        offset = max(512, 2 * offset)
    return False


def refuse_unreadable_store(path, attrs):
    """Called on a plain HDF5 file's root attributes: raise if it is an
    int8store file this release cannot read (format 1, or a damaged manifest)."""
    if _text(attrs.get("format", "")) != FORMAT_NAME:
        return
    version = attrs.get("format_version")
    if version == 1:
        raise StoreFormatError(
            f"{path}: an int8store file of format version 1 (int8store 0.1), whose checksums "
            "do not cover its metadata; convert the source again with 'int8store convert'")
    raise StoreChecksumError(f"{path}: an int8store file whose manifest is missing or damaged: "
                             "the file is damaged")


def changed_store_error(path):
    """The error for a store whose file is no longer the one opened."""
    return StoreFormatError(f"{path}: the file changed since the store was opened (replaced or "
                            "rewritten): its shards would not match the labels read before")


def check_same_store(path, digest, file=None):
    """Raise :func:`changed_store_error` for ``path`` unless the file there
    (or ``file``: an open file's ``/proc/self/fd/N``) still holds the store
    whose manifest digest is ``digest``: its manifest is read again and
    compared. A manifest that cannot be read, or is damaged, is another
    store's."""
    try:
        same = manifest_digest(read_manifest(file or path)) == digest
    except (OSError, StoreFormatError) as error:
        raise changed_store_error(path) from error
    if not same:
        raise changed_store_error(path)


def _said(value):
    """A manifest's text as a message shows it, escaped and shortened (a
    store may come from elsewhere: a terminal's escape sequence in it reaches
    the screen as ``\\x1b``); anything else: a short ``repr``."""
    return shortened(value, 80) if isinstance(value, str) else shown(value)


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
