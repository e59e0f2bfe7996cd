"""int8store's JAX conversions of Aesara ops that Aesara 2.9.4 cannot convert
(conv2d and its gradients, max pooling and its gradient, the softmax and
cross-entropy ops of the classic tutorials), and corrections of three of
Aesara's own (sums returned their float64 accumulator; a partial
``specify_shape`` always failed; a constant indexed by a vector failed), registered on int8store's dispatcher by
:func:`register` (see :mod:`.conversions`). The corrections apply to the Aesara
versions they were checked on only.
"""

import jax
import jax.numpy as jnp
from aesara.tensor.shape import SpecifyShape
from aesara.tensor.subtensor import AdvancedSubtensor1

from ..ops.nnet import aesara_nnet_quietly
from ..setup.fixes import in_versions
from .channels_last import (correlate, correlate_grad_inputs, correlate_grad_weights,
                            gradients_apply, on_cpu)
from .kernel_turn import turned
from .pooling import tiled_max_pool_grad

with aesara_nnet_quietly():
    from aesara.tensor.nnet.abstract_conv import (AbstractConv2d, AbstractConv2d_gradInputs,
                                                  AbstractConv2d_gradWeights)
    from aesara.tensor.nnet.basic import (CrossentropySoftmax1HotWithBiasDx,
                                          CrossentropySoftmaxArgmax1HotWithBias, SoftmaxWithBias)
    from aesara.tensor.signal.pool import MaxPoolGrad, Pool

__all__ = ["register", "CORRECTED_VERSIONS"]

#: The Aesara releases whose CAReduce, SpecifyShape and AdvancedSubtensor1
#: conversions int8store corrects (the ones it was checked on).
CORRECTED_VERSIONS = ((2, 9, 4), (2, 9, 4))

_CONVERSIONS = []


def _conversion(op_type, correction=False):
    def add(function):
        _CONVERSIONS.append((op_type, function, correction))
        return function
    return add


def register(convert):
    """Register this module's conversions on ``convert`` (a singledispatch);
    the corrections only on the Aesara versions they were checked on."""
    corrections_apply = in_versions(CORRECTED_VERSIONS)
    for op_type, function, correction in _CONVERSIONS:
        if corrections_apply or not correction:
            convert.register(op_type)(function)


@_conversion(SpecifyShape, correction=True)
def jax_funcify_SpecifyShape(op, node=None, **kwargs):
    """Aesara's conversion compares the whole shape with the specification,
    unknown (None) entries included, so any partial specification fails."""
    def specify_shape(x, *shape):
        for axis, (actual, expected) in enumerate(zip(x.shape, shape)):
            if expected is not None and actual != int(expected):
                raise ValueError(f"axis {axis} has length {actual}, specified {int(expected)}")
        return x

    return specify_shape


@_conversion(AdvancedSubtensor1, correction=True)
def jax_funcify_AdvancedSubtensor1(op, node=None, **kwargs):
    """Aesara's conversion indexes a constant as the numpy array it is
    handed, which a traced index cannot index: a table looked up by the
    codes (a codebook's values, a normalization's) failed in JAX mode."""
    def advanced_subtensor1(x, indices):
        return jnp.asarray(x)[indices]

    return advanced_subtensor1


# -- softmax and cross-entropy (rows of x, a bias per column) ---------------------

def _softmax_parts(x, b):
    """(row, max, exp(row - max), sum) as Aesara's nnet ops compute them."""
    row = x + b
    peak = jnp.max(row, axis=1, keepdims=True)
    unnormalized = jnp.exp(row - peak)
    return row, peak, unnormalized, jnp.sum(unnormalized, axis=1, keepdims=True)


@_conversion(SoftmaxWithBias)
def jax_funcify_SoftmaxWithBias(op, **kwargs):
    def softmax_with_bias(x, b):
        _, _, unnormalized, total = _softmax_parts(x, b)
        return unnormalized / total

    return softmax_with_bias


@_conversion(CrossentropySoftmaxArgmax1HotWithBias)
def jax_funcify_CrossentropySoftmaxArgmax1HotWithBias(op, **kwargs):
    def crossentropy_softmax_argmax(x, b, y_idx):
        row, peak, unnormalized, total = _softmax_parts(x, b)
        softmax = unnormalized * (1.0 / total)
        picked = jnp.take_along_axis(row, y_idx[:, None].astype("int32"), axis=1)[:, 0]
        nll = -picked + peak[:, 0] + jnp.log(total[:, 0])
        return nll, softmax, jnp.argmax(row, axis=1).astype(y_idx.dtype)

    return crossentropy_softmax_argmax


