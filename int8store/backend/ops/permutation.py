"""Shuffled orders computed in C, for the host: :func:`shuffled`.

A shuffled stream needs a new order for each shard it trains on (and for
the shards of each epoch), in the training process, between two steps. On
a machine whose cores the BLAS threads fill, whatever the trainer does
besides its steps costs the steps: numpy's ``default_rng((seed, epoch,
index)).permutation(3000)`` took 0.1 to 0.2 ms a shard (most of it seeding
the generator), 4 % of training logistic regression on the shard, and
putting the labels in that order with an int32 index another 13 us. The
same order as :func:`int8store.order.shuffle.permutation` (the numpy
reference, which every process that builds no graph uses, and a JAX-mode
stream: 85 us a shard of 3,000 here), and the labels taken in it, computed
by a small C op in a function compiled once per process: some 12 us here
(35 us when it was adopted).

The op builds the Feistel network's table over its domain (at most ``4n``
entries) and walks each position through it. Its C source is written from
the network's definition in :mod:`int8store.order.shuffle` (the finaliser's
steps, the golden-ratio increment, the salts, the rounds): nothing of it is
copied by hand. Without a C compiler the function runs the op's
``perform``: the reference."""

import textwrap
import threading

import numpy as np

from ...errors import ArgumentError
from ...order.shuffle import (EPOCH_SALT, GOLDEN, INDEX_SALT, MIX_STEPS, ROUNDS, permutation,
                              round_offset)
from ..setup.activation import activate
from .hashing import c_mix

_api = activate()
at = _api.at

__all__ = ["Permutation", "shuffled"]

_MASK = 0xFFFFFFFF


def _c_keys():
    """The rounds' keys ``k0..`` as :func:`int8store.order.shuffle.round_keys`
    computes them, from ``seed``, ``epoch`` and ``index`` (none when < 0)."""
    return "\n".join(
        [f"npy_uint32 base = int8store_mix(seed ^ int8store_mix(epoch * 0x{GOLDEN:08X}u"
         f" + {EPOCH_SALT}u));",
         "if (index >= 0)",
         f"    base = int8store_mix(base ^ int8store_mix((npy_uint32)index * 0x{GOLDEN:08X}u"
         f" + {INDEX_SALT}u));"]
        + [f"npy_uint32 k{r} = int8store_mix(base + 0x{round_offset(r):08X}u);"
           for r in range(ROUNDS)])


def _c_rounds():
    """The network's rounds on ``l``, ``r`` (:func:`int8store.order.shuffle.feistel`)."""
    return "\n".join(f"t = r; r = l ^ (int8store_mix(r ^ k{k}) & mask); l = t;"
                      for k in range(ROUNDS))


# What the C code is made of: a change of the network is a new version.
_VERSION = (3, ROUNDS, GOLDEN, EPOCH_SALT, INDEX_SALT) + tuple(
    value or 0 for step in MIX_STEPS for value in step)


