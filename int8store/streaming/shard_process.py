"""Reading a store's shards in a process of its own, into memory shared with
the trainer.

Why a process: the compiled training step (PyTensor's and Aesara's C
virtual machines) holds the GIL for the whole of each call, so a reading
*thread*, which needs the GIL between its GIL-free calls (a read, a hash,
the shuffling copy: about twenty a shard), waits for the steps and makes
them wait in turn: prefetching in threads was slower than not prefetching
for a model whose steps are short (bench/streaming.py). A process has its
own GIL; the trainer only writes a request line and reads a reply line.

The buffers are the pool's shared memory (:mod:`.buffers`). The child runs
in a session of its own and ignores SIGINT (Ctrl-C is the trainer's to
handle, even while the child starts), and exits when its input closes,
which also happens when the trainer dies.

Protocol, one line each way per shard, answered in order:
``slot epoch index start stop`` in; ``ok slot index`` or ``error slot index
MESSAGE`` out. The replies name what they answer, so that nothing can pair
a reply with the wrong shard, and they travel on the child's original
standard output, to which nothing else writes: the child points its file
descriptor 1 at standard error first, so that whatever a library prints
cannot be taken for a reply. A shuffled shard's order is drawn by the
trainer, which puts the shard's labels in it, and written beside the buffer
(:attr:`ShardBuffer.order`): the reader follows it, and nothing but the
trainer defines it.

Every wait is bounded: a reply must come within :data:`REPLY_TIMEOUT`
seconds of being waited for, and a child asked to end is killed if it has
not ended within :data:`END_TIMEOUT` seconds (by then nothing it wrote is
used: its buffers are free again only once it has ended).
"""

import os
import select
import signal
import subprocess
import sys
import time
import weakref

from ..errors import StreamError
from ..runtime import processes
from .buffers import buffer_views

__all__ = ["ShardProcess", "ShardReadError", "REPLY_TIMEOUT", "END_TIMEOUT"]

#: Seconds the trainer waits for the reply about one shard before it gives up
#: on the reading process (killed; the error names the shard).
REPLY_TIMEOUT = 120.0
#: Seconds a reading process asked to end may take to finish what it was asked.
END_TIMEOUT = 30.0
_MAX_REPLY = 64 << 10  # the longest reply line read


class ShardReadError(Exception):
    """What the reading process reported about a shard."""


