"""
Logistic regression trained by minibatch stochastic gradient descent: the
classic deeplearning.net tutorial (logistic_sgd.py), on PyTensor or Aesara, with its data
held as int8.

The model is a weight matrix W and a bias vector b: the probability of class i
for an input x is softmax_i(x W + b), and the prediction is the most probable
class. Training minimises the mean negative log-likelihood of a minibatch,
with early stopping on the validation error.

The one change from the classic file: its ``load_data`` definition is gone,
replaced by ``from int8store import load_data``. The images then sit in memory
as int8 (a quarter of float32's bytes) and each minibatch is widened to
``floatX`` inside the compiled function; everything else below is the classic
code. The lines marked "int8store's JAX mode" are what ``--mode jax`` adds.

Run ``python tutorials/logistic_sgd.py --help`` for the options; with no
options it trains on ``mnist.pkl.gz`` (looked for here, then in ../data/, then
in int8store's cache, downloaded if missing).
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

from int8store import load_data

import int8store  # int8store's JAX mode only (--mode jax)


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


def load_for_training(dataset, batch_size, mode='c', max_device_bytes=None, seed=None,
                      max_memory=None, devices=None, normalize='unit'):
    """
    int8store's additions to the classic loading, shared by the tutorials.

    With max_device_bytes, or a store larger than memory, the splits go to
    the device shard by shard (int8store.load_streams: read from the file
    for a store, ahead of use by background threads), and only the shards
    in flight are in memory; otherwise load_data holds them whole (in JAX
    mode, placed on JAX's device once; with devices, each split's rows
    spread over that many devices, row r on device r % N, each slicing its
    own part of every minibatch, the same minibatches as on one device:
    int8store.place(..., devices=N)).

    Returns the classic [(x, y)] * 3, the streams (None when held whole),
    the batch size (cut to the smallest split or shard), and the training
    minibatches, the validation and test splits (datasets or streams, which
    int8store.scoring_function scores alike) and the number of classes.
    normalize: the float view's normalization (int8store.load_data's; the
    classic 'unit' unless asked).
    """
    streams = None
    if batch_size < 1:
        raise int8store.ArgumentError('--batch-size %i: expected 1 or more examples a minibatch'
                                      % batch_size)
    if devices not in (None, 1) and mode != 'jax':
        raise int8store.ArgumentError('--devices needs --mode jax: the C backend runs on one CPU')
    if devices not in (None, 1) and max_device_bytes:
        raise int8store.ArgumentError('--devices and --max-device-bytes together are not '
                                      'supported yet: stream on one device, or hold the '
                                      'splits whole over several')
    if max_device_bytes or not int8store.fits_in_memory(dataset, max_memory):
        streams = int8store.load_streams(dataset, max_device_bytes, batch_size, seed=seed,
                                         mode=mode, max_memory=max_memory, report=print,
                                         normalize=normalize)
        datasets = [(s.x, s.y) for s in streams]
        labels = [s.labels for s in streams]
        splits = streams
    elif devices not in (None, 1):
        # -- int8store over several devices: each split's rows spread over
        # them (a store is read by each process for its own devices' rows)
        datasets = load_data(dataset, max_memory=max_memory, mode='jax', devices=devices,
                             normalize=normalize)
        labels = [x.dataset.labels for x, _ in datasets]
        splits = [x.dataset for x, _ in datasets]
    else:
        datasets = load_data(dataset, max_memory=max_memory, normalize=normalize)
        # counted from the labels in host memory (x.get_value(borrow=True)
        # .shape[0] gives the same count, but decodes every image to give it)
        labels = [x.dataset.labels for x, _ in datasets]
        splits = [x.dataset for x, _ in datasets]
        # -- int8store's JAX mode: the data goes to JAX's device once, and
        # the functions compile for JAX (the classic slices in their givens
        # become static-size minibatches there).
        if mode == 'jax':
            int8store.place(datasets, 'jax')
    smallest, what = min(len(l) for l in labels), 'split'
    if streams and min(s.shard_size for s in streams) < smallest:
        smallest, what = min(s.shard_size for s in streams), 'shard'
    if seed is not None and not streams:
        # -- int8store: the training split in a new seeded order each epoch,
        # computed on the device(s) from (seed, epoch, position)
        if mode != 'jax':
            raise int8store.ArgumentError(
                '--seed shuffles a split held whole in JAX mode (--mode jax), or a streamed '
                'one (--max-device-bytes); the C backend takes the split in its own order')
        datasets[0][0].dataset.shuffle(seed)
    blocks = [x.dataset.blocks for x, _ in datasets] if not streams else [None]
    if batch_size > smallest:
        print('... batch size %i is larger than a %s of %i examples: using %i'
              % (batch_size, what, smallest, smallest))
        batch_size = smallest
    if blocks[0] is not None:
        devices = blocks[0].devices
        if batch_size % devices:
            print('... batch size %i is not a multiple of the %i devices: using %i'
                  % (batch_size, devices, batch_size - batch_size % devices))
            batch_size -= batch_size % devices
        print('... each split over %i devices, row r on device r %% %i (%s); minibatches of '
              '%i, %i rows from each device' % (devices, devices,
                                                ', '.join('%i rows' % b.rows_per_device
                                                          for b in blocks),
                                                batch_size, batch_size // devices))
        n_train_batches = blocks[0].n_batches(batch_size)
    elif streams:  # a streamed split counts its batches shard by shard
        n_train_batches = streams[0].n_batches(batch_size)
    else:
        n_train_batches = len(labels[0]) // batch_size
    n_out = 1 + int(max(numpy.max(l) for l in labels))
    return datasets, streams, batch_size, (n_train_batches, splits[1], splits[2], n_out)


def devices_option(text):
    """--devices: a count, or 'all'."""
    if text == 'all':
        return text
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError("expected a number of devices or 'all', got %r" % text)
    return count


def add_data_options(parser):
    """--mode, --classic-count, --max-device-bytes, --max-memory and --seed:
    where the splits are held and how they are fed and scored."""
    parser.add_argument('--mode', choices=('c', 'jax'), default='c',
                        help="'c': the library's C backend on the CPU; 'jax': JAX's default "
                             "device, a GPU when JAX sees one (default: %(default)s)")
    parser.add_argument('--classic-count', action='store_true',
                        help='score whole minibatches only, dropping the remainder of the '
                             'validation and test splits, as the classic tutorial (and its '
                             'published figures) did; by default every example is scored')
    parser.add_argument('--max-device-bytes', type=int, metavar='N',
                        help='feed each split to the device in shards of at most N bytes, '
                             'read from the file for a store (default: hold it all)')
    parser.add_argument('--max-memory', metavar='SIZE',
                        help="memory ceiling, e.g. '4GiB': a store larger than it is "
                             "streamed (default: half the physical memory)")
    parser.add_argument('--seed', type=int,
                        help='take the training examples in a new order each epoch, from this '
                             'seed: streamed shards and their examples, or (JAX mode) the '
                             'split held whole (default: the split\'s own order)')


def add_progress_option(parser):
    """--progress: the per-epoch lines condensed (int8store.EpochLines)."""
    parser.add_argument('--progress', action='store_true',
                        help='condense the per-epoch lines: a progress bar on a terminal, '
                             'a tenth of them in a pipe (default: every line, as the '
                             'classic tutorial printed)')


def add_steps_option(parser):
    """--steps-per-call: several minibatch updates in one call of the
    compiled step (int8store.steps_function)."""
    parser.add_argument('--steps-per-call', type=int, metavar='K',
                        help='make up to K minibatch updates in one call of the compiled step '
                             '(the same results; it pays in JAX mode, where a call costs more '
                             'than a small model\'s step; default: %i there, but 1 over '
                             'several CPU devices, and on the C backend)'
                             % int8store.ACCELERATOR_STEPS)


def add_run_options(parser):
    """--checkpoint and --resume: a run stopped anywhere goes on exactly."""
    parser.add_argument('--checkpoint', metavar='PATH',
                        help="write the run's checkpoint (.npz): the parameters, the early "
                             "stopping state, the best model and the data position, at each "
                             "validation, when stopped by Ctrl-C or SIGTERM and at the end; "
                             "replaced each time, never half-written (default: none)")
    parser.add_argument('--resume', metavar='PATH',
                        help='go on from a run checkpoint where it stopped, exactly as if it '
                             'had not: the same data, model, batch size and seeds (another '
                             'is refused, the difference named); the device count and '
                             'streaming may change')


def run_checkpoint(program, checkpoint, resume, splits, params, batch_size, seed=None,
                   augment=None, augment_seed=None, loop=()):
    """
    int8store: the run's checkpoint (int8store.RunCheckpoint, written at
    checkpoint) and, with resume, the state it goes on from, its parameters
    set (None otherwise); (None, None) with neither. splits: the train,
    valid and test splits (datasets or streams), whose digests the
    checkpoint records with the model, the batch size and the seeds. loop:
    the names of the loop's numbers save_run writes (int8store.EARLY_STOPPING),
    which a checkpoint resumed must hold, each what it may be, as its data
    position must be inside an epoch of the training split.
    """
    if not (checkpoint or resume):
        return None, None
    identity = int8store.run_identity(program, splits, params, batch_size, seed, augment,
                                      augment_seed)
    run = int8store.RunCheckpoint(checkpoint, params, identity, ('finished',) + tuple(loop),
                                  splits[0].n_batches(batch_size))
    state = run.resume(resume) if resume else None
    if state is not None:
        print('... resumed from %s: epoch %i, minibatch %i' % (resume, state.epoch, state.step))
    return run, state


def resume_point(resumed, *names):
    """
    int8store: where a resumed run goes on (resumed: run_checkpoint's state):
    the epochs done, the first minibatch of the next, the best model's
    parameters, whether the loop had ended, and the loop's numbers of these
    names, in their order.
    """
    finished = resumed.loop['finished']
    return (resumed.epoch - 1 + finished, resumed.step, resumed.best, finished,
            [resumed.loop[name] for name in names])


def save_run(run, epoch, minibatch_index, best_params, finished, **loop):
    """
    int8store: the run's checkpoint (run_checkpoint's run; none without
    one, and only process 0 of several writes it) once minibatch_index of
    epoch is done: the loop's numbers, the best model's parameters and
    whether the loop has ended (its patience run out).
    """
    if run is not None and int8store.is_main_process():
        run.save(int8store.RunState(epoch, minibatch_index + 1, dict(loop, finished=finished),
                                    best_params))


def add_normalize_option(parser):
    """--normalize: how the float view of the images is normalized."""
    parser.add_argument('--normalize', choices=int8store.NORMALIZATIONS, default='unit',
                        help="the images as the model sees them: 'unit' the source's own "
                             "scale (the classic [0, 1)), 'batch' or 'dataset' centred on the "
                             "minibatch's or the training split's mean, 'channel' on each "
                             "channel's, 'standard' each channel centred and divided by its "
                             "standard deviation (colour sets), 'none' the raw codes "
                             "(default: %(default)s)")


def add_augment_options(parser):
    """--augment and --augment-seed: the training minibatches augmented from
    their int8 codes, inside the compiled step (SharedDataset.augment)."""
    parser.add_argument('--augment', metavar='LIST',
                        help='augment each training minibatch inside the step, from its int8 '
                             'codes: comma-separated translate=R (up to R pixels each way), '
                             'fill=zero|edge|reflect, flip or flip=alternate (not for digits), '
                             'cutout=S (an SxS square set to black); e.g. translate=2,cutout=8 '
                             '(default: none)')
    parser.add_argument('--augment-seed', type=int, default=1, metavar='N',
                        help="the augmentation's draws, from (N, epoch, minibatch, example) "
                             '(default: %(default)s)')


def augmented_training_set(train_set_x, augment, seed, dataset):
    """
    int8store: the view of the training split whose minibatches are
    augmented (SharedDataset.augment), to slice in the training givens in
    place of train_set_x (held whole or streamed); train_set_x as it is
    without augment. Flips are refused for digits, which a mirror turns into
    other shapes.
    """
    if not augment:
        return train_set_x
    augmentation = int8store.Augmentation.parse(augment)
    name = os.path.basename(str(dataset)).lower()
    if augmentation.flip != 'none' and ('mnist' in name or 'digit' in name):
        raise int8store.ArgumentError(
            "--augment flip on %s: a mirrored digit is another shape (a mirrored 2 is no "
            "digit, and some 3s read as Es): leave flip out for digits" % dataset)
    print('... augmenting the training minibatches: %s' % augmentation.describe())
    return train_set_x.dataset.augment(augmentation, seed)


def training_steps(index, cost, updates, givens, steps_per_call, mode, split, batch_size):
    """
    int8store: the compiled function that makes up to steps_per_call
    updates a call (int8store.steps_function: the same cost, updates and
    givens as train_model), or None on the C backend for one update a call
    (train_model's calls). steps_per_call None: int8store's default for the
    mode and the devices the training split lies on
    (int8store.default_steps), but no more than an epoch's minibatches, or
    a shard's (a call ends where the loop looks at the model, and at a
    shard's end): then the calls run loops of one fixed length.
    """
    if steps_per_call is None:
        blocks = getattr(split, 'blocks', None)
        steps_per_call = min(int8store.default_steps(mode, blocks.devices if blocks else 1),
                             max(split.largest_call(batch_size), 1))
    if steps_per_call < 1:
        raise int8store.ArgumentError('--steps-per-call %i: expected 1 or more' % steps_per_call)
    if steps_per_call == 1 and mode != 'jax':
        return None
    print('... up to %i minibatch update%s a call' % (steps_per_call,
                                                      's' if steps_per_call > 1 else ''))
    return int8store.steps_function([index], cost, updates, givens=givens,
                                    steps=steps_per_call, mode=mode)


def model_looked_at(epoch, n_train_batches, validation_frequency, patience):
    """
    int8store: ends(minibatch_index) for trained_minibatches: true after the
    minibatches where the classic loop validates, or may stop (patience()
    gives the patience as it is then, when each call is formed).
    """
    def ends(minibatch_index):
        iter = (epoch - 1) * n_train_batches + minibatch_index
        return (iter + 1) % validation_frequency == 0 or patience() <= iter
    return ends


def trained_minibatches(split, epoch, batch_size, train_model, train_steps=None, ends=None,
                        start=0):
    """
    int8store: the numbers of epoch's minibatches of split (a dataset, or a
    stream) from start on, each yielded once its update is made: by
    train_model, one a call, or by train_steps, up to its steps a call, a
    call ending after any minibatch for which ends(number) is true (where
    the loop looks at the model: so it sees what one update a call gives).
    Close it to leave the epoch early (a stream then stops reading).
    """
    calls = int8store.minibatch_calls(split, epoch, batch_size,
                                      1 if train_steps is None else train_steps.steps, ends,
                                      start)
    try:
        for first, index_on_device, count in calls:
            if train_steps is None:
                train_model(index_on_device)
            else:
                train_steps(index_on_device, count)
            for minibatch_index in range(first, first + count):
                yield minibatch_index
    finally:
        calls.close()


def add_device_options(parser):
    """--devices, and --coordinator, --num-processes, --process-id: several
    devices, and several processes (hosts), in one run."""
    parser.add_argument('--devices', type=devices_option, metavar='N',
                        help="JAX mode over N devices ('all': every one JAX sees): each "
                             "split's rows spread over them, the same minibatches as on one "
                             "(default: one)")
    parser.add_argument('--coordinator', metavar='HOST:PORT',
                        help='run as one of several processes (JAX mode): process 0\'s '
                             'address; then --devices defaults to all of every process\'s')
    parser.add_argument('--num-processes', type=int, metavar='N', help='processes in the run')
    parser.add_argument('--process-id', type=int, metavar='I', help='this one (0 to N-1)')


def add_jax_run_options(parser):
    """--no-compile-cache, --deterministic and --timings: how a run in JAX
    mode is set up (int8store.set_up_run), and its times reported."""
    parser.add_argument('--no-compile-cache', action='store_true',
                        help="JAX mode: compile every XLA program anew (default: keep them in "
                             "a cache folder, ~/.cache/int8store/jax, so that a second run "
                             "compiles nothing)")
    parser.add_argument('--deterministic', action=argparse.BooleanOptionalAction, default=None,
                        help='JAX mode on a GPU: deterministic GPU ops, the same lines held '
                             'whole or streamed, stopped and resumed (default: on)')
    parser.add_argument('--timings', action='store_true',
                        help="print where the run's time went: XLA's compilations, the "
                             "training loop, the scoring of the splits")


def set_up_jax_run(args):
    """int8store's JAX mode: the run set up before anything uses JAX (the
    float type, float32 on an accelerator unless floatX was named; XLA's
    compilation cache; deterministic GPU ops), and one line saying so.
    None on the C backend."""
    if args.mode != 'jax':
        return None
    try:
        setup = int8store.set_up_run(compile_cache=not args.no_compile_cache,
                                     deterministic=args.deterministic)
    except int8store.Int8StoreError as error:
        print('error: %s' % error, file=sys.stderr)
        sys.exit(2)
    print('... ' + setup.describe())
    return setup


def report_timings(result, setup):
    """--timings: the training loop's seconds, the scoring's among them, and
    XLA's compilations (JAX mode)."""
    print('timings: training loop %.2f s, of which scoring the splits %.2f s in %i calls%s'
          % (result['seconds'], result['scoring_seconds'], result['scoring_calls'],
             '; ' + setup.compilations.describe() if setup is not None else ''))


