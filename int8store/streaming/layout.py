"""Which examples each shard of a streamed split holds, and in which order:
a pure function of the split's length, the shard size and the seed.

Each shard holds ``shard_size`` consecutive examples, but one, which holds
the rest (fewer): with no seed the last, ``[k * shard_size, (k + 1) *
shard_size)`` for shard ``k``, and an epoch visits the shards in that order
and each shard's examples as they lie. With a seed, epoch ``e`` draws which
shard is the short one (the shards after it move up to close the gap), visits
the shards in a permutation keyed by ``(seed, e)`` and takes shard ``k``'s
examples in a permutation keyed by ``(seed, e, k)``
(:func:`int8store.order.shuffle.permutation`). The short shard moves because
a shard's examples left over its whole minibatches are not trained on that
epoch: a fixed last shard smaller than a minibatch was never trained on.

Where it is computed is not part of the order. The orders are drawn in the
training process between two steps (a shard's with its labels put in it):
on the C backend by a small C op (:func:`int8store.backend.ops.permutation.shuffled`,
some 6 us a shard of 3,000, against 85-100 us in numpy; the shards' order
of an epoch some 55 us in numpy, drawn for each epoch and the next one's
read-ahead), imported only then, by a stream whose shared variables have set
the backend up already; a JAX-mode stream, which copies each shard to the
device anyway, takes numpy's and compiles nothing. The last epochs' shard
orders are kept (each pass asks for its own and the next epoch's).
"""

import numpy as np

from ..errors import StreamError
from ..order.position import check_start
from ..order.shuffle import permutation

__all__ = ["ShardLayout"]


class ShardLayout:
    """The shards of ``n_examples`` examples of split ``name``, ``shard_size``
    each, shuffled by ``seed`` (None: in order); ``orders_in_c``: a shard's
    order is drawn by the C op (a stream on the C backend)."""

    def __init__(self, name, n_examples, shard_size, seed=None, orders_in_c=False):
        self.name, self.n_examples, self.shard_size, self.seed = name, n_examples, shard_size, seed
        self.n_shards = -(-n_examples // shard_size)
        self.shortfall = self.n_shards * shard_size - n_examples  # the short shard's gap
        self.orders_in_c = orders_in_c
        self._visits = {}  # epoch -> (its shard order, its short shard), the last few epochs

    def bounds(self, index, epoch=None):
        """``(start, stop)``: the examples shard ``index`` holds in epoch
        ``epoch`` (None: as an unshuffled split lays them)."""
        short = self.short_shard(epoch)
        start = index * self.shard_size - (self.shortfall if index > short else 0)
        return start, start + self.shard_size - (self.shortfall if index == short else 0)

    def short_shard(self, epoch=None):
        """The shard that holds fewer than ``shard_size`` examples (if any) in
        epoch ``epoch``: the last, or shuffled, one drawn each epoch."""
        if self.seed is None or epoch is None or not self.shortfall:
            return self.n_shards - 1
        return self._drawn(epoch)[1]

    def visit_order(self, epoch):
        """The shard indices in the order epoch ``epoch`` visits them."""
        if self.seed is None:
            return list(range(self.n_shards))
        return list(self._drawn(epoch)[0])

    def _drawn(self, epoch):
        if epoch not in self._visits:
            if len(self._visits) >= 4:
                self._visits.pop(next(iter(self._visits)))
            # (the short shard keyed apart from any shard's order: index n_shards)
            self._visits[epoch] = (self._permutation(self.n_shards, epoch).tolist(),
                                   int(permutation(self.n_shards, self.seed, epoch,
                                                   self.n_shards)[0]))
        return self._visits[epoch]

    def _permutation(self, n, epoch, index=None):
        if self.orders_in_c:
            from ..backend.ops.permutation import shuffled

            return shuffled(np.arange(n, dtype=np.int32), self.seed, epoch, index)[0]
        return permutation(n, self.seed, epoch, index)

    def n_batches(self, batch_size):
        """Whole minibatches in an epoch: each shard's, its remainder dropped."""
        full, last = divmod(self.n_examples, self.shard_size)
        return full * (self.shard_size // batch_size) + last // batch_size

    def start_of(self, epoch, batch_size, start):
        """Where minibatch ``start`` of epoch ``epoch`` lies: ``(the shard's
        place in the epoch's visit order, minibatches of the epoch before
        that shard, the minibatch's index in it)``; ``start`` may be the
        epoch's minibatch count (the epoch is over). Nothing is read."""
        start = check_start(start, self.n_batches(batch_size), self.name)
        number, order = 0, self.visit_order(epoch)
        for place, index in enumerate(order):
            first, stop = self.bounds(index, epoch)
            count = (stop - first) // batch_size
            if start < number + count:
                return place, number, start - number
            number += count
        return len(order), number, 0

    def shuffled_labels(self, labels, epoch, index):
        """``(order, own labels in that order)`` of shard ``index`` in epoch
        ``epoch`` (``labels``: the split's), new arrays, or ``(None, None)``
        with no seed: row ``i`` of the shard holds its example ``order[i]``."""
        if self.seed is None:
            return None, None
        start, stop = self.bounds(index, epoch)
        if self.orders_in_c:
            from ..backend.ops.permutation import shuffled

            return shuffled(labels[start:stop], self.seed, epoch, index)
        order = permutation(stop - start, self.seed, epoch, index)
        return order, labels[start:stop][order]

    def error(self, index, error, epoch=None):
        """The :class:`StreamError` for shard ``index`` (of epoch ``epoch``)
        that failed with ``error``."""
        start, stop = self.bounds(index, epoch)
        return StreamError(f"{self.name}: shard {index} (examples {start} to {stop - 1}): {error}")
