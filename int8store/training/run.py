"""A checkpoint that holds a training run: what a run stopped anywhere (killed,
pre-empted, Ctrl-C) needs to go on exactly as if it had not stopped.

It holds the parameters' values; the training loop's own numbers (its
early-stopping state: best validation error, patience, iteration, test
score; anything the loop gives as a JSON-able dict); the best model's
parameters; and the data position, a few integers: the seed, the epoch and
the epoch's next minibatch. No iterator state: the order is a pure function
of (seed, epoch, minibatch), so the position says which rows come next, on
any number of devices, resident or streamed.

It also records what it belongs to, and a resumed run is refused with the
difference named when any of it differs: the data (each split's BLAKE3, the
digest a store records of it, so a split held whole and the same split
streamed from a store agree, and the values its codes stand for: the same
codes at another scale are other images), the model (its parameters' names,
shapes and dtypes), the batch size, the seed, the augmentation (as parsed:
however it is written) and its seed, how the splits are scored
(``--classic-count``), and the program. Where and how the run is held may change: the device count (the
minibatches are the same on any: :mod:`int8store.order.blocks`), the process
count, prefetching, ``--max-device-bytes`` (a split held whole and the same
split streamed).

The file is an ``.npz`` written atomically (a kill during a write keeps the
previous checkpoint whole); its description is JSON in a uint8 array, and
it is read without pickle, by int8store's one ``.npz`` reader
(:mod:`int8store.runtime.npz`).

A checkpoint comes back from disks, copies and other people: it is checked
against the run before anything is set, and refused in one line naming it
(:class:`~int8store.SourceFormatError` for a damaged file,
:class:`~int8store.ArgumentError` for one that does not fit the run) when it
does not fit: the archive and each array's header, its description's
fields and their types, the run it belongs to, its data position inside
the training split's epoch, the loop's numbers (:mod:`.early_stopping`),
and each parameter's shape and dtype against the model's, read only then.
"""

import itertools
from dataclasses import dataclass, field

import numpy as np

from ..backend import chosen_backend
from ..errors import ArgumentError, SourceFormatError, shortened, shown
from ..runtime.words import counted
from ..store.checkpoint import (RUN_DESCRIPTION, description_array, npz_path, open_checkpoint,
                                read_description, save_checkpoint)
from .early_stopping import EARLY_STOPPING
from .parameters import parameter_label, read_parameters

__all__ = ["RunCheckpoint", "RunState", "run_identity", "open_run_checkpoint",
           "check_options_resumed"]

#: Changes when what a checkpoint holds does.
FORMAT = 1
#: The largest description read: a few hundred bytes a split and a parameter.
_MOST_DESCRIPTION_BYTES = 1 << 20
#: The fields of a description, and their types.
_FIELDS = {"format": int, "identity": dict, "epoch": int, "step": int, "loop": dict, "best": int}
#: The largest epoch, or minibatch of an epoch, a checkpoint may be at (the
#: order's arithmetic takes them to int64).
_MOST_POSITION = 2 ** 31 - 1


def run_identity(program, splits, params, batch_size, seed=None, augmentation=None,
                 augment_seed=None, normalize="unit", learning_rate=None, classic_count=None):
    """What a checkpoint belongs to (see the module docstring): a dict of
    ``program`` (a name), the ``splits`` (train, valid, test: anything with
    ``digest()``, a :class:`~int8store.SharedDataset` or a
    :class:`~int8store.StreamingSplit`), the ``params`` (shared variables),
    the batch size, the seed, the augmentation (as parsed) and its seed, the
    images' normalization, the learning rate and ``classic_count`` (None:
    not said); and,
    where the seed shuffles, how the training split is held (whole, or
    streamed in shards of so many examples: a stream shuffles its shards,
    then within each, so that the order is the holding's own).
    The device count is not part of it: minibatch ``i`` holds the same
    examples on any count (:mod:`int8store.order.blocks`)."""
    return {
        "program": str(program),
        "data": [split.digest() for split in splits],
        "encoding": [_encoding_key(split.encoding) for split in splits],
        "model": [[p.name or f"parameter {i}", list(np.shape(p.get_value(borrow=True))),
                   str(np.asarray(p.get_value(borrow=True)).dtype)] for i, p in enumerate(params)],
        "batch_size": int(batch_size),
        **_trained_with(seed, augmentation, augment_seed, learning_rate),
        "normalize": _normalization_key(normalize, splits),
        "shuffled_as": None if seed is None or not splits else _held(splits[0]),
        "classic_count": None if classic_count is None else bool(classic_count),
    }