def join_processes(args):
    """Join the run's other processes (int8store.start_processes), before any JAX use."""
    if args.coordinator:
        int8store.start_processes(args.coordinator, args.num_processes, args.process_id)
        args.mode = 'jax'
        args.devices = args.devices or 'all'


def run_from_command_line(train, **kwargs):
    """
    int8store's additions to the classic scripts' ending, shared by the
    tutorials: train(**kwargs), with an int8store error reported in one line
    (exit status 2), and Ctrl-C or SIGTERM stopping the training after its
    minibatch, so that the best model so far is reported as such and its
    checkpoint kept (exit status 130 or 143); a second one stops at once.
    A checkpoint or saved model that cannot be written (a full disk) is
    said in one line and the training goes on (int8store.checkpoint_writes);
    the last line then says how many writes failed.

    Returns the result (None after an error or a second interrupt) and the
    exit status.
    """
    with int8store.stop_requests() as stop, int8store.checkpoint_writes() as writes:
        try:
            result = train(**kwargs)
        except int8store.Int8StoreError as error:
            print('error: %s' % error, file=sys.stderr)
            return None, 2
        except KeyboardInterrupt as interrupt:  # the second Ctrl-C
            print('%s: stopped at once' % (interrupt or 'interrupted'), file=sys.stderr)
            return None, 128 + getattr(interrupt, 'signal', 2)
        finally:
            if writes.summary():
                print(writes.summary(), file=sys.stderr)
    return result, stop.exit_status


