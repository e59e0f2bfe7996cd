"""JAX conversions of the ops of :mod:`int8store.backend.ops.conv` and
:mod:`int8store.backend.ops.pooling` (conv2d, max pooling and
their gradients), for int8store's own dispatcher: ``register(convert)`` adds
them to ``convert``, a ``functools.singledispatch`` whose conversions take
``(op, node=None, **kwargs)`` and return a function of the node's inputs, as
PyTensor's ``jax_funcify`` ones do. Nothing is registered on PyTensor's own
``jax_funcify``, and JAX's configuration is left alone: 64-bit types are used
only where JAX has them enabled (else float32, as JAX does).
"""

import jax
import jax.numpy as jnp
import numpy as np

from ..ops.conv import Conv2d, Conv2dGradInputs, Conv2dGradWeights
from ..ops.im2col import padding as conv_padding
from ..ops.pooling import MaxPool2d, MaxPool2dGrad, lowest, pool_out_len
from .channels_last import (correlate, correlate_grad_inputs, correlate_grad_weights,
                            gradients_apply, on_cpu)
from .kernel_turn import turned
from .pooling import tiled_max_pool_grad

__all__ = ["register"]


def register(convert):
    """Register the JAX conversions of the five convolution and pooling ops on ``convert``."""
    convert.register(Conv2d)(jax_funcify_Conv2d)
    convert.register(Conv2dGradWeights)(jax_funcify_Conv2dGradWeights)
    convert.register(Conv2dGradInputs)(jax_funcify_Conv2dGradInputs)
    convert.register(MaxPool2d)(jax_funcify_MaxPool2d)
    convert.register(MaxPool2dGrad)(jax_funcify_MaxPool2dGrad)
    return convert


def _dtype(node, default):
    """The node's output dtype as JAX has it (float64 is float32 without x64)."""
    dtype = node.outputs[0].dtype if node is not None else default
    return jax.dtypes.canonicalize_dtype(dtype)


# -- conv2d and its gradients ----------------------------------------------------------------

def _conv_function(op, dtype, forward=False):
    """``conv(img, kern)``, the op's convolution through ``jax.lax.conv_general_dilated``
    (channels-last on the CPU: :mod:`.channels_last`; the ``forward`` pass's
    turned kernel as :mod:`.kernel_turn` makes it)."""
    strides = tuple(op.subsample)
    channels_last = on_cpu()

    def conv(img, kern):
        img, kern = jnp.asarray(img).astype(dtype), jnp.asarray(kern).astype(dtype)
        if op.filter_flip:  # a true convolution: lax correlates
            kern = turned(kern, forward)
        padding = _padding(op, kern.shape[2:])
        if channels_last:
            return correlate(img, kern, strides, padding)
        return jax.lax.conv_general_dilated(img, kern, window_strides=strides, padding=padding,
                                            dimension_numbers=("NCHW", "OIHW", "NCHW"))

    return conv


def _padding(op, kernel_spatial):
    return [(p, p) for p in conv_padding(op.border_mode, kernel_spatial)]


def _channels_last_gradients(op, kernel_spatial):
    """The op's padding if its gradient is written channels-last
    (:mod:`.channels_last`), else None."""
    padding = _padding(op, kernel_spatial)
    return padding if on_cpu() and gradients_apply(op.subsample, padding, kernel_spatial) else None


def _spatial(node, shape, what):
    """The result's spatial shape: the output's static type where it has it, else the
    shape input's value (known while tracing only when it is a constant)."""
    static = node.outputs[0].type.shape[2:] if node is not None else (None, None)
    if all(s is not None for s in static):
        return tuple(int(s) for s in static)
    try:
        values = tuple(int(v) for v in np.asarray(shape))
    except (TypeError, jax.errors.JAXTypeError) as error:
        raise NotImplementedError(
            f"conv2d's {what} gradient in JAX needs the static shape of the {what}; give conv2d "
            "its input_shape and filter_shape") from error
    return tuple(s if s is not None else v for s, v in zip(static, values))


def _transpose(linear, shape, dtype, cotangent):
    """The transpose of ``linear`` (linear in one argument of ``shape``) applied to
    ``cotangent``: what the conv2d gradient ops compute (no forward pass, unlike a VJP)."""
    transposed = jax.linear_transpose(linear, jax.ShapeDtypeStruct(shape, dtype))
    return transposed(jnp.asarray(cotangent).astype(dtype))[0]


