"""A seeded bijection of ``[0, n)`` per epoch, computed position by position.

``permuted(p, n, seed, epoch)`` is the row taken at position ``p`` of epoch
``epoch``: a four-round Feistel network over the smallest even number of
bits that covers ``n`` (keys from the seed, the epoch and the round), walked
again while the result is ``n`` or more (cycle walking: at most a few
steps, fewer than two on average). Each position costs O(1) and needs
nothing but ``(seed, epoch, p)``: a process, or a device, knows which rows it
takes without a message from any other, and a data position is
``(seed, epoch, step)`` whatever the number of hosts (the idea of Grain's
``index_shuffle``).

The same arithmetic (32-bit unsigned, wrapping) runs in numpy and in
``jax.numpy``: the C backend, JAX mode and the host give the same order.

:func:`permutation` is the whole of ``[0, n)`` at once, for a streamed
shard's order (keyed by the shard's ``index`` too) or the order in which an
epoch visits the shards: the values of :func:`permuted` at positions
``0..n-1``, walked through a table of the network's domain (at most ``4n``
entries) instead of computed again at each step of a walk. This is the
reference; in the training process :mod:`.permutation_op` computes it in C.
"""

import math

import numpy as np

from ..errors import ArgumentError

__all__ = ["permuted", "permuted_jax", "permutation"]

_ROUNDS = 4
_M1, _M2, _GOLDEN = 0x85EBCA6B, 0xC2B2AE35, 0x9E3779B9


def _mix(x, xp):
    """A 32-bit finaliser (MurmurHash3's), on uint32 arrays of ``xp``. Every
    constant is a uint32: numpy 1.x would widen a 0-d uint32 array shifted by
    a Python int to int64, and the order would differ from JAX's."""
    x = x ^ (x >> xp.uint32(16))
    x = x * xp.uint32(_M1)
    x = x ^ (x >> xp.uint32(13))
    x = x * xp.uint32(_M2)
    return x ^ (x >> xp.uint32(16))


def _keys(seed, epoch, xp, index=None):
    """The rounds' keys for ``(seed, epoch)``, and with ``index`` for that
    sub-stream of the epoch (a shard's order)."""
    base = _mix(xp.asarray(seed, dtype=xp.uint32) ^ _mix(xp.asarray(epoch, dtype=xp.uint32)
                                                        * xp.uint32(_GOLDEN) + xp.uint32(1), xp),
                xp)
    if index is not None:
        base = _mix(base ^ _mix(xp.asarray(index, dtype=xp.uint32) * xp.uint32(_GOLDEN)
                                + xp.uint32(2), xp), xp)
    return [_mix(base + xp.uint32((r + 1) * _GOLDEN & 0xFFFFFFFF), xp) for r in range(_ROUNDS)]


def _half_bits(n):
    bits = max(2, int(n - 1).bit_length())
    return (bits + 1) // 2


def _feistel(x, keys, half, xp):
    mask = xp.uint32((1 << half) - 1)
    left, right = x >> xp.uint32(half), x & mask
    for key in keys:
        left, right = right, left ^ (_mix(right ^ key, xp) & mask)
    return (left << xp.uint32(half)) | right


def permuted(positions, n, seed, epoch):
    """Rows (int64) at ``positions`` of epoch ``epoch`` of a shuffle of
    ``[0, n)`` by ``seed`` (numpy). ``n`` may be an array broadcasting with
    ``positions`` (one domain per device), all no larger than ``max_n``
    would need: the bits are those of the largest.

    Every position must lie in its domain, ``[0, n)``: a position outside
    would be walked without end (an empty domain, ``n = 0``, has none) or
    give a row twice, so it is refused with :class:`~int8store.ArgumentError`.

    Examples
    --------
    >>> sorted(permuted(np.arange(5), 5, seed=1, epoch=0).tolist())
    [0, 1, 2, 3, 4]
    >>> permuted(np.arange(0), 0, seed=1, epoch=0).tolist()
    []
    """
    n = np.asarray(n, dtype=np.int64)
    positions = np.asarray(positions)
    _check_positions(positions, n)
    half = _half_bits(int(n.max()))
    with np.errstate(over="ignore"):  # uint32 arithmetic wraps, as intended
        keys = _keys(np.uint32(seed & 0xFFFFFFFF), np.uint32(epoch & 0xFFFFFFFF), np)
        x = positions.astype(np.uint32) + np.zeros(n.shape, np.uint32)
        shape = x.shape
        x = _feistel(x, keys, half, np).reshape(-1)
        limit = np.broadcast_to(n.astype(np.uint32), shape).reshape(-1)
        # Walk again only what is still outside its domain (each walk ends:
        # the position's own cycle passes through the position, inside).
        outside = np.flatnonzero(x >= limit)
        while outside.size:
            x[outside] = _feistel(x[outside], keys, half, np)
            outside = outside[x[outside] >= limit[outside]]
    return x.reshape(shape).astype(np.int64)


