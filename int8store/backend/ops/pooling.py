"""Theano/Aesara's ``pool_2d`` for PyTensor, which has none: :func:`pool_2d`
takes the arguments of ``aesara.tensor.signal.pool.pool_2d`` (Theano's old
names ``ds``, ``st``, ``padding`` too) and computes its max pooling over the
last two axes. Two ops carry it, each with a NumPy ``perform``, an
``infer_shape`` and its gradient: :class:`MaxPool2d` and
:class:`MaxPool2dGrad` (Aesara's ``MaxPoolGrad``: every input equal to its
window's maximum gets the window's gradient, ties included, overlapping
windows adding up). Max pooling takes the maximum of ``ws[0]*ws[1]`` strided
views of the input.

Their JAX conversions are in :mod:`int8store.backend.jax.pytensor_conversions`;
in PyTensor's Numba mode they run their ``perform`` (declared to
:mod:`.numba`). This module imports only NumPy and PyTensor.
"""

import math

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.tensor.type import TensorType

from . import numba
from .windows import int_pair, pool_arguments, strided

__all__ = ["pool_2d", "MaxPool2d", "MaxPool2dGrad", "max_pool_forward", "max_pool_grad",
           "pool_out_len", "lowest"]


# -- max pooling -------------------------------------------------------------------------------

