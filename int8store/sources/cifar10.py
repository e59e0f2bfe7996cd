"""CIFAR-10, python version: ``cifar-10-python.tar.gz`` as distributed, the
folder ``cifar-10-batches-py/`` it unpacks to, or ``"cifar10"``: the archive
in the cache folder, downloaded there (verified) when missing.

The archive holds six batches, each a Python 2 pickle (protocol 2, written
by cPickle) of a dict: ``data``, a uint8 array of shape (10000, 3072) whose
rows hold an image's red, green and blue planes of 32x32 pixels one after
the other, each row by row; ``labels``, a list of ints 0..9; ``batch_label``
and ``filenames``. ``batches.meta`` names the classes (``label_names``).
``data_batch_1`` to ``data_batch_5`` are the ``train`` split (50,000 images),
``test_batch`` the ``test`` split (10,000); the archive has no validation
split, so the planning step cuts one from train as for MNIST's IDX files.
Images come out channels last, ``(32, 32, 3)`` (:func:`channels_last`).

Every pickle goes through the restricted unpickler (:mod:`.pickled`),
allowed only the opcodes of protocol 2 that dicts, lists, strings, ints and
numpy arrays use (:data:`~.pickled.PROTOCOL_2_DATA`), every read bounded by
the member's (or file's) size; what it rebuilds is then checked key by key:
the keys, the shape (N, 3072) and dtype uint8 of ``data``, the labels' count
and values. Members are read straight from the tar stream, never extracted:
links, names that are absolute or hold ``..``, anything but regular files
and folders, and members larger than :data:`MOST_MEMBER_BYTES` are refused.
"""

from pathlib import Path

import numpy as np

from ..errors import SizeLimitError, SourceFormatError, shown
from ..runtime.files import check_regular_file
from ..runtime.limits import check_memory, describe_bytes
from . import SourceData, Split
from ._files import TAR_ERRORS, checked_tar_members, open_tar_stream, unreadable_tar
from .download import DEFAULT_TIMEOUT, RemoteFile, configured_mirrors, dataset_folder, fetch_into
from .pickled import PROTOCOL_2_DATA, BoundedReader, restricted_load

__all__ = ["read_cifar10", "read_cifar10_archive", "read_cifar10_folder", "cifar10_folder_files",
           "is_cifar10_archive",
           "holds_cifar10_batches", "channels_last", "CIFAR10_ARCHIVE", "CIFAR10_MIRRORS"]

#: Tried in order (``$INT8STORE_CIFAR10_MIRRORS``, comma-separated, replaces them).
CIFAR10_MIRRORS = ("https://www.cs.toronto.edu/~kriz/",)
#: The archive as its authors distribute it: 170,498,071 bytes, md5
#: c58f30108f718f92721af3b95e74349a (https://www.cs.toronto.edu/~kriz/cifar.html);
#: the SHA-256 is the one TensorFlow's Keras loader checks
#: (tensorflow/tensorflow, tensorflow/python/keras/datasets/cifar10.py: file_hash).
CIFAR10_ARCHIVE = RemoteFile("cifar-10-python.tar.gz", 170498071,
                             "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce")
_MIRRORS_VARIABLE = "INT8STORE_CIFAR10_MIRRORS"

#: The folder the archive's members are in.
FOLDER = "cifar-10-batches-py"
TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_BATCH = "test_batch"
META = "batches.meta"
_SIDE, _CHANNELS, _CLASSES = 32, 3, 10
_ROW = _SIDE * _SIDE * _CHANNELS  # 3072 bytes an image
#: The largest member of the archive read or skipped: a batch of 10,000
#: images takes 30.7 MB (its pickle a little more); eight times that.
#: ``batches.meta`` (158 bytes) takes 1 MiB at most.
MOST_MEMBER_BYTES = 256 << 20
_MOST_META_BYTES = 1 << 20
_LAYOUT = f"the CIFAR-10 archive names its files {FOLDER}/BATCH"
# The keys of a batch and of batches.meta: (required, optional).
_BATCH_KEYS = (("data", "labels"), ("batch_label", "filenames"))
_META_KEYS = (("label_names",), ("num_cases_per_batch", "num_vis"))
#: What a batch's pickle may hold, as a refusal of anything else names it.
_HOLDS = "dicts, byte strings, ints, a uint8 array and lists"


