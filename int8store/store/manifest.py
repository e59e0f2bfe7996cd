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

Each split also records the BLAKE3 of its data (its stored chunks in order,
then its labels: ``"blake3"``), an optional field of format 3: stores written
before it lack it, and readers that do not know it ignore it.

So a reader checks the manifest and the HDF5 metadata *before* any HDF5
parser sees them (damaged metadata is an error, never a hang inside HDF5),
and checks each chunk of data as it reads it: every byte of the file is
covered. The checksums detect accidents (bit rot, truncation, a copy cut
short, an edit with another tool); they do not stop forgery, since whoever
edits the file can recompute them, and XXH3-128 is not collision resistant:
whoever supplies the data could swap a chunk for one with the same XXH3.
A signature of the manifest (``int8store manifest FILE``) covers every byte
once ``int8store verify --strong FILE`` passes: the HDF5 metadata through
its SHA-256, the data through each split's BLAKE3.

The manifest is bounded before it is read: a length line or a user block
beyond :data:`MAX_USERBLOCK_BYTES` is refused without reading it, and every
field is checked for its type and range before it is used (malformed:
:class:`StoreFormatError` naming the file).
"""

import hashlib
import json
import math
import os

from ..errors import StoreChecksumError, StoreFormatError, quoted, shown

__all__ = ["MAGIC", "MAX_USERBLOCK_BYTES", "pack", "read_manifest", "manifest_digest",
           "userblock_size_for", "hash_outside", "data_ranges", "data_range", "field", "is_count",
           "is_number", "is_hex", "shown", "HDF5_SIGNATURE"]

MAGIC = b"int8store manifest\n"
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_DIGEST_LINE = 65  # 64 hex digits and a newline
_LENGTH_DIGITS = 12
_BLOCK = 1 << 20
#: The largest user block, so the largest manifest, int8store writes or reads:
#: 64 MiB. A 100 GB store of 28x28 images lists 95,401 chunks of 1,048,208
#: bytes, each ``[offset,size,"32 hex digits"]`` (57 bytes): a manifest of
#: 5.4 MB, in a user block of 16 MiB (the writer reserves 114 bytes a chunk).
#: The cap is four times that block, twelve times that manifest; it holds
#: 588,000 chunks (0.6 TB of images), and the writer refuses a larger store
#: before it writes anything. A length line or user block beyond it is
#: refused before anything is read: a crafted (sparse) file cannot make a
#: reader allocate more.
MAX_USERBLOCK_BYTES = 64 << 20


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
    :class:`StoreChecksumError`) naming ``path`` otherwise.

    At most :data:`MAX_USERBLOCK_BYTES` of the user block and the HDF5
    metadata are read: a manifest that announces more is refused first. The
    layout of the data (every chunk's and label range's entry) is checked
    here (:func:`data_ranges`); what gives it its meaning, by
    :class:`~int8store.store.reader.Store`."""
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
        end_of_text = start + length + 1 + _DIGEST_LINE
        if end_of_text > MAX_USERBLOCK_BYTES:
            raise StoreFormatError(
                f"{path}: the manifest announces {length} bytes, more than int8store writes or "
                f"reads (a user block of at most {MAX_USERBLOCK_BYTES} bytes): the file is "
                "damaged or was not written by int8store")
        if end_of_text > size:
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
        except (ValueError, RecursionError) as error:  # checksummed, yet not JSON: not ours
            raise StoreFormatError(f"{path}: the manifest is not JSON ({type(error).__name__}: "
                                   f"{quoted(error)})") from error
        if not isinstance(manifest, dict):
            raise StoreFormatError(f"{path}: the manifest is {shown(manifest)}, not a JSON object")
        block = field(manifest, "userblock_size", int, path)
        if block < end_of_text or block & (block - 1) or block > min(size, MAX_USERBLOCK_BYTES):
            raise StoreFormatError(
                f"{path}: the manifest's user block size {block} is impossible (a power of two "
                f"beyond the manifest, within the file, at most {MAX_USERBLOCK_BYTES} bytes)")
        if not _zeros(f, block - end_of_text):
            raise StoreChecksumError(
                f"{path}: the padding after the manifest is not zero: the file is damaged")
        if field(manifest, "file_size", int, path) != size:
            raise StoreChecksumError(
                f"{path}: the file has {size} bytes but its manifest says "
                f"{manifest['file_size']}: it is truncated, extended or damaged")
        ranges = data_ranges(manifest, path)
        if hash_outside(f, block, size, ranges) != field(manifest, "metadata_sha256", str, path):
            raise StoreChecksumError(
                f"{path}: the HDF5 metadata (attributes, object headers, indexes) does not "
                "match its checksum: the file is damaged")
    return manifest


