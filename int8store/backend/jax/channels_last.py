"""conv2d and its two gradients written channels-last for XLA:CPU.

XLA:CPU runs a convolution through its fast library kernels only in one
form: images batch-major and channels-last (NHWC), filters HWIO, and so the
output. Compiling a function, it rewrites other forms into that one, but not
inside a loop's body, where it emits a plain loop nest instead
(jax-ml/jax#12868): LeNet5's step inside int8store's many-steps loop took 13
to 17 times its time alone, and the gradients' convolutions most of it. The
functions here give XLA that form themselves, NCHW/OIHW transposed around
it, for the forward correlation and, at stride 1, for both gradients: the
step then runs inside the loop as fast as alone, to the same bits
(``tests/test_jax_ops.py``). Used on the CPU only; elsewhere the library's
forms stand.

``padding`` is ``[(low, high), (low, high)]`` per spatial axis; the kernels
are correlating ones, or for the gradients with ``flip`` a true
convolution's (the op's ``filter_flip``).
"""

import jax
import jax.numpy as jnp

from .target import target_platform

__all__ = ["on_cpu", "correlate", "gradients_apply", "correlate_grad_weights",
           "correlate_grad_inputs"]

_CHANNELS_LAST = ("NHWC", "HWIO", "NHWC")
_TO_NHWC, _FROM_NHWC = (0, 2, 3, 1), (0, 3, 1, 2)


def on_cpu():
    """Whether the functions are made for the CPU (:mod:`.target`), where
    these forms are used."""
    return target_platform() == "cpu"


def correlate(img, kern, strides=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1):
    """The correlation of NCHW ``img`` with OIHW ``kern``, NCHW out."""
    out = jax.lax.conv_general_dilated(
        jnp.transpose(img, _TO_NHWC), jnp.transpose(kern, (2, 3, 1, 0)), window_strides=strides,
        padding=padding, rhs_dilation=dilation, dimension_numbers=_CHANNELS_LAST,
        feature_group_count=groups)
    return jnp.transpose(out, _FROM_NHWC)


def gradients_apply(strides, padding, kernel_spatial, dilation=(1, 1), groups=1):
    """Whether the two gradients below apply: stride 1, no dilation, one group,
    and no side padded by a kernel's size or more (a full correlation's
    padding, ``k - 1 - pad``, stays zero or more)."""
    return (tuple(strides) == (1, 1) and tuple(dilation) == (1, 1) and groups == 1
            and all(0 <= side <= k - 1 for (low, high), k in zip(padding, kernel_spatial)
                    for side in (low, high)))


def correlate_grad_weights(img, topgrad, padding, flip=False):
    """The gradient of :func:`correlate` (stride 1) with respect to its
    kernel: ``d[o, i, y, x] = sum over b, p, q of img_padded[b, i, p + y, q +
    x] * topgrad[b, o, p, q]``, a correlation whose batch is the images'
    channels and whose channels are their batch (``flip``: turned half-way
    round, a true convolution's kernel's gradient)."""
    out = jax.lax.conv_general_dilated(
        jnp.transpose(img, (1, 2, 3, 0)), jnp.transpose(topgrad, (2, 3, 0, 1)),
        window_strides=(1, 1), padding=padding, dimension_numbers=_CHANNELS_LAST)
    grad = jnp.transpose(out, (3, 0, 1, 2))
    return grad[:, :, ::-1, ::-1] if flip else grad


def correlate_grad_inputs(kern, topgrad, padding, flip=False):
    """The gradient of :func:`correlate` (stride 1) with respect to its
    images: the full correlation of ``topgrad`` with the kernel turned
    half-way round (``flip``: a true convolution's kernel, as it is), its
    input and output channels swapped, less the forward's padding."""
    kernel_spatial = kern.shape[2:]
    full = [(k - 1 - low, k - 1 - high) for (low, high), k in zip(padding, kernel_spatial)]
    turned = kern if flip else kern[:, :, ::-1, ::-1]
    out = jax.lax.conv_general_dilated(
        jnp.transpose(topgrad, _TO_NHWC), jnp.transpose(turned, (2, 3, 0, 1)),
        window_strides=(1, 1), padding=full, dimension_numbers=_CHANNELS_LAST)
    return jnp.transpose(out, _FROM_NHWC)
