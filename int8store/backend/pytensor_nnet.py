"""Theano/Aesara's ``conv2d`` and ``pool_2d`` for PyTensor, which has neither.

:func:`conv2d` and :func:`pool_2d` take the arguments of
``aesara.tensor.nnet.conv2d`` and ``aesara.tensor.signal.pool.pool_2d`` and
compute what they compute: a true 2-D convolution (the kernel flipped, unless
``filter_flip=False``) of NCHW images with OIHW filters, and max pooling over
the last two axes. Five ops carry them, each with a NumPy ``perform``, an
``infer_shape`` and its gradient:

* :class:`Conv2d`, the forward convolution; :class:`Conv2dGradInputs` and
  :class:`Conv2dGradWeights`, its gradients with respect to the images and to
  the filters (each the other's gradient, so second derivatives exist too);
* :class:`MaxPool2d` and :class:`MaxPool2dGrad` (Aesara's ``MaxPoolGrad``:
  every input equal to its window's maximum gets the window's gradient, ties
  included, overlapping windows adding up).

The convolutions are an im2col copy and a BLAS matrix product (NumPy's own
OpenBLAS), the images taken in chunks of a few MB of patches. The copy's
layout is chosen per call from the shapes: channel-major ``(C, kh, kw, N, Ho,
Wo)`` when output rows are long, batch-last ``(C, kh, kw, Ho, Wo, N)`` when
the images are small and the batch large (LeNet's second layer), so that every
copy moves long contiguous runs. The weight gradient is one product of the
output gradient with the same patches; the input gradient the kernel's
transpose times the output gradient, scattered back (col2im). Max pooling
takes the maximum of ``ws[0]*ws[1]`` strided views of the input.

Every op's static output shape is set whenever the input shapes (or
conv2d's ``input_shape``/``filter_shape`` hints) make it known: JAX mode and
int8store's memory planning need it. Their JAX conversions are in
:mod:`.pytensor_nnet_jax`, their Numba registration in :mod:`.numba_ops`;
this module imports only NumPy and PyTensor.
"""

import threading

import numpy as np
import pytensor.tensor as pt
from numpy.lib.stride_tricks import sliding_window_view
from pytensor.gradient import disconnected_type, grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.scalar import upcast
from pytensor.tensor.basic import get_scalar_constant_value
from pytensor.tensor.exceptions import NotScalarConstantError
from pytensor.tensor.type import TensorType, float_dtypes, integer_dtypes

__all__ = ["conv2d", "pool_2d", "Conv2d", "Conv2dGradInputs", "Conv2dGradWeights",
           "MaxPool2d", "MaxPool2dGrad"]


# -- arguments -------------------------------------------------------------------------

def _int_pair(value, what, minimum):
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (value, value)
    try:
        pair = tuple(value)
    except TypeError:
        pair = ()
    if (len(pair) != 2 or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in pair)
            or any(v < minimum for v in pair)):
        raise ValueError(f"{what} must be a pair of ints >= {minimum}, not {value!r}")
    return tuple(int(v) for v in pair)


def _border_mode(border_mode):
    """``"valid"``, ``"full"``, ``"half"`` or a pair of paddings (``(0, 0)`` is ``"valid"``)."""
    if isinstance(border_mode, str):
        if border_mode not in ("valid", "full", "half"):
            raise ValueError(f"border_mode must be 'valid', 'full', 'half', an int or a pair "
                             f"of ints, not {border_mode!r}")
        return border_mode
    pad = _int_pair(border_mode, "border_mode", 0)
    return "valid" if pad == (0, 0) else pad


def _shape_hint(hint, what):
    if hint is None:
        return (None,) * 4
    hint = tuple(hint)
    if len(hint) != 4:
        raise ValueError(f"{what} must have 4 entries (ints or None), not {hint!r}")
    for value in hint:
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                                  or value < 0):
            raise ValueError(f"{what} entries must be ints >= 0 or None, not {hint!r}")
    return tuple(None if v is None else int(v) for v in hint)