class Permutation(_api.module("link.c.op").COp):
    """``(order, values[order])`` for an int32 vector ``values`` of ``n``
    items: ``order`` is ``[0, n)`` shuffled by ``(seed, epoch)``, or by
    ``(seed, epoch, index)`` when ``index`` is 0 or more (int32, the values
    of :func:`int8store.order.shuffle.permutation`). ``seed``, ``epoch``
    and ``index`` are integer scalars, taken modulo 2**32."""

    __props__ = ()

    def make_node(self, values, seed, epoch, index):
        values = at.as_tensor_variable(values)
        keys = [at.as_tensor_variable(v) for v in (seed, epoch, index)]
        if values.ndim != 1 or values.dtype != "int32" or \
                any(v.ndim or not v.dtype.startswith(("int", "uint")) for v in keys):
            raise ArgumentError("a permutation shuffles an int32 vector by integer scalars (seed, "
                                f"epoch, index), got {', '.join(str(v.type) for v in [values] + keys)}")
        outputs = [at.TensorType("int32", shape=values.type.shape)() for _ in range(2)]
        return _api.module("graph.basic").Apply(self, [values] + [at.cast(v, "int64") for v in keys],
                                                outputs)

    def perform(self, node, inputs, outputs):
        values, seed, epoch, index = inputs
        order = permutation(len(values), int(seed), int(epoch), None if index < 0 else int(index))
        outputs[0][0], outputs[1][0] = order, values[order]

    def c_support_code(self, **kwargs):
        return c_mix()

    def c_headers(self, **kwargs):
        return ["<stdlib.h>"]

    def c_code_cache_version(self):
        return _VERSION

    def c_code(self, node, name, inputs, outputs, sub):
        values, seed, epoch, index = inputs
        out, taken = outputs
        fail = sub["fail"]
        return f"""
        {{
        npy_intp n = PyArray_DIMS({values})[0], stride = PyArray_STRIDES({values})[0];
        const char *items = PyArray_BYTES({values});
        npy_uint32 seed = (npy_uint32)*(npy_int64*)PyArray_DATA({seed});
        npy_uint32 epoch = (npy_uint32)*(npy_int64*)PyArray_DATA({epoch});
        npy_int64 index = *(npy_int64*)PyArray_DATA({index});
        if (n > 0x7FFFFFFF) {{
            PyErr_Format(PyExc_ValueError, "a permutation of %ld items: at most 2**31 - 1",
                         (long)n);
            {fail}
        }}
        /* the rounds' keys, as order.shuffle.round_keys */
        {textwrap.indent(_c_keys(), " " * 8).lstrip()}
        /* half the bits of the domain, as order.shuffle.half_bits */
        int bits = 0;
        for (npy_intp m = n - 1; m > 0; m >>= 1) bits++;
        if (bits < 2) bits = 2;
        int half = (bits + 1) / 2;
        npy_uint32 mask = (npy_uint32)((1ull << half) - 1);
        npy_intp domain = (npy_intp)1 << (2 * half);
        npy_uint32 *table = (npy_uint32*)malloc((size_t)domain * sizeof(npy_uint32));
        if (!table) {{ PyErr_NoMemory(); {fail} }}
        for (npy_intp p = 0; p < domain; p++) {{
            npy_uint32 l = (npy_uint32)p >> half, r = (npy_uint32)p & mask, t;
            {textwrap.indent(_c_rounds(), " " * 12).lstrip()}
            table[p] = (l << half) | r;
        }}
        Py_XDECREF({out});
        Py_XDECREF({taken});
        {taken} = NULL;
        {out} = (PyArrayObject*)PyArray_EMPTY(1, &n, NPY_INT32, 0);
        if ({out}) {taken} = (PyArrayObject*)PyArray_EMPTY(1, &n, NPY_INT32, 0);
        if (!{taken}) {{ free(table); {fail} }}
        npy_int32 *order = (npy_int32*)PyArray_DATA({out});
        npy_int32 *in_order = (npy_int32*)PyArray_DATA({taken});
        for (npy_intp p = 0; p < n; p++) {{
            npy_uint32 x = table[p];
            while (x >= (npy_uint32)n) x = table[x];  /* cycle walking */
            order[p] = (npy_int32)x;
            in_order[p] = *(const npy_int32*)(items + (npy_intp)x * stride);
        }}
        free(table);
        }}
        """


_compiled = None
_lock = threading.Lock()  # a compiled function is not re-entrant


def shuffled(values, seed, epoch, index=None):
    """``(order, values[order])``: ``order`` is ``[0, len(values))``
    shuffled by ``(seed, epoch)`` or ``(seed, epoch, index)``
    (:func:`int8store.order.shuffle.permutation`'s values), ``values`` an
    int32 vector (a shard's labels); new arrays, computed in C.
    Thread-safe; the first call compiles.

    Examples
    --------
    >>> import numpy as np
    >>> from int8store.order.shuffle import permutation
    >>> order, labels = shuffled(np.arange(100, 110, dtype=np.int32), 42, 0, index=3)
    >>> bool((order == permutation(10, 42, 0, index=3)).all()), bool((labels == 100 + order).all())
    (True, True)
    """
    global _compiled
    arguments = [np.asarray(values, dtype=np.int32)] + [
        np.asarray(v, dtype=np.int64) for v in
        (seed & _MASK, epoch & _MASK, -1 if index is None else index & _MASK)]
    if arguments[0].ndim != 1:
        raise ArgumentError(f"values of shape {arguments[0].shape}: a permutation shuffles a vector")
    with _lock:
        if _compiled is None:
            symbols = [at.ivector()] + [at.lscalar() for _ in arguments[1:]]
            mode = _api.module("compile.mode").Mode(linker="cvm", optimizer=None)
            _compiled = _api.function(symbols, Permutation()(*symbols), mode=mode)
            _compiled.trust_input = True  # (the arguments are made right here)
        order, taken = _compiled(*arguments)
    return order, taken
