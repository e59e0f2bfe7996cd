"""Which examples each shard of a streamed split holds, and in which order:
a pure function of the split's length, the shard size and the seed.

Shard ``k`` holds examples ``[k * shard_size, (k + 1) * shard_size)`` (the
last one fewer). With no seed, an epoch visits the shards in that order and
each shard's examples as they lie; with a seed, epoch ``e`` visits the
shards in a permutation keyed by ``(seed, e)`` and takes shard ``k``'s
examples in a permutation keyed by ``(seed, e, k)``
(:func:`int8store.order.shuffle.permutation`, computed in C between two
steps by :mod:`int8store.backend.ops.permutation`).
"""

from ..errors import StreamError

__all__ = ["ShardLayout"]


class ShardLayout:
    """The shards of ``n_examples`` examples of split ``name``, ``shard_size``
    each, shuffled by ``seed`` (None: in order)."""

    def __init__(self, name, n_examples, shard_size, seed=None):
        self.name, self.n_examples, self.shard_size, self.seed = name, n_examples, shard_size, seed
        self.n_shards = -(-n_examples // shard_size)

    def bounds(self, index):
        """``(start, stop)``: the examples shard ``index`` holds."""
        start = index * self.shard_size
        return start, min(start + self.shard_size, self.n_examples)

    def visit_order(self, epoch):
        """The shard indices in the order epoch ``epoch`` visits them."""
        if self.seed is None:
            return list(range(self.n_shards))
        from ..backend.ops.permutation import permutation

        return permutation(self.n_shards, self.seed, epoch).tolist()

    def shuffled_labels(self, labels, epoch, index):
        """``(order, own labels in that order)`` of shard ``index`` in epoch
        ``epoch`` (``labels``: the split's), or ``(None, None)`` with no
        seed: row ``i`` of the shard holds its example ``order[i]``."""
        if self.seed is None:
            return None, None
        from ..backend.ops.permutation import shuffled

        start, stop = self.bounds(index)
        return shuffled(labels[start:stop], self.seed, epoch, index)

    def error(self, index, error):
        """The :class:`StreamError` for shard ``index`` that failed with ``error``."""
        start, stop = self.bounds(index)
        return StreamError(f"{self.name}: shard {index} (examples {start} to {stop - 1}): {error}")