def _padding(border_mode, kernel):
    """The zero padding on each side, per spatial axis (None where a kernel size is)."""
    if border_mode == "valid":
        return (0, 0)
    if border_mode == "full":
        return tuple(None if k is None else k - 1 for k in kernel)
    if border_mode == "half":
        return tuple(None if k is None else k // 2 for k in kernel)
    return border_mode


def _conv_out_len(size, kernel, pad, stride):
    if size is None or kernel is None or pad is None:
        return None
    return (size + 2 * pad - kernel) // stride + 1


def _merge(static, hint, what):
    """The static shape ``static`` completed with ``hint``; they must agree."""
    merged = []
    for i, (s, h) in enumerate(zip(static, hint)):
        if s is not None and h is not None and s != h:
            raise ValueError(f"{what}: static shape {tuple(static)} disagrees with the shape "
                             f"hint {tuple(hint)} on axis {i}")
        merged.append(s if s is not None else h)
    return tuple(merged)


def _check_hint(shape, hint, what):
    for i, (s, h) in enumerate(zip(shape, hint)):
        if h is not None and s != h:
            raise ValueError(f"{what} has shape {tuple(shape)}, but the graph was built "
                             f"for {tuple(hint)}")


def _as_shape2(shape):
    """A symbolic int64 vector of 2 spatial sizes."""
    shape = pt.as_tensor_variable(shape)
    if shape.ndim != 1 or shape.type.shape[0] not in (None, 2) or shape.dtype not in integer_dtypes:
        raise TypeError(f"the spatial shape must be a vector of 2 ints, not {shape.type}")
    return pt.cast(shape, "int64")


def _constant_entries(shape):
    """The entries of a spatial shape vector that are constants (None elsewhere)."""
    values = []
    for i in range(2):
        try:
            values.append(int(get_scalar_constant_value(shape[i])))
        except NotScalarConstantError:
            values.append(None)
    return tuple(values)


def _like(grad, variable):
    """``grad`` in ``variable``'s dtype if that is a float (PyTensor wants float
    gradients, even for integer inputs such as int8 images)."""
    return pt.cast(grad, variable.dtype) if variable.dtype in float_dtypes else grad


def _spatial_shape(variable):
    """``variable.shape[2:]``, with constants where the static shape is known."""
    static = variable.type.shape[2:]
    if all(s is not None for s in static):
        return pt.as_tensor_variable(np.asarray(static, dtype="int64"))
    return pt.stack([pt.constant(s, dtype="int64") if s is not None else variable.shape[2 + i]
                     for i, s in enumerate(static)])


# -- the numerics ---------------------------------------------------------------------------
#
# Positions are the output pixels of the images: the im2col matrix is
# ``(C*kh*kw, positions)``, the kernel ``(O, C*kh*kw)``, and each product is a
# single GEMM. The images go through in chunks whose im2col matrix fits in
# _CHUNK_BYTES (memory stays bounded whatever the batch, and the matrix is
# still in cache when the GEMM reads it), in scratch buffers reused from call
# to call (a fresh 64 MB array costs the kernel ~6 ms of page zeroing).
#
# The "cnhw" layout orders positions (N, Ho, Wo): its copies move rows of Wo
# values (a whole image plane when transposing back), good for large images.
# The "chwn" layout orders them (Ho, Wo, N): its copies move runs of N values
# whatever the stride, good for small images in large batches, at the price of
# two transposes (input and output) between NCHW and CHWN.

#: The most bytes of im2col matrix that one chunk of images makes.
_CHUNK_BYTES = 8 << 20

_scratch_buffers = threading.local()

#: The matrix products (NumPy's BLAS).
_matmul = np.matmul


def _scratch(name, shape, dtype):
    """An uninitialized array from a per-thread buffer kept between calls (never returned
    to the caller: the ops' outputs are always fresh arrays)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    buffers = _scratch_buffers.__dict__
    buffer = buffers.get(name)
    if buffer is None or buffer.nbytes < nbytes:
        buffer = buffers[name] = np.empty(max(nbytes, 1), np.uint8)
    return buffer[:nbytes].view(dtype).reshape(shape)


def _chunks(n, bytes_per_image):
    """Balanced ``(start, stop)`` chunks of ``range(n)`` of at most _CHUNK_BYTES each."""
    per_chunk = max(1, min(n, _CHUNK_BYTES // max(bytes_per_image, 1)))
    count = -(-n // per_chunk)
    bounds = [n * i // count for i in range(count + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def _image_bytes(c, o, kh, kw, rows, cols, out_rows, out_cols, pad, dtype):
    """The scratch bytes one image takes: its patches or products, and its padded copy."""
    padded = c * (rows + 2 * pad[0]) * (cols + 2 * pad[1])
    return (max(c * kh * kw, o) * out_rows * out_cols + padded) * dtype.itemsize


def _copy_cost(elements, run):
    """A rough time (ns) to copy ``elements`` values in contiguous runs of ``run``."""
    return elements * (0.35 + 8.0 / max(run, 1))


def _layout(n, c, rows, cols, o, kh, kw, out_rows, out_cols, stride, pad):
    """The im2col layout that moves the fewest short runs for these shapes."""
    positions = n * out_rows * out_cols
    k = c * kh * kw
    transpose = 1.5  # ns per value of a 2-D transpose (NCHW <-> CHWN)
    inner = out_cols if stride[1] == 1 else 1
    cnhw = (_copy_cost(k * positions, inner) + _copy_cost(o * positions, out_rows * out_cols)
            + (_copy_cost(n * c * rows * cols, cols) if c > 1 or any(pad) else 0))
    chwn = _copy_cost(k * positions, n) + transpose * (o * positions + n * c * rows * cols)
    return "chwn" if chwn < cnhw else "cnhw"


_AXES = {"cnhw": (1, 0, 2, 3), "chwn": (1, 2, 3, 0)}
_BACK = {"cnhw": (1, 0, 2, 3), "chwn": (3, 0, 1, 2)}


def _kernel_matrix(kern, flip, dtype):
    """The kernel as an ``(O, C*kh*kw)`` matrix (flipped for a true convolution)."""
    if flip:
        kern = kern[:, :, ::-1, ::-1]
    return np.ascontiguousarray(kern, dtype=dtype).reshape(kern.shape[0], -1)


def _spatial_slices(layout, rows, cols):
    return (slice(None), slice(None), rows, cols) if layout == "cnhw" else (slice(None), rows, cols)


def _zero_borders(array, layout, pad, rows, cols):
    """Zero the margins of a padded (C, N, H, W) or (C, H, W, N) scratch array."""
    axis = 2 if layout == "cnhw" else 1
    for margin in (slice(0, pad[0]), slice(pad[0] + rows, None)):
        array[(slice(None),) * axis + (margin,)] = 0
    for margin in (slice(0, pad[1]), slice(pad[1] + cols, None)):
        array[(slice(None),) * (axis + 1) + (margin,)] = 0


def _in_layout(images, layout, pad, dtype):
    """A chunk of NCHW images, zero-padded, as (C, N, H, W) or (C, H, W, N)."""
    n, c, rows, cols = images.shape
    moved = images.transpose(_AXES[layout])
    if not any(pad) and layout == "cnhw":
        return moved if moved.dtype == dtype else moved.astype(dtype)  # the copy is im2col's
    padded_rows, padded_cols = rows + 2 * pad[0], cols + 2 * pad[1]
    shape = (c, n, padded_rows, padded_cols) if layout == "cnhw" else (c, padded_rows, padded_cols, n)
    padded = _scratch("images", shape, dtype)
    if any(pad):
        _zero_borders(padded, layout, pad, rows, cols)
    padded[_spatial_slices(layout, slice(pad[0], pad[0] + rows), slice(pad[1], pad[1] + cols))] = moved
    return padded


def _window(offset, count, stride):
    return slice(offset, offset + stride * (count - 1) + 1, stride)


def _im2col(padded, layout, kh, kw, out_rows, out_cols, stride):
    """The ``(C*kh*kw, positions)`` patches of padded images in ``layout``."""
    if layout == "cnhw":
        c, n = padded.shape[:2]
        cols = _scratch("im2col", (c, kh, kw, n, out_rows, out_cols), padded.dtype)
        # sliding_window_view: (C, N, Ho', Wo', kh, kw), a view; one strided copy.
        view = sliding_window_view(padded, (kh, kw), axis=(2, 3))
        view = view[:, :, ::stride[0], ::stride[1]][:, :, :out_rows, :out_cols]
        np.copyto(cols, view.transpose(0, 4, 5, 1, 2, 3))
    else:
        c, n = padded.shape[0], padded.shape[3]
        cols = _scratch("im2col", (c, kh, kw, out_rows, out_cols, n), padded.dtype)
        for a in range(kh):
            for b in range(kw):
                cols[:, a, b] = padded[:, _window(a, out_rows, stride[0]), _window(b, out_cols, stride[1])]
    return cols.reshape(c * kh * kw, -1)


def _positions(top, layout, dtype):
    """A chunk of NCHW output gradients as a ``(channels, positions)`` matrix."""
    moved = top.transpose(_AXES[layout])
    matrix = _scratch("positions", moved.shape, dtype)
    np.copyto(matrix, moved)
    return matrix.reshape(top.shape[1], -1)


def _from_positions(matrix, layout, n, out_rows, out_cols, out):
    """Write a ``(channels, positions)`` matrix into ``out``, a chunk of NCHW images."""
    shape = (-1, n, out_rows, out_cols) if layout == "cnhw" else (-1, out_rows, out_cols, n)
    np.copyto(out, matrix.reshape(shape).transpose(_BACK[layout]))


def _geometry(border_mode, stride, rows, cols, kh, kw, what):
    pad = _padding(border_mode, (kh, kw))
    out_rows = _conv_out_len(rows, kh, pad[0], stride[0])
    out_cols = _conv_out_len(cols, kw, pad[1], stride[1])
    if out_rows <= 0 or out_cols <= 0:
        raise ValueError(f"{what}: a {kh}x{kw} kernel does not fit the {rows}x{cols} images "
                         f"padded by {pad}")
    return pad, out_rows, out_cols


def _add_products(total, a, b):
    """``total += sum(a[i] @ b[i].T)`` for stacks of ``(M, L)`` and ``(N, L)`` matrices.

    A small ``total`` and a long ``L`` (the weight gradient of a first layer) go as
    more, shorter products: OpenBLAS splits one long product between its threads,
    which then meet once per few hundred of L, and on a shared machine each
    meeting can wait a whole time slice; below 2**18 M*N*L it stays on one thread."""
    stack, m, length = a.shape
    n = b.shape[1]
    limit = max(256, (1 << 18) // max(m * n, 1))
    if m * n <= 1024 and length > limit:
        piece = next(d for d in range(limit, 0, -1) if length % d == 0)
        if piece >= 64:  # pieces of L that divide it, the products' shapes all alike
            a = a.reshape(stack, m, length // piece, piece).transpose(0, 2, 1, 3)
            b = b.reshape(stack, n, length // piece, piece).transpose(0, 2, 1, 3)
    total += _matmul(a, b.swapaxes(-1, -2)).sum(axis=tuple(range(a.ndim - 2)))


def conv2d_forward(img, kern, border_mode="valid", subsample=(1, 1), filter_flip=True, dtype=None):
    """NumPy: Theano's conv2d of NCHW ``img`` by OIHW ``kern`` (the ops' ``perform``)."""
    dtype = np.dtype(dtype or np.result_type(img.dtype, kern.dtype))
    n, c, rows, cols = img.shape
    o, kc, kh, kw = kern.shape
    if kc != c:
        raise ValueError(f"conv2d: the images have {c} channels, the filters {kc}")
    pad, out_rows, out_cols = _geometry(border_mode, subsample, rows, cols, kh, kw, "conv2d")
    out = np.empty((n, o, out_rows, out_cols), dtype)
    if out.size == 0:
        return out
    if c * kh * kw == 0:
        out[...] = 0
        return out
    layout = _layout(n, c, rows, cols, o, kh, kw, out_rows, out_cols, subsample, pad)
    weights = _kernel_matrix(kern, filter_flip, dtype)
    for start, stop in _chunks(n, _image_bytes(c, o, kh, kw, rows, cols, out_rows, out_cols, pad, dtype)):
        patches = _im2col(_in_layout(img[start:stop], layout, pad, dtype), layout, kh, kw,
                          out_rows, out_cols, subsample)
        product = _scratch("product", (o, patches.shape[1]), dtype)
        _matmul(weights, patches, out=product)
        _from_positions(product, layout, stop - start, out_rows, out_cols, out[start:stop])
    return out


def conv2d_grad_weights(img, topgrad, kernel_shape, border_mode="valid", subsample=(1, 1),
                        filter_flip=True, dtype=None):
    """NumPy: the gradient of conv2d with respect to its filters, of spatial shape ``kernel_shape``."""
    dtype = np.dtype(dtype or np.result_type(img.dtype, topgrad.dtype))
    n, c, rows, cols = img.shape
    kh, kw = (int(s) for s in kernel_shape)
    o = topgrad.shape[1]
    pad, out_rows, out_cols = _geometry(border_mode, subsample, rows, cols, kh, kw,
                                        "conv2d's weight gradient")
    if topgrad.shape != (n, o, out_rows, out_cols):
        raise ValueError(f"conv2d's weight gradient: the output gradient has shape {topgrad.shape}, "
                         f"the convolution gives {(n, o, out_rows, out_cols)}")
    grad = np.zeros((o, c * kh * kw), dtype)
    if n == 0 or grad.size == 0:
        return grad.reshape(o, c, kh, kw)
    layout = _layout(n, c, rows, cols, o, kh, kw, out_rows, out_cols, subsample, pad)
    for start, stop in _chunks(n, _image_bytes(c, o, kh, kw, rows, cols, out_rows, out_cols, pad, dtype)):
        patches = _im2col(_in_layout(img[start:stop], layout, pad, dtype), layout, kh, kw,
                          out_rows, out_cols, subsample)
        if layout == "cnhw":  # positions (N, Ho, Wo): one product per image, no transpose
            nb = stop - start
            tops = topgrad[start:stop].reshape(nb, o, -1).astype(dtype, copy=False)
            _add_products(grad, tops, patches.reshape(-1, nb, tops.shape[2]).transpose(1, 0, 2))
        else:
            _add_products(grad, _positions(topgrad[start:stop], layout, dtype)[None], patches[None])
    grad = grad.reshape(o, c, kh, kw)
    return np.ascontiguousarray(grad[:, :, ::-1, ::-1]) if filter_flip else grad


def conv2d_grad_inputs(kern, topgrad, image_shape, border_mode="valid", subsample=(1, 1),
                       filter_flip=True, dtype=None):
    """NumPy: the gradient of conv2d with respect to its images, of spatial shape ``image_shape``:
    the kernel's transpose times the output gradient, scattered back (col2im)."""
    dtype = np.dtype(dtype or np.result_type(kern.dtype, topgrad.dtype))
    rows, cols = (int(s) for s in image_shape)
    o, c, kh, kw = kern.shape
    n = topgrad.shape[0]
    pad, out_rows, out_cols = _geometry(border_mode, subsample, rows, cols, kh, kw,
                                        "conv2d's input gradient")
    if topgrad.shape != (n, o, out_rows, out_cols):
        raise ValueError(f"conv2d's input gradient: the output gradient has shape {topgrad.shape}, "
                         f"the convolution gives {(n, o, out_rows, out_cols)}")
    grad = np.empty((n, c, rows, cols), dtype)
    if grad.size == 0:
        return grad
    if o == 0:
        grad[...] = 0
        return grad
    layout = _layout(n, c, rows, cols, o, kh, kw, out_rows, out_cols, subsample, pad)
    weights_t = _kernel_matrix(kern, filter_flip, dtype).T
    padded_rows, padded_cols = rows + 2 * pad[0], cols + 2 * pad[1]
    for start, stop in _chunks(n, _image_bytes(c, o, kh, kw, rows, cols, out_rows, out_cols, pad, dtype)):
        nb = stop - start
        top = _positions(topgrad[start:stop], layout, dtype)
        patches = _scratch("im2col", (c * kh * kw, top.shape[1]), dtype)
        _matmul(weights_t, top, out=patches)
        if layout == "cnhw":
            patches = patches.reshape(c, kh, kw, nb, out_rows, out_cols)
            padded = _scratch("images", (c, nb, padded_rows, padded_cols), dtype)
        else:
            patches = patches.reshape(c, kh, kw, out_rows, out_cols, nb)
            padded = _scratch("images", (c, padded_rows, padded_cols, nb), dtype)
        padded[...] = 0
        for a in range(kh):  # col2im
            for b in range(kw):
                window = _spatial_slices(layout, _window(a, out_rows, subsample[0]),
                                         _window(b, out_cols, subsample[1]))
                padded[window] += patches[:, a, b]
        inside = padded[_spatial_slices(layout, slice(pad[0], pad[0] + rows), slice(pad[1], pad[1] + cols))]
        np.copyto(grad[start:stop], inside.transpose(_BACK[layout]))
    return grad


