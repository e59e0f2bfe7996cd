"""One road from a dataset to its three splits: :func:`load_splits`, and
:func:`load_data`, the classic tutorials' function, on top of it.

Where the splits are held is decided here, once, from one look for a store
(:func:`find_store`; :func:`~int8store.plan.residency.residency_of`):

* **streamed** (:class:`~int8store.StreamingSplit`) when asked
  (``max_device_bytes``), or when a store is larger than the memory ceiling:
  from a store nothing of the images is read at start, each shard read from
  the file as it is needed, every chunk checked; any other source is read
  whole into host memory as int8 and streamed to the device from there;
* **over several devices** (``devices``), each split's rows spread over
  them; a store is then read by each process for its own devices' rows only
  (:mod:`int8store.dataset.over_devices`);
* **whole** otherwise (:class:`~int8store.SharedDataset`), placed on JAX's
  device in JAX mode.

Every road checks the three splits are there the same way
(:func:`check_splits`), says the same way when a training split runs by
class (:func:`say_if_sorted_by_class`), and computes the training split's
normalization statistics once (:func:`~int8store.codes.statistics.normalization_statistics`:
from its codes, or from the histograms a store's manifest records), which
every split then uses.
"""

import os
import sys

import numpy as np

from .codes.histogram import channel_code_counts, channels_of, code_counts
from .codes.statistics import normalization_statistics, scale_notice
from .codes.vocabulary import NORMALIZATIONS, SPLITS, STORAGES, check_choice, check_flag, check_mode
from .errors import ArgumentError, SourceFormatError, named_by
from .order.shuffle import check_seed
from .plan.residency import RESIDENCIES, residency_of
from .runtime.words import counted
from .sources.locate import find_store

__all__ = ["load_data", "load_splits", "load_streams", "fits_in_memory", "find_store",
           "check_splits", "say_if_sorted_by_class"]

def check_splits(origin, counts):
    """Raise unless ``counts`` (``{split: examples}``) holds the train, valid
    and test splits, each with an example (a store written from fewer than
    six training examples by an earlier int8store may have an empty validation split)."""
    from .plan.arrangement import check_examples

    missing = [name for name in SPLITS if name not in counts]
    if missing:
        cut = " (test_size= or convert --test-size cuts one from train)" \
            if missing == ["test"] else ""
        raise SourceFormatError(f"{origin}: no {' or '.join(missing)} split; load_data needs "
                                f"{', '.join(SPLITS)}, and cuts a validation split from train "
                                f"where a source has none but not a test split{cut}")
    check_examples(origin, {name: counts[name] for name in SPLITS})


def say_if_sorted_by_class(labels, origin, split="train", report=None, store=False):
    """Say, in one line (``report``, else stderr), that the training split
    ``split`` of ``origin`` runs by class (see
    :func:`~int8store.order.classes.label_runs`), with what to do; returns
    whether it does. Its minibatches would each hold one class. A ``store``
    keeps the order it was written in: it is converted again."""
    from .order.classes import label_runs

    runs = label_runs(labels)
    if runs.sorted:
        line = (f"int8store: split {split!r} of {origin} is sorted by class ({runs.describe()}): "
                "its minibatches hold one class each, which SGD learns poorly from; "
                f"{'convert the source again' if store else 'read or convert the source'} "
                "without keep_order (--keep-order): a source sorted by class is then shuffled; "
                "or take it in a new order each epoch (seed=, --seed)")
        _say(line, report)
    return runs.sorted


def fits_in_memory(dataset, max_memory=None, caller=None):
    """Whether ``dataset`` may be held whole: False only for a store whose images and labels
    come to more than the memory ceiling (other sources are held to it as they are read)."""
    from .runtime.limits import max_memory as ceiling, memory_ceiling

    path = find_store(dataset, caller)
    if path is None:
        return True
    with memory_ceiling(max_memory):
        return _open(path).nbytes <= ceiling()