@_conversion(CrossentropySoftmax1HotWithBiasDx)
def jax_funcify_CrossentropySoftmax1HotWithBiasDx(op, **kwargs):
    def crossentropy_softmax_dx(dy, softmax, y_idx):
        rows = softmax.shape[0]
        dy = jnp.broadcast_to(jnp.reshape(dy, (-1,)), (rows,)).astype(softmax.dtype)
        dx = dy[:, None] * softmax
        return dx.at[jnp.arange(rows), y_idx].add(-dy)

    return crossentropy_softmax_dx


# -- reductions ------------------------------------------------------------------

# -- conv2d and its gradients -------------------------------------------------------

def _conv2d_function(op, forward=False):
    """``conv(img, kern)`` with the op's border_mode, subsample, filter_flip,
    dilation and groups, through ``jax.lax.conv_general_dilated`` (the
    ``forward`` pass's turned kernel as :mod:`.kernel_turn` makes it)."""
    if op.unshared:
        raise NotImplementedError("unshared convolutions have no JAX conversion in int8store")
    strides = tuple(int(s) for s in op.subsample)
    dilation = tuple(int(d) for d in op.filter_dilation)
    groups = int(op.num_groups)
    channels_last = on_cpu()

    def conv(img, kern):
        if op.filter_flip:  # a true convolution; lax correlates
            kern = turned(kern, forward)
        if channels_last:  # XLA:CPU's fast form, inside loops too (.channels_last)
            return correlate(img, kern, strides, _padding(op, kern.shape[2:]), dilation, groups)
        return jax.lax.conv_general_dilated(
            img, kern, window_strides=strides, padding=_padding(op, kern.shape[2:]),
            rhs_dilation=dilation, dimension_numbers=("NCHW", "OIHW", "NCHW"),
            feature_group_count=groups)

    return conv


