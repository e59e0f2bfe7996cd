"""The readers of a streamed split: how each shard gets ready for the
shared variables, behind one small interface.

A pass over the split (:class:`~.split.StreamingSplit`) asks a reader to
:meth:`~Reader.prepare` the shards it will need (a *ticket* each, in the
order they will be delivered), :meth:`~Reader.wait` for the oldest one
(interruptible: nothing changes hands while waiting), then
:meth:`~Reader.collect` it (a :class:`Prepared` shard, which the stream puts
in the shared variables) or :meth:`~Reader.release` it unused. A reader
owns the tickets it has handed out until they are collected or released;
:meth:`~Reader.close` gives back everything it still holds, once nothing is
written into it any more, and may be called at any time, more than once.

* :class:`LentReader` lends each whole shard as a view of the source's rows
  (a store's mapped file), no copy; the kernel reads the next ones ahead.
* :class:`SerialReader` copies each shard, when it is needed, in the
  caller's thread, into the split's one buffer.
* :class:`ThreadReader` copies shards ahead in worker threads.
* :class:`ProcessReader` copies a store's shards ahead in a process of its
  own (:mod:`.shard_process`), into shared memory.

A copy is file reads, checksums (XXH3-128, or SHA-256 for format 2) and one
numpy copy of each row to its shuffled place.

Bookkeeping that must not be cut in half (a buffer claimed and its ticket
recorded; a reply read and its ticket marked) runs with interrupts deferred
(:func:`int8store.runtime.interrupts.interrupts_deferred`).
"""

from collections import deque
from concurrent.futures import ThreadPoolExecutor, wait as wait_for
from dataclasses import dataclass

import numpy as np

from ..errors import StreamError
from ..runtime.interrupts import interrupts_deferred
from .sources import fill_labels, fill_shard

__all__ = ["Prepared", "LentReader", "SerialReader", "ThreadReader", "ProcessReader"]


@dataclass(eq=False)
class Prepared:
    """A shard ready for the shared variables: ``count`` examples from
    ``start`` (shard ``index``), its ``codes`` and ``labels`` (``shard_size``
    rows each), the ``order`` the step takes its rows in (a shuffled shard
    lent in the split's order; else None), and the pool ``buffer`` holding
    it (None: rows lent by the source). ``held``: whether it still holds
    its buffer or lent pages."""

    index: int
    start: int
    count: int
    codes: np.ndarray
    labels: np.ndarray
    order: object = None
    buffer: object = None
    held: bool = True


@dataclass(eq=False)
class _Ticket:
    epoch: int
    index: int
    buffer: object = None  # the pool buffer it is read into, if any
    future: object = None  # ThreadReader: the read
    done: bool = False  # ProcessReader: the reply has come
    error: object = None  # ProcessReader: what the reader reported
    prepared: object = None  # SerialReader, LentReader: the shard, once read
    hinted: bool = False  # LentReader: the kernel was asked to read it ahead


class Reader:
    """What every reader does (see the module docstring).

    Parameters
    ----------
    layout : ShardLayout
    source : ArrayShards or StoreShards
    pool : BufferPool or None
    """

    #: The name :attr:`StreamingSplit.reader` reports.
    name = None

    def __init__(self, layout, source, pool):
        self.layout, self.source, self.pool = layout, source, pool
        self._outstanding = deque()  # tickets handed out, not yet collected or released

    def begin_pass(self):
        """A pass starts (see :class:`LentReader`)."""

    def check_kept(self):
        """A pass starts over the one shard the shared variables keep (see
        :class:`LentReader`): a shard copied into memory needs nothing."""

    def prepare(self, epoch, index):
        """A ticket for shard ``index`` of epoch ``epoch``."""
        ticket = _Ticket(epoch, index)
        self._outstanding.append(ticket)
        return ticket

    def reads_in_place(self, ticket):
        """Whether the ticket's shard is read, when waited for, into the
        buffer of the shard in the shared variables if no other is free."""
        return False

    def wait(self, ticket):
        """Return once the ticket's shard can be collected."""

    def collect(self, ticket):
        """The ticket's :class:`Prepared` shard (the ticket is spent), or
        :class:`StreamError` naming the shard (its buffer is given back)."""
        raise NotImplementedError

    def release(self, ticket):
        """Give back what the ticket holds, unused."""
        self._forget(ticket)
        if ticket.buffer is not None:
            self.pool.give_back(ticket.buffer)

    def done_with(self, prepared):
        """The prepared shard left the shared variables (or was copied to
        the device): its buffer is free again. Idempotent."""
        if prepared.held:
            prepared.held = False
            if prepared.buffer is not None:
                self.pool.give_back(prepared.buffer)

    def close(self):
        """Give back everything still held (nothing is written into it any
        more); the reader can prepare shards again afterwards."""
        with interrupts_deferred():
            while self._outstanding:
                self.release(self._outstanding[0])

    def _forget(self, ticket):
        try:
            self._outstanding.remove(ticket)
        except ValueError:
            pass

    def _own_labels(self, buffer, epoch, index):
        """The labels of the ticket's rows into ``buffer`` (shuffled if the
        split is): ``(start, stop, order)``."""
        start, stop = self.layout.bounds(index, epoch)
        order, own = self.layout.shuffled_labels(self.source.labels, epoch, index)
        fill_labels(self.source.labels, start, stop, buffer.labels, own)
        return start, stop, order

    def _copy(self, ticket, buffer):
        """Read the ticket's shard into ``buffer`` in the caller's thread."""
        start, stop, order = self._own_labels(buffer, ticket.epoch, ticket.index)
        try:
            fill_shard(self.source, start, stop, buffer.codes, order)
        except Exception as error:  # noqa: BLE001 - raised again, naming the shard
            self.pool.give_back(buffer)
            raise self.layout.error(ticket.index, error, ticket.epoch) from error
        return Prepared(ticket.index, start, stop - start, buffer.codes, buffer.labels, None, buffer)

    def _spent(self, ticket):
        self._forget(ticket)
        prepared, ticket.prepared = ticket.prepared, None
        if isinstance(prepared, BaseException):
            raise prepared
        return prepared


