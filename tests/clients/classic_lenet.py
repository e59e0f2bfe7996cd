"""A client written as users have the classic convolutional_mlp.py: Aesara
first, floatX (float64 by default), a LeNet5 of two conv/pool layers, data in
../data/ beside this file. ``--loader int8store`` replaces its loader with
the one-line import; ``--loader classic`` keeps the classic lines and asks
int8store explicitly for the CPU convolution's set-up (a BLAS, Aesara's
CorrMM fix), which a classic Theano install had and Aesara 2.9.4 lacks.
Prints its figures as JSON."""

import json
import sys

import numpy

import aesara
import aesara.tensor as T
from aesara.tensor.nnet import conv2d
from aesara.tensor.signal import pool

# the classic convolutional_mlp.py imported its loader from logistic_sgd.py
from classic_logistic import LOADER, classic_load_data

if LOADER == "int8store":
    from int8store import load_data
else:
    from int8store.backend import activate
    activate()
    load_data = classic_load_data


class ConvPool(object):
    def __init__(self, rng, input, filter_shape, image_shape):
        bound = numpy.sqrt(6. / (numpy.prod(filter_shape[1:]) + filter_shape[0] * numpy.prod(filter_shape[2:]) / 4))
        self.W = aesara.shared(numpy.asarray(rng.uniform(-bound, bound, filter_shape),
                                             dtype=aesara.config.floatX))
        self.b = aesara.shared(numpy.zeros((filter_shape[0],), dtype=aesara.config.floatX))
        out = conv2d(input=input, filters=self.W, filter_shape=filter_shape, input_shape=image_shape)
        out = pool.pool_2d(input=out, ws=(2, 2), ignore_border=True)
        self.output = T.tanh(out + self.b.dimshuffle("x", 0, "x", "x"))
        self.params = [self.W, self.b]


def main(batch_size=25, learning_rate=0.1, nkerns=(4, 6)):
    rng = numpy.random.RandomState(23455)
    datasets = load_data("mnist.pkl.gz")
    train_set_x, train_set_y = datasets[0]
    test_set_x, test_set_y = datasets[2]
    n_train_batches = train_set_x.get_value(borrow=True).shape[0] // batch_size
    n_test_batches = test_set_x.get_value(borrow=True).shape[0] // batch_size

    index = T.lscalar()
    x = T.matrix("x")
    y = T.ivector("y")
    layer0 = ConvPool(rng, x.reshape((batch_size, 1, 28, 28)), (nkerns[0], 1, 5, 5),
                      (batch_size, 1, 28, 28))
    layer1 = ConvPool(rng, layer0.output, (nkerns[1], nkerns[0], 5, 5), (batch_size, nkerns[0], 12, 12))
    W = aesara.shared(numpy.zeros((nkerns[1] * 16, 10), dtype=aesara.config.floatX))
    p_y = T.special.softmax(T.dot(layer1.output.flatten(2), W), axis=-1)
    cost = -T.mean(T.log(p_y)[T.arange(y.shape[0]), y])
    errors = T.mean(T.neq(T.argmax(p_y, axis=1), y))
    params = [W] + layer1.params + layer0.params
    updates = [(p, p - learning_rate * g) for p, g in zip(params, T.grad(cost, params))]

    def givens(set_x, set_y):
        return {x: set_x[index * batch_size: (index + 1) * batch_size],
                y: set_y[index * batch_size: (index + 1) * batch_size]}

    train_model = aesara.function([index], cost, updates=updates, givens=givens(train_set_x, train_set_y))
    test_model = aesara.function([index], errors, givens=givens(test_set_x, test_set_y))
    costs = [float(train_model(i)) for i in range(n_train_batches)]
    print(json.dumps({
        "floatX": aesara.config.floatX, "batches": [n_train_batches, n_test_batches],
        "costs": costs, "test_error": float(numpy.mean([test_model(i) for i in range(n_test_batches)])),
        "ops": sorted({type(n.op).__name__ for n in train_model.maker.fgraph.toposort()}),
    }))


if __name__ == "__main__":
    main()
