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

The same arithmetic (32-bit unsigned, wrapping) runs in numpy here, in
``jax.numpy`` (:mod:`int8store.backend.jax.shuffle`) and in C
(:mod:`int8store.backend.ops.permutation`, whose source is written from the
constants below): the C backend, JAX mode and the host give the same order.
:func:`mix`, :func:`round_keys` and :func:`feistel` take the array module
(``numpy`` or ``jax.numpy``) as ``xp``.

:func:`permutation` is the whole of ``[0, n)`` at once, for a streamed
shard's order (keyed by the shard's ``index`` too) or the order in which an
epoch visits the shards: the values of :func:`permuted` at positions
``0..n-1``, walked through a table of the network's domain (at most ``4n``
entries) instead of computed again at each step of a walk. This is the
reference, in numpy; the training process on the C backend computes a
shard's order in C (:func:`int8store.backend.ops.permutation.shuffled`,
about 12 us a shard of 3,000 against 85 us here, measured).
"""

import numpy as np

from ..errors import ArgumentError

__all__ = ["check_seed", "permuted", "permuted_in_classes", "permutation", "mix", "round_keys",
           "feistel", "half_bits", "class_sizes", "ROUNDS", "MIX_STEPS", "GOLDEN", "EPOCH_SALT",
           "INDEX_SALT", "CLASSES", "round_offset"]

#: Rounds of the Feistel network.
ROUNDS = 4
#: MurmurHash3's 32-bit finaliser, step by step: ``x ^= x >> shift``, then
#: ``x *= multiplier`` (none in the last step).
MIX_STEPS = ((16, 0x85EBCA6B), (13, 0xC2B2AE35), (16, None))
#: 2**32 divided by the golden ratio: spreads the epoch, the index and the rounds.
GOLDEN = 0x9E3779B9
#: Added to the spread epoch (and index) before they are mixed into the keys.
EPOCH_SALT, INDEX_SALT = 1, 2
_MASK = 0xFFFFFFFF
#: A split held whole is shuffled within its classes of rows modulo this
#: count (:func:`permuted_in_classes`), so that over 1, 2, 4 or 8 devices,
#: which hold the rows of some classes each, the order is the same.
CLASSES = 8


def check_seed(seed, option=None, name="seed"):
    """Refuse a seed the network does not take as given: its keys take 32
    bits, so a larger or negative seed would repeat another's order, and a
    float or a string was cut to an integer where held whole (and failed
    streamed)."""
    if not (isinstance(seed, (int, np.integer)) and not isinstance(seed, bool)
            and 0 <= seed < 1 << 32):
        raise ArgumentError(f"{name}={seed!r}{f' ({option})' if option else ''}: expected an "
                            f"integer from 0 to {_MASK}")
    return int(seed)


def round_offset(r):
    """What round ``r``'s key adds to the base key before mixing."""
    return (r + 1) * GOLDEN & _MASK


def mix(x, xp):
    """A 32-bit finaliser (MurmurHash3's, :data:`MIX_STEPS`), on uint32
    arrays of ``xp``. Every constant is a uint32: numpy 1.x would widen a
    0-d uint32 array shifted by a Python int to int64, and the order would
    differ from JAX's."""
    for shift, multiplier in MIX_STEPS:
        x = x ^ (x >> xp.uint32(shift))
        if multiplier is not None:
            x = x * xp.uint32(multiplier)
    return x


def round_keys(seed, epoch, xp, index=None):
    """The rounds' keys for ``(seed, epoch)`` (uint32 scalars of ``xp``), and
    with ``index`` for that sub-stream of the epoch (a shard's order)."""
    seed, epoch = xp.asarray(seed, dtype=xp.uint32), xp.asarray(epoch, dtype=xp.uint32)
    base = mix(seed ^ mix(epoch * xp.uint32(GOLDEN) + xp.uint32(EPOCH_SALT), xp), xp)
    if index is not None:
        index = xp.asarray(index, dtype=xp.uint32)
        base = mix(base ^ mix(index * xp.uint32(GOLDEN) + xp.uint32(INDEX_SALT), xp), xp)
    return [mix(base + xp.uint32(round_offset(r)), xp) for r in range(ROUNDS)]


