"""Holding shared values on JAX's default device.

Aesara's JAX mode hands every shared value to ``jax.jit`` on every call: a
numpy value is copied to the device each time. A shared variable whose
container holds a ``jax.Array`` is passed as it is, so data placed once stays
on the device. (Setting ``container.storage[0]`` bypasses Aesara's filter,
which would turn the array back into numpy.)
"""

import numpy as np

from .modes import require_jax

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


def place(data, mode):
    """Hold data where ``mode`` runs: JAX's default device for ``"jax"`` (placed
    once, kept there across calls), host memory for ``"c"``.

    ``data`` is a shared variable, a :class:`~int8store.SharedDataset`, the
    float view of one, or a list of these (e.g. what ``load_data`` returns).
    Returns ``data``.
    """
    from .modes import check_mode

    move = to_device if check_mode(mode) == "jax" else to_host
    for variable in _shared_variables(data):
        move(variable)
    return data


def _shared_variables(data):
    if isinstance(data, (list, tuple)):
        return [v for item in data for v in _shared_variables(item)]
    if hasattr(data, "container"):  # a shared variable
        return [data]
    dataset = getattr(data, "dataset", data)  # a float view knows its SharedDataset
    return [dataset.data, dataset.y]


class _DeviceContainer:
    """Mixed into a shared variable's container so that assigned values (the
    updates Aesara writes back after each call) stay ``jax.Array``s."""

    def _set_on_device(self, value):
        import jax
        if isinstance(value, jax.Array) and value.dtype == np.dtype(self.type.dtype) \
                and value.ndim == self.type.ndim:
            self.storage[0] = value
        else:
            super().__set__(value)  # the container's own filtering

    def _get(self):
        return self.storage[0]

    data = property(_get, _set_on_device)
    value = property(_get, _set_on_device)


def keep_on_device(variables, functions=()):
    """Place parameters on the device and keep the compiled ``functions``'
    updates of them there.

    After each call Aesara stores an updated shared value through the
    function's input container, whose filter turns a ``jax.Array`` into numpy:
    a device-to-host copy, and a host-to-device copy at the next call. For the
    given shared variables, the containers of the shared variables and of the
    given functions store updates that are ``jax.Array`` of the right dtype
    as they are. Use with functions compiled in JAX mode; C-backend functions
    are not to be given.
    """
    variables = list(variables)
    storages = set()
    for variable in variables:
        to_device(variable)
        _store_device_arrays(variable.container)
        storages.add(id(variable.container.storage))
    for function in functions:
        for container in function.input_storage:
            if id(container.storage) in storages:
                _store_device_arrays(container)
    return variables


def _store_device_arrays(container):
    if not isinstance(container, _DeviceContainer):
        container.__class__ = type(f"Device{type(container).__name__}",
                                   (_DeviceContainer, type(container)), {})