def read_cifar10(cache_dir=None, mirrors=None, remote=None, timeout=DEFAULT_TIMEOUT):
    """CIFAR-10 as ``SourceData`` from the cache folder (``cache_dir``,
    ``$INT8STORE_DATA`` or ``~/.cache/int8store``, then ``cifar10/``): its
    ``cifar-10-python.tar.gz``, checked by size and SHA-256 on every load,
    downloaded there when missing (from ``mirrors``, else
    ``$INT8STORE_CIFAR10_MIRRORS``, else :data:`CIFAR10_MIRRORS`; never with
    ``$INT8STORE_OFFLINE`` set). ``remote``: the file expected (default
    :data:`CIFAR10_ARCHIVE`)."""
    remote = remote or CIFAR10_ARCHIVE
    folder = dataset_folder("cifar10", cache_dir)
    fetch_into(folder, (remote,), mirrors or configured_mirrors(_MIRRORS_VARIABLE, CIFAR10_MIRRORS),
               timeout, "CIFAR-10",
               f"Put {remote.name} ({remote.size:,} bytes, from {CIFAR10_MIRRORS[0]}) into "
               f"{folder} (or set INT8STORE_DATA to a folder whose cifar10/ subfolder holds it).")
    return read_cifar10_archive(folder / remote.name)


def is_cifar10_archive(path):
    """Whether the tar archive ``path`` is CIFAR-10's: named so, or its first
    member in ``cifar-10-batches-py/`` (one header read)."""
    if Path(path).name.lower().startswith("cifar-10-python"):
        return True
    try:
        with open_tar_stream(path) as archive:
            first = archive.next()
    except TAR_ERRORS:
        return False  # (the image archive reader says what is wrong with it)
    return first is not None and _parts(first.name)[:1] == [FOLDER]


def holds_cifar10_batches(folder):
    """Whether ``folder`` is ``cifar-10-batches-py/`` or holds it."""
    folder = Path(folder)
    return (folder / TRAIN_BATCHES[0]).is_file() or (folder / FOLDER / TRAIN_BATCHES[0]).is_file()


def read_cifar10_archive(path):
    """The splits of ``cifar-10-python.tar.gz`` (see the module docstring),
    read in one pass over the tar stream."""
    path = Path(path)
    found = {}
    try:
        with open_tar_stream(path) as archive:
            for member, where in checked_tar_members(archive, path, _LAYOUT):
                if member.isdir():
                    continue
                if not member.isfile():
                    raise SourceFormatError(f"{where}: is not a regular file (a device or a "
                                            "pipe); int8store reads regular files only")
                name = _batch_name(member.name)
                # (any member: skipping one in a compressed stream unpacks it)
                _check_size(name, member.size, where)
                if name is None:
                    continue  # readme.html, and whatever else is beside the batches
                if name in found:
                    raise SourceFormatError(f"{where}: a second {name}; the archive holds one")
                found[name] = _parse(name, archive.extractfile(member), member.size, where)
    except TAR_ERRORS as error:
        raise unreadable_tar(path, error) from error
    return _source(found, str(path), f"{path}:{FOLDER}/")


def cifar10_folder_files(folder):
    """The files :func:`read_cifar10_folder` reads in ``folder``."""
    folder = _batches_folder(folder)
    return [folder / name for name in TRAIN_BATCHES + (TEST_BATCH, META) if (folder / name).exists()]


def _batches_folder(folder):
    """``cifar-10-batches-py/``: ``folder``, or the one inside it."""
    folder = Path(folder)
    return folder if (folder / TRAIN_BATCHES[0]).is_file() else folder / FOLDER


