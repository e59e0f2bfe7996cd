"""How a split's rows lie on several devices: :class:`Blocks`, a pure
function of the split's length and the device count.

With ``D`` devices, device ``d`` holds rows ``d, d + D, d + 2D, ...`` of
the split (row ``r`` is local row ``r // D`` of device ``r % D``), each
device ``S = ceil(length / D)`` rows, the last padded. Then minibatch ``i``
of ``B`` examples (``B`` a multiple of ``D``) is rows ``[i * B, (i + 1) *
B)`` of the split whatever ``D`` is, the classic tutorials' minibatch, and
on every device it is ``B / D`` consecutive local rows, from local row
``i * B / D``: each device slices its own part, no device needs another's
rows, and the order does not depend on the device count (a run stopped on
four devices goes on on two). Padding is never trained on (every whole
minibatch is real) nor scored.

A shuffled split keeps that property: epoch ``e``'s position ``p`` takes a
row of the same class of rows modulo :data:`CLASSES` (8), drawn by a
Feistel permutation of the class keyed by ``(seed, e, class)``
(:func:`~int8store.order.shuffle.permuted_in_classes`), so a row stays on
the device that holds its position whenever ``D`` divides 8 (1, 2, 4, 8
devices); the same order on one device, held whole. Putting the rows on
JAX's devices is :mod:`int8store.backend.jax.sharding`'s work.
"""

import math

import numpy as np

from ..errors import ArgumentError, MinibatchIndexError
from ..runtime.words import counted
from .shuffle import CLASSES, permuted_in_classes
from .windows import block_windows

__all__ = ["Blocks", "check_shuffled_over"]


