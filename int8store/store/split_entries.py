"""Each split's entry of a store's manifest, checked before it is used
(:class:`SplitEntry`): where its data lies (the byte range and checksum of
every chunk of codes and of its labels), its BLAKE3, the mean of its codes
and their histogram (``code_counts``, optional: :data:`CODE_COUNTS`), and
for images with a channel axis, their histogram channel by channel
(``channel_code_counts``, optional: :data:`CHANNEL_CODE_COUNTS`).
"""

import numpy as np

from ..codes.histogram import code_sum
from ..errors import StoreFormatError
from .checksums import ROWS_DIGEST, SPLIT_DIGEST, digest_digits
from .manifest import data_range, is_count, is_hex, is_number, shown

__all__ = ["SplitEntry", "CODE_COUNTS", "CHANNEL_CODE_COUNTS", "is_split_name", "SPLIT_NAME_RULE"]

#: The longest name of a split. What may name one: every message about a
#: split names it (so no terminal's escape, no page of text), and HDF5
#: would make a '/' a group.
MOST_SPLIT_NAME = 100
#: Names a split's HDF5 group cannot take: the root itself, and what the
#: writer puts beside the splits (h5py's ValueError "name already exists").
RESERVED_NAMES = (".", "encoding", "label_names")
SPLIT_NAME_RULE = (f"a split's name is 1 to {MOST_SPLIT_NAME} printable characters, no '/', "
                   f"and none of {', '.join(map(repr, RESERVED_NAMES))}")


def is_split_name(name):
    """Whether ``name`` may name a split of a store (:data:`SPLIT_NAME_RULE`)."""
    return isinstance(name, str) and 0 < len(name) <= MOST_SPLIT_NAME and name.isprintable() \
        and "/" not in name and name not in RESERVED_NAMES

#: A split entry's field holding the histogram of its codes (optional).
CODE_COUNTS = "code_counts"
#: A split entry's field holding the histogram of its codes channel by
#: channel, ``channels`` lists of 256 counts (optional; images with a channel axis).
CHANNEL_CODE_COUNTS = "channel_code_counts"


