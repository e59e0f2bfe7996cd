"""``load_streams()``: :func:`~int8store.load_data`'s sibling for sets that
are not to be held whole, read shard by shard from a store on disk.

From a store, nothing of the images is read at start: each split is a
:class:`~int8store.StreamingSplit` over the file (:class:`StoreShards`), so
host memory holds the labels (4 bytes an example) and the shards in flight,
whatever the store's size, and every chunk is checked as it is read. The
training split's mean for ``normalize="dataset"`` comes from the histogram
of its codes that the manifest records; only a store written before it was
recorded has its training split read through once at start, to count them. A
split whose images and labels fit in a shard is read once and kept, as
``load_data`` would hold it. Any other source is read whole into host
memory (as int8, a quarter of float32) and streamed to the device from
there.
"""

import numpy as np

from ..errors import ArgumentError, SourceFormatError
from ..codes.vocabulary import SPLITS

__all__ = ["load_streams", "fits_in_memory"]


def load_streams(dataset, max_device_bytes=None, batch_size=1, seed=None, normalize="unit",
                 dtype=None, mode="c", max_memory=None, prefetch=2, workers=2, report=None,
                 cache_dir=None):
    """The train, valid and test splits of ``dataset`` as a list of three
    :class:`~int8store.StreamingSplit`, each fed to the device in shards.

    Parameters
    ----------
    dataset
        As for :func:`~int8store.load_data`; a store is read from the file.
    max_device_bytes : int, optional
        The most bytes of images and labels in one shard of a split (each
        split holds one shard on the device). Default: an eighth of the
        memory ceiling, so that the training split's four buffers (with the
        default prefetch) and the others' one each stay within three
        quarters of it.
    batch_size : int
        Shards hold whole minibatches of this size. If a split is smaller,
        or not even one minibatch fits in a shard, the batch size must come
        down to ``min(s.shard_size for s in streams)``: ``report`` says so.
    seed : int, optional
        Shuffle the training split's shards and their examples each epoch
        (the validation and test splits keep their order).
    normalize, dtype, mode
        As for :func:`~int8store.load_data`.
    max_memory : int or str, optional
        The memory ceiling (default half the physical memory): the training
        split's shards in flight are held to half of it (the prefetch comes
        down to what fits), and a shard that does not fit there is refused,
        naming both sizes.
    prefetch, workers : int
        Training shards read ahead, and the threads that read them; the
        validation and test splits are read when scored, in the caller's
        thread, into one buffer each.
    report : callable, optional
        Told (a line each) how each split is streamed.

    Returns
    -------
    list of StreamingSplit
        ``[train, valid, test]``; each has ``x`` and ``y`` for the classic
        ``givens``, ``minibatches(epoch, batch_size)`` for the training loop,
        and is scored by :func:`~int8store.evaluate_in_chunks`.
    """
    from ..codes.channels import PER_CHANNEL, ChannelStatistics
    from ..codes.histogram import mean_of_code_counts
    from ..runtime.limits import max_memory as ceiling, memory_ceiling, parse_size
    from .split import StreamingSplit, fitting_shard_size

    if int(batch_size) != batch_size or batch_size < 1:
        raise ArgumentError(f"batch_size={batch_size!r}: expected a positive integer")
    with memory_ceiling(max_memory):
        limit = ceiling()
        budget = parse_size(max_device_bytes, "max_device_bytes") if max_device_bytes else limit // 8
        sources, encoding, image_shape = _sources(dataset, cache_dir, max_memory, seed)
        row_bytes = int(np.prod(image_shape, dtype=np.int64))
        size = fitting_shard_size(budget, row_bytes, batch_size)
        mean = (mean_of_code_counts(sources["train"].code_counts(), encoding)
                if normalize == "dataset" else None)
        per_channel = (ChannelStatistics.from_counts(sources["train"].channel_code_counts(),
                                                     encoding)
                       if normalize in PER_CHANNEL else None)
        streams = []
        for name in SPLITS:
            training = name == "train"
            streams.append(StreamingSplit(
                sources[name], size, encoding, image_shape=image_shape, normalize=normalize, dtype=dtype,
                seed=seed if training else None, workers=workers, mode=mode, name=name,
                prefetch=prefetch if training else 0, dataset_mean=mean,
                channel_statistics=per_channel,
                max_prefetch_bytes=limit // 2 if training else None))
    if report is not None:
        for stream in streams:
            how = ("held whole" if stream.n_shards == 1 else
                   f"streamed in {stream.n_shards} shards of {stream.shard_size} examples")
            report(f"... {stream.name}: {stream.n_examples} examples {how}")
    return streams


def fits_in_memory(dataset, max_memory=None, caller=None):
    """Whether ``load_data`` may hold ``dataset`` whole: False only for a store
    whose images and labels come to more than the memory ceiling (other
    sources are read to know their size, and are held to the ceiling as
    they are read)."""
    from ..runtime.limits import max_memory as ceiling, memory_ceiling
    from ..sources.locate import caller_file

    path = _store_path(dataset, caller or caller_file())
    if path is None:
        return True
    from ..store.reader import open_store

    with memory_ceiling(max_memory):
        return open_store(path, verify=False).nbytes <= ceiling()


def _store_path(dataset, caller):
    """The store ``dataset`` names (where load_data would look), or None."""
    from ..sources.locate import classic_candidates
    from ..store.reader import is_store

    if not isinstance(dataset, (str, bytes)) and not hasattr(dataset, "__fspath__"):
        return None
    return next((p for p in classic_candidates(dataset, caller) if p.is_file() and is_store(p)),
                None)


def _sources(dataset, cache_dir, max_memory, seed):
    """``({split: shard source}, encoding, image_shape)``; a training split
    sorted by class is named (stderr) unless ``seed`` shuffles it."""
    from ..dataset.loading import load_splits, say_if_sorted_by_class
    from ..sources.locate import caller_file
    from ..store.reader import open_store
    from .sources import ArrayShards, StoreShards

    path = _store_path(dataset, caller_file())
    if path is not None:
        store = open_store(path, verify=False)  # each chunk is checked as it is read
        missing = [n for n in SPLITS if n not in store.splits]
        if missing:
            raise SourceFormatError(f"{path}: has splits {', '.join(store.splits)}; streaming "
                                    f"needs {', '.join(SPLITS)} (no {', '.join(missing)} split)")
        shards = {name: StoreShards(path, name, store=store) for name in SPLITS}
        if seed is None:
            say_if_sorted_by_class(shards["train"].labels, path)
        return shards, store.encoding, store.image_shape
    splits = load_splits(dataset, cache_dir=cache_dir, max_memory=max_memory, dtype=None,
                         caller=caller_file(), report=(lambda line: None) if seed is not None else None)
    sources = {name: ArrayShards(split.data.get_value(borrow=True), split.y.get_value(borrow=True),
                                 name=name) for name, split in splits.items()}
    train = splits["train"]
    return sources, train.encoding, train.image_shape