def _zeros(f, nbytes):
    """Whether the next ``nbytes`` of ``f`` are all zero (read a block at a time)."""
    while nbytes > 0:
        block = f.read(min(nbytes, _BLOCK))
        if not block or block.count(0) != len(block):
            return False
        nbytes -= len(block)
    return True


def manifest_digest(manifest):
    """SHA-256 of a manifest as read: which store a file is, to a reader that
    opens the same path later."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def data_ranges(manifest, path):
    """The ``(offset, size)`` of every data range the manifest lists, sorted and
    checked to lie inside the file without overlapping; each split an object
    whose ``x["chunks"]`` and ``y`` are lists of :func:`data_range` entries."""
    ranges = []
    for split in field(manifest, "splits", list, path):
        where = f"split {shown(split.get('name'))}" if isinstance(split, dict) else "a split"
        entries = field(field(split, "x", dict, path, where), "chunks", list, path, f"{where}'s x")
        entries = entries + field(split, "y", list, path, where)
        ranges += [data_range(entry, path)[:2] for entry in entries]
    ranges.sort()
    position = manifest["userblock_size"]
    for offset, nbytes in ranges:
        if offset < position or offset + nbytes > manifest["file_size"]:
            raise StoreFormatError(f"{path}: the manifest lists an impossible data range "
                                   f"({offset}, {nbytes}): before the data, overlapping another "
                                   "or beyond the file")
        position = offset + nbytes
    return ranges


def data_range(entry, path):
    """``(offset, size, checksum)`` of a manifest's entry for a data range,
    checked to be ``[count, count, text]`` (its checksum's length is the
    reader's to check: it depends on the format)."""
    if not (isinstance(entry, list) and len(entry) == 3 and is_count(entry[0])
            and is_count(entry[1]) and isinstance(entry[2], str)):
        raise StoreFormatError(f"{path}: the manifest lists {shown(entry)} where a data range "
                               "[offset, size, checksum] belongs")
    return tuple(entry)


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


_KINDS = {int: "a count", str: "text", list: "a list", dict: "an object"}


def field(mapping, key, kind, path, where="the manifest"):
    """``mapping[key]``, checked to be a ``kind`` (``int``: a count, a
    non-negative integer and never a bool); otherwise a
    :class:`StoreFormatError` naming ``path`` and ``where`` the field is."""
    if not isinstance(mapping, dict):
        raise StoreFormatError(f"{path}: {where} is {shown(mapping)}, where an object belongs")
    if key not in mapping:
        raise StoreFormatError(f"{path}: {where} has no {key!r} ({_KINDS[kind]})")
    value = mapping[key]
    if not (is_count(value) if kind is int else isinstance(value, kind)):
        raise StoreFormatError(f"{path}: {where} holds {shown(value)} as {key!r}, where "
                               f"{_KINDS[kind]} belongs")
    return value


def is_count(value):
    """Whether ``value`` is a non-negative int (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def is_number(value):
    """Whether ``value`` is a finite float, or an int (not a bool) of at most 64 bits."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1 << 64


def is_hex(value, digits):
    """Whether ``value`` is ``digits`` lowercase hexadecimal digits (a hex digest)."""
    return isinstance(value, str) and len(value) == digits and not value.strip("0123456789abcdef")