def half_bits(n):
    """Half the bits of the network's domain for ``[0, n)``: the smallest even
    number of bits (at least 2) that covers ``n``, halved."""
    bits = max(2, int(n - 1).bit_length())
    return (bits + 1) // 2


def feistel(x, keys, half, xp):
    """The network on uint32 ``x`` (values below ``2 ** (2 * half)``)."""
    mask = xp.uint32((1 << half) - 1)
    left, right = x >> xp.uint32(half), x & mask
    for key in keys:
        left, right = right, left ^ (mix(right ^ key, xp) & mask)
    return (left << xp.uint32(half)) | right


def _keys(seed, epoch, index=None):
    """numpy's :func:`round_keys` for Python integers (``index`` also an
    integer array: a key per item), taken modulo 2**32."""
    return round_keys(np.uint32(seed & _MASK), np.uint32(epoch & _MASK), np,
                      None if index is None else (np.asarray(index) & _MASK).astype(np.uint32))


def permuted(positions, n, seed, epoch, index=None):
    """Rows (int64) at ``positions`` of epoch ``epoch`` of a shuffle of
    ``[0, n)`` by ``seed`` (numpy). ``n`` may be an array broadcasting with
    ``positions`` (one domain per device), all no larger than ``max_n``
    would need: the bits are those of the largest.

    ``index`` (an integer or an array broadcasting with ``positions``)
    keys each position's permutation further, as :func:`permutation` does.

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
    half = half_bits(int(n.max()) if n.size else 0)  # (no position: no domain to take bits of)
    with np.errstate(over="ignore"):  # uint32 arithmetic wraps, as intended
        x = positions.astype(np.uint32) + np.zeros(n.shape, np.uint32)
        if index is not None:
            x = x + np.zeros(np.shape(index), np.uint32)
        shape = x.shape
        keys = [np.broadcast_to(k, shape).reshape(-1) for k in _keys(seed, epoch, index)]
        x = feistel(x.reshape(-1), keys, half, np)
        limit = np.broadcast_to(n.astype(np.uint32), shape).reshape(-1)
        # Walk again only what is still outside its domain (each walk ends:
        # the position's own cycle passes through the position, inside).
        outside = np.flatnonzero(x >= limit)
        while outside.size:
            x[outside] = feistel(x[outside], [k[outside] for k in keys], half, np)
            outside = outside[x[outside] >= limit[outside]]
    return x.reshape(shape).astype(np.int64)


def class_sizes(n):
    """How many of ``n`` rows each class modulo :data:`CLASSES` holds
    (class ``c``: rows ``c, c + CLASSES, ...``)."""
    return np.maximum(0, (int(n) - np.arange(CLASSES) + CLASSES - 1) // CLASSES)


def permuted_in_classes(positions, n, seed, epoch):
    """Rows (int64) at ``positions`` of epoch ``epoch`` of a shuffle of
    ``[0, n)`` by ``seed`` that keeps each row in its class modulo
    :data:`CLASSES`: position ``p`` of class ``c = p % 8`` takes row
    ``8 * q' + c``, ``q'`` the place of ``p // 8`` in class ``c``'s own
    Feistel permutation, keyed by ``(seed, epoch, c)``. A split's shuffled
    order, held whole or over devices: device ``d`` of ``D`` holds the rows
    of classes ``d (mod D)``, so for ``D`` dividing 8 each device's
    positions take its own rows.

    Examples
    --------
    >>> rows = permuted_in_classes(np.arange(20), 20, seed=1, epoch=0)
    >>> sorted(rows.tolist()) == list(range(20)), bool((rows % 8 == np.arange(20) % 8).all())
    (True, True)
    """
    positions = np.asarray(positions, dtype=np.int64)
    classes = positions % CLASSES
    sizes = class_sizes(n)
    within = permuted(positions // CLASSES, sizes[classes], seed, epoch, index=classes)
    return within * CLASSES + classes


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
    half = half_bits(n)
    with np.errstate(over="ignore"):
        keys = _keys(seed, epoch, index)
        table = feistel(np.arange(1 << (2 * half), dtype=np.uint32), keys, half, np)
    order = table[:n].copy()
    outside = np.flatnonzero(order >= n)
    while outside.size:
        order[outside] = table[order[outside]]
        outside = outside[order[outside] >= n]
    return order.astype(np.int32)
