"""A training run as the bundled tutorials make one: :class:`Run`.

A classic tutorial loads its splits, compiles a training step and two
scoring functions from ``givens`` that slice the splits, and loops over
epochs and minibatches with patience-based early stopping. What int8store
adds to that (where the splits are held, how many steps a call makes, how
a split is scored, a checkpoint to resume from, the lines printed) is a
:class:`Run`, so that the tutorial reads as the classic does, each addition
one call:

.. code-block:: python

    run = Run(mode="jax")                                   # (or Run(**options))
    datasets = run.load_data(dataset, batch_size)           # load_data, held as asked
    validate_model = run.scoring_function([index], T.neq(y_pred, y), window_givens, run.valid)
    train_model = run.training_function([index], cost, updates, givens)
    epoch, best_params, done_looping, loop = run.resume("logistic_sgd", params, patience=patience)
    for minibatch_index in run.minibatches(epoch, train_model, validation_frequency,
                                           lambda: patience):
        ...                                                 # the classic loop's body
        run.save(epoch, minibatch_index, best_params, finished, patience=patience, ...)
"""

import numpy as np

from ..codes.labels import class_count
from ..errors import ArgumentError
from ..order.batch_size import check_over_devices, fitted_batch_size
from ..runtime.interrupts import arm_stop_requests, stop_requested
from ..runtime.progress import EpochLines
from ..store.checkpoint import npz_path

__all__ = ["Run"]


