"""A split already loaded (``load_data``'s ``x`` and ``y``), streamed to the
device in shards that fit a byte budget: :func:`stream`."""

import numpy as np

from ..errors import ArgumentError
from ..order.position import check_batch_size
from ..order.shard_size import LABEL_BYTES, fitting_shard_size
from ..runtime.limits import parse_size
from ..runtime.words import counted
from .sources import ArrayShards
from .split import StreamingSplit

__all__ = ["stream"]


def stream(x, y, max_device_bytes, batch_size=1, seed=None, mode="c", report=None, **kwargs):
    """A :class:`StreamingSplit` over a loaded split (``load_data``'s ``x``,
    ``y``) whose shards fit ``max_device_bytes``, or None if the whole split
    fits. The shard size is a multiple of ``batch_size``; if not even one batch
    fits, the shard holds what fits and the caller must cut its batch size to
    ``stream.shard_size``. ``max_device_bytes`` is bytes, or a size such as
    ``"16MiB"``, as :func:`~int8store.load_streams` takes it. ``seed``
    shuffles the shards and their examples each epoch; by default, the
    split's own (:meth:`~int8store.SharedDataset.shuffle`: a shuffled split
    streams shuffled, in another order). ``report`` (``print``, say) is
    told about the streaming and such a cut, in a line each."""
    max_device_bytes = parse_size(max_device_bytes, "max_device_bytes")
    dataset = x.dataset
    if dataset.storage != "int8":
        raise ArgumentError(f"{dataset.name}: held as floats (storage={dataset.storage!r}); "
                            "stream() streams a split's int8 codes: load it with "
                            "storage='int8' (the default)")
    batch_size = check_batch_size(batch_size, dataset.name)  # (0 divided by zero; -4 overfilled)
    codes = np.asarray(dataset.data.get_value(borrow=True))
    labels = np.asarray(y.get_value(borrow=True))
    row_bytes = codes[0].nbytes if len(codes) else 1
    if len(labels) * (row_bytes + LABEL_BYTES) <= max_device_bytes:
        return None
    size = fitting_shard_size(max_device_bytes, row_bytes, batch_size)
    split = StreamingSplit(ArrayShards(codes, labels, name=dataset.name), size, dataset.encoding,
                           image_shape=dataset.image_shape, normalize=dataset.normalize,
                           dtype=dataset.dtype, seed=dataset.seed if seed is None else seed,
                           mode=mode,
                           dataset_mean=dataset.dataset_mean,
                           channel_statistics=dataset.channel_statistics, **kwargs)
    if report is not None:
        if split.shard_size < batch_size:
            report(f"... batch size {batch_size} does not fit in {max_device_bytes} device "
                   f"bytes: using {split.shard_size}")
        report(f"... streaming {split.name} in {counted(split.n_shards, 'shard')} of "
               f"{counted(split.shard_size, 'example')}")
    return split
