"""A split's float view: what ``load_data``'s ``x`` is (and its ``y``, a
view of the labels: :class:`LabelsView`).

The classic tutorials held their images in a float shared variable; code
written for it slices it (``train_set_x[i * B:(i + 1) * B]`` in ``givens``)
and asks its value (``train_set_x.get_value(borrow=True).shape[0]``).
int8store's ``x`` is the expression that widens the int8 codes to floats,
made by :class:`FloatViewOp`, an identity op (the library's ``ViewOp``: no
work in any mode, removed by the library's rewrites) whose output is a
:class:`FloatView`, so that the same code works on it:

* indexing it indexes the stored codes first and widens only what was
  selected: a minibatch is sliced from the int8 variable before any cast (a
  classic slice becomes int8store's static-size minibatch op, the shuffled
  split's minibatch on a shuffled split, in every mode), and ``"batch"``
  normalization centres each minibatch on its own mean;
* ``get_value()`` returns the decoded images, the array the classic shared
  variable held.

What the view belongs to (its :class:`~int8store.SharedDataset`, whether
it augments) is the op's, which made it: a variable never changes class,
and nothing rides on its ``tag``.
"""

from ..backend import activate
from ..errors import ArgumentError
from ..backend.ops.minibatch import Minibatch

_api = activate()

__all__ = ["FloatView", "FloatViewOp", "float_view", "LabelsView", "labels_view"]


class FloatViewOp(_api.module("compile.ops").ViewOp):
    """The identity op that makes a :class:`FloatView` of ``dataset``'s
    images (``augmented``: its minibatches are augmented, see
    :meth:`~int8store.SharedDataset.augment`)."""

    def __init__(self, dataset, augmented=False):
        self.dataset, self.augmented = dataset, augmented

    def make_node(self, x):
        x = _api.at.as_tensor_variable(x)
        view = FloatView(x.type, None, None, name=f"{self.dataset.name}_x_"
                         f"{'augmented_view' if self.augmented else self.dataset.storage + '_view'}")
        return _api.module("graph.basic").Apply(self, [x], [view])


class FloatView(_api.TensorVariable):
    """The float view of a :class:`~int8store.SharedDataset`'s images (see
    the module docstring): an ordinary tensor variable that the classic
    code can also slice and ask the value of."""

    @property
    def dataset(self):
        """The :class:`~int8store.SharedDataset` this view belongs to."""
        return self.owner.op.dataset

    def __getitem__(self, key):
        dataset = self.dataset
        if self.owner.op.augmented:
            return _augmented_minibatch(dataset, key)
        # The first index picks rows (through the order), the rest the pixels:
        # a row is widened whole (per-channel statistics repeat along it).
        rows, rest = (key[0], key[1:]) if isinstance(key, tuple) else (key, ())
        if rows is None or rows is Ellipsis:
            return self[:][key]
        if dataset.order is None:
            view = dataset._float_view(dataset.data[rows])
        else:
            view = dataset._rows_view(dataset.order[rows])
        if not rest:
            return view
        return view[((slice(None),) if view.ndim == dataset.data.ndim else ()) + rest]

    def get_value(self, borrow=False, return_internal_type=False):
        """The images as the view's values: a new ``(N, features)`` array of
        the view's dtype (``borrow`` and ``return_internal_type`` are
        accepted and change nothing: there is no float array to lend, and the
        values are a numpy array). Decoding takes a moment and the memory of
        the floats; ``y.get_value(borrow=True).shape[0]`` counts examples for
        free."""
        return self.dataset.decoded()

    def set_value(self, value, borrow=False):
        """Refused, saying why: the view holds no values to replace (a shared
        variable's ``set_value``, the classic way to swap a chunk of a large
        set in, has its int8store form in streaming)."""
        raise ArgumentError(
            f"{self.dataset.name}: x is a float view of int8 codes, not a shared variable: its "
            "values cannot be set. For a set larger than memory, stream it "
            "(load_splits(..., max_device_bytes=N) or load_streams), which swaps shards in "
            "itself; for other images, load them (load_data, SharedDataset.from_arrays)")


def float_view(expression, dataset, augmented=False):
    """``expression`` (the widened images of ``dataset``) as its :class:`FloatView`."""
    return FloatViewOp(dataset, augmented)(expression)


def _augmented_minibatch(dataset, key):
    """The augmented view's ``view[key]``: a whole minibatch, the classic
    ``view[i * B:(i + 1) * B]``."""
    # (the rows' classic slice is a minibatch op already: SharedRows.__getitem__)
    found = dataset.data[key] if isinstance(key, slice) else None
    if found is not None and isinstance(found.owner.op, Minibatch) and found.owner.op.short:
        raise ArgumentError(
            f"{dataset.name}: its {dataset.n_examples} examples are fewer than one minibatch of "
            f"{found.owner.op.short}, and an augmented view gives whole minibatches")
    if found is None or not isinstance(found.owner.op, Minibatch) \
            or found.owner.op.stride != found.owner.op.size:
        raise ArgumentError(
            f"{dataset.name}: an augmented view gives whole minibatches, view[i * B:(i + 1) * B] "
            f"(got view[{key!r}]); evaluate on the split's own x, which is never augmented")
    return dataset.minibatch(found.owner.inputs[1], found.owner.op.size, augment=True)[0]


class _LabelsViewOp(_api.module("compile.ops").ViewOp):
    """The identity op that makes a :class:`LabelsView` of ``dataset``'s labels."""

    def __init__(self, dataset):
        self.dataset = dataset

    def make_node(self, y):
        y = _api.at.as_tensor_variable(y)
        view = LabelsView(y.type, None, None, name=f"{self.dataset.name}_y_view")
        return _api.module("graph.basic").Apply(self, [y], [view])


class LabelsView(_api.TensorVariable):
    """The labels as ``load_data`` gives them: what the classic
    ``T.cast(shared_y, 'int32')`` was, an expression over the shared
    variable that holds them, so that ``y.owner.inputs[0].get_value()``
    (code written for the classic reads the labels so) gives the labels;
    and as a shared variable, ``y.get_value()`` (the classic batch count
    from the labels, free) and ``y[i * B:(i + 1) * B]``, a minibatch
    sliced from that variable."""

    @property
    def dataset(self):
        """The :class:`~int8store.SharedDataset` these labels belong to."""
        return self.owner.op.dataset

    @property
    def shared(self):
        """The int32 shared variable holding the labels."""
        return self.owner.inputs[0]

    def __getitem__(self, key):
        return self.shared[key]

    def get_value(self, borrow=False, return_internal_type=False):
        """The labels (the shared variable's value)."""
        return self.shared.get_value(borrow=borrow, return_internal_type=return_internal_type)

    def set_value(self, value, borrow=False):
        """Set the labels (the shared variable's value, which the split's
        digest and class count read): one an example, integers."""
        self.dataset.set_labels(value)


def labels_view(dataset):
    """``dataset``'s labels as the classic code takes them (:class:`LabelsView`)."""
    return _LabelsViewOp(dataset)(dataset.y)