def jax_funcify_Conv2d(op, node=None, **kwargs):
    return _conv_function(op, _dtype(node, "float32"), forward=True)


def jax_funcify_Conv2dGradWeights(op, node=None, **kwargs):
    dtype = _dtype(node, "float32")
    conv = _conv_function(op, dtype)

    def conv2d_grad_weights(img, topgrad, shape):
        kernel_shape = (topgrad.shape[1], img.shape[1]) + _spatial(node, shape, "filters")
        padding = _channels_last_gradients(op, kernel_shape[2:])
        if padding is not None:
            return correlate_grad_weights(jnp.asarray(img).astype(dtype),
                                          jnp.asarray(topgrad).astype(dtype), padding,
                                          op.filter_flip)
        return _transpose(lambda kern: conv(img, kern), kernel_shape, dtype, topgrad)

    return conv2d_grad_weights


def jax_funcify_Conv2dGradInputs(op, node=None, **kwargs):
    dtype = _dtype(node, "float32")
    conv = _conv_function(op, dtype)

    def conv2d_grad_inputs(kern, topgrad, shape):
        image_shape = (topgrad.shape[0], kern.shape[1]) + _spatial(node, shape, "images")
        padding = _channels_last_gradients(op, kern.shape[2:])
        if padding is not None:
            return correlate_grad_inputs(jnp.asarray(kern).astype(dtype),
                                         jnp.asarray(topgrad).astype(dtype), padding,
                                         op.filter_flip)
        return _transpose(lambda img: conv(img, kern), image_shape, dtype, topgrad)

    return conv2d_grad_inputs


# -- max pooling and its gradient ---------------------------------------------------------------

def _pool_geometry(op, shape):
    """The output's spatial shape, and the padding (before, after) that puts every
    window inside the input (``pad``, then the rows and columns that
    ignore_border=False's partial windows reach past the end)."""
    out = tuple(pool_out_len(shape[-2 + i], op.ws[i], op.stride[i], op.pad[i], op.ignore_border)
                for i in range(2))
    need = [(out[i] - 1) * op.stride[i] + op.ws[i] for i in range(2)]
    padding = [(op.pad[i], max(0, need[i] - shape[-2 + i] - op.pad[i])) for i in range(2)]
    return out, padding


def jax_funcify_MaxPool2d(op, node=None, **kwargs):
    def max_pool(x):
        x = jnp.asarray(x)
        out, padding = _pool_geometry(op, x.shape)
        if min(out) == 0:
            return jnp.zeros(x.shape[:-2] + out, x.dtype)
        dims = (1,) * (x.ndim - 2)
        pooled = jax.lax.reduce_window(x, jnp.array(lowest(x.dtype), x.dtype), jax.lax.max,
                                       dims + op.ws, dims + op.stride,
                                       [(0, 0)] * (x.ndim - 2) + padding)
        return pooled[..., :out[0], :out[1]]

    return max_pool


def jax_funcify_MaxPool2dGrad(op, node=None, **kwargs):
    def max_pool_grad(x, maxout, gz):
        # As Aesara's MaxPoolGrad: every input equal to its window's maximum
        # receives that window's gradient (ties included, overlaps add up).
        x = jnp.asarray(x)
        maxout, gz = jnp.asarray(maxout).astype(x.dtype), jnp.asarray(gz).astype(x.dtype)
        out, padding = _pool_geometry(op, x.shape)
        if min(out) == 0:
            return jnp.zeros_like(x)
        if op.ws == op.stride and not any(op.pad):
            return tiled_max_pool_grad(x, maxout, gz, op.ws)
        padded = jnp.pad(x, [(0, 0)] * (x.ndim - 2) + padding, constant_values=lowest(x.dtype))
        grad = jnp.zeros_like(padded)
        for i in range(op.ws[0]):
            for j in range(op.ws[1]):
                window = (Ellipsis, slice(i, i + op.stride[0] * (out[0] - 1) + 1, op.stride[0]),
                          slice(j, j + op.stride[1] * (out[1] - 1) + 1, op.stride[1]))
                grad = grad.at[window].add(jnp.where(padded[window] == maxout, gz, 0).astype(x.dtype))
        rows, cols = x.shape[-2:]
        return grad[..., op.pad[0]:op.pad[0] + rows, op.pad[1]:op.pad[1] + cols]

    return max_pool_grad
