"""A split across several devices, through JAX's own sharding: each device
holds a contiguous block of the int8 rows, and slices its own minibatch.

Layout (:class:`Blocks`, a pure function of the split's length and the
device count): with ``D`` devices, device ``d`` holds rows
``[d * S, (d + 1) * S)`` of the split, ``S = ceil(length / D)``; the last
blocks are padded (zero codes, label 0) to ``S`` rows, and padding is never
trained on (:meth:`Blocks.n_batches` counts the minibatches every device can
fill with its own rows, and int8store's JAX mode refuses a minibatch index
past them: :meth:`Blocks.check_minibatch`) nor scored
(:func:`int8store.evaluate_in_chunks` skips it). Every device holds at least
one real row: a split too small for that is refused at placement.

What a classic loop counts stays the split's own: the padded array is what
the compiled functions use (the container holds it), while ``get_value()``
of a placed variable gives the real rows only (:class:`PaddedRows`), so
``y.get_value(borrow=True).shape[0]`` is the number of examples.

A minibatch of ``B`` examples is ``B / D`` rows from each device, at the
same local position: minibatch ``i`` is the concatenation over devices of
rows ``[i * B/D, (i + 1) * B/D)`` of each block (:meth:`Blocks.order` gives
the split's rows in that order). In the compiled step the int8 array is
reshaped to ``(D, S, ...)`` along its sharded axis and sliced on the second
axis, so every device reads only its own block; the float conversion comes
after, on each device, and XLA reduces the gradients of the replicated
parameters with its own collectives.
"""

import math

import numpy as np

from ..errors import ArgumentError, MinibatchIndexError, StoreFormatError

__all__ = ["AXIS", "Blocks", "data_mesh", "sharded_layout", "place_rows", "rows_to_host",
           "placed_blocks", "PaddedRows", "replicate", "retype", "start_processes",
           "is_main_process", "check_same_data", "host_values", "DataMismatchError"]

#: The mesh axis the examples are split along.
AXIS = "data"


class DataMismatchError(StoreFormatError):
    """The processes of one run do not hold the same data."""


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
            from .shuffle import permuted

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


def data_mesh(devices):
    """A one-axis mesh (:data:`AXIS`) over ``devices``: a count (the first that
    many of ``jax.devices()``, every process's), ``"all"``, or a list of
    devices."""
    import jax
    from jax.sharding import Mesh

    available = jax.devices()
    if devices == "all":
        chosen = available
    elif isinstance(devices, (int, np.integer)) and not isinstance(devices, bool):
        if not 1 <= devices <= len(available):
            raise ArgumentError(f"devices={devices}: JAX sees {len(available)} "
                                f"({available[0].platform}); ask for 1 to {len(available)}")
        chosen = available[:devices]
    else:
        chosen = list(devices)
    return Mesh(np.array(chosen), (AXIS,))


def sharded_layout(variable):
    """``(mesh, devices)`` if the shared ``variable`` holds an array split
    along its rows over several devices (:func:`place_rows`), else None."""
    import sys

    jax = sys.modules.get("jax")
    value = getattr(getattr(variable, "container", None), "storage", [None])[0]
    if jax is None or not isinstance(value, jax.Array):
        return None
    from jax.sharding import NamedSharding

    sharding = value.sharding
    if not isinstance(sharding, NamedSharding) or sharding.mesh.size < 2 \
            or not sharding.spec or sharding.spec[0] != AXIS:
        return None
    return sharding.mesh, sharding.mesh.shape[AXIS]


