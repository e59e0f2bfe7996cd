"""The checksums of a store's data: one per data range (a chunk of codes, a
split's labels), and a strong digest per split.

Format 2 checked each range with SHA-256; format 3 uses XXH3-128
(``xxhash``), measured at 5-6 times SHA-256's speed on one core here and 3
times BLAKE3's (``bench/streaming.py`` prints the rates), so that checking is
never what holds back reading. Both release the GIL while they hash.

What they promise: a chunk damaged by accident (bit rot, a truncated or
torn copy, an edit with another tool) fails its check, except with a chance
of about 2**-128. Neither stops forgery: whoever can edit the file can
recompute them, and XXH3-128 is not collision resistant, so whoever supplies
the data can swap a chunk for other bytes with the same XXH3-128.

So each split of a format-3 store written by this release also records the
BLAKE3 (:data:`ROWS_DIGEST`, cryptographic) of its examples' codes in
order and then its labels, computed as they are written: the
:func:`split_digest` of the same data held anywhere, so that a run resumed
from a store agrees with the same split held whole or read from another
source. Stores written before 0.3.1 recorded it under :data:`SPLIT_DIGEST`
over the stored chunks, the last one's zero padding included; they are
still checked that way, and give that digest (so a split whose count is
not a whole number of chunks agrees only with itself streamed from them:
converting again gives the new digest). ``int8store verify
--strong`` (``Store.verify(strong=True)``) recomputes it; a signature of the
manifest then covers every byte (the HDF5 metadata through the manifest's
SHA-256 of it, the data through BLAKE3). One digest per split rather than
per chunk: it names the split that was altered, adds 64 bytes to the
manifest per split instead of per chunk, and costs the same to compute.
"""

import hashlib

import numpy as np

from ..errors import StoreFormatError

__all__ = ["CHUNK_CHECKSUMS", "CHECKSUM_NAMES", "SPLIT_DIGEST", "ROWS_DIGEST", "chunk_hasher", "chunk_digest",
           "digest_digits", "split_digest"]

#: The chunk checksum of each format version that has one.
CHUNK_CHECKSUMS = {2: "sha256", 3: "xxh3_128"}
#: How messages name them.
CHECKSUM_NAMES = {"sha256": "SHA-256", "xxh3_128": "XXH3-128", "blake3": "BLAKE3"}
#: The strong digest's hash, and its field in a split's entry of a store
#: written before 0.3.1 (format 3, optional): the stored chunks, padding included.
SPLIT_DIGEST = "blake3"
#: Its field since (optional to a reader): the examples' codes, no padding.
ROWS_DIGEST = "blake3_rows"


def chunk_hasher(name):
    """A new hasher (``update``, ``hexdigest``) for checksum ``name``
    (``"xxh3_128"``, ``"sha256"`` or ``"blake3"``)."""
    if name == "xxh3_128":
        import xxhash
        return xxhash.xxh3_128()
    if name == "sha256":
        return hashlib.sha256()
    if name == "blake3":
        import blake3
        return blake3.blake3()
    raise StoreFormatError(f"unknown chunk checksum {name!r}")


def chunk_digest(name, data):
    """The hex checksum ``name`` of the bytes ``data``."""
    hasher = chunk_hasher(name)
    hasher.update(data)
    return hasher.hexdigest()


def split_digest(codes, labels):
    """The BLAKE3 a store records of a split (:data:`SPLIT_DIGEST`: its
    codes, rows in order, then its labels as little-endian int32), of
    ``codes`` and ``labels`` in memory: the same hex digest for the same
    data wherever it is held."""
    hasher = chunk_hasher(SPLIT_DIGEST)
    hasher.update(np.ascontiguousarray(codes, dtype=np.int8).reshape(-1).view(np.uint8))
    hasher.update(np.ascontiguousarray(labels, dtype="<i4").view(np.uint8))
    return hasher.hexdigest()


def digest_digits(name):
    """How many hex digits a checksum ``name`` has (32 for XXH3-128, 64 for SHA-256 and BLAKE3)."""
    return len(chunk_hasher(name).hexdigest())
