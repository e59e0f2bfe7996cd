"""A client written as users have the classic logistic_sgd.py: Aesara first
(or PyTensor, its successor, with ``--library pytensor``),
floatX everywhere, batch counts and predictions from x.get_value(), data in
../data/ beside this file. ``--loader classic`` uses its own loader (the
classic lines); ``--loader int8store`` has it replaced by the one-line import, and with
``--jax`` also runs in int8store's JAX mode (the data placed, the mode
given). Prints its figures as JSON for the test to compare."""

import gzip
import json
import os
import pickle
import sys

import numpy

if "--library" in sys.argv and sys.argv[sys.argv.index("--library") + 1] == "pytensor":
    import pytensor as aesara
    import pytensor.tensor as T
else:
    import aesara
    import aesara.tensor as T


def option(name, default=None):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


LOADER = option("--loader", "classic")


def classic_load_data(dataset):
    # where the classic looked: the working folder, else ../data beside this file
    if os.path.dirname(dataset) == "" and not os.path.isfile(dataset):
        dataset = os.path.join(os.path.split(__file__)[0], "..", "data", dataset)
    with gzip.open(dataset, "rb") as f:
        sets = pickle.load(f, encoding="latin1")  # the test's own file

    def shared_dataset(data_xy):
        data_x, data_y = data_xy
        shared_x = aesara.shared(numpy.asarray(data_x, dtype=aesara.config.floatX), borrow=True)
        shared_y = aesara.shared(numpy.asarray(data_y, dtype=aesara.config.floatX), borrow=True)
        return shared_x, T.cast(shared_y, "int32")

    return [shared_dataset(s) for s in sets]


if LOADER == "int8store":
    from int8store import load_data
else:
    load_data = classic_load_data


class LogisticRegression(object):
    def __init__(self, input, n_in, n_out):
        self.W = aesara.shared(numpy.zeros((n_in, n_out), dtype=aesara.config.floatX), name="W")
        self.b = aesara.shared(numpy.zeros((n_out,), dtype=aesara.config.floatX), name="b")
        self.p_y_given_x = T.special.softmax(T.dot(input, self.W) + self.b, axis=-1)
        self.y_pred = T.argmax(self.p_y_given_x, axis=1)
        self.params = [self.W, self.b]
        self.input = input

    def negative_log_likelihood(self, y):
        return -T.mean(T.log(self.p_y_given_x)[T.arange(y.shape[0]), y])

    def errors(self, y):
        return T.mean(T.neq(self.y_pred, y))


def main(batch_size=50, learning_rate=0.13):
    datasets = load_data("mnist.pkl.gz")
    mode = {}
    if "--jax" in sys.argv:  # JAX mode, as docs/backends.md says: two additions
        import int8store
        datasets = int8store.place(datasets, "jax")
        mode = {"mode": int8store.function_mode("jax")}
    train_set_x, train_set_y = datasets[0]
    valid_set_x, valid_set_y = datasets[1]
    test_set_x, test_set_y = datasets[2]
    n_train_batches = train_set_x.get_value(borrow=True).shape[0] // batch_size
    n_valid_batches = valid_set_x.get_value(borrow=True).shape[0] // batch_size
    n_test_batches = test_set_x.get_value(borrow=True).shape[0] // batch_size

    index = T.lscalar()
    x = T.matrix("x")
    y = T.ivector("y")
    classifier = LogisticRegression(input=x, n_in=28 * 28, n_out=10)
    cost = classifier.negative_log_likelihood(y)

    def model(set_x, set_y, **kwargs):
        return aesara.function(
            [index], kwargs.pop("outputs", classifier.errors(y)),
            givens={x: set_x[index * batch_size: (index + 1) * batch_size],
                    y: set_y[index * batch_size: (index + 1) * batch_size]}, **mode, **kwargs)

    test_model = model(test_set_x, test_set_y)
    validate_model = model(valid_set_x, valid_set_y)
    g_W, g_b = T.grad(cost, classifier.W), T.grad(cost, classifier.b)
    train_model = model(train_set_x, train_set_y, outputs=cost,
                        updates=[(classifier.W, classifier.W - learning_rate * g_W),
                                 (classifier.b, classifier.b - learning_rate * g_b)])
    valid_errors = []
    for epoch in range(int(option("--epochs", 1))):
        costs = [float(train_model(i)) for i in range(n_train_batches)]
        valid_errors.append(float(numpy.mean([validate_model(i) for i in range(n_valid_batches)])))
    test_error = float(numpy.mean([test_model(i) for i in range(n_test_batches)]))

    predict_model = aesara.function(inputs=[classifier.input], outputs=classifier.y_pred)
    values = test_set_x.get_value()
    print(json.dumps({
        "floatX": aesara.config.floatX, "x_dtype": str(values.dtype),
        "batches": [n_train_batches, n_valid_batches, n_test_batches],
        "last_costs": costs[-3:], "valid_errors": valid_errors, "test_error": test_error,
        "predicted": predict_model(values[:20]).tolist(),
        # the labels read as code written for the classic reads them (its y a cast)
        "labels": numpy.bincount(test_set_y.owner.inputs[0].get_value().astype(int)).tolist(),
        "W": classifier.W.get_value().tolist()[300][:10],
        "flags": os.environ.get(aesara.__name__.upper() + "_FLAGS"),
    }))


if __name__ == "__main__":
    main()
