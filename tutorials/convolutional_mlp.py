"""LeNet5, a convolutional network for images: the classic deeplearning.net
tutorial (convolutional_mlp.py), on PyTensor or Aesara, with its data held as int8.

Two convolution + max-pooling layers with tanh units, a fully connected tanh
layer, and logistic regression on top. Simplified from LeCun et al. (1998) as
the classic was: max pooling without trainable gain and bias, every feature
map of one layer connected to every map of the next, and a logistic
regression in place of the RBF output layer.

As in logistic_sgd.py: the classic file with ``from int8store import
load_data`` (through logistic_sgd, as the classic imported it) and a
``run`` (``int8store.training.Run``) for what int8store adds, the lines
marked ``# int8store``; and the filter sizes follow the images' size (the
classic 5x5 filters and 2x2 pooling on 28x28, smaller filters on
scikit-learn's 8x8 digits). The library and its
convolution come through int8store: on Aesara its own conv2d and pool_2d
(int8store gives Aesara a BLAS and corrects Aesara 2.9.4's CorrMM.make_node),
on PyTensor, which has neither, int8store's ops with the same semantics.

Reference: Y. LeCun, L. Bottou, Y. Bengio and P. Haffner, Gradient-Based
Learning Applied to Document Recognition, Proceedings of the IEEE,
86(11):2278-2324, November 1998.

Run ``python tutorials/convolutional_mlp.py --help`` for the options.
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

# Theano's conv2d and pool_2d: Aesara's own, or int8store's ops on PyTensor (which has none).
from int8store.nnet import conv2d, pool_2d

from logistic_sgd import LogisticRegression, load_data  # noqa: F401 (the classic's imports)
from mlp import HiddenLayer

from int8store import ArgumentError, training  # int8store: a run's options, calls, checkpoints
from int8store.memory.models import lenet5_geometry  # 5x5 filters on 28x28, smaller on 8x8 digits


class LeNetConvPoolLayer(object):
    """Pool Layer of a convolutional network """

    def __init__(self, rng, input, filter_shape, image_shape, poolsize=(2, 2)):
        """
        Allocate a LeNetConvPoolLayer with shared variable internal parameters.

        :type rng: numpy.random.RandomState
        :param rng: a random number generator used to initialize weights

        :type input: theano.tensor.TensorType
        :param input: symbolic image tensor, of shape image_shape

        :type filter_shape: tuple or list of length 4
        :param filter_shape: (number of filters, num input feature maps,
                              filter height, filter width)

        :type image_shape: tuple or list of length 4
        :param image_shape: (batch size, num input feature maps,
                             image height, image width)

        :type poolsize: tuple or list of length 2
        :param poolsize: the downsampling (pooling) factor (#rows, #cols)
        """

        assert image_shape[1] == filter_shape[1]
        self.input = input

        # there are "num input feature maps * filter height * filter width"
        # inputs to each hidden unit
        fan_in = numpy.prod(filter_shape[1:])
        # each unit in the lower layer receives a gradient from:
        # "num output feature maps * filter height * filter width" /
        #   pooling size
        fan_out = (filter_shape[0] * numpy.prod(filter_shape[2:]) //
                   numpy.prod(poolsize))
        # initialize weights with random weights
        W_bound = numpy.sqrt(6. / (fan_in + fan_out))
        self.W = theano.shared(
            numpy.asarray(
                rng.uniform(low=-W_bound, high=W_bound, size=filter_shape),
                dtype=theano.config.floatX
            ),
            borrow=True,
            shape=filter_shape  # static shapes: JAX mode traces the graph
        )

        # the bias is a 1D tensor -- one bias per output feature map
        b_values = numpy.zeros((filter_shape[0],), dtype=theano.config.floatX)
        self.b = theano.shared(value=b_values, borrow=True, shape=b_values.shape)

        # convolve input feature maps with filters
        conv_out = conv2d(
            input=input,
            filters=self.W,
            filter_shape=filter_shape,
            input_shape=image_shape
        )

        # pool each feature map individually, using maxpooling
        pooled_out = pool_2d(
            input=conv_out,
            ws=poolsize,
            ignore_border=True
        )

        # add the bias term. Since the bias is a vector (1D array), we first
        # reshape it to a tensor of shape (1, n_filters, 1, 1). Each bias will
        # thus be broadcasted across mini-batches and feature map
        # width & height
        self.output = T.tanh(pooled_out + self.b.dimshuffle('x', 0, 'x', 'x'))

        # store parameters of this layer
        self.params = [self.W, self.b]

        # keep track of model input
        self.input = input


def evaluate_lenet5(learning_rate=0.1, n_epochs=200,
                    dataset='mnist.pkl.gz',
                    nkerns=[20, 50], batch_size=500, model_path=None, **options):
    """ Train LeNet5 by minibatch SGD with early stopping.

    :param learning_rate: SGD step
    :param n_epochs: maximal number of epochs
    :param dataset: what ``int8store.load_data`` reads: 'mnist.pkl.gz' (the
                    classic file), 'digits' (offline), a store, ...
    :param nkerns: number of kernels of each convolutional layer
    :param batch_size: examples per minibatch
    :param model_path: where the best model's parameters are saved (.npz),
                       replaced at each improvement; None saves nothing
    :param options: int8store's run (``int8store.training.Run``), as in
                    logistic_sgd.sgd_optimization_mnist; augment (e.g.
                    'translate=2,cutout=8') augments the training minibatches
                    inside the step, from their int8 codes

    Returns a dict with the best validation error, its iteration, the test
    error of the best model and how many examples it is over, the epochs run
    and the final parameters.
    """
    if min(nkerns) < 1:  # int8store: none trains at chance, fewer fail in numpy
        raise ArgumentError('--nkerns %s: expected 1 or more kernels in each layer'
                            % ' '.join(map(str, nkerns)))
    rng = numpy.random.RandomState(23455)

    run = training.Run(**options)  # int8store
    datasets = run.load_data(dataset, batch_size)  # int8store: held whole, over devices or streamed
    batch_size = run.batch_size  # int8store: what every split (or shard) fills

    train_set_x, train_set_y = datasets[0]
    valid_set_x, valid_set_y = datasets[1]
    test_set_x, test_set_y = datasets[2]

    n_train_batches = run.n_batches()  # int8store (classic: from train_set_x's shape)

    ######################
    # BUILD ACTUAL MODEL #
    ######################
    print('... building the model')

    index = T.lscalar()  # index to a [mini]batch
    x = T.matrix('x')   # the images, one flattened image per row
    y = T.ivector('y')  # their labels

    image_shape = train_set_x.dataset.image_shape  # (28, 28) for MNIST
    # (images too small for two conv/pool layers are refused, naming the dataset)
    channels, ((filter0, size0), (filter1, size1)) = lenet5_geometry(image_shape, dataset)

    # the minibatch as (batch, channels, rows, columns) feature maps
    if len(image_shape) == 3:  # colour images are stored (rows, cols, channels)
        layer0_input = x.reshape((batch_size,) + tuple(image_shape)).dimshuffle(0, 3, 1, 2)
    else:
        layer0_input = x.reshape((batch_size, 1) + tuple(image_shape))

    # first convolution + pooling: on MNIST, 28x28 -> 24x24 -> 12x12
    layer0 = LeNetConvPoolLayer(
        rng,
        input=layer0_input,
        image_shape=(batch_size, channels) + tuple(image_shape[:2]),
        filter_shape=(nkerns[0], channels) + filter0,
        poolsize=(2, 2)
    )

    # second convolution + pooling: on MNIST, 12x12 -> 8x8 -> 4x4
    layer1 = LeNetConvPoolLayer(
        rng,
        input=layer0.output,
        image_shape=(batch_size, nkerns[0]) + size0,
        filter_shape=(nkerns[1], nkerns[0]) + filter1,
        poolsize=(2, 2)
    )

    # the fully connected layer takes the feature maps flattened:
    # (batch_size, nkerns[1] * 4 * 4) on MNIST
    layer2 = HiddenLayer(
        rng,
        input=layer1.output.flatten(2),
        n_in=nkerns[1] * size1[0] * size1[1],
        n_out=500,
        activation=T.tanh
    )

    layer3 = LogisticRegression(input=layer2.output, n_in=500, n_out=run.n_classes)

    cost = layer3.negative_log_likelihood(y)

    # the mistakes on the batch_size examples from `index`, in chunks the
    # model was built for: test_model() scores every example of the split
    # once (see logistic_sgd.py)
    test_model = run.scoring_function(  # int8store
        [index],
        T.neq(layer3.y_pred, y),
        givens={
            x: test_set_x[index: index + batch_size],
            y: test_set_y[index: index + batch_size]
        },
        split=run.test
    )

    validate_model = run.scoring_function(  # int8store
        [index],
        T.neq(layer3.y_pred, y),
        givens={
            x: valid_set_x[index: index + batch_size],
            y: valid_set_y[index: index + batch_size]
        },
        split=run.valid
    )

    # every parameter, and an SGD step on each
    params = layer3.params + layer2.params + layer1.params + layer0.params
    grads = T.grad(cost, params)
    updates = [
        (param_i, param_i - learning_rate * grad_i)
        for param_i, grad_i in zip(params, grads)
    ]

    train_model = run.training_function(  # int8store: one step a call, or several
        [index],
        cost,
        updates=updates,
        givens={
            x: train_set_x[index * batch_size: (index + 1) * batch_size],
            y: train_set_y[index * batch_size: (index + 1) * batch_size]
        }
    )

    ###############
    # TRAIN MODEL #
    ###############
    print('... training')
    patience = 10000  # look at this many minibatches regardless
    patience_increase = 2  # wait this much longer after a new best
    improvement_threshold = 0.995  # a relative improvement this large counts
    validation_frequency = min(n_train_batches, patience // 2)

    best_validation_loss = numpy.inf
    best_iter = 0
    test_score, test_count = 0., 0
    start_time = timeit.default_timer()
    say = run.epoch_lines(n_epochs)  # int8store: the classic's lines, or --progress

    # int8store: a run resumed from its checkpoint goes on where it stopped
    epoch, best_params, done_looping, loop = run.resume(
        'convolutional_mlp', params, learning_rate=learning_rate, patience=patience,
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

            if iter % 100 == 0:
                say(epoch, 'training @ iter =  %i' % iter)

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
                    say(epoch, ('     epoch %i, minibatch %i/%i, test error of '
                                'best model %f %% over %i examples') %
                        (epoch, minibatch_index + 1, n_train_batches,
                         test_score * 100., test_count))

                    # the tutorial's own checkpoint, replaced at each improvement
                    # (never half-written)
                    run.save_model(model_path, *[p.get_value(borrow=True) for p in params])
                    best_params = run.best_params(params)  # int8store

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
    validated = best_validation_loss < numpy.inf  # int8store: not when stopped before
    if run.stop_requested() and not validated:
        print('Interrupted at epoch %i: no validation was run yet, so there is no best model.'
              % epoch)
    elif run.stop_requested():
        print('Interrupted at epoch %i: the best model so far is below.' % epoch)
    else:
        print('Optimization complete.')
    if validated:
        print('Best validation score of %f %% obtained at iteration %i, '
              'with test performance %f %%' %
              (best_validation_loss * 100., best_iter + 1, test_score * 100.))
    print(('The code for file ' +
           os.path.split(__file__)[1] +
           ' ran for %.2fm' % ((end_time - start_time) / 60.)), file=sys.stderr)
    return run.result(best_validation_loss=float(best_validation_loss), best_iter=best_iter + 1,
                      test_score=float(test_score), test_count=test_count, epochs=epoch,
                      seconds=end_time - start_time, train_model=train_model,
                      params=[numpy.array(p.get_value(borrow=True)) for p in params])


def main(argv=None):
    """int8store: the command line (training.add_arguments: the same options in every tutorial)."""
    parser = training.OneLineParser(
        description='LeNet5 (two conv/pool layers, a tanh hidden layer, logistic '
                    'regression) trained by minibatch SGD on int8-held images.')
    training.add_arguments(parser, epochs=200, learning_rate=0.1, batch_size=500)
    parser.add_argument('--nkerns', type=int, nargs=2, default=[20, 50], metavar='N',
                        help='kernels of the two conv layers (default: 20 50)')
    args = parser.parse_args(argv)
    return training.run_command(evaluate_lenet5, args, program='convolutional_mlp',
                                learning_rate=args.learning_rate, n_epochs=args.epochs,
                                dataset=args.dataset, nkerns=args.nkerns,
                                batch_size=args.batch_size, model_path=args.save_model)


if __name__ == '__main__':
    sys.exit(main())