# -- the convolution ops ------------------------------------------------------------------------

class _Conv2dBase(Op):
    __props__ = ("border_mode", "subsample", "filter_flip", "imshp", "kshp")

    def __init__(self, border_mode="valid", subsample=(1, 1), filter_flip=True, imshp=None, kshp=None):
        self.border_mode = _border_mode(border_mode)
        self.subsample = _int_pair(subsample, "subsample", 1)
        self.filter_flip = bool(filter_flip)
        self.imshp = _shape_hint(imshp, "input_shape")
        self.kshp = _shape_hint(kshp, "filter_shape")

    def _settings(self):
        return dict(border_mode=self.border_mode, subsample=self.subsample, filter_flip=self.filter_flip,
                    imshp=self.imshp, kshp=self.kshp)

    def _kwargs(self):
        return dict(border_mode=self.border_mode, subsample=self.subsample, filter_flip=self.filter_flip)

    @staticmethod
    def _tensor4(value, what):
        value = pt.as_tensor_variable(value)
        if value.type.ndim != 4:
            raise TypeError(f"{what} must be a 4-D tensor, not {value.type}")
        return value

    def _out_spatial(self, image_spatial, kernel_spatial):
        pad = _padding(self.border_mode, kernel_spatial)
        sizes = tuple(_conv_out_len(image_spatial[i], kernel_spatial[i], pad[i], self.subsample[i])
                      for i in range(2))
        if any(s is not None and s <= 0 for s in sizes):
            raise ValueError(f"conv2d: a kernel of spatial shape {kernel_spatial} does not fit "
                             f"images of spatial shape {image_spatial} with border_mode "
                             f"{self.border_mode!r}")
        return sizes

    def _symbolic_out_spatial(self, image_spatial, kernel_spatial):
        """infer_shape's output rows and columns (symbolic)."""
        sizes = []
        for i in range(2):
            size, k, s = image_spatial[i], kernel_spatial[i], self.subsample[i]
            if self.border_mode == "valid":
                pad = 0
            elif self.border_mode == "full":
                pad = k - 1
            elif self.border_mode == "half":
                pad = k // 2
            else:
                pad = self.border_mode[i]
            sizes.append((size + 2 * pad - k) // s + 1)
        return sizes

    @staticmethod
    def _known(static, symbolic):
        return [symbolic[i] if s is None else s for i, s in enumerate(static)]

    def grad(self, inputs, output_grads):
        """Aesara's spelling of :meth:`pullback` (PyTensor 3 calls ``pullback``)."""
        return self.pullback(inputs, self.make_node(*inputs).outputs, output_grads)


class Conv2d(_Conv2dBase):
    """Theano's conv2d (``AbstractConv2d``): ``Conv2d(...)(img, kern)``, NCHW images and OIHW filters."""

    def make_node(self, img, kern):
        img = self._tensor4(img, "conv2d's input")
        kern = self._tensor4(kern, "conv2d's filters")
        ishape = _merge(img.type.shape, self.imshp, "conv2d's input")
        kshape = _merge(kern.type.shape, self.kshp, "conv2d's filters")
        if ishape[1] is not None and kshape[1] is not None and ishape[1] != kshape[1]:
            raise ValueError(f"conv2d: the input has {ishape[1]} channels, the filters {kshape[1]}")
        out_shape = (ishape[0], kshape[0]) + self._out_spatial(ishape[2:], kshape[2:])
        out = TensorType(upcast(img.dtype, kern.dtype), shape=out_shape)()
        return Apply(self, [img, kern], [out])

    def perform(self, node, inputs, output_storage):
        img, kern = inputs
        _check_hint(img.shape, self.imshp, "conv2d's input")
        _check_hint(kern.shape, self.kshp, "conv2d's filters")
        output_storage[0][0] = conv2d_forward(img, kern, dtype=node.outputs[0].dtype, **self._kwargs())

    def infer_shape(self, *node_and_shapes):
        node, input_shapes = node_and_shapes[-2:]  # PyTensor 3.0 passes the fgraph first
        ishape, kshape = input_shapes
        symbolic = [ishape[0], kshape[0]] + self._symbolic_out_spatial(ishape[2:], kshape[2:])
        return [self._known(node.outputs[0].type.shape, symbolic)]

    def pullback(self, inputs, outputs, cotangents):
        img, kern = inputs
        (top,) = cotangents
        d_img = Conv2dGradInputs(**self._settings())(kern, top, _spatial_shape(img))
        d_kern = Conv2dGradWeights(**self._settings())(img, top, _spatial_shape(kern))
        return [_like(d_img, img), _like(d_kern, kern)]


class Conv2dGradWeights(_Conv2dBase):
    """``Conv2dGradWeights(...)(img, topgrad, kernel_spatial_shape)``: conv2d's gradient with
    respect to the filters (Aesara's ``AbstractConv2d_gradWeights``)."""

    # The output's static shape comes from the value of the shape input.
    _output_type_depends_on_input_value = True

    def make_node(self, img, topgrad, shape):
        img = self._tensor4(img, "conv2d's input")
        topgrad = self._tensor4(topgrad, "conv2d's output gradient")
        shape = _as_shape2(shape)
        ishape = _merge(img.type.shape, self.imshp, "conv2d's input")
        spatial = _merge(_constant_entries(shape), self.kshp[2:], "conv2d's filters")
        out_shape = _merge((topgrad.type.shape[1], ishape[1]) + spatial, self.kshp, "conv2d's filters")
        out = TensorType(upcast(img.dtype, topgrad.dtype), shape=out_shape)()
        return Apply(self, [img, topgrad, shape], [out])

    def perform(self, node, inputs, output_storage):
        img, topgrad, shape = inputs
        _check_hint(img.shape, self.imshp, "conv2d's input")
        output_storage[0][0] = conv2d_grad_weights(img, topgrad, shape, dtype=node.outputs[0].dtype,
                                                   **self._kwargs())

    def infer_shape(self, *node_and_shapes):
        node, input_shapes = node_and_shapes[-2:]  # PyTensor 3.0 passes the fgraph first
        ishape, tshape, _ = input_shapes
        shape = node.inputs[2]
        symbolic = [tshape[1], ishape[1], shape[0], shape[1]]
        return [self._known(node.outputs[0].type.shape, symbolic)]

    def connection_pattern(self, node):
        return [[True], [True], [False]]

    def pullback(self, inputs, outputs, cotangents):
        img, topgrad, _ = inputs
        (g_kern,) = cotangents
        d_img = Conv2dGradInputs(**self._settings())(g_kern, topgrad, _spatial_shape(img))
        d_top = Conv2d(**self._settings())(img, g_kern)
        return [_like(d_img, img), _like(d_top, topgrad), disconnected_type()]


class Conv2dGradInputs(_Conv2dBase):
    """``Conv2dGradInputs(...)(kern, topgrad, image_spatial_shape)``: conv2d's gradient with
    respect to the images (Aesara's ``AbstractConv2d_gradInputs``); the shape input settles
    the images' size, which strides leave ambiguous."""

    _output_type_depends_on_input_value = True

    def make_node(self, kern, topgrad, shape):
        kern = self._tensor4(kern, "conv2d's filters")
        topgrad = self._tensor4(topgrad, "conv2d's output gradient")
        shape = _as_shape2(shape)
        kshape = _merge(kern.type.shape, self.kshp, "conv2d's filters")
        spatial = _merge(_constant_entries(shape), self.imshp[2:], "conv2d's input")
        out_shape = _merge((topgrad.type.shape[0], kshape[1]) + spatial, self.imshp, "conv2d's input")
        out = TensorType(upcast(kern.dtype, topgrad.dtype), shape=out_shape)()
        return Apply(self, [kern, topgrad, shape], [out])

    def perform(self, node, inputs, output_storage):
        kern, topgrad, shape = inputs
        _check_hint(kern.shape, self.kshp, "conv2d's filters")
        output_storage[0][0] = conv2d_grad_inputs(kern, topgrad, shape, dtype=node.outputs[0].dtype,
                                                  **self._kwargs())

    def infer_shape(self, *node_and_shapes):
        node, input_shapes = node_and_shapes[-2:]  # PyTensor 3.0 passes the fgraph first
        kshape, tshape, _ = input_shapes
        shape = node.inputs[2]
        symbolic = [tshape[0], kshape[1], shape[0], shape[1]]
        return [self._known(node.outputs[0].type.shape, symbolic)]

    def connection_pattern(self, node):
        return [[True], [True], [False]]

    def pullback(self, inputs, outputs, cotangents):
        kern, topgrad, _ = inputs
        (g_img,) = cotangents
        d_kern = Conv2dGradWeights(**self._settings())(g_img, topgrad, _spatial_shape(kern))
        d_top = Conv2d(**self._settings())(g_img, kern)
        return [_like(d_kern, kern), _like(d_top, topgrad), disconnected_type()]


def conv2d(input, filters, input_shape=None, filter_shape=None, border_mode="valid",
           subsample=(1, 1), filter_flip=True, filter_dilation=(1, 1), num_groups=1):
    """Theano/Aesara's ``conv2d``: the 2-D convolution of a batch of NCHW images by OIHW filters.

    ``border_mode`` is ``"valid"``, ``"full"``, ``"half"`` (padding ``k // 2``), an int or a
    pair of ints (zero padding on both sides); ``subsample`` the strides; ``filter_flip=False``
    computes a correlation instead. ``input_shape``/``filter_shape`` (4 entries, each an int or
    None) complete the output's static shape. Dilation and groups are not supported.

    >>> import pytensor, pytensor.tensor as pt
    >>> x, w = pt.tensor4("x"), pt.tensor4("w")
    >>> conv2d(x, w, input_shape=(None, 1, 28, 28), filter_shape=(20, 1, 5, 5)).type.shape
    (None, 20, 24, 24)
    """
    if tuple(filter_dilation) != (1, 1):
        raise NotImplementedError(f"conv2d: filter_dilation={filter_dilation!r} is not supported "
                                  "(only (1, 1))")
    if num_groups != 1:
        raise NotImplementedError(f"conv2d: num_groups={num_groups!r} is not supported (only 1)")
    op = Conv2d(border_mode=border_mode, subsample=subsample, filter_flip=filter_flip,
                imshp=input_shape, kshp=filter_shape)
    return op(input, filters)


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


def _lowest(dtype):
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
                     _lowest(x.dtype), x.dtype)
    padded[..., pad[0]:pad[0] + rows, pad[1]:pad[1] + cols] = x
    return padded


