"""The buffers a streamed split copies its shards into: a fixed set, made
once, each with one owner at a time.

A :class:`BufferPool` holds ``count`` :class:`ShardBuffer` (a shard's int8
codes, its labels, and the order of a shuffled shard's rows); a reader
claims a free one for each shard it reads (:meth:`BufferPool.claim` never
waits: a pool with none free is a bookkeeping error, raised at once), and
the buffer is given back once its shard has left the shared variables (or
has been copied to the device). Memory stays what the pool was made with.

For the process that reads a store's shards (:mod:`.shard_process`) the
buffers are anonymous shared memory (``memfd_create``, Linux), mapped by
both processes; the child inherits their descriptors, so there is nothing to
name, clean up or leak: the memory goes when both have closed them.
"""

import mmap
import os
import weakref

import numpy as np

from ..errors import StreamError

__all__ = ["ShardBuffer", "BufferPool", "shared_memory_available", "buffer_views"]


class ShardBuffer:
    """One shard's memory: ``codes`` ``(rows, row bytes)`` int8, ``labels``
    ``(rows,)`` int32, ``order`` ``(rows,)`` int32 (a shuffled shard's
    order, written for the reading process), and its ``slot`` in the pool."""

    __slots__ = ("slot", "codes", "labels", "order")

    def __init__(self, slot, codes, labels, order):
        self.slot, self.codes, self.labels, self.order = slot, codes, labels, order


class BufferPool:
    """``count`` buffers of ``rows`` rows of ``row_bytes``, in shared memory
    when ``shared`` (then :attr:`fds` are their descriptors, for the reading
    process)."""

    def __init__(self, name, count, rows, row_bytes, shared=False):
        self.name = name
        self.fds = []
        if shared:
            self.fds = _shared_memory(count, rows, row_bytes)
            weakref.finalize(self, _close_all, list(self.fds))
            views = [buffer_views(fd, rows, row_bytes) for fd in self.fds]
        else:
            views = [(np.zeros((rows, row_bytes), np.int8), np.zeros(rows, np.int32))
                     for _ in range(count)]
        self.buffers = [ShardBuffer(slot, codes, np.zeros(rows, np.int32), order)
                        for slot, (codes, order) in enumerate(views)]
        self._free = list(self.buffers)

    def claim(self, in_place=None):
        """A free buffer; with none free, ``in_place`` (the buffer of the
        shard in the shared variables, which a reader working between two
        steps may read into) if given, else :class:`StreamError`."""
        if self._free:
            return self._free.pop()
        if in_place is not None:
            return in_place
        raise StreamError(f"{self.name}: every shard buffer is in use ({len(self.buffers)}); "
                          "this is a bug in int8store's bookkeeping, please report it")

    def give_back(self, buffer):
        """``buffer`` is free again (giving it back twice is harmless)."""
        if all(buffer is not free for free in self._free):
            self._free.append(buffer)

    def reset(self, keep=None):
        """Every buffer free but ``keep`` (the one in the shared variables):
        what holds once nothing is being read."""
        self._free = [buffer for buffer in self.buffers if buffer is not keep]

    @property
    def n_free(self):
        return len(self._free)


def shared_memory_available():
    """Whether buffers can be shared with a reading process here (Linux's memfd_create)."""
    return hasattr(os, "memfd_create")


def _shared_memory(count, rows, row_bytes):
    """``count`` descriptors of anonymous shared memory, each sized for a
    buffer; on any failure, those already made are closed."""
    fds = []
    try:
        for i in range(count):
            fds.append(os.memfd_create(f"int8store-shard-{i}"))
            os.ftruncate(fds[-1], _buffer_bytes(rows, row_bytes))
    except BaseException:
        _close_all(fds)
        raise
    return fds


def _order_offset(rows, row_bytes):
    return -(-rows * row_bytes // 8) * 8  # the order vector aligned after the codes


def _buffer_bytes(rows, row_bytes):
    return max(1, _order_offset(rows, row_bytes) + 4 * rows)


def buffer_views(fd, rows, row_bytes):
    """The codes ``(rows, row_bytes)`` and the order ``(rows,)`` of the
    buffer in shared memory ``fd`` (both processes map it so). The arrays
    keep the mapping alive."""
    data = np.frombuffer(mmap.mmap(fd, _buffer_bytes(rows, row_bytes)), np.uint8)
    offset = _order_offset(rows, row_bytes)
    return (data[:rows * row_bytes].view(np.int8).reshape(rows, row_bytes),
            data[offset:offset + 4 * rows].view(np.int32))


def _close_all(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