def _check_positions(positions, n):
    """Refuse a position outside its domain ``[0, n)``."""
    every, domains = np.broadcast_arrays(positions, n)
    outside = (every < 0) | (every >= domains)
    if not outside.any():
        return
    position, domain = int(every[outside][0]), int(domains[outside][0])
    if domain < 1:
        raise ArgumentError(f"a shuffle of an empty domain (n = {domain}) has no row for "
                            f"position {position}: there is nothing to shuffle")
    raise ArgumentError(f"position {position} is outside the shuffle's domain [0, {domain}): "
                        f"ask for positions 0 to {domain - 1}")


def permutation(n, seed, epoch, index=None):
    """``[0, n)`` shuffled by ``(seed, epoch)``, or by ``(seed, epoch,
    index)``: int32, item ``i`` is what position ``i`` takes (with no
    ``index``, ``permuted(np.arange(n), n, seed, epoch)``)."""
    half = _half_bits(n)
    with np.errstate(over="ignore"):
        keys = _keys(np.uint32(seed & 0xFFFFFFFF), np.uint32(epoch & 0xFFFFFFFF), np,
                     None if index is None else np.uint32(index & 0xFFFFFFFF))
        table = _feistel(np.arange(1 << (2 * half), dtype=np.uint32), keys, half, np)
    order = table[:n].copy()
    outside = np.flatnonzero(order >= n)
    while outside.size:
        order[outside] = table[order[outside]]
        outside = outside[order[outside] >= n]
    return order.astype(np.int32)


def permuted_jax(positions, n, max_n, seed, epoch):
    """:func:`permuted` in ``jax.numpy``, inside a traced function:
    ``epoch`` may be traced; ``max_n`` (a Python int) fixes the bits.

    A traced function cannot raise: positions outside their domain ``[0,
    n)`` are not walked (the walk always ends) and give no meaningful row;
    the caller checks them on the host (int8store's JAX mode checks every
    minibatch index before each call). An empty domain that is known when
    tracing (``n`` a Python int or a numpy array) with positions to fill is
    refused, as by :func:`permuted`.
    """
    import jax
    import jax.numpy as jnp

    if isinstance(n, (int, np.integer, np.ndarray)) and math.prod(jnp.shape(positions)) \
            and int(np.min(n)) < 1:
        raise ArgumentError(f"a shuffle of an empty domain (n = {int(np.min(n))}) has no row "
                            "for the positions asked: there is nothing to shuffle")
    half = _half_bits(int(max_n))
    keys = _keys(jnp.uint32(seed & 0xFFFFFFFF), jnp.asarray(epoch).astype(jnp.uint32), jnp)
    limit = jnp.asarray(n).astype(jnp.uint32)
    start = jnp.asarray(positions).astype(jnp.uint32) + jnp.zeros(limit.shape, jnp.uint32)
    inside = start < limit  # only these are walked: their cycle returns to them
    x = _feistel(start, keys, half, jnp)

    def outside(x):
        return jnp.any((x >= limit) & inside)

    def walk(x):
        return jnp.where((x >= limit) & inside, _feistel(x, keys, half, jnp), x)

    return jax.lax.while_loop(outside, walk, x).astype(jnp.int32)
