"""
A multilayer perceptron trained by minibatch SGD: the classic deeplearning.net
tutorial (mlp.py), on PyTensor or Aesara, with its data held as int8.

One tanh hidden layer, then logistic regression on its output; the cost is
the negative log-likelihood plus L1 and L2 penalties on the weights.

As in logistic_sgd.py: the classic file with ``from int8store import
load_data`` (through logistic_sgd, as the classic imported it) and a
``run`` (``int8store.training.Run``) for what int8store adds, the lines
marked ``# int8store``. LeNet5 (convolutional_mlp.py) builds on
``HiddenLayer``.

Run ``python tutorials/mlp.py --help`` for the options.
"""

import os
import sys
import timeit

import numpy

# The classic imported Theano here. int8store runs on either of its
# successors, PyTensor or Aesara (whichever is installed), and sets it up.
from int8store import tensor_library
theano = tensor_library()
T = theano.tensor

from logistic_sgd import LogisticRegression, load_data  # noqa: F401 (the classic's imports)
from int8store import ArgumentError, training  # int8store: a run's options, calls, checkpoints


class HiddenLayer(object):
    def __init__(self, rng, input, n_in, n_out, W=None, b=None,
                 activation=T.tanh):
        """
        A fully connected layer: ``activation(input W + b)``.

        :param rng: numpy.random.RandomState initialising the weights
        :param input: symbolic minibatch, shape (n_examples, n_in)
        :param n_in: dimension of the input
        :param n_out: number of hidden units
        :param activation: the non-linearity (None: the layer is linear)
        """
        self.input = input

        # weights drawn uniformly in +-sqrt(6 / (n_in + n_out)), the range
        # that keeps tanh units in their linear regime at the start [Xavier10];
        # four times that for the sigmoid
        if W is None:
            W_values = numpy.asarray(
                rng.uniform(low=-numpy.sqrt(6. / (n_in + n_out)),
                            high=numpy.sqrt(6. / (n_in + n_out)),
                            size=(n_in, n_out)),
                dtype=theano.config.floatX)
            if activation == T.sigmoid:
                W_values *= 4
            W = theano.shared(value=W_values, name='W', borrow=True, shape=W_values.shape)

        if b is None:
            b_values = numpy.zeros((n_out,), dtype=theano.config.floatX)
            b = theano.shared(value=b_values, name='b', borrow=True, shape=b_values.shape)

        self.W = W
        self.b = b

        lin_output = T.dot(input, self.W) + self.b
        self.output = lin_output if activation is None else activation(lin_output)
        self.params = [self.W, self.b]


class MLP(object):
    """One hidden layer and a logistic regression on top."""

    def __init__(self, rng, input, n_in, n_hidden, n_out):
        self.hiddenLayer = HiddenLayer(rng=rng, input=input, n_in=n_in, n_out=n_hidden,
                                       activation=T.tanh)
        self.logRegressionLayer = LogisticRegression(input=self.hiddenLayer.output,
                                                     n_in=n_hidden, n_out=n_out)
        # the penalties on the weights: L1 norm and squared L2 norm
        self.L1 = abs(self.hiddenLayer.W).sum() + abs(self.logRegressionLayer.W).sum()
        self.L2_sqr = (self.hiddenLayer.W ** 2).sum() + (self.logRegressionLayer.W ** 2).sum()
        self.negative_log_likelihood = self.logRegressionLayer.negative_log_likelihood
        self.errors = self.logRegressionLayer.errors
        self.params = self.hiddenLayer.params + self.logRegressionLayer.params
        self.input = input


