"""How many examples a shard holds: what fits a device budget in whole
minibatches."""

from ..errors import ArgumentError

__all__ = ["shard_size_for", "fitting_shard_size", "LABEL_BYTES"]

#: Bytes of one label on the device (int32).
LABEL_BYTES = 4


def shard_size_for(max_device_bytes, row_bytes, batch_size=1):
    """Examples per shard whose images and labels fit ``max_device_bytes``, a
    multiple of ``batch_size`` (0 if not even one batch fits)."""
    rows = int(max_device_bytes) // (int(row_bytes) + LABEL_BYTES)
    return rows // batch_size * batch_size


def fitting_shard_size(max_device_bytes, row_bytes, batch_size=1):
    """:func:`shard_size_for` whole batches, or else what fits (the caller
    then cuts its batch size); raises if not even one example fits."""
    size = shard_size_for(max_device_bytes, row_bytes, batch_size) or \
        shard_size_for(max_device_bytes, row_bytes)
    if size < 1:
        raise ArgumentError(f"max_device_bytes={max_device_bytes} (--max-device-bytes): not "
                            f"even one example of {row_bytes + LABEL_BYTES} bytes fits")
    return size