def pool_out_len(size, window, stride, pad, ignore_border):
    """Aesara's ``Pool.out_shape`` for one axis (None if ``size`` is)."""
    if size is None:
        return None
    size = size + 2 * pad
    if ignore_border:
        return max(0, (size - window) // stride + 1)
    if stride >= window:
        return (size - 1) // stride + 1
    return max(0, (size - 1 - window + stride) // stride) + 1


def lowest(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return -np.inf
    if dtype.kind == "b":
        return False
    return np.iinfo(dtype).min


def _pool_input(x, ws, stride, pad, out):
    """``x`` padded with its dtype's lowest value, so that all ``out`` windows lie inside it
    (padding on both sides, and at the end for ignore_border=False's partial windows)."""
    rows, cols = x.shape[-2:]
    need = [(out[i] - 1) * stride[i] + ws[i] if out[i] > 0 else 0 for i in range(2)]
    after = [max(0, need[i] - (x.shape[-2 + i] + pad[i])) for i in range(2)]
    if not any(pad) and not any(after):
        return x
    padded = np.full(x.shape[:-2] + (rows + pad[0] + after[0], cols + pad[1] + after[1]),
                     lowest(x.dtype), x.dtype)
    padded[..., pad[0]:pad[0] + rows, pad[1]:pad[1] + cols] = x
    return padded


def _max_pool_into(padded, result, ws, stride):
    """``result`` = the max pooling of ``padded`` (whose windows all lie inside it):
    the maximum of ws[0]*ws[1] strided views, rows first (long runs). NumPy's
    reductions over short axes (reshape + max) are many times slower."""
    out = result.shape[-2:]
    row_windows = [padded[..., strided(i, out[0], stride[0]), :] for i in range(ws[0])]
    if ws[0] == 1:
        rows = row_windows[0]
    else:
        rows = np.maximum(row_windows[0], row_windows[1])
        for window in row_windows[2:]:
            np.maximum(rows, window, out=rows)
    np.copyto(result, rows[..., strided(0, out[1], stride[1])])
    for j in range(1, ws[1]):
        np.maximum(result, rows[..., strided(j, out[1], stride[1])], out=result)


#: The most bytes of the row maxima a chunk of max pooling makes (the
#: temporary it needs beside its output: half the input, whole), unless one
#: item of the first axis makes more.
_POOL_CHUNK_BYTES = 1 << 20


def max_pool_forward(x, ws, stride, pad, ignore_border):
    """NumPy: Aesara's max pooling of the last two axes of ``x`` (the op's ``perform``)."""
    out = tuple(pool_out_len(x.shape[-2 + i], ws[i], stride[i], pad[i], ignore_border) for i in range(2))
    result = np.empty(x.shape[:-2] + out, x.dtype)
    if result.size == 0:
        return result
    padded = _pool_input(x, ws, stride, pad, out)
    if padded.ndim == 2:
        _max_pool_into(padded, result, ws, stride)
        return result
    # Along the first axis (images) in chunks, views whatever the strides: the
    # row maxima of all at once took as much memory again as the output and
    # half the input.
    per_item = math.prod(padded.shape[1:-2]) * out[0] * padded.shape[-1] * x.dtype.itemsize
    step = max(1, _POOL_CHUNK_BYTES // max(per_item, 1))
    for start in range(0, len(padded), step):
        _max_pool_into(padded[start:start + step], result[start:start + step], ws, stride)
    return result


def max_pool_grad(x, maxout, gz, ws, stride, pad, ignore_border):
    """NumPy: Aesara's ``MaxPoolGrad``: each input equal to its window's maximum gets the
    window's gradient (ties all do); overlapping windows add up."""
    out = maxout.shape[-2:]
    expected = tuple(pool_out_len(x.shape[-2 + i], ws[i], stride[i], pad[i], ignore_border) for i in range(2))
    if out != expected or gz.shape != maxout.shape or maxout.shape[:-2] != x.shape[:-2]:
        raise ValueError(f"max pooling's gradient: input {x.shape}, pooled {maxout.shape} and output "
                         f"gradient {gz.shape} do not match")
    if min(out) == 0 or x.size == 0:
        return np.zeros(x.shape, x.dtype)
    padded = _pool_input(x, ws, stride, pad, out)
    rows, cols = x.shape[-2:]
    # Windows that tile x exactly (the common case): each input is written once.
    tiled = ws == stride and padded is x and out[0] * ws[0] == rows and out[1] * ws[1] == cols
    grad = np.empty(x.shape, x.dtype) if tiled else np.zeros(padded.shape, x.dtype)
    gz = gz.astype(x.dtype, copy=False)
    for i in range(ws[0]):
        for j in range(ws[1]):
            window = (Ellipsis, strided(i, out[0], stride[0]), strided(j, out[1], stride[1]))
            hit = padded[window] == maxout
            if tiled:
                np.multiply(hit, gz, out=grad[window])
            else:
                grad[window] += hit * gz
    if tiled:
        return grad
    return np.ascontiguousarray(grad[..., pad[0]:pad[0] + rows, pad[1]:pad[1] + cols])


def _pool_settings(ws, stride, pad, ignore_border):
    ws = int_pair(ws, "ws", 1)
    stride = ws if stride is None else int_pair(stride, "stride", 1)
    pad = int_pair(pad, "pad", 0)
    if any(pad) and not ignore_border:
        raise NotImplementedError("pool_2d: padding works only with ignore_border=True")
    if any(p >= w for p, w in zip(pad, ws)):
        raise NotImplementedError(f"pool_2d: padding {pad} must be smaller than the window {ws}")
    return ws, stride, pad, bool(ignore_border)


class _PoolBase(Op):
    __props__ = ("ws", "stride", "ignore_border", "pad")

    def __init__(self, ws, stride=None, ignore_border=True, pad=(0, 0)):
        self.ws, self.stride, self.pad, self.ignore_border = _pool_settings(ws, stride, pad, ignore_border)

    def _settings(self):
        return dict(ws=self.ws, stride=self.stride, ignore_border=self.ignore_border, pad=self.pad)

    def _out_shape(self, shape):
        return tuple(shape[:-2]) + tuple(
            pool_out_len(shape[-2 + i], self.ws[i], self.stride[i], self.pad[i], self.ignore_border)
            for i in range(2))

    def _symbolic_out(self, size, i):
        window, stride, pad = self.ws[i], self.stride[i], self.pad[i]
        size = size + 2 * pad
        if self.ignore_border:
            return pt.maximum(0, (size - window) // stride + 1)
        if stride >= window:
            return (size - 1) // stride + 1
        return pt.maximum(0, (size - 1 - window + stride) // stride) + 1

    def grad(self, inputs, output_grads):
        """Aesara's spelling of :meth:`pullback` (PyTensor 3 calls ``pullback``)."""
        return self.pullback(inputs, self.make_node(*inputs).outputs, output_grads)


class MaxPool2d(_PoolBase):
    """Aesara's ``Pool(mode="max")`` of the last two axes:
    ``MaxPool2d(ws, stride, ignore_border, pad)(x)``."""

    def make_node(self, x):
        x = pt.as_tensor_variable(x)
        if x.type.ndim < 2:
            raise TypeError(f"pool_2d needs a tensor of 2 or more dimensions, not {x.type}")
        out = TensorType(x.dtype, shape=self._out_shape(x.type.shape))()
        return Apply(self, [x], [out])

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        output_storage[0][0] = max_pool_forward(x, self.ws, self.stride, self.pad, self.ignore_border)

    def infer_shape(self, *node_and_shapes):
        node, input_shapes = node_and_shapes[-2:]  # PyTensor 3.0 passes the fgraph first
        (shape,) = input_shapes
        static = node.outputs[0].type.shape
        symbolic = list(shape[:-2]) + [self._symbolic_out(shape[-2 + i], i) for i in range(2)]
        return [[symbolic[i] if s is None else s for i, s in enumerate(static)]]

    def pullback(self, inputs, outputs, cotangents):
        (x,) = inputs
        (gz,) = cotangents
        return [MaxPool2dGrad(**self._settings())(x, outputs[0], gz)]


class MaxPool2dGrad(_PoolBase):
    """Aesara's ``MaxPoolGrad``: ``MaxPool2dGrad(...)(x, maxout, gz)``, the gradient of the max
    pooling ``maxout`` of ``x`` for the output gradient ``gz``."""

    def make_node(self, x, maxout, gz):
        x = pt.as_tensor_variable(x)
        maxout = pt.as_tensor_variable(maxout)
        gz = pt.as_tensor_variable(gz)
        if x.type.ndim < 2 or maxout.type.ndim != x.type.ndim or gz.type.ndim != x.type.ndim:
            raise TypeError(f"max pooling's gradient: x, maxout and gz must have the same number "
                            f"(>= 2) of dimensions, not {x.type}, {maxout.type}, {gz.type}")
        out = TensorType(x.dtype, shape=x.type.shape)()
        return Apply(self, [x, maxout, gz], [out])

    def perform(self, node, inputs, output_storage):
        x, maxout, gz = inputs
        output_storage[0][0] = max_pool_grad(x, maxout, gz, self.ws, self.stride, self.pad,
                                             self.ignore_border)

    def infer_shape(self, *node_and_shapes):
        node, input_shapes = node_and_shapes[-2:]  # PyTensor 3.0 passes the fgraph first
        return [input_shapes[0]]

    def pullback(self, inputs, outputs, cotangents):
        x, maxout, gz = inputs
        (g,) = cotangents
        # Which inputs get gradients changes only where x crosses a tie: the
        # derivative in x and maxout is zero almost everywhere (as in Aesara).
        # In gz the op is linear: each window's maximum collects ``g`` over
        # the inputs it routed gz to (Aesara's DownsampleFactorMaxGradGrad).
        return [pt.zeros_like(x), pt.zeros_like(maxout), self._routed(x, maxout, g, gz.dtype)]

    def _routed(self, x, maxout, g, dtype):
        """``sum(g * (x == maxout))`` over each window: the pooled shape."""
        out = maxout.shape[-2:]
        # Room for every window (pad before, and after for partial windows);
        # g is zero there, so the padding's x never counts.
        after = [self.pad[i] + self.ws[i] + self.stride[i] for i in range(2)]
        shape = [x.shape[i] for i in range(x.ndim - 2)] + [
            x.shape[x.ndim - 2 + i] + self.pad[i] + after[i] for i in range(2)]
        inner = (Ellipsis, slice(self.pad[0], self.pad[0] + x.shape[-2]),
                 slice(self.pad[1], self.pad[1] + x.shape[-1]))
        padded_x = pt.set_subtensor(pt.zeros(shape, dtype=x.dtype)[inner], x)
        padded_g = pt.set_subtensor(pt.zeros(shape, dtype=g.dtype)[inner], g)
        total = None
        for a in range(self.ws[0]):
            for b in range(self.ws[1]):
                window = (Ellipsis, slice(a, a + self.stride[0] * out[0], self.stride[0]),
                          slice(b, b + self.stride[1] * out[1], self.stride[1]))
                term = pt.eq(padded_x[window], maxout) * padded_g[window]
                total = term if total is None else total + term
        return pt.cast(total, dtype)


def pool_2d(input, ws=None, ignore_border=True, stride=None, pad=(0, 0), mode="max", ds=None,
            st=None, padding=None):
    """Aesara's ``pool_2d``: max pooling of the last two axes of ``input`` (ndim >= 2) in
    windows ``ws``, moved by ``stride`` (``ws`` by default). ``ignore_border=False`` keeps
    the partial windows at the bottom and right borders; ``pad`` adds a margin that no
    maximum comes from (with ignore_border=True only, smaller than the window). Only
    ``mode="max"`` is supported. Theano's names ``ds``, ``st`` and ``padding`` stand
    for ``ws``, ``stride`` and ``pad`` (:func:`~.windows.pool_arguments`).

    >>> import pytensor.tensor as pt
    >>> pool_2d(pt.tensor("x", shape=(None, 20, 24, 24)), (2, 2)).type.shape
    (None, 20, 12, 12)
    >>> pool_2d(pt.tensor("x", shape=(5, 5)), (2, 2), ignore_border=False).type.shape
    (3, 3)
    >>> pool_2d(pt.tensor("x", shape=(None, 20, 24, 24)), ds=(2, 2)).type.shape
    (None, 20, 12, 12)
    """
    ws, stride, pad = pool_arguments(ws, stride, pad, ds, st, padding)
    if mode != "max":
        if mode in ("sum", "average_inc_pad", "average_exc_pad"):
            raise NotImplementedError(f"pool_2d: mode={mode!r} is not supported, only 'max'")
        raise ValueError(f"pool_2d: mode must be 'max', 'sum', 'average_inc_pad' or "
                         f"'average_exc_pad', not {mode!r}")
    input = pt.as_tensor_variable(input)
    if input.type.ndim < 2:
        raise NotImplementedError("pool_2d requires a dimension >= 2")
    return MaxPool2d(ws, stride=stride, ignore_border=ignore_border, pad=pad)(input)


# In PyTensor's default (Numba) mode: their perform, without the object-mode warning.
numba.declare(_PoolBase)
