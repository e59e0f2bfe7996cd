"""Sets larger than the device: a split fed to the device shard by shard,
with background prefetch.

A :class:`StreamingSplit` keeps one shard on the device: an int8 shared
variable (and its labels) of a fixed shape, ``shard_size`` examples, read by
the compiled functions through the usual float view (``stream.x``,
``stream.y``: the classic slices in ``givens`` work unchanged). Each epoch
visits the shards in a new order, and the examples of each shard in a new
order, both drawn from a seed (the same seed, the same orders; no seed keeps
the split's own order). :meth:`StreamingSplit.epoch` yields each shard once
it is in the shared variables (C backend: the value is replaced, not copied;
JAX mode: placed on the device) while workers read, check and
prepare the next shards, at most ``prefetch`` of them ahead (across the end
of an epoch too): memory stays bounded by ``(prefetch + 2) x shard_size``
examples. :meth:`StreamingSplit.close` (or a ``with`` block) stops the
workers; leaving an epoch early does too.

The last shard holds fewer real examples than ``shard_size`` (its rows are
padded with zeros to keep one static shape): :class:`Shard` says how many
are real, and every example is visited exactly once per epoch.

Who reads: on the C backend a shard is not copied at all: each whole shard
is lent as a view of the source's rows, for a store a view of the file
mapped into memory (:mod:`int8store.store.mapped`), whose chunks are
checked in place before the step reads them (once while the split stays
mapped whole, each epoch when its pages are given back after use). A
shuffled split's shard is lent in the split's order with the shard's
shuffled order beside it (:attr:`SharedDataset.order`): the step gathers
each minibatch's rows by it and decodes them in the same pass
(:mod:`int8store.backend.gather`), and the labels are put in that order on
the host (4 bytes an example). Otherwise (JAX mode, or ``reader`` asks)
shards are copied into buffers, shuffled if asked: a
store's shards are read ahead by a process of its own
(:mod:`int8store.streaming.shard_process`, Linux) into memory shared with this one,
because the compiled step holds the GIL for its whole call and a reading
thread, needing the GIL between its GIL-free calls, made training wait;
otherwise (shards already in memory, no prefetch, other systems) by
threads. Either way reading is file reads, checksums (XXH3-128, or SHA-256
for format 2) and one numpy copy of each row to its shuffled place. A
store is read without h5py (which holds one global lock around every HDF5
call): the manifest gives each chunk's byte range and checksum
(:mod:`int8store.store.reader`), and each read opens its own file handle. The
shards in flight can be bounded in bytes too (``max_prefetch_bytes``).
"""

import queue
import sys
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError, StreamError

__all__ = ["StreamingSplit", "ArrayShards", "StoreShards", "Shard", "StreamError",
           "shard_size_for", "fitting_shard_size", "stream"]

_LABEL_BYTES = 4


@dataclass(frozen=True)
class Shard:
    """A shard now in the device's shared variables: its ``number`` in this
    epoch's order, its ``index`` in the split, its first example ``start`` in
    the split and its ``count`` of real examples (the rest is padding)."""

    number: int
    index: int
    start: int
    count: int


class ArrayShards:
    """Shards of int8 codes and labels already in host memory."""

    #: Rows in the split's order can be lent as views (see :meth:`lend`).
    can_lend = True

    def __init__(self, codes, labels, name="train", delay=0.0):
        self.codes, self.labels = np.asarray(codes), np.asarray(labels, dtype=np.int32)
        self.name, self.delay = name, delay
        self.n_examples, self.row_shape = len(self.labels), self.codes.shape[1:]

    def lend(self, start, stop, mark=None):
        """Codes of examples ``[start, stop)``, ``(stop - start, row bytes)``,
        without a copy."""
        if self.delay:
            time.sleep(self.delay)
        return self.codes[start:stop].reshape(stop - start, -1)

    def release(self, rows):
        """Nothing to give back: the rows are the caller's arrays."""

    def read_ahead(self, start, stop):
        """Nothing to read: the rows are in memory."""

    def read(self, start, stop, out, positions=None):
        """Codes of examples ``[start, stop)`` into ``out`` (row ``positions[i]``
        for example ``start + i`` when given), and their labels."""
        if self.delay:
            time.sleep(self.delay)  # an artificially slow producer (benchmarks)
        rows = self.codes[start:stop].reshape(len(out), -1)
        flat = out.reshape(len(out), -1)
        if positions is None:
            flat[...] = rows
        else:
            flat[positions] = rows
        return self.labels[start:stop]


