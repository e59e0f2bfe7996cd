"""Sets larger than the device: a split fed to the device shard by shard,
with background prefetch.

A :class:`StreamingSplit` keeps one shard on the device: an int8 shared
variable (and its labels) of a fixed shape, ``shard_size`` examples, read by
the compiled functions through the usual float view (``stream.x``,
``stream.y``: the classic slices in ``givens`` work unchanged). Each epoch
visits the shards in a new order, and the examples of each shard in a new
order, both drawn from a seed (the same seed, the same orders; no seed keeps
the split's own order: :mod:`.layout`). :meth:`StreamingSplit.epoch` is a
*pass*: it yields each shard once it is in the shared variables (C backend:
the value is replaced, not copied; JAX mode: placed on the device) while a
reader prepares the next shards, at most ``prefetch`` of them ahead (across
the end of an epoch too): memory stays bounded by ``(prefetch + 2) x
shard_size`` examples.

One pass at a time: a split holds one shard on the device, so while a pass
is alive (made and neither finished nor closed) another is refused at
once with :class:`StreamError`, which says how to end the first. The pass
owns the shards it asked for; leaving it early, an exception or Ctrl-C
ends it (:meth:`StreamingSplit.close` too), and ending gives back every
buffer, idempotently, whatever a second Ctrl-C interrupts (the bookkeeping
runs with interrupts deferred).

One shard holds fewer examples than ``shard_size`` (the last; shuffled, one
drawn each epoch: :mod:`.layout`): :class:`Shard` says how many are its own
(``count``), and every example is visited exactly once per epoch. Its other
rows hold the examples around it (:func:`.sources.fill_shard`): no padding.

Who reads (:mod:`.readers`): on the C backend a shard is not copied at
all: each whole shard is lent as a view of the source's rows, for a store a
view of the file mapped into memory (:mod:`int8store.store.mapped`), whose
chunks are checked in place before the step reads them (once while the
split stays mapped whole, each epoch when its pages are given back after
use). A shuffled split's shard is lent in the split's order with the
shard's shuffled order beside it (:attr:`SharedDataset.order`): the step
gathers each minibatch's rows by it and decodes them in the same pass
(:mod:`int8store.backend.ops.gather`), and the labels are put in that order on
the host (4 bytes an example). Otherwise (JAX mode, or ``reader`` asks)
shards are copied into buffers (:mod:`.buffers`), shuffled if asked: a
store's shards are read ahead by a process of its own
(:mod:`.shard_process`, Linux) into memory shared with this one, because
the compiled step holds the GIL for its whole call and a reading thread,
needing the GIL between its GIL-free calls, made training wait; otherwise
(shards already in memory, no prefetch, other systems) by threads, or in
the caller's thread. A store is read without h5py (which holds one global lock around
every HDF5 call): the manifest gives each chunk's byte range and checksum
(:mod:`int8store.store.reader`), and each read opens its own file handle.
"""

import numbers
import threading
import weakref
from collections import deque
from contextlib import closing

import numpy as np

from ..augment.spec import refuse_alternating_shuffled
from ..dataset.split import Batch, Split
from ..errors import ArgumentError, StreamError
from ..order.position import check_epoch
from ..order.shuffle import check_seed
from ..order.windows import padded_plan, row_windows
from ..runtime.interrupts import interrupts_deferred
from .buffers import BufferPool, shared_memory_available
from .layout import ShardLayout
from .passes import Pass, Shard
from .readers import LentReader, ProcessReader, SerialReader, ThreadReader
from ..order.shard_size import (LABEL_BYTES, batch_within_shards, fitting_shard_size,
                                shard_size_for)
from .sources import StoreShards, whole_split_statistics

__all__ = ["StreamingSplit", "Shard", "StreamError", "shard_size_for", "fitting_shard_size",
           "worker_threads"]


