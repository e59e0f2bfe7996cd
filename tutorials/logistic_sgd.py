"""
Logistic regression trained by minibatch stochastic gradient descent: the
classic deeplearning.net tutorial (logistic_sgd.py), on PyTensor or Aesara, with its data
held as int8.

The model is a weight matrix W and a bias vector b: the probability of class i
for an input x is softmax_i(x W + b), and the prediction is the most probable
class. Training minimises the mean negative log-likelihood of a minibatch,
with early stopping on the validation error.

The classic file with int8store in it: ``from int8store import load_data`` in
place of its own ``load_data`` (the one-line change: the images sit in
memory as int8, a quarter of float32's bytes, and each minibatch is widened
to ``floatX`` inside the compiled function), and a ``run``
(``int8store.training.Run``) for what int8store adds to a run: where the
splits are held (whole, over devices, streamed), how many updates a call
makes, every example of a split scored once (in one call in JAX mode), a
checkpoint to resume from. The lines marked ``# int8store`` are those
additions; the rest is the classic code.

Run ``python tutorials/logistic_sgd.py --help`` for the options; with no
options it trains on ``mnist.pkl.gz`` (looked for here, then in ../data/, then
in int8store's cache, downloaded if missing).
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

from int8store import load_data
from int8store import training  # int8store: a run's options, calls, checkpoints


class LogisticRegression(object):
    """Multi-class logistic regression: ``softmax(input W + b)``."""

    def __init__(self, input, n_in, n_out):
        """
        :param input: symbolic minibatch of inputs, one row per example
        :param n_in: number of input units (features of an example)
        :param n_out: number of classes
        """
        # W and b start at zero; they have static shapes, which JAX mode needs
        # to trace the graph (and which change nothing on the C backend)
        self.W = theano.shared(
            value=numpy.zeros((n_in, n_out), dtype=theano.config.floatX),
            name='W', borrow=True, shape=(n_in, n_out))
        self.b = theano.shared(
            value=numpy.zeros((n_out,), dtype=theano.config.floatX),
            name='b', borrow=True, shape=(n_out,))

        # class-membership probabilities, one row per example
        self.p_y_given_x = T.special.softmax(T.dot(input, self.W) + self.b, axis=-1)

        # the predicted class: the most probable one
        self.y_pred = T.argmax(self.p_y_given_x, axis=1)

        self.params = [self.W, self.b]
        self.input = input

    def negative_log_likelihood(self, y):
        """Mean over the minibatch of -log P(y | x): the log-probability of
        each example's own label, picked with ``[arange(n), y]``. The mean
        (not the sum) keeps the learning rate independent of the batch size."""
        return -T.mean(T.log(self.p_y_given_x)[T.arange(y.shape[0]), y])

    def errors(self, y):
        """The fraction of the minibatch that is misclassified (zero-one loss)."""
        if y.ndim != self.y_pred.ndim:
            raise TypeError('y should have the same shape as self.y_pred',
                            ('y', y.type, 'y_pred', self.y_pred.type))
        if y.dtype.startswith('int'):
            return T.mean(T.neq(self.y_pred, y))
        raise NotImplementedError()


def sgd_optimization_mnist(learning_rate=0.13, n_epochs=1000,
                           dataset='mnist.pkl.gz',
                           batch_size=600, model_path='best_model.npz', **options):
    """
    Train the logistic regression by minibatch SGD with early stopping.

    :param learning_rate: SGD step
    :param n_epochs: maximal number of epochs
    :param dataset: what ``int8store.load_data`` reads: 'mnist.pkl.gz' (the
                    classic file), 'digits' (offline), a store, ...
    :param batch_size: examples per minibatch
    :param model_path: where the best model's W and b are saved (.npz),
                       replaced at each improvement as the classic did
    :param options: int8store's run (``int8store.training.Run``: mode,
                    classic_count, max_device_bytes, max_memory, seed,
                    devices, steps_per_call, augment, normalize, checkpoint,
                    resume, progress); none: the classic run

    Returns a dict with the best validation error, the test error of the
    best model and how many examples it is over, the epochs run and the
    seconds taken.
    """
    run = training.Run(**options)  # int8store
    datasets = run.load_data(dataset, batch_size)  # int8store: held whole, over devices or streamed
    batch_size = run.batch_size  # int8store: what every split (or shard) fills

    train_set_x, train_set_y = datasets[0]
    valid_set_x, valid_set_y = datasets[1]
    test_set_x, test_set_y = datasets[2]

    # number of minibatches for training (the classic counted them with
    # train_set_x.get_value(borrow=True).shape[0] // batch_size)
    n_train_batches = run.n_batches()  # int8store

    ######################
    # BUILD ACTUAL MODEL #
    ######################
    print('... building the model')

    index = T.lscalar()  # index to a [mini]batch

    x = T.matrix('x')  # the minibatch of images, one flattened image per row
    y = T.ivector('y')  # its labels

    # 28 * 28 inputs and 10 classes on MNIST
    classifier = LogisticRegression(input=x, n_in=run.n_features, n_out=run.n_classes)

    cost = classifier.negative_log_likelihood(y)

    # the mistakes of the model on the batch_size examples from `index`:
    # test_model() scores every example of the split once with them and
    # gives the error and how many examples it is over (the classic scored
    # whole minibatches only: --classic-count)
    test_model = run.scoring_function(  # int8store
        inputs=[index],
        outputs=T.neq(classifier.y_pred, y),
        givens={
            x: test_set_x[index: index + batch_size],
            y: test_set_y[index: index + batch_size]
        },
        split=run.test
    )

    validate_model = run.scoring_function(  # int8store
        inputs=[index],
        outputs=T.neq(classifier.y_pred, y),
        givens={
            x: valid_set_x[index: index + batch_size],
            y: valid_set_y[index: index + batch_size]
        },
        split=run.valid
    )

    # gradients of the cost, and the SGD step on each parameter
    g_W = T.grad(cost=cost, wrt=classifier.W)
    g_b = T.grad(cost=cost, wrt=classifier.b)
    updates = [(classifier.W, classifier.W - learning_rate * g_W),
               (classifier.b, classifier.b - learning_rate * g_b)]

    # SGD steps on minibatches of train from `index`: one a call as the
    # classic theano.function, or several (int8store: --steps-per-call)
    train_model = run.training_function(  # int8store
        inputs=[index],
        outputs=cost,
        updates=updates,
        givens={
            x: train_set_x[index * batch_size: (index + 1) * batch_size],
            y: train_set_y[index * batch_size: (index + 1) * batch_size]
        }
    )

    ###############
    # TRAIN MODEL #
    ###############
    print('... training the model')
    patience = 5000  # look at this many minibatches regardless
    patience_increase = 2  # wait this much longer after a new best
    improvement_threshold = 0.995  # a relative improvement this large counts
    validation_frequency = min(n_train_batches, patience // 2)
    # (validate every this many minibatches: here, every epoch)

    best_validation_loss = numpy.inf
    test_score, test_count = 0., 0
    start_time = timeit.default_timer()
    say = run.epoch_lines(n_epochs)  # int8store: the classic's lines, or --progress

    # int8store: a run resumed from its checkpoint goes on where it stopped
    epoch, best_params, done_looping, loop = run.resume(
        'logistic_sgd', classifier.params, learning_rate=learning_rate, patience=patience,
        best_validation_loss=best_validation_loss, test_score=test_score, test_count=test_count)
    patience, best_validation_loss = loop['patience'], loop['best_validation_loss']
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
                    # a significant improvement extends the patience
                    if this_validation_loss < best_validation_loss * improvement_threshold:
                        patience = max(patience, iter * patience_increase)

                    best_validation_loss = this_validation_loss

                    test_score, test_count = test_model()

                    say(epoch, '     epoch %i, minibatch %i/%i, test error of best model '
                        '%f %% over %i examples' % (epoch, minibatch_index + 1,
                                                    n_train_batches, test_score * 100.,
                                                    test_count))

                    # save the best model (the tutorial's own checkpoint:
                    # replaced each time, as the classic did; never half-written)
                    run.save_model(model_path, W=classifier.W.get_value(borrow=True),
                                   b=classifier.b.get_value(borrow=True))
                    best_params = run.best_params(classifier.params)  # int8store

            # int8store: Ctrl-C (or SIGTERM) stops here, after the call under way
            # (its minibatch, or the many a call makes), and the run's checkpoint is
            # written where the loop looked at the model, and at the end
            stop = patience <= iter or run.stop_requested()
            last = epoch == n_epochs and minibatch_index + 1 == n_train_batches
            if stop or last or (iter + 1) % validation_frequency == 0:
                run.save(epoch, minibatch_index, best_params, patience <= iter,
                         patience=patience, best_validation_loss=best_validation_loss,
                         test_score=test_score, test_count=test_count)
            if stop:
                done_looping = True
                break

    run.close()  # int8store: a stream's reading stops
    end_time = timeit.default_timer()
    if run.stop_requested() and best_validation_loss == numpy.inf:  # int8store
        print('Interrupted at epoch %i: no validation was run yet, so there is no best model'
              % epoch)
    elif run.stop_requested():
        print('Interrupted at epoch %i: the best model so far has validation score %f %%, '
              'test performance %f %%' % (epoch, best_validation_loss * 100.,
                                           test_score * 100.))
    else:
        print('Optimization complete with best validation score of %f %%, '
              'with test performance %f %%' % (best_validation_loss * 100., test_score * 100.))
    ran = run.epochs_trained  # int8store: the epochs this process ran (fewer when resumed)
    if ran:
        print('The code run for %d epochs, with %f epochs/sec' % (
            ran, 1. * ran / (end_time - start_time)))
    else:
        print('The run was complete at epoch %i when resumed: no epoch was run' % epoch)
    print('The code for file ' + os.path.split(__file__)[1] +
          ' ran for %.1fs' % (end_time - start_time), file=sys.stderr)
    return run.result(best_validation_loss=float(best_validation_loss),
                      test_score=float(test_score), test_count=test_count, epochs=epoch,
                      seconds=end_time - start_time, train_model=train_model,
                      params=[numpy.array(p.get_value(borrow=True))
                              for p in classifier.params])


def predict(model_path='best_model.npz', dataset='mnist.pkl.gz', count=10, normalize='unit'):
    """
    Load the saved model and predict the labels of the first test examples
    (int8store: the images normalized as the model was trained on them).
    """
    datasets = load_data(dataset, normalize=normalize)
    test_set_x, test_set_y = datasets[2]
    # int8store: what the model's class numbers stand for (the names it was
    # trained on, which the data's must be), if named
    names = training.saved_class_names(model_path, test_set_x.dataset.label_names, dataset)

    # int8store: the model the data calls for (its image size, its classes),
    # and the saved W and b checked against it before they are set
    n_out = training.class_count([y.get_value(borrow=True) for _, y in datasets], dataset)
    classifier = LogisticRegression(input=T.matrix('x'), n_in=test_set_x.dataset.n_features,
                                    n_out=n_out)
    training.load_parameters(model_path, classifier.params)

    # compile a predictor function
    predict_model = theano.function(inputs=[classifier.input], outputs=classifier.y_pred)

    test_set_x = test_set_x.get_value()

    predicted_values = predict_model(test_set_x[:count])
    # int8store: the count shown is the one predicted (a small test split holds fewer)
    print('Predicted values for the first %i examples in test set:' % len(predicted_values))
    print(predicted_values)
    if names is not None:  # int8store
        print('as class names: %s' % [names[label] for label in predicted_values])
    return predicted_values


def main(argv=None):
    """int8store: the command line (training.add_arguments: the same options in every tutorial)."""
    parser = training.OneLineParser(
        description='Logistic regression trained by minibatch SGD on int8-held images.')
    training.add_arguments(parser, epochs=1000, learning_rate=0.13, batch_size=600,
                           save_model='best_model.npz')
    parser.add_argument('--predict', action='store_true',
                        help="predict the first test examples' labels with the saved model "
                             "(--save-model) instead of training")
    args = parser.parse_args(argv)
    if args.predict:
        return training.predict_command(predict, args, program='logistic_sgd',
                                        model_path=args.save_model, dataset=args.dataset,
                                        normalize=args.normalize)
    return training.run_command(sgd_optimization_mnist, args, program='logistic_sgd',
                                learning_rate=args.learning_rate, n_epochs=args.epochs,
                                dataset=args.dataset, batch_size=args.batch_size,
                                model_path=args.save_model)


if __name__ == '__main__':
    sys.exit(main())