class StoreShards:
    """Shards of a store's split, read from the file chunk by chunk, each
    chunk checked against its checksum as it is read (a shard's rows may span
    several stored chunks, or part of one), straight into the shard's buffer
    in the order asked. Only the split's labels are held in memory
    (4 bytes an example); the images stay in the file."""

    def __init__(self, path, split="train", delay=0.0, store=None):
        from ..store.reader import open_store

        self.store = store if store is not None else open_store(path, verify=False)
        self.name, self.delay = split, delay
        self.labels = self.store.read_labels(split)
        self.n_examples, self.row_shape = len(self.labels), self.store.image_shape
        # One chunk buffer per reading thread: a shard that starts in the chunk
        # the thread's last shard ended in takes those rows from it.
        self._scratch = threading.local()
        self._mapped, self._mapping = None, threading.Lock()

    @property
    def can_lend(self):
        """Whether rows in the split's order can be lent from a mapping of
        the file (its chunks lie end to end, as int8store writes them)."""
        from ..store.mapped import MappedSplit

        return MappedSplit.possible(self.store, self.name)

    def lend(self, start, stop, mark=None):
        """Examples ``[start, stop)`` as a read-only view of the mapped file,
        ``(stop - start, row bytes)``, each chunk they touch checked first
        (once per ``mark``: see :class:`~int8store.store.mapped.MappedSplit`)."""
        if self.delay:
            time.sleep(self.delay)
        return self._mapped_split().rows(start, stop, mark)

    def _mapped_split(self):
        with self._mapping:
            if self._mapped is None:
                from ..store.mapped import MappedSplit

                self._mapped = MappedSplit(self.store, self.name)
        return self._mapped

    def release(self, rows):
        """Unmap the pages of rows lent once they are no longer read (they
        stay in the page cache)."""
        self._mapped.release(rows)

    def read_ahead(self, start, stop):
        """Ask the kernel to read examples ``[start, stop)`` into the page
        cache in the background, for :meth:`lend` to find them there."""
        self._mapped_split().read_ahead(start, stop)

    def read(self, start, stop, out, positions=None):
        """As :meth:`ArrayShards.read`."""
        if self.delay:
            time.sleep(self.delay)
        scratch = getattr(self._scratch, "buffer", None)
        if scratch is None:
            from ..store.reader import ChunkBuffer

            scratch = self._scratch.buffer = ChunkBuffer(self.store.chunk_bytes(self.name))
        self.store.read_rows(self.name, start, stop, out, scratch=scratch, positions=positions)
        return self.labels[start:stop]


def shard_size_for(max_device_bytes, row_bytes, batch_size=1):
    """Examples per shard whose images and labels fit ``max_device_bytes``, a
    multiple of ``batch_size`` (0 if not even one batch fits)."""
    rows = int(max_device_bytes) // (int(row_bytes) + _LABEL_BYTES)
    return rows // batch_size * batch_size


def fitting_shard_size(max_device_bytes, row_bytes, batch_size=1):
    """:func:`shard_size_for` whole batches, or else what fits (the caller
    then cuts its batch size); raises if not even one example fits."""
    size = shard_size_for(max_device_bytes, row_bytes, batch_size) or \
        shard_size_for(max_device_bytes, row_bytes)
    if size < 1:
        raise ArgumentError(f"max_device_bytes={max_device_bytes}: not even one example of "
                            f"{row_bytes + _LABEL_BYTES} bytes fits")
    return size


