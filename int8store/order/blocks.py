"""How a split's rows lie on several devices: :class:`Blocks`, a pure
function of the split's length and the device count.

With ``D`` devices, device ``d`` holds rows ``[d * S, (d + 1) * S)`` of the
split, ``S = ceil(length / D)``; the last blocks are padded to ``S`` rows,
and padding is never trained on (:meth:`Blocks.n_batches` counts the
minibatches every device can fill with its own rows, and
:meth:`Blocks.check_minibatch` refuses an index past them) nor scored.
Every device holds at least one real row: a split too small for that is
refused, saying the fewest examples that work.

A minibatch of ``B`` examples is ``B / D`` rows from each device, at the
same local position: minibatch ``i`` is the concatenation over devices of
rows ``[i * B/D, (i + 1) * B/D)`` of each block (:meth:`Blocks.order` gives
the split's rows in that order, shuffled on each device by
:func:`~int8store.order.shuffle.permuted` when asked). Putting the blocks on
JAX's devices is :mod:`int8store.backend.jax.sharding`'s work.
"""

import math

import numpy as np

from ..errors import ArgumentError, MinibatchIndexError
from .shuffle import permuted

__all__ = ["Blocks"]


class Blocks:
    """How ``n_examples`` rows lie on ``devices`` devices (see the module docstring).

    Parameters
    ----------
    n_examples : int
        The split's length.
    devices : int
        The number of devices (blocks).
    name : str, optional
        The split's name, for messages.

    Raises
    ------
    ArgumentError
        When some device would hold no real row (blocks of
        ``ceil(n_examples / devices)`` rows fill fewer than ``devices``
        devices): the message says the fewest examples that work.

    Examples
    --------
    >>> blocks = Blocks(10, 4)
    >>> blocks.rows_per_device, [blocks.rows_of(d) for d in range(4)], blocks.n_batches(4)
    (3, [(0, 3), (3, 6), (6, 9), (9, 10)], 1)
    """

    def __init__(self, n_examples, devices, name=None):
        self.n_examples, self.devices, self.name = int(n_examples), int(devices), name
        if self.devices < 1:
            raise ArgumentError(f"{self._split()}devices={devices}: ask for at least one device")
        self.rows_per_device = math.ceil(self.n_examples / self.devices)
        if self.n_examples < 1 or self.fewest_rows < 1:
            raise ArgumentError(self._split() + _too_few(self.n_examples, self.devices))

    def _split(self):
        return f"split {self.name!r}: " if self.name else ""

    @property
    def padded_rows(self):
        """Rows of the whole array on the devices, padding included."""
        return self.rows_per_device * self.devices

    def rows_of(self, device):
        """``(start, stop)``: the split's rows device ``device`` holds (padding excluded)."""
        start = min(device * self.rows_per_device, self.n_examples)
        return start, min(start + self.rows_per_device, self.n_examples)

    @property
    def fewest_rows(self):
        """Real rows of the device that holds the fewest (the last)."""
        start, stop = self.rows_of(self.devices - 1)
        return stop - start

    def per_device(self, batch_size):
        """Rows each device gives a minibatch of ``batch_size``."""
        if batch_size % self.devices:
            raise ArgumentError(f"a minibatch of {batch_size} cannot be split evenly over "
                                f"{self.devices} devices: use a multiple of {self.devices}")
        return batch_size // self.devices

    def n_batches(self, batch_size):
        """Whole minibatches of ``batch_size`` in which every device gives rows
        of its own (no padding): the remainder is left out, as the classic
        tutorials left out the remainder of a split."""
        return self.fewest_rows // self.per_device(batch_size)

    def check_minibatch(self, index, batch_size, name=None):
        """Raise :class:`~int8store.MinibatchIndexError` unless minibatch
        ``index`` of ``batch_size`` takes real rows on every device: ``0 <=
        index < n_batches(batch_size)`` (what int8store's JAX mode checks on
        the host before each call). ``name``: the data's, for the message.

        Examples
        --------
        >>> Blocks(902, 4).check_minibatch(223, 4)
        >>> Blocks(902, 4).check_minibatch(224, 4)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        int8store.errors.MinibatchIndexError: minibatch index 224 is outside 0..223: ...
        """
        index, whole = int(index), self.n_batches(batch_size)
        if 0 <= index < whole:
            return
        per, classic = batch_size // self.devices, self.n_examples // batch_size
        what = f"{name}: " if name else self._split()
        valid = f"is outside 0..{whole - 1}" if whole else "cannot be taken"
        padding = "; the rest of it is padding" if self.padded_rows > self.n_examples else ""
        message = (f"{what}minibatch index {index} {valid}: over {self.devices} "
                   f"devices, {_count(self.n_examples, 'example')} make "
                   f"{_count(whole, 'whole minibatch')} of {batch_size} (each device gives "
                   f"{_count(per, 'row')} of its own block, and the last block holds "
                   f"{_count(self.fewest_rows, 'real row')}{padding}). Count them with "
                   f"dataset.n_batches({batch_size})")
        if classic != whole:
            message += (f" = {whole}, not as examples // batch size ({self.n_examples} // "
                        f"{batch_size} = {classic} counts minibatches that would take padding)")
        raise MinibatchIndexError(message)

    def order(self, batch_size, n_batches=None, seed=None, epoch=0):
        """The split's rows in the order the minibatches of ``batch_size``
        take them (``n_batches`` of them, at most and by default all),
        shuffled by ``seed`` in ``epoch`` if given: what a single device fed
        in this order sees. No minibatch gives an empty order, at once."""
        per = self.per_device(batch_size)
        whole = self.n_batches(batch_size)
        count = whole if n_batches is None else int(n_batches)
        if not 0 <= count <= whole:
            raise ArgumentError(
                f"{self._split()}n_batches={n_batches}: over {self.devices} devices, "
                f"{_count(self.n_examples, 'example')} make {_count(whole, 'whole minibatch')} "
                f"of {batch_size}; ask for 0 to {whole}")
        if not count:
            return np.zeros(0, dtype=np.int64)
        local = np.broadcast_to(np.arange(count * per), (self.devices, count * per))
        if seed is not None:
            real = np.array([np.subtract(*self.rows_of(d)[::-1]) for d in range(self.devices)])
            local = permuted(local, real[:, None], seed, epoch)
        rows = local + (np.arange(self.devices) * self.rows_per_device)[:, None]
        return rows.reshape(self.devices, count, per).transpose(1, 0, 2).reshape(-1)

    def global_rows(self, local_start, width):
        """Rows ``(devices, width)`` of the split at local rows
        ``[local_start, local_start + width)`` of each block; ``-1`` where a
        block holds padding."""
        rows = (np.arange(self.devices)[:, None] * self.rows_per_device
                + local_start + np.arange(width)[None, :])
        limits = np.array([self.rows_of(d)[1] for d in range(self.devices)])[:, None]
        return np.where(rows < limits, rows, -1)

    def padded(self, array, fill=0):
        """``array`` (the split, along axis 0) with the padding rows appended."""
        extra = self.padded_rows - len(array)
        if not extra:
            return array
        pad = np.full((extra,) + array.shape[1:], fill, dtype=array.dtype)
        return np.concatenate([array, pad])

    def __repr__(self):
        return (f"Blocks({self.n_examples} examples over {self.devices} devices, "
                f"{self.rows_per_device} rows each)")


