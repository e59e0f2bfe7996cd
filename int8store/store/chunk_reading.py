"""A store's data read by byte range, every range checked against its
checksum as it arrives: :class:`ChunkReader`, and the :class:`ChunkBuffer`
a stored chunk is read into when its rows are not wanted whole and in place.

Whole chunks in order are read straight into the caller's array, then
hashed while they are still in the cache; any other chunk is read whole
into a buffer, checked there, and its rows copied once to their places (or,
given a permutation, to the places of a shuffled shard). Reads and hashing
release the GIL; the caller opens the file (one handle for each reading
thread), so :class:`~int8store.store.reader.Store` decides when.
"""

import numpy as np

from ..errors import StoreChecksumError
from .checksums import chunk_hasher

__all__ = ["ChunkBuffer", "ChunkReader", "damaged_error"]


def damaged_error(path, what):
    """The error for a range (``what``: a chunk, labels) that fails its checksum."""
    return StoreChecksumError(f"{path}: {what} does not match its checksum: the file is damaged")


class ChunkBuffer:
    """A buffer for one stored chunk, and which chunk it now holds: ``(store
    path, split, chunk index)``, and whether it was checked when read."""

    def __init__(self, nbytes):
        self.array = np.empty(nbytes, dtype=np.uint8)
        self._key, self._checked = None, False

    def holds(self, key, checked):
        """Whether the buffer holds chunk ``key`` whole (checked, if ``checked``)."""
        return self._key == key and (self._checked or not checked)

    def remember(self, key, checked):
        self._key, self._checked = key, checked

    def forget(self):
        self._key = None


class ChunkReader:
    """Reads the byte ranges of the store at ``path``, each checked with the
    store's chunk ``checksum`` (:data:`~int8store.store.checksums.CHUNK_CHECKSUMS`)."""

    def __init__(self, path, checksum):
        self.path, self.checksum = path, checksum

    def read_range(self, f, offset, views, digest, what):
        """Fill ``views`` (a memoryview, or a list of them filled in turn)
        from the open file ``f`` at ``offset``; unless ``digest`` is None,
        check their bytes against it (``what`` names the range in errors)."""
        views = views if isinstance(views, list) else [views]
        hasher = chunk_hasher(self.checksum)
        f.seek(offset)
        for view in views:
            done = 0
            while done < len(view):  # a raw file may read less than asked
                got = f.readinto(view[done:])
                if not got:
                    raise StoreChecksumError(f"{self.path}: {what}: the file ends early: it is truncated")
                done += got
            if digest is not None:
                hasher.update(view)
        if digest is not None and hasher.hexdigest() != digest:
            raise damaged_error(self.path, what)

    def read_rows(self, f, layout, name, start, stop, out, verify, scratch, positions=None):
        """Examples ``[start, stop)`` of split ``name`` (its manifest entry
        ``layout``: a :class:`~int8store.store.split_entries.SplitEntry`) from
        the open file ``f`` into ``out``, row ``i`` (or ``positions[i]``)
        for example ``start + i``, each chunk they touch checked (unless not
        ``verify``); ``scratch``: a :class:`ChunkBuffer` of a whole chunk.
        The buffer remembers the chunk it holds: a read that starts in the
        chunk the previous one ended in (shards read in order) takes its
        rows from there instead of reading and checking the chunk again."""
        flat = out.reshape(len(out), layout.row_bytes)
        for index in layout.chunks_over(start, stop):
            offset, nbytes, digest = layout.chunks[index]
            first = index * layout.rows
            last = min(first + layout.rows, layout.count)
            what = layout.chunk_name(name, index)
            if positions is None and start <= first and last <= stop:
                held = (last - first) * layout.row_bytes
                if nbytes > held:  # the split's last chunk: its padding goes to the buffer
                    scratch.forget()
                views = [memoryview(flat[first - start:last - start].reshape(-1)).cast("B"),
                         memoryview(scratch.array)[:nbytes - held]]
                self.read_range(f, offset, views, digest if verify else None, what)
                continue
            # (the chunk's place and checksum too: a store rewritten at the same path differs)
            key = (self.path, name, index, offset, digest)
            if not scratch.holds(key, verify):
                scratch.forget()  # until the chunk is read whole (and checked, if asked)
                self.read_range(f, offset, memoryview(scratch.array)[:nbytes],
                                digest if verify else None, what)
                scratch.remember(key, verify)
            rows = scratch.array[:nbytes].view(np.int8).reshape(layout.rows, layout.row_bytes)
            lo, hi = max(start, first), min(stop, last)
            if positions is None:
                flat[lo - start:hi - start] = rows[lo - first:hi - first]
            else:
                flat[positions[lo - start:hi - start]] = rows[lo - first:hi - first]
