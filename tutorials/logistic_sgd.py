"""
This tutorial introduces logistic regression using Aesara and stochastic
gradient descent: the classic deeplearning.net tutorial (logistic_sgd.py),
adapted to keep the images as int8 shared variables.

Logistic regression is a probabilistic, linear classifier. It is parametrized
by a weight matrix :math:`W` and a bias vector :math:`b`. Classification is
done by projecting data points onto a set of hyperplanes, the distance to
which is used to determine a class membership probability.

Mathematically, this can be written as:

.. math::
  P(Y=i|x, W,b) &= softmax_i(W x + b) \\
                &= \\frac {e^{W_i x + b_i}} {\\sum_j e^{W_j x + b_j}}

The output of the model or prediction is then done by taking the argmax of
the vector whose i'th element is P(Y=i|x).

.. math::
  y_{pred} = argmax_i P(Y=i|x,W,b)

This tutorial presents a stochastic gradient descent optimization method
suitable for large datasets.

What changed from the classic: ``load_data`` comes from int8store, so the
training images sit in memory as int8 (a quarter of the float32 bytes) and
each minibatch is converted to float32 inside the compiled function; the
minibatch counts come from the labels. ``--storage float32`` runs the classic
way for comparison.

References:

    - textbooks: "Pattern Recognition and Machine Learning" -
                 Christopher M. Bishop, section 4.3.2

Run ``python tutorials/logistic_sgd.py --help`` for the options.
"""

import argparse
import os
import sys
import timeit

import numpy

from int8store import (MODES, NORMALIZATIONS, STORAGES, Int8StoreError, function_mode,
                       keep_on_device, load_splits)
from int8store.atomic import atomic_output, check_can_write
from int8store.backend import FLOAT, aesara, at, float_constant, softmax
from int8store.memory import memory_table