def test_mlp(learning_rate=0.01, L1_reg=0.00, L2_reg=0.0001, n_epochs=1000,
             dataset='mnist.pkl.gz', batch_size=20, n_hidden=500, model_path=None, **options):
    """
    Train the MLP by minibatch SGD with early stopping; returns a dict with
    the best validation error, the test error of the best model (over every
    example, or whole minibatches only with ``classic_count``, as the classic
    did) and the epochs run. ``model_path``: where the best model's
    parameters are saved (.npz); ``options``: int8store's run, as in
    logistic_sgd.sgd_optimization_mnist.
    """
    if n_hidden < 1:  # int8store: none trains at chance, fewer fail in numpy
        raise ArgumentError('--hidden %i: expected 1 or more hidden units' % n_hidden)
    run = training.Run(**options)  # int8store
    datasets = run.load_data(dataset, batch_size)  # int8store: held whole, over devices or streamed
    batch_size = run.batch_size  # int8store: what every split (or shard) fills

    train_set_x, train_set_y = datasets[0]
    valid_set_x, valid_set_y = datasets[1]
    test_set_x, test_set_y = datasets[2]

    n_train_batches = run.n_batches()  # int8store (classic: from train_set_x's shape)

    print('... building the model')
    index = T.lscalar()
    x = T.matrix('x')
    y = T.ivector('y')
    rng = numpy.random.RandomState(1234)

    classifier = MLP(rng=rng, input=x, n_in=run.n_features, n_hidden=n_hidden,
                     n_out=run.n_classes)

    cost = (classifier.negative_log_likelihood(y)
            + L1_reg * classifier.L1 + L2_reg * classifier.L2_sqr)

    # the mistakes on the batch_size examples from `index`, from which
    # test_model() scores every example of the split (see logistic_sgd.py)
    test_model = run.scoring_function(  # int8store
        inputs=[index],
        outputs=T.neq(classifier.logRegressionLayer.y_pred, y),
        givens={
            x: test_set_x[index:index + batch_size],
            y: test_set_y[index:index + batch_size]
        },
        split=run.test
    )
    validate_model = run.scoring_function(  # int8store
        inputs=[index],
        outputs=T.neq(classifier.logRegressionLayer.y_pred, y),
        givens={
            x: valid_set_x[index:index + batch_size],
            y: valid_set_y[index:index + batch_size]
        },
        split=run.valid
    )

    gparams = [T.grad(cost, param) for param in classifier.params]
    updates = [(param, param - learning_rate * gparam)
               for param, gparam in zip(classifier.params, gparams)]
    train_model = run.training_function(  # int8store: one step a call, or several
        inputs=[index],
        outputs=cost,
        updates=updates,
        givens={
            x: train_set_x[index * batch_size:(index + 1) * batch_size],
            y: train_set_y[index * batch_size:(index + 1) * batch_size]
        }
    )

    print('... training')
    patience = 10000
    patience_increase = 2
    improvement_threshold = 0.995
    validation_frequency = min(n_train_batches, patience // 2)

    best_validation_loss = numpy.inf
    best_iter = 0
    test_score, test_count = 0., 0
    start_time = timeit.default_timer()
    say = run.epoch_lines(n_epochs)  # int8store: the classic's lines, or --progress

    # int8store: a run resumed from its checkpoint goes on where it stopped
    epoch, best_params, done_looping, loop = run.resume(
        'mlp', classifier.params, learning_rate=learning_rate, patience=patience,
        best_validation_loss=best_validation_loss, best_iter=best_iter, test_score=test_score,
        test_count=test_count)
    patience, best_validation_loss, best_iter = (loop['patience'], loop['best_validation_loss'],
                                                 loop['best_iter'])
    test_score, test_count = loop['test_score'], loop['test_count']
    while (epoch < n_epochs) and (not done_looping):
        epoch = epoch + 1
        # each minibatch of the epoch once train_model has trained on it (int8store)
        for minibatch_index in run.minibatches(epoch, train_model, validation_frequency,
                                               lambda: patience):
            iter = (epoch - 1) * n_train_batches + minibatch_index

            if (iter + 1) % validation_frequency == 0:
                this_validation_loss, valid_count = validate_model()
                say(epoch, 'epoch %i, minibatch %i/%i, validation error %f %% over %i '
                    'examples' % (epoch, minibatch_index + 1, n_train_batches,
                                  this_validation_loss * 100., valid_count))

                if this_validation_loss < best_validation_loss:
                    if this_validation_loss < best_validation_loss * improvement_threshold:
                        patience = max(patience, iter * patience_increase)
                    best_validation_loss = this_validation_loss
                    best_iter = iter
                    test_score, test_count = test_model()
                    say(epoch, '     epoch %i, minibatch %i/%i, test error of best model '
                        '%f %% over %i examples' % (epoch, minibatch_index + 1,
                                                    n_train_batches, test_score * 100.,
                                                    test_count))
                    run.save_model(model_path, *[p.get_value(borrow=True)
                                                 for p in classifier.params])
                    best_params = run.best_params(classifier.params)  # int8store

            # int8store: Ctrl-C (or SIGTERM) stops here, after the call under way
            # (its minibatch, or the many a call makes), and the run's checkpoint is
            # written where the loop looked at the model, and at the end
            stop = patience <= iter or run.stop_requested()
            last = epoch == n_epochs and minibatch_index + 1 == n_train_batches
            if stop or last or (iter + 1) % validation_frequency == 0:
                run.save(epoch, minibatch_index, best_params, patience <= iter,
                         patience=patience, best_validation_loss=best_validation_loss,
                         best_iter=best_iter, test_score=test_score, test_count=test_count)
            if stop:
                done_looping = True
                break

    run.close()  # int8store: a stream's reading stops
    end_time = timeit.default_timer()
    if run.stop_requested() and best_validation_loss == numpy.inf:  # int8store
        print('Interrupted at epoch %i: no validation was run yet, so there is no best model'
              % epoch)
    elif run.stop_requested():
        print('Interrupted at epoch %i: the best model so far has validation score %f %% '
              '(iteration %i), test performance %f %%'
              % (epoch, best_validation_loss * 100., best_iter + 1, test_score * 100.))
    else:
        print('Optimization complete. Best validation score of %f %% obtained at iteration %i, '
              'with test performance %f %%' % (best_validation_loss * 100., best_iter + 1,
                                               test_score * 100.))
    print('The code for file ' + os.path.split(__file__)[1] +
          ' ran for %.2fm' % ((end_time - start_time) / 60.), file=sys.stderr)
    return run.result(best_validation_loss=float(best_validation_loss), best_iter=best_iter + 1,
                      test_score=float(test_score), test_count=test_count, epochs=epoch,
                      seconds=end_time - start_time,
                      params=[numpy.array(p.get_value(borrow=True))
                              for p in classifier.params])


def main(argv=None):
    """int8store: the command line (training.add_arguments: the same options in every tutorial)."""
    parser = training.OneLineParser(description='A one-hidden-layer MLP on int8-held images.')
    training.add_arguments(parser, epochs=1000, learning_rate=0.01, batch_size=20)
    parser.add_argument('--hidden', type=int, default=500,
                        help='hidden units (default: %(default)s)')
    args = parser.parse_args(argv)
    return training.run_command(test_mlp, args, program='mlp', learning_rate=args.learning_rate,
                                n_epochs=args.epochs, dataset=args.dataset,
                                batch_size=args.batch_size, n_hidden=args.hidden,
                                model_path=args.save_model)


if __name__ == '__main__':
    sys.exit(main())
