"""Reading a store's shards in a process of its own, into memory shared with
the trainer.

Why a process: the compiled training step (PyTensor's and Aesara's C
virtual machines) holds the GIL for the whole of each call, so a reading
*thread*, which needs the GIL between its GIL-free calls (a read, a hash,
the shuffling copy: about twenty a shard), waits for the steps and makes
them wait in turn: prefetching in threads was slower than not prefetching
for a model whose steps are short (bench/streaming.py). A process has its
own GIL; the trainer only writes a request line and reads a reply line.

The shard buffers are anonymous shared memory (``memfd_create``, Linux),
mapped by both processes; the child inherits their descriptors, so there
is nothing to name, clean up or leak: the memory goes when both have
closed them. The child runs in a session of its own and ignores SIGINT
(Ctrl-C is the trainer's to handle, even while the child starts), and exits
when its input closes, which also happens when the trainer dies.

Protocol, one line each way per shard: ``buffer epoch index start stop`` in,
``ok`` or ``error MESSAGE`` out, in order. A shuffled shard's order is
drawn by the trainer, which puts the shard's labels in it, and written
beside the buffer (each buffer holds a shard's codes and its order): the
reader follows it, and nothing but the trainer defines it.
"""

import mmap
import os
import signal
import sys
import weakref

import numpy as np

from ..runtime import processes

__all__ = ["available", "SharedBuffers", "ShardProcess"]


def available():
    """Whether shards can be read in a process here (Linux's memfd_create)."""
    return hasattr(os, "memfd_create")


class SharedBuffers:
    """``count`` int8 arrays of ``shape`` (``arrays``) in anonymous shared
    memory, each with an int32 vector of ``shape[0]`` beside it (``orders``:
    a shuffled shard's order); their descriptors (``fds``) are for the
    reading process. Closed when this object is collected (the arrays keep
    their mappings alive meanwhile)."""

    def __init__(self, count, shape):
        self.fds, self.arrays, self.orders = [], [], []
        for i in range(count):
            fd = os.memfd_create(f"int8store-shard-{i}")
            os.ftruncate(fd, _buffer_bytes(*shape))
            self.fds.append(fd)
            codes, order = _buffer_views(fd, *shape)
            self.arrays.append(codes)
            self.orders.append(order)
        weakref.finalize(self, _close_all, list(self.fds))

    def index(self, array):
        return next(i for i, a in enumerate(self.arrays) if a is array)


def _order_offset(rows, row_bytes):
    return -(-rows * row_bytes // 8) * 8  # the order vector aligned after the codes


def _buffer_bytes(rows, row_bytes):
    return max(1, _order_offset(rows, row_bytes) + 4 * rows)


def _buffer_views(fd, rows, row_bytes):
    """The codes ``(rows, row_bytes)`` and the order ``(rows,)`` of the
    buffer in shared memory ``fd`` (either process maps it so)."""
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


class ShardProcess:
    """The reading process of one streamed split (see the module docstring).

    ``submit(buffer, epoch, index, start, stop)`` asks for a shard (with
    ``shuffled``, in the order written beside the buffer);
    ``wait()`` returns when the reply for the oldest shard asked for has
    come, ``take()`` reads it (raising with the reader's message if it
    could not read the shard); ``close()`` lets the reader finish
    what it was asked and ends it (also done when this object is collected,
    or at exit)."""

    def __init__(self, store, split, shuffled, delay, buffers):
        shape = buffers.arrays[0].shape
        # The reader checks that the file at the path is still the store the
        # trainer opened (same manifest): its labels came from that one.
        args = [store.file, store.manifest_digest, split, "shuffled" if shuffled else "-",
                repr(float(delay)), shape[0], shape[1], *buffers.fds]
        self._process = processes.start("int8store.streaming.shard_process", args,
                                         pass_fds=buffers.fds)
        # A stream dropped without close() (or alive at exit) ends its reader too.
        self.close = weakref.finalize(self, processes.end, self._process, 30)

    def submit(self, buffer, epoch, index, start, stop):
        """Ask for shard ``index`` (examples ``[start, stop)``) in ``buffer``,
        in the order in the buffer's ``orders`` vector if the split is shuffled."""
        try:
            self._process.stdin.write(b"%d %d %d %d %d\n" % (buffer, epoch, index, start, stop))
            self._process.stdin.flush()
        except OSError:
            pass  # the reader has ended: wait() says so, for this shard

    def wait(self):
        """Return once the oldest reply can be read (or the reader has
        ended): interrupted here, nothing has been read."""
        self._process.stdout.peek(1)

    def take(self):
        """Read the oldest reply: return for a shard read, raise
        :class:`ShardReadError` with the reader's message otherwise."""
        reply = self._process.stdout.readline()
        if reply == b"ok\n":
            return
        if reply.startswith(b"error "):
            raise ShardReadError(reply[6:].decode("utf-8", "replace").rstrip("\n"))
        code = self._process.wait()
        raise ShardReadError(f"the process reading the shards ended (exit status {code})")


class ShardReadError(Exception):
    """What the reading process reported."""


def _serve(argv):
    from ..store.reader import changed_store_error
    from .split import StoreShards, inverse

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    path, digest, split, ordering, delay, rows, row_bytes, *fds = argv
    shuffled = ordering == "shuffled"
    buffers = [_buffer_views(int(fd), int(rows), int(row_bytes)) for fd in fds]
    source = None
    for line in sys.stdin.buffer:
        buffer, epoch, index, start, stop = map(int, line.split())
        try:
            if source is None:
                opened = StoreShards(path, split, delay=float(delay))
                if opened.store.manifest_digest != digest:
                    raise changed_store_error(path)
                source = opened  # only once it is the trainer's store
            (codes, order), count = buffers[buffer], stop - start
            positions = inverse(order[:count]) if shuffled else None
            source.read(start, stop, codes[:count], positions)
            codes[count:] = 0  # the last shard's padding
            reply = b"ok\n"
        except Exception as error:  # noqa: BLE001 - reported to the trainer, which raises it
            reply = b"error " + " ".join(str(error).split()).encode() + b"\n"
        sys.stdout.buffer.write(reply)
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    _serve(sys.argv[1:])
