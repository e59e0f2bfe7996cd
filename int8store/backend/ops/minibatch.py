"""The fixed-size minibatch op: ``size`` rows from ``index * stride``
(``stride`` is ``size`` for the classic minibatches, 1 for a window that
starts anywhere, as :func:`~int8store.training.evaluate_in_chunks` takes).

A plain slice with a symbolic start has a symbolic length, which JAX refuses
to trace; this op's output has ``size`` rows in every mode, a length its
type states in int8store's JAX mode (:class:`Minibatch`'s ``static``). On
the C backend it is a view (no copy); in JAX mode it is
``jax.lax.dynamic_slice_in_dim`` (see :mod:`int8store.backend.jax.conversions`).

An index past the end is an error in every mode. JAX's dynamic slice would
silently clamp the start and train on repeated examples, so int8store's JAX
mode checks the index on the host before each call (see
:mod:`int8store.backend.jax.mode`), and the op refuses to be converted for JAX without that
check.

:func:`minibatch_of_slice` recognises the classic tutorials' slice
``data[index * size:(index + 1) * size]``: int8store's JAX mode turns it into
this op, so the classic ``givens`` run on JAX unchanged; the other slices
of the rows that are a minibatch or a window (``data[(i + 1) * size:(i + 2)
* size]``, ...) it reads with :mod:`.slice_forms`.
"""

import functools

import numpy as np

from ...errors import ArgumentError, MinibatchIndexError
from ..setup.activation import activate
from . import numba

_api = activate()
at = _api.at

__all__ = ["Minibatch", "minibatch", "check_index", "minibatch_of_slice", "same_value",
           "shuffled_epoch_and_index"]


def check_index(index, size, rows, name="data", stride=None, short=None):
    """Raise :class:`MinibatchIndexError` unless the ``size`` rows from
    ``index * stride`` (``stride`` defaults to ``size``) lie in ``rows`` rows
    (``short``: the slice's length, where the data holds fewer rows)."""
    index, stride = int(index), size if stride is None else stride
    if index < 0 or index * stride + size > rows:
        if short is not None:
            raise MinibatchIndexError(
                f"{name}: index {index} is past the data: its {rows} rows are fewer than a "
                f"slice of {short}, so only index 0 (all of them, as the classic's short "
                "slice) exists")
        if 0 < rows < size:  # (no index fits: "outside 0..-1" was said)
            raise MinibatchIndexError(
                f"{name}: its {rows} rows cannot fill a minibatch of {size}: use a batch size "
                f"of {rows} or less")
        if stride == size:
            raise MinibatchIndexError(
                f"{name}: minibatch index {index} is outside 0..{rows // size - 1} "
                f"({rows} rows in minibatches of {size})")
        raise MinibatchIndexError(
            f"{name}: a window of {size} rows from row {index * stride} does not fit in "
            f"{rows} rows (starts 0..{rows - size})")


def _too_few_rows(data, rows, size):
    """The refusal of a minibatch of ``size`` from ``data``'s ``rows`` rows,
    fewer, where the graph is built."""
    return ArgumentError(f"{data.name or 'data'}: {rows} rows cannot fill a minibatch of {size}")


def shuffled_epoch_and_index(index, batches, name="data"):
    """``(epoch, minibatch in the epoch)`` of a shuffled split's minibatch
    ``index`` (``epoch * batches + minibatch``); a negative index is refused."""
    index = int(index)
    if index < 0:
        raise MinibatchIndexError(f"{name}: minibatch index {index} of a shuffled split is "
                                  f"negative (it counts epochs from the first: epoch * "
                                  f"{batches} + minibatch)")
    return divmod(index, batches)