def sgd_optimization_mnist(learning_rate=0.13, n_epochs=1000,
                           dataset='mnist.pkl.gz',
                           batch_size=600, model_path='best_model.npz', mode='c',
                           classic_count=False, max_device_bytes=None, seed=None,
                           max_memory=None, progress=False, devices=None, steps_per_call=None,
                           checkpoint=None, resume=None):
    """
    Train the logistic regression by minibatch SGD with early stopping.

    :param learning_rate: SGD step
    :param n_epochs: maximal number of epochs
    :param dataset: what ``int8store.load_data`` reads: 'mnist.pkl.gz' (the
                    classic file), 'digits' (offline), a store, ...
    :param batch_size: examples per minibatch
    :param model_path: where the best model's W and b are saved (.npz),
                       replaced at each improvement as the classic did
    :param mode: 'c' (the library's C backend) or 'jax' (int8store's JAX mode)
    :param classic_count: score whole minibatches of the validation and test
                          splits only, as the classic did (else every example)
    :param max_device_bytes: each split is fed to the device in shards of
                             images and labels of at most this many bytes
                             (int8store.load_streams): read from the file
                             for a store, so a store larger than memory
                             trains too
    :param seed: streamed training shards and their examples are shuffled
                 each epoch from this seed (None: the split's own order)
    :param max_memory: memory ceiling (bytes, or '4GiB'): a store larger than
                       it is streamed even without max_device_bytes
    :param progress: condense the per-epoch lines (a bar on a terminal, a
                     tenth of them in a pipe); by default all, as the classic
    :param devices: JAX mode over several devices (a count or 'all'): each
                    split's rows spread over them, the parameters
                    replicated, the gradients reduced by XLA
    :param steps_per_call: minibatch updates made in one call of the
                           compiled step (int8store.steps_function; the same
                           results); None: int8store.default_steps, 100
                           in JAX mode (on a CPU: one device), else 1
    :param checkpoint, resume: write the run's checkpoint there (at each
                               validation, when stopped, at the end); go on
                               from one (run_checkpoint, above)

    Returns a dict with the best validation error, the test error of the
    best model and how many examples it is over, the epochs run and the
    seconds taken.
    """
    # -- int8store: the splits, in memory or streamed, and the batch counts
    # (load_for_training, above)
    datasets, streams, batch_size, (n_train_batches, valid_split, test_split, n_out) = \
        load_for_training(dataset, batch_size, mode, max_device_bytes, seed, max_memory,
                          devices)
    train_set_x, train_set_y = datasets[0]
    valid_set_x, valid_set_y = datasets[1]
    test_set_x, test_set_y = datasets[2]
    compile_mode = int8store.function_mode(mode)

    ######################
    # BUILD ACTUAL MODEL #
    ######################
    print('... building the model')

    index = T.lscalar()  # index to a [mini]batch

    x = T.matrix('x')  # the minibatch of images, one flattened image per row
    y = T.ivector('y')  # its labels

    n_in = train_set_x.dataset.n_features  # 28 * 28 for MNIST
    classifier = LogisticRegression(input=x, n_in=n_in, n_out=n_out)

    cost = classifier.negative_log_likelihood(y)

    # the zero-one loss of each of the batch_size examples from `start`:
    # int8store.scoring_function scores every example of a split once with
    # them, test_model() giving the error and how many examples it is over
    # (in JAX mode in one call; the classic scored whole minibatches only:
    # classic_count)
    start = T.lscalar()
    test_model = int8store.scoring_function(
        inputs=[start],
        outputs=T.neq(classifier.y_pred, y),
        givens={
            x: test_set_x[start: start + batch_size],
            y: test_set_y[start: start + batch_size]
        },
        split=test_split, chunk_size=batch_size, classic_count=classic_count, mode=mode
    )

    validate_model = int8store.scoring_function(
        inputs=[start],
        outputs=T.neq(classifier.y_pred, y),
        givens={
            x: valid_set_x[start: start + batch_size],
            y: valid_set_y[start: start + batch_size]
        },
        split=valid_split, chunk_size=batch_size, classic_count=classic_count, mode=mode
    )

    # gradients of the cost, and the SGD step on each parameter
    g_W = T.grad(cost=cost, wrt=classifier.W)
    g_b = T.grad(cost=cost, wrt=classifier.b)
    updates = [(classifier.W, classifier.W - learning_rate * g_W),
               (classifier.b, classifier.b - learning_rate * g_b)]

    # -- int8store: a run stopped anywhere goes on from its checkpoint
    # (run_checkpoint, above): the parameters are set here, before any step
    run, resumed = run_checkpoint('logistic_sgd', checkpoint, resume,
                                  streams or [x.dataset for x, _ in datasets], classifier.params,
                                  batch_size, seed, loop=('patience', 'best_validation_loss',
                                                          'test_score', 'test_count'))

    # one SGD step on minibatch `index` of train; returns its cost
    train_givens = {
        x: train_set_x[index * batch_size: (index + 1) * batch_size],
        y: train_set_y[index * batch_size: (index + 1) * batch_size]
    }
    train_model = theano.function(
        inputs=[index],
        outputs=cost,
        updates=updates,
        givens=train_givens,
        mode=compile_mode
    )
    # -- int8store: several of those steps a call (training_steps, above)
    train_steps = training_steps(index, cost, updates, train_givens, steps_per_call, mode,
                                 streams[0] if streams else train_set_x.dataset, batch_size)

    # -- int8store's JAX mode: keep the parameters' updates on the device,
    # rather than copying them to host memory after every step.
    if mode == 'jax':
        int8store.keep_on_device(classifier.params, [train_model], devices=devices)

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
    # -- int8store: the per-epoch lines, printed as the classic did (or condensed)
    epoch_lines = int8store.EpochLines(n_epochs, progress)

    done_looping = False
    epoch = 0
    start = 0  # the epoch's first minibatch
    best_params = []
    if resumed is not None:  # -- int8store: where the checkpoint stopped (resume_point)
        epoch, start, best_params, done_looping, (
            patience, best_validation_loss, test_score, test_count) = resume_point(
            resumed, 'patience', 'best_validation_loss', 'test_score', 'test_count')
    while (epoch < n_epochs) and (not done_looping):
        epoch = epoch + 1
        # each minibatch number of the epoch, once train_model (or
        # train_steps, a call ending where the loop below looks at the
        # model) has made its update (trained_minibatches, above)
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
                    # a significant improvement extends the patience
                    if this_validation_loss < best_validation_loss * improvement_threshold:
                        patience = max(patience, iter * patience_increase)

                    best_validation_loss = this_validation_loss

                    test_score, test_count = test_model()

                    epoch_lines(epoch, '     epoch %i, minibatch %i/%i, test error of best model '
                                '%f %% over %i examples' % (epoch, minibatch_index + 1,
                                                            n_train_batches, test_score * 100.,
                                                            test_count))

                    # save the best model (the tutorial's own checkpoint:
                    # replaced each time, as the classic did; never half-written)
                    if model_path and int8store.is_main_process():  # (one of several)
                        int8store.save_checkpoint(model_path,
                                                  W=classifier.W.get_value(borrow=True),
                                                  b=classifier.b.get_value(borrow=True))
                    if run is not None:  # -- int8store: the best model, for the run's checkpoint
                        best_params = [numpy.array(p.get_value(borrow=True))
                                       for p in classifier.params]

            # -- int8store: Ctrl-C (or SIGTERM) stops here, after the minibatch
            stop = patience <= iter or int8store.stop_requested()
            # -- int8store: the run's checkpoint, where the loop looked at the model or stops
            if stop or (iter + 1) % validation_frequency == 0:
                save_run(run, epoch, minibatch_index, best_params, patience <= iter,
                         patience=patience, best_validation_loss=best_validation_loss,
                         test_score=test_score, test_count=test_count)
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
              'score %f %%, test performance %f %%' % (epoch, minibatch_index + 1, n_train_batches,
                                                        best_validation_loss * 100.,
                                                        test_score * 100.))
    else:
        print('Optimization complete with best validation score of %f %%, '
              'with test performance %f %%' % (best_validation_loss * 100., test_score * 100.))
    print('The code run for %d epochs, with %f epochs/sec' % (
        epoch, 1. * epoch / (end_time - start_time)))
    print('The code for file ' + os.path.split(__file__)[1] +
          ' ran for %.1fs' % (end_time - start_time), file=sys.stderr)
    return {'best_validation_loss': float(best_validation_loss),
            'test_score': float(test_score), 'test_count': test_count, 'epochs': epoch,
            'seconds': end_time - start_time, 'datasets': streams or datasets,
            'scoring_seconds': validate_model.seconds + test_model.seconds,
            'scoring_calls': validate_model.calls + test_model.calls,
            'train_model': train_model, 'interrupted': bool(interrupted),
            'params': [numpy.array(p.get_value(borrow=True)) for p in classifier.params]}


