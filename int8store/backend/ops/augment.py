"""Augmentation of an int8 minibatch inside the graph: :class:`Augment`,
applied to the codes before they are widened to floats, so that no float
or padded copy of the set is made (the arithmetic, and its definition, in
:mod:`int8store.augment.draws`).

Its ``perform`` is the numpy definition; its C code is written from the
same constants (the finaliser's steps, the salts, the draws' order) and
gives the same bytes; int8store's JAX mode runs the definition in
``jax.numpy`` (:mod:`int8store.backend.jax.conversions`)."""

import numpy as np

from ...augment.draws import AUGMENT_SALT, DRAWS, augment
from ...augment.spec import Augmentation
from ...errors import ArgumentError
from ...order.shuffle import EPOCH_SALT, GOLDEN, MIX_STEPS
from ..setup.activation import activate
from . import numba
from .hashing import c_mix

_api = activate()
at = _api.at

__all__ = ["Augment", "augmented"]

_MASK = 0xFFFFFFFF
# What the C code is made of: a change of the draws is a new version.
_VERSION = (2, GOLDEN, EPOCH_SALT, AUGMENT_SALT, len(DRAWS)) + tuple(
    value or 0 for step in MIX_STEPS for value in step)


class Augment(_api.module("link.c.op").COp):
    """``Augment(spec, grid, seed, fill)(codes, step, epoch)``: the int8
    ``codes`` of minibatch ``step`` of ``epoch`` (``(batch, rows * cols *
    channels)``, images channels-last) augmented by ``spec`` (an
    :class:`~int8store.augment.spec.Augmentation`), draws keyed by ``seed``;
    ``fill`` is the code of a black pixel. ``step`` and ``epoch`` are integer
    scalars (taken modulo 2**32)."""

    __props__ = ("spec", "grid", "seed", "fill")

    def __init__(self, spec, grid, seed, fill):
        if not isinstance(spec, Augmentation):
            raise ArgumentError(f"Augment takes an Augmentation, got {spec!r}")
        if not -128 <= int(fill) <= 127:
            raise ArgumentError(f"fill={fill!r}: the code of a black pixel is an int8 (-128..127)")
        # (checked to fit the images: the C code reads only inside each image)
        self.spec, self.grid = spec, spec.grid(tuple(int(n) for n in grid), "Augment")
        self.seed, self.fill = int(seed) & _MASK, int(fill)

    def make_node(self, codes, step, epoch):
        codes = at.as_tensor_variable(codes)
        keys = [at.as_tensor_variable(v) for v in (step, epoch)]
        width = self.grid[0] * self.grid[1] * self.grid[2]
        if codes.ndim != 2 or codes.dtype != "int8" or \
                any(v.ndim or not v.dtype.startswith(("int", "uint")) for v in keys):
            raise ArgumentError("augmentation takes int8 codes (batch, pixels) and integer scalars "
                                f"(step, epoch), got {', '.join(str(v.type) for v in [codes] + keys)}")
        if codes.type.shape[1] not in (None, width):
            raise ArgumentError(f"augmentation of {self.grid} images needs {width} codes an "
                                f"example, got {codes.type.shape[1]}")
        out = at.TensorType("int8", shape=codes.type.shape)()
        return _api.module("graph.basic").Apply(
            self, [codes] + [v if v.dtype == "int64" else at.cast(v, "int64") for v in keys], [out])

    def perform(self, node, inputs, outputs):
        codes, step, epoch = inputs
        outputs[0][0] = augment(np.ascontiguousarray(codes), self.spec, self.grid, self.seed,
                                np.uint32(int(epoch) & _MASK), np.uint32(int(step) & _MASK),
                                self.fill, np)

    def infer_shape(self, *node_and_shapes):
        return [node_and_shapes[-1][0]]  # Aesara passes (fgraph, node, shapes); PyTensor (node, shapes)

    def grad(self, inputs, output_grads):
        # The stored images are data, never parameters: nothing to differentiate.
        gradient = _api.module("gradient")
        return [gradient.grad_not_implemented(self, 0, inputs[0],
                                              "augmented minibatches of stored data are not "
                                              "differentiable")] \
            + [gradient.DisconnectedType()() for _ in inputs[1:]]

    def connection_pattern(self, node):
        return [[True], [False], [False]]

    def c_support_code(self, **kwargs):
        return c_mix()

    def c_code_cache_version(self):
        return _VERSION

    def c_code(self, node, name, inputs, outputs, sub):
        codes, step, epoch = inputs
        out, = outputs
        fail = sub["fail"]
        spec, (rows, columns, channels) = self.spec, self.grid
        r, cut = spec.translate, spec.cutout

        def drawn(key, which, bound):
            increment = (DRAWS.index(which) + 1) * GOLDEN & _MASK
            return f"(npy_int32)(int8store_mix({key} + 0x{increment:08X}u) % {bound}u)"

        flip = {"none": "0",
                "random": drawn("key", "flip", 2),
                "alternate": f"({drawn('first_key', 'flip', 2)} ^ (npy_int32)(epoch & 1u))"}[spec.flip]
        if spec.fill == "zero":
            place = "inside &= (s >= 0 && s < n); s = s < 0 ? 0 : (s > n - 1 ? n - 1 : s);"
        elif spec.fill == "reflect":
            place = ("if (s < 0) s = -s; if (s > n - 1) s = 2 * (n - 1) - s;"
                     " s = s < 0 ? 0 : (s > n - 1 ? n - 1 : s);")  # (as draws._within)
        else:
            place = "s = s < 0 ? 0 : (s > n - 1 ? n - 1 : s);"

        def key_of(base):
            return (f"int8store_mix({base} ^ int8store_mix(position * 0x{GOLDEN:08X}u"
                    f" + {AUGMENT_SALT}u))")

        return f"""
        {{
        PyArrayObject *in = PyArray_GETCONTIGUOUS({codes});
        if (!in) {{ {fail} }}
        npy_intp batch = PyArray_DIMS(in)[0], width = PyArray_DIMS(in)[1];
        if (width != {rows * columns * channels}) {{
            Py_DECREF(in);
            PyErr_Format(PyExc_ValueError, "augmentation of {rows}x{columns}x{channels} images "
                         "needs {rows * columns * channels} codes an example, got %ld", (long)width);
            {fail}
        }}
        npy_uint32 step = (npy_uint32)*(npy_int64*)PyArray_DATA({step});
        npy_uint32 epoch = (npy_uint32)*(npy_int64*)PyArray_DATA({epoch});
        npy_uint32 seed = {self.seed}u;
        npy_uint32 base = int8store_mix(seed ^ int8store_mix(epoch * 0x{GOLDEN:08X}u + {EPOCH_SALT}u));
        npy_uint32 first_base = int8store_mix(seed ^ int8store_mix({EPOCH_SALT}u));
        (void)first_base;
        Py_XDECREF({out});
        {out} = (PyArrayObject*)PyArray_EMPTY(2, PyArray_DIMS(in), NPY_INT8, 0);
        if (!{out}) {{ Py_DECREF(in); {fail} }}
        const npy_int8 *source = (const npy_int8*)PyArray_DATA(in);
        npy_int8 *target = (npy_int8*)PyArray_DATA({out});
        for (npy_intp b = 0; b < batch; b++) {{
            npy_uint32 position = step * (npy_uint32)batch + (npy_uint32)b;
            npy_uint32 key = {key_of("base")};
            npy_uint32 first_key = {key_of("first_base") if spec.flip == "alternate" else "0"};
            (void)key; (void)first_key;
            npy_int32 dy = {drawn("key", "row_shift", 2 * r + 1) + f" - {r}" if r else "0"};
            npy_int32 dx = {drawn("key", "column_shift", 2 * r + 1) + f" - {r}" if r else "0"};
            npy_int32 flipped = {flip};
            npy_int32 top = {drawn("key", "cutout_row", rows) + f" - {cut // 2}" if cut else "0"};
            npy_int32 left = {drawn("key", "cutout_column", columns) + f" - {cut // 2}" if cut else "0"};
            const npy_int8 *image = source + b * {rows * columns * channels};
            npy_int8 *to = target + b * {rows * columns * channels};
            for (npy_int32 y = 0; y < {rows}; y++) {{
                npy_int32 s = y - dy, n = {rows};
                int inside = 1;
                {place}
                npy_int32 from_y = s, inside_y = inside;
                for (npy_int32 x = 0; x < {columns}; x++) {{
                    s = (flipped ? {columns - 1} - x : x) - dx; n = {columns};
                    inside = inside_y;
                    {place}
                    {"if (y >= top && y < top + %d && x >= left && x < left + %d) inside = 0;"
                     % (cut, cut) if cut else ""}
                    npy_int8 *pixel = to + (y * {columns} + x) * {channels};
                    if (inside) {{
                        const npy_int8 *from = image + (from_y * {columns} + s) * {channels};
                        for (int c = 0; c < {channels}; c++) pixel[c] = from[c];
                    }} else {{
                        for (int c = 0; c < {channels}; c++) pixel[c] = {self.fill};
                    }}
                }}
            }}
        }}
        Py_DECREF(in);
        }}
        """


numba.declare(Augment)  # its perform, in Numba's object mode


def augmented(codes, step, epoch, spec, image_shape, seed, fill, name="data"):
    """Symbolic int8 ``codes`` (a minibatch, ``(batch, pixels)``) of minibatch
    ``step`` of ``epoch`` augmented by ``spec`` (see :class:`Augment`)."""
    return Augment(spec, spec.grid(image_shape, name), seed, fill)(codes, step, epoch)
