"""How many examples a shard holds: what fits a device budget in whole
minibatches; and the batch sizes shards of that size can give."""

from ..errors import ArgumentError
from ..runtime.words import counted
from .position import check_batch_size

__all__ = ["shard_size_for", "fitting_shard_size", "batch_within_shards", "LABEL_BYTES"]

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


def batch_within_shards(batch_size, shard_size, n_examples, name):
    """``batch_size`` checked (:func:`~.position.check_batch_size`); one larger
    than a shard is refused where the split holds a whole minibatch of it: no
    shard would give one, so a loop would do nothing, without a word. (Larger
    than the whole split, it gives no minibatch, as the classic slices do.)"""
    batch_size = check_batch_size(batch_size, name)
    if shard_size < batch_size <= n_examples:
        raise ArgumentError(
            f"{name}: batch_size={batch_size} is larger than a shard of "
            f"{counted(shard_size, 'example')}, so no shard would give a minibatch: take "
            f"minibatches of {shard_size} at most, or give the shards more bytes "
            "(max_device_bytes, --max-device-bytes)")
    return batch_size
