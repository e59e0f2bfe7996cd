"""Rows of an int8 matrix by index, widened to floats in the same pass.

:class:`GatherRows` computes ``data[rows]`` (``rows`` an int32 or int64 vector), and,
with a ``decode`` recipe, the float view of those codes at once:
``((T(code) + offset) - shift) * scale``, each step in the view's dtype ``T``.
A shuffled shard lent in the split's own order is trained on through it
(:mod:`int8store.streaming.split`): the minibatch's rows are gathered from
the shard by the epoch's order and converted in the step itself, instead of
being copied into a shuffled buffer beforehand by another thread or process,
which on a machine whose cores the BLAS threads fill took time from the step.

On the C backend the op reads each row once, straight into the float
output (the gather costs about what the cast of a contiguous minibatch
costs), asks the CPU for the next rows a few rows ahead (rows by index
defeat the hardware's prefetcher), and reuses its output array. Elsewhere:
``perform`` in numpy (and in PyTensor's Numba mode, without its warning:
:mod:`.numba`), ``jnp.take`` in JAX mode
(:mod:`int8store.backend.jax.conversions`).

The recipe gives exactly the values :func:`~int8store.dequantize` gives
for the same codes when ``scale`` is a power of two (levels and their sum
with an integer offset are exact; only the shift rounds, once, as the graph
rounds it): :func:`decode_recipe` returns one only then, else None (a
codebook, a divisor like 255, or ``"batch"`` normalization), and the rows
are gathered as codes and converted by the usual graph.
"""

import math

import numpy as np

from ...codes.encoding import is_power_of_two
from ...errors import ArgumentError, MinibatchIndexError
from ..setup.activation import activate
from . import numba

_api = activate()
at = _api.at

__all__ = ["GatherRows", "gather_rows", "decode_recipe"]

# Rows asked for ahead of the one being read (a few microseconds of work).
_PREFETCH_ROWS = 4


def decode_recipe(encoding, normalize, dataset_mean, dtype):
    """``(offset, shift, scale)`` with which :class:`GatherRows` yields
    exactly the per-pixel stage of :func:`~int8store.dequantize`, or None
    when no such recipe is known to be exact: codebooks, divisors that are
    not powers of two, and ``"batch"`` (its minibatch mean is the graph's
    whole business: the rows stay codes until then, as in a resident split)."""
    if encoding.is_codebook or normalize in ("batch", "channel", "standard"):
        return None  # (per-channel statistics: a vector, which the recipe has no room for)
    if normalize == "none":
        return 0.0, 0.0, 1.0
    offset = float(encoding.offset)
    if normalize == "dataset":
        # (levels - mean) / spread (a power of two), the mean rounded to the view's dtype first
        return offset, float(np.asarray(dataset_mean, dtype=dtype)), 1.0 / encoding.spread
    divisor = int(encoding.divisor)
    if divisor < 1 or not is_power_of_two(divisor):
        return None
    return offset, 0.0, 1.0 / divisor