def _trained_with(seed, augmentation, augment_seed, learning_rate):
    """The identity's entries of the options that say what a run trained
    (the seeds, the augmentation as parsed, the learning rate): known from
    the command line, so checked before anything is loaded too
    (:func:`check_options_resumed`)."""
    return {"seed": None if seed is None else int(seed),
            "augmentation": None if not augmentation else _augmentation_key(augmentation),
            "augment_seed": None if not augmentation else int(augment_seed),
            "learning_rate": None if learning_rate is None else float(learning_rate)}


def _normalization_key(normalize, splits):
    """``normalize``, and for a centred one the spread it divides by where
    that is not 128 for levels: int8store 0.3.1 divided levels by 128
    whatever the divisor (:attr:`~int8store.codes.encoding.Encoding.spread`;
    a codebook by half its range, as now), so its checkpoints of such runs
    are refused, not resumed on other values."""
    spreads = {split.encoding.spread for split in splits if not split.encoding.is_codebook} \
        if normalize in ("batch", "dataset", "channel") else set()
    return str(normalize) if spreads <= {128.0} else \
        f"{normalize} / {', '.join(f'{s:g}' for s in sorted(spreads))}"


def _encoding_key(encoding):
    """What values a split's codes stand for, as JSON: its scale, or its
    codebook's BLAKE3 (a checkpoint holds no arrays of the data)."""
    if encoding.is_codebook:
        import blake3

        book = np.ascontiguousarray(encoding.codebook, dtype=np.float64)
        return {"codebook": blake3.blake3(book.tobytes()).hexdigest()[:32],
                "max_error": float(encoding.max_error)}
    return {"offset": int(encoding.offset), "divisor": int(encoding.divisor),
            "precision": encoding.precision}


def _augmentation_key(text):
    """An augmentation's text as parsed, so that ``cutout=3,translate=2``
    and ``translate=2, cutout=3, fill=zero`` are one; text that does not
    parse (a file's) as it is."""
    from ..augment.spec import Augmentation

    try:
        parsed = Augmentation.parse(text, recorded=True)
    except (ArgumentError, TypeError, ValueError):
        return str(text)
    return (f"translate={parsed.translate},fill={parsed.fill},flip={parsed.flip},"
            f"cutout={parsed.cutout}")


def _held(split):
    shard = getattr(split, "shard_size", None)
    if shard is None:
        return "whole"
    # (the short shard was the last in every epoch once: such a run would go on otherwise)
    drawn = ", the short one drawn each epoch" if split.n_examples % int(shard) else ""
    return f"streamed in shards of {counted(int(shard), 'example')}{drawn}"


@dataclass
class RunState:
    """Where a run stopped: minibatch ``step`` of epoch ``epoch`` is the
    next to make (``step`` may be the epoch's minibatch count: the epoch is
    over); ``loop``, the loop's own numbers; ``best``, the best model's
    parameter values (empty when there is none yet)."""

    epoch: int
    step: int
    loop: dict = field(default_factory=dict)
    best: list = field(default_factory=list)


def open_run_checkpoint(path):
    """The run checkpoint at ``path`` (``.npz`` added without it): its
    :class:`~int8store.runtime.npz.NpzArchive` (the headers read) and its
    description, the fields and their types checked; what needs no run.
    Refused when there is none, when it cannot be read and when it is no
    run's (a best model's)."""
    archive = open_checkpoint(path, "checkpoint")
    path = archive.path
    if RUN_DESCRIPTION not in archive:
        raise ArgumentError(f"{path}: not a run checkpoint (a best model's parameters, "
                            "perhaps: --save-model writes those; --checkpoint writes runs)")
    description = read_description(archive, RUN_DESCRIPTION, _MOST_DESCRIPTION_BYTES)
    if not isinstance(description, dict):
        raise SourceFormatError(f"{path}: its description is a "
                                f"{type(description).__name__}, expected an object")
    if description.get("format") != FORMAT:
        raise ArgumentError(f"{path}: a run checkpoint of format "
                            f"{shown(description.get('format'))}; this int8store "
                            f"reads format {FORMAT}")
    for name, kind in _FIELDS.items():
        value = description.get(name)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise SourceFormatError(f"{path}: its description's {name} is "
                                    f"{shown(value)}, expected an "
                                    f"{'integer' if kind is int else 'object'}")
    return archive, description


