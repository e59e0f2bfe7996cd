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
(:func:`int8store.evaluate_in_chunks` skips it).

What a classic loop counts stays the split's own: the padded array is what
the compiled functions use (the container holds it), while ``get_value()``
of a placed variable gives the real rows only (:class:`PaddedRows`), so
``y.get_value(borrow=True).shape[0]`` is the number of examples.

In the compiled step the int8 array is reshaped to ``(D, S, ...)`` along
its sharded axis and sliced on the second axis, so every device reads only
its own rows (minibatch ``i`` of ``B`` examples, rows ``[i * B, (i + 1) * B)``
on any number of devices, is ``B / D`` consecutive local rows of each);
the float conversion comes after, on each device, and XLA reduces the
gradients of the replicated parameters with its own collectives.
"""

import numpy as np

from ...errors import ArgumentError, StoreFormatError

__all__ = ["AXIS", "data_mesh", "sharded_layout", "place_rows", "rows_to_host",
           "placed_blocks", "PaddedRows", "replicate", "retype", "start_processes",
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
    its rows as ``blocks`` lays them out: ``read_rows(start, stop, step)``
    gives the split's rows ``start, start + step, ...`` below ``stop`` as
    numpy, and is asked only for the rows of this process's own devices
    (each device's, ``step`` the device count); padding is added here. The variable's static
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
    """The :class:`~int8store.order.blocks.Blocks` of a shared ``variable`` placed by
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
    padding: :meth:`~int8store.order.blocks.Blocks.check_minibatch`). ``borrow=True`` gives a
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
            rows = self.tag.int8store_blocks.in_split_order(rows)  # (the devices' layout)
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
