"""The store's manifest: a checksummed description of every byte of the file.

An int8store file is an HDF5 file behind a *user block*, a region at its
start that HDF5 reserves and never reads. int8store writes the manifest
there::

    int8store manifest\\n
    <length of the JSON in bytes>\\n
    <JSON>\\n
    <SHA-256 of the JSON, hex>\\n
    zero bytes up to the user block's size (a power of two)

The JSON holds everything that gives the data its meaning (format version,
encoding, image shape, splits in order with their counts, label names,
provenance) and the layout of the data: the byte range and checksum of each
stored chunk of images and of each split's labels (XXH3-128 in format 3,
SHA-256 in format 2: :mod:`int8store.store.checksums`). It also holds the file's
size and the SHA-256 of every other byte after the user block: HDF5's own
metadata (object headers, attributes, chunk indexes).

So a reader checks the manifest and the HDF5 metadata *before* any HDF5
parser sees them (damaged metadata is an error, never a hang inside HDF5),
and checks each chunk of data as it reads it: every byte of the file is
covered. The checksums detect accidents (bit rot, truncation, a copy cut
short, an edit with another tool); they do not stop forgery, since whoever
edits the file can recompute them. A signature of the manifest
(``int8store manifest FILE``) covers the whole file, if that is needed.
"""

import hashlib
import json
import os

from ..errors import StoreChecksumError, StoreFormatError

__all__ = ["MAGIC", "pack", "read_manifest", "manifest_digest", "userblock_size_for", "hash_outside",
           "HDF5_SIGNATURE"]

MAGIC = b"int8store manifest\n"
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_DIGEST_LINE = 65  # 64 hex digits and a newline
_LENGTH_DIGITS = 12
_BLOCK = 1 << 20


def pack(manifest, userblock_size):
    """The user block's bytes for ``manifest`` (a JSON-able dict)."""
    text = json.dumps(manifest, separators=(",", ":"), sort_keys=True, allow_nan=False).encode()
    block = MAGIC + b"%d\n" % len(text) + text + b"\n" + hashlib.sha256(text).hexdigest().encode() + b"\n"
    if len(block) > userblock_size:
        raise StoreFormatError(f"the manifest ({len(block)} bytes) outgrew its user block "
                               f"({userblock_size} bytes): this is a bug in int8store")
    return block + bytes(userblock_size - len(block))


def userblock_size_for(nbytes):
    """The smallest user block (a power of two, at least 4 KiB) holding ``nbytes``."""
    size = 4096
    while size < nbytes:
        size *= 2
    return size


def read_manifest(path):
    """The manifest of the store at ``path``, after checking it and the HDF5
    metadata it describes; raises :class:`StoreFormatError` (or
    :class:`StoreChecksumError`) naming ``path`` otherwise."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(len(MAGIC) + _LENGTH_DIGITS + 1)
        if not head.startswith(MAGIC):
            raise StoreFormatError(f"{path}: not an int8store file (no int8store manifest at its start)")
        length_line = head[len(MAGIC):].split(b"\n", 1)
        if len(length_line) != 2 or not length_line[0].isdigit():
            raise StoreChecksumError(f"{path}: the manifest's length line is damaged: the file is damaged")
        length = int(length_line[0])
        start = len(MAGIC) + len(length_line[0]) + 1
        if start + length + 1 + _DIGEST_LINE > size:
            raise StoreChecksumError(
                f"{path}: the manifest announces {length} bytes, more than the file holds "
                f"({size} bytes): the file is truncated or damaged")
        f.seek(start)
        text = f.read(length)
        tail = f.read(1 + _DIGEST_LINE)
        if tail[:1] != b"\n" or tail[-1:] != b"\n" or \
                tail[1:-1].decode("ascii", "replace") != hashlib.sha256(text).hexdigest():
            raise StoreChecksumError(
                f"{path}: the manifest does not match its checksum: the file is damaged")
        try:
            manifest = json.loads(text)
        except ValueError as error:  # a checksummed manifest that is not JSON: not ours
            raise StoreFormatError(f"{path}: the manifest is not JSON ({error})") from error
        block = _field(manifest, "userblock_size", int, path)
        end_of_text = start + length + 1 + _DIGEST_LINE
        if block < end_of_text or block & (block - 1) or block > size:
            raise StoreFormatError(f"{path}: the manifest's user block size {block} is impossible")
        if any(f.read(block - end_of_text)):
            raise StoreChecksumError(
                f"{path}: the padding after the manifest is not zero: the file is damaged")
        if _field(manifest, "file_size", int, path) != size:
            raise StoreChecksumError(
                f"{path}: the file has {size} bytes but its manifest says "
                f"{manifest['file_size']}: it is truncated, extended or damaged")
        ranges = data_ranges(manifest, path)
        if hash_outside(f, block, size, ranges) != _field(manifest, "metadata_sha256", str, path):
            raise StoreChecksumError(
                f"{path}: the HDF5 metadata (attributes, object headers, indexes) does not "
                "match its checksum: the file is damaged")
    return manifest


def manifest_digest(manifest):
    """SHA-256 of a manifest as read: which store a file is, to a reader that
    opens the same path later."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def data_ranges(manifest, path):
    """The ``(offset, size)`` of every data range the manifest lists, sorted and
    checked to lie inside the file without overlapping."""
    ranges = []
    for split in _field(manifest, "splits", list, path):
        ranges += [(c[0], c[1]) for c in _field(_field(split, "x", dict, path), "chunks", list, path)]
        ranges += [(c[0], c[1]) for c in _field(split, "y", list, path)]
    ranges.sort()
    position = manifest["userblock_size"]
    for offset, nbytes in ranges:
        if not (isinstance(offset, int) and isinstance(nbytes, int)) or offset < position \
                or nbytes < 0 or offset + nbytes > manifest["file_size"]:
            raise StoreFormatError(f"{path}: the manifest lists an impossible data range "
                                   f"({offset}, {nbytes})")
        position = offset + nbytes
    return ranges


def hash_outside(f, start, end, ranges):
    """SHA-256 of the bytes of ``f`` in ``[start, end)`` outside the sorted ``ranges``."""
    digest = hashlib.sha256()
    position = start
    for offset, nbytes in list(ranges) + [(end, 0)]:
        f.seek(position)
        remaining = offset - position
        while remaining > 0:
            block = f.read(min(remaining, _BLOCK))
            if not block:
                break
            digest.update(block)
            remaining -= len(block)
        position = offset + nbytes
    return digest.hexdigest()


def _field(mapping, key, kind, path):
    if not isinstance(mapping, dict) or not isinstance(mapping.get(key), kind) \
            or (kind is int and isinstance(mapping.get(key), bool)):
        raise StoreFormatError(f"{path}: the manifest has no valid {key!r} ({kind.__name__})")
    return mapping[key]