def _padding(op, kernel_spatial):
    """The op's padding, (low, high) per spatial axis."""
    extents = [(k - 1) * int(d) for k, d in zip(kernel_spatial, op.filter_dilation)]
    mode = op.border_mode
    if mode == "valid":
        return [(0, 0), (0, 0)]
    if mode == "full":
        return [(e, e) for e in extents]
    if mode == "half":  # Aesara pads the dilated kernel's size // 2 on both sides
        return [((e + 1) // 2, (e + 1) // 2) for e in extents]
    return [(m, m) if isinstance(m, int) else tuple(m) for m in mode]


def _channels_last_gradients(op, kernel_spatial):
    """The op's padding if its gradient is written channels-last
    (:mod:`.channels_last`), else None."""
    padding = _padding(op, kernel_spatial)
    if on_cpu() and gradients_apply(op.subsample, padding, kernel_spatial, op.filter_dilation,
                                    op.num_groups):
        return padding
    return None


def _static_shape(node, what, hint):
    """The output's shape: its static type, completed from the op's shape hint
    (``imshp`` / ``kshp``, from conv2d's ``input_shape`` / ``filter_shape``)."""
    shape = [n if n is not None else h for n, h in zip(node.outputs[0].type.shape, hint)]
    if any(n is None for n in shape):
        raise NotImplementedError(
            f"{type(node.op).__name__} in JAX needs the static shape of {what}; "
            "give conv2d its input_shape and filter_shape"
        )
    return tuple(int(n) for n in shape)


def _pullback(linear, shape, dtype, cotangent):
    """The gradient through ``linear`` (linear in its one argument, of ``shape``):
    its pullback of ``cotangent``, which is what the conv2d gradient ops compute."""
    _, pullback = jax.vjp(linear, jnp.zeros(shape, dtype))
    return pullback(cotangent)[0]


@_conversion(AbstractConv2d)
def jax_funcify_AbstractConv2d(op, **kwargs):
    return _conv2d_function(op, forward=True)


@_conversion(AbstractConv2d_gradWeights)
def jax_funcify_AbstractConv2d_gradWeights(op, node=None, **kwargs):
    conv = _conv2d_function(op)
    kernel_shape = _static_shape(node, "the filters", op.kshp)
    padding = _channels_last_gradients(op, kernel_shape[2:])

    def conv_grad_weights(img, topgrad, *shape):
        if padding is not None:
            return correlate_grad_weights(img, topgrad, padding, op.filter_flip)
        return _pullback(lambda kern: conv(img, kern), kernel_shape, img.dtype, topgrad)

    return conv_grad_weights


@_conversion(AbstractConv2d_gradInputs)
def jax_funcify_AbstractConv2d_gradInputs(op, node=None, **kwargs):
    conv = _conv2d_function(op)
    image_shape = _static_shape(node, "the images", op.imshp)

    def conv_grad_inputs(kern, topgrad, *shape):
        padding = _channels_last_gradients(op, kern.shape[2:])
        if padding is not None:
            return correlate_grad_inputs(kern, topgrad, padding, op.filter_flip)
        return _pullback(lambda img: conv(img, kern), image_shape, kern.dtype, topgrad)

    return conv_grad_inputs


# -- max pooling and its gradient ---------------------------------------------------

def _pool_geometry(op, node, first_param):
    """(window, stride) of a 2-D max pooling with no padding, from the node's constants."""
    from aesara.graph.basic import Constant

    if op.mode != "max" or op.ndim != 2:
        raise NotImplementedError(f"only 2-D max pooling has a JAX conversion, not {op.mode}")
    values = []
    for variable in node.inputs[first_param:first_param + 3]:
        if not isinstance(variable, Constant):
            raise NotImplementedError("pooling in JAX needs a constant window, stride and pad")
        values.append(tuple(int(v) for v in variable.data))
    window, stride, pad = values
    if any(pad):
        raise NotImplementedError("max pooling with padding has no JAX conversion in int8store")
    return window, stride


def _pool_out_size(size, window, stride, ignore_border):
    # Aesara's Pool.out_shape, for one axis without padding.
    if ignore_border:
        return max(0, (size - window) // stride + 1)
    if stride >= window:
        return (size - 1) // stride + 1
    return max(0, (size - 1 - window + stride) // stride) + 1


def _padded_for_pooling(x, window, stride, ignore_border):
    """``x`` padded at the end with the lowest value so that every window Aesara
    pools is whole (partial windows when ``ignore_border`` is false)."""
    lowest = jnp.finfo(x.dtype).min if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min
    out = [_pool_out_size(x.shape[-2 + i], window[i], stride[i], ignore_border) for i in range(2)]
    extra = [max(0, (out[i] - 1) * stride[i] + window[i] - x.shape[-2 + i]) for i in range(2)]
    pad = [(0, 0)] * (x.ndim - 2) + [(0, extra[0]), (0, extra[1])]
    return jnp.pad(x, pad, constant_values=lowest), out


@_conversion(Pool)
def jax_funcify_Pool(op, node=None, **kwargs):
    window, stride = _pool_geometry(op, node, 1)

    def max_pool(x, *geometry):
        padded, out = _padded_for_pooling(x, window, stride, op.ignore_border)
        dims = (1,) * (x.ndim - 2)
        pooled = jax.lax.reduce_window(padded, -jnp.inf if jnp.issubdtype(x.dtype, jnp.floating)
                                       else jnp.iinfo(x.dtype).min, jax.lax.max,
                                       dims + window, dims + stride, "VALID")
        return pooled[..., :out[0], :out[1]]

    return max_pool


@_conversion(MaxPoolGrad)
def jax_funcify_MaxPoolGrad(op, node=None, **kwargs):
    window, stride = _pool_geometry(op, node, 3)

    def max_pool_grad(x, maxout, gz, *geometry):
        # As Aesara does: every input equal to its window's maximum receives
        # that window's gradient (ties included, overlapping windows add up).
        if window == stride:
            return tiled_max_pool_grad(x, maxout, gz, window)
        padded, out = _padded_for_pooling(x, window, stride, op.ignore_border)
        grad = jnp.zeros_like(padded)
        for i in range(window[0]):
            for j in range(window[1]):
                rows = slice(i, i + stride[0] * (out[0] - 1) + 1, stride[0])
                cols = slice(j, j + stride[1] * (out[1] - 1) + 1, stride[1])
                hit = padded[..., rows, cols] == maxout
                grad = grad.at[..., rows, cols].add(jnp.where(hit, gz, 0).astype(grad.dtype))
        return grad[..., :x.shape[-2], :x.shape[-1]]

    return max_pool_grad
