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
streamed from a store agree), the model (its parameters' names, shapes and
dtypes), the batch size, the seed, the augmentation and its seed, and the
program. Where and how the run is held may change: the device count (the
minibatches are the same on any: :mod:`int8store.order.blocks`), the process
count, prefetching, ``--max-device-bytes`` (a split held whole and the same
split streamed).

The file is an ``.npz`` written atomically (a kill during a write keeps the
previous checkpoint whole); its description is JSON in a uint8 array, and
it is read without pickle.
"""

import json
from dataclasses import dataclass, field

import numpy as np

from ..errors import ArgumentError
from ..store.checkpoint import npz_path, save_checkpoint

__all__ = ["RunCheckpoint", "RunState", "run_identity"]

#: Changes when what a checkpoint holds does.
FORMAT = 1
_DESCRIPTION = "int8store_run"


def run_identity(program, splits, params, batch_size, seed=None, augmentation=None,
                 augment_seed=None):
    """What a checkpoint belongs to (see the module docstring): a dict of
    ``program`` (a name), the ``splits`` (train, valid, test: anything with
    ``digest()``, a :class:`~int8store.SharedDataset` or a
    :class:`~int8store.StreamingSplit`), the ``params`` (shared variables),
    the batch size, the seed, the augmentation (its text) and its seed.
    The device count is not part of it: minibatch ``i`` holds the same
    examples on any count (:mod:`int8store.order.blocks`)."""
    return {
        "program": str(program),
        "data": [split.digest() for split in splits],
        "model": [[p.name or f"parameter {i}", list(np.shape(p.get_value(borrow=True))),
                   str(np.asarray(p.get_value(borrow=True)).dtype)] for i, p in enumerate(params)],
        "batch_size": int(batch_size),
        "seed": None if seed is None else int(seed),
        "augmentation": None if not augmentation else str(augmentation),
        "augment_seed": None if not augmentation else int(augment_seed),
    }


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


class RunCheckpoint:
    """The checkpoint of the run training ``params`` (shared variables),
    written at ``path`` (``.npz`` added when missing) for ``identity``
    (:func:`run_identity`).

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

    def __init__(self, path, params, identity):
        self.path = None if path is None else npz_path(path)
        self.params, self.identity = list(params), identity

    def save(self, state):
        """Write ``state`` and the parameters' current values, atomically;
        returns the path (None without one: nothing is written)."""
        if self.path is None:
            return None
        description = {"format": FORMAT, "identity": self.identity, "epoch": int(state.epoch),
                       "step": int(state.step), "loop": state.loop, "best": len(state.best)}
        arrays = {f"param_{i}": np.asarray(p.get_value()) for i, p in enumerate(self.params)}
        arrays.update({f"best_{i}": np.asarray(value) for i, value in enumerate(state.best)})
        text = json.dumps(description, sort_keys=True, allow_nan=True).encode()
        return save_checkpoint(self.path, **arrays,
                               **{_DESCRIPTION: np.frombuffer(text, dtype=np.uint8)})

    def resume(self, path):
        """The :class:`RunState` of the checkpoint at ``path``, its
        parameters' values set in :attr:`params`, once it is checked to
        belong to this run (:class:`~int8store.ArgumentError` names the
        difference otherwise)."""
        path = npz_path(path)
        try:
            with np.load(path, allow_pickle=False) as held:
                arrays = {name: held[name] for name in held.files}
        except FileNotFoundError:
            raise ArgumentError(f"{path}: no such checkpoint") from None
        except (OSError, ValueError, EOFError) as error:
            raise ArgumentError(f"{path}: not a checkpoint int8store can read ({error})") from None
        if _DESCRIPTION not in arrays:
            raise ArgumentError(f"{path}: not a run checkpoint (a best model's parameters, "
                                "perhaps: --save-model writes those; --checkpoint writes runs)")
        try:
            description = json.loads(arrays.pop(_DESCRIPTION).tobytes())
        except ValueError:
            raise ArgumentError(f"{path}: its description is damaged") from None
        if description.get("format") != FORMAT:
            raise ArgumentError(f"{path}: a run checkpoint of format {description.get('format')}; "
                                f"this int8store reads format {FORMAT}")
        _check_same(path, description["identity"], self.identity)
        values = [arrays[f"param_{i}"] for i in range(len(self.params))]
        for param, value in zip(self.params, values):
            param.set_value(value)
        best = [arrays[f"best_{i}"] for i in range(description["best"])]
        return RunState(description["epoch"], description["step"], description["loop"], best)


_WHAT = {"program": "the program", "data": "the data", "model": "the model",
         "batch_size": "the batch size", "seed": "the seed (--seed)",
         "augmentation": "the augmentation (--augment)",
         "augment_seed": "the augmentation's seed (--augment-seed)"}


def _check_same(path, recorded, current):
    """Refuse a checkpoint of another run, naming what differs."""
    for key, what in _WHAT.items():
        then, now = recorded.get(key), current.get(key)
        if then == now:
            continue
        if key == "data":
            names = ("train", "valid", "test")
            differ = [n for n, a, b in zip(names, then or [], now or []) if a != b]
            detail = f"split {', '.join(differ) or 'count'} differs (BLAKE3 {_short(then)} then, " \
                     f"{_short(now)} now)"
        elif key == "model":
            detail = f"parameters {_shapes(then)} then, {_shapes(now)} now"
        else:
            detail = f"{then!r} then, {now!r} now"
        raise ArgumentError(f"{path}: a checkpoint of another run: {what} differs ({detail}); "
                            "resume with what it was written with, or start afresh")


def _short(digests):
    return "/".join(d[:12] for d in digests or [])


def _shapes(model):
    return ", ".join(f"{name} {'x'.join(map(str, shape)) or 'scalar'} {dtype}"
                     for name, shape, dtype in model or [])
