"""Which of the source's examples each final split holds, and in which
order: the one place where a source sorted by class is shuffled and where
the validation and test splits are cut from train, for ``load_data`` and
``int8store convert`` alike.

The rules, in the order they apply:

1. **Shuffle** each split of the source whose labels run in blocks of one
   class (:func:`~int8store.order.classes.label_runs`: a folder or archive
   of class folders, arrays concatenated class by class), by a Feistel
   permutation of its examples from ``seed``; unless the source's order is
   kept (``SourceData.keeps_order``: IDX, ``mnist.pkl.gz``, CIFAR-10, the
   digits, a store) or ``keep_order`` asks to.
2. **Cut a test split** from train when the source has none: a sixth by
   default (``test_size`` otherwise), a stratified draw, seeded. A folder
   of class folders, or one pair of arrays, then trains and reports its
   test error as a source with all three splits does.
3. **Cut a validation split** from train when the source has none: a sixth
   by default (``valid_size`` otherwise). From a source whose order is kept
   and with no seed given, the last ones, as the classic ``mnist.pkl.gz``
   split MNIST's 60,000 training images; otherwise a stratified draw
   (:func:`~int8store.order.classes.stratified_pick`: each class in
   proportion, within one example), seeded.

Every draw takes ``seed`` (``valid_seed``; default :data:`DEFAULT_SEED`)
and a stream of its own, so the result is a pure function of the seed and
the source: the same command gives the same splits, in the same order.
"""

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..codes.vocabulary import SPLITS
from ..errors import ArgumentError, SourceFormatError
from ..order.classes import drawn_order, label_runs, stratified_pick

__all__ = ["Arrangement", "Drawn", "arrange", "check_examples", "describe_cuts", "describe_order",
           "validation_count", "VALID_SHARE",
           "DEFAULT_SEED", "SHUFFLE_STREAM", "TEST_STREAM", "VALID_STREAM"]

#: Without a validation split, this share of train becomes one: MNIST's
#: 60,000 training images split 50,000/10,000 as in the classic mnist.pkl.gz.
VALID_SHARE = 6
#: The seed of the planning step's draws when none is given.
DEFAULT_SEED = 0
#: The streams of the draws (the Feistel network's epoch argument): the
#: shuffle of each split of the source (train, valid, test, then the others
#: by their place), the test cut and the validation cut.
SHUFFLE_STREAM = 0xC1A55000
TEST_STREAM, VALID_STREAM = 0xC1A55100, 0xC1A55101


@dataclass
class Drawn:
    """A final split: the examples ``rows`` of the source's split ``source``,
    in that order (None: all of them, in order); ``shuffled`` when that
    order was drawn."""

    source: str
    rows: Optional[np.ndarray] = None
    shuffled: bool = False

    def labels(self, splits):
        labels = splits[self.source].labels
        return labels if self.rows is None else labels[self.rows]

    def part(self, mask):
        """The examples of this split where ``mask`` is true, in order."""
        rows = np.flatnonzero(mask) if self.rows is None else self.rows[mask]
        return Drawn(self.source, rows, self.shuffled)


@dataclass
class Arrangement:
    """What :func:`arrange` settled: ``drawn`` (``{final split: Drawn}``, in
    the order of :data:`~int8store.codes.vocabulary.SPLITS`, then the
    source's others), ``order`` (what the store's manifest records: the
    ``seed`` of the draws or None, the final splits ``shuffled``, and how
    ``valid`` and ``test`` were made: ``"source"``, ``"last"``,
    ``"stratified"``), and ``validation``, in words."""

    drawn: dict
    order: dict
    validation: str
    test: str = "the source's own"