def read_cifar10_folder(folder):
    """The splits of the folder ``cifar-10-batches-py/`` (or of one holding it)."""
    folder = _batches_folder(folder)
    found = {}
    for name in TRAIN_BATCHES + (TEST_BATCH, META):
        path = folder / name
        if not path.exists():
            continue  # (_source names every missing batch)
        check_regular_file(path)
        size = path.stat().st_size
        _check_size(name, size, str(path))
        with open(path, "rb") as f:
            found[name] = _parse(name, f, size, str(path))
    return _source(found, str(folder), f"{folder}/")


def channels_last(rows):
    """CIFAR-10's rows of 3072 bytes (1024 red, 1024 green, 1024 blue, each
    32x32 row by row) as images ``(N, 32, 32, 3)``: a view, no copy.

    Examples
    --------
    >>> rows = np.arange(3072, dtype=np.int64).reshape(1, 3072)
    >>> image = channels_last(rows)
    >>> image.shape, image[0, 0, 0].tolist(), image[0, 0, 1].tolist(), image[0, 1, 0].tolist()
    ((1, 32, 32, 3), [0, 1024, 2048], [1, 1025, 2049], [32, 1056, 2080])
    """
    return rows.reshape(-1, _CHANNELS, _SIDE, _SIDE).transpose(0, 2, 3, 1)


def _parts(name):
    return [p for p in name.split("/") if p not in ("", ".")]


def _batch_name(member_name):
    """``data_batch_1`` for ``cifar-10-batches-py/data_batch_1`` (or a bare
    ``data_batch_1``); None for a member the reader does not need."""
    parts = _parts(member_name)
    wanted = TRAIN_BATCHES + (TEST_BATCH, META)
    if parts and parts[-1] in wanted and (len(parts) == 1 or parts[:-1] == [FOLDER]):
        return parts[-1]
    return None


def _check_size(name, size, where):
    """Refuse a member (or file) ``name`` (None: one not read) of ``size``
    bytes that no CIFAR-10 member comes near."""
    most, what = ((_MOST_META_BYTES, "CIFAR-10's batches.meta") if name == META
                  else (MOST_MEMBER_BYTES, "any member of CIFAR-10"))
    if size > most:
        raise SizeLimitError(f"{where}: is {describe_bytes(size)}, more than {what} can take "
                             f"({describe_bytes(most)})")
    if name is not None:
        check_memory(size, "the batch", where)


def _parse(name, file, size, where):
    """The checked content of batch (or meta) ``name``, read from ``file``."""
    content = restricted_load(BoundedReader(file, where, size), origin=where,
                              opcodes=PROTOCOL_2_DATA, holds=_HOLDS)
    return _meta(content, where) if name == META else _batch(content, where)


def _entries(content, where, keys):
    """A pickled dict's entries by their names as text, checked against
    ``keys`` (required, optional)."""
    required, optional = keys
    if not isinstance(content, dict):
        raise SourceFormatError(f"{where}: holds a {type(content).__name__}, expected a dict "
                                f"with {', '.join(required + optional)}")
    entries = {}
    for key, value in content.items():
        text = key.decode("latin1") if isinstance(key, bytes) else key
        if text not in required + optional or text in entries:
            raise SourceFormatError(
                f"{where}: holds the key {shown(key)}"
                f"{' twice' if text in entries else ''}; expected {', '.join(required + optional)}")
        entries[text] = value
    missing = [k for k in required if k not in entries]
    if missing:
        raise SourceFormatError(f"{where}: holds no {', '.join(missing)} (its keys: "
                                f"{', '.join(entries) or 'none'})")
    return entries


def _is_text(value):
    return isinstance(value, (str, bytes))