class Run:
    """What a tutorial's run adds to the classic training loop (see the
    module docstring). Every option is the command line's
    (:func:`~int8store.training.options.add_arguments`); the defaults are
    the classic run on the C backend.

    Parameters
    ----------
    mode : {"c", "jax"}
        The library's C backend, or int8store's JAX mode.
    classic_count : bool
        Score whole minibatches only, as the classic tutorials did.
    max_device_bytes, max_memory : optional
        Stream the splits in shards of at most that many bytes; the memory
        ceiling (a store larger than it is streamed).
    seed : int, optional
        The training split in a new order each epoch, from this seed.
    devices : int or "all", optional
        JAX mode over several devices.
    steps_per_call : int, optional
        Updates a call (default :func:`~int8store.training.steps.default_steps`,
        at most an epoch's or a shard's minibatches).
    augment, augment_seed : optional
        The training minibatches augmented inside the step.
    normalize : str
        The images' normalization (:func:`~int8store.dequantize`).
    checkpoint, resume : path, optional
        Where the run's checkpoint is written; one to go on from.
    progress : bool
        Condense the per-epoch lines (:class:`~int8store.runtime.progress.EpochLines`).
    """

    def __init__(self, mode="c", classic_count=False, max_device_bytes=None, max_memory=None,
                 seed=None, devices=None, steps_per_call=None, augment=None, augment_seed=1,
                 normalize="unit", checkpoint=None, resume=None, progress=False):
        from ..codes.vocabulary import check_mode

        self.mode = check_mode(mode)
        self.classic_count, self.max_device_bytes = bool(classic_count), max_device_bytes
        self.max_memory, self.seed, self.devices = max_memory, seed, devices
        self.steps_per_call, self.normalize = steps_per_call, normalize
        self.augment, self.augment_seed = augment, 1 if augment_seed is None else augment_seed
        self.checkpoint, self.resume_path, self.progress = checkpoint, resume, progress
        if devices not in (None, 1) and self.mode != "jax":
            raise ArgumentError("--devices needs --mode jax: the C backend runs on one CPU")
        if steps_per_call is not None and steps_per_call < 1:
            raise ArgumentError(f"--steps-per-call {steps_per_call}: expected 1 or more")
        self.splits = self.batch_size = None
        self._scores, self._lines, self._checkpoint = [], None, None
        self._program = None  # (the model's program, from resume: what a saved model says it is)
        self._epoch_walk, self._start, self._mid_call = None, 0, False
        #: The epochs this run trained in (an epoch resumed in its middle
        #: counted): all of the loop's, fewer when it was resumed.
        self.epochs_trained = 0

    # -- the data ---------------------------------------------------------------------

    def load_data(self, dataset, batch_size):
        """``load_data(dataset)`` for this run: the classic ``[(x, y)] * 3``,
        each split held as asked (whole, over devices, or streamed:
        :func:`int8store.load_splits`), the training split shuffled by
        ``seed`` and its minibatches augmented as asked. The batch size comes
        down to what every split (or shard) holds, and to a multiple of the
        device count, each cut said in a line (one below the device count is
        refused: it would leave none): :attr:`batch_size`. With
        ``seed`` the training split takes a new order each epoch, whatever
        holds it. Also
        sets :attr:`splits` (:attr:`train`, :attr:`valid`, :attr:`test`),
        :attr:`n_classes` and :attr:`n_features`."""
        from ..loading import load_splits

        if int(batch_size) != batch_size or batch_size < 1:
            raise ArgumentError(f"--batch-size {batch_size}: expected 1 or more examples a "
                                "minibatch")
        if isinstance(self.devices, int):
            check_over_devices(batch_size, self.devices)
        splits = load_splits(dataset, max_memory=self.max_memory, normalize=self.normalize,
                             mode=self.mode, devices=self.devices,
                             max_device_bytes=self.max_device_bytes, batch_size=batch_size,
                             seed=self.seed, report=print)
        train, valid, test = splits["train"], splits["valid"], splits["test"]
        self.splits = [train, valid, test]
        self.batch_size = self._batch_size(int(batch_size))
        self.n_classes = class_count([split.labels for split in self.splits], dataset)
        self.n_features = train.n_features
        train_x = self._augmented(train, dataset)
        from ..dataset.views import labels_view  # (y as load_data gives it)

        return [(x, labels_view(split.x.dataset))
                for x, split in zip((train_x, valid.x, test.x), self.splits)]

    @property
    def train(self):
        return self.splits[0]

    @property
    def valid(self):
        return self.splits[1]

    @property
    def test(self):
        return self.splits[2]

    def n_batches(self):
        """Whole minibatches of the training split an epoch."""
        return self.train.n_batches(self.batch_size)

    def _shard_limit(self):
        """The examples a streamed shard holds where that, not a split,
        bounds the batch (else None): what a resume refused its batch needs."""
        smallest = min(split.largest_batch() for split in self.splits)
        return smallest if smallest < min(split.n_examples for split in self.splits) else None

    def _batch_size(self, batch_size):
        """The batch size every split (and shard) fills, a multiple of the
        device count, each cut said in a line."""
        smallest = min(split.largest_batch() for split in self.splits)
        devices = self.train.devices
        taken = fitted_batch_size(batch_size, smallest, devices)
        if taken.largest is not None:  # (load_splits said why a shard's size: its line above)
            print(f"... batch size {batch_size} is larger than {_fewest(self.splits)}: "
                  f"using {smallest}" if self._shard_limit() is None else
                  f"... using minibatches of {smallest}")
        if taken.devices is not None:
            print(f"... batch size {taken.largest or batch_size} is not a multiple of the "
                  f"{devices} devices: using {taken.size}")
        batch_size = taken.size
        if devices > 1:
            held = ", ".join(f"{-(-split.n_examples // devices)} rows" for split in self.splits)
            print(f"... each split over {devices} devices, row r on device r % {devices} "
                  f"({held}); minibatches of {batch_size}, {batch_size // devices} rows from "
                  "each device")
        return batch_size

    def _augmented(self, train, dataset):
        """The training split's view whose minibatches are augmented as
        asked (its ``x`` without augmentation). Flips are refused for digits,
        which a mirror turns into other shapes."""
        if not self.augment:
            return train.x
        from ..augment.spec import Augmentation, refuse_flipped_digits
        from ..sources.locate import recorded_source

        augmentation = Augmentation.parse(self.augment)
        refuse_flipped_digits(augmentation, dataset, recorded_source)
        augmentation.grid(train.image_shape, f"{dataset} ({train.name})")  # (the file named)
        print(f"... augmenting the training minibatches: {augmentation.describe()}")
        return train.augment(augmentation, self.augment_seed)

    # -- the compiled functions ---------------------------------------------------------

    def scoring_function(self, inputs, outputs, givens, split):
        """``score()`` giving ``(error, count)`` over every example of
        ``split`` (:attr:`valid` or :attr:`test`) once, from the classic
        window ``givens`` (``x[index:index + batch_size]``): in JAX mode one
        call a split (:func:`int8store.training.scoring_function`)."""
        from .scoring import scoring_function

        score = scoring_function(inputs, outputs, givens, split, self.batch_size,
                                 self.classic_count, mode=self.mode)
        self._scores.append(score)
        return score

    def training_function(self, inputs, outputs, updates, givens):
        """``train_model(index, count)``: ``count`` updates on minibatches
        ``index`` onwards, from what the classic tutorial gives ``function``.
        On the C backend with one update a call it is the classic compiled
        step; otherwise :func:`int8store.training.steps_function` (in JAX mode its own
        XLA loop, called directly), up to its ``steps`` a call. In JAX mode
        the parameters stay on the device."""
        from ..backend import activate, function_mode
        from .steps import default_steps, steps_function

        updates = list(updates.items() if hasattr(updates, "items") else updates)
        steps = self.steps_per_call
        # (no call makes more than an epoch's or a shard's minibatches; a
        # call's costs and loop are sized by its steps: K = 10**12 allocated
        # 8 TB of costs and failed with a traceback)
        largest = max(self.train.largest_call(self.batch_size), 1)
        if steps is None:
            steps = min(default_steps(self.mode, self.train.devices), largest)
        elif steps > largest:
            whole = "a shard's" if largest < self.n_batches() else "an epoch's"
            print(f"... --steps-per-call {steps}: a call takes at most {whole} {largest} "
                  f"minibatch{'es' if largest > 1 else ''}: using {largest}")
            steps = largest
        params = [variable for variable, _ in updates]
        if steps == 1 and self.mode == "c":
            step = activate().function(inputs, outputs, updates=updates, givens=givens,
                                       mode=function_mode("c"))
            call = _OneCall(step)
        else:
            print(f"... up to {steps} minibatch update{'s' if steps > 1 else ''} a call")
            call = steps_function(inputs, outputs, updates, givens, steps=steps, mode=self.mode)
        if self.mode == "jax":
            from ..backend.jax.device import keep_on_device

            keep_on_device(params, devices=self.devices)
        return call

    # -- the loop -----------------------------------------------------------------------

    def minibatches(self, epoch, train_model, validation_frequency, patience):
        """The numbers of epoch ``epoch``'s minibatches (1 for the first
        epoch, as the classic loop counts), each yielded once
        ``train_model`` (:meth:`training_function`'s) has made its update.
        A call of many updates ends where the classic loop looks at the
        model (``(iter + 1) % validation_frequency == 0``), or may stop
        (``patience()`` then at most ``iter``), so what it sees there is
        what one update a call gives. The first epoch after :meth:`resume`
        starts where the checkpoint stopped; an epoch left early is closed
        when the next starts, or by :meth:`close` (a stream stops reading)."""
        arm_stop_requests()  # (a signal before the loop stopped at once: nothing to keep)
        start, self._start = self._start, 0
        if self._epoch_walk is not None:
            self._epoch_walk.close()
        n_batches = self.n_batches()

        def ends(number):
            iter = (epoch - 1) * n_batches + number
            return (iter + 1) % validation_frequency == 0 or patience() <= iter

        self._epoch_walk = self._trained(epoch - 1, train_model, ends, start)
        return self._epoch_walk

    def _trained(self, epoch, train_model, ends, start):
        calls = self.train.calls(epoch, self.batch_size, train_model.steps, ends, start)
        try:
            for call, (first, index, count) in enumerate(calls):
                train_model(index, count)
                if call == 0:
                    self.epochs_trained += 1
                for number in range(first, first + count):
                    self._mid_call = number < first + count - 1
                    yield number
        finally:
            self._mid_call = False
            calls.close()

    def epoch_lines(self, n_epochs):
        """``lines(epoch, text)``: the loop's lines about each epoch of at
        most ``n_epochs``, printed as the classic did, or condensed
        (``progress``: :class:`~int8store.runtime.progress.EpochLines`)."""
        if self._lines is not None:
            self._lines.close()
        self._lines = EpochLines(n_epochs, self.progress)
        return self._lines

    def stop_requested(self):
        """Whether Ctrl-C or SIGTERM asked the training to stop: asked as
        each minibatch is yielded by :meth:`minibatches`, true only at the
        last minibatch of a call. A call of many updates has made them all
        before the loop sees its first, so a stop (and the checkpoint the
        loop writes there) at an earlier one would record fewer updates than
        the model holds, and a resume would make the others twice."""
        return bool(stop_requested()) and not self._mid_call

    # -- checkpoints --------------------------------------------------------------------

    def resume(self, program, params, learning_rate=None, **loop):
        """Set up the run's checkpoint (``checkpoint``), recording the data,
        the model ``params``, the batch size, the seeds, the normalization
        and the ``learning_rate``, and with ``resume`` go on from one: its
        parameters set, checked against this run first (another is refused,
        the difference named). ``loop``: the loop's numbers the checkpoint
        holds (their values now).

        Returns ``(epochs done, best parameters, loop ended, loop)``, the
        loop's numbers as the checkpoint holds them (the ones given, without
        ``resume``); :meth:`minibatches` then starts where it stopped."""
        from .run import RunCheckpoint, run_identity

        self._program = program
        if not (self.checkpoint or self.resume_path):
            return 0, [], False, loop
        identity = run_identity(program, self.splits, params, self.batch_size, self.seed,
                                self.augment, self.augment_seed, self.normalize, learning_rate,
                                self.classic_count)
        self._checkpoint = RunCheckpoint(self.checkpoint, params, identity,
                                         ("finished",) + tuple(loop), self.n_batches(),
                                         shard_limit=self._shard_limit())
        state = self._checkpoint.resume(self.resume_path) if self.resume_path else None
        if state is None:
            return 0, [], False, loop
        asked = self._lines.n_epochs if self._lines is not None else None
        if asked is not None and state.epoch > asked:  # (nothing would run, and 'epochs 1' said)
            raise ArgumentError(f"{npz_path(self.resume_path)}: the run stopped in epoch "
                                f"{state.epoch}, past the {asked} asked (--epochs {asked}): ask "
                                f"for {state.epoch} or more to go on from it")
        print(f"... resumed from {npz_path(self.resume_path)}: epoch {state.epoch}, minibatch "
              f"{state.step}")
        finished = state.loop["finished"]
        self._start = state.step  # (the first epoch minibatches() walks starts there)
        return (state.epoch - 1 + finished, state.best, finished,
                {name: state.loop[name] for name in loop})

    @property
    def checkpointing(self):
        """Whether the run writes a checkpoint (then it keeps the best parameters)."""
        return self._checkpoint is not None

    def best_params(self, params):
        """The parameters' values now, for the checkpoint's best model (none
        without a checkpoint)."""
        return [np.array(p.get_value(borrow=True)) for p in params] if self.checkpointing else []

    def save(self, epoch, minibatch_index, best_params, finished, **loop):
        """The run's checkpoint once ``minibatch_index`` of ``epoch`` is done
        (only process 0 of several writes it): the loop's numbers, the best
        model's parameters and whether the loop has ended."""
        from ..backend.jax.sharding import is_main_process
        from .run import RunState

        if self._checkpoint is not None and is_main_process():
            self._checkpoint.save(RunState(epoch, minibatch_index + 1,
                                           dict(loop, finished=finished), best_params))

    def save_model(self, path, *arrays, **named):
        """The tutorial's own checkpoint of the best model (``--save-model``),
        replaced at each improvement, never half-written; nothing without a
        path, nor in a process other than the first of several. Beside the
        arrays, what the model was trained on (:func:`~.parameters.saved_model_description`):
        its images' normalization, which ``--predict`` must read them with,
        the program (:meth:`resume`'s) whose model it is, and where the data
        names its classes, their names (:attr:`~int8store.dataset.split.Split.label_names`),
        which ``--predict`` prints and checks the data's against
        (:func:`~.parameters.saved_class_names`)."""
        from ..backend.jax.sharding import is_main_process
        from ..store.checkpoint import MODEL_DESCRIPTION, description_array, save_checkpoint

        if path and is_main_process():
            description = {"normalize": self.normalize}
            if self._program:
                description["program"] = str(self._program)
            names = self.train.label_names if self.splits else None
            if names is not None:
                description["class_names"] = list(names)
            save_checkpoint(path, *arrays, **named,
                            **{MODEL_DESCRIPTION: description_array(description)})

    # -- the end ------------------------------------------------------------------------

    def close(self):
        """End what the run started: the epoch lines, the streams' reading. Idempotent."""
        if self._epoch_walk is not None:
            self._epoch_walk.close()
        if self._lines is not None:
            self._lines.close()
            self._lines = None
        for split in self.splits or ():
            split.close()

    def result(self, **fields):
        """The training function's result: ``fields`` and what the run
        knows (the splits, for the memory table; the scoring's time and
        calls, and the time of each split's first score; whether it was
        interrupted)."""
        return dict(fields, datasets=self.splits, interrupted=bool(stop_requested()),
                    scoring_seconds=sum(score.seconds for score in self._scores),
                    scoring_calls=sum(score.calls for score in self._scores),
                    scoring_first_seconds=sum(score.first_seconds for score in self._scores))


class _OneCall:
    """The classic compiled step as ``train_model(index, count=1)``."""

    steps = 1

    def __init__(self, function):
        self.function = function

    def __call__(self, index, count=1):
        return self.function(index)


def _fewest(splits):
    """The splits (training, validation, test) of fewest examples, named:
    "the validation and test splits (300 examples each)"."""
    fewest = min(split.n_examples for split in splits)
    names = [name for name, split in zip(("training", "validation", "test"), splits)
             if split.n_examples == fewest]
    many = len(names) > 1
    return (f"the {' and '.join(names)} split{'s' if many else ''} ({fewest:,} "
            f"example{'' if fewest == 1 else 's'}{' each' if many else ''})")