def place_rows(variable, mesh, blocks, read_rows, host=None):
    """Put the shared ``variable`` (a split's codes or labels) on ``mesh``,
    its rows in ``blocks``: ``read_rows(start, stop)`` gives the split's rows
    ``[start, stop)`` as numpy, and is asked only for the rows of this
    process's own devices; padding is added here. The variable's static
    shape becomes the padded one, and the compiled functions use the padded
    array; its ``get_value()`` gives the real rows only (:class:`PaddedRows`):
    ``host``, the split's rows as numpy when this process holds them all (the
    labels, 4 bytes an example), else fetched from the devices when asked.
    Returns the ``jax.Array``."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    dtype = np.dtype(variable.type.dtype)
    trailing = tuple(np.shape(variable.container.storage[0])[1:])
    shape = (blocks.padded_rows,) + trailing

    def shard(index):
        start, stop, _ = index[0].indices(blocks.padded_rows)
        real = min(stop, blocks.n_examples)
        rows = np.asarray(read_rows(start, real), dtype=dtype) if real > start \
            else np.zeros((0,) + trailing, dtype)
        if len(rows) < stop - start:  # this block's padding
            rows = np.concatenate([rows, np.zeros((stop - start - len(rows),) + trailing, dtype)])
        return rows[(slice(None),) + tuple(index[1:])]

    array = jax.make_array_from_callback(shape, NamedSharding(mesh, PartitionSpec(AXIS)), shard)
    retype(variable, shape)
    variable.container.storage[0] = array
    PaddedRows.adopt(variable, blocks, host)
    return array


def rows_to_host(variable):
    """Undo :func:`place_rows`: the shared ``variable`` holds its real rows
    in host memory (numpy, padding dropped), with its library's own
    ``get_value`` and ``set_value`` back."""
    rows = np.array(variable.get_value(borrow=True)) if isinstance(variable, PaddedRows) \
        else np.asarray(variable.container.storage[0])
    retype(variable, rows.shape)
    variable.container.storage[0] = rows
    if isinstance(variable, PaddedRows):
        variable.__class__ = type(variable).unpadded
        del variable.tag.int8store_blocks, variable.tag.int8store_host_rows


def placed_blocks(variable):
    """The :class:`Blocks` of a shared ``variable`` placed by
    :func:`place_rows`, else None."""
    return getattr(getattr(variable, "tag", None), "int8store_blocks", None)


class PaddedRows:
    """Mixed into a shared variable :func:`place_rows` put in blocks over
    several devices, so that what it shows is the split, not its padding.

    The container holds the padded ``jax.Array`` (``blocks.padded_rows``
    rows), which the compiled functions use as it is. ``get_value()`` gives
    the ``blocks.n_examples`` real rows as numpy: a classic loop's
    ``y.get_value(borrow=True).shape[0] // batch_size`` counts from the real
    examples (int8store's JAX mode then refuses the indices that would reach
    padding: :meth:`Blocks.check_minibatch`). ``borrow=True`` gives a
    read-only view, with no copy when the host holds the rows (labels);
    ``return_internal_type=True`` gives the padded ``jax.Array`` itself.
    ``set_value`` is refused: new rows are placed as a new dataset.

    Examples
    --------
    A split of 902 examples over 4 devices (blocks of 226 rows, 904 held)::

        int8store.place([train], "jax", devices=4)
        train.y.get_value(borrow=True).shape            # (902,)
        train.y.get_value(return_internal_type=True).shape  # (904,)
    """

    __slots__ = ()  # a variable's class can then become its padded subclass
    _classes = {}  # the library's class -> its padded subclass

    @classmethod
    def adopt(cls, variable, blocks, host=None):
        """Make the shared ``variable`` (holding ``blocks``' padded rows)
        show its real rows; ``host``: those rows as numpy, if at hand."""
        base = type(variable).unpadded if isinstance(variable, cls) else type(variable)
        if base not in cls._classes:
            # The library's class first (a mixin first would change the
            # object's layout, and __class__ could not be assigned), this
            # class's methods in the subclass's own namespace.
            own = {name: cls.__dict__[name] for name in ("get_value", "set_value", "__doc__")}
            cls._classes[base] = type(f"Padded{base.__name__}", (base, cls),
                                      {**own, "unpadded": base})
        variable.__class__ = cls._classes[base]
        variable.tag.int8store_blocks = blocks
        variable.tag.int8store_host_rows = None if host is None else np.asarray(host)

    def get_value(self, borrow=False, return_internal_type=False):
        """The split's real rows as numpy (padding left out): a new array,
        or with ``borrow`` a read-only one; with ``return_internal_type`` the
        padded ``jax.Array`` the compiled functions use."""
        held = self.container.storage[0]
        if return_internal_type:
            return held
        real = self.tag.int8store_blocks.n_examples
        rows = self.tag.int8store_host_rows
        if rows is None:
            if not getattr(held, "is_fully_addressable", True):
                raise ArgumentError(
                    f"{self.name}: its rows lie on the devices of several processes and this "
                    "process holds only its own blocks; get_value(return_internal_type=True) "
                    "gives the jax.Array (host_values(...) gathers it, in every process)")
            rows = np.asarray(held)
        if not borrow:
            return np.array(rows[:real])
        view = rows[:real].view()
        view.flags.writeable = False
        return view

    def set_value(self, new_value, borrow=False):
        """Refused: the rows lie in blocks over several devices."""
        blocks = self.tag.int8store_blocks
        raise ArgumentError(
            f"{self.name}: held in blocks over {blocks.devices} devices "
            f"(int8store.place(..., devices={blocks.devices})), so set_value cannot replace "
            "it; build a dataset of the new rows and place it, or bring this one back to one "
            "device first (int8store.place(dataset, 'jax'))")


def retype(variable, shape):
    """Give the shared variable (and its container) the static ``shape``."""
    if tuple(variable.type.shape) != shape:
        variable.type = variable.type.clone(shape=shape)
        variable.container.type = variable.type


def replicate(variable, mesh):
    """Put the shared ``variable``'s value on every device of ``mesh``, whole
    (each process gives its own devices their copy)."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    value = variable.container.storage[0]
    host = np.asarray(value)
    variable.container.storage[0] = jax.make_array_from_callback(
        host.shape, NamedSharding(mesh, PartitionSpec()), lambda index: host[index])
    return variable.container.storage[0]


def start_processes(coordinator, num_processes, process_id):
    """Join ``num_processes`` processes (this one ``process_id``) through the
    coordinator at ``coordinator`` (``HOST:PORT``, process 0's): then
    ``jax.devices()`` lists every process's devices, and a split placed over
    them gives each process only its own devices' blocks to read. On the
    CPU the processes' collectives go through Gloo. Call it before anything
    else uses JAX."""
    import jax

    # Collectives between processes' CPU devices go through Gloo (the setting
    # concerns the CPU backend only: GPUs keep NCCL).
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=int(num_processes),
                               process_id=int(process_id))


