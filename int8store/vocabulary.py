"""The words int8store's options take, defined once."""

__all__ = ["SPLITS", "NORMALIZATIONS", "STORAGES"]

#: The splits every dataset ends with, in order.
SPLITS = ("train", "valid", "test")

#: How the float view of the images is normalized (see :func:`int8store.dequantize`).
NORMALIZATIONS = ("unit", "batch", "dataset", "none")

#: How the images can be held: int8 codes (this library), or float copies (the classic way).
STORAGES = ("int8", "float")
