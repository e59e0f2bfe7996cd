"""Where a streamed split's shards come from: its int8 codes and labels in
host memory (:class:`ArrayShards`) or in a store on disk
(:class:`StoreShards`), and how one shard is put into a buffer
(:func:`fill_shard`).

A shard is ``shard_size`` consecutive examples of the split; one holds
fewer (``count``: the last, or shuffled, one drawn each epoch,
:mod:`.layout`). Its buffer keeps one static shape: the rows after its own
examples are filled with the examples just before the shard, nearest first
(after it, for a shuffled split's first), so that every row of every shard is a real example (a
window of the shard evaluated whole is a window of real images, as on a
resident split; see :func:`int8store.training.evaluate_in_chunks`). Only the first
``count`` rows are the shard's own: they alone are trained on and scored.

Both sources are read by the trainer and by the process that reads a
store's shards (:mod:`.shard_process`), which imports this module and not
the stream.
"""

import threading
import time

import numpy as np

from ..codes.channels import PER_CHANNEL, ChannelStatistics
from ..codes.histogram import channel_code_counts, channels_of, code_counts, mean_of_code_counts
from ..store.checksums import split_digest
from ..codes.labels import as_int32_labels
from ..errors import ArgumentError

__all__ = ["ArrayShards", "StoreShards", "fill_shard", "fill_labels", "inverse",
           "whole_split_statistics"]


class ArrayShards:
    """Shards of int8 codes ``(N, ...)`` and labels ``(N,)`` already in host
    memory, checked as :class:`~int8store.SharedDataset` checks them: codes
    must be int8 (quantize uint8 images first), labels class numbers that
    fit int32 (never truncated nor wrapped)."""

    #: Rows in the split's order can be lent as views (see :meth:`lend`).
    can_lend = True

    def __init__(self, codes, labels, name="train", delay=0.0):
        codes = np.asarray(codes)
        if codes.dtype != np.int8 or codes.ndim < 2:
            raise ArgumentError(
                f"{name}: codes must be an int8 array of shape (N, ...), got {codes.dtype} of "
                f"shape {codes.shape} (uint8 pixels are quantized first: int8store.quantize)")
        labels = as_int32_labels(labels, name=f"{name} labels")
        if len(labels) != len(codes):
            raise ArgumentError(f"{name}: {len(codes)} images but {len(labels)} labels; every "
                                "image needs exactly one label")
        if len(codes) == 0:  # (streamed, its epochs were empty and its score 0/0, NaN)
            raise ArgumentError(f"{name}: no examples (codes of shape {codes.shape}); a split "
                                "holds at least one")
        self.codes, self.labels = codes, labels
        self.name, self.delay = name, delay
        self.n_examples, self.row_shape = len(self.labels), self.codes.shape[1:]

    def lend(self, start, stop, mark=None):
        """Codes of examples ``[start, stop)``, ``(stop - start, row bytes)``,
        without a copy."""
        if self.delay:
            time.sleep(self.delay)
        return self.codes[start:stop].reshape(stop - start, -1)

    def code_counts(self):
        """The histogram of the split's codes (:mod:`int8store.codes.histogram`)."""
        return code_counts(self.codes)

    def digest(self):
        """The split's BLAKE3 (:func:`int8store.store.checksums.split_digest`)."""
        return split_digest(self.codes, self.labels)

    def channel_code_counts(self):
        """Each channel's histogram of the split's codes, ``(channels, 256)``
        (:func:`int8store.codes.histogram.channel_code_counts`)."""
        return channel_code_counts(self.codes, channels_of(self.row_shape))

    def release(self, rows):
        """Nothing to give back: the rows are the caller's arrays."""

    def check_unchanged(self, mark=None):
        """Nothing to check: the rows are the caller's arrays."""

    def read_ahead(self, start, stop):
        """Nothing to read: the rows are in memory."""

    def read(self, start, stop, out, positions=None):
        """Codes of examples ``[start, stop)`` into ``out`` (row ``positions[i]``
        for example ``start + i`` when given)."""
        if self.delay:
            time.sleep(self.delay)  # an artificially slow producer (benchmarks)
        rows = self.codes[start:stop].reshape(len(out), -1)
        flat = out.reshape(len(out), -1)
        if positions is None:
            flat[...] = rows
        else:
            flat[positions] = rows


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
        if self.n_examples == 0:  # (an earlier int8store wrote empty validation splits)
            raise ArgumentError(f"{path}: split {split!r} has no examples; a split holds at "
                                "least one")
        # One chunk buffer per reading thread: a shard that starts in the chunk
        # the thread's last shard ended in takes those rows from it.
        self._scratch = threading.local()
        self._mapped, self._mapping = None, threading.Lock()

    def code_counts(self):
        """The histogram of the split's codes: the manifest's, or counted
        from the file (:meth:`~int8store.store.reader.Store.code_counts`)."""
        return self.store.code_counts(self.name)

    def digest(self):
        """The split's BLAKE3: the manifest's (:meth:`~int8store.store.reader.Store.split_digest`)."""
        return self.store.split_digest(self.name)

    def channel_code_counts(self):
        """Each channel's histogram of the split's codes: the manifest's, or
        counted from the file (:meth:`~int8store.store.reader.Store.channel_code_counts`)."""
        return self.store.channel_code_counts(self.name)

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

    def check_unchanged(self, mark=None):
        """Check the rows lent so far again, under ``mark``, if the file was
        written in place since (:meth:`~int8store.store.mapped.MappedSplit.check_unchanged`)."""
        if self._mapped is not None:
            self._mapped.check_unchanged(mark)

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