class LogisticRegression(object):
    """Multi-class Logistic Regression Class

    The logistic regression is fully described by a weight matrix :math:`W`
    and bias vector :math:`b`. Classification is done by projecting data
    points onto a set of hyperplanes, the distance to which is used to
    determine a class membership probability.
    """

    def __init__(self, input, n_in, n_out):
        """Initialize the parameters of the logistic regression

        :type input: aesara.tensor.TensorType
        :param input: symbolic variable that describes the input of the
                      architecture (one minibatch)

        :type n_in: int
        :param n_in: number of input units, the dimension of the space in
                     which the datapoints lie

        :type n_out: int
        :param n_out: number of output units, the dimension of the space in
                      which the labels lie
        """
        # initialize with 0 the weights W as a matrix of shape (n_in, n_out)
        # (static shapes, as on every shared variable here: JAX mode traces
        # the graph and needs them)
        self.W = aesara.shared(
            value=numpy.zeros((n_in, n_out), dtype=FLOAT),
            name='W',
            borrow=True,
            shape=(n_in, n_out)
        )
        # initialize the biases b as a vector of n_out 0s
        self.b = aesara.shared(
            value=numpy.zeros((n_out,), dtype=FLOAT),
            name='b',
            borrow=True,
            shape=(n_out,)
        )

        # symbolic expression for computing the matrix of class-membership
        # probabilities
        # Where:
        # W is a matrix where column-k represent the separation hyperplane for
        # class-k
        # x is a matrix where row-j  represents input training sample-j
        # b is a vector where element-k represent the free parameter of
        # hyperplane-k
        self.p_y_given_x = softmax(at.dot(input, self.W) + self.b, axis=-1)

        # symbolic description of how to compute prediction as class whose
        # probability is maximal
        self.y_pred = at.argmax(self.p_y_given_x, axis=1)

        # parameters of the model
        self.params = [self.W, self.b]

        # keep track of model input
        self.input = input

    def negative_log_likelihood(self, y):
        """Return the mean of the negative log-likelihood of the prediction
        of this model under a given target distribution.

        .. math::

            \\frac{1}{|\\mathcal{D}|} \\mathcal{L} (\\theta=\\{W,b\\}, \\mathcal{D}) =
            \\frac{1}{|\\mathcal{D}|} \\sum_{i=0}^{|\\mathcal{D}|}
                \\log(P(Y=y^{(i)}|x^{(i)}, W,b)) \\\\
            \\ell (\\theta=\\{W,b\\}, \\mathcal{D})

        :type y: aesara.tensor.TensorType
        :param y: corresponds to a vector that gives for each example the
                  correct label

        Note: we use the mean instead of the sum so that
              the learning rate is less dependent on the batch size
        """
        # y.shape[0] is (symbolically) the number of rows in y, i.e.,
        # number of examples (call it n) in the minibatch
        # at.arange(y.shape[0]) is a symbolic vector which will contain
        # [0,1,2,... n-1] at.log(self.p_y_given_x) is a matrix of
        # Log-Probabilities (call it LP) with one row per example and
        # one column per class LP[at.arange(y.shape[0]),y] is a vector
        # v containing [LP[0,y[0]], LP[1,y[1]], LP[2,y[2]], ...,
        # LP[n-1,y[n-1]]] and at.mean(LP[at.arange(y.shape[0]),y]) is
        # the mean (across minibatch examples) of the elements in v,
        # i.e., the mean log-likelihood across the minibatch.
        return -at.mean(at.log(self.p_y_given_x)[at.arange(y.shape[0]), y])

    def errors(self, y):
        """Return a float representing the number of errors in the minibatch
        over the total number of examples of the minibatch ; zero one
        loss over the size of the minibatch

        :type y: aesara.tensor.TensorType
        :param y: corresponds to a vector that gives for each example the
                  correct label
        """

        # check if y has same dimension of y_pred
        if y.ndim != self.y_pred.ndim:
            raise TypeError(
                'y should have the same shape as self.y_pred',
                ('y', y.type, 'y_pred', self.y_pred.type)
            )
        # check if y is of the correct datatype
        if y.dtype.startswith('int'):
            # the at.neq operator returns a vector of 0s and 1s, where 1
            # represents a mistake in prediction
            return at.mean(at.neq(self.y_pred, y))
        else:
            raise NotImplementedError()


def load_data(dataset, storage='int8', normalize='unit', batch_size=600, mode='c'):
    """Load the dataset's splits (int8 images unless storage='float32'), held
    where ``mode`` runs (host memory for 'c', JAX's default device for 'jax').

    Returns the ``{"train", "valid", "test"}`` SharedDataset objects and the
    batch size, made smaller (with a notice) if a split has fewer examples
    than one batch, so that no split is left without a minibatch.
    """
    print('... loading data')
    splits = load_splits(dataset, normalize=normalize, storage=storage, mode=mode)
    smallest = min(ds.n_examples for ds in splits.values())
    if batch_size > smallest:
        name = min(splits, key=lambda n: splits[n].n_examples)
        print('... batch size %i is larger than the %i examples of the %s split: '
              'using %i' % (batch_size, smallest, name, smallest))
        batch_size = smallest
    return splits, batch_size


def n_classes(splits):
    """Number of classes: one more than the largest label of any split."""
    return 1 + max(int(ds.y.get_value(borrow=True).max()) for ds in splits.values())


def save_params(params, path):
    """Save the model's parameters to an .npz file, atomically: by name when
    the names are unique (W, b), else as param0, param1, ... in order."""
    names = [p.name for p in params]
    if None in names or len(set(names)) != len(names):
        names = ['param%i' % i for i in range(len(params))]
    with atomic_output(path, force=True) as tmp:
        with open(tmp, 'wb') as f:
            numpy.savez(f, **{n: p.get_value() for n, p in zip(names, params)})