class Minibatch(_api.module("graph.op").Op):
    """``data[index * stride:index * stride + size]``, always of length
    ``size`` (``stride`` defaults to ``size``: minibatch ``index``).

    With a ``seed`` (a shuffled split, ``stride == size``), ``index`` counts
    minibatches from the first epoch's first, ``batches`` an epoch: the rows
    are those at positions ``[i * size, (i + 1) * size)`` of epoch ``e``'s
    shuffle of the split's ``rows`` real rows, within their classes modulo 8
    (:func:`int8store.order.shuffle.permuted_in_classes`: the same order over
    1, 2, 4 or 8 devices), where
    ``e, i = divmod(index, batches)``. The split's order otherwise.

    Its length is not part of its type, as the classic slice's was not, so
    the graph around it compiles as the classic's did (with a length the
    type knows, the libraries turned a mean over the minibatch into a
    product by a constant, rounding a cost otherwise than the classic
    graph). ``static``: it is (int8store's JAX mode asks for it, where a
    length must be known to trace the program: :mod:`int8store.backend.jax.mode`).

    ``short``: the length of the classic slice this op stands for where the
    data holds fewer rows (``size`` is then all of them; never static)."""

    __props__ = ("size", "stride", "seed", "rows", "batches", "short", "static")

    def __init__(self, size, stride=None, seed=None, rows=None, batches=None, short=None,
                 static=False):
        stride = size if stride is None else stride
        if int(size) != size or size < 1 or int(stride) != stride or stride < 1:
            raise ArgumentError(f"minibatch size and stride must be positive integers, got "
                                f"{size!r} and {stride!r}")
        self.size, self.stride = int(size), int(stride)
        self.seed = None if seed is None else int(seed)
        self.rows = None if rows is None else int(rows)
        self.batches = None if batches is None else int(batches)
        self.short = None if short is None else int(short)
        self.static = bool(static) and self.short is None
        if self.seed is not None and (self.stride != self.size or not self.batches
                                      or not self.rows):
            raise ArgumentError("a shuffled minibatch needs stride == size, the split's rows "
                                "and its minibatches per epoch")
        # A view of the data, unless rows are gathered from a shuffle.
        self.view_map = {0: [0]} if self.seed is None else {}

    def make_node(self, data, index):
        data = at.as_tensor_variable(data)
        index = at.as_tensor_variable(index)
        if index.ndim != 0 or not index.dtype.startswith(("int", "uint")):
            raise ArgumentError(f"the minibatch index must be an integer scalar, got {index.type}")
        if data.ndim < 1:
            raise ArgumentError("minibatches are taken along the first axis of an array")
        rows = data.type.shape[0]
        if rows is not None and rows < self.size:
            raise _too_few_rows(data, rows, self.size)
        length = self.size if self.static else None
        out = at.TensorType(data.dtype, shape=(length,) + tuple(data.type.shape[1:]))()
        return _api.module("graph.basic").Apply(self, [data, index], [out])

    def epoch_and_index(self, index, name="data"):
        """``(epoch, minibatch in the epoch)`` of a shuffled minibatch's
        index (which counts epochs from the first: a negative one is refused)."""
        if self.seed is None:
            return 0, int(index)
        return shuffled_epoch_and_index(index, self.batches, name)

    def perform(self, node, inputs, outputs):
        data, index = inputs
        epoch, index = self.epoch_and_index(index, node.inputs[0].name or "data")
        check_index(index, self.size, data.shape[0], node.inputs[0].name or "data", self.stride,
                    self.short)
        start = index * self.stride
        if self.seed is None:
            outputs[0][0] = data[start:start + self.size]
            return
        outputs[0][0] = data[_epoch_order(self.rows, self.seed, epoch)[start:start + self.size]]

    def infer_shape(self, *node_and_shapes):
        # Aesara passes (fgraph, node, shapes); PyTensor (node, shapes).
        node, shapes = node_and_shapes[-2:]
        length = (at.constant(self.size, dtype="int64") if self.static
                  else _api.module("tensor.shape").Shape_i(0)(node.outputs[0]))
        return [(length,) + tuple(shapes[0][1:])]

    def with_static_length(self):
        """This op with its length in its type (see the class docstring)."""
        props = {name: getattr(self, name) for name in self.__props__}
        return Minibatch(**{**props, "static": True})

    def grad(self, inputs, output_grads):
        # The stored images are data, never parameters: nothing to differentiate.
        gradient = _api.module("gradient")
        DisconnectedType, grad_not_implemented = gradient.DisconnectedType, gradient.grad_not_implemented
        return [grad_not_implemented(self, 0, inputs[0],
                                     "minibatches of stored data are not differentiable"),
                DisconnectedType()()]

    def connection_pattern(self, node):
        return [[True], [False]]


# Changes whenever the compiled minibatch does, or moves (Numba's disk cache
# names the module that defined it: 1 was int8store.backend.numba_ops).
_NUMBA_CACHE_VERSION = 3


def _in_numba(op, node, **kwargs):
    """The plain minibatch compiled by Numba (PyTensor's Numba mode): a view,
    its index checked as in the C backend (a refusal is made in Python, in
    an object-mode block: Numba raises constant messages, which cannot name
    the index and the rows). A shuffled one runs its ``perform`` (the
    Feistel walk is numpy's)."""
    if op.seed is not None:
        return numba.object_mode(op, node, **kwargs)
    import numba as numba_library
    from pytensor.link.numba.dispatch.basic import numba_njit

    size, stride, short = op.size, op.stride, op.short
    name = node.inputs[0].name or "data"

    @numba_njit
    def minibatch(data, index):
        start = index.item() * stride
        if start < 0 or start + size > data.shape[0]:
            at, rows = index.item(), data.shape[0]
            with numba_library.objmode():
                check_index(at, size, rows, name, stride, short)
        return data[start:start + size]

    return minibatch, (f"int8store.Minibatch({size}, {stride}, {name!r}, {op.short}) "
                       f"v{_NUMBA_CACHE_VERSION}")


numba.declare(Minibatch, _in_numba)


@functools.lru_cache(maxsize=4)
def _epoch_order(rows, seed, epoch):
    """Epoch ``epoch``'s order of a shuffled split's ``rows`` rows, made once
    for the epoch's minibatches of images and of labels (made a minibatch at
    a time, in Python, it took 1.7 ms a step: 16 times the step of the
    digits' logistic regression)."""
    from ...order.shuffle import permuted_in_classes

    order = permuted_in_classes(np.arange(rows), rows, seed, epoch)
    order.flags.writeable = False
    return order