def _count(number, noun):
    """``"1 row"``, ``"2 rows"``, ``"2 whole minibatches"``."""
    if number == 1:
        return f"1 {noun}"
    return f"{number} {noun}{'es' if noun.endswith('ch') else 's'}"


def _fills_every_device(n_examples, devices):
    """Whether blocks of ``ceil(n_examples / devices)`` rows leave every device a real row."""
    return n_examples >= devices and (devices - 1) * math.ceil(n_examples / devices) < n_examples


def _too_few(n_examples, devices):
    """Why ``n_examples`` examples cannot be split over ``devices`` devices, and what works."""
    if n_examples < 1:
        return f"the split is empty: there is nothing to split over {_count(devices, 'device')}"
    # From (devices - 1)² + 1 examples on, every count fills every device;
    # below that only some do (blocks are ceil(n / devices) rows, the last short).
    always = (devices - 1) ** 2 + 1
    some = [n for n in range(devices, always) if _fills_every_device(n, devices)]
    below = ""
    if len(some) == 1:
        below = f" (below {always} only {some[0]} works)"
    elif some:
        below = (f" (below {always} only {', '.join(map(str, some[:-1]))} and {some[-1]} work)"
                 if len(some) <= 8 else
                 f" (below {always} a count n works only if {devices - 1} * ceil(n / {devices}) "
                 f"< n)")
    fewer = next((d for d in range(min(devices - 1, n_examples), 0, -1)
                  if _fills_every_device(n_examples, d)), 1)
    if n_examples < devices:
        why = "fewer examples than devices"
    else:
        size = math.ceil(n_examples / devices)
        why = (f"blocks of {size} rows (ceil({n_examples} / {devices})) fill only "
               f"{math.ceil(n_examples / size)} of them")
    return (f"{_count(n_examples, 'example')} cannot be split over {devices} devices: {why}, "
            f"and each device needs at least one real row. Over {devices} devices use at least "
            f"{always} examples{below}, or {_count(fewer, 'device')} for these")