class SerialReader(Reader):
    """Each shard copied when it is waited for, in the caller's thread, into
    a free buffer (the split's one buffer, in place, between two steps)."""

    name = "threads"  # (no thread: "threads" with no prefetch, as before)

    def reads_in_place(self, ticket):
        return True

    def wait(self, ticket):
        if ticket.prepared is None:
            buffer = self.pool.claim()
            try:
                ticket.prepared = self._copy(ticket, buffer)
            except StreamError as error:
                ticket.prepared = error

    def collect(self, ticket):
        return self._spent(ticket)

    def release(self, ticket):
        self._forget(ticket)
        if isinstance(ticket.prepared, Prepared):
            self.done_with(ticket.prepared)
        ticket.prepared = None


class LentReader(SerialReader):
    """Each whole shard lent as a view of the source's rows, checked when
    it is waited for: a store's chunks are checked in the mapped file once
    while the split stays mapped whole (one mark for the reader's life),
    each epoch when pages are given back after use (``release_pages``: a
    new mark each pass). The kernel is asked to read ahead the shards
    prepared behind the one waited for, each once, unless their pages are
    mapped here already (lent before, and kept). Only the split's short shard is copied, into the pool's
    one buffer."""

    name = "views"

    def __init__(self, layout, source, pool, release_pages):
        super().__init__(layout, source, pool)
        self.release_pages = release_pages
        self._mark = None
        # The examples lent while pages are kept (None: pages are given back):
        # their pages are all here (a shard's bounds move with the short shard).
        self._mapped = None if release_pages else np.zeros(layout.n_examples, dtype=bool)

    def begin_pass(self):
        if self.release_pages or self._mark is None:
            self._mark = object()

    def check_kept(self):
        # The kept shard is the file's pages: written in place since, checked again.
        self.source.check_unchanged(self._mark)

    def reads_in_place(self, ticket):
        start, stop = self.layout.bounds(ticket.index, ticket.epoch)
        return stop - start < self.layout.shard_size

    def wait(self, ticket):
        if ticket.prepared is None:
            if self.reads_in_place(ticket):
                super().wait(ticket)
            else:
                ticket.prepared = self._lend(ticket)
            if isinstance(ticket.prepared, BaseException):
                return  # (collect raises it)
            if self._mapped is not None:
                start, stop = self.layout.bounds(ticket.index, ticket.epoch)
                self._mapped[start:stop] = True
        for behind in self._outstanding:
            if behind is ticket or behind.hinted:
                continue
            start, stop = self.layout.bounds(behind.index, behind.epoch)
            if self._mapped is None or not self._mapped[start:stop].all():
                self.source.read_ahead(start, stop)
                behind.hinted = True

    def _lend(self, ticket):
        start, stop = self.layout.bounds(ticket.index, ticket.epoch)
        try:
            codes = self.source.lend(start, stop, self._mark)
        except Exception as error:  # noqa: BLE001 - raised again, naming the shard
            return self.layout.error(ticket.index, error, ticket.epoch)
        order, labels = self.layout.shuffled_labels(self.source.labels, ticket.epoch, ticket.index)
        if labels is None:
            labels = self.source.labels[start:stop]
        return Prepared(ticket.index, start, stop - start, codes, labels, order)

    def done_with(self, prepared):
        if prepared.held and prepared.buffer is None and self.release_pages:
            self.source.release(prepared.codes)
        super().done_with(prepared)


