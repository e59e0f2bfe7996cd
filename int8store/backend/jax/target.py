"""The platform int8store's JAX programs are made for.

A few of int8store's forms are XLA:CPU's alone: the convolutions of
:mod:`.channels_last`, the parameters a loop carries transposed
(:func:`~int8store.training.steps.carried_transposed`). They are chosen for
JAX's default backend, or, inside :func:`compiling_for`, for another
platform: a program compiled ahead of time for a GPU this process does not
have (``bench/gpu_kernels.py``) is given the GPU's forms.

>>> with compiling_for("gpu"):
...     target_platform()
'gpu'
"""

import contextlib
import contextvars

__all__ = ["target_platform", "compiling_for"]

_CHOSEN = contextvars.ContextVar("int8store_target_platform", default=None)


def target_platform():
    """``"cpu"``, ``"gpu"`` or ``"tpu"``: the platform named by the innermost
    :func:`compiling_for`, else JAX's default backend's."""
    chosen = _CHOSEN.get()
    if chosen is not None:
        return chosen
    import jax

    return jax.default_backend()


@contextlib.contextmanager
def compiling_for(platform):
    """Within the block, int8store builds its functions in ``platform``'s
    forms (``"cpu"``, ``"gpu"`` or ``"tpu"``), whatever the default backend."""
    if platform not in ("cpu", "gpu", "tpu"):
        from ...errors import ArgumentError

        raise ArgumentError(f"platform={platform!r}: expected 'cpu', 'gpu' or 'tpu'")
    token = _CHOSEN.set(platform)
    try:
        yield
    finally:
        _CHOSEN.reset(token)
