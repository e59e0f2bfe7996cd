"""A split's rows as a shared variable: :class:`SharedRows`, made by
:func:`shared_rows`.

A :class:`~int8store.SharedDataset` holds its images (int8 codes, or the
float copy) and its labels in variables of this class from their creation.
Held whole, on the host or on one device, such a variable is the library's
own tensor shared variable in every respect. Placed in blocks over several
devices (:func:`int8store.backend.jax.sharding.place_rows`, which sets
:attr:`SharedRows.blocks`), its container holds the padded array the
compiled functions use, while what the variable shows is still the split:
``get_value()`` gives the real rows, padding left out, and ``set_value`` is
refused. The behaviour belongs to the class the variable was made with; no
variable changes class when it is placed or brought back.

This module needs no JAX: a placed value is only asked whether the process
can read all of it (``is_fully_addressable``) and turned into numpy.
"""

import numpy as np

from ...errors import ArgumentError
from ..setup.activation import activate

_api = activate()

__all__ = ["SharedRows", "shared_rows"]


class SharedRows(_api.module("tensor.sharedvar").TensorSharedVariable):
    """A split's rows (images or labels) as a tensor shared variable whose
    value is the split's wherever the rows lie.

    While :attr:`blocks` is None it behaves as the library's own class. Once
    the rows are placed in blocks over several devices, the container holds
    the padded ``jax.Array`` (``blocks.padded_rows`` rows, each device's
    block padded to the same length), which the compiled functions use as
    it is, and:

    * ``get_value()`` gives the ``blocks.n_examples`` real rows as numpy,
      in the split's order: a classic loop's
      ``y.get_value(borrow=True).shape[0] // batch_size`` counts from the
      real examples (int8store's JAX mode then refuses the indices that
      would reach padding:
      :meth:`~int8store.order.blocks.Blocks.check_minibatch`);
      ``borrow=True`` gives a read-only view, with no copy when the host
      holds the rows (:attr:`host_rows`: the labels);
      ``return_internal_type=True`` gives the padded ``jax.Array`` itself;
    * ``set_value`` is refused: new rows are placed as a new dataset.

    Attributes
    ----------
    blocks : Blocks or None
        How the rows lie over several devices
        (:class:`~int8store.order.blocks.Blocks`), else None.
    host_rows : ndarray or None
        Over several devices, the split's rows in host memory when this
        process holds them all (the labels, 4 bytes an example), else None:
        fetched from the devices when asked.

    Examples
    --------
    A split of 902 examples over 4 devices (blocks of 226 rows, 904 held)::

        int8store.place([train], "jax", devices=4)
        train.y.get_value(borrow=True).shape                # (902,)
        train.y.get_value(return_internal_type=True).shape  # (904,)
    """

    blocks = None
    host_rows = None
    #: The shuffled split whose rows these are (its ``seed``, ``n_examples``
    #: and ``n_batches``), or None: then the classic slice is that split's
    #: shuffled minibatch (:meth:`__getitem__`).
    shuffled = None

    def __getitem__(self, key):
        """Indexing as the library's, but the classic slices become int8store's
        static-size minibatch op (:func:`~.minibatch.minibatch_of_slice`):
        ``rows[i * B:(i + 1) * B]`` is minibatch ``i`` (of the shuffled
        split's order when :attr:`shuffled` says so), ``rows[s:s + B]`` a
        window from row ``s``; either is the same rows in every mode, and an
        index past the rows is refused (never an empty or short slice). A
        slice longer than the split is the split, at index 0 only, as the
        classic compiled it (:func:`~.minibatch.minibatch`)."""
        from .minibatch import minibatch_of_slice

        sliced = super().__getitem__(key)
        if not isinstance(key, slice) or sliced.owner is None:
            return sliced
        found = minibatch_of_slice(sliced.owner)
        return sliced if found is None else found

    def alias(self, **attributes):
        """Another variable holding the same value (the very container:
        nothing is copied), showing the rows as this one does, with
        ``attributes`` (e.g. ``shuffled``) set."""
        other = type(self)(type=self.type, value=None, strict=None, container=self.container,
                           name=self.name)
        other.blocks, other.host_rows = self.blocks, self.host_rows
        for name, value in attributes.items():
            setattr(other, name, value)
        return other

    def get_value(self, borrow=False, return_internal_type=False):
        """The variable's value, as the library gives it; over several
        devices the split's real rows as numpy (padding left out): a new
        array, or with ``borrow`` a read-only one; with
        ``return_internal_type`` the padded ``jax.Array`` the compiled
        functions use."""
        if self.blocks is None:
            return super().get_value(borrow=borrow, return_internal_type=return_internal_type)
        held = self.container.storage[0]
        if return_internal_type:
            return held
        rows = self.host_rows
        if rows is None:
            if not getattr(held, "is_fully_addressable", True):
                raise ArgumentError(
                    f"{self.name}: its rows lie on the devices of several processes and this "
                    "process holds only its own blocks; get_value(return_internal_type=True) "
                    "gives the jax.Array (host_values(...) gathers it, in every process)")
            rows = self.blocks.in_split_order(np.asarray(held))  # (the devices' layout)
        real = rows[:self.blocks.n_examples]
        if not borrow:
            return np.array(real)
        view = real.view()
        view.flags.writeable = False
        return view

    def set_value(self, new_value, borrow=False):
        """Set the value, as the library does; refused over several devices."""
        if self.blocks is None:
            return super().set_value(new_value, borrow=borrow)
        raise ArgumentError(
            f"{self.name}: held in blocks over {self.blocks.devices} devices "
            f"(int8store.place(..., devices={self.blocks.devices})), so set_value cannot "
            "replace it; build a dataset of the new rows and place it, or bring this one back "
            "to one device first (int8store.place(dataset, 'jax'))")

    def clone(self, **kwargs):
        """A copy sharing the container, as the library's (the graph a
        function compiles holds one), that shows the rows as this one does."""
        copy = super().clone(**kwargs)
        copy.blocks, copy.host_rows, copy.shuffled = self.blocks, self.host_rows, self.shuffled
        return copy


def shared_rows(value, name):
    """A :class:`SharedRows` holding the array ``value`` (not copied), its
    static shape ``value``'s: what the library's ``shared(value, name=name,
    borrow=True, shape=value.shape)`` makes, in int8store's class.

    Examples
    --------
    >>> import numpy as np
    >>> rows = shared_rows(np.arange(6, dtype=np.int8).reshape(3, 2), "train_x")
    >>> rows.type.shape, rows.blocks, rows.get_value().tolist()
    ((3, 2), None, [[0, 1], [2, 3], [4, 5]])
    """
    value = np.asarray(value)
    variable = SharedRows(type=_api.at.TensorType(value.dtype, shape=value.shape), value=value,
                          strict=False, name=name)
    _api.module("graph.utils").add_tag_trace(variable)  # (as the library's shared() does)
    return variable