class ShardProcess:
    """The reading process of one streamed split (see the module docstring).

    :meth:`submit` asks for a shard; :meth:`wait_reply` returns once the
    reply about the oldest shard asked for has begun to come
    (:class:`StreamError` if the process did not answer in time), and
    :meth:`take` reads it, with interrupts deferred by the caller (raising
    :class:`ShardReadError` with the reader's message if it could not read
    the shard, :class:`StreamError` if it answered out of turn or ended);
    :meth:`end` lets it finish what it was asked and ends it (also done when
    this object is collected, or at exit)."""

    def __init__(self, store, split, shuffled, delay, pool, rows, row_bytes, reply_timeout=None):
        # The reader checks that the file at the path is still the store the
        # trainer opened (same manifest): its labels came from that one.
        args = [store.file, store.manifest_digest, split, "shuffled" if shuffled else "-",
                repr(float(delay)), rows, row_bytes, *pool.fds]
        self.reply_timeout = float(REPLY_TIMEOUT if reply_timeout is None else reply_timeout)
        try:
            self._process = processes.start("int8store.streaming.shard_process", args,
                                             pass_fds=pool.fds)
        except OSError as error:
            raise StreamError(f"{split}: cannot start the process reading the shards "
                              f"({error.strerror or error})") from error
        self._replies = self._process.stdout.fileno()
        self._received = bytearray()
        # A stream dropped without end() (or alive at exit) ends its reader too.
        self.end = weakref.finalize(self, processes.end, self._process, END_TIMEOUT)

    def submit(self, slot, epoch, index, start, stop):
        """Ask for shard ``index`` (examples ``[start, stop)``) in buffer ``slot``,
        in the order written beside the buffer if the split is shuffled."""
        try:
            self._process.stdin.write(b"%d %d %d %d %d\n" % (slot, epoch, index, start, stop))
            self._process.stdin.flush()
        except OSError:
            pass  # the reader has ended: take() says so, for this shard

    def wait_reply(self):
        """Return once the reply about the oldest shard asked for has begun
        to come (nothing is read: interrupted here, nothing is lost);
        :class:`StreamError` if the process did not answer within
        :attr:`reply_timeout` seconds (it is then stopped)."""
        if b"\n" in self._received:
            return
        if not select.select([self._replies], [], [], self.reply_timeout)[0]:
            self._kill()
            raise StreamError("the process reading the shards did not answer "
                              f"within {self.reply_timeout:g} s; it was stopped")

    def take(self, slot, index):
        """Read the reply :meth:`wait_reply` waited for, about shard ``index``
        in buffer ``slot`` (the oldest one asked for), waiting for the rest
        of its line if need be: return if the shard was read, raise
        :class:`ShardReadError` with the reader's message if not,
        :class:`StreamError` if the reply is about another shard or the
        process ended."""
        deadline = time.monotonic() + self.reply_timeout
        while b"\n" not in self._received:
            if len(self._received) > _MAX_REPLY:
                self._kill()
                raise StreamError("the process reading the shards sent a reply "
                                  "line longer than 64 KiB; it was stopped")
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._replies], [], [], remaining)[0]:
                self._kill()
                raise StreamError("the process reading the shards did not finish its reply "
                                  f"within {self.reply_timeout:g} s; it was stopped")
            data = os.read(self._replies, 1 << 16)
            if not data:
                try:
                    code = self._process.wait(timeout=END_TIMEOUT)
                except subprocess.TimeoutExpired:
                    self._kill()
                    code = self._process.returncode
                raise StreamError("the process reading the shards ended "
                                  f"(exit status {code})")
            self._received += data
        line, _, rest = bytes(self._received).partition(b"\n")
        self._received = bytearray(rest)
        words = line.split(b" ", 3)
        if len(words) < 3 or words[0] not in (b"ok", b"error") \
                or words[1:3] != [b"%d" % slot, b"%d" % index]:
            self._kill()
            raise StreamError("the process reading the shards answered "
                              f"{line[:60]!r} where the reply about shard {index} was due; "
                              "it was stopped")
        if words[0] == b"error":
            message = words[3] if len(words) > 3 else b"(no message)"
            raise ShardReadError(message.decode("utf-8", "replace"))

    def _kill(self):
        self._process.kill()
        self.end()


def _serve(argv):
    from ..store.reader import check_same_store
    from .sources import StoreShards, fill_shard

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Replies go to the original standard output only; anything else that
    # writes to descriptor 1 (a library's message) goes to standard error.
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    path, digest, split, ordering, delay, rows, row_bytes, *fds = argv
    shuffled = ordering == "shuffled"
    buffers = [buffer_views(int(fd), int(rows), int(row_bytes)) for fd in fds]
    source = None
    for line in sys.stdin.buffer:
        slot, epoch, index, start, stop = map(int, line.split())
        try:
            if source is None:
                opened = StoreShards(path, split, delay=float(delay))
                check_same_store(path, digest)  # (after opening: the store opened is the one checked)
                source = opened  # only once it is the trainer's store
            codes, order = buffers[slot]
            fill_shard(source, start, stop, codes, order[:stop - start] if shuffled else None)
            reply = b"ok %d %d\n" % (slot, index)
        except Exception as error:  # noqa: BLE001 - reported to the trainer, which raises it
            reply = b"error %d %d " % (slot, index) + " ".join(str(error).split()).encode() + b"\n"
        replies.write(reply)
        replies.flush()


if __name__ == "__main__":
    _serve(sys.argv[1:])
