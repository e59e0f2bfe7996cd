"""Where a JAX-mode function's updates go on Aesara: :class:`DeviceUpdates`.

After each call Aesara's ``Function`` writes every updated shared value back
through its input container (``container.data = value``), whose filter
(``TensorType.filter``) turns a ``jax.Array`` into numpy: a device-to-host
copy after each step, and a host-to-device copy at the next. PyTensor's
``Function`` writes an update straight into the storage cell (as Aesara's
own VMs do for its other linkers), so there a ``jax.Array`` stays one and
nothing here is needed.

Aesara lets the program a linker makes store the updates itself: a program
whose ``need_update_inputs`` is False (the protocol of ``aesara.link.vm.VM``,
which ``Function.__call__`` reads at every call) does the write-back, and
the ``Function`` does not repeat it. int8store's JAX linker on Aesara
(:mod:`.mode`) wraps its program in a :class:`DeviceUpdates`, which leaves
the updates to the ``Function`` (``need_update_inputs`` True: Aesara's
behaviour, unchanged) until :func:`~.device.keep_on_device` names variables
to keep on the device; from then on it writes back every update itself:
those of the named variables that are ``jax.Array``s of their dtype and
rank straight into storage, every other through its container, as the
``Function`` would have.
"""

import numpy as np

__all__ = ["DeviceUpdates"]


class DeviceUpdates:
    """The program of an Aesara function compiled in int8store's JAX mode,
    which keeps the updates of chosen variables on the device.

    Parameters
    ----------
    program : callable
        What the linker made (Aesara's JIT linker's ``streamline`` function):
        it runs the graph, its results in the output containers.
    inputs, outputs : list of Container
        The linker's containers of the graph's inputs and outputs (the
        ``Function``'s ``input_storage`` and ``output_storage``).
    update_mapping : dict
        ``{output index: input index}`` of the updates (the function
        graph's ``update_mapping``).
    check_inputs : callable, optional
        Called with the inputs' values before each run, to refuse them
        (outside the program, whose errors Aesara dresses with its graph).
    """

    def __init__(self, program, inputs, outputs, update_mapping, check_inputs=None):
        self._program = program
        self._inputs, self._check_inputs = inputs, check_inputs
        self._updates = [(inputs[i], outputs[o]) for o, i in sorted(update_mapping.items())]
        self._kept = frozenset()  # ids of the storage cells whose updates stay on the device

    @property
    def need_update_inputs(self):
        """Whether the ``Function`` writes the updates back (Aesara's VM
        protocol): yes, until some are kept on the device."""
        return not self._kept

    def keep(self, storages):
        """Keep on the device the updates of the inputs whose storage cells'
        ids are in ``storages`` (shared variables share their container's
        cell with every function that uses them)."""
        self._kept |= {id(c.storage) for c, _ in self._updates if id(c.storage) in storages}

    def __call__(self, *args, **kwargs):
        if self._check_inputs is not None:
            self._check_inputs([container.storage[0] for container in self._inputs])
        outputs = self._program(*args, **kwargs)
        if self._kept:
            import jax

            for container, result in self._updates:
                value = result.storage[0]
                if id(container.storage) in self._kept and isinstance(value, jax.Array) \
                        and value.dtype == np.dtype(container.type.dtype) \
                        and value.ndim == container.type.ndim:
                    container.storage[0] = value
                else:
                    container.data = value  # the container's own filter
        return outputs

    def __getattr__(self, name):
        # What else the Function asks of its program (allow_gc, storage_map, ...).
        if name.startswith("__") or name == "_program":
            raise AttributeError(name)
        return getattr(self._program, name)