def minibatch(data, index, size, stride=None, keep_short=False):
    """Symbolic minibatch ``index`` of ``data`` (see :class:`Minibatch`): in
    a shuffled split's order when ``data`` holds one's rows
    (:meth:`~int8store.SharedDataset.shuffle`: its
    :class:`~.shared_rows.SharedRows` say so) and the minibatch is whole.
    ``keep_short``: where ``data`` holds fewer rows than one minibatch, all
    of them at index 0 (any other index refused), as the classic slice
    gives them, rather than refused as the graph is built: the classic
    compiled such a slice, and its loop, counting no whole minibatch, never
    called it."""
    rows = data.type.shape[0]
    if keep_short and rows is not None and rows < size:
        return Minibatch(rows, stride or size, short=size)(data, index)
    dataset = getattr(data, "shuffled", None)  # (a shuffled split's rows: SharedRows)
    if dataset is not None and (stride is None or stride == size):
        batches = dataset.n_batches(size)
        if not batches:  # (the op's own refusal named stride and minibatches per epoch)
            raise _too_few_rows(data, dataset.n_examples, size)
        return Minibatch(size, size, dataset.seed, dataset.n_examples, batches)(data, index)
    return Minibatch(size, stride)(data, index)


def minibatch_of_slice(node):
    """``Minibatch(size)(data, index)`` for a node ``data[index * size:(index + 1) * size]``
    (the classic tutorials' slice; ``size`` a constant) or ``data[begin:begin + size]``
    with ``begin = index * size`` (the deep-network tutorials'), else None.
    A slice longer than the data is all of it at index 0, as the classic's
    short slice (``keep_short`` of :func:`minibatch`)."""
    ScalarFromTensor = _api.module("tensor.basic").ScalarFromTensor
    Subtensor = _api.module("tensor.subtensor").Subtensor

    if not isinstance(node.op, Subtensor) or len(node.op.idx_list) != 1:
        return None
    whole = node.op.idx_list[0]
    if not (isinstance(whole, slice) and whole.start is not None and whole.stop is not None
            and whole.step is None):
        return None
    data, start, stop = node.inputs
    start, stop = (v.owner.inputs[0] if v.owner and isinstance(v.owner.op, ScalarFromTensor)
                   else None for v in (start, stop))
    first, factor = _times_constant(start)
    if factor is not None and factor >= 1:
        following, stop_factor = _times_constant(stop)
        index, one = _plus_constant(following) or (None, None)
        if stop_factor == factor and one == 1 and same_value(index, first):
            # index * n : (index + 1) * n
            return minibatch(data, first, factor, keep_short=True)
    begin, length = _plus_constant(stop) or (None, None)
    if start is None or not same_value(begin, start) or length is None or length < 1:
        return None
    if factor is not None and factor >= 1:
        # begin = index * n; begin : begin + m (SdA, DBN; m = n is a minibatch)
        return minibatch(data, first, length, stride=factor, keep_short=True)
    if start.ndim == 0:
        return minibatch(data, start, length, stride=1, keep_short=True)  # a window
    return None


def same_value(one, other):
    """Whether two scalar expressions compute the same thing: written twice
    (``data[i * n:i * n + n]``), the start is two graphs of one value."""
    return one is other or (one is not None and other is not None and _api.module(
        "graph.basic").equal_computations([one], [other]))


def _times_constant(variable):
    """``(x, c)`` when ``variable`` is ``x * c`` or ``c * x`` with an integer constant c."""
    Constant, Mul = _api.module("graph.basic").Constant, _api.module("scalar").Mul
    Elemwise = _api.module("tensor.elemwise").Elemwise

    owner = variable.owner if variable is not None else None
    if owner is None or not (isinstance(owner.op, Elemwise) and isinstance(owner.op.scalar_op, Mul)) \
            or len(owner.inputs) != 2:
        return None, None
    for this, other in (owner.inputs, owner.inputs[::-1]):
        if isinstance(other, Constant) and other.data.ndim == 0 \
                and np.issubdtype(other.data.dtype, np.integer) and this.ndim == 0:
            return this, int(other.data)
    return None, None


def _plus_constant(variable):
    """``(x, c)`` when ``variable`` is ``x + c`` or ``c + x`` with an integer constant c."""
    Constant, Add = _api.module("graph.basic").Constant, _api.module("scalar").Add
    Elemwise = _api.module("tensor.elemwise").Elemwise

    owner = variable.owner if variable is not None else None
    if owner is None or not (isinstance(owner.op, Elemwise) and isinstance(owner.op.scalar_op, Add)) \
            or len(owner.inputs) != 2:
        return None
    for this, other in (owner.inputs, owner.inputs[::-1]):
        if isinstance(other, Constant) and other.data.ndim == 0 \
                and np.issubdtype(other.data.dtype, np.integer):
            return this, int(other.data)
    return None