class SplitEntry:
    """Split ``name``'s entry of the manifest, checked: where its data lies
    (chunks of ``rows`` examples, and the labels, each ``(offset, size,
    checksum)``), ``strong`` (its BLAKE3, or None; ``strong_padded``: of the
    stored chunks, padding included, as stores before 0.3.1 have it), ``code_mean`` (None for
    an empty split), ``code_counts`` (its codes' histogram, or None) and
    ``channel_code_counts`` (``(channels, 256)``, or None); ``channels``: the
    images' channel axis' length, None for images without one."""

    def __init__(self, entry, name, count, row_bytes, checksum, path, channels=None):
        self.count, self.row_bytes = count, row_bytes
        self.code_mean = _code_mean(entry.get("code_mean"), count, name, path)
        x = entry["x"]  # (lists of data ranges: checked by read_manifest)
        self.rows = x.get("chunk_rows")
        self.chunks = [data_range(c, path) for c in x["chunks"]]
        self.labels = [data_range(r, path) for r in entry["y"]]
        # The BLAKE3 of the examples (ROWS_DIGEST), or of the stored chunks,
        # the last one's padding included (SPLIT_DIGEST, before 0.3.1).
        self.strong_padded = ROWS_DIGEST not in entry and SPLIT_DIGEST in entry
        self.strong = entry.get(SPLIT_DIGEST if self.strong_padded else ROWS_DIGEST)
        if not is_count(self.rows) or not 1 <= self.rows <= max(count, 1):
            raise StoreFormatError(f"{path}: the manifest's layout of split {name!r} "
                                   f"has {shown(self.rows)} rows a chunk")
        chunk_bytes = self.rows * self.row_bytes
        needed = -(-self.count // self.rows) if self.count else 0
        if len(self.chunks) != needed or any(c[1] != chunk_bytes for c in self.chunks) \
                or len(self.labels) != (1 if self.count else 0) \
                or any(r[1] != 4 * self.count for r in self.labels):
            raise StoreFormatError(f"{path}: the manifest's layout of split {name!r} "
                                   "does not match its count and image shape")
        digits = digest_digits(checksum)
        if not all(is_hex(r[2], digits) for r in self.chunks + self.labels):
            raise StoreFormatError(f"{path}: the manifest's layout of split {name!r} holds a "
                                   f"checksum that is not {digits} hex digits ({checksum})")
        if self.strong is not None and not is_hex(self.strong, digest_digits(SPLIT_DIGEST)):
            raise StoreFormatError(f"{path}: the manifest holds {shown(self.strong)} as the "
                                   f"BLAKE3 of split {name!r}, not {digest_digits(SPLIT_DIGEST)} "
                                   "hex digits")
        self.code_counts = _code_counts(entry.get(CODE_COUNTS), count * row_bytes, self.code_mean,
                                        name, path)
        self.channel_code_counts = _channel_code_counts(
            entry.get(CHANNEL_CODE_COUNTS), channels, count * row_bytes, self.code_counts, name, path)

    def chunks_over(self, start, stop):
        """The indices of the stored chunks that examples ``[start, stop)`` touch."""
        return range(start // self.rows, (stop - 1) // self.rows + 1 if stop > start else 0)

    def chunk_name(self, split, index):
        """How messages name stored chunk ``index`` of ``split``."""
        first = index * self.rows
        return (f"split {split!r} chunk {index} "
                f"(examples {first} to {min(first + self.rows, self.count) - 1})")


def _code_mean(value, count, name, path):
    """A split's ``code_mean``: the mean of int8 codes, or None for an empty split."""
    if value is None and count == 0:
        return None
    if not is_number(value) or not -128 <= value <= 127:
        raise StoreFormatError(f"{path}: the manifest holds {shown(value)} as the code mean of "
                               f"split {name!r}, where the mean of int8 codes belongs")
    return value


def _code_counts(value, codes, code_mean, name, path):
    """A split's ``code_counts``: 256 counts of its ``codes`` codes, which
    give its ``code_mean`` exactly; None where the manifest has none."""
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 256 and all(is_count(n) for n in value)
            and sum(value) == codes):
        raise StoreFormatError(f"{path}: the manifest holds {shown(value)} as the code counts of "
                               f"split {name!r}, where 256 counts of its {codes} codes belong")
    counts = np.array(value, dtype=np.int64)
    if codes and code_sum(counts) / codes != code_mean:
        raise StoreFormatError(f"{path}: the code counts of split {name!r} give a mean of "
                               f"{code_sum(counts) / codes!r}, its code mean is {code_mean!r}: "
                               "the manifest contradicts itself")
    return counts


def _channel_code_counts(value, channels, codes, code_counts, name, path):
    """A split's ``channel_code_counts``: ``channels`` rows of 256 counts,
    each of the split's ``codes / channels`` codes of its channel, which add
    up to its ``code_counts``; None where the manifest has none."""
    if value is None:
        return None
    if channels is None:
        raise StoreFormatError(f"{path}: the manifest holds channel code counts for split "
                               f"{name!r}, whose images have no channel axis")
    per_channel = codes // channels
    if not (isinstance(value, list) and len(value) == channels
            and all(isinstance(row, list) and len(row) == 256 and all(is_count(n) for n in row)
                    and sum(row) == per_channel for row in value)):
        raise StoreFormatError(f"{path}: the manifest holds {shown(value)} as the channel code "
                               f"counts of split {name!r}, where {channels} rows of 256 counts "
                               f"of its {per_channel} codes a channel belong")
    counts = np.array(value, dtype=np.int64).reshape(channels, 256)
    if code_counts is not None and not np.array_equal(counts.sum(axis=0), code_counts):
        raise StoreFormatError(f"{path}: the channel code counts of split {name!r} do not add up "
                               "to its code counts: the manifest contradicts itself")
    return counts