class ThreadReader(Reader):
    """Shards copied ahead by ``workers`` threads, each into a buffer of its
    own claimed when the shard is prepared."""

    name = "threads"

    def __init__(self, layout, source, pool, workers):
        super().__init__(layout, source, pool)
        self.workers = workers
        self._executor = None

    def prepare(self, epoch, index):
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.workers,
                                                thread_name_prefix=f"int8store-{self.layout.name}")
        with interrupts_deferred():  # claimed, recorded and asked for, or none of them
            buffer = self.pool.claim()
            ticket = _Ticket(epoch, index, buffer)
            start, stop, order = self._own_labels(buffer, epoch, index)
            ticket.future = self._executor.submit(fill_shard, self.source, start, stop,
                                                  buffer.codes, order)
            self._outstanding.append(ticket)
        return ticket

    def wait(self, ticket):
        wait_for([ticket.future])

    def collect(self, ticket):
        self._forget(ticket)
        error = ticket.future.exception()
        if error is not None:
            self.pool.give_back(ticket.buffer)
            raise self.layout.error(ticket.index, error, ticket.epoch) from error
        start, stop = self.layout.bounds(ticket.index, ticket.epoch)
        return Prepared(ticket.index, start, stop - start, ticket.buffer.codes,
                        ticket.buffer.labels, None, ticket.buffer)

    def release(self, ticket):
        # A read under way still writes into the buffer: wait for it.
        if not ticket.future.cancel():
            wait_for([ticket.future])
        super().release(ticket)

    def close(self):
        with interrupts_deferred():
            executor, self._executor = self._executor, None
            if executor is not None:
                executor.shutdown(wait=True, cancel_futures=True)
            super().close()  # every read has ended or was cancelled


class ProcessReader(Reader):
    """A store's shards copied ahead by a process of its own
    (:mod:`.shard_process`) into the pool's shared memory; the labels (and
    a shuffled shard's order) are put in place here. The process starts
    with the first shard prepared and ends with :meth:`close`."""

    name = "process"

    def __init__(self, layout, source, pool, shuffled):
        super().__init__(layout, source, pool)
        self.shuffled = shuffled
        self._process = None
        self._waiting = deque()  # tickets asked of the process, in order

    def prepare(self, epoch, index):
        if self._process is None:
            from .shard_process import ShardProcess

            codes = self.pool.buffers[0].codes
            self._process = ShardProcess(self.source.store, self.source.name, self.shuffled,
                                         self.source.delay, self.pool, *codes.shape)
        with interrupts_deferred():  # asked and recorded, or neither
            buffer = self.pool.claim()
            ticket = _Ticket(epoch, index, buffer)
            start, stop, order = self._own_labels(buffer, epoch, index)
            if order is not None:  # the reader follows the order the labels are in
                buffer.order[:len(order)] = order
            self._process.submit(buffer.slot, epoch, index, start, stop)
            self._outstanding.append(ticket)
            self._waiting.append(ticket)
        return ticket

    def wait(self, ticket):
        # The replies of the tickets before it are read (with interrupts
        # deferred: a reply read and its ticket done, or neither); its own is
        # waited for here (interrupted, nothing is lost) and read by collect,
        # in the deferred block that loads the shard.
        while not ticket.done:
            first = self._waiting[0]
            try:
                self._process.wait_reply()
            except StreamError as error:
                self._ended(error)
                continue
            if first is ticket:
                return
            with interrupts_deferred():
                self._take(first)

    def _take(self, first):
        """Read the reply about the oldest ticket asked for (interrupts deferred)."""
        from .shard_process import ShardReadError

        try:
            self._process.take(first.buffer.slot, first.index)
        except ShardReadError as error:
            first.error = error
        except StreamError as error:
            self._ended(error)
            return
        self._waiting.popleft()
        first.done = True

    def _ended(self, error):
        """The process ended (or was stopped): no reply will come, and
        nothing writes into the buffers of the shards it was asked for."""
        with interrupts_deferred():
            process, self._process = self._process, None
            process.end()
            for waiting in self._waiting:
                waiting.error, waiting.done = error, True
            self._waiting.clear()

    def collect(self, ticket):
        if not ticket.done:  # (waited for: its reply has begun to come)
            self._take(ticket)
        self._forget(ticket)
        if ticket.error is not None:
            self.pool.give_back(ticket.buffer)
            raise self.layout.error(ticket.index, ticket.error, ticket.epoch)
        start, stop = self.layout.bounds(ticket.index, ticket.epoch)
        return Prepared(ticket.index, start, stop - start, ticket.buffer.codes,
                        ticket.buffer.labels, None, ticket.buffer)

    def release(self, ticket):
        if not ticket.done:  # the process writes into its buffer until it replies
            self.wait(ticket)
            if not ticket.done:
                with interrupts_deferred():
                    self._take(ticket)
        super().release(ticket)

    def close(self):
        with interrupts_deferred():
            process, self._process = self._process, None
            if process is not None:
                process.end()  # it finishes what it was asked, or is killed; then writes nothing
            self._waiting.clear()
            for ticket in self._outstanding:
                ticket.done = True
            super().close()