def load_splits(dataset, normalize="unit", storage="int8", valid_size=None, valid_seed=None,
                cache_dir=None, lossy=False, mode="c", dtype=None, caller=None, max_memory=None,
                devices=None, keep_order=False, test_size=None, report=None,
                max_device_bytes=None, batch_size=1, seed=None, prefetch=2, workers=2,
                residency=None):
    """The train, valid and test splits of ``dataset``, each held as the
    module docstring says.

    Parameters are those of :func:`load_data`, and for streamed splits those
    of :func:`load_streams` (``max_device_bytes``, ``batch_size``,
    ``prefetch``, ``workers``). ``seed``: the training split in a new order
    each epoch, whatever holds it (held whole or over devices,
    :meth:`~int8store.SharedDataset.shuffle`; streamed, its shards and
    their examples). ``residency``: ``"whole"`` or ``"streamed"``
    to decide it (``load_data`` holds whole, ``load_streams`` streams);
    None decides as the module docstring says. ``report`` is told (a line
    each) how streamed splits are held; a training split sorted by class is
    said on stderr (:func:`say_if_sorted_by_class`), unless ``seed`` shuffles
    it.

    Returns
    -------
    dict
        ``{"train": split, "valid": ..., "test": ...}``: each a
        :class:`~int8store.dataset.split.Split` (a dict: unpacked, it gives
        the names), its ``label_names`` the data's class names.

    Examples
    --------
    >>> splits = load_splits("digits")
    >>> train = splits["train"]
    >>> train.n_examples, train.n_batches(100)
    (1197, 11)
    """
    from .runtime.allocator import keep_large_blocks
    from .runtime.limits import max_memory as ceiling, memory_ceiling
    from .sources.locate import caller_file

    check_choice("normalize", normalize, NORMALIZATIONS)
    check_choice("storage", storage, STORAGES)
    check_mode(mode)  # before the reading, which may take a while
    lossy, keep_order = check_flag("lossy", lossy), check_flag("keep_order", keep_order)
    if seed is not None:
        check_seed(seed)
    if valid_seed is not None:
        check_seed(valid_seed, name="valid_seed")
    if residency is not None:
        check_choice("residency", residency, RESIDENCIES)  # (before the reading)
    caller = caller or caller_file()
    several = devices not in (None, 1)
    if several and (mode != "jax" or storage != "int8"):
        raise ArgumentError("devices= needs mode='jax' and storage='int8'")
    store = find_store(dataset, caller)
    with memory_ceiling(max_memory):
        # (opened once, unchecked: a stream checks each chunk as it reads it)
        opened = _open(store) if store is not None and (residency != "whole" or several) \
            else None
        residency = residency_of(residency, max_device_bytes,
                                 None if opened is None else opened.nbytes, ceiling(), devices,
                                 storage)
        if residency == "streamed":
            streams = _streamed(dataset, opened, caller, normalize, dtype, mode,
                                max_device_bytes, batch_size, seed, prefetch, workers, report,
                                cache_dir, valid_size, valid_seed, lossy, keep_order, test_size)
            _say_if_not_scaled(streams["train"], dataset, normalize, report)
            keep_large_blocks()
            return streams
        if several and store is not None:  # each process reads its own devices' rows
            from .dataset.over_devices import load_store_over_devices

            opened.verify()
            check_splits(store, opened.splits)
            names = opened.label_names
            say_if_sorted_by_class(opened.read_labels("train"), store, report=_quiet(seed),
                                   store=True)
            with named_by(dataset):
                splits = load_store_over_devices(opened, devices, normalize, dtype,
                                                 _store_statistics(opened, normalize))
        else:
            held, encoding, image_shape, names = _read_whole(
                dataset, caller, cache_dir, valid_size, valid_seed, lossy, keep_order, test_size,
                _quiet(seed), report)
            with named_by(dataset):  # (a split too small for the devices)
                splits = _whole(held, encoding, image_shape, normalize, storage, dtype, mode,
                                devices)
    if seed is not None:
        splits["train"] = splits["train"].shuffle(seed)
    _say_if_not_scaled(splits["train"], dataset, normalize, report)
    keep_large_blocks()  # (each step's large buffers reused, as after the classic loader)
    return _named(splits, names)


def _named(splits, names):
    """``splits``, each told the data's class names (its ``label_names``)."""
    for split in splits.values():
        split.label_names = None if names is None else list(names)
    return splits


def _say_if_not_scaled(train, dataset, normalize, report):
    """Say (``report``, else stderr) when the images keep values far from
    pixels' scale (:func:`~int8store.codes.statistics.scale_notice`)."""
    origin = os.fspath(dataset) if isinstance(dataset, (str, os.PathLike)) else "the data"
    source = getattr(train, "source", None)  # (a stream's: its histogram without a read)
    counts = source.code_counts if source is not None else lambda: _code_counts_of(train)
    line = scale_notice(getattr(train, "encoding", None), origin, normalize, counts)
    if line is not None:
        _say(line, report)


def _code_counts_of(split):
    """The histogram of a split's codes; None for a split held as floats."""
    rows = split.rows()
    return code_counts(rows) if rows.dtype == np.int8 else None


def _say(line, report):
    """``line`` to ``report``, else on stderr."""
    (report or (lambda text: print(text, file=sys.stderr)))(line)