class StreamingSplit(Split):
    """A split fed to the device one shard at a time (see the module docstring).

    Parameters
    ----------
    source : ArrayShards or StoreShards
    shard_size : int
        Examples per shard (a multiple of the batch size, for training).
    encoding, image_shape, normalize, dtype, dataset_mean, channel_statistics
        As for :class:`~int8store.SharedDataset`: the view of each shard
        (``dataset_mean`` and the per-channel statistics: the source's, the
        whole split's, when not given; the training split's for the others).
    seed : int, optional
        Shuffle shards and examples within shards, differently each epoch.
    workers, prefetch : int
        Threads that read shards, and how many shards may be read ahead;
        ``prefetch=0`` reads each shard when it is needed, in the caller's
        thread, into the one buffer the split then has.
    reader : {"auto", "views", "threads", "process"}
        How shards are read: ``"views"`` lends each whole shard without
        copying it: a view of the source's rows, for a store a read-only
        view of the file mapped into memory, its chunks checked there when
        the shard is needed (once, or each epoch for a split larger than
        memory may hold), the next ``prefetch`` shards read ahead by the
        kernel (no worker threads); with a ``seed`` (C backend only), the
        step takes each minibatch's rows in the shard's shuffled order.
        Otherwise shards are copied into buffers, shuffled if asked, by
        ``workers`` threads (or the caller's thread, with no prefetch) or
        by one process of its own (:mod:`int8store.streaming.shard_process`:
        a store's shards, on Linux) that never contends with the training
        step for the GIL. ``"auto"``: views when possible, else the process
        for a store when prefetching, else threads.
    max_prefetch_bytes : int, optional
        The most bytes of shards in flight (read ahead, or being read): the
        prefetch is lowered to what fits, and a shard that alone does not
        fit is refused here, naming both sizes.
    mode : {"c", "jax"}
        Where the shared variables live.

    Host memory holds ``prefetch + 2`` shards (one when ``prefetch`` is 0):
    the one in the shared variables and those in flight. Shards lent as
    views of a mapped store take no buffer (the short shard is copied into
    one), and their pages are unmapped once they leave the shared
    variables, unless the whole split fits in those ``prefetch + 2`` shards.

    Examples
    --------
    >>> import numpy as np
    >>> from int8store import StreamingSplit, quantize
    >>> from int8store.streaming import ArrayShards
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
                 dataset_mean=None, max_prefetch_bytes=None, reader="auto",
                 channel_statistics=None):
        from ..dataset.shared import SharedDataset

        if int(shard_size) != shard_size or shard_size < 1:
            raise ArgumentError(f"shard_size={shard_size!r}: expected a positive integer")
        if workers < 1 or prefetch < 0:
            raise ArgumentError(f"workers={workers}, prefetch={prefetch}: expected at least one "
                                "worker and a prefetch of 0 or more")
        self.source, self.seed = source, (None if seed is None else check_seed(seed))
        self.name = name or source.name
        self.shard_size = min(int(shard_size), max(1, source.n_examples))
        row = int(np.prod(source.row_shape))
        self.shard_bytes = self.shard_size * (row + LABEL_BYTES)
        if max_prefetch_bytes is not None:
            if self.shard_bytes > max_prefetch_bytes:
                raise ArgumentError(
                    f"{self.name}: a shard of {self.shard_size} examples takes {self.shard_bytes:,} "
                    f"bytes, more than the {int(max_prefetch_bytes):,} bytes allowed in flight: "
                    "use smaller shards or allow more memory")
            prefetch = min(prefetch, int(max_prefetch_bytes) // self.shard_bytes - 1)
        self.workers, self.prefetch, self.mode = workers, prefetch, mode
        # (the checked seed: a numpy int32 one overflowed the orders' 32-bit mask)
        self.layout = ShardLayout(self.name, source.n_examples, self.shard_size, self.seed,
                                  orders_in_c=mode == "c")
        self.reader = self._choose_reader(reader)
        # Shuffled shards lent in the split's order: the step gathers each
        # minibatch's rows by the shard's order (SharedDataset.order).
        ordered = self.reader == "views" and seed is not None
        dataset_mean, channel_statistics = whole_split_statistics(
            source, encoding, normalize, dataset_mean, channel_statistics)
        self.dataset = SharedDataset(np.zeros((self.shard_size,) + tuple(source.row_shape), np.int8),
                                     np.zeros(self.shard_size, np.int32), encoding,
                                     normalize=normalize, image_shape=image_shape,
                                     name=self.name, dtype=dtype, dataset_mean=dataset_mean,
                                     channel_statistics=channel_statistics,
                                     ordered=ordered)
        self._identity = np.arange(self.shard_size, dtype=np.int32) if ordered else None
        if mode != "c":
            from ..backend.jax.device import place
            place([self.dataset], mode)
        self.x, self.y = self.dataset.x, self.dataset.y
        self._pool, self._reader = self._make_reader(row)
        # The shard in the shared variables (a reader's Prepared), or None,
        # and how many times it changed (a streamed Batch's index is valid
        # while this count is the one it was given under).
        self._loaded, self._loads = None, 0
        # A split that is one shard in its own order is read once and kept
        # in the shared variables.
        self._whole = self.n_shards == 1 and seed is None
        self._pass = None  # a weak reference to the pass in progress
        # The next epoch's first shards, prepared by a pass that ended: (epoch, tickets).
        self._ahead = (None, deque())
        self._passes = 0  # evaluation passes (see passes())

    def _choose_reader(self, reader):
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
        possible = isinstance(self.source, StoreShards) and shared_memory_available() \
            and self.prefetch > 0
        if reader == "process" and not possible:
            raise ArgumentError(f"{self.name}: a reading process needs a store's shards, "
                                f"prefetch > 0 (here {self.prefetch}, max_prefetch_bytes "
                                "included) and Linux's memfd_create")
        return "process" if reader == "process" or (reader == "auto" and possible) else "threads"

    def _make_reader(self, row_bytes):
        """The buffer pool and the reader: one buffer for each shard in
        flight and the one in the shared variables (prefetch + 2), or one,
        read in place, with no prefetch; lent shards need one for the short
        shard only."""
        held = self.prefetch + 2 if self.prefetch else 1
        count = held
        if self.reader == "views":
            count = 0 if self.n_examples % self.shard_size == 0 else 1
        pool = BufferPool(self.name, count, self.shard_size, row_bytes,
                          shared=self.reader == "process")
        if self.reader == "views":
            # Lent pages beyond the shards memory may hold are unmapped after use.
            return pool, LentReader(self.layout, self.source, pool,
                                    release_pages=self.n_shards > held)
        if self.reader == "process":
            return pool, ProcessReader(self.layout, self.source, pool, self.seed is not None)
        if self.prefetch == 0:
            return pool, SerialReader(self.layout, self.source, pool)
        return pool, ThreadReader(self.layout, self.source, pool, self.workers)

    @property
    def n_examples(self):
        return self.source.n_examples

    @property
    def labels(self):
        """The whole split's labels (host memory, in the split's order)."""
        return self.source.labels

    @property
    def image_shape(self):
        return self.dataset.image_shape

    @property
    def n_features(self):
        return self.dataset.n_features

    @property
    def encoding(self):
        return self.dataset.encoding

    @property
    def n_shards(self):
        return self.layout.n_shards

    def shard_order(self, epoch):
        """The shard indices in the order epoch ``epoch`` visits them."""
        return self.layout.visit_order(epoch)

    def epoch(self, epoch=0, progress=None, first=0):
        """A pass over the split: an iterator of each shard of epoch
        ``epoch``, yielded once it is in the shared variables.

        The reader prepares the next shards ahead, across the end of the
        epoch too, so a new epoch does not start by waiting. Leaving the
        loop early (the pass is then dropped, or closed with ``close()``),
        an exception or Ctrl-C ends the pass and stops the reader's
        workers. A progress bar (examples per second) shows on a terminal
        unless ``progress`` is False; it is silent in pipes.

        ``first``: the pass starts at the epoch's shard ``first`` in its
        visit order (a run resumed mid-epoch): those before are not read.

        While a pass is alive (made, neither finished nor closed), the
        split refuses another with :class:`StreamError`: one shard is on
        the device at a time."""
        live = self._live_pass()
        if live is not None:
            raise StreamError(
                f"{self.name}: a pass over this split is in progress (epoch {live.epoch}, "
                f"{live.delivered} of {self.n_shards} shards delivered); a split holds one "
                "shard on the device, so a second pass cannot run beside it. End the first: "
                "leave its loop, call its close(), or this split's close(). (To score the "
                "training split, do it between epochs.)")
        epoch = check_epoch(epoch, self.name)
        if isinstance(first, bool) or not isinstance(first, numbers.Integral) \
                or not 0 <= first <= self.n_shards:  # (6 of 5 gave epoch 1's shards as 0's)
            raise ArgumentError(f"{self.name}: a pass cannot start at shard {first!r}: expected "
                                f"0 to {self.n_shards} (the epoch's {self.n_shards} shards)")
        current = Pass(self, epoch, progress, int(first))
        self._pass = weakref.ref(current)
        return current

    def _live_pass(self):
        current = self._pass() if self._pass is not None else None
        return current if current is not None and not current.closed else None

    def passes(self):
        """The shards of one more pass over the split, in its own order when it
        has no seed (evaluation; see :func:`~int8store.training.evaluate_in_chunks`).
        Each pass counts as an epoch, so the reader prepares the next pass's
        first shards ahead."""
        current = self.epoch(self._passes, progress=False)
        self._passes += 1
        return current

    def n_batches(self, batch_size):
        """Whole minibatches in an epoch: each shard's, its remainder dropped."""
        return self.layout.n_batches(self._batch_size(batch_size))

    def _batch_size(self, batch_size):
        return batch_within_shards(batch_size, self.shard_size, self.n_examples, self.name)

    def minibatches(self, epoch, batch_size, start=0):
        """Each whole minibatch of epoch ``epoch`` from number ``start`` on, a
        :class:`~int8store.dataset.split.Batch` whose index is its place in
        the shard now loaded, each shard loaded before its minibatches (none
        before the one that holds ``start`` is read): ``train_model(index)``
        with the classic ``givens`` reads the right rows. Its index is valid
        while its shard is loaded (read later, it raises :class:`StreamError`)."""
        epoch, batch_size = check_epoch(epoch, self.name), self._batch_size(batch_size)
        return self._minibatches(epoch, batch_size, *self.layout.start_of(epoch, batch_size, start))

    def _minibatches(self, epoch, batch_size, first, number, skip):  # (checked at the call)
        with closing(self.epoch(epoch, None, first)) as shards:
            for shard in shards:
                self.dataset.set_epoch(epoch, number)  # an augmented view's draws
                count = shard.count // batch_size
                check = self._still_loaded(epoch, self._loads)
                for index in range(skip, count):
                    yield Batch(number + index, index, index == count - 1, check)
                number, skip = number + count, 0

    def _still_loaded(self, epoch, loads):
        """A :class:`Batch`'s check: its shard, loaded at count ``loads``, is
        still the one in the shared variables."""
        def check(batch):
            if self._loads != loads:
                raise StreamError(
                    f"{self.name}: minibatch {batch.number} of epoch {epoch} lay in a shard "
                    "that has left the device, so its index would read another shard's rows. "
                    "Take each minibatch as the loop reaches it (for batch in "
                    "split.minibatches(...)), not from a list of them made first.")
        return check

    def scoring_plans(self, chunk_size, classic_count=False):
        """A plan a shard, in the split's own order, each yielded while its
        shard is loaded: only each shard's examples count, and a short last
        shard with fewer examples than a chunk is read with the examples
        before it, which fill its other rows
        (:func:`~int8store.streaming.sources.fill_shard`) and count nothing.
        Every plan has as many windows (a short shard's padded with windows
        that count nothing): one compiled shape."""
        chunk_size = int(chunk_size)
        if not 1 <= chunk_size <= self.shard_size:
            raise ArgumentError(f"chunk_size={chunk_size}: expected 1 to the {self.shard_size} "
                                f"examples of a shard of {self.name}")
        if classic_count and self.seed is not None:
            raise ArgumentError(f"classic_count needs {self.name} in its own order (no seed)")
        limit = self.n_examples // chunk_size * chunk_size if classic_count else self.n_examples
        windows = -(-self.shard_size // chunk_size)
        with closing(self.passes()) as shards:
            for shard in shards:
                scored = max(0, min(shard.count, limit - shard.start))
                yield padded_plan(row_windows(shard.count, chunk_size, scored), windows)

    def largest_batch(self):
        """The most examples one minibatch can take: a shard's."""
        return self.shard_size

    def largest_call(self, batch_size):
        """The most minibatches one call can take: a shard's (never two)."""
        return min(self.n_batches(batch_size), self.shard_size // int(batch_size))

    def describe_holding(self):
        """How the split is held, for :func:`int8store.memory_table`."""
        storage = self.dataset.storage
        return storage if self.n_shards == 1 else \
            f"{storage}, {self.n_shards} shards of {self.shard_size}"

    def digest(self):
        """The split's BLAKE3, as a store records it (:meth:`~int8store.SharedDataset.digest`)."""
        return self.source.digest()

    def augment(self, augmentation, seed):
        """The float view of each shard with augmented minibatches, keyed by the
        epoch and their number in it (:meth:`~int8store.SharedDataset.augment`)."""
        refuse_alternating_shuffled(augmentation, self.seed, self.name)
        return self.dataset.augment(augmentation, seed)

    def close(self):
        """End the pass in progress, if any, stop the reader's workers
        (waiting for the reads under way, each wait bounded) and drop the
        shards read ahead; the next epoch starts them again. Idempotent; a
        Ctrl-C meanwhile is handled once everything is given back."""
        with interrupts_deferred():
            live = self._live_pass()
            if live is not None:
                live.close()
            self._stop_reading()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"StreamingSplit({self.name!r}, {self.n_examples} examples in {self.n_shards} "
                f"shards of {self.shard_size})")

    # -- what the passes use -------------------------------------------------------

    def _take_ahead(self, epoch):
        """The tickets prepared for ``epoch`` by the pass before (the others
        are given back)."""
        (ahead_epoch, tickets), self._ahead = self._ahead, (None, deque())
        if ahead_epoch == epoch:
            return tickets
        for ticket in tickets:
            self._reader.release(ticket)
        return deque()

    def _stop_reading(self):
        """The reader's workers stopped and everything in flight given back:
        every buffer is then free but the one in the shared variables."""
        with interrupts_deferred():
            self._ahead = (None, deque())
            self._reader.close()
            loaded = self._loaded
            self._pool.reset(keep=loaded.buffer if loaded is not None and loaded.held else None)

    def _deliver(self, pending):
        """The shard of the first ticket of ``pending``, waited for, in the
        shared variables (the ticket leaves ``pending``): its
        :class:`~.readers.Prepared`."""
        reader, ticket = self._reader, pending[0]
        if reader.reads_in_place(ticket) and self._pool.n_free == 0:
            with interrupts_deferred():
                self._unload()  # its buffer is read into next, between two steps
        reader.wait(ticket)  # (interrupted here, the ticket is still pending)
        with interrupts_deferred():  # taken, collected and loaded, or none of them
            pending.popleft()
            prepared = reader.collect(ticket)
            self._load(prepared)
        return prepared

    def _load(self, prepared):
        """Put a prepared shard in the shared variables (and the order its
        rows are taken in: None, as they lie); the shard it replaces is given
        back to its reader, and in JAX mode, where the device holds a copy,
        this one too at once."""
        try:
            if self.mode == "c":
                # Straight into the variables' storage, as in JAX mode below:
                # these arrays are of the variables' types by construction
                # (the buffers, views of the source, int32 labels and orders),
                # and set_value's checks cost some 10 us each, a shard at a
                # time between two steps.
                self.dataset.data.container.storage[0] = prepared.codes
                self.y.container.storage[0] = prepared.labels
                if self.dataset.order is not None:
                    self.dataset.order.container.storage[0] = \
                        self._identity if prepared.order is None else prepared.order
            else:
                import jax.numpy as jnp

                # Copies JAX owns, complete before the host buffer is read into
                # again: on the CPU, jax.device_put may alias a numpy array's
                # memory (even with may_alias=False, in JAX 0.7) or copy it later.
                on_device = jnp.array(prepared.codes), jnp.array(prepared.labels)
                for array in on_device:
                    array.block_until_ready()
                self.dataset.data.container.storage[0], self.y.container.storage[0] = on_device
        except BaseException:
            self._reader.done_with(prepared)
            raise
        previous, self._loaded = self._loaded, prepared
        self._loads += 1
        if previous is not None:
            self._reader.done_with(previous)
        if self.mode != "c":
            self._reader.done_with(prepared)

    def _unload(self):
        """Forget the shard in the shared variables, giving back what holds it."""
        previous, self._loaded = self._loaded, None
        self._loads += 1
        if previous is not None:
            self._reader.done_with(previous)


def worker_threads(name="train"):
    """Live worker threads of streams named ``name`` (for tests and shutdown checks)."""
    return [t for t in threading.enumerate() if t.name.startswith(f"int8store-{name}")]
