"""This tutorial introduces the LeNet5 neural network architecture
using Aesara: the classic deeplearning.net tutorial (convolutional_mlp.py),
adapted to keep the images as int8 shared variables.

LeNet5 is a convolutional neural network, good for classifying images.
This tutorial shows how to build the architecture, and comes with all
the hyper-parameters you need to reproduce the paper's MNIST results.


This implementation simplifies the model in the following ways:

 - LeNetConvPool doesn't implement location-specific gain and bias parameters
 - LeNetConvPool doesn't implement pooling by average, it implements pooling
   by max.
 - Digit classification is implemented with a logistic regression rather than
   an RBF network
 - LeNet5 was not fully-connected convolutions at second layer

What changed from the classic: the data comes from int8store (int8 images,
each minibatch converted to float32 inside the compiled function), the
architecture adapts to the dataset's image size (the classic 5x5 filters and
2x2 pooling on 28x28; smaller filters on scikit-learn's 8x8 digits, still two
conv/pool layers), and the CPU convolution works out of the box (int8store
configures a BLAS for Aesara and corrects Aesara 2.9.4's CorrMM.make_node).

References:

 - Y. LeCun, L. Bottou, Y. Bengio and P. Haffner:
   Gradient-Based Learning Applied to Document
   Recognition, Proceedings of the IEEE, 86(11):2278-2324, November 1998.
   http://yann.lecun.com/exdb/publis/pdf/lecun-98.pdf

Run ``python tutorials/convolutional_mlp.py --help`` for the options.
"""

import argparse
import os
import sys
import timeit

import numpy

from int8store import Int8StoreError
from int8store.atomic import check_can_write
from int8store import function_mode, keep_on_device
from int8store.backend import FLOAT, aesara, at, conv2d, float_constant, pool_2d

from logistic_sgd import (LogisticRegression, add_data_arguments, load_data, minibatch_givens,
                          n_classes, report, save_params)
from mlp import HiddenLayer