def _quiet(seed):
    """Where the sorted-by-class notice goes: stderr (None), or nowhere when
    a seed takes the training split in a new order each epoch."""
    return (lambda line: None) if seed is not None else None


def _open(path):
    """The store at ``path``, its chunks not read yet."""
    from .store.reader import open_store

    return open_store(path, verify=False)


def _store_statistics(store, normalize):
    """The training split's statistics, from the histograms the store's
    manifest records (counted from the file where it has none)."""
    return normalization_statistics(normalize, store.encoding,
                                    lambda: store.code_counts("train"),
                                    lambda: store.channel_code_counts("train"))


def _read_whole(dataset, caller, cache_dir, valid_size, valid_seed, lossy, keep_order,
                test_size, sorted_report, report):
    """``({split: (codes, labels)}, encoding, image_shape, class names)``:
    the source read and planned (:func:`~int8store.plan.splits.plan_splits`),
    each split's source images released as its codes are taken; the
    sorted-by-class notice said to ``sorted_report``, the source's notes to
    ``report`` (each else on stderr)."""
    from .sources import read_source

    source = read_source(dataset, cache_dir=cache_dir, caller=caller)
    # The rest is imported once the source is read: reading is when memory peaks.
    from .plan.splits import plan_splits
    from .runtime.allocator import give_back_freed_memory

    plan = plan_splits(source, valid_size=valid_size, valid_seed=valid_seed, lossy=lossy,
                       keep_order=keep_order, test_size=test_size)
    del source
    check_splits(plan.origin, {name: split.count for name, split in plan.splits.items()})
    say_if_sorted_by_class(plan.labels("train"), plan.origin, report=sorted_report,
                           store=plan.encoded)
    for note in plan.notes:
        _say(f"int8store: {note}", report)
    held = {name: (plan.codes(name), plan.labels(name)) for name in SPLITS}
    encoding, image_shape, names = plan.encoding, plan.image_shape, plan.label_names
    del plan
    give_back_freed_memory()
    return held, encoding, image_shape, names


def _whole(held, encoding, image_shape, normalize, storage, dtype, mode, devices):
    """Each split held whole (placed where ``mode`` runs, over ``devices``)."""
    # Only now the graphs (and the library's set-up): after the peak of reading.
    from .dataset.shared import SharedDataset

    mean, per_channel = normalization_statistics(
        normalize, encoding, lambda: code_counts(held["train"][0]),
        lambda: channel_code_counts(held["train"][0], channels_of(image_shape)))
    splits = {name: SharedDataset(codes, labels, encoding, normalize=normalize, storage=storage,
                                  dataset_mean=mean, image_shape=image_shape, name=name,
                                  dtype=dtype, channel_statistics=per_channel)
              for name, (codes, labels) in held.items()}
    # (the splits hold the codes now: each host array goes as soon as it is on
    # the device, not once every split is there)
    held.clear()
    if mode != "c":
        from .backend.jax.device import place

        if devices not in (None, 1):  # (a run's checkpoint names the data by it)
            for split in splits.values():
                split.keep_digest()
        place(list(splits.values()), mode, devices=devices)
    return splits