def report(result, splits, storage, file=None):
    """Print the end-of-run summary: errors, epochs, time, and image bytes."""
    file = file or sys.stdout
    train = splits['train']
    other = 'float32' if storage == 'int8' else 'int8'
    held = train.int8_nbytes if storage == 'int8' else train.float32_nbytes
    would = train.float32_nbytes if storage == 'int8' else train.int8_nbytes
    print('', file=file)
    print('best validation error  %f %%' % (result['best_validation_loss'] * 100.), file=file)
    print('test error             %f %%' % (result['test_score'] * 100.), file=file)
    print('epochs                 %i' % result['epochs'], file=file)
    if 'best_iter' in result:
        print('best iteration         %i' % result['best_iter'], file=file)
    print('training time          %.1f s' % result['seconds'], file=file)
    print('training images held as %s: %s bytes (as %s: %s bytes)'
          % (storage, format(held, ','), other, format(would, ',')), file=file)
    print('', file=file)
    print('Images in memory (the C backend keeps them in host memory):', file=file)
    print(memory_table(splits), file=file)


def minibatch_givens(x, y, dataset_split, index, batch_size):
    """``givens`` putting minibatch ``index`` of a split in place of x and y.

    The minibatch is sliced from the int8 images and only then converted to
    float32, inside the compiled function.
    """
    batch_x, batch_y = dataset_split.minibatch(index, batch_size)
    return {x: batch_x, y: batch_y}


def build_model(splits, batch_size, learning_rate=0.13, mode='c'):
    """The classifier and its compiled train / validate / test functions,
    each taking a minibatch index; compiled for ``mode`` ('c' or 'jax')."""
    train_set, valid_set, test_set = splits['train'], splits['valid'], splits['test']
    compile_mode = function_mode(mode)

    # allocate symbolic variables for the data
    index = at.lscalar()  # index to a [mini]batch

    # generate symbolic variables for input (x and y represent a
    # minibatch; their static shapes let JAX mode trace the graph)
    x = at.TensorType(FLOAT, shape=(batch_size, train_set.n_features))('x')  # rasterized images
    y = at.TensorType('int32', shape=(batch_size,))('y')  # labels, 1D vector of [int] labels

    # construct the logistic regression class
    # Each MNIST image has size 28*28
    classifier = LogisticRegression(input=x, n_in=train_set.n_features,
                                    n_out=n_classes(splits))

    # the cost we minimize during training is the negative log likelihood of
    # the model in symbolic format
    cost = classifier.negative_log_likelihood(y)

    # compiling an Aesara function that computes the mistakes that are made by
    # the model on a minibatch
    test_model = aesara.function(
        inputs=[index],
        outputs=classifier.errors(y),
        givens=minibatch_givens(x, y, test_set, index, batch_size),
        mode=compile_mode
    )

    validate_model = aesara.function(
        inputs=[index],
        outputs=classifier.errors(y),
        givens=minibatch_givens(x, y, valid_set, index, batch_size),
        mode=compile_mode
    )

    # compute the gradient of cost with respect to theta = (W,b)
    g_W = at.grad(cost=cost, wrt=classifier.W)
    g_b = at.grad(cost=cost, wrt=classifier.b)

    # specify how to update the parameters of the model as a list of
    # (variable, update expression) pairs.
    rate = float_constant(learning_rate)
    updates = [(classifier.W, classifier.W - rate * g_W),
               (classifier.b, classifier.b - rate * g_b)]

    # compiling an Aesara function `train_model` that returns the cost, but in
    # the same time updates the parameter of the model based on the rules
    # defined in `updates`
    train_model = aesara.function(
        inputs=[index],
        outputs=cost,
        updates=updates,
        givens=minibatch_givens(x, y, train_set, index, batch_size),
        mode=compile_mode
    )
    return classifier, train_model, validate_model, test_model


