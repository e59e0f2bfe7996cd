"""Convolution in NumPy: Theano's ``conv2d`` of NCHW images by OIHW filters
and its two gradients, as an im2col copy and one BLAS matrix product (NumPy's
own OpenBLAS), the images taken in chunks of a few MB of patches. These are
the ``perform`` of the ops of :mod:`.conv` (PyTensor has no convolution of
its own); this module imports no graph library.

The copy's layout is chosen per call from the shapes: channel-major ``(C,
kh, kw, N, Ho, Wo)`` when output rows are long, batch-last ``(C, kh, kw, Ho,
Wo, N)`` when the images are small and the batch large (LeNet's second
layer), so that every copy moves long contiguous runs. The weight gradient
is one product of the output gradient with the same patches; the input
gradient the kernel's transpose times the output gradient, scattered back
(col2im).
"""

import threading

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .windows import strided

__all__ = ["conv2d_forward", "conv2d_grad_weights", "conv2d_grad_inputs", "scratch_bytes", "padding",
           "conv_out_len"]


# -- geometry --------------------------------------------------------------------------------

def padding(border_mode, kernel):
    """The zero padding on each side, per spatial axis (None where a kernel size is)."""
    if border_mode == "valid":
        return (0, 0)
    if border_mode == "full":
        return tuple(None if k is None else k - 1 for k in kernel)
    if border_mode == "half":
        return tuple(None if k is None else k // 2 for k in kernel)
    return border_mode


def conv_out_len(size, kernel, pad, stride):
    if size is None or kernel is None or pad is None:
        return None
    return (size + 2 * pad - kernel) // stride + 1


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


def scratch_bytes(kind, images_shape, kernel_shape, border_mode="valid", subsample=(1, 1),
                  dtype="float64", bound=False):
    """``{buffer: bytes}`` of the scratch buffers one call of ``kind`` takes
    and the thread keeps after it: ``"forward"`` (:func:`conv2d_forward`),
    ``"weights"`` (:func:`conv2d_grad_weights`) or ``"inputs"``
    (:func:`conv2d_grad_inputs`), for NCHW ``images_shape`` and OIHW
    ``kernel_shape`` (a test holds this to what the calls leave). With
    ``bound``, the most a call of this many images or fewer takes, in
    either layout: what the memory planner counts beside a step's own
    buffers, never less for a larger batch (balanced chunks are not: 69
    images go as one chunk, 70 as two of 35)."""
    dtype = np.dtype(dtype)
    n, c, rows, cols = (int(s) for s in images_shape)
    o, _, kh, kw = (int(s) for s in kernel_shape)
    pad, out_rows, out_cols = _geometry(border_mode, subsample, rows, cols, kh, kw, "conv2d")
    returns_at_once = {"forward": n * o * out_rows * out_cols == 0 or c * kh * kw == 0,
                       "weights": n * o * c * kh * kw == 0,
                       "inputs": n * c * rows * cols == 0 or o == 0}
    if kind not in returns_at_once:
        raise ValueError(f"kind={kind!r}: expected one of {', '.join(returns_at_once)}")
    if returns_at_once[kind]:
        return {}
    image_bytes = _image_bytes(c, o, kh, kw, rows, cols, out_rows, out_cols, pad, dtype)
    # The bound: the largest chunk of n images or fewer. (The layout needs no
    # bound: both its costs are linear in the images, so "chwn", once chosen,
    # stays chosen for more.)
    chunk = min(n, max(1, _CHUNK_BYTES // max(image_bytes, 1))) if bound else \
        max(stop - start for start, stop in _chunks(n, image_bytes))
    chwn = _layout(n, c, rows, cols, o, kh, kw, out_rows, out_cols, subsample, pad) == "chwn"
    positions = chunk * out_rows * out_cols
    counts = {"im2col": c * kh * kw * positions}
    if kind == "inputs" or any(pad) or chwn:  # (else the images go as they are)
        counts["images"] = c * chunk * (rows + 2 * pad[0]) * (cols + 2 * pad[1])
    if kind == "forward":
        counts["product"] = o * positions
    if kind == "inputs" or (kind == "weights" and chwn):
        counts["positions"] = o * positions
    return {name: count * dtype.itemsize for name, count in counts.items()}


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
                cols[:, a, b] = padded[:, strided(a, out_rows, stride[0]), strided(b, out_cols, stride[1])]
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
    pad = padding(border_mode, (kh, kw))
    out_rows = conv_out_len(rows, kh, pad[0], stride[0])
    out_cols = conv_out_len(cols, kw, pad[1], stride[1])
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
                window = _spatial_slices(layout, strided(a, out_rows, subsample[0]),
                                         strided(b, out_cols, subsample[1]))
                padded[window] += patches[:, a, b]
        inside = padded[_spatial_slices(layout, slice(pad[0], pad[0] + rows), slice(pad[1], pad[1] + cols))]
        np.copyto(grad[start:stop], inside.transpose(_BACK[layout]))
    return grad