class RunCheckpoint:
    """The checkpoint of the run training ``params`` (shared variables),
    written at ``path`` (``.npz`` added when missing) for ``identity``
    (:func:`run_identity`). A checkpoint resumed must hold the loop's
    numbers named in ``loop`` (keys of
    :data:`~int8store.training.early_stopping.EARLY_STOPPING`), no others,
    each what it may be (None: any JSON-able dict), and a data position
    within an epoch of ``batches`` minibatches (None: any).

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from int8store.backend import activate
    >>> w = activate().shared(np.zeros(3), name="w")
    >>> identity = {"program": "demo", "data": [], "model": [["w", [3], "float64"]],
    ...             "batch_size": 10, "seed": None, "augmentation": None, "augment_seed": None}
    >>> run = RunCheckpoint(os.path.join(tempfile.mkdtemp(), "run"), [w], identity)
    >>> path = run.save(RunState(epoch=2, step=5, loop={"patience": 100}))
    >>> w.set_value(np.ones(3))
    >>> state = run.resume(path)
    >>> (state.epoch, state.step, state.loop), w.get_value().tolist()
    ((2, 5, {'patience': 100}), [0.0, 0.0, 0.0])
    """

    def __init__(self, path, params, identity, loop=None, batches=None, shard_limit=None):
        self.path = None if path is None else npz_path(path)
        self.params, self.identity = list(params), identity
        self.loop = None if loop is None else list(loop)
        self.batches = batches
        # (the examples a shard holds where that cut the batch size: a
        # checkpoint's larger batch needs room in the shards, not --batch-size)
        self.shard_limit = shard_limit

    def save(self, state):
        """Write ``state`` and the parameters' current values, atomically;
        returns the path (None without one: nothing is written; None too
        for a write that failed within
        :func:`~int8store.training.checkpoint_writes`, which said so)."""
        if self.path is None:
            return None
        loop = _loop_written(self.path, state.loop)
        description = {"format": FORMAT, "identity": self.identity, "epoch": int(state.epoch),
                       "step": int(state.step), "loop": loop, "best": len(state.best)}
        # (borrowed, then copied to the host: get_value() copied each on the
        # device first, an XLA program compiled a parameter shape)
        arrays = {f"param_{i}": np.array(p.get_value(borrow=True))
                  for i, p in enumerate(self.params)}
        arrays.update({f"best_{i}": np.asarray(value) for i, value in enumerate(state.best)})
        return save_checkpoint(self.path, **arrays,
                               **{RUN_DESCRIPTION: description_array(description)})

    def resume(self, path):
        """The :class:`RunState` of the checkpoint at ``path``, its
        parameters' values set in :attr:`params`, once all of it is checked
        to fit this run (see the module docstring); nothing is set
        otherwise."""
        archive, description = open_run_checkpoint(path)
        path = archive.path
        _check_same(path, description["identity"], self.identity, shard_limit=self.shard_limit)
        self._check_position(path, description["epoch"], description["step"])
        self._check_loop(path, description["loop"])
        n, best = len(self.params), description["best"]
        if best not in (0, n):
            raise SourceFormatError(f"{path}: holds {shown(best)} best-model parameters; a model "
                                    f"of {n} has {n}, or none before its first validation")
        keys = [f"param_{i}" for i in range(n)] + [f"best_{i}" for i in range(best)]
        extra = sorted(set(archive.keys()) - set(keys) - {RUN_DESCRIPTION})
        if extra:
            named = ", ".join(shortened(key, 60) for key in extra[:4]) + (
                f" and {len(extra) - 4} more" if len(extra) > 4 else "")
            raise SourceFormatError(f"{path}: holds {named}, which no checkpoint of this model "
                                    "holds")
        labels = [parameter_label(i, p) for i, p in enumerate(self.params)]
        values = read_parameters(archive, self.params + self.params[:best], keys, "checkpoint",
                                 labels=labels + [f"best-model {label}" for label in labels])
        for param, value in zip(self.params, values):
            param.set_value(value)
        return RunState(description["epoch"], description["step"], description["loop"],
                        values[n:])

    def _check_position(self, path, epoch, step):
        """Refuse a data position outside the data: epoch 1 or more, the
        epoch's minibatch from 0 to its count (the epoch over)."""
        if not 1 <= epoch <= _MOST_POSITION:
            raise SourceFormatError(f"{path}: its data position is at epoch {shown(epoch)}, "
                                    f"expected 1 to {_MOST_POSITION}")
        if not 0 <= step <= (self.batches if self.batches is not None else _MOST_POSITION):
            within = ("" if self.batches is None else
                      f": an epoch of the training split has {self.batches} minibatches at "
                      f"batch size {self.identity.get('batch_size')}")
            raise SourceFormatError(f"{path}: its data position, minibatch {shown(step)} of epoch "
                                    f"{shown(epoch)}, is outside the data{within}")

    def _check_loop(self, path, loop):
        """Refuse a loop whose numbers are not the ones this run reads, or
        one of the classic loop's numbers outside what it may be."""
        if self.loop is not None and sorted(loop) != sorted(self.loop):
            raise SourceFormatError(
                f"{path}: its early-stopping state holds "
                f"{shortened(', '.join(shown(name) for name in loop)) or 'nothing'}, expected "
                f"{', '.join(self.loop)}")
        for name in loop:
            refusal = _refusal(name, loop[name])
            if refusal:
                raise SourceFormatError(f"{path}: its early-stopping state's {name} is {refusal}")