class Blocks:
    """How ``n_examples`` rows lie on ``devices`` devices (see the module docstring).

    Parameters
    ----------
    n_examples : int
        The split's length.
    devices : int
        The number of devices.
    name : str, optional
        The split's name, for messages.

    Raises
    ------
    ArgumentError
        When some device would hold no real row (fewer examples than devices).

    Examples
    --------
    >>> blocks = Blocks(10, 4)
    >>> blocks.rows_per_device, [list(blocks.rows_of(d)) for d in range(4)], blocks.n_batches(4)
    (3, [[0, 4, 8], [1, 5, 9], [2, 6], [3, 7]], 2)
    """

    def __init__(self, n_examples, devices, name=None):
        self.n_examples, self.devices, self.name = int(n_examples), int(devices), name
        if self.devices < 1:
            raise ArgumentError(f"{self._split()}devices={devices}: ask for at least one device")
        self.rows_per_device = math.ceil(self.n_examples / self.devices)
        if self.n_examples < self.devices:
            what = ("the split is empty: there is nothing to split" if self.n_examples < 1 else
                    f"{counted(self.n_examples, 'example')} cannot be split")
            raise ArgumentError(f"{self._split()}{what} over {self.devices} devices: each needs "
                                f"at least one real row (use at most "
                                f"{counted(max(self.n_examples, 1), 'device')})")

    def _split(self):
        return f"split {self.name!r}: " if self.name else ""

    @property
    def padded_rows(self):
        """Rows of the whole array on the devices, padding included."""
        return self.rows_per_device * self.devices

    def rows_of(self, device):
        """The split's rows device ``device`` holds, in local order (a range)."""
        return range(device, self.n_examples, self.devices)

    @property
    def fewest_rows(self):
        """Real rows of the device that holds the fewest (the last)."""
        return len(self.rows_of(self.devices - 1))

    def per_device(self, batch_size):
        """Rows each device gives a minibatch of ``batch_size``."""
        if batch_size % self.devices:
            raise ArgumentError(f"a minibatch of {batch_size} cannot be split evenly over "
                                f"{self.devices} devices: use a multiple of {self.devices}")
        return batch_size // self.devices

    def n_batches(self, batch_size):
        """Whole minibatches of ``batch_size``: as many as on one device (the
        remainder is left out, as the classic tutorials left it out)."""
        self.per_device(batch_size)
        return self.n_examples // batch_size

    def check_minibatch(self, index, batch_size, name=None):
        """Raise :class:`~int8store.MinibatchIndexError` unless minibatch
        ``index`` of ``batch_size`` is whole: ``0 <= index <
        n_batches(batch_size)`` (what int8store's JAX mode checks on the host
        before each call). ``name``: the data's, for the message.

        Examples
        --------
        >>> Blocks(902, 4).check_minibatch(224, 4)
        >>> Blocks(902, 4).check_minibatch(225, 4)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        int8store.errors.MinibatchIndexError: minibatch index 225 is outside 0..224: ...
        """
        index, whole = int(index), self.n_batches(batch_size)
        if 0 <= index < whole:
            return
        what = f"{name}: " if name else self._split()
        valid = f"is outside 0..{whole - 1}" if whole else "cannot be taken"
        raise MinibatchIndexError(
            f"{what}minibatch index {index} {valid}: {counted(self.n_examples, 'example')} make "
            f"{counted(whole, 'whole minibatch')} of {batch_size} (over {self.devices} devices "
            f"as on one). Count them with dataset.n_batches({batch_size})")

    def positions(self, batch_size, n_batches=None):
        """The epoch's positions in the order the devices' minibatches take
        them: minibatch by minibatch, each device's ``batch_size / devices``
        in turn (the positions ``i * B + d + devices * j``)."""
        per = self.per_device(batch_size)
        whole = self.n_batches(batch_size)
        count = whole if n_batches is None else int(n_batches)
        if not 0 <= count <= whole:
            raise ArgumentError(
                f"{self._split()}n_batches={n_batches}: {counted(self.n_examples, 'example')} "
                f"make {counted(whole, 'whole minibatch')} of {batch_size}; ask for 0 to {whole}")
        minibatch = np.arange(count)[:, None, None] * batch_size
        device = np.arange(self.devices)[None, :, None]
        return (minibatch + device + self.devices * np.arange(per)[None, None, :]).reshape(-1)

    def order(self, batch_size, n_batches=None, *, seed=None, epoch=0):
        """The split's rows in the order the minibatches of ``batch_size``
        take them over the devices (``n_batches`` of them, at most and by
        default all), shuffled by ``seed`` in ``epoch`` if given: what a
        single device fed in this order sees. Each minibatch holds the rows
        it holds on one device, in the devices' order."""
        if seed is not None:
            check_shuffled_over(self.devices, self._split())
        positions = self.positions(batch_size, n_batches)
        if seed is None or not positions.size:
            return positions.astype(np.int64)
        return permuted_in_classes(positions, self.n_examples, seed, epoch)

    def scoring_plans(self, chunk_size, classic_count=False):
        """The one plan that scores the split's rows over the devices
        (:func:`~int8store.order.windows.block_windows`)."""
        yield block_windows(self, chunk_size, classic_count)

    def global_rows(self, local_start, width):
        """Rows ``(devices, width)`` of the split at local rows
        ``[local_start, local_start + width)`` of each device; ``-1`` where a
        device holds padding."""
        rows = ((local_start + np.arange(width))[None, :] * self.devices
                + np.arange(self.devices)[:, None])
        return np.where(rows < self.n_examples, rows, -1)

    def on_devices(self, array, fill=0):
        """``array`` (the split, along axis 0) as the devices hold it:
        device by device, each its rows then its padding."""
        padded = np.full((self.padded_rows,) + array.shape[1:], fill, dtype=array.dtype)
        for device in range(self.devices):
            rows = array[device::self.devices]
            padded[device * self.rows_per_device:][:len(rows)] = rows
        return padded

    def in_split_order(self, held):
        """The split's rows, in order, from ``held`` (what :meth:`on_devices`
        gives, or the padded array the devices hold): padding left out."""
        held = np.asarray(held)
        by_local = held.reshape((self.devices, self.rows_per_device) + held.shape[1:]).swapaxes(0, 1)
        return by_local.reshape((self.padded_rows,) + held.shape[1:])[:self.n_examples]

    def __repr__(self):
        return (f"Blocks({self.n_examples} examples over {self.devices} devices, "
                f"{self.rows_per_device} rows each, row r on device r % {self.devices})")


def check_shuffled_over(devices, what=""):
    """Refuse a shuffled split over a device count that does not divide
    :data:`~int8store.order.shuffle.CLASSES`: its rows would cross devices."""
    if CLASSES % devices:
        raise ArgumentError(f"{what}a shuffled split over {devices} devices: the shuffle keeps "
                            f"each row on its device for device counts dividing {CLASSES}; use "
                            "1, 2, 4 or 8 devices, or no seed")