class GatherRows(_api.module("link.c.op").COp):
    """``data[rows]`` for int8 ``data`` (rows along the first axis) and an
    integer vector ``rows``; with ``dtype`` (a float dtype) the rows come out
    decoded: ``((dtype(code) + offset) - shift) * scale``.

    A row index outside the data raises :class:`~int8store.MinibatchIndexError`
    on the C backend and in numpy. A compiled XLA program cannot raise: in
    JAX mode ``jnp.take`` fills such a row (NaN, or the least code), so the
    rows must be the data's own, as int8store's orders of a shard are.
    """

    __props__ = ("dtype", "offset", "shift", "scale")

    def __init__(self, dtype=None, offset=0.0, shift=0.0, scale=1.0):
        if dtype is not None and dtype not in _api.FLOAT_DTYPES:
            raise ArgumentError(f"dtype={dtype!r}: rows are decoded to float32 or float64")
        if scale <= 0 or math.frexp(scale)[0] != 0.5:
            raise ArgumentError(f"scale={scale!r}: a recipe's scale is a power of two "
                                "(its product rounds as the graph's division does)")
        self.dtype = dtype
        self.offset, self.shift, self.scale = float(offset), float(shift), float(scale)

    def make_node(self, data, rows):
        data, rows = at.as_tensor_variable(data), at.as_tensor_variable(rows)
        if data.dtype != "int8" or data.ndim < 1:
            raise ArgumentError(f"rows are gathered from int8 codes, got {data.type}")
        if rows.ndim != 1 or not rows.dtype.startswith(("int", "uint")):
            raise ArgumentError(f"rows are chosen by an integer vector, got {rows.type}")
        if rows.dtype not in ("int32", "int64"):
            # (a cast to int32 wrapped row 2**32 + 1 round to row 1: a wider
            # index is read as it is, and checked)
            rows = at.cast(rows, "int32" if rows.dtype in ("int8", "int16", "uint8", "uint16")
                           else "int64")
        out = at.TensorType(self.dtype or data.dtype,
                            shape=(rows.type.shape[0],) + tuple(data.type.shape[1:]))()
        return _api.module("graph.basic").Apply(self, [data, rows], [out])

    def perform(self, node, inputs, outputs):
        data, rows = inputs
        _check_rows(rows, len(data), node)
        codes = data[rows]
        if self.dtype is None:
            outputs[0][0] = codes
            return
        dtype = np.dtype(self.dtype)
        values = codes.astype(dtype)
        values += dtype.type(self.offset)
        values -= dtype.type(self.shift)
        values *= dtype.type(self.scale)
        outputs[0][0] = values

    def infer_shape(self, *node_and_shapes):
        # Aesara passes (fgraph, node, shapes); PyTensor (node, shapes).
        data, rows = node_and_shapes[-1]
        return [tuple(rows[:1]) + tuple(data[1:])]

    def grad(self, inputs, output_grads):
        gradient = _api.module("gradient")
        return [gradient.grad_not_implemented(self, 0, inputs[0],
                                              "rows of stored data are not differentiable"),
                gradient.DisconnectedType()()]

    def connection_pattern(self, node):
        return [[True], [False]]

    def c_headers(self, **kwargs):
        return ["<string.h>"]

    def c_code_cache_version(self):
        return (2, _PREFETCH_ROWS)

    def c_code_cache_version_apply(self, node):
        # The data's name is in the error message, not in the op's props: a
        # module compiled for one name is not reused for another.
        return self.c_code_cache_version() + (_label(node),)

    def c_code(self, node, name, inputs, outputs, sub):
        data, rows = inputs
        out, = outputs
        fail = sub["fail"]
        label = _c_string(_label(node))
        index_type = f"npy_{node.inputs[1].dtype}"
        out_type = "npy_int8" if self.dtype is None else f"npy_{self.dtype}"
        type_num = "NPY_INT8" if self.dtype is None else f"NPY_{self.dtype.upper()}"
        if self.dtype is None:
            copy_row = "memcpy(dst, src, width);"
        else:
            value = f"(({out_type})src[j] + ({out_type}){self.offset!r})"
            if self.shift:
                value = f"({value} - ({out_type}){self.shift!r})"
            if self.scale != 1.0:
                value = f"{value} * ({out_type}){self.scale!r}"
            copy_row = f"for (npy_intp j = 0; j < width; j++) dst[j] = {value};"
        return f"""
        {{
        PyArrayObject *source = {data};
        int owned = 0;
        if (PyArray_NDIM(source) > 1 && !PyArray_IS_C_CONTIGUOUS(source)) {{
            source = PyArray_GETCONTIGUOUS(source);  /* a new reference */
            if (!source) {{ {fail} }}
            owned = 1;
        }}
        npy_intp n = PyArray_DIMS({rows})[0], total = PyArray_DIMS(source)[0];
        npy_intp width = 1;
        npy_intp dims[NPY_MAXDIMS];
        dims[0] = n;
        for (int d = 1; d < PyArray_NDIM(source); d++) {{
            width *= PyArray_DIMS(source)[d];
            dims[d] = PyArray_DIMS(source)[d];
        }}
        int reuse = {out} != NULL && PyArray_IS_C_CONTIGUOUS({out})
                    && PyArray_NDIM({out}) == PyArray_NDIM(source);
        for (int d = 0; reuse && d < PyArray_NDIM(source); d++)
            reuse = PyArray_DIMS({out})[d] == dims[d];
        if (!reuse) {{
            Py_XDECREF({out});
            {out} = (PyArrayObject*)PyArray_EMPTY(PyArray_NDIM(source), dims, {type_num}, 0);
            if (!{out}) {{ if (owned) Py_DECREF(source); {fail} }}
        }}
        const npy_int8 *base = (const npy_int8*)PyArray_DATA(source);
        npy_intp row_stride = PyArray_NDIM(source) > 1 ? width : PyArray_STRIDES(source)[0];
        const char *index = PyArray_BYTES({rows});
        npy_intp index_stride = PyArray_STRIDES({rows})[0];
        npy_intp bad = -1;
        for (npy_intp i = 0; i < n; i++) {{
            npy_int64 r = (npy_int64)*(const {index_type}*)(index + i * index_stride);
            if (r < 0 || r >= total) {{ bad = i; break; }}
        }}
        if (bad >= 0) {{
            /* int8store's MinibatchIndexError (an IndexError), as perform raises */
            PyObject *errors = PyImport_ImportModule("int8store.errors");
            PyObject *kind = errors ? PyObject_GetAttrString(errors, "MinibatchIndexError") : NULL;
            Py_XDECREF(errors);
            PyErr_Clear();
            PyErr_Format(kind ? kind : PyExc_IndexError, "%s: row %lld is outside 0..%ld (%ld rows)",
                         {label}, (long long)*(const {index_type}*)(index + bad * index_stride),
                         (long)total - 1,
                         (long)total);
            Py_XDECREF(kind);
            if (owned) Py_DECREF(source);
            {fail}
        }}
        {out_type} *target = ({out_type}*)PyArray_DATA({out});
        for (npy_intp i = 0; i < n; i++) {{
#if defined(__GNUC__)
            if (i + {_PREFETCH_ROWS} < n) {{
                const char *ahead = (const char*)(base + row_stride
                    * *(const {index_type}*)(index + (i + {_PREFETCH_ROWS}) * index_stride));
                for (npy_intp k = 0; k < width; k += 64) __builtin_prefetch(ahead + k);
            }}
#endif
            const npy_int8 *src = base + row_stride * *(const {index_type}*)(index + i * index_stride);
            {out_type} *dst = target + i * width;
            {copy_row}
        }}
        if (owned) Py_DECREF(source);
        }}
        """


# In PyTensor's default (Numba) mode: its perform, without the object-mode warning.
numba.declare(GatherRows)


def gather_rows(data, rows, recipe=None, dtype=None):
    """Symbolic ``data[rows]``, decoded to ``dtype`` by ``recipe`` (from
    :func:`decode_recipe`) when one is given."""
    if recipe is None:
        return GatherRows()(data, rows)
    return GatherRows(_api.float_dtype(dtype), *recipe)(data, rows)


def _label(node):
    return node.inputs[0].name or "data"


def _c_string(text):
    """``text`` as a C string literal (UTF-8; every byte but plain ASCII
    letters, digits and a few signs as an octal escape: no quote, backslash or
    newline can end it, and it is an argument, never a format)."""
    safe = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_ -.:/()[]")
    return '"' + "".join(chr(b) if b in safe else f"\\{b:03o}" for b in text.encode()) + '"'


def _check_rows(rows, total, node):
    if len(rows) and (rows.min() < 0 or rows.max() >= total):
        bad = rows[(rows < 0) | (rows >= total)][0]
        raise MinibatchIndexError(f"{node.inputs[0].name or 'data'}: row {bad} is outside "
                                  f"0..{total - 1} ({total} rows)")
