"""Theano/Aesara's ``conv2d`` for PyTensor, which has none: :func:`conv2d`
takes the arguments of ``aesara.tensor.nnet.conv2d`` and computes what it
computes, a true 2-D convolution (the kernel flipped, unless
``filter_flip=False``) of NCHW images with OIHW filters. Three ops carry it,
each with a NumPy ``perform`` (:mod:`.im2col`), an ``infer_shape`` and its
gradient: :class:`Conv2d`, the forward convolution; :class:`Conv2dGradInputs`
and :class:`Conv2dGradWeights`, its gradients with respect to the images and
to the filters (each the other's gradient, so second derivatives exist too).

Every op's static output shape is set whenever the input shapes (or
conv2d's ``input_shape``/``filter_shape`` hints) make it known: JAX mode and
int8store's memory planning need it. Their JAX conversions are in
:mod:`int8store.backend.jax.pytensor_conversions`; in PyTensor's Numba mode
they run their ``perform`` (declared to :mod:`.numba`). This module imports
only NumPy and PyTensor.
"""

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import disconnected_type
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.scalar import upcast
from pytensor.tensor.basic import get_scalar_constant_value
from pytensor.tensor.exceptions import NotScalarConstantError
from pytensor.tensor.type import TensorType, float_dtypes, integer_dtypes

from . import numba
from .im2col import (conv2d_forward, conv2d_grad_inputs, conv2d_grad_weights, conv_out_len, padding,
                     scratch_bytes)
from .windows import int_pair

__all__ = ["conv2d", "Conv2d", "Conv2dGradInputs", "Conv2dGradWeights"]


# -- arguments -------------------------------------------------------------------------

def _border_mode(border_mode):
    """``"valid"``, ``"full"``, ``"half"`` or a pair of paddings (``(0, 0)`` is ``"valid"``)."""
    if isinstance(border_mode, str):
        if border_mode not in ("valid", "full", "half"):
            raise ValueError(f"border_mode must be 'valid', 'full', 'half', an int or a pair "
                             f"of ints, not {border_mode!r}")
        return border_mode
    pad = int_pair(border_mode, "border_mode", 0)
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


# -- the convolution ops ------------------------------------------------------------------------

class _Conv2dBase(Op):
    __props__ = ("border_mode", "subsample", "filter_flip", "imshp", "kshp")

    def __init__(self, border_mode="valid", subsample=(1, 1), filter_flip=True, imshp=None, kshp=None):
        self.border_mode = _border_mode(border_mode)
        self.subsample = int_pair(subsample, "subsample", 1)
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
        pad = padding(self.border_mode, kernel_spatial)
        sizes = tuple(conv_out_len(image_spatial[i], kernel_spatial[i], pad[i], self.subsample[i])
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

    #: Which call of the numerics ``perform`` makes, and where its images and
    #: filters are: ("input" or "output", position).
    _numerics = None

    def scratch_bytes(self, node, input_shapes, output_shapes):
        """``{buffer: bytes}`` of scratch that ``perform`` takes and this thread keeps
        between calls, for these shapes or fewer images (the memory planner's
        bound; see im2col)."""
        kind, images, kernel = self._numerics
        shapes = {"input": input_shapes, "output": output_shapes}
        return scratch_bytes(kind, shapes[images[0]][images[1]], shapes[kernel[0]][kernel[1]],
                             self.border_mode, self.subsample, node.outputs[0].dtype, bound=True)


class Conv2d(_Conv2dBase):
    """Theano's conv2d (``AbstractConv2d``): ``Conv2d(...)(img, kern)``, NCHW images and OIHW filters."""

    _numerics = ("forward", ("input", 0), ("input", 1))

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

    _numerics = ("weights", ("input", 0), ("output", 0))

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

    _numerics = ("inputs", ("output", 0), ("input", 0))

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


# In PyTensor's default (Numba) mode: their perform, without the object-mode warning.
numba.declare(_Conv2dBase)
