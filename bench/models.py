"""The two tutorials' models, built over given splits for the benchmarks: the
tutorials' own layers (LogisticRegression, HiddenLayer, LeNetConvPoolLayer),
the minibatch taken with int8store's static-size minibatch op, compiled for
``mode``. Importing this module sets the library's floatX to float32, the classic
tutorials' published setting, which the benchmarks measure.

    params, train = build("LeNet5", splits, batch_size=500, learning_rate=0.1, mode="c")
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tutorials"))

import numpy  # noqa: E402

from int8store.backend import tensor_library  # noqa: E402

# PyTensor or Aesara, set up by int8store (before the library's own BLAS probe,
# which would only print warnings here).
theano = tensor_library()
T = theano.tensor
theano.config.floatX = "float32"

import convolutional_mlp  # noqa: E402
from logistic_sgd import LogisticRegression  # noqa: E402
from mlp import HiddenLayer  # noqa: E402

from int8store import function_mode  # noqa: E402

__all__ = ["MODELS", "build", "build_step"]

#: name -> (batch size, learning rate) of the classic tutorials
MODELS = {"logistic regression": (600, 0.13), "LeNet5": (500, 0.1)}
#: the MLP tutorial's weight of the weights' squared sum in its cost
MLP_L2 = 0.0001


def build(name, splits, batch_size, learning_rate, mode="c", n_out=None):
    """``(params, train)``: the model's parameters and its compiled SGD step
    on minibatch ``index`` of ``splits["train"]`` (SharedDataset objects);
    classes counted from the splits' labels unless ``n_out`` is given."""
    if n_out is None:
        n_out = 1 + int(max(numpy.asarray(s.y.get_value(borrow=True)).max() for s in splits.values()))
    params, index, cost, updates, givens = build_step(name, splits["train"], batch_size,
                                                      learning_rate, n_out)
    step = theano.function([index], cost, updates=updates, givens=givens,
                           mode=function_mode(mode))
    return params, step


def build_step(name, train, batch_size, learning_rate, n_out=10, augment=False):
    """``(params, index, cost, updates, givens)``: what a tutorial passes to
    ``function([index], cost, updates=updates, givens=givens)`` for one SGD
    step on minibatch ``index`` of ``train`` (a SharedDataset; with
    ``augment``, its minibatch augmented as ``train.augment`` set)."""
    index = T.lscalar()
    x = T.TensorType(theano.config.floatX, shape=(batch_size, train.n_features))("x")
    y = T.TensorType("int32", shape=(batch_size,))("y")
    if name == "logistic regression":
        top = LogisticRegression(input=x, n_in=train.n_features, n_out=n_out)
        params = top.params
    elif name == "MLP":
        params, top = _mlp(x, train.n_features, n_out)
    else:
        params, top = _lenet5(x, train.image_shape, batch_size, n_out)
    cost = top.negative_log_likelihood(y)
    if name == "MLP":  # the MLP tutorial's L2 term (its L1 weight is 0)
        cost = cost + MLP_L2 * sum((W ** 2).sum() for W in params[::2])
    updates = [(p, p - learning_rate * g) for p, g in zip(params, T.grad(cost, params))]
    batch_x, batch_y = train.minibatch(index, batch_size, augment=augment)
    return params, index, cost, updates, {x: batch_x, y: batch_y}


def _mlp(x, n_in, n_out, n_hidden=500):
    """The MLP tutorial's layers: a tanh hidden layer of 500, a softmax."""
    hidden = HiddenLayer(numpy.random.RandomState(1234), input=x, n_in=n_in, n_out=n_hidden,
                         activation=T.tanh)
    top = LogisticRegression(input=hidden.output, n_in=n_hidden, n_out=n_out)
    return hidden.params + top.params, top


def _lenet5(x, image_shape, batch_size, n_out, nkerns=(20, 50)):
    rng = numpy.random.RandomState(23455)
    channels, ((filter0, size0), (filter1, size1)) = convolutional_mlp.lenet5_geometry(image_shape)
    layer0 = convolutional_mlp.LeNetConvPoolLayer(
        rng, input=x.reshape((batch_size, channels) + tuple(image_shape[:2])),
        image_shape=(batch_size, channels) + tuple(image_shape[:2]),
        filter_shape=(nkerns[0], channels) + filter0)
    layer1 = convolutional_mlp.LeNetConvPoolLayer(
        rng, input=layer0.output, image_shape=(batch_size, nkerns[0]) + size0,
        filter_shape=(nkerns[1], nkerns[0]) + filter1)
    layer2 = HiddenLayer(rng, input=layer1.output.flatten(2),
                         n_in=nkerns[1] * size1[0] * size1[1], n_out=500, activation=T.tanh)
    layer3 = LogisticRegression(input=layer2.output, n_in=500, n_out=n_out)
    return layer3.params + layer2.params + layer1.params + layer0.params, layer3
