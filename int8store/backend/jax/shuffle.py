"""The Feistel order of :mod:`int8store.order.shuffle` in ``jax.numpy``,
inside traced functions (int8store's JAX conversions of a shuffled
minibatch): the same arithmetic, so the C backend, JAX mode and the host give
the same order.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np

from ...errors import ArgumentError
from ...order.shuffle import CLASSES, class_sizes, feistel, half_bits, round_keys

__all__ = ["permuted_jax", "permuted_in_classes_jax"]


def permuted_jax(positions, n, max_n, seed, epoch, index=None):
    """:func:`~int8store.order.shuffle.permuted` in ``jax.numpy``, inside a traced function:
    ``epoch`` may be traced; ``max_n`` (a Python int) fixes the bits.

    A traced function cannot raise: positions outside their domain ``[0,
    n)`` are not walked (the walk always ends) and give no meaningful row;
    the caller checks them on the host (int8store's JAX mode checks every
    minibatch index before each call). An empty domain that is known when
    tracing (``n`` a Python int or a numpy array) with positions to fill is
    refused, as by :func:`~int8store.order.shuffle.permuted`.
    """
    if isinstance(n, (int, np.integer, np.ndarray)) and math.prod(jnp.shape(positions)) \
            and int(np.min(n)) < 1:
        raise ArgumentError(f"a shuffle of an empty domain (n = {int(np.min(n))}) has no row "
                            "for the positions asked: there is nothing to shuffle")
    half = half_bits(int(max_n))
    keys = round_keys(jnp.uint32(seed & 0xFFFFFFFF), jnp.asarray(epoch).astype(jnp.uint32), jnp,
                      None if index is None else jnp.asarray(index).astype(jnp.uint32))
    limit = jnp.asarray(n).astype(jnp.uint32)
    start = jnp.asarray(positions).astype(jnp.uint32) + jnp.zeros(limit.shape, jnp.uint32)
    inside = start < limit  # only these are walked: their cycle returns to them
    x = feistel(start, keys, half, jnp)

    def outside(x):
        return jnp.any((x >= limit) & inside)

    def walk(x):
        return jnp.where((x >= limit) & inside, feistel(x, keys, half, jnp), x)

    return jax.lax.while_loop(outside, walk, x).astype(jnp.int32)


def permuted_in_classes_jax(positions, n, seed, epoch):
    """:func:`~int8store.order.shuffle.permuted_in_classes` in ``jax.numpy``
    (``n`` a Python int; ``positions`` and ``epoch`` may be traced)."""
    positions = jnp.asarray(positions)
    classes = positions % CLASSES
    sizes = jnp.asarray(class_sizes(n), dtype=jnp.int32)[classes]
    within = permuted_jax(positions // CLASSES, sizes, -(-int(n) // CLASSES), seed, epoch,
                          index=classes)
    return within * CLASSES + classes