def _batch(content, where):
    """``(rows, labels)`` of a batch: uint8 (N, 3072) and int64 (N,)."""
    entries = _entries(content, where, _BATCH_KEYS)
    data, labels = entries["data"], entries["labels"]
    if not isinstance(data, np.ndarray):
        raise SourceFormatError(f"{where}: its data is a {type(data).__name__}, expected a numpy "
                                "array of uint8")
    if data.dtype != np.uint8:
        raise SourceFormatError(f"{where}: its data has dtype {data.dtype}, expected uint8")
    if data.ndim == 2 and data.shape[1] == _ROW and not len(data):
        raise SourceFormatError(f"{where}: holds no image (its data has shape {data.shape}); a "
                                "CIFAR-10 batch holds 10,000")
    if data.ndim != 2 or data.shape[1] != _ROW:
        raise SourceFormatError(f"{where}: its data has shape {data.shape}, expected (N, {_ROW}): "
                                f"N images of {_SIDE}x{_SIDE} pixels in red, green and blue planes")
    if not (isinstance(labels, list) and all(type(v) is int for v in labels)):
        raise SourceFormatError(f"{where}: its labels are not a list of ints")
    if len(labels) != len(data):
        raise SourceFormatError(f"{where}: has {len(data)} images but {len(labels)} labels; "
                                "every image needs exactly one label")
    labels = np.array(labels, dtype=np.int64)
    outside = labels[(labels < 0) | (labels >= _CLASSES)]
    if len(outside):
        raise SourceFormatError(f"{where}: holds the label {int(outside[0])}, outside "
                                f"0..{_CLASSES - 1} (CIFAR-10's {_CLASSES} classes)")
    names = entries.get("filenames", [])
    if not (isinstance(names, list) and all(_is_text(n) for n in names)) \
            or "filenames" in entries and len(names) != len(data) \
            or not _is_text(entries.get("batch_label", "")):
        raise SourceFormatError(f"{where}: its batch_label or filenames are not text, one file "
                                "name an image")
    return data, labels


def _meta(content, where):
    """The class names of ``batches.meta``."""
    entries = _entries(content, where, _META_KEYS)
    names = entries["label_names"]
    if not (isinstance(names, list) and len(names) == _CLASSES and all(_is_text(n) for n in names)):
        raise SourceFormatError(f"{where}: its label_names are not a list of {_CLASSES} names")
    num_vis = entries.get("num_vis", _ROW)
    if type(num_vis) is not int or num_vis != _ROW:  # (an array compared is no answer)
        raise SourceFormatError(f"{where}: says num_vis={shown(num_vis)}, not {_ROW}: "
                                "not the CIFAR-10 this reader knows")
    return [n.decode("latin1") if isinstance(n, bytes) else n for n in names]


def _source(found, origin, inside):
    """The SourceData of the batches ``found`` (``inside``: where they were
    looked for, for messages)."""
    missing = [n for n in TRAIN_BATCHES + (TEST_BATCH,) if n not in found]
    if missing:
        raise SourceFormatError(f"{inside}: holds no {', '.join(missing)}; CIFAR-10 "
                                f"(python version) holds {', '.join(TRAIN_BATCHES)} and {TEST_BATCH}")
    label_names = found.pop(META, None)
    notes = () if label_names is not None else (
        f"{inside} holds no {META}: the classes are unnamed (labels 0 to 9)",)
    splits = {"train": _split("train", [found.pop(n) for n in TRAIN_BATCHES], origin),
              "test": _split("test", [found.pop(TEST_BATCH)], origin)}
    return SourceData(splits, origin=origin, label_names=label_names, keeps_order=True,
                      notes=notes)


def _split(name, batches, origin):
    """One split of ``batches`` ((rows, labels) pairs, emptied as they are
    copied), its images channels last."""
    count = sum(len(rows) for rows, _ in batches)
    check_memory(count * _ROW, f"the {name} split", origin)
    images = np.empty((count, _SIDE, _SIDE, _CHANNELS), dtype=np.uint8)
    labels = np.concatenate([labels for _, labels in batches])
    start = 0
    while batches:
        rows, _ = batches.pop(0)
        images[start:start + len(rows)] = channels_last(rows)
        start += len(rows)
        del rows  # the batch's memory goes back before the next one's copy
    return Split.from_arrays(name, images, labels, origin)