def is_main_process():
    """Whether this is process 0 of a multi-process run (or no such run):
    the one that writes the checkpoint."""
    import sys

    jax = sys.modules.get("jax")
    return jax is None or jax.process_index() == 0


def check_same_data(digest, what):
    """Before the first step of a multi-process run: every process must hold
    the same data (``digest``: bytes, e.g. a store's manifest digest).
    Raises, naming the processes that differ, if they do not; nothing to do
    in a run of one process."""
    import jax

    if jax.process_count() == 1:
        return
    from jax.experimental import multihost_utils

    mine = np.frombuffer(bytes(digest)[:32].ljust(32, b"\0"), dtype=np.uint8)
    every = np.asarray(multihost_utils.process_allgather(mine)).reshape(jax.process_count(), -1)
    differ = [p for p in range(len(every)) if not np.array_equal(every[p], every[0])]
    if differ:
        raise DataMismatchError(
            f"{what}: process{'es' if len(differ) > 1 else ''} "
            f"{', '.join(map(str, differ))} hold{'' if len(differ) > 1 else 's'} other data than "
            f"process 0 (digest {every[differ[0]].tobytes().hex()[:16]}... against "
            f"{every[0].tobytes().hex()[:16]}...): every process must read the same store")


def host_values(values):
    """``values`` as numpy; an array spread over several processes is
    gathered from all of them first."""
    if getattr(values, "is_fully_addressable", True):
        return np.asarray(values)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(values, tiled=True))