def _max_pool_into(padded, result, ws, stride):
    """``result`` = the max pooling of ``padded`` (whose windows all lie inside it):
    the maximum of ws[0]*ws[1] strided views, rows first (long runs). NumPy's
    reductions over short axes (reshape + max) are many times slower."""
    out = result.shape[-2:]
    row_windows = [padded[..., _window(i, out[0], stride[0]), :] for i in range(ws[0])]
    if ws[0] == 1:
        rows = row_windows[0]
    else:
        rows = np.maximum(row_windows[0], row_windows[1])
        for window in row_windows[2:]:
            np.maximum(rows, window, out=rows)
    np.copyto(result, rows[..., _window(0, out[1], stride[1])])
    for j in range(1, ws[1]):
        np.maximum(result, rows[..., _window(j, out[1], stride[1])], out=result)


def max_pool_forward(x, ws, stride, pad, ignore_border):
    """NumPy: Aesara's max pooling of the last two axes of ``x`` (the op's ``perform``)."""
    out = tuple(pool_out_len(x.shape[-2 + i], ws[i], stride[i], pad[i], ignore_border) for i in range(2))
    result = np.empty(x.shape[:-2] + out, x.dtype)
    if result.size == 0:
        return result
    _max_pool_into(_pool_input(x, ws, stride, pad, out), result, ws, stride)
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
            window = (Ellipsis, _window(i, out[0], stride[0]), _window(j, out[1], stride[1]))
            hit = padded[window] == maxout
            if tiled:
                np.multiply(hit, gz, out=grad[window])
            else:
                grad[window] += hit * gz
    if tiled:
        return grad
    return np.ascontiguousarray(grad[..., pad[0]:pad[0] + rows, pad[1]:pad[1] + cols])