def _streamed(dataset, opened, caller, normalize, dtype, mode, max_device_bytes, batch_size, seed,
              prefetch, workers, report, cache_dir, valid_size, valid_seed, lossy, keep_order,
              test_size):
    """Each split a :class:`~int8store.StreamingSplit` (see :func:`load_streams`)."""
    from .runtime.limits import describe_bytes, max_memory as ceiling, parse_size
    from .streaming.sources import ArrayShards, StoreShards
    from .streaming.split import StreamingSplit, fitting_shard_size, shard_size_for

    if int(batch_size) != batch_size or batch_size < 1:
        raise ArgumentError(f"batch_size={batch_size!r}: expected a positive integer")
    limit = ceiling()
    budget = (parse_size(max_device_bytes, "max_device_bytes") if max_device_bytes is not None
              else limit // 8)  # (0 refused as -1 is: it read as "not given")
    if opened is not None:  # (each chunk is checked as it is read)
        check_splits(opened.path, opened.splits)
        sources = {name: StoreShards(opened.path, name, store=opened) for name in SPLITS}
        say_if_sorted_by_class(sources["train"].labels, opened.path, report=_quiet(seed),
                               store=True)
        encoding, image_shape, names = opened.encoding, opened.image_shape, opened.label_names
    else:
        held, encoding, image_shape, names = _read_whole(dataset, caller, cache_dir, valid_size,
                                                         valid_seed, lossy, keep_order,
                                                         test_size, _quiet(seed), report)
        sources = {name: ArrayShards(codes, labels, name=name)
                   for name, (codes, labels) in held.items()}
    row_bytes = int(np.prod(image_shape, dtype=np.int64))
    if max_device_bytes is None and shard_size_for(budget, row_bytes) < 1:
        raise ArgumentError(
            f"{dataset}: streamed without max_device_bytes (--max-device-bytes), in shards of "
            f"an eighth of the memory ceiling ({describe_bytes(limit)}, --max-memory), and "
            f"{describe_bytes(budget)} holds no example of {row_bytes + 4:,} bytes: raise the "
            "ceiling, or give the shards' size")
    # A batch larger than the smallest split comes down to that split's size
    # (Run's cut); sized for the larger batch, the shards would hold one
    # minibatch and a remainder no minibatch reads.
    smallest = min(source.n_examples for source in sources.values())
    size = fitting_shard_size(budget, row_bytes, max(1, min(batch_size, smallest)))
    train = sources["train"]
    mean, per_channel = normalization_statistics(normalize, encoding, train.code_counts,
                                                 train.channel_code_counts)
    streams = {}
    for name in SPLITS:
        training = name == "train"
        streams[name] = StreamingSplit(
            sources[name], size, encoding, image_shape=image_shape, normalize=normalize,
            dtype=dtype, seed=seed if training else None, workers=workers, mode=mode, name=name,
            prefetch=prefetch if training else 0, dataset_mean=mean,
            channel_statistics=per_channel, max_prefetch_bytes=limit // 2 if training else None)
    if report is not None:
        for stream in streams.values():
            how = ("held whole" if stream.n_shards == 1 else
                   f"streamed in {counted(stream.n_shards, 'shard')} of "
                   f"{counted(stream.shard_size, 'example')}")
            report(f"... {stream.name}: {counted(stream.n_examples, 'example')} {how}")
        if size < min(batch_size, smallest):  # (minibatches() refuses the larger batch)
            report(f"... batch size {batch_size} is larger than a shard of {size:,} examples: "
                   f"take minibatches of {size:,} at most")
    return _named(streams, names)


def load_streams(dataset, max_device_bytes=None, batch_size=1, seed=None, normalize="unit",
                 dtype=None, mode="c", max_memory=None, prefetch=2, workers=2, report=None,
                 cache_dir=None):
    """The train, valid and test splits of ``dataset`` as a list of three
    :class:`~int8store.StreamingSplit`, each fed to the device in shards
    (:func:`load_splits` with ``residency="streamed"``).

    Parameters
    ----------
    dataset
        As for :func:`load_data`; a store is read from the file, shard by
        shard (host memory holds the labels, 4 bytes an example, and the
        shards in flight); another source is read whole into host memory as
        int8 and streamed to the device from there.
    max_device_bytes : int, optional
        The most bytes of images and labels in one shard of a split (each
        split holds one shard on the device). Default: an eighth of the
        memory ceiling, so that the training split's four buffers (with the
        default prefetch) and the others' one each stay within three
        quarters of it.
    batch_size : int
        Shards hold whole minibatches of this size, or of the smallest
        split's size where that is less (the batch size must then come down
        to it). If not even one minibatch fits in a shard, the batch size
        must come down to ``min(s.shard_size for s in streams)``: ``report``
        says so, and ``minibatches`` and ``n_batches`` refuse the larger
        batch (no shard would give one).
    seed : int, optional
        Shuffle the training split's shards and their examples each epoch
        (the validation and test splits keep their order).
    normalize, dtype, mode
        As for :func:`load_data`.
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
        and is scored by :func:`~int8store.training.scoring_function`.
    """
    from .sources.locate import caller_file

    splits = load_splits(dataset, normalize=normalize, dtype=dtype, mode=mode,
                         max_memory=max_memory, report=report, cache_dir=cache_dir,
                         caller=caller_file(), max_device_bytes=max_device_bytes,
                         batch_size=batch_size, seed=seed, prefetch=prefetch, workers=workers,
                         residency="streamed")
    return [splits[name] for name in SPLITS]


def load_data(dataset, normalize="unit", storage="int8", valid_size=None, valid_seed=None,
              cache_dir=None, lossy=False, mode="c", dtype=None, max_memory=None, devices=None,
              keep_order=False, test_size=None):
    """Load a dataset as ``[(train_x, train_y), (valid_x, valid_y), (test_x, test_y)]``.

    The drop-in for the classic tutorials' ``load_data``: each ``x`` is a
    symbolic float view of int8 images held in a shared variable (slicing it
    slices the int8 data first, so only the minibatch is widened), each ``y``
    the int32 labels as the classic's ``T.cast(shared_y, 'int32')`` was,
    ``y.owner.inputs[0]`` their shared variable
    (:class:`~int8store.dataset.views.LabelsView`). ``x.get_value()`` gives
    the decoded images, as the classic shared variable held them; count
    examples with
    ``y.get_value(borrow=True).shape[0]``, which costs nothing. The splits
    are held whole (:func:`load_splits` with ``residency="whole"``).

    Parameters
    ----------
    dataset : str or path
        ``"digits"`` (scikit-learn's 8x8 digits, offline), ``"mnist"`` or
        ``"cifar10"`` (the cache folder, downloaded if missing), a path to
        ``mnist.pkl.gz``, a folder with the four MNIST IDX files (gzipped or
        not), ``cifar-10-python.tar.gz`` or its folder (32x32x3 colour images,
        channels last), an ``.npz``, an HDF5 file or int8store store, or a
        folder / ``.zip`` / ``.tar`` of class folders of images. A bare file name not in the working folder
        is looked for in ``../data/`` beside the calling file, as the classic
        tutorials did; a missing ``mnist.pkl.gz`` then comes from the cache.
    normalize : {"unit", "batch", "dataset", "channel", "standard", "none"}
        See :func:`~int8store.dequantize`; ``"unit"`` gives the classic values.
    storage : {"int8", "float"}
        ``"float"`` holds a float copy, the classic way, kept for comparison.
    valid_size : int or float, optional
        If the source has no validation split, how many training examples
        (or which fraction) become one. Default: a sixth (MNIST's 60,000 →
        50,000/10,000, as the classic mnist.pkl.gz).
    valid_seed : int, optional
        The seed of the planning step's draws (default 0): a source whose
        labels run by class (class folders, arrays sorted by label) is
        shuffled, and its validation split drawn stratified (each class in
        proportion); a source whose order is kept (IDX, mnist.pkl.gz,
        CIFAR-10, the digits, a store) gives the last examples of train
        unless a seed is given, then a stratified draw too.
        ``int8store convert`` takes the same options (``--seed``).
    keep_order : bool
        Keep the source's order even where its labels run by class.
    test_size : int or float, optional
        For a source without a test split: the training examples (a count,
        or a fraction; default a sixth) cut into one, stratified by class.
    cache_dir : path, optional
        Where ``"mnist"`` and ``"cifar10"`` are cached (default
        ``$INT8STORE_DATA``, else ``~/.cache/int8store``).
    lossy : bool
        Quantize data that int8 cannot hold exactly instead of refusing it.
    mode : {"c", "jax"}
        Where the data is held: host memory for the library's C backend, or
        JAX's default device (a GPU when JAX sees one), placed once; compile
        with ``function(..., mode=int8store.function_mode(mode))``.
    dtype : {"float32", "float64"}, optional
        The views' dtype; default the library's ``floatX``, as the classic
        shared variables. Both hold exactly the source's values. To train
        in float32 on a GPU, set ``floatX=float32`` or call
        :func:`int8store.training.set_up_run` first, as the tutorials do
        (``dtype`` alone leaves the model in ``floatX``): the libraries'
        default float64 turns on JAX's 64-bit mode, and a classic LeNet5
        run then takes over three times as long.
    max_memory : int or str, optional
        Ceiling on what the source's headers may ask to allocate at once,
        e.g. ``"4GiB"``; default half the physical memory (see
        :mod:`int8store.runtime.limits`). Sizes are also checked against the file.
    devices : int, "all" or list, optional
        With ``mode="jax"``: each split in blocks over that many devices
        (see :func:`int8store.place`); a store is then read by each process
        for its own devices' rows only.

    Examples
    --------
    >>> (train_x, train_y), valid, test = load_data("digits", dtype="float32")
    >>> train_y.get_value(borrow=True).shape[0]
    1197
    >>> train_x.get_value(borrow=True).shape, train_x.dtype
    ((1197, 64), 'float32')
    >>> train_x.dataset.data.get_value(borrow=True).dtype
    dtype('int8')
    """
    from .dataset.views import labels_view
    from .sources.locate import caller_file

    splits = load_splits(dataset, normalize=normalize, storage=storage, valid_size=valid_size,
                         valid_seed=valid_seed, cache_dir=cache_dir, lossy=lossy, mode=mode,
                         dtype=dtype, caller=caller_file(), max_memory=max_memory,
                         devices=devices, keep_order=keep_order, test_size=test_size,
                         residency="whole")
    # (y as the classic's T.cast(shared_y, 'int32'): over the labels' shared variable)
    return [(splits[n].x, labels_view(splits[n].x.dataset)) for n in SPLITS]
