"""The training steps of the tutorials' three models as graphs with static
shapes, for memory planning (:mod:`int8store.memory.estimates`): built, compiled if
asked, never run here.

The step takes an int8 minibatch (the codes on the device), widens it to
float32 (or ``dtype``) inside the graph as int8store does, and returns the cost and the
parameters after one SGD step. Parameters are inputs, not shared variables,
so that planning a large model allocates nothing.
"""

import math
from dataclasses import dataclass

from ..backend import activate, conv2d, pool_2d
from .models import lenet5_geometry

_api = activate()
at, softmax = _api.at, _api.softmax

__all__ = ["StepGraph", "build_step", "logistic", "mlp", "lenet5"]

_FLOAT = "float32"  # (the default: the tutorials' float type on an accelerator)


@dataclass
class StepGraph:
    """A training step: ``inputs`` (minibatch codes, labels, then parameters),
    ``outputs`` (cost, then the updated parameters), the model's ``layers``
    (input first: what the rule of thumb counts as neurons) and ``params``."""

    inputs: list
    outputs: list
    layers: list
    params: list


def _step(codes, labels, layers, probabilities, params, learning_rate=0.1, penalty=None):
    batch, dtype = codes.type.shape[0], probabilities.type.dtype
    # The parameters' type throughout, whatever floatX is: a Python float would upcast to it.
    log_likelihood = at.log(probabilities)[at.arange(batch), labels]
    cost = -at.sum(log_likelihood) / at.constant(batch, dtype=dtype)
    if penalty is not None:
        cost = cost + penalty
    grads = at.grad(cost, params)
    rate = at.constant(learning_rate, dtype=dtype)
    return StepGraph([codes, labels] + params, [cost] + [p - rate * g for p, g in
                                                       zip(params, grads)], layers, params)


def _inputs(batch_size, image_shape, dtype):
    codes = at.TensorType("int8", shape=(batch_size,) + tuple(image_shape))("codes")
    labels = at.TensorType("int32", shape=(batch_size,))("labels")
    # The minibatch's float copy, as int8store's "unit" view makes it.
    x = (at.cast(codes, dtype) + at.constant(128, dtype=dtype)) / at.constant(256, dtype=dtype)
    return codes, labels, x


def _param(name, dtype, *shape):
    return at.TensorType(dtype, shape=shape)(name)


def logistic(batch_size, image_shape, n_classes, dtype=_FLOAT):
    """Logistic regression (``logistic_sgd.py``)."""
    codes, labels, x = _inputs(batch_size, image_shape, dtype)
    n_in = math.prod(image_shape)
    W, b = _param("W", dtype, n_in, n_classes), _param("b", dtype, n_classes)
    probabilities = softmax(at.dot(x.reshape((batch_size, n_in)), W) + b, axis=-1)
    return _step(codes, labels, [x, probabilities], probabilities, [W, b])


def mlp(batch_size, image_shape, n_classes, dtype=_FLOAT, hidden=500, l2_reg=0.0001):
    """The multilayer perceptron (``mlp.py``): a tanh hidden layer, logistic
    regression, and the tutorial's L2 penalty on both weight matrices (its L1
    weight is 0 by default)."""
    codes, labels, x = _inputs(batch_size, image_shape, dtype)
    n_in = math.prod(image_shape)
    W1, b1 = _param("W1", dtype, n_in, hidden), _param("b1", dtype, hidden)
    W2, b2 = _param("W2", dtype, hidden, n_classes), _param("b2", dtype, n_classes)
    h = at.tanh(at.dot(x.reshape((batch_size, n_in)), W1) + b1)
    probabilities = softmax(at.dot(h, W2) + b2, axis=-1)
    penalty = at.constant(l2_reg, dtype=dtype) * (at.sum(W1 ** 2) + at.sum(W2 ** 2))
    return _step(codes, labels, [x, h, probabilities], probabilities, [W1, b1, W2, b2],
                 learning_rate=0.01, penalty=penalty)


def lenet5(batch_size, image_shape, n_classes, dtype=_FLOAT, nkerns=(20, 50), hidden=500):
    """LeNet5 (``convolutional_mlp.py``): two convolution + max-pooling layers,
    a tanh hidden layer, logistic regression."""
    codes, labels, x = _inputs(batch_size, image_shape, dtype)
    channels, ((filter0, size0), (filter1, size1)) = lenet5_geometry(image_shape)
    rows, cols = image_shape[:2]
    W0, b0 = _param("W0", dtype, nkerns[0], channels, *filter0), _param("b0", dtype, nkerns[0])
    W1, b1 = (_param("W1", dtype, nkerns[1], nkerns[0], *filter1),
              _param("b1", dtype, nkerns[1]))
    n_flat = nkerns[1] * size1[0] * size1[1]
    W2, b2 = _param("W2", dtype, n_flat, hidden), _param("b2", dtype, hidden)
    W3, b3 = _param("W3", dtype, hidden, n_classes), _param("b3", dtype, n_classes)
    image = x.reshape((batch_size, rows, cols, channels)).dimshuffle(0, 3, 1, 2)
    h0 = at.tanh(pool_2d(conv2d(image, W0, input_shape=(batch_size, channels, rows, cols),
                                filter_shape=W0.type.shape), (2, 2), ignore_border=True)
                 + b0.dimshuffle("x", 0, "x", "x"))
    h1 = at.tanh(pool_2d(conv2d(h0, W1, input_shape=(batch_size, nkerns[0]) + size0,
                                filter_shape=W1.type.shape), (2, 2), ignore_border=True)
                 + b1.dimshuffle("x", 0, "x", "x"))
    h2 = at.tanh(at.dot(h1.reshape((batch_size, n_flat)), W2) + b2)
    probabilities = softmax(at.dot(h2, W3) + b3, axis=-1)
    return _step(codes, labels, [x, h0, h1, h2, probabilities], probabilities,
                 [W0, b0, W1, b1, W2, b2, W3, b3])


def build_step(model, batch_size, image_shape, n_classes, dtype=_FLOAT):
    """The :class:`StepGraph` of ``model`` ("logistic", "mlp" or "lenet5"),
    its floats of ``dtype`` (float32 or float64)."""
    builders = {"logistic": logistic, "mlp": mlp, "lenet5": lenet5}
    return builders[model](batch_size, tuple(image_shape), n_classes, dtype)