def shuffle_order(seed, epoch, index, count):
    """The order of shard ``index``'s ``count`` examples in epoch ``epoch``:
    row ``i`` of the shard holds its example ``order[i]`` (int32). A
    stateless shuffle keyed by ``(seed, epoch, index)``
    (:func:`int8store.backend.shuffle.permutation`), computed in C: the
    trainer draws one between two steps."""
    from ..backend.permutation_op import permutation

    return permutation(count, seed, epoch, index)


def _shuffled(labels, seed, epoch, index):
    """``(order, labels[order])`` of shard ``index`` (:func:`shuffle_order`),
    in one C call."""
    from ..backend.permutation_op import shuffled

    return shuffled(labels, seed, epoch, index)


def inverse(order):
    """Where each example of a shard goes, for a shard in ``order``: row
    ``positions[i]`` holds example ``i``."""
    positions = np.empty_like(order)
    positions[order] = np.arange(len(order), dtype=order.dtype)
    return positions


class StreamingSplit:
    """A split fed to the device one shard at a time (see the module docstring).

    Parameters
    ----------
    source : ArrayShards or StoreShards
    shard_size : int
        Examples per shard (a multiple of the batch size, for training).
    encoding, image_shape, normalize, dtype, dataset_mean
        As for :class:`~int8store.SharedDataset`: the view of each shard
        (``normalize="dataset"`` needs the whole split's ``dataset_mean``).
    seed : int, optional
        Shuffle shards and examples within shards, differently each epoch.
    workers, prefetch : int
        Threads that read shards, and how many shards may be read ahead;
        ``prefetch=0`` reads each shard when it is needed, in the caller's
        thread, into the one buffer the split then has.
    reader : {"auto", "views", "threads", "process"}
        How shards are read: ``"views"`` lends each whole shard without
        copying it: a view of
        the source's rows, for a store a read-only view of the file mapped
        into memory, its chunks checked there when the shard is needed
        (once, or each epoch for a split larger than memory may hold),
        the next ``prefetch`` shards read ahead by the kernel (no worker
        threads); with a ``seed`` (C backend only), the step takes each
        minibatch's rows in the shard's shuffled order. Otherwise shards
        are copied into buffers, shuffled
        if asked, by ``workers`` threads or by one process of its own
        (:mod:`int8store.streaming.shard_process`: a store's shards, on
        Linux) that never contends with the training step for the GIL.
        ``"auto"``: views when possible, else the process for a store when
        prefetching, else threads.
    max_prefetch_bytes : int, optional
        The most bytes of shards in flight (read ahead, or being read): the
        prefetch is lowered to what fits, and a shard that alone does not
        fit is refused here, naming both sizes.
    mode : {"c", "jax"}
        Where the shared variables live.

    Host memory holds ``prefetch + 2`` shards (one when ``prefetch`` is 0):
    the one in the shared variables and those in flight. Shards lent as
    views of a mapped store take no buffer (only the split's short last
    shard, padded, is copied into one), and their pages are unmapped once
    they leave the shared variables, unless the whole split fits in those
    ``prefetch + 2`` shards.

    Examples
    --------
    >>> import numpy as np
    >>> from int8store import quantize
    >>> codes, enc = quantize(np.arange(20 * 4, dtype=np.uint8).reshape(20, 4))
    >>> stream = StreamingSplit(ArrayShards(codes, np.arange(20)), 8, enc, (4,), seed=1)
    >>> seen = []
    >>> for shard in stream.epoch(0):
    ...     seen += list(stream.y.get_value()[:shard.count])
    >>> sorted(seen) == list(range(20)), stream.n_shards
    (True, 3)
    >>> stream.close()  # its reading threads stop
    """

    def __init__(self, source, shard_size, encoding, image_shape=None, normalize="unit",
                 dtype=None, seed=None, workers=2, prefetch=2, mode="c", name=None,
                 dataset_mean=None, max_prefetch_bytes=None, reader="auto"):
        from ..dataset.shared import SharedDataset

        if int(shard_size) != shard_size or shard_size < 1:
            raise ArgumentError(f"shard_size={shard_size!r}: expected a positive integer")
        if workers < 1 or prefetch < 0:
            raise ArgumentError(f"workers={workers}, prefetch={prefetch}: expected at least one "
                                "worker and a prefetch of 0 or more")
        self.source, self.seed = source, seed
        self.name = name or source.name
        self.shard_size = min(int(shard_size), max(1, source.n_examples))
        row = int(np.prod(source.row_shape))
        self.shard_bytes = self.shard_size * (row + _LABEL_BYTES)
        if max_prefetch_bytes is not None:
            if self.shard_bytes > max_prefetch_bytes:
                raise ArgumentError(
                    f"{self.name}: a shard of {self.shard_size} examples takes {self.shard_bytes:,} "
                    f"bytes, more than the {int(max_prefetch_bytes):,} bytes allowed in flight: "
                    "use smaller shards or allow more memory")
            prefetch = min(prefetch, int(max_prefetch_bytes) // self.shard_bytes - 1)
        self.workers, self.prefetch, self.mode = workers, prefetch, mode
        self.reader = self._choose_reader(reader)
        # Shuffled shards lent in the split's order: the step gathers each
        # minibatch's rows by the shard's order (SharedDataset.order).
        ordered = self.reader == "views" and seed is not None
        self.dataset = SharedDataset(np.zeros((self.shard_size,) + tuple(source.row_shape), np.int8),
                                     np.zeros(self.shard_size, np.int32), encoding,
                                     normalize=normalize, image_shape=image_shape,
                                     name=self.name, dtype=dtype, dataset_mean=dataset_mean,
                                     ordered=ordered)
        self._identity = np.arange(self.shard_size, dtype=np.int32) if ordered else None
        if mode != "c":
            from ..backend.device import place
            place([self.dataset], mode)
        self.x, self.y = self.dataset.x, self.dataset.y
        # Shard buffers, reused: the one in the shared variables, and one for
        # each shard in flight (prefetch + 1); with no prefetch, one buffer,
        # read into in place. Memory stays bounded.
        count = self.prefetch + 2 if self.prefetch else 1
        held = count
        if self.reader == "views":  # a buffer only for the short last shard
            count = 0 if self.n_examples % self.shard_size == 0 else 1
        # Lent pages beyond the shards memory may hold are unmapped after use.
        self._drop_pages = self.reader == "views" and self.n_shards > held
        # The token lent chunks are checked under: one for the stream's life
        # when the split stays mapped whole (checked once, as a loaded split
        # is), a new one each epoch when its pages are given back after use.
        self._mark = None
        # Once an epoch has read a split kept mapped whole, its pages are all
        # mapped in this process: no more read-ahead hints (each cost the
        # kernel a walk over a shard's pages, some 40 us).
        self._all_pages_read = False
        if self.reader == "process":  # buffers the reading process maps too
            from .shard_process import SharedBuffers
            self._shared = SharedBuffers(count, (self.shard_size, row))
            codes = self._shared.arrays
        else:
            codes = [np.zeros((self.shard_size, row), np.int8) for _ in range(count)]
        self._buffers = [(array, np.zeros(self.shard_size, np.int32)) for array in codes]
        self._loaded = None
        self._free_all_but_loaded()
        self._pool, self._ahead, self._ahead_epoch = None, deque(), None
        # A split that is one shard in its own order is read once and kept.
        self._kept = self.n_shards == 1 and seed is None
        self._holds_all = False
        self._passes = 0  # evaluation passes (see evaluate)

    def _choose_reader(self, reader):
        from .shard_process import available

        if reader not in ("auto", "views", "threads", "process"):
            raise ArgumentError(f"reader={reader!r}: expected 'auto', 'views', 'threads' or 'process'")
        # Shuffled shards are lent on the C backend only (the step gathers
        # their rows on the host; JAX mode copies each shard to the device).
        lendable = (self.seed is None or self.mode == "c") and getattr(self.source, "can_lend", False)
        if reader == "views" and not lendable:
            raise ArgumentError(f"{self.name}: shards are lent as views from arrays or a store whose "
                                "chunks lie end to end, shuffled (a seed) only on the C backend "
                                "(mode 'c')")
        if reader == "views" or (reader == "auto" and lendable):
            return "views"
        possible = isinstance(self.source, StoreShards) and available() and self.prefetch > 0
        if reader == "process" and not possible:
            raise ArgumentError(f"{self.name}: a reading process needs a store's shards, "
                                "prefetch > 0 and Linux's memfd_create")
        return "process" if reader == "process" or (reader == "auto" and possible) else "threads"

    @property
    def n_examples(self):
        return self.source.n_examples

    @property
    def labels(self):
        """The whole split's labels (host memory, in the split's order)."""
        return self.source.labels

    @property
    def n_shards(self):
        return -(-self.n_examples // self.shard_size)

    def shard_order(self, epoch):
        """The shard indices in the order epoch ``epoch`` visits them."""
        if self.seed is None:
            return list(range(self.n_shards))
        from ..backend.permutation_op import permutation

        return permutation(self.n_shards, self.seed, epoch).tolist()

    def _claim(self, epoch, index):
        """A free buffer for shard ``index``, its labels already in place:
        ``(start, stop, order, codes, labels, in_place)``."""
        start = index * self.shard_size
        stop = min(start + self.shard_size, self.n_examples)
        # Shards read when they are needed, in the caller's thread (no
        # prefetch, or lent), read into the buffer in use if they need it:
        # nothing reads it meanwhile. Lent, the short last shard has the one
        # buffer, and a shuffled epoch may end with it and the next start
        # with it. Otherwise never empty: at most prefetch + 1 in flight.
        in_place = (self.prefetch == 0 or self.reader == "views") and self._loaded is not None \
            and self._owns(self._loaded)
        codes, labels = self._loaded if in_place else self._free.get()
        count = stop - start
        order, labels[:count] = (None, self.source.labels[start:stop]) if self.seed is None else \
            _shuffled(self.source.labels[start:stop], self.seed, epoch, index)
        labels[count:] = 0
        return start, stop, order, codes, labels, in_place

    def _prepare(self, epoch, index):
        """Shard ``index`` read into a free buffer, shuffled and padded, or
        lent whole (in a worker thread, or the caller's)."""
        start = index * self.shard_size
        if self.reader == "views" and start + self.shard_size <= self.n_examples:
            stop = start + self.shard_size
            try:
                codes = self.source.lend(start, stop, self._mark)
            except Exception as error:  # noqa: BLE001 - re-raised, naming the shard
                raise self._shard_error(index, start, stop, error) from error
            labels, order = self.source.labels[start:stop], None
            if self.seed is not None:  # the step takes the rows in this order
                order, labels = _shuffled(labels, self.seed, epoch, index)
            return index, start, self.shard_size, codes, labels, order
        start, stop, order, codes, labels, in_place = self._claim(epoch, index)
        count = stop - start
        try:
            # Read and shuffled in one pass: example start + i goes to row positions[i].
            self.source.read(start, stop, codes[:count], None if order is None else inverse(order))
        except Exception as error:  # noqa: BLE001 - re-raised, naming the shard
            if not in_place:
                self._give_back((codes, labels))
            raise self._shard_error(index, start, stop, error) from error
        codes[count:] = 0  # the last shard's padding
        return index, start, count, codes, labels, None

    def _shard_error(self, index, start, stop, error):
        return StreamError(f"{self.name}: shard {index} (examples {start} to {stop - 1}): {error}")

    def _load(self, codes, labels, order=None):
        """Put a prepared shard in the shared variables (and the order its
        rows are taken in: None, as they lie); its buffer is free
        again once the next shard replaces it (C backend) or at once (JAX mode,
        where the device holds a copy)."""
        if self.mode == "c":
            # Straight into the variables' storage, as in JAX mode below: these
            # arrays are of the variables' types by construction (the
            # buffers, views of the source, int32 labels and orders), and
            # set_value's checks cost some 10 us each, a shard at a time
            # between two steps.
            self.dataset.data.container.storage[0] = codes
            self.y.container.storage[0] = labels
            if self.dataset.order is not None:
                self.dataset.order.container.storage[0] = self._identity if order is None else order
            if self._loaded is not None and self._loaded[0] is not codes:
                self._give_back(self._loaded)
            self._loaded = (codes, labels)
        else:
            import jax.numpy as jnp

            # Copies JAX owns, complete before the host buffer is read into
            # again: on the CPU, jax.device_put may alias a numpy array's
            # memory (even with may_alias=False, in JAX 0.7) or copy it later.
            on_device = jnp.array(codes), jnp.array(labels)
            for array in on_device:
                array.block_until_ready()
            self.dataset.data.container.storage[0], self.y.container.storage[0] = on_device
            self._give_back((codes, labels))

    def _owns(self, shard):
        """Whether ``(codes, labels)`` is one of this split's buffers (not lent rows)."""
        return any(shard[0] is codes for codes, _ in self._buffers)

    def _give_back(self, shard):
        """A buffer back to the free ones; lent rows' pages unmapped if due."""
        if self._owns(shard):
            self._free.put(shard)
        elif self._drop_pages:
            self.source.release(shard[0])

    def epoch(self, epoch=0, progress=None):
        """Yield each shard of epoch ``epoch`` once it is in the shared variables.

        The workers read ahead across the end of the epoch, into the next
        one's first shards, so a new epoch does not start by waiting. Leaving
        the loop early, an exception or Ctrl-C stops the workers (see
        :meth:`close`) before this returns. A progress bar (examples per
        second) shows on a terminal unless ``progress`` is False; it is
        silent in pipes."""
        if self._holds_all:  # its one shard is in the shared variables already
            yield Shard(0, 0, 0, self.n_examples)
            return
        order = self.shard_order(epoch)
        bar = _progress_bar(self.n_examples, f"{self.name} epoch {epoch}", progress)
        completed, pending = False, deque()
        try:
            if self.prefetch == 0 or self.reader == "views":
                if self._drop_pages or self._mark is None:
                    self._mark = object()
                for number, index in enumerate(order):
                    prepared = self._prepare(epoch, index)
                    if self.reader == "views" and not self._all_pages_read:
                        self._read_ahead(order, number)
                    yield self._deliver(number, prepared, bar)
                completed = True
                self._holds_all = self._kept
                self._all_pages_read = self.reader == "views" and not self._drop_pages
                return
            if self._pool is None:
                self._pool = (_ProcessJobs(self) if self.reader == "process" else
                              ThreadPoolExecutor(self.workers,
                                                 thread_name_prefix=f"int8store-{self.name}"))
            if self._ahead_epoch != epoch:
                self._release(self._ahead)  # read ahead for another epoch than this one
                self._ahead = deque()
            pending, self._ahead = self._ahead, deque()
            jobs = [(epoch, i) for i in order]
            if not self._kept:
                jobs += [(epoch + 1, i) for i in self.shard_order(epoch + 1)]
            submitted = len(pending)
            for number in range(len(order)):
                while submitted < len(jobs) and len(pending) <= self.prefetch:
                    pending.append(self._pool.submit(self._prepare, *jobs[submitted]))
                    submitted += 1
                # Taken off the queue only once delivered: a shard whose wait or
                # delivery is interrupted (Ctrl-C, an error) still gives its
                # buffer back when the stream closes.
                shard = self._deliver(number, pending[0].result(), bar)
                pending.popleft()
                yield shard
            self._ahead, self._ahead_epoch = pending, epoch + 1
            completed = True
            self._holds_all = self._kept
        finally:
            if not completed:
                self._ahead.extend(pending)
                self.close()
            if bar is not None:
                bar.close()

    def _read_ahead(self, order, number):
        """Lent shards are read ahead by the kernel: once shard ``number`` of
        ``order`` is checked, a hint for the next ``prefetch`` (each once).
        Checking them ahead in a thread was measured slower on two cores,
        where it takes time from the training step's BLAS threads, and
        checking costs a few percent of training on the shard."""
        for ahead in order[number + 1:number + 1 + self.prefetch] if number == 0 else \
                order[number + self.prefetch:number + self.prefetch + 1]:
            start = ahead * self.shard_size
            self.source.read_ahead(start, min(start + self.shard_size, self.n_examples))

    def close(self):
        """Stop the workers (waiting for the reads under way) and drop the
        shards read ahead; the next epoch starts them again."""
        pool, self._pool = self._pool, None
        ahead, self._ahead, self._ahead_epoch = self._ahead, deque(), None
        for future in ahead:
            future.cancel()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        # Nothing is in flight now: every buffer but the one in the shared
        # variables is free, whatever an interruption (Ctrl-C between taking
        # a buffer and recording its job, or between loading a shard and
        # taking it off the queue) left in the bookkeeping.
        self._free_all_but_loaded()

    def _free_all_but_loaded(self):
        self._free = queue.SimpleQueue()
        loaded = self._loaded[0] if self._loaded is not None else None
        for buffer in self._buffers:
            if buffer[0] is not loaded:
                self._free.put(buffer)

    def _release(self, futures):
        """Give back the buffers of shards read but never used: those not
        started are cancelled, those being read are waited for (a read that
        failed gave its buffer back itself)."""
        for future in futures:
            future.cancel()
        for future in futures:
            if not future.cancelled() and future.exception() is None:
                self._give_back(future.result()[3:5])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _deliver(self, number, prepared, bar):
        index, start, count, codes, labels, order = prepared
        self._load(codes, labels, order)
        if bar is not None:
            bar.update(count)
        return Shard(number, index, start, count)

    def passes(self):
        """The shards of one more pass over the split, in its own order when it
        has no seed (evaluation; see :func:`~int8store.evaluate_in_chunks`).
        Each pass counts as an epoch, so the workers read the next pass's
        first shards ahead."""
        self._passes += 1
        return self.epoch(self._passes - 1, progress=False)

    def n_batches(self, batch_size):
        """Whole minibatches in an epoch: each shard's, its remainder dropped."""
        full, last = divmod(self.n_examples, self.shard_size)
        return full * (self.shard_size // batch_size) + last // batch_size

    def minibatches(self, epoch, batch_size, progress=None):
        """``(number in the epoch, index in the current shard)`` of every whole
        minibatch of epoch ``epoch``, each shard loaded before its minibatches:
        ``train_model(index)`` with the classic ``givens`` reads the right rows."""
        number = 0
        shards = self.epoch(epoch, progress)
        try:
            for shard in shards:
                for index in range(shard.count // batch_size):
                    yield number, index
                    number += 1
        finally:
            shards.close()

    def __repr__(self):
        return (f"StreamingSplit({self.name!r}, {self.n_examples} examples in {self.n_shards} "
                f"shards of {self.shard_size})")


def stream(x, y, max_device_bytes, batch_size=1, seed=None, mode="c", report=None, **kwargs):
    """A :class:`StreamingSplit` over a loaded split (``load_data``'s ``x``,
    ``y``) whose shards fit ``max_device_bytes``, or None if the whole split
    fits. The shard size is a multiple of ``batch_size``; if not even one batch
    fits, the shard holds what fits and the caller must cut its batch size to
    ``stream.shard_size``. ``report`` (``print``, say) is told about the
    streaming and such a cut, in a line each."""
    dataset = x.dataset
    codes = np.asarray(dataset.data.get_value(borrow=True))
    labels = np.asarray(y.get_value(borrow=True))
    row_bytes = codes[0].nbytes if len(codes) else 1
    if len(labels) * (row_bytes + _LABEL_BYTES) <= max_device_bytes:
        return None
    size = fitting_shard_size(max_device_bytes, row_bytes, batch_size)
    split = StreamingSplit(ArrayShards(codes, labels, name=dataset.name), size, dataset.encoding,
                           image_shape=dataset.image_shape, normalize=dataset.normalize,
                           dtype=dataset.dtype, seed=seed, mode=mode,
                           dataset_mean=dataset.dataset_mean, **kwargs)
    if report is not None:
        if split.shard_size < batch_size:
            report(f"... batch size {batch_size} does not fit in {max_device_bytes} device "
                   f"bytes: using {split.shard_size}")
        report(f"... streaming {split.name} in {split.n_shards} shards of {split.shard_size} "
               "examples")
    return split


def _progress_bar(total, description, progress):
    """A tqdm bar of ``total`` examples if ``progress`` (None: on a terminal,
    as tqdm's ``disable=None``), else None: a bar made disabled still cost
    some 60 us an epoch, between two training steps."""
    if progress is None:
        progress = sys.stderr.isatty()
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="img", desc=description, leave=False)


def worker_threads(name="train"):
    """Live worker threads of streams named ``name`` (for tests and shutdown checks)."""
    return [t for t in threading.enumerate() if t.name.startswith(f"int8store-{name}")]


class _ProcessJobs:
    """What :meth:`StreamingSplit.epoch` uses of a ThreadPoolExecutor, for
    shards read by a :class:`~int8store.streaming.shard_process.ShardProcess`: jobs
    answered in the order they were submitted."""

    def __init__(self, split):
        from .shard_process import ShardProcess

        self.split = split
        source = split.source
        try:
            self.process = ShardProcess(source.store, source.name, split.seed is not None,
                                        source.delay, split._shared)
        except OSError as error:
            raise StreamError(f"{split.name}: cannot start the process reading the shards "
                              f"({error.strerror or error})") from error
        self.waiting = deque()

    # Replies answer requests in order: a request sent but not recorded, or a
    # reply read but not matched to its job (Ctrl-C between the two), would
    # pair every later reply with the wrong job, and the stream would wait
    # forever for one more. Ctrl-C waits for the end of those few lines.

    def submit(self, _prepare, epoch, index):
        from ..runtime.interrupts import interrupts_deferred

        start, stop, order, codes, labels, _ = self.split._claim(epoch, index)
        buffer = self.split._shared.index(codes)
        if order is not None:  # the reader follows the order the labels are in
            self.split._shared.orders[buffer][:len(order)] = order
        job = _ProcessJob(self, index, start, stop, codes, labels)
        with interrupts_deferred():  # asked and recorded, or neither
            self.process.submit(buffer, epoch, index, start, stop)
            self.waiting.append(job)
        return job

    def collect(self, job):
        """Read the replies up to ``job``'s."""
        from ..runtime.interrupts import interrupts_deferred
        from .shard_process import ShardReadError

        while not job.done:
            first = self.waiting[0]
            self.process.wait()  # (interrupted here: the reply is still to come, for this job)
            with interrupts_deferred():  # the reply read and its job done, or neither
                try:
                    self.process.take()
                except ShardReadError as error:
                    first.error = self.split._shard_error(first.index, first.start, first.stop, error)
                    self.split._free.put((first.codes, first.labels))
                self.waiting.popleft()
                first.done = True

    def shutdown(self, wait=True, cancel_futures=True):
        if self.waiting:
            self.collect(self.waiting[-1])
        self.process.close()


class _ProcessJob:
    def __init__(self, jobs, index, start, stop, codes, labels):
        self.jobs, self.index, self.start, self.stop = jobs, index, start, stop
        self.codes, self.labels = codes, labels
        self.done, self.error = False, None

    def cancel(self):
        return False  # asked of the process already: it is read, then given back

    def cancelled(self):
        return False

    def exception(self):
        self.jobs.collect(self)
        return self.error

    def result(self):
        if self.exception() is not None:
            raise self.error
        return self.index, self.start, self.stop - self.start, self.codes, self.labels, None
