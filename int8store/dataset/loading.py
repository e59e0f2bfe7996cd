"""``load_data()``: the classic tutorials' function, returning int8-backed splits."""

import os

from ..errors import ArgumentError, SourceFormatError
from ..codes.vocabulary import NORMALIZATIONS, SPLITS, STORAGES, check_choice, check_mode

__all__ = ["load_data", "load_splits", "say_if_sorted_by_class"]


def say_if_sorted_by_class(labels, origin, split="train", report=None):
    """Say, in one line (``report``, else stderr), that the training split
    ``split`` of ``origin`` runs by class (see
    :func:`~int8store.order.classes.label_runs`), with what to do; returns
    whether it does. Its minibatches would each hold one class."""
    from ..order.classes import label_runs

    runs = label_runs(labels)
    if runs.sorted:
        line = (f"int8store: split {split!r} of {origin} is sorted by class ({runs.describe()}): "
                "its minibatches hold one class each, which SGD learns poorly from; convert "
                "the source again without --keep-order (a source sorted by class is then "
                "shuffled), or take it in a new order each epoch (--seed, in JAX mode or "
                "streamed)")
        if report is not None:
            report(line)
        else:
            import sys
            print(line, file=sys.stderr)
    return runs.sorted


def load_splits(dataset, normalize="unit", storage="int8", valid_size=None, valid_seed=None,
                cache_dir=None, lossy=False, mode="c", dtype=None, caller=None, max_memory=None,
                devices=None, keep_order=False, test_size=None, report=None):
    """The train, valid and test splits of ``dataset`` as :class:`SharedDataset` objects.

    Parameters are those of :func:`load_data`; ``report`` is told (one
    line) when the training split is sorted by class (default: stderr).

    Returns
    -------
    dict
        ``{"train": SharedDataset, "valid": ..., "test": ...}``
    """
    from ..sources import read_source
    from ..sources.locate import caller_file

    check_choice("normalize", normalize, NORMALIZATIONS)
    check_choice("storage", storage, STORAGES)
    check_mode(mode)  # before the reading, which may take a while
    if devices not in (None, 1):
        if mode != "jax" or storage != "int8":
            raise ArgumentError("devices= needs mode='jax' and storage='int8'")
        from ..sources.locate import classic_candidates
        from ..store.reader import is_store

        found = [p for p in classic_candidates(dataset, caller or caller_file())
                 if p.is_file()] if isinstance(dataset, (str, os.PathLike)) else []
        if found and is_store(found[0]):  # each process reads only its own devices' rows
            from .over_devices import load_store_over_devices
            splits = load_store_over_devices(found[0], devices, normalize, dtype)
            say_if_sorted_by_class(splits["train"].labels, found[0], report=report)
            return splits
    from ..runtime.limits import memory_ceiling

    with memory_ceiling(max_memory):
        source = read_source(dataset, cache_dir=cache_dir, caller=caller or caller_file())
        # The rest is imported once the source is read: reading is when memory peaks.
        from ..memory.estimates import give_back_freed_memory
        from ..plan.splits import plan_splits

        plan = plan_splits(source, valid_size=valid_size, valid_seed=valid_seed, lossy=lossy,
                           keep_order=keep_order, test_size=test_size)
        del source
        encoding, image_shape = plan.encoding, plan.image_shape
        missing = [n for n in SPLITS if n not in plan.splits]
        if missing:
            raise SourceFormatError(
                f"{plan.origin}: has splits {', '.join(plan.splits)}; load_data needs "
                f"{', '.join(SPLITS)} (no {', '.join(missing)} split)"
            )
        say_if_sorted_by_class(plan.labels("train"), plan.origin, report=report)
        # Each split's source images are released as its codes are taken.
        held = {name: (plan.codes(name), plan.labels(name)) for name in SPLITS}
    del plan
    give_back_freed_memory()
    # Only now the graphs (and Aesara's set-up): after the peak of reading.
    from ..codes.channels import PER_CHANNEL, ChannelStatistics
    from ..codes.histogram import channels_of
    from .shared import SharedDataset
    from .symbolic import normalization_mean

    # "dataset", "channel" and "standard" use the training split's statistics everywhere.
    mean = normalization_mean(held["train"][0], encoding) if normalize == "dataset" else None
    per_channel = (ChannelStatistics.of(held["train"][0], encoding, channels_of(image_shape))
                   if normalize in PER_CHANNEL else None)
    splits = {name: SharedDataset(codes, labels, encoding, normalize=normalize, storage=storage,
                                  dataset_mean=mean, image_shape=image_shape, name=name,
                                  dtype=dtype, channel_statistics=per_channel)
              for name, (codes, labels) in held.items()}
    if mode != "c":
        from ..backend.jax.device import place
        if devices not in (None, 1):  # (a run's checkpoint names the data by it)
            for split in splits.values():
                split.keep_digest()
        place(list(splits.values()), mode, devices=devices)
    return splits


def load_data(dataset, normalize="unit", storage="int8", valid_size=None, valid_seed=None,
              cache_dir=None, lossy=False, mode="c", dtype=None, max_memory=None, devices=None,
              keep_order=False, test_size=None):
    """Load a dataset as ``[(train_x, train_y), (valid_x, valid_y), (test_x, test_y)]``.

    The drop-in for the classic tutorials' ``load_data``: each ``x`` is a
    symbolic float view of int8 images held in a shared variable (slicing it
    slices the int8 data first, so only the minibatch is widened), each ``y``
    an int32 shared variable. ``x.get_value()`` gives the decoded images, as
    the classic shared variable held them; count examples with
    ``y.get_value(borrow=True).shape[0]``, which costs nothing.

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
    normalize : {"unit", "batch", "dataset", "none"}
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
        or a fraction) cut into one, stratified by class.
    cache_dir : path, optional
        Where ``"mnist"`` and ``"cifar10"`` are cached (default
        ``$INT8STORE_DATA``, else ``~/.cache/int8store``).
    lossy : bool
        Quantize data that int8 cannot hold exactly instead of refusing it.
    mode : {"c", "jax"}
        Where the data is held: host memory for Aesara's C backend, or JAX's
        default device (a GPU when JAX sees one), placed once; compile with
        ``function(..., mode=int8store.function_mode(mode))`` (PyTensor's or Aesara's).
    dtype : {"float32", "float64"}, optional
        The views' dtype; default Aesara's ``floatX``, as the classic shared
        variables. Both hold exactly the source's values.
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
    from ..sources.locate import caller_file

    splits = load_splits(dataset, normalize=normalize, storage=storage, valid_size=valid_size,
                         valid_seed=valid_seed, cache_dir=cache_dir, lossy=lossy, mode=mode,
                         dtype=dtype, caller=caller_file(), max_memory=max_memory,
                         devices=devices, keep_order=keep_order, test_size=test_size)
    return [(splits[n].x, splits[n].y) for n in SPLITS]