def _pool_settings(ws, stride, pad, ignore_border):
    ws = _int_pair(ws, "ws", 1)
    stride = ws if stride is None else _int_pair(stride, "stride", 1)
    pad = _int_pair(pad, "pad", 0)
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
        # Which inputs get gradients changes only where x crosses a tie: the
        # derivative in x and maxout is zero almost everywhere (as in Aesara).
        return [pt.zeros_like(x), pt.zeros_like(maxout),
                grad_not_implemented(self, 2, gz, "the second derivative of max pooling")]


def pool_2d(input, ws, ignore_border=True, stride=None, pad=(0, 0), mode="max"):
    """Aesara's ``pool_2d``: max pooling of the last two axes of ``input`` (ndim >= 2) in
    windows ``ws``, moved by ``stride`` (``ws`` by default). ``ignore_border=False`` keeps
    the partial windows at the bottom and right borders; ``pad`` adds a margin that no
    maximum comes from (with ignore_border=True only, smaller than the window). Only
    ``mode="max"`` is supported.

    >>> import pytensor.tensor as pt
    >>> pool_2d(pt.tensor("x", shape=(None, 20, 24, 24)), (2, 2)).type.shape
    (None, 20, 12, 12)
    >>> pool_2d(pt.tensor("x", shape=(5, 5)), (2, 2), ignore_border=False).type.shape
    (3, 3)
    """
    if mode != "max":
        if mode in ("sum", "average_inc_pad", "average_exc_pad"):
            raise NotImplementedError(f"pool_2d: mode={mode!r} is not supported, only 'max'")
        raise ValueError(f"pool_2d: mode must be 'max', 'sum', 'average_inc_pad' or "
                         f"'average_exc_pad', not {mode!r}")
    input = pt.as_tensor_variable(input)
    if input.type.ndim < 2:
        raise NotImplementedError("pool_2d requires a dimension >= 2")
    return MaxPool2d(ws, stride=stride, ignore_border=ignore_border, pad=pad)(input)


# These ops in PyTensor's default (Numba) mode: their perform, without the
# object-mode warning (registered when a Numba function is first compiled).
from .numba_ops import install  # noqa: E402

install()
