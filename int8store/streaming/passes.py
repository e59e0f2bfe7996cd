"""One pass over a :class:`~int8store.streaming.split.StreamingSplit`:
:class:`Pass`, an iterator of the shards of one epoch, each yielded once it
is in the shared variables (:class:`Shard`), and the one owner of the
shards it asked the split's reader for. It ends when its last shard has
been yielded (the next epoch's first shards, prepared meanwhile, are handed
to the split), or when closed: explicitly, by an exception or Ctrl-C in it,
or when it is dropped unfinished. Ending is idempotent.
"""

import sys
from collections import deque
from dataclasses import dataclass

from ..runtime.interrupts import interrupts_deferred

__all__ = ["Pass", "Shard"]


@dataclass(frozen=True)
class Shard:
    """A shard now in the device's shared variables: its ``number`` in this
    epoch's order, its ``index`` in the split, its first example ``start`` in
    the split and its ``count`` of own examples (the first ``count`` rows;
    the rest, a short shard's, hold the examples around it)."""

    number: int
    index: int
    start: int
    count: int


class Pass:
    """One pass over ``split`` (what
    :meth:`~int8store.streaming.split.StreamingSplit.epoch` returns): see
    the module docstring. It works the split's reader and buffers through
    the split's own methods."""

    def __init__(self, split, epoch, progress, first=0):
        self.split, self.epoch, self._progress = split, epoch, progress
        self.closed = False
        self.delivered = self._first = first  # (shards before first: neither read nor yielded)
        self._order = None  # the shard indices of this epoch, once started
        self._jobs, self._asked, self._pending = [], 0, deque()
        self._bar = None

    def __iter__(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __next__(self):
        if self.closed:
            raise StopIteration
        try:
            shard = self._next_shard()
        except BaseException:
            self.close()
            raise
        if shard is None:
            self._finish()
            raise StopIteration
        return shard

    def _start(self):
        split = self.split
        self._order = split.layout.visit_order(self.epoch)
        if split._whole and split._loaded is not None:
            try:  # its one shard is in the shared variables already
                split._reader.check_kept()
            except Exception as error:  # noqa: BLE001 - raised again, naming the shard
                raise split.layout.error(0, error) from error
            return
        split._reader.begin_pass()
        self._jobs = [(self.epoch, index) for index in self._order[self._first:]]
        if not split._whole:  # read ahead into the next epoch
            self._jobs += [(self.epoch + 1, index) for index in split.layout.visit_order(self.epoch + 1)]
        # (what the pass before read ahead is this epoch's first shards)
        self._pending = split._take_ahead(self.epoch if self._first == 0 else None)
        self._asked = len(self._pending)
        self._bar = _progress_bar(split.n_examples, f"{split.name} epoch {self.epoch}",
                                  self._progress)

    def _next_shard(self):
        """The next shard, in the shared variables; None after the last."""
        split = self.split
        if self._order is None:
            self._start()
        number = self.delivered
        if number == len(self._order):
            return None
        if not self._jobs:  # the split's one shard, kept
            self.delivered += 1
            return Shard(0, 0, 0, split.n_examples)
        while self._asked < len(self._jobs) and len(self._pending) <= split.prefetch:
            self._pending.append(split._reader.prepare(*self._jobs[self._asked]))
            self._asked += 1
        prepared = split._deliver(self._pending)
        self.delivered += 1
        if self._bar is not None:
            self._bar.update(prepared.count)
        return Shard(number, prepared.index, prepared.start, prepared.count)

    def _finish(self):
        """Every shard delivered: the next epoch's first shards go to the split."""
        with interrupts_deferred():
            if not self.closed:
                self.closed = True
                self.split._ahead = (self.epoch + 1, self._pending)
                self._pending = deque()
                self._close_bar()

    def close(self):
        """End the pass; unfinished, its shards in flight are given back and
        the reader's workers stopped (the next pass starts them again)."""
        with interrupts_deferred():
            if self.closed:
                return
            self.closed = True
            self._pending = deque()
            self._close_bar()
            if self._order is not None:  # (a pass never started holds nothing)
                self.split._stop_reading()  # gives back what the reader still holds

    def _close_bar(self):
        bar, self._bar = self._bar, None
        if bar is not None:
            bar.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - (at exit, or a reader already gone)
            pass


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
