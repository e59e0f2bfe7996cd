"""Converting an archive into an int8store file, in bounded memory.

The source is read a chunk of images at a time (see :mod:`int8store.sources`),
encoded and appended to the store, hashing as it goes; the output appears
only once complete. A source sorted by class is written shuffled (the
planning step's rule, :mod:`int8store.plan.arrangement`), read by index or
through a temporary spill file beside the output (:mod:`int8store.plan.rows`).
"""

from pathlib import Path

import numpy as np
from tqdm import tqdm

from .codes.labels import class_count
from .codes.vocabulary import check_flag
from .errors import ArgumentError, EncodingError, path_argument, shortened
from .store.atomic import check_can_write, check_not_a_source
from .order.shuffle import check_seed
from .runtime.interrupts import interrupts_remembered
from .runtime.limits import memory_ceiling, parse_size
from .runtime.words import listed
from .plan.arrangement import describe_order
from .plan.splits import DEFAULT_CHUNK_BYTES, plan_splits
from .sources import class_folder_trees, files_read, read_source
from .store.writer import StoreWriter

__all__ = ["convert"]

#: Names that say another format than the store's HDF5 (what convert reads, or
#: writes elsewhere): a store so named would be taken for one.
_OTHER_FORMAT_SUFFIXES = {".npz", ".npy", ".pkl", ".pickle", ".gz", ".zip", ".tar", ".tgz",
                          ".bz2", ".xz", ".idx", ".png", ".jpg", ".jpeg", ".gif", ".bmp",
                          ".webp", ".tif", ".tiff", ".json", ".csv", ".txt", ".md", ".py",
                          ".pt", ".pth", ".ckpt", ".safetensors", ".parquet", ".tfrecord"}


def convert(sources, output, valid_size=None, valid_seed=None, lossy=False, resize=None,
            keys=None, force=False, command_line=None, chunk_bytes=DEFAULT_CHUNK_BYTES,
            max_memory=None, report=None, keep_order=False, test_size=None):
    """Convert ``sources`` into the int8store file ``output``.

    The splits, their order, their encoding and image shape are settled by
    the same step as :func:`~int8store.load_data`'s
    (:func:`~int8store.plan_splits`): the same source with the same options
    gives the same examples in the same order either way, and the same
    command writes the same store (byte for byte with ``$SOURCE_DATE_EPOCH``
    set: otherwise the time of writing differs).

    Parameters
    ----------
    sources : path or list of paths
        Anything :func:`~int8store.sources.read_source` reads: IDX files or a
        folder of them, ``.npz``, ``mnist.pkl.gz``, ``cifar-10-python.tar.gz``
        or its folder, a folder / ``.zip`` / ``.tar(.gz)`` of class folders of
        images, an HDF5 file, a store; or ``"digits"``, ``"mnist"``, ``"cifar10"``.
    output : path
        The ``.h5`` file to write; an existing one is replaced only with ``force``.
    valid_size, valid_seed
        For a source without a validation split: its size (default a sixth of
        train). ``valid_seed`` (default 0) seeds the shuffle of a source sorted
        by class and the stratified cuts; the seed is recorded in the store
        (see :func:`~int8store.plan_splits`).
    lossy : bool
        Quantize data int8 cannot hold exactly to 256 levels; the store's
        encoding records the largest error.
    resize : (rows, cols) or "ROWSxCOLS", optional
        Resize image files to this size.
    keys : dict, optional
        ``{split: (images key, labels key)}`` for ``.npz`` and HDF5 sources.
    command_line : str, optional
        Recorded in the file (default: this process's command line).
    chunk_bytes : int or str
        Image bytes processed at a time (``"16MiB"``): the memory the
        conversion needs.
    max_memory : int or str, optional
        Ceiling on what the source may ask to hold in memory at once (a label
        array, a pickled array, one image), e.g. ``"2GiB"``; default half the
        physical memory (see :mod:`int8store.runtime.limits`).
    report : callable, optional
        Called with a line of text saying how the validation split was made,
        how the examples were ordered, and which output folder was created.
    keep_order : bool
        Keep the source's order even where its labels run by class.
    test_size : int or float, optional
        For a source without a test split: the training examples (a count,
        or a fraction; default a sixth) cut into one, stratified by class.

    Returns
    -------
    Path of the written file.
    """
    with memory_ceiling(max_memory), interrupts_remembered():
        return _convert(sources, output, valid_size, valid_seed, lossy, resize, keys, force,
                        command_line, chunk_bytes, report, keep_order, test_size)


def _convert(sources, output, valid_size, valid_seed, lossy, resize, keys, force, command_line,
             chunk_bytes, report, keep_order, test_size):
    path_argument(output, "output")
    lossy, force = check_flag("lossy", lossy), check_flag("force", force)
    keep_order = check_flag("keep_order", keep_order)
    chunk_bytes = parse_size(chunk_bytes, "chunk_bytes")  # (0 and -5 were one row a chunk)
    check_not_a_source(output, files_read(sources), "convert", "the store",
                       class_folder_trees(sources))
    suffix = Path(output).suffix.lower()
    if suffix in _OTHER_FORMAT_SUFFIXES:
        raise ArgumentError(f"{output}: a store is an HDF5 file, and a name ending in {suffix} "
                            "says another format: name it .h5")
    check_can_write(output, force)  # before the reading, which may take long
    if valid_seed is not None:
        check_seed(valid_seed, name="valid_seed")
    plan = plan_splits(read_source(sources, resize=resize, keys=keys), valid_size=valid_size,
                       valid_seed=valid_seed, lossy=lossy, chunk_bytes=chunk_bytes,
                       keep_order=keep_order, test_size=test_size)
    if report is not None:
        report(f"test split: {plan.test}")  # (cut first: the validation's line names it)
        report(f"validation split: {plan.validation}")
        report(f"order: {describe_order(plan.order)}")
        for note in plan.notes:
            report(f"note: {note}")
    labels = {name: plan.labels(name) for name in plan.splits}
    if report is not None and "train" in labels:
        untrained = _untrained_classes(labels, plan.label_names)
        if untrained:
            report(f"note: {untrained}")
        try:  # (a store of identifiers is still the user's data: said, not refused)
            class_count(labels.values(), plan.origin)
        except EncodingError as error:
            report(f"note: {error} (the tutorials refuse it as it is)")
    total = sum(s.count for s in plan.splits.values())
    with StoreWriter(output, plan.encoding, plan.image_shape, labels, label_names=plan.label_names,
                     source=plan.origin, command_line=command_line, force=force,
                     order=plan.order, report=report) as writer, \
            tqdm(total=total, unit="img", desc="converting", disable=None, leave=False) as bar:
        for name, codes in plan.code_chunks(chunk_bytes, spill_dir=Path(output).parent):
            writer.append(name, codes)
            bar.update(len(codes))
    return writer.path


def _untrained_classes(labels, names=None):
    """In words, the classes other splits hold and the training split does
    not (the model never sees them), or ""."""
    trained = set(np.unique(labels["train"]).tolist())
    missing = {}
    for split, held in labels.items():
        for label in sorted(set(np.unique(held).tolist()) - trained):
            missing.setdefault(label, []).append(split)
    if not missing:
        return ""
    # (a class's name as info shows it, escaped and shortened: a folder's or a store's)
    named = listed(f"{shortened(str(names[label]), 60) if names else label} ({', '.join(splits)})"
                   for label, splits in sorted(missing.items()))
    return f"classes in no training example, which the model never sees: {named}"
