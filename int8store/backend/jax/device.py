"""Holding shared values on JAX's devices: the default one, or several.

The library's JAX mode hands every shared value to ``jax.jit`` on every
call: a numpy value is copied to the device each time. A shared variable
whose container holds a ``jax.Array`` is passed as it is, so data placed once
stays on the device. (Setting ``container.storage[0]`` bypasses the
container's filter, which would turn the array back into numpy; so do the
updates of the variables :func:`keep_on_device` names.)

Over several devices (``devices=`` of :func:`place` and
:func:`keep_on_device`), a split's int8 rows and labels are split in
rows interleaved over the devices (row r on device r % D), and parameters are replicated; see
:mod:`.sharding`.
"""

import numpy as np

from ...codes.vocabulary import check_mode
from ...errors import ArgumentError, shown
from .mode import require_jax
from .updates import DeviceUpdates

__all__ = ["to_device", "to_host", "on_device", "keep_on_device", "place"]


def on_device(variable):
    """Whether the shared variable holds a ``jax.Array`` (False without JAX)."""
    import sys
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(variable.container.storage[0], jax.Array)


def to_device(variable):
    """Place the shared variable's value on JAX's default device (once)."""
    jax = require_jax()
    if not on_device(variable):
        variable.container.storage[0] = jax.device_put(np.asarray(variable.container.storage[0]))
    return variable.container.storage[0]


def to_host(variable):
    """Bring the shared variable's value back into a numpy array."""
    if on_device(variable):
        variable.container.storage[0] = np.asarray(variable.container.storage[0])
    return variable.container.storage[0]


def place(data, mode, devices=None):
    """Hold data where ``mode`` runs: JAX's device(s) for ``"jax"`` (placed
    once, kept there across calls), host memory for ``"c"``.

    ``data`` is a shared variable, a :class:`~int8store.SharedDataset`, the
    float view of one, or a list of these (e.g. what ``load_data`` returns)
    or a dict of them (what ``load_splits`` returns).
    ``devices`` (JAX mode): None or 1 for JAX's default device; a count,
    ``"all"`` or a list of devices to split each dataset's rows in blocks over
    them (:mod:`.sharding`: ``dataset.blocks`` then says how), other shared
    variables being replicated. A split too small to give every device a
    real row is refused. Over several devices the compiled functions use the
    padded arrays, while ``get_value()`` of a split's ``data`` and ``y``
    gives its real rows only (``y.get_value(borrow=True).shape[0]`` counts
    its examples). Returns ``data``.
    """
    if check_mode(mode) != "jax" and devices not in (None, 1):
        # (it was ignored: the data went to the one CPU, as if devices were not given)
        raise ArgumentError(f"place: devices={shown(devices)} with mode={mode!r}: the C backend "
                            "runs on one CPU; leave devices out, or place the data in JAX mode "
                            "(place(data, 'jax', devices=...))")
    if check_mode(mode) != "jax" or devices in (None, 1):
        for dataset in _datasets(data):
            if dataset.blocks is not None:
                _gather(dataset)
        move = to_device if mode.lower() == "jax" else to_host
        for variable in _shared_variables(data):
            move(variable)
        return data
    from ...order.blocks import Blocks
    from .sharding import check_same_data, data_mesh, place_rows, replicate

    jax = require_jax()
    mesh = data_mesh(devices)
    split = set()
    for dataset in _datasets(data):
        if dataset.blocks is not None and dataset.blocks.devices == mesh.size:
            split.update(map(id, (dataset.data, dataset.y)))
            continue  # placed already
        if dataset.blocks is not None:  # over another count: the rows in the split's order first
            _gather(dataset)
        host = {v: np.asarray(v.container.storage[0])[:dataset.n_examples]
                for v in (dataset.data, dataset.y)}
        if jax.process_count() > 1:  # every process must hold the same split
            check_same_data(_digest(host.values()), f"split {dataset.name!r}")
        blocks = Blocks(dataset.n_examples, mesh.size, name=dataset.name)
        for variable, rows in host.items():
            # The labels stay on the host too (4 bytes an example): y.get_value() gives them.
            place_rows(variable, mesh, blocks,
                       lambda start, stop, step, rows=rows: rows[start:stop:step],
                       host=rows if variable is dataset.y else None)
            split.add(id(variable))
        dataset.blocks = blocks
    # Other shared variables (not a dataset's rows: the labels of one are) go whole to each.
    for variable in _shared_variables(data, datasets=False):
        if id(variable) not in split:
            replicate(variable, mesh)
    return data


