"""Where ``load_splits`` holds the splits: whole, or streamed in shards
(:func:`residency_of`), with what cannot be streamed refused by what made
it stream."""

from ..codes.vocabulary import check_choice
from ..errors import ArgumentError
from ..runtime.limits import describe_bytes

__all__ = ["RESIDENCIES", "residency_of"]

#: Where the splits are held (see :mod:`int8store.loading`).
RESIDENCIES = ("whole", "streamed")


def residency_of(residency, max_device_bytes, store_bytes, ceiling, devices, storage):
    """``"whole"`` or ``"streamed"``: ``residency`` where given, else
    streamed where ``max_device_bytes`` is, or where a store of
    ``store_bytes`` (None: no store) is larger than the memory ``ceiling``
    on one device. Streaming over several ``devices``, or of a float copy
    (``storage``), is refused naming what asked for it."""
    several = devices not in (None, 1)
    asked = residency is not None
    if asked:
        check_choice("residency", residency, RESIDENCIES)
    else:
        larger = store_bytes is not None and not several and store_bytes > ceiling
        residency = "streamed" if max_device_bytes is not None or larger else "whole"
    why = ("asked by max_device_bytes (--max-device-bytes)" if max_device_bytes is not None
           else "asked by residency='streamed'" if asked
           else f"as the store is larger than max_memory ({describe_bytes(ceiling)})")
    if residency == "streamed":
        if several:  # (a store larger than max_memory is held whole over several devices)
            raise ArgumentError(f"devices={devices!r} (--devices) and streaming, {why}, "
                                "together are not supported yet: stream on one device, or "
                                "hold the splits whole over several")
        if storage != "int8":  # (it streamed int8 codes without a word)
            raise ArgumentError(f"storage={storage!r} and streaming, {why}, together are not "
                                "supported: a stream holds each shard's int8 codes, the float "
                                "copy is held whole")
    return residency
