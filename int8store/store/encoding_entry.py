"""The manifest's ``encoding``: what the stored int8 codes mean.

``{"kind": "affine", "offset": O, "divisor": D, "precision": P}`` (value
``(code + O) / D``; ``P`` null, or the float dtype a float source's values
were in), or ``{"kind": "codebook", "codebook": [256 numbers], "dtype": T,
"max_error": E}`` (value ``codebook[code + 128]``, of numpy dtype ``T``;
``E`` 0 when the codebook is exact). See :mod:`int8store.codes.encoding`.
Written by :func:`encoding_entry`, read back, checked, by
:func:`read_encoding`.
"""

import numpy as np

from ..codes.encoding import Encoding
from ..errors import StoreFormatError
from .manifest import field, is_number, shown

__all__ = ["encoding_entry", "read_encoding"]


def encoding_entry(encoding):
    """The manifest's entry for ``encoding`` (an :class:`~int8store.codes.encoding.Encoding`)."""
    if encoding.is_codebook:
        book = np.asarray(encoding.codebook)
        return {"kind": "codebook", "codebook": book.tolist(), "dtype": book.dtype.str,
                "max_error": float(encoding.max_error)}
    return {"kind": "affine", "offset": int(encoding.offset),
            "divisor": int(encoding.divisor), "precision": encoding.precision}


def read_encoding(spec, path):
    """The :class:`~int8store.codes.encoding.Encoding` the manifest's entry
    ``spec`` describes, checked (the store at ``path`` is named in errors)."""
    kind = spec.get("kind")
    if kind == "codebook":
        book = field(spec, "codebook", list, path, "the codebook encoding")
        text = field(spec, "dtype", str, path, "the codebook encoding")
        error = spec.get("max_error")
        try:
            dtype = np.dtype(text) if len(text) <= 8 else None
        except (TypeError, ValueError):
            dtype = None
        if dtype is None or dtype.kind not in "iuf" or dtype.itemsize > 8 or len(book) != 256 \
                or not all(is_number(v) for v in book) or not is_number(error) or error < 0:
            raise StoreFormatError(f"{path}: the manifest's codebook is not 256 numbers of an "
                                   f"integer or float dtype (dtype {shown(text)}) with a "
                                   f"non-negative max_error ({shown(error)})")
        try:
            values = np.array(book, dtype=dtype)
        except (OverflowError, ValueError):
            values = None
        if values is None or values.tolist() != book or not np.isfinite(values).all():
            raise StoreFormatError(f"{path}: the manifest's codebook holds values its dtype "
                                   f"{dtype} does not hold exactly")
        return Encoding(codebook=values, max_error=float(error))
    if kind == "affine":
        precision = spec.get("precision")
        if precision is not None and not isinstance(precision, str):
            raise StoreFormatError(f"{path}: the manifest's encoding precision is {shown(precision)}")
        return Encoding(field(spec, "offset", int, path, "the affine encoding"),
                        field(spec, "divisor", int, path, "the affine encoding"), precision=precision)
    raise StoreFormatError(f"{path}: unknown encoding kind {shown(kind)}")