def sgd_optimization_mnist(learning_rate=0.13, n_epochs=1000,
                           dataset='mnist.pkl.gz',
                           batch_size=600, storage='int8', normalize='unit',
                           model_path='best_model.npz', mode='c'):
    """
    Demonstrate stochastic gradient descent optimization of a log-linear
    model

    This is demonstrated on MNIST.

    :type learning_rate: float
    :param learning_rate: learning rate used (factor for the stochastic
                          gradient)

    :type n_epochs: int
    :param n_epochs: maximal number of epochs to run the optimizer

    :type dataset: string
    :param dataset: what int8store.load_data accepts ('digits', 'mnist',
                 the path of mnist.pkl.gz, ...)

    :type storage: string
    :param storage: 'int8' (this library) or 'float32' (the classic way)

    :type model_path: string or None
    :param model_path: where the best model's parameters are saved (.npz)

    :type mode: string
    :param mode: 'c' (Aesara's C backend) or 'jax' (JAX's default device)

    Returns a dict with the best validation error, the test error of the
    best model, the epochs run, the seconds taken, the final parameters, the
    splits and the compiled training function.
    """
    splits, batch_size = load_data(dataset, storage, normalize, batch_size, mode)
    train_set, valid_set, test_set = splits['train'], splits['valid'], splits['test']

    # compute number of minibatches for training, validation and testing
    # (from the labels: the images are a symbolic view)
    n_train_batches = train_set.y.get_value(borrow=True).shape[0] // batch_size
    n_valid_batches = valid_set.y.get_value(borrow=True).shape[0] // batch_size
    n_test_batches = test_set.y.get_value(borrow=True).shape[0] // batch_size

    ######################
    # BUILD ACTUAL MODEL #
    ######################
    print('... building the model')
    classifier, train_model, validate_model, test_model = build_model(
        splits, batch_size, learning_rate, mode)
    if mode == 'jax':
        # keep the parameters' updates on the device too, instead of copying
        # them back to numpy after every step
        keep_on_device(classifier.params, [train_model, validate_model, test_model])

    ###############
    # TRAIN MODEL #
    ###############
    print('... training the model')
    # early-stopping parameters
    patience = 5000  # look as this many examples regardless
    patience_increase = 2  # wait this much longer when a new best is
                           # found
    improvement_threshold = 0.995  # a relative improvement of this much is
                                   # considered significant
    validation_frequency = min(n_train_batches, patience // 2)
                                  # go through this many
                                  # minibatche before checking the network
                                  # on the validation set; in this case we
                                  # check every epoch

    best_validation_loss = numpy.inf
    test_score = 0.
    start_time = timeit.default_timer()

    done_looping = False
    epoch = 0
    while (epoch < n_epochs) and (not done_looping):
        epoch = epoch + 1
        for minibatch_index in range(n_train_batches):

            minibatch_avg_cost = train_model(minibatch_index)
            # iteration number
            iter = (epoch - 1) * n_train_batches + minibatch_index

            if (iter + 1) % validation_frequency == 0:
                # compute zero-one loss on validation set
                validation_losses = [validate_model(i)
                                     for i in range(n_valid_batches)]
                this_validation_loss = numpy.mean(validation_losses)

                print(
                    'epoch %i, minibatch %i/%i, validation error %f %%' %
                    (
                        epoch,
                        minibatch_index + 1,
                        n_train_batches,
                        this_validation_loss * 100.
                    )
                )

                # if we got the best validation score until now
                if this_validation_loss < best_validation_loss:
                    #improve patience if loss improvement is good enough
                    if this_validation_loss < best_validation_loss *  \
                       improvement_threshold:
                        patience = max(patience, iter * patience_increase)

                    best_validation_loss = this_validation_loss
                    # test it on the test set

                    test_losses = [test_model(i)
                                   for i in range(n_test_batches)]
                    test_score = numpy.mean(test_losses)

                    print(
                        (
                            '     epoch %i, minibatch %i/%i, test error of'
                            ' best model %f %%'
                        ) %
                        (
                            epoch,
                            minibatch_index + 1,
                            n_train_batches,
                            test_score * 100.
                        )
                    )

                    # save the best model
                    if model_path:
                        save_params(classifier.params, model_path)

            if patience <= iter:
                done_looping = True
                break

    end_time = timeit.default_timer()
    print(
        (
            'Optimization complete with best validation score of %f %%,'
            'with test performance %f %%'
        )
        % (best_validation_loss * 100., test_score * 100.)
    )
    print('The code run for %d epochs, with %f epochs/sec' % (
        epoch, 1. * epoch / (end_time - start_time)))
    print(('The code for file ' +
           os.path.split(__file__)[1] +
           ' ran for %.1fs' % ((end_time - start_time))), file=sys.stderr)
    return {
        'best_validation_loss': float(best_validation_loss),
        'test_score': float(test_score),
        'epochs': epoch,
        'seconds': end_time - start_time,
        'params': {p.name: numpy.asarray(p.get_value()) for p in classifier.params},
        'splits': splits,
        'train_model': train_model,
    }


def predict(model_path='best_model.npz', dataset='mnist.pkl.gz', count=10):
    """
    An example of how to load a trained model and use it
    to predict labels.
    """
    with numpy.load(model_path, allow_pickle=False) as saved:
        W, b = saved['W'], saved['b']
    splits = load_splits(dataset, storage='int8')
    x = at.matrix('x', dtype=FLOAT)
    classifier = LogisticRegression(input=x, n_in=W.shape[0], n_out=W.shape[1])
    classifier.W.set_value(W)
    classifier.b.set_value(b)

    # compile a predictor function
    predict_model = aesara.function(
        inputs=[],
        outputs=classifier.y_pred,
        givens={x: splits['test'].x[:count]})

    predicted_values = predict_model()
    print("Predicted values for the first %i examples in test set:" % count)
    print(predicted_values)
    return predicted_values


def add_data_arguments(parser, batch_size, model_path='best_model.npz'):
    """The flags both tutorials share."""
    parser.add_argument('--dataset', default='mnist.pkl.gz',
                        help="'digits' (offline), 'mnist' (cache, downloaded if missing), "
                             "a path to mnist.pkl.gz, an .npz, an int8store .h5 store, "
                             "or a folder of MNIST IDX files or of class folders of images "
                             "(default: %(default)s)")
    parser.add_argument('--storage', choices=STORAGES, default='int8',
                        help='how the images are held: int8 codes, or float32 as the '
                             'classic tutorials did (default: %(default)s)')
    parser.add_argument('--normalize', choices=NORMALIZATIONS, default='unit',
                        help='float32 conversion of the images (default: %(default)s)')
    parser.add_argument('--mode', choices=MODES, default='c',
                        help="'c': Aesara's C backend on the CPU; 'jax': JAX's default "
                             "device, a GPU when JAX sees one (default: %(default)s)")
    parser.add_argument('--batch-size', type=int, default=batch_size,
                        help='minibatch size (default: %(default)s)')
    parser.add_argument('--save-model', default=model_path, metavar='PATH',
                        help="where the best model's parameters go (default: %(default)s)")
    parser.add_argument('--force', action='store_true',
                        help='replace the --save-model file if it exists')


def main(argv=None):
    parser = argparse.ArgumentParser(
        description='Logistic regression trained by minibatch SGD on int8-held images.')
    add_data_arguments(parser, batch_size=600)
    parser.add_argument('--epochs', type=int, default=1000,
                        help='maximal number of epochs (default: %(default)s)')
    parser.add_argument('--learning-rate', type=float, default=0.13,
                        help='SGD step (default: %(default)s)')
    args = parser.parse_args(argv)
    try:
        if args.save_model:
            check_can_write(args.save_model, args.force)
        result = sgd_optimization_mnist(
            learning_rate=args.learning_rate, n_epochs=args.epochs, dataset=args.dataset,
            batch_size=args.batch_size, storage=args.storage, normalize=args.normalize,
            model_path=args.save_model, mode=args.mode)
    except Int8StoreError as error:
        print('error: %s' % error, file=sys.stderr)
        return 2
    report(result, result['splits'], args.storage)
    return 0


if __name__ == '__main__':
    sys.exit(main())
