"""LeNet5, a convolutional network for images: the classic deeplearning.net
tutorial (convolutional_mlp.py), on PyTensor or Aesara, with its data held as int8.

Two convolution + max-pooling layers with tanh units, a fully connected tanh
layer, and logistic regression on top. Simplified from LeCun et al. (1998) as
the classic was: max pooling without trainable gain and bias, every feature
map of one layer connected to every map of the next, and a logistic
regression in place of the RBF output layer.

As in logistic_sgd.py, the one change from the classic file is where
``load_data`` comes from: ``from int8store import load_data`` (through
logistic_sgd, as the classic imported it). Two additions: the filter sizes
follow the images' size (the classic 5x5 filters and 2x2 pooling on 28x28,
smaller filters on scikit-learn's 8x8 digits), and the lines marked
"int8store's JAX mode" run it on JAX's device. The library and its
convolution come through int8store: on Aesara its own conv2d and pool_2d
(int8store gives Aesara a BLAS and corrects Aesara 2.9.4's CorrMM.make_node),
on PyTensor, which has neither, int8store's ops with the same semantics.

Reference: Y. LeCun, L. Bottou, Y. Bengio and P. Haffner, Gradient-Based
Learning Applied to Document Recognition, Proceedings of the IEEE,
86(11):2278-2324, November 1998.

Run ``python tutorials/convolutional_mlp.py --help`` for the options.
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

# Theano's conv2d and pool_2d: Aesara's own, or int8store's ops on PyTensor (which has none).
from int8store import conv2d, pool_2d

from logistic_sgd import (LogisticRegression, add_data_options, add_device_options,
                          add_augment_options, add_normalize_option, add_progress_option,
                          add_jax_run_options, add_run_options, add_steps_option, report_timings,
                          resume_point, run_checkpoint, set_up_jax_run,
                          save_run, augmented_training_set, join_processes, load_data,
                          load_for_training, model_looked_at, run_from_command_line,
                          trained_minibatches, training_steps)
from mlp import HiddenLayer

import int8store  # int8store's JAX mode only (--mode jax)
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
                    nkerns=[20, 50], batch_size=500, model_path=None, mode='c',
                    classic_count=False, max_device_bytes=None, seed=None, max_memory=None,
                    progress=False, devices=None, steps_per_call=None, augment=None,
                    augment_seed=1, normalize='unit', checkpoint=None, resume=None):
    """ Train LeNet5 by minibatch SGD with early stopping.

    :param learning_rate: SGD step
    :param n_epochs: maximal number of epochs
    :param dataset: what ``int8store.load_data`` reads: 'mnist.pkl.gz' (the
                    classic file), 'digits' (offline), a store, ...
    :param nkerns: number of kernels of each convolutional layer
    :param batch_size: examples per minibatch
    :param model_path: where the best model's parameters are saved (.npz),
                       replaced at each improvement; None saves nothing
    :param mode: 'c' (the library's C backend) or 'jax' (int8store's JAX mode)
    :param classic_count: score whole minibatches of the validation and test
                          splits only, as the classic did (else every example)
    :param max_device_bytes, seed, max_memory: streaming, as in
                             logistic_sgd.sgd_optimization_mnist
    :param progress, devices, steps_per_call: condense the per-epoch lines;
                     JAX mode over several devices; several updates a call;
                     as in logistic_sgd.sgd_optimization_mnist
    :param augment, augment_seed: the training minibatches augmented inside
                     the step ('translate=2,cutout=8'; see
                     logistic_sgd.augmented_training_set), draws keyed by the seed
    :param normalize: how the float view is normalized ('standard': each
                      channel centred and divided by its standard deviation)
    :param checkpoint, resume: the run's checkpoint, and one to go on from
                      (logistic_sgd.run_checkpoint)

    Returns a dict with the best validation error, its iteration, the test
    error of the best model and how many examples it is over, the epochs run
    and the final parameters.
    """
    rng = numpy.random.RandomState(23455)

    # -- int8store: the splits, in memory or streamed, and the batch counts
    # (logistic_sgd.load_for_training)
    datasets, streams, batch_size, (n_train_batches, valid_split, test_split, n_out) = \
        load_for_training(dataset, batch_size, mode, max_device_bytes, seed, max_memory,
                          devices, normalize)
    train_set_x, train_set_y = datasets[0]
    valid_set_x, valid_set_y = datasets[1]
    test_set_x, test_set_y = datasets[2]
    compile_mode = int8store.function_mode(mode)
    # -- int8store: training minibatches augmented from their int8 codes
    # (evaluation reads the splits as they are; without augment, the same view)
    train_set_x = augmented_training_set(train_set_x, augment, augment_seed, dataset)

    ######################
    # BUILD ACTUAL MODEL #
    ######################
    print('... building the model')

    index = T.lscalar()  # index to a [mini]batch
    x = T.matrix('x')   # the images, one flattened image per row
    y = T.ivector('y')  # their labels

    image_shape = train_set_x.dataset.image_shape  # (28, 28) for MNIST
    channels, ((filter0, size0), (filter1, size1)) = lenet5_geometry(image_shape)

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

    layer3 = LogisticRegression(input=layer2.output, n_in=500, n_out=n_out)

    cost = layer3.negative_log_likelihood(y)

    # the zero-one loss of each of the batch_size examples from `start`:
    # int8store.scoring_function scores every example of a split once with
    # them, in chunks the model was built for, test_model() giving the error
    # and how many examples it is over (in JAX mode in one call; the classic
    # scored whole minibatches only: classic_count)
    start = T.lscalar()
    test_model = int8store.scoring_function(
        [start],
        T.neq(layer3.y_pred, y),
        givens={
            x: test_set_x[start: start + batch_size],
            y: test_set_y[start: start + batch_size]
        },
        split=test_split, chunk_size=batch_size, classic_count=classic_count, mode=mode
    )

    validate_model = int8store.scoring_function(
        [start],
        T.neq(layer3.y_pred, y),
        givens={
            x: valid_set_x[start: start + batch_size],
            y: valid_set_y[start: start + batch_size]
        },
        split=valid_split, chunk_size=batch_size, classic_count=classic_count, mode=mode
    )

    # every parameter, and an SGD step on each
    params = layer3.params + layer2.params + layer1.params + layer0.params
    # -- int8store: a run stopped anywhere goes on from its checkpoint
    # (logistic_sgd.run_checkpoint): the parameters are set here
    run, resumed = run_checkpoint('convolutional_mlp', checkpoint, resume,
                                  streams or [x.dataset for x, _ in datasets], params, batch_size,
                                  seed, augment, augment_seed, loop=(
                                      'patience', 'best_validation_loss', 'best_iter',
                                      'test_score', 'test_count'))
    grads = T.grad(cost, params)
    updates = [
        (param_i, param_i - learning_rate * grad_i)
        for param_i, grad_i in zip(params, grads)
    ]

    train_givens = {
        x: train_set_x[index * batch_size: (index + 1) * batch_size],
        y: train_set_y[index * batch_size: (index + 1) * batch_size]
    }
    train_model = theano.function(
        [index],
        cost,
        updates=updates,
        givens=train_givens,
        mode=compile_mode
    )
    # -- int8store: several of those steps a call (logistic_sgd.training_steps)
    train_steps = training_steps(index, cost, updates, train_givens, steps_per_call, mode,
                                 streams[0] if streams else train_set_x.dataset, batch_size)

    # -- int8store's JAX mode: the parameters' updates stay on the device
    if mode == 'jax':
        int8store.keep_on_device(params, [train_model], devices=devices)

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

            if iter % 100 == 0:
                epoch_lines(epoch, 'training @ iter =  %i' % iter)

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
                    epoch_lines(epoch, ('     epoch %i, minibatch %i/%i, test error of '
                                        'best model %f %% over %i examples') %
                                (epoch, minibatch_index + 1, n_train_batches,
                                 test_score * 100., test_count))

                    # the tutorial's own checkpoint, replaced at each improvement
                    # (never half-written)
                    if model_path and int8store.is_main_process():  # (one of several)
                        int8store.save_checkpoint(model_path,
                                                  *[p.get_value(borrow=True) for p in params])
                    if run is not None:  # -- int8store: the best model, for the run's checkpoint
                        best_params = [numpy.array(p.get_value(borrow=True)) for p in params]

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
        print('Interrupted at epoch %i, minibatch %i/%i: the best model so far is below.'
              % (epoch, minibatch_index + 1, n_train_batches))
    else:
        print('Optimization complete.')
    print('Best validation score of %f %% obtained at iteration %i, '
          'with test performance %f %%' %
          (best_validation_loss * 100., best_iter + 1, test_score * 100.))
    print(('The code for file ' +
           os.path.split(__file__)[1] +
           ' ran for %.2fm' % ((end_time - start_time) / 60.)), file=sys.stderr)
    return {
        'best_validation_loss': float(best_validation_loss),
        'best_iter': best_iter + 1,
        'test_score': float(test_score),
        'test_count': test_count,
        'epochs': epoch,
        'seconds': end_time - start_time,
        'scoring_seconds': validate_model.seconds + test_model.seconds,
        'scoring_calls': validate_model.calls + test_model.calls,
        'params': [numpy.array(p.get_value(borrow=True)) for p in params],
        'datasets': streams or datasets,
        'train_model': train_model,
        'interrupted': bool(interrupted),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(
        description='LeNet5 (two conv/pool layers, a tanh hidden layer, logistic '
                    'regression) trained by minibatch SGD on int8-held images.')
    parser.add_argument('--dataset', default='mnist.pkl.gz',
                        help="what int8store.load_data reads: 'mnist.pkl.gz' (here, ../data/, "
                             "the cache, or downloaded), 'digits' (offline), 'mnist', an .npz, "
                             "an int8store .h5 store, a folder of IDX files or of class folders "
                             "of images (default: %(default)s)")
    parser.add_argument('--epochs', type=int, default=200,
                        help='maximal number of epochs (default: %(default)s)')
    parser.add_argument('--learning-rate', type=float, default=0.1,
                        help='SGD step (default: %(default)s)')
    parser.add_argument('--batch-size', type=int, default=500,
                        help='minibatch size (default: %(default)s)')
    parser.add_argument('--nkerns', type=int, nargs=2, default=[20, 50], metavar='N',
                        help='kernels of the two conv layers (default: 20 50)')
    add_data_options(parser)
    parser.add_argument('--save-model', metavar='PATH',
                        help="where the best model's parameters go (.npz), replaced at each "
                             "improvement (default: not saved)")
    add_device_options(parser)
    add_steps_option(parser)
    add_augment_options(parser)
    add_normalize_option(parser)
    add_run_options(parser)
    add_progress_option(parser)
    add_jax_run_options(parser)
    args = parser.parse_args(argv)
    join_processes(args)
    setup = set_up_jax_run(args)
    result, status = run_from_command_line(
        evaluate_lenet5, steps_per_call=args.steps_per_call, learning_rate=args.learning_rate, n_epochs=args.epochs,
        dataset=args.dataset, nkerns=args.nkerns, batch_size=args.batch_size,
        model_path=args.save_model, mode=args.mode, classic_count=args.classic_count,
        max_device_bytes=args.max_device_bytes, seed=args.seed, max_memory=args.max_memory,
        progress=args.progress, devices=args.devices, augment=args.augment,
        augment_seed=args.augment_seed, normalize=args.normalize, checkpoint=args.checkpoint,
        resume=args.resume)
    if result is None:
        return status
    print()
    if result['interrupted']:
        print('interrupted: the figures below are the best model so far')
    print('best validation error  %f %%' % (result['best_validation_loss'] * 100.))
    print('test error             %f %% over %i examples'
          % (result['test_score'] * 100., result['test_count']))
    print('best iteration         %i' % result['best_iter'])
    print('epochs                 %i' % result['epochs'])
    print()
    print('Images in memory, as int8 against the classic float32:')
    print(int8store.memory_table(result['datasets']))
    if args.timings:
        report_timings(result, setup)
    return status  # 0, or 130 (SIGINT) / 143 (SIGTERM) when interrupted


if __name__ == '__main__':
    sys.exit(main())