def whole_split_statistics(source, encoding, normalize, dataset_mean=None,
                           channel_statistics=None):
    """``(dataset_mean, channel_statistics)`` for ``normalize``: each the one
    given, else the whole split's, from ``source``'s histograms (a stream's
    view is made over a placeholder shard of zeros, whose own mean,
    ``normalize="dataset"`` took: 128 for any split)."""
    if normalize == "dataset" and dataset_mean is None:
        dataset_mean = mean_of_code_counts(source.code_counts(), encoding)
    if normalize in PER_CHANNEL and channel_statistics is None:
        channel_statistics = ChannelStatistics.from_counts(source.channel_code_counts(), encoding)
    return dataset_mean, channel_statistics


def inverse(order):
    """Where each example of a shard goes, for a shard in ``order``: row
    ``positions[i]`` holds example ``i``."""
    positions = np.empty_like(order)
    positions[order] = np.arange(len(order), dtype=order.dtype)
    return positions


def fill_shard(source, start, stop, codes, order=None):
    """Read the shard of examples ``[start, stop)`` into ``codes`` (its
    buffer, ``shard_size`` rows): its own examples in the first rows, in
    ``order`` when given (row ``i`` holds example ``start + order[i]``),
    read and shuffled in one pass; the rows after them (a short shard's)
    the examples around it (:func:`_filling`)."""
    count = stop - start
    source.read(start, stop, codes[:count], None if order is None else inverse(order))
    rest = len(codes) - count
    if rest:
        first, last, nearest_first = _filling(start, stop, rest)
        if last > source.n_examples:  # (a split of one shard is never short)
            raise ArgumentError(f"{source.name}: a shard of {len(codes)} rows from example "
                                f"{start} cannot be filled from the examples around it")
        source.read(first, last, codes[count:])
        if nearest_first:
            codes[count:] = codes[count:][::-1].copy()


def fill_labels(labels, start, stop, out, own=None):
    """The labels of :func:`fill_shard`'s rows into ``out``: ``own`` (the
    shard's own labels in its order, for a shuffled shard) or those of
    examples ``[start, stop)``, then those of the examples that fill the
    rest of the buffer, as :func:`fill_shard` takes them."""
    count = stop - start
    out[:count] = labels[start:stop] if own is None else own
    rest = len(out) - count
    if rest:
        first, last, nearest_first = _filling(start, stop, rest)
        out[count:] = labels[first:last][::-1] if nearest_first else labels[first:last]


def _filling(start, stop, rest):
    """``(first, last, nearest first)``: the examples ``[first, last)`` that
    fill the ``rest`` rows after a short shard's own: those just before
    ``start``, nearest first (a last window scored over them holds the
    examples the split's own last window holds), or for a shuffled split's
    short first shard, those just after ``stop``."""
    return (start - rest, start, True) if rest <= start else (stop, stop + rest, False)
