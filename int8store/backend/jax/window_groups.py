"""How many scoring windows one step of the scoring loop takes at once
(:class:`~.direct.JaxScore`).

A window is the model's minibatch (the size the classic tutorials build
their graph for, 500 images for LeNet5). One at a time, a GPU runs each of
the forward pass's kernels on 500 images, and a split's scoring costs as
many launches as a tenth of an epoch's training; the forward pass of a
group of windows at once (``jax.vmap``: the windows' rows become one batch)
costs the launches of one. On a single accelerator a group holds as many
windows as fit :data:`GROUP_BYTES` (an eighth of the device's memory at
most) by the sum of the window's intermediate arrays (an upper bound: XLA
frees and fuses many), up to the split's whole, evened out over the steps
that takes (20 windows of which 15 fit: two steps of 10, not 15 and 5
padded to 15). The group depends on the model, the split's size and the
device, never on how the split is held or fed: scored held whole or
streamed, the same shapes, the same kernels, the same lines. On a CPU,
where a bigger batch gains nothing, and over several devices, a window at
a time, as before.
"""

import math

import numpy as np

__all__ = ["GROUP_BYTES", "scoring_group", "intermediate_bytes"]

#: The most a group of windows' intermediate arrays may take, in bytes.
GROUP_BYTES = 1 << 30


def intermediate_bytes(jaxpr):
    """The bytes of every array an equation of ``jaxpr`` (and of the jaxprs
    inside it) gives, each counted as if it stayed alive."""
    total = 0
    for equation in jaxpr.eqns:
        for variable in equation.outvars:
            aval = variable.aval
            if hasattr(aval, "shape"):
                total += math.prod(aval.shape) * np.dtype(aval.dtype).itemsize
        for parameter in equation.params.values():
            for inner in parameter if isinstance(parameter, (list, tuple)) else [parameter]:
                inner = getattr(inner, "jaxpr", inner)  # a ClosedJaxpr's own
                if hasattr(inner, "eqns"):
                    total += intermediate_bytes(inner)
    return total


def _device(data):
    """The one device the arrays ``data`` lie on, or None (several, or none)."""
    devices = set()
    for value in data:
        devices |= set(getattr(getattr(value, "sharding", None), "device_set", ()))
    return next(iter(devices)) if len(devices) == 1 else None


def scoring_group(values_of, start_dtype, data, windows):
    """How many windows a step of the scoring loop takes: ``values_of(start,
    *data)`` gives a window's values, and a split has ``windows`` of them."""
    device = _device(data)
    if windows <= 1 or device is None or device.platform == "cpu":
        return 1
    limit = (device.memory_stats() or {}).get("bytes_limit")
    budget = min(GROUP_BYTES, limit // 8) if limit else GROUP_BYTES
    import jax  # (here: int8store.backend.jax.direct imports this module without JAX)

    jaxpr = jax.make_jaxpr(values_of)(np.zeros((), start_dtype), *data).jaxpr
    fits = max(1, min(windows, budget // max(intermediate_bytes(jaxpr), 1)))
    # As few steps as fit, and groups as even as they can be: the least padding
    return int(-(-windows // -(-windows // fits)))
