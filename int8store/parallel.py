"""Several devices and processes, through JAX's own sharding: a split's
rows placed over devices (row ``r`` on device ``r % D``: :func:`place`,
:func:`keep_on_device`), and a run of several processes
(:func:`start_processes`, :func:`is_main_process`, :func:`check_same_data`).
See ``docs/devices.md``.

May import: everything below it on the spine.
"""

from .runtime.exports import lazy_exports

_LAZY = {
    "place": ".backend.jax.device",
    "keep_on_device": ".backend.jax.device",
    "start_processes": ".backend.jax.sharding",
    "is_main_process": ".backend.jax.sharding",
    "check_same_data": ".backend.jax.sharding",
    "host_values": ".backend.jax.sharding",
}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