def _loop_written(path, loop):
    """The loop's numbers as a checkpoint holds them: numpy's scalars as
    Python's (``numpy.float32`` from a mean of float32 errors, ``numpy.int64``:
    JSON takes neither, and the write failed with a traceback), and each of
    the classic loop's numbers refused here, naming it, where a resume would
    refuse the file (a ``best_validation_loss`` above 1, a loss where the
    loop keeps an error rate, was written at every validation, and no resume
    could read it)."""
    written = {}
    for name, value in dict(loop).items():
        if isinstance(value, np.generic) and value.ndim == 0:
            value = value.item()
        refusal = _refusal(name, value)
        if refusal:
            raise ArgumentError(f"{path}: not written: the loop's {name} is {refusal}, and a "
                                "checkpoint that holds it could not be resumed "
                                "(int8store.training.EARLY_STOPPING)")
        written[name] = value
    return written


def _refusal(name, value):
    """Why ``value`` cannot be the loop's number ``name`` (None where it can,
    or where ``name`` is none of the classic loop's: a loop of the user's)."""
    return EARLY_STOPPING[name].refusal(value) if name in EARLY_STOPPING else None


_WHAT = {"program": "the program", "data": "the data", "model": "the model",
         "batch_size": "the batch size", "seed": "the seed (--seed)",
         "augmentation": "the augmentation (--augment)",
         "augment_seed": "the augmentation's seed (--augment-seed)",
         "normalize": "the images' normalization (--normalize)",
         "learning_rate": "the learning rate (--learning-rate)",
         "shuffled_as": "how the shuffled training split is held (--max-device-bytes, "
                        "--max-memory)",
         "encoding": "the values the images' codes stand for (their scale or codebook)",
         "classic_count": "how the splits are scored (--classic-count)"}
#: What checkpoints of int8store 0.3.0 and before do not record (not checked then).
_RECORDED_SINCE_0_3_1 = ("normalize", "learning_rate", "shuffled_as", "encoding",
                         "classic_count")


def check_options_resumed(path, program=None, seed=None, augment=None, augment_seed=None,
                          learning_rate=None, normalize=None, classic_count=None):
    """Refuse the run checkpoint at ``path`` where the ``program`` (where
    given) or the options that say what it trained (the seeds, the
    augmentation, the learning rate, the normalization's name, how the
    splits are scored) are not its run's, before anything is loaded or
    compiled (the rest is checked once the data and the model are:
    :meth:`RunCheckpoint.resume`)."""
    archive, description = open_run_checkpoint(path)
    # (--augment-seed defaults to 1 where --augment is given: the run's own default)
    current = _trained_with(seed, augment, 1 if augment_seed is None else augment_seed,
                            learning_rate)
    if program is not None:
        current["program"] = str(program)
    if classic_count is not None:
        current["classic_count"] = bool(classic_count)
    # (its name only: a centred normalization's key may name the spread, the data's)
    recorded = description["identity"].get("normalize")
    if normalize is not None and str(recorded).split(" / ")[0] != str(normalize):
        current["normalize"] = str(normalize)
    _check_same(archive.path, description["identity"], current, keys=current)


