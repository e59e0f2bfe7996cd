"""The words int8store's options take, defined once."""

from ..errors import ArgumentError

__all__ = ["SPLITS", "NORMALIZATIONS", "STORAGES", "check_choice"]

#: The splits every dataset ends with, in order.
SPLITS = ("train", "valid", "test")

#: How the float view of the images is normalized (see :func:`int8store.dequantize`).
NORMALIZATIONS = ("unit", "batch", "dataset", "none")

#: How the images can be held: int8 codes (this library), or float copies (the classic way).
STORAGES = ("int8", "float")


def check_choice(name, value, choices):
    """``value`` if it is one of ``choices``, else an error naming the option."""
    if value not in choices:
        raise ArgumentError(f"{name}={value!r} is not one of {', '.join(choices)}")
    return value
