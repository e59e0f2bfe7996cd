"""Examples and their classes: whether a split's labels run in blocks of one
class (:func:`label_runs`), a seeded shuffle of a split's examples
(:func:`drawn_order`), and a seeded cut that takes each class in proportion
(:func:`stratified_pick`). Both draws come from the Feistel network of
:mod:`.shuffle`, keyed by the seed and a stream number of their own, so an
order is a pure function of the seed and the labels, the same with any
numpy.

Examples
--------
>>> labels = np.repeat([0, 1, 2], 20)            # a folder of class folders
>>> label_runs(labels).sorted, label_runs(labels[drawn_order(60, seed=0, stream=0)]).sorted
(True, False)
>>> chosen = stratified_pick(labels, 10, seed=0, stream=0)
>>> np.bincount(labels[chosen]).tolist()         # 10 of 60: each class 3 or 4
[3, 3, 4]
"""

from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError
from .shuffle import check_seed, permutation, permuted

__all__ = ["LabelRuns", "label_runs", "drawn_order", "stratified_pick", "SORTED_FACTOR"]

#: A split counts as sorted by class when a random order of its labels
#: would give at least this many times as many runs of one class.
SORTED_FACTOR = 4
# Positions of a drawn order computed at a time (int64 each, with the walk's temporaries).
_BLOCK = 1 << 20


@dataclass(frozen=True)
class LabelRuns:
    """How a split's labels run: ``runs`` maximal runs of one class over
    ``examples`` examples of ``classes`` classes, the longest of ``longest``
    examples; ``expected``: the runs a random order of the same labels gives
    on average, ``1 + (N**2 - sum(n_c**2)) / N``."""

    examples: int
    classes: int
    runs: int
    longest: int
    expected: float

    @property
    def mean(self):
        """The mean length of a run."""
        return self.examples / self.runs if self.runs else 0.0

    @property
    def sorted(self):
        """Whether the labels run in blocks of one class: two classes or more
        and at most 1/:data:`SORTED_FACTOR` of the runs a random order gives
        (a folder of class folders read in order; arrays concatenated class
        by class). Minibatches of such a split hold one class each."""
        return self.classes >= 2 and self.runs * SORTED_FACTOR <= self.expected

    def describe(self):
        """A few words: ``10 runs of one class, 95 to 120 examples long``."""
        return (f"{self.runs} runs of one class, up to {self.longest} examples long "
                f"(a shuffled order gives runs of {self.examples / self.expected:.1f} on average)")


def label_runs(labels):
    """The :class:`LabelRuns` of ``labels`` (1-D).

    >>> label_runs([0, 0, 1, 1, 1, 0]).runs, label_runs([0, 0, 1, 1, 1, 0]).longest
    (3, 3)
    """
    labels = np.asarray(labels).ravel()
    n = len(labels)
    if n == 0:
        return LabelRuns(0, 0, 0, 0, 0.0)
    ends = np.flatnonzero(labels[1:] != labels[:-1]) + 1
    lengths = np.diff(np.concatenate([[0], ends, [n]]))
    sizes = np.unique(labels, return_counts=True)[1].astype(np.float64)
    expected = 1 + (float(n) ** 2 - float((sizes ** 2).sum())) / n
    return LabelRuns(n, len(sizes), len(lengths), int(lengths.max()), expected)


def drawn_order(n, seed, stream):
    """``[0, n)`` shuffled by ``seed`` (int64): item ``i`` is the example
    that goes to position ``i``. ``stream`` keeps the draws made from one
    seed apart (a split's own shuffle, a cut); the Feistel network
    (:func:`~int8store.order.shuffle.permuted`), computed a block of
    positions at a time, holds 8 bytes an example and a block."""
    check_seed(seed)
    order = np.empty(n, dtype=np.int64)
    for start in range(0, n, _BLOCK):
        stop = min(n, start + _BLOCK)
        order[start:stop] = permuted(np.arange(start, stop), n, seed, stream)
    return order


def stratified_pick(labels, count, seed, stream):
    """A boolean mask of ``count`` examples of ``labels`` that takes each
    class in proportion: class ``c`` of ``n_c`` of the ``N`` examples gives
    ``floor(count * n_c / N)`` or one more (the classes with the largest
    remainders, ties broken by a seeded order of the classes), so within one
    example of its share; which of its examples, by a seeded shuffle.

    Parameters
    ----------
    labels : array of int, shape (N,)
    count : int
        Examples taken, 0 to N.
    seed : int
    stream : int
        Keeps this draw apart from others made from the same seed.
    """
    check_seed(seed)
    labels = np.asarray(labels).ravel()
    n = len(labels)
    if not 0 <= count <= n:
        raise ArgumentError(f"a stratified pick of {count} examples out of {n}: expected 0 to {n}")
    mask = np.zeros(n, dtype=bool)
    if count == 0:
        return mask
    _, inverse, sizes = np.unique(labels, return_inverse=True, return_counts=True)
    inverse = inverse.ravel()
    shares = sizes.astype(np.int64) * count
    take, remainders = shares // n, shares % n
    extra = count - int(take.sum())  # at most the classes with a remainder
    ties = np.empty(len(sizes), dtype=np.int64)
    ties[permutation(len(sizes), seed, stream, index=1)] = np.arange(len(sizes))
    take[np.lexsort((ties, -remainders))[:extra]] += 1
    walk = drawn_order(n, seed, stream)
    classes = inverse[walk]
    by_class = np.argsort(classes, kind="stable")
    firsts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rank = np.empty(n, dtype=np.int64)
    rank[by_class] = np.arange(n) - firsts[classes[by_class]]
    mask[walk[rank < take[classes]]] = True
    return mask
