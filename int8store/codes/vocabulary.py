"""The words int8store's options take, defined once."""

import numbers

from ..errors import ArgumentError

__all__ = ["SPLITS", "CUTS", "NORMALIZATIONS", "STORAGES", "MODES", "check_choice", "check_mode",
           "check_flag"]

#: The splits every dataset ends with, in order.
SPLITS = ("train", "valid", "test")

#: How a store's validation and test splits were made (its manifest's
#: ``order``): the source's own, the last examples of train, or a draw from
#: train that takes each class in proportion.
CUTS = ("source", "last", "stratified")

#: How the float view of the images is normalized (see :func:`int8store.dequantize`).
NORMALIZATIONS = ("unit", "batch", "dataset", "channel", "standard", "none")

#: How the images can be held: int8 codes (this library), or float copies (the classic way).
STORAGES = ("int8", "float")

#: Where graphs run: the library's C backend (on the CPU), or JAX (its default
#: device: a GPU when JAX sees one). See :func:`int8store.function_mode`.
MODES = ("c", "jax")


def check_choice(name, value, choices):
    """``value`` if it is one of ``choices``, else an error naming the option."""
    if value not in choices:
        raise ArgumentError(f"{name}={value!r} is not one of {', '.join(choices)}")
    return value


def check_flag(name, value):
    """``value`` as a bool, if it is one (``True``, ``False``, numpy's, 1 or
    0), else an error naming the option: ``lossy="no"`` is true, and would
    lose the data's exactness without a word. (No numpy here: Aesara's
    start-up hook imports this module before the program runs.)"""
    if isinstance(value, bool) or type(value).__name__ in ("bool", "bool_") or (
            isinstance(value, numbers.Integral) and value in (0, 1)):
        return bool(value)
    raise ArgumentError(f"{name}={value!r}: expected True or False")


def check_mode(mode):
    """``mode`` lower-cased, if it is one of :data:`MODES`."""
    chosen = str(mode).lower()
    if chosen not in MODES:
        raise ArgumentError(f"mode={mode!r} is not one of {', '.join(MODES)}")
    return chosen
