"""A split across several devices, through JAX's own sharding: each device
holds a contiguous block of the int8 rows, and slices its own minibatch.

Layout (:class:`Blocks`, a pure function of the split's length and the
device count): with ``D`` devices, device ``d`` holds rows
``[d * S, (d + 1) * S)`` of the split, ``S = ceil(length / D)``; the last
blocks are padded (zero codes, label 0) to ``S`` rows, and padding is never
trained on (:meth:`Blocks.n_batches` counts the minibatches every device can
fill with its own rows) nor scored (:func:`int8store.evaluate_in_chunks`
skips it).

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

from ..errors import ArgumentError, StoreFormatError

__all__ = ["AXIS", "Blocks", "data_mesh", "sharded_layout", "place_rows", "replicate", "retype",
           "start_processes", "is_main_process", "check_same_data", "host_values",
           "DataMismatchError"]

#: The mesh axis the examples are split along.
AXIS = "data"


class DataMismatchError(StoreFormatError):
    """The processes of one run do not hold the same data."""


class Blocks:
    """How ``n_examples`` rows lie on ``devices`` devices (see the module docstring)."""

    def __init__(self, n_examples, devices):
        self.n_examples, self.devices = int(n_examples), int(devices)
        if self.devices < 1 or self.n_examples < self.devices:
            raise ArgumentError(f"{self.n_examples} examples cannot be split over "
                                f"{self.devices} devices (each needs at least one)")
        self.rows_per_device = math.ceil(self.n_examples / self.devices)

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

    def order(self, batch_size, n_batches=None, seed=None, epoch=0):
        """The split's rows in the order the minibatches of ``batch_size``
        take them (``n_batches`` of them, by default all), shuffled by
        ``seed`` in ``epoch`` if given: what a single device fed in this
        order sees."""
        per = self.per_device(batch_size)
        count = self.n_batches(batch_size) if n_batches is None else n_batches
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


def place_rows(variable, mesh, blocks, read_rows):
    """Put the shared ``variable`` (a split's codes or labels) on ``mesh``,
    its rows in ``blocks``: ``read_rows(start, stop)`` gives the split's rows
    ``[start, stop)`` as numpy, and is asked only for the rows of this
    process's own devices; padding is added here. The variable's static
    shape becomes the padded one. Returns the ``jax.Array``."""
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
    return array


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
