"""
A multilayer perceptron trained by minibatch SGD: the classic deeplearning.net
tutorial (mlp.py), on PyTensor or Aesara, with its data held as int8.

One tanh hidden layer, then logistic regression on its output; the cost is
the negative log-likelihood plus L1 and L2 penalties on the weights.

As in logistic_sgd.py, the one change from the classic file is where
``load_data`` comes from: ``from int8store import load_data`` (through
logistic_sgd, as the classic imported it). LeNet5 (convolutional_mlp.py)
builds on ``HiddenLayer``.

Run ``python tutorials/mlp.py --help`` for the options.
"""

import argparse
import os
import sys
import timeit

import numpy

# The classic imported Theano here. int8store runs on either of its
# successors, PyTensor or Aesara (whichever is installed), and sets it up.
from int8store import tensor_library
theano = tensor_library()
T = theano.tensor

from logistic_sgd import (LogisticRegression, add_data_options, add_jax_run_options,
                          add_progress_option, add_run_options, add_steps_option, load_data,
                          load_for_training, report_timings, set_up_jax_run,
                          resume_point, run_checkpoint, run_from_command_line,
                          model_looked_at, save_run, trained_minibatches, training_steps)

import int8store  # int8store's JAX mode only (--mode jax)


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
             dataset='mnist.pkl.gz', batch_size=20, n_hidden=500, mode='c',
             classic_count=False, max_device_bytes=None, seed=None, max_memory=None,
             progress=False, steps_per_call=None, checkpoint=None, resume=None):
    """
    Train the MLP by minibatch SGD with early stopping; returns a dict with
    the best validation error, the test error of the best model (over every
    example, or whole minibatches only with ``classic_count``, as the classic
    did) and the epochs run. ``max_device_bytes``, ``seed`` and ``max_memory``
    stream the splits, ``progress`` condenses the per-epoch lines, and
    ``steps_per_call`` makes several updates a call, as in
    logistic_sgd.sgd_optimization_mnist.
    """
    # -- int8store: the splits, in memory or streamed, and the batch counts
    # (logistic_sgd.load_for_training)
    datasets, streams, batch_size, (n_train_batches, valid_split, test_split, n_out) = \
        load_for_training(dataset, batch_size, mode, max_device_bytes, seed, max_memory)
    train_set_x, train_set_y = datasets[0]
    valid_set_x, valid_set_y = datasets[1]
    test_set_x, test_set_y = datasets[2]
    compile_mode = int8store.function_mode(mode)

    print('... building the model')
    index = T.lscalar()
    x = T.matrix('x')
    y = T.ivector('y')
    rng = numpy.random.RandomState(1234)

    classifier = MLP(rng=rng, input=x, n_in=train_set_x.dataset.n_features,
                     n_hidden=n_hidden, n_out=n_out)

    cost = (classifier.negative_log_likelihood(y)
            + L1_reg * classifier.L1 + L2_reg * classifier.L2_sqr)

    def givens(set_x, set_y):
        return {x: set_x[index * batch_size:(index + 1) * batch_size],
                y: set_y[index * batch_size:(index + 1) * batch_size]}

    # the zero-one loss of each of the batch_size examples from `start`, from
    # which int8store.scoring_function scores a split (see logistic_sgd.py)
    start = T.lscalar()

    def window(set_x, set_y):
        return {x: set_x[start:start + batch_size], y: set_y[start:start + batch_size]}

    test_model = int8store.scoring_function(
        [start], T.neq(classifier.logRegressionLayer.y_pred, y), window(test_set_x, test_set_y),
        test_split, batch_size, classic_count, mode)
    validate_model = int8store.scoring_function(
        [start], T.neq(classifier.logRegressionLayer.y_pred, y),
        window(valid_set_x, valid_set_y), valid_split, batch_size, classic_count, mode)

    # -- int8store: a run stopped anywhere goes on from its checkpoint
    # (logistic_sgd.run_checkpoint): the parameters are set here
    run, resumed = run_checkpoint('mlp', checkpoint, resume,
                                  streams or [x.dataset for x, _ in datasets], classifier.params,
                                  batch_size, seed, loop=('patience', 'best_validation_loss',
                                                          'best_iter', 'test_score', 'test_count'))

    gparams = [T.grad(cost, param) for param in classifier.params]
    updates = [(param, param - learning_rate * gparam)
               for param, gparam in zip(classifier.params, gparams)]
    train_model = theano.function([index], cost, updates=updates,
                                  givens=givens(train_set_x, train_set_y), mode=compile_mode)
    # -- int8store: several of those steps a call (logistic_sgd.training_steps)
    train_steps = training_steps(index, cost, updates, givens(train_set_x, train_set_y),
                                 steps_per_call, mode,
                                 streams[0] if streams else train_set_x.dataset, batch_size)

    # -- int8store's JAX mode: the parameters' updates stay on the device
    if mode == 'jax':
        int8store.keep_on_device(classifier.params, [train_model])

    print('... training')
    patience = 10000
    patience_increase = 2
    improvement_threshold = 0.995
    validation_frequency = min(n_train_batches, patience // 2)

    best_validation_loss = numpy.inf
    best_iter = 0
    test_score, test_count = 0., 0
    start_time = timeit.default_timer()
    # -- int8store: the per-epoch lines, printed as the classic did (or condensed)
    epoch_lines = int8store.EpochLines(n_epochs, progress)

    epoch = 0
    done_looping = False
    start = 0  # the epoch's first minibatch
    best_params = []
    if resumed is not None:  # -- int8store: where the checkpoint stopped (resume_point)
        epoch, start, best_params, done_looping, (
            patience, best_validation_loss, best_iter, test_score, test_count) = resume_point(
            resumed, 'patience', 'best_validation_loss', 'best_iter', 'test_score', 'test_count')
    while (epoch < n_epochs) and (not done_looping):
        epoch = epoch + 1
        # each minibatch number of the epoch, once its update is made
        # (logistic_sgd.trained_minibatches)
        batches = trained_minibatches(
            streams[0] if streams else train_set_x.dataset, epoch, batch_size, train_model,
            train_steps, model_looked_at(epoch, n_train_batches, validation_frequency,
                                         lambda: patience), start)
        start = 0
        for minibatch_index in batches:
            iter = (epoch - 1) * n_train_batches + minibatch_index

            if (iter + 1) % validation_frequency == 0:
                this_validation_loss, valid_count = validate_model()
                epoch_lines(epoch, 'epoch %i, minibatch %i/%i, validation error %f %% over %i '
                            'examples' % (epoch, minibatch_index + 1, n_train_batches,
                                          this_validation_loss * 100., valid_count))

                if this_validation_loss < best_validation_loss:
                    if this_validation_loss < best_validation_loss * improvement_threshold:
                        patience = max(patience, iter * patience_increase)
                    best_validation_loss = this_validation_loss
                    best_iter = iter
                    test_score, test_count = test_model()
                    epoch_lines(epoch, '     epoch %i, minibatch %i/%i, test error of best model '
                                '%f %% over %i examples' % (epoch, minibatch_index + 1,
                                                            n_train_batches, test_score * 100.,
                                                            test_count))
                    if run is not None:  # -- int8store: the best model, for the run's checkpoint
                        best_params = [numpy.array(p.get_value(borrow=True))
                                       for p in classifier.params]

            # -- int8store: Ctrl-C (or SIGTERM) stops here, after the minibatch
            stop = patience <= iter or int8store.stop_requested()
            # -- int8store: the run's checkpoint, where the loop looked at the model or stops
            if stop or (iter + 1) % validation_frequency == 0:
                save_run(run, epoch, minibatch_index, best_params, patience <= iter,
                         patience=patience, best_validation_loss=best_validation_loss,
                         best_iter=best_iter, test_score=test_score, test_count=test_count)
            if stop:
                done_looping = True
                break
        batches.close()  # an epoch left early (early stopping) stops a stream's reading

    epoch_lines.close()
    for stream in streams or ():
        stream.close()  # its reading threads stop
    end_time = timeit.default_timer()
    interrupted = int8store.stop_requested()
    if interrupted:
        print('Interrupted at epoch %i, minibatch %i/%i: the best model so far has validation '
              'score %f %% (iteration %i), test performance %f %%'
              % (epoch, minibatch_index + 1, n_train_batches, best_validation_loss * 100.,
                 best_iter + 1, test_score * 100.))
    else:
        print('Optimization complete. Best validation score of %f %% obtained at iteration %i, '
              'with test performance %f %%' % (best_validation_loss * 100., best_iter + 1,
                                               test_score * 100.))
    print('The code for file ' + os.path.split(__file__)[1] +
          ' ran for %.2fm' % ((end_time - start_time) / 60.), file=sys.stderr)
    return {'best_validation_loss': float(best_validation_loss), 'best_iter': best_iter + 1,
            'test_score': float(test_score), 'test_count': test_count, 'epochs': epoch,
            'interrupted': bool(interrupted), 'seconds': end_time - start_time,
            'scoring_seconds': validate_model.seconds + test_model.seconds,
            'scoring_calls': validate_model.calls + test_model.calls,
            'params': [numpy.array(p.get_value(borrow=True)) for p in classifier.params]}


def main(argv=None):
    parser = argparse.ArgumentParser(description='A one-hidden-layer MLP on int8-held images.')
    parser.add_argument('--dataset', default='mnist.pkl.gz',
                        help="what int8store.load_data reads (default: %(default)s)")
    parser.add_argument('--epochs', type=int, default=1000)
    parser.add_argument('--batch-size', type=int, default=20)
    parser.add_argument('--hidden', type=int, default=500)
    add_data_options(parser)
    add_steps_option(parser)
    add_run_options(parser)
    add_progress_option(parser)
    add_jax_run_options(parser)
    args = parser.parse_args(argv)
    setup = set_up_jax_run(args)
    result, status = run_from_command_line(
        test_mlp, checkpoint=args.checkpoint, resume=args.resume, n_epochs=args.epochs, dataset=args.dataset, batch_size=args.batch_size,
        n_hidden=args.hidden, mode=args.mode, classic_count=args.classic_count,
        max_device_bytes=args.max_device_bytes, seed=args.seed, max_memory=args.max_memory,
        progress=args.progress, steps_per_call=args.steps_per_call)
    if result is not None and args.timings:
        report_timings(result, setup)
    return status  # 0, 2 after an error, 130 (SIGINT) / 143 (SIGTERM) when interrupted


if __name__ == '__main__':
    sys.exit(main())