class LeNetConvPoolLayer(object):
    """Pool Layer of a convolutional network """

    def __init__(self, rng, input, filter_shape, image_shape, poolsize=(2, 2)):
        """
        Allocate a LeNetConvPoolLayer with shared variable internal parameters.

        :type rng: numpy.random.RandomState
        :param rng: a random number generator used to initialize weights

        :type input: aesara.tensor.TensorType
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
        self.W = aesara.shared(
            numpy.asarray(
                rng.uniform(low=-W_bound, high=W_bound, size=filter_shape),
                dtype=FLOAT
            ),
            borrow=True,
            shape=filter_shape  # static shapes: JAX mode traces the graph
        )

        # the bias is a 1D tensor -- one bias per output feature map
        b_values = numpy.zeros((filter_shape[0],), dtype=FLOAT)
        self.b = aesara.shared(value=b_values, borrow=True, shape=b_values.shape)

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
        self.output = at.tanh(pooled_out + self.b.dimshuffle('x', 0, 'x', 'x'))

        # store parameters of this layer
        self.params = [self.W, self.b]

        # keep track of model input
        self.input = input


def filter_size(size, largest=5):
    """The largest filter (up to ``largest``) whose valid convolution of
    ``size`` pixels leaves an even count of at least 2, for 2x2 pooling."""
    for f in range(min(largest, size), 0, -1):
        if (size - f + 1) % 2 == 0:
            return f
    raise Int8StoreError(
        f"images of {size} pixels are too small for a convolution and a 2x2 pooling")


def lenet5_geometry(image_shape):
    """Channels, and the (filter rows, filter cols) and output size of each
    conv/pool layer: 5x5 filters on 28x28 as in the classic, smaller ones
    (3x3 then 2x2) on 8x8 digits, always two conv/pool layers."""
    rows, cols = image_shape[:2]
    channels = image_shape[2] if len(image_shape) == 3 else 1
    layers = []
    for largest in (5 if min(rows, cols) >= 20 else 3, 5):
        f_rows, f_cols = filter_size(rows, largest), filter_size(cols, largest)
        rows, cols = (rows - f_rows + 1) // 2, (cols - f_cols + 1) // 2
        layers.append(((f_rows, f_cols), (rows, cols)))
    return channels, layers


def as_feature_maps(x, image_shape, batch_size):
    """The minibatch of flat images as (batch, channels, rows, cols)."""
    if len(image_shape) == 3:  # stored (rows, cols, channels): move channels first
        return x.reshape((batch_size,) + tuple(image_shape)).dimshuffle(0, 3, 1, 2)
    return x.reshape((batch_size, 1) + tuple(image_shape))


def build_lenet5(splits, batch_size, learning_rate=0.1, nkerns=[20, 50], rng=None, mode='c'):
    """The parameters and the compiled train / validate / test functions,
    compiled for ``mode`` ('c' or 'jax')."""
    rng = rng or numpy.random.RandomState(23455)
    compile_mode = function_mode(mode)
    train_set, valid_set, test_set = splits['train'], splits['valid'], splits['test']
    image_shape = train_set.image_shape
    channels, ((filter0, size0), (filter1, size1)) = lenet5_geometry(image_shape)

    # allocate symbolic variables for the data
    index = at.lscalar()  # index to a [mini]batch

    # start-snippet-1
    # the data is presented as rasterized images, the labels as a 1D vector
    # of [int] labels (static shapes let JAX mode trace the graph)
    x = at.TensorType(FLOAT, shape=(batch_size, train_set.n_features))('x')
    y = at.TensorType('int32', shape=(batch_size,))('y')

    # Reshape matrix of rasterized images of shape (batch_size, 28 * 28)
    # to a 4D tensor, compatible with our LeNetConvPoolLayer
    # (28, 28) is the size of MNIST images.
    layer0_input = as_feature_maps(x, image_shape, batch_size)

    # Construct the first convolutional pooling layer:
    # filtering reduces the image size to (28-5+1 , 28-5+1) = (24, 24)
    # maxpooling reduces this further to (24/2, 24/2) = (12, 12)
    # 4D output tensor is thus of shape (batch_size, nkerns[0], 12, 12)
    layer0 = LeNetConvPoolLayer(
        rng,
        input=layer0_input,
        image_shape=(batch_size, channels) + tuple(image_shape[:2]),
        filter_shape=(nkerns[0], channels) + filter0,
        poolsize=(2, 2)
    )

    # Construct the second convolutional pooling layer
    # filtering reduces the image size to (12-5+1, 12-5+1) = (8, 8)
    # maxpooling reduces this further to (8/2, 8/2) = (4, 4)
    # 4D output tensor is thus of shape (batch_size, nkerns[1], 4, 4)
    layer1 = LeNetConvPoolLayer(
        rng,
        input=layer0.output,
        image_shape=(batch_size, nkerns[0]) + size0,
        filter_shape=(nkerns[1], nkerns[0]) + filter1,
        poolsize=(2, 2)
    )

    # the HiddenLayer being fully-connected, it operates on 2D matrices of
    # shape (batch_size, num_pixels) (i.e matrix of rasterized images).
    # This will generate a matrix of shape (batch_size, nkerns[1] * 4 * 4),
    # or (500, 50 * 4 * 4) = (500, 800) with the default values.
    layer2_input = layer1.output.flatten(2)

    # construct a fully-connected sigmoidal layer
    layer2 = HiddenLayer(
        rng,
        input=layer2_input,
        n_in=nkerns[1] * size1[0] * size1[1],
        n_out=500,
        activation=at.tanh
    )

    # classify the values of the fully-connected sigmoidal layer
    layer3 = LogisticRegression(input=layer2.output, n_in=500, n_out=n_classes(splits))

    # the cost we minimize during training is the NLL of the model
    cost = layer3.negative_log_likelihood(y)

    # create a function to compute the mistakes that are made by the model
    test_model = aesara.function(
        [index],
        layer3.errors(y),
        givens=minibatch_givens(x, y, test_set, index, batch_size),
        mode=compile_mode
    )

    validate_model = aesara.function(
        [index],
        layer3.errors(y),
        givens=minibatch_givens(x, y, valid_set, index, batch_size),
        mode=compile_mode
    )

    # create a list of all model parameters to be fit by gradient descent
    params = layer3.params + layer2.params + layer1.params + layer0.params

    # create a list of gradients for all model parameters
    grads = at.grad(cost, params)

    # train_model is a function that updates the model parameters by
    # SGD Since this model has many parameters, it would be tedious to
    # manually create an update rule for each model parameter. We thus
    # create the updates list by automatically looping over all
    # (params[i], grads[i]) pairs.
    rate = float_constant(learning_rate)
    updates = [
        (param_i, param_i - rate * grad_i)
        for param_i, grad_i in zip(params, grads)
    ]

    train_model = aesara.function(
        [index],
        cost,
        updates=updates,
        givens=minibatch_givens(x, y, train_set, index, batch_size),
        mode=compile_mode
    )
    # end-snippet-1
    return params, train_model, validate_model, test_model


def evaluate_lenet5(learning_rate=0.1, n_epochs=200,
                    dataset='mnist.pkl.gz',
                    nkerns=[20, 50], batch_size=500, storage='int8',
                    normalize='unit', model_path=None, mode='c'):
    """ Demonstrates lenet on MNIST dataset

    :type learning_rate: float
    :param learning_rate: learning rate used (factor for the stochastic
                          gradient)

    :type n_epochs: int
    :param n_epochs: maximal number of epochs to run the optimizer

    :type dataset: string
    :param dataset: what int8store.load_data accepts ('digits', 'mnist',
                 the path of mnist.pkl.gz, ...)

    :type nkerns: list of ints
    :param nkerns: number of kernels on each layer

    :type storage: string
    :param storage: 'int8' (this library) or 'float32' (the classic way)

    :type mode: string
    :param mode: 'c' (Aesara's C backend) or 'jax' (JAX's default device)

    Returns a dict with the best validation error, its iteration, the test
    error of the best model, the epochs run, the seconds taken, the final
    parameters, the splits and the compiled training function.
    """

    rng = numpy.random.RandomState(23455)

    splits, batch_size = load_data(dataset, storage, normalize, batch_size, mode)
    train_set, valid_set, test_set = splits['train'], splits['valid'], splits['test']

    # compute number of minibatches for training, validation and testing
    # (from the labels: the images are a symbolic view)
    n_train_batches = train_set.y.get_value(borrow=True).shape[0]
    n_valid_batches = valid_set.y.get_value(borrow=True).shape[0]
    n_test_batches = test_set.y.get_value(borrow=True).shape[0]
    n_train_batches //= batch_size
    n_valid_batches //= batch_size
    n_test_batches //= batch_size

    ######################
    # BUILD ACTUAL MODEL #
    ######################
    print('... building the model')
    params, train_model, validate_model, test_model = build_lenet5(
        splits, batch_size, learning_rate, nkerns, rng, mode)
    if mode == 'jax':
        # keep the parameters' updates on the device too, instead of copying
        # them back to numpy after every step
        keep_on_device(params, [train_model, validate_model, test_model])

    ###############
    # TRAIN MODEL #
    ###############
    print('... training')
    # early-stopping parameters
    patience = 10000  # look as this many examples regardless
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
    best_iter = 0
    test_score = 0.
    start_time = timeit.default_timer()

    epoch = 0
    done_looping = False

    while (epoch < n_epochs) and (not done_looping):
        epoch = epoch + 1
        for minibatch_index in range(n_train_batches):

            iter = (epoch - 1) * n_train_batches + minibatch_index

            if iter % 100 == 0:
                print('training @ iter = ', iter)
            cost_ij = train_model(minibatch_index)

            if (iter + 1) % validation_frequency == 0:

                # compute zero-one loss on validation set
                validation_losses = [validate_model(i) for i
                                     in range(n_valid_batches)]
                this_validation_loss = numpy.mean(validation_losses)
                print('epoch %i, minibatch %i/%i, validation error %f %%' %
                      (epoch, minibatch_index + 1, n_train_batches,
                       this_validation_loss * 100.))

                # if we got the best validation score until now
                if this_validation_loss < best_validation_loss:

                    #improve patience if loss improvement is good enough
                    if this_validation_loss < best_validation_loss *  \
                       improvement_threshold:
                        patience = max(patience, iter * patience_increase)

                    # save best validation score and iteration number
                    best_validation_loss = this_validation_loss
                    best_iter = iter

                    # test it on the test set
                    test_losses = [
                        test_model(i)
                        for i in range(n_test_batches)
                    ]
                    test_score = numpy.mean(test_losses)
                    print(('     epoch %i, minibatch %i/%i, test error of '
                           'best model %f %%') %
                          (epoch, minibatch_index + 1, n_train_batches,
                           test_score * 100.))

                    # save the best model
                    if model_path:
                        save_params(params, model_path)

            if patience <= iter:
                done_looping = True
                break

    end_time = timeit.default_timer()
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
        'epochs': epoch,
        'seconds': end_time - start_time,
        'params': [numpy.asarray(p.get_value()) for p in params],
        'splits': splits,
        'train_model': train_model,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(
        description='LeNet5 (two conv/pool layers, a tanh hidden layer, logistic '
                    'regression) trained by minibatch SGD on int8-held images.')
    add_data_arguments(parser, batch_size=500, model_path=None)
    parser.add_argument('--epochs', type=int, default=200,
                        help='maximal number of epochs (default: %(default)s)')
    parser.add_argument('--learning-rate', type=float, default=0.1,
                        help='SGD step (default: %(default)s)')
    parser.add_argument('--nkerns', type=int, nargs=2, default=[20, 50], metavar='N',
                        help='kernels of the two conv layers (default: 20 50)')
    args = parser.parse_args(argv)
    try:
        if args.save_model:
            check_can_write(args.save_model, args.force)
        result = evaluate_lenet5(
            learning_rate=args.learning_rate, n_epochs=args.epochs, dataset=args.dataset,
            nkerns=args.nkerns, batch_size=args.batch_size, storage=args.storage,
            normalize=args.normalize, model_path=args.save_model, mode=args.mode)
    except Int8StoreError as error:
        print('error: %s' % error, file=sys.stderr)
        return 2
    report(result, result['splits'], args.storage)
    return 0


if __name__ == '__main__':
    sys.exit(main())