def predict(model_path='best_model.npz', dataset='mnist.pkl.gz', count=10):
    """
    Load the saved model and predict the labels of the first test examples.
    """
    datasets = load_data(dataset)
    test_set_x, test_set_y = datasets[2]

    # -- int8store: the model the data calls for (its image size, its
    # classes), and the saved W and b checked against it before they are set
    n_out = 1 + int(max(y.get_value(borrow=True).max() for _, y in datasets))
    classifier = LogisticRegression(input=T.matrix('x'), n_in=test_set_x.dataset.n_features,
                                    n_out=n_out)
    int8store.load_parameters(model_path, classifier.params)

    # compile a predictor function
    predict_model = theano.function(inputs=[classifier.input], outputs=classifier.y_pred)

    test_set_x = test_set_x.get_value()

    predicted_values = predict_model(test_set_x[:count])
    print('Predicted values for the first %i examples in test set:' % count)
    print(predicted_values)
    return predicted_values


def main(argv=None):
    parser = argparse.ArgumentParser(
        description='Logistic regression trained by minibatch SGD on int8-held images.')
    parser.add_argument('--dataset', default='mnist.pkl.gz',
                        help="what int8store.load_data reads: 'mnist.pkl.gz' (here, ../data/, "
                             "the cache, or downloaded), 'digits' (offline), 'mnist', an .npz, "
                             "an int8store .h5 store, a folder of IDX files or of class folders "
                             "of images (default: %(default)s)")
    parser.add_argument('--epochs', type=int, default=1000,
                        help='maximal number of epochs (default: %(default)s)')
    parser.add_argument('--learning-rate', type=float, default=0.13,
                        help='SGD step (default: %(default)s)')
    parser.add_argument('--batch-size', type=int, default=600,
                        help='minibatch size (default: %(default)s)')
    add_data_options(parser)
    parser.add_argument('--save-model', default='best_model.npz', metavar='PATH',
                        help="where the best model's parameters go, replaced at each "
                             "improvement (default: %(default)s)")
    add_device_options(parser)
    add_steps_option(parser)
    add_run_options(parser)
    add_progress_option(parser)
    add_jax_run_options(parser)
    parser.add_argument('--predict', action='store_true',
                        help="predict the first test examples' labels with the saved model "
                             "(--save-model) instead of training")
    args = parser.parse_args(argv)
    if args.predict:
        return run_from_command_line(predict, model_path=args.save_model,
                                     dataset=args.dataset)[1]
    join_processes(args)
    setup = set_up_jax_run(args)
    result, status = run_from_command_line(
        sgd_optimization_mnist, checkpoint=args.checkpoint, resume=args.resume, learning_rate=args.learning_rate, n_epochs=args.epochs,
        dataset=args.dataset, batch_size=args.batch_size, model_path=args.save_model,
        mode=args.mode, classic_count=args.classic_count,
        max_device_bytes=args.max_device_bytes, seed=args.seed, max_memory=args.max_memory,
        progress=args.progress, devices=args.devices, steps_per_call=args.steps_per_call)
    if result is None:
        return status
    print()
    if result['interrupted']:
        print('interrupted: the figures below are the best model so far')
    print('best validation error  %f %%' % (result['best_validation_loss'] * 100.))
    print('test error             %f %% over %i examples'
          % (result['test_score'] * 100., result['test_count']))
    print('epochs                 %i' % result['epochs'])
    print()
    print('Images in memory, as int8 against the classic float32:')
    print(int8store.memory_table(result['datasets']))
    if args.timings:
        report_timings(result, setup)
    return status  # 0, or 130 (SIGINT) / 143 (SIGTERM) when interrupted


if __name__ == '__main__':
    sys.exit(main())