def _check_same(path, recorded, current, keys=None, shard_limit=None):
    """Refuse a checkpoint of another run, naming what differs (of ``keys``
    only, where given). ``shard_limit``: the examples a shard holds, where
    that cut this run's batch size."""
    for key, what in _WHAT.items():
        if keys is not None and key not in keys:
            continue
        then, now = recorded.get(key), current.get(key)
        if key == "augmentation" and isinstance(then, str):  # (0.3.0 recorded it as given)
            then = _augmentation_key(then)
        if then == now or (key in _RECORDED_SINCE_0_3_1 and key not in recorded):
            continue
        if key == "data":
            names = ("train", "valid", "test")
            listed = then if isinstance(then, list) else []  # (a file's: anything)
            differ = [n for n, a, b in zip(names, listed, now or []) if a != b]
            held = ("other splits" if not differ else
                    f"{'split' if len(differ) == 1 else 'splits'} {', '.join(differ)} "
                    f"{'holds' if len(differ) == 1 else 'hold'} other examples or labels")
            detail = f"{held}: BLAKE3 {_short(then)} then, {_short(now)} now"
        elif key == "model":
            detail = _model_difference(then, now)
        else:  # (None: an option not given, the seed's)
            detail = " then, ".join("not given" if v is None else shown(v) for v in (then, now)) \
                + " now"
        float_type = _written_float_type(then, now) if key == "model" else None
        advice = "resume with what it was written with" if float_type is None else (
            f"it was written under floatX={float_type}: resume with "
            f"{chosen_backend().upper()}_FLAGS=floatX={float_type}")
        if key == "batch_size" and isinstance(then, int):  # (on other devices, say)
            advice = (f"resume with --batch-size {then} (the batch the run took, after any cut "
                      "to a split's size or to a multiple of its devices)")
            if shard_limit is not None and then > shard_limit:  # (--batch-size cannot help)
                advice = (f"a shard here holds {shard_limit} examples (--max-device-bytes, "
                          f"--max-memory), fewer than the {then} a minibatch of the run took: "
                          "resume with shards that hold them (a larger --max-device-bytes) or "
                          "the splits held whole")
        raise ArgumentError(f"{path}: a checkpoint of another run: {what} differs ({detail}); "
                            f"{advice}, or start afresh")


def _written_float_type(then, now):
    """The ``floatX`` a checkpoint's model was written under where it
    differs from this one's in its parameters' floating dtype only (the
    names and shapes alike); None otherwise."""
    try:
        if len(then) != len(now):
            return None
        written = set()
        for (name, shape, dtype), (name_now, shape_now, dtype_now) in zip(then, now):
            if [name, list(shape)] != [name_now, list(shape_now)]:
                return None
            if dtype != dtype_now:
                written.add(dtype)
    except (TypeError, ValueError):  # (not what a checkpoint writes)
        return None
    return written.pop() if len(written) == 1 and written <= {"float16", "float32",
                                                              "float64"} else None


def _short(digests):
    if not isinstance(digests, list) or not all(isinstance(d, str) for d in digests):
        return shown(digests)
    return shortened("/".join(d[:12] for d in digests))


#: The most characters a model's difference takes in a message: whole
#: parameters, as many as fit, the others counted.
_MOST_DIFFERENCE = 160


def _model_difference(then, now):
    """The parameters that differ, each as it was and is (not the whole
    list, whose shortening could cut out the difference): as many whole
    entries as fit in :data:`_MOST_DIFFERENCE` characters, the others
    counted (a shortening of the text cut an entry in two)."""
    try:
        pairs = list(itertools.zip_longest(then or [], now or []))
        entries = [_difference(i, a, b) for i, (a, b) in enumerate(pairs) if a != b]
    except (TypeError, ValueError):  # (not what a checkpoint writes: shown as it is)
        return f"parameters {shown(then)} then, {shown(now)} now"
    kept = entries[:1]
    for entry in entries[1:]:
        after = len(entries) - len(kept) - 1
        if len("; ".join(kept + [entry]) + (f"; and {after} more" if after else "")) \
                > _MOST_DIFFERENCE:
            break
        kept.append(entry)
    left = len(entries) - len(kept)
    return "; ".join(kept) + (f"; and {left} more" if left else "")


def _difference(index, then, now):
    """``parameter 2: 8x4x5x5 float64 then, 8x5x5x5 float64 now``, the
    parameter's name after its number where it has one (``parameter 0 W``),
    and each side's name where they differ."""
    sides = [None if entry is None else _parameter(entry) for entry in (then, now)]
    names = {side[0] for side in sides if side is not None}
    label = f"parameter {index}"
    if None not in sides and len(names) == 1:
        name = names.pop()
        label += "" if name == label else f" {name}"
        was, is_ = (side[1] for side in sides)
    else:
        was, is_ = ("none" if side is None else " ".join(side) for side in sides)
    return shortened(f"{label}: {was} then, {is_} now", 100)


def _parameter(entry):
    """A model entry of a run's identity as ``(name, "8x4x5x5 float64")``."""
    name, shape, dtype = entry
    shape = "x".join(map(str, shape)) or "scalar"
    return shortened(str(name), 40), f"{shortened(shape, 40)} {shortened(str(dtype), 20)}"