def arrange(source, valid_size=None, valid_seed=None, test_size=None, keep_order=False):
    """The :class:`Arrangement` of ``source`` (a :class:`~int8store.sources.SourceData`)."""
    splits, origin = source.splits, source.origin
    if "train" not in splits:
        raise SourceFormatError(f"{origin}: has splits {', '.join(splits)}; a train split is needed")
    seed = DEFAULT_SEED if valid_seed is None else valid_seed
    kept = keep_order or source.keeps_order
    drawn = {}
    for number, (name, split) in enumerate(splits.items()):
        runs = label_runs(split.labels)
        if not kept and (runs.sorted or (source.by_class and runs.classes >= 2)):
            drawn[name] = Drawn(name, drawn_order(split.count, seed, _shuffle_stream(name, number)),
                                shuffled=True)
        else:
            drawn[name] = Drawn(name)
    cuts = {name: "source" for name in ("valid", "test") if name in splits}
    test = "the source's own"
    if test_size is not None and "test" in splits:
        raise ArgumentError(f"{origin}: already has a test split; test_size (--test-size) "
                            "applies only to sources without one")
    if "test" not in splits:
        train = drawn["train"]
        labels = train.labels(splits)
        n = len(labels)
        count, asked = _cut_count(test_size, n, "test_size", origin, 3, " and no test split: too "
                                  "few to cut a test and a validation split from")
        chosen = stratified_pick(labels, count, seed, TEST_STREAM)
        drawn["train"], drawn["test"] = train.part(~chosen), train.part(chosen)
        cuts["test"] = "stratified"
        test = (f"{count:,} of the {n:,} training examples ({asked}), stratified by class, drawn "
                f"with seed {seed}")
    if "valid" in splits:
        if valid_size is not None or (valid_seed is not None and not _draws(drawn, cuts)):
            raise ArgumentError(
                f"{origin}: already has a validation split; valid_size and valid_seed "
                "(--valid-size, --seed) apply only to sources without one, or to one "
                "that is shuffled or cut")
        validation = "the source's own"
    else:
        train = drawn["train"]
        labels = train.labels(splits)
        n = len(labels)
        left = "test" not in splits  # (a test split was cut first)
        count, asked = _cut_count(valid_size, n, "valid_size", origin, 2,
                                  f"{' (after the test split)' if left else ''}: too few to "
                                  "draw a validation split from")
        if source.keeps_order and valid_seed is None:
            chosen = np.zeros(n, dtype=bool)
            chosen[n - count:] = True
            cuts["valid"], picked = "last", "the last ones"
        else:
            chosen = stratified_pick(labels, count, seed, VALID_STREAM)
            cuts["valid"], picked = "stratified", f"stratified by class, drawn with seed {seed}"
        drawn["train"], drawn["valid"] = train.part(~chosen), train.part(chosen)
        what = "training examples left by the test split" if left else "training examples"
        validation = f"{count:,} of the {n:,} {what} ({asked}), {picked}"
    ordered = [n for n in SPLITS if n in drawn] + [n for n in drawn if n not in SPLITS]
    drawn = {name: drawn[name] for name in ordered}
    order = {"seed": seed if _draws(drawn, cuts) else None,
             "shuffled": [name for name, d in drawn.items() if d.shuffled],
             **{name: cuts[name] for name in ("valid", "test") if name in cuts}}
    return Arrangement(drawn, order, validation, test)


def _cut_count(size, n, name, origin, least, too_few):
    """How many of ``n`` training examples a split cut from them takes
    (``size``: a count, a fraction, or None for a sixth, at least one), and
    how that was asked, in words; fewer than ``least`` examples are
    refused (``too_few`` says why)."""
    if size is not None:
        read = "a fraction" if isinstance(size, (float, np.floating)) else "a count"
        return validation_count(size, n, name), f"{name}={size!r}, read as {read}"
    if n < least:
        raise SourceFormatError(f"{origin}: {n} training example{'s' if n != 1 else ''}{too_few}; "
                                f"at least {least} are needed")
    if n // VALID_SHARE:
        return n // VALID_SHARE, "a sixth, the default"
    return 1, "one: a sixth, the default, would be none"


def describe_order(order):
    """How a store's examples were ordered (its manifest's ``order``), in words.

    >>> describe_order({"seed": 0, "shuffled": ["train", "valid"], "valid": "stratified"})
    'train, valid shuffled with seed 0 (the source ran by class; --keep-order keeps its order)'
    """
    if order.get("shuffled"):
        return (f"{', '.join(order['shuffled'])} shuffled with seed {order['seed']} (the "
                "source ran by class; --keep-order keeps its order)")
    return "the source's own"


def describe_cuts(order):
    """How a store's validation and test splits were made (its manifest's
    ``order``), in words; "" where it does not say.

    >>> describe_cuts({"seed": 0, "shuffled": [], "valid": "stratified", "test": "source"})
    "valid: drawn from train stratified by class, seed 0; test: the source's own"
    """
    made = {"source": "the source's own", "last": "the last examples of train",
            "stratified": f"drawn from train stratified by class, seed {order.get('seed')}"}
    return "; ".join(f"{split}: {made[order[split]]}" for split in ("valid", "test")
                     if split in order)


def _draws(drawn, cuts):
    """Whether a draw took the seed: a shuffle or a stratified cut."""
    return any(d.shuffled for d in drawn.values()) or "stratified" in cuts.values()


def _shuffle_stream(name, number):
    known = SPLITS.index(name) if name in SPLITS else len(SPLITS) + number
    return SHUFFLE_STREAM + known


def check_examples(origin, counts):
    """Raise unless every split of ``counts`` (``{name: examples}``) holds an
    example: an empty one has nothing to train on or to score."""
    empty = [name for name, count in counts.items() if not count]
    if empty:
        raise SourceFormatError(
            f"{origin}: split{'s' if len(empty) > 1 else ''} {', '.join(map(repr, empty))} "
            f"hold{'' if len(empty) > 1 else 's'} no examples; every split needs at least one")


def validation_count(size, n_train, what="valid_size"):
    """How many of ``n_train`` training examples a validation split of ``size``
    takes: an integer count in 1..n_train-1, or a fraction strictly between 0
    and 1 (a float: ``1.0`` is refused rather than read as one example)."""
    if isinstance(size, (float, np.floating)):
        if 0 < size < 1:
            count = int(round(size * n_train))
            if 0 < count < n_train:
                return count
    elif isinstance(size, (int, np.integer)) and not isinstance(size, bool) and 0 < size < n_train:
        return int(size)
    option = {"valid_size": " (--valid-size)", "test_size": " (--test-size)"}.get(what, "")
    raise ArgumentError(
        f"{what}={size!r}{option}: expected an integer count in 1..{n_train - 1} (of the "
        f"{n_train} training examples) or a fraction strictly between 0 and 1 that leaves "
        "both splits non-empty"
    )
