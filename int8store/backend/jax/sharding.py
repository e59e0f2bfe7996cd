"""A split across several devices, through JAX's own sharding: device ``d``
of ``D`` holds rows ``d, d + D, ...`` of the int8 split, and slices its own
part of each minibatch.

Which rows each device holds is :class:`~int8store.order.blocks.Blocks` (a
pure function of the split's length and the device count, which imports no
graph library); here they are put on JAX's devices, padded (zero codes,
label 0) to the same number of rows. Padding is never trained on
(int8store's JAX mode refuses a minibatch index past
:meth:`~int8store.order.blocks.Blocks.n_batches`:
:meth:`~int8store.order.blocks.Blocks.check_minibatch`) nor scored
(:func:`int8store.training.evaluate_in_chunks` skips it).

What a classic loop counts stays the split's own: the padded array is what
the compiled functions use (the container holds it), while ``get_value()``
of a placed variable gives the real rows only (the split's ``data`` and
``y`` are :class:`~int8store.backend.ops.shared_rows.SharedRows`), so
``y.get_value(borrow=True).shape[0]`` is the number of examples.

In the compiled step the int8 array is reshaped to ``(D, S, ...)`` along
its sharded axis and sliced on the second axis, so every device reads only
its own rows (minibatch ``i`` of ``B`` examples, rows ``[i * B, (i + 1) * B)``
on any number of devices, is ``B / D`` consecutive local rows of each);
the float conversion comes after, on each device, and XLA reduces the
gradients of the replicated parameters with its own collectives.

Importing this module sets up no graph library (nor JAX):
:func:`start_processes` and :func:`is_main_process` run before either is
used; the functions that place a split import what they need.
"""

import numpy as np

from ...errors import ArgumentError, Int8StoreError, StoreFormatError, quoted

__all__ = ["AXIS", "data_mesh", "sharded_layout", "place_rows", "rows_to_host",
           "placed_blocks", "replicate", "retype", "start_processes",
           "is_main_process", "check_same_data", "host_values", "DataMismatchError"]

#: The mesh axis the examples are split along.
AXIS = "data"


class DataMismatchError(StoreFormatError):
    """The processes of one run do not hold the same data."""


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
        if devices < 1:
            raise ArgumentError(f"devices={devices}: ask for 1 device or more")
        if devices > len(available):
            raise ArgumentError(f"devices={devices}: {_seen(available)}")
        chosen = available[:devices]
    else:
        chosen = list(devices)
    return Mesh(np.array(chosen), (AXIS,))


def _seen(available):
    """What JAX sees, and what may be asked of it."""
    platform = available[0].platform
    if len(available) > 1:
        return f"JAX sees {len(available)} {platform} devices; ask for 1 to {len(available)}"
    hint = ("; XLA_FLAGS=--xla_force_host_platform_device_count=N, set before the run, splits "
            "the CPU into N" if platform == "cpu" else "")
    return f"JAX sees 1 {platform} device{hint}"


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
    its rows as ``blocks`` lays them out: ``read_rows(start, stop, step)``
    gives the split's rows ``start, start + step, ...`` below ``stop`` as
    numpy, and is asked only for the rows of this process's own devices
    (each device's, ``step`` the device count); padding is added here. The variable's static
    shape becomes the padded one, and the compiled functions use the padded
    array; its ``get_value()`` gives the real rows only
    (:class:`~int8store.backend.ops.shared_rows.SharedRows`, which the variable must be):
    ``host``, the split's rows as numpy when this process holds them all (the
    labels, 4 bytes an example), else fetched from the devices when asked.
    Returns the ``jax.Array``."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    from ..ops.shared_rows import SharedRows

    if not isinstance(variable, SharedRows):
        raise ArgumentError(
            f"{variable.name}: a {type(variable).__name__}; only a split's rows are placed in "
            "blocks over devices (a SharedDataset's data and y, SharedRows variables): "
            "int8store.place(dataset, 'jax', devices=...) places a dataset")
    dtype = np.dtype(variable.type.dtype)
    trailing = tuple(np.shape(variable.container.storage[0])[1:])
    shape = (blocks.padded_rows,) + trailing

    def shard(index):
        start, stop, _ = index[0].indices(blocks.padded_rows)
        device, first = divmod(start, blocks.rows_per_device)  # (one device's part)
        wanted = blocks.rows_of(device)[first:first + stop - start]  # its real rows there
        rows = np.asarray(read_rows(wanted.start, min(wanted.stop, blocks.n_examples),
                                    blocks.devices), dtype=dtype) \
            if len(wanted) else np.zeros((0,) + trailing, dtype)
        if len(rows) < stop - start:  # this device's padding
            rows = np.concatenate([rows, np.zeros((stop - start - len(rows),) + trailing, dtype)])
        return rows[(slice(None),) + tuple(index[1:])]

    array = jax.make_array_from_callback(shape, NamedSharding(mesh, PartitionSpec(AXIS)), shard)
    retype(variable, shape)
    variable.container.storage[0] = array
    variable.blocks = blocks
    variable.host_rows = None if host is None else np.asarray(host)
    return array


def rows_to_host(variable):
    """Undo :func:`place_rows`: the shared ``variable`` holds its real rows
    in host memory (numpy, padding dropped), and shows them as the
    library's own shared variables do."""
    placed = placed_blocks(variable) is not None
    rows = np.array(variable.get_value(borrow=True)) if placed \
        else np.asarray(variable.container.storage[0])
    retype(variable, rows.shape)
    variable.container.storage[0] = rows
    if placed:
        variable.blocks = variable.host_rows = None


def placed_blocks(variable):
    """The :class:`~int8store.order.blocks.Blocks` of a shared ``variable`` placed by
    :func:`place_rows`, else None."""
    from ..ops.shared_rows import SharedRows

    return variable.blocks if isinstance(variable, SharedRows) else None


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
    try:
        jax.distributed.initialize(coordinator_address=coordinator,
                                   num_processes=int(num_processes), process_id=int(process_id))
    except Exception as error:  # noqa: BLE001 - JAX's own kinds (a deadline, a refused port)
        raise Int8StoreError(
            f"process {process_id} of {num_processes} could not join the others at the "
            f"coordinator {coordinator} ({quoted(error)})") from error


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
