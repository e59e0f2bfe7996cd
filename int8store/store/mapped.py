"""A store's split read where it lies: the file mapped into memory once, each
chunk checked in the mapping, rows lent as read-only views.

Shards taken in the split's own order (the tutorials' streams, evaluation)
need no copy at all: the compiled step reads the page cache's own pages.
Copying a shard out of the file cost about as much as training the
logistic regression on it; checking it in place costs a fraction (see
*Streaming throughput* in docs/benchmarks.md).

Each chunk is checked against its checksum before any of its rows is lent,
once per ``mark``: a stream passes one token for its whole life when it keeps
the split mapped whole (checked once, as a loaded split is checked once when
it is loaded), a new one each epoch when it gives pages back after use (a
split larger than it may hold, whose bytes are read from the file again).
The mapping holds the file that was opened, so a store replaced at its path
(as int8store's writers replace one) leaves it intact. A file written in
place under the run (a ``cp`` over it, not int8store) is seen by its
modification time and size before each lending, and before each pass over
a split whose one shard stays lent (:meth:`MappedSplit.check_unchanged`):
every chunk is checked again, and a file now too short is refused. Rows
already lent are read as the file is: a write during a step reaches that
step, and is caught before the next lending or pass; truncated during a
step, the file kills the process with SIGBUS, as with any mapped file.
"""

import mmap
import os
import threading
import weakref

import numpy as np

from ..errors import StoreChecksumError, StoreFormatError
from .checksums import chunk_hasher
from .chunk_reading import damaged_error
from .file_format import check_same_store

__all__ = ["MappedSplit"]


class MappedSplit:
    """Split ``name`` of ``store`` (a :class:`~int8store.store.reader.Store`)
    mapped read-only. Only for a split whose chunks lie end to end in the
    file (as int8store writes them): see :meth:`possible`."""

    def __init__(self, store, name):
        self.store, self.name = store, name
        self.layout = layout = store._split(name)
        end = layout.chunks[-1][0] + layout.chunks[-1][1]
        fd = os.open(store.file, os.O_RDONLY)
        try:
            self._refuse_another_file(fd)
            if os.fstat(fd).st_size < end:
                raise StoreChecksumError(f"{store.path}: split {name!r}: the file ends early: "
                                         "it is truncated")
            self._map = mmap.mmap(fd, end, access=mmap.ACCESS_READ)
        except OSError as error:
            os.close(fd)
            raise StoreFormatError(f"{store.path}: cannot map split {name!r} "
                                     f"({error.strerror or error})") from error
        except BaseException:
            os.close(fd)
            raise
        # Kept open to see the mapped file written in place (see _written).
        self._fd, self._end = fd, end
        weakref.finalize(self, os.close, fd)
        self._seen = self._written()
        self._bytes = np.frombuffer(self._map, np.uint8)
        self._start = layout.chunks[0][0]
        self._checked = {}  # chunk index -> the mark it was last checked under
        self._locks = [threading.Lock() for _ in layout.chunks]

    def _refuse_another_file(self, fd):
        """The file open as ``fd`` must be the store opened earlier (the same
        manifest): a store replaced since then would not match its labels."""
        here = f"/proc/self/fd/{fd}"  # the open file itself, where Linux names it
        check_same_store(self.store.path, self.store.manifest_digest,
                         here if os.path.exists(here) else None)

    @staticmethod
    def possible(store, name):
        """Whether split ``name``'s chunks lie end to end (and it has any)."""
        chunks = store._split(name).chunks
        return bool(chunks) and all(a[0] + a[1] == b[0] for a, b in zip(chunks, chunks[1:]))

    def _written(self):
        """The mapped file's size and modification time (not its change
        time, which its replacement at the path changes too)."""
        status = os.fstat(self._fd)
        return status.st_size, status.st_mtime_ns

    def rows(self, start, stop, mark=None):
        """Examples ``[start, stop)`` as a read-only int8 array of
        ``(stop - start, row bytes)``, once every chunk they touch has been
        checked under ``mark`` (None: checked again each call), and again
        if the file was written since (then refused if it is now short)."""
        written = self._written()
        if written != self._seen:  # written in place: nothing checked holds
            if written[0] < self._end:
                raise StoreChecksumError(f"{self.store.path}: split {self.name!r}: the file was "
                                         "truncated while it was read")
            self._checked.clear()
            self._seen = written
        layout = self.layout
        for index in layout.chunks_over(start, stop):
            with self._locks[index]:  # a chunk two threads share is checked by one of them
                if mark is not None and self._checked.get(index, self) == mark:
                    continue
                offset, nbytes, digest = layout.chunks[index]
                hasher = chunk_hasher(self.store.chunk_checksum)
                hasher.update(self._bytes[offset:offset + nbytes])  # without the GIL
                if hasher.hexdigest() != digest:
                    raise damaged_error(self.store.path, layout.chunk_name(self.name, index))
                self._checked[index] = mark
        first = self._start + start * layout.row_bytes
        return self._bytes[first:first + (stop - start) * layout.row_bytes].view(np.int8) \
            .reshape(stop - start, layout.row_bytes)

    def check_unchanged(self, mark=None):
        """If the file was written in place since the last lending, check
        every chunk again under ``mark`` (refused if damaged or now short):
        rows lent before, and still read (a split whose one shard stays in
        the shared variables), read the file's pages as they are now."""
        if self._written() != self._seen:
            self.rows(0, self.layout.count, mark)

    def read_ahead(self, start, stop):
        """Start reading examples ``[start, stop)`` into the page cache (in
        the kernel, without waiting for the disk)."""
        advice = getattr(mmap, "MADV_WILLNEED", None)
        if advice is None or stop <= start:
            return
        first = self._start + start * self.layout.row_bytes
        page = first // mmap.PAGESIZE * mmap.PAGESIZE
        self._map.madvise(advice, page, first + (stop - start) * self.layout.row_bytes - page)

    def release(self, rows):
        """Unmap the pages of ``rows`` (from :meth:`rows`) from this process,
        once nothing reads them: they stay in the page cache, and count in
        the process's resident memory again only when read again."""
        advice = getattr(mmap, "MADV_DONTNEED", None)  # (not on Windows)
        if advice is None or not rows.nbytes:
            return
        low = rows.ctypes.data - self._bytes.ctypes.data
        first = low // mmap.PAGESIZE * mmap.PAGESIZE
        self._map.madvise(advice, first, low + rows.nbytes - first)