def _digest(arrays):
    """XXH3-128 of the arrays' shapes and bytes."""
    import xxhash

    hasher = xxhash.xxh3_128()
    for array in arrays:
        hasher.update(repr((array.shape, array.dtype.str)).encode())
        hasher.update(np.ascontiguousarray(array).data)
    return hasher.digest()


def _gather(dataset):
    """A dataset split over several devices back in host memory, padding dropped."""
    from .sharding import rows_to_host

    for variable in (dataset.data, dataset.y):
        rows_to_host(variable)
    dataset.blocks = None


def _parts(data):
    """The shared variables, splits and views in ``data``: a list or tuple
    of them (nested: load_data's pairs), a dict of them (load_splits'
    result), or one; anything else is refused by name (it was an
    AttributeError, "'dict' object has no attribute 'blocks'")."""
    if isinstance(data, dict):
        data = list(data.values())
    if isinstance(data, (list, tuple)):
        return [part for item in data for part in _parts(item)]
    if hasattr(data, "container") or hasattr(getattr(data, "dataset", data), "blocks"):
        return [data]
    raise ArgumentError(f"place: {shown(data)}: expected a split (SharedDataset), its x or y, a "
                        "shared variable, or a list or dict of these (what load_data or "
                        "load_splits returns)")


def _datasets(data):
    """The :class:`~int8store.SharedDataset` objects in ``data``, each once
    (a split's x and y both know theirs)."""
    found = {}
    for part in _parts(data):
        if not hasattr(part, "container"):
            dataset = getattr(part, "dataset", part)
            found[id(dataset)] = dataset
    return list(found.values())


def _shared_variables(data, datasets=True):
    """The shared variables in ``data`` (those of its datasets too, unless not
    ``datasets``), each once."""
    found = {}
    for part in _parts(data):
        if hasattr(part, "container"):  # a shared variable
            found[id(part)] = part
        elif datasets:
            dataset = getattr(part, "dataset", part)  # a view (x, y) knows its SharedDataset
            found.update((id(v), v) for v in (dataset.data, dataset.y))
    return list(found.values())


def keep_on_device(variables, functions=(), devices=None):
    """Place parameters on the device and keep the compiled ``functions``'
    updates of them there.

    PyTensor's functions store an update as it is computed: a ``jax.Array``
    in JAX mode, which stays on the device. Aesara's write each update back
    through a filter that turns it into numpy (a device-to-host copy after
    each step, a host-to-device copy at the next); for the functions given
    here, compiled in int8store's JAX mode, the updates of these variables
    that are ``jax.Array`` of the right dtype are stored as they are
    (:mod:`.updates`). C-backend functions are not to be given. ``devices``
    as for :func:`place`: over several, the parameters are replicated on
    each.
    """
    # (one variable, None or an array was a TypeError, an AttributeError or
    # "Length of <Vector> cannot be determined")
    listed = None if hasattr(variables, "owner") or isinstance(variables, (str, bytes)) \
        or not hasattr(variables, "__iter__") else list(variables)
    if listed is None or not all(hasattr(v, "container") for v in listed):
        raise ArgumentError(f"keep_on_device: variables={shown(variables)}: expected a list of "
                            "shared variables (the model's parameters, [W, b])")
    variables = listed
    storages = set()
    mesh = None
    if devices not in (None, 1):
        from .sharding import data_mesh

        mesh = data_mesh(devices)
    for variable in variables:
        if mesh is None:
            to_device(variable)
        else:
            from .sharding import replicate

            replicate(variable, mesh)
        storages.add(id(variable.container.storage))
    for function in functions:
        # (a PyTensor function's program, and int8store's own JAX functions, need nothing)
        program = getattr(function, "vm", None)
        if isinstance(program, DeviceUpdates):
            program.keep(storages)
    return variables
