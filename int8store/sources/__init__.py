"""Readers of image archives, each validating what it reads and naming the
file in every error.

A reader returns a :class:`SourceData`: its splits as :class:`Split` objects
whose labels are in memory and whose images are read in chunks, so that a
converter can stream an archive larger than memory while ``load_data`` simply
reads everything. :func:`read_source` picks the reader for what it is given.

May import: :mod:`int8store.errors`, :mod:`int8store.runtime`,
:mod:`int8store.codes`, :mod:`int8store.order`, :mod:`int8store.backend`,
:mod:`int8store.store`
(a store is a source too).
"""

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from ..codes.precoded import Precoded
from ..errors import ArgumentError, DatasetNotFoundError, SourceFormatError, shortened, shown
from ..runtime.files import cannot_read, check_regular_file
from ..runtime.words import nearest
from .named_arrays import as_images

__all__ = ["Split", "SourceData", "read_source", "check_source_options", "class_folder_trees",
           "files_read"]


class Split:
    """One split of an archive: ``count`` images of ``image_shape``, and labels.

    Parameters
    ----------
    name : str
    labels : ndarray, shape (count,)
    image_shape : tuple
        Shape of one image (``(rows, cols)``, ``(rows, cols, channels)``, or
        ``(features,)`` for flat vectors).
    dtype : numpy dtype of the images
    read_chunks : callable
        ``read_chunks(rows)`` yields the images in order, ``rows`` at a time
        (the last chunk may be shorter).
    origin : str
        The file(s) the split comes from, for messages.
    read_rows : callable, optional
        ``read_rows(indices)``: the images at those indices, in that order,
        for a reader that reaches any example without reading the ones
        before it (image files in a folder or a zip); see :meth:`rows`.
    """

    def __init__(self, name, labels, image_shape, dtype, read_chunks, origin, read_rows=None):
        self.name = name
        self.labels = np.asarray(labels)
        self.image_shape = tuple(int(n) for n in image_shape)
        self.dtype = np.dtype(dtype)
        self._read_chunks = read_chunks
        self._read_rows = read_rows
        self._array = None  # the images, when they are already one array in memory
        self._precoded = None  # or their codes (codes.precoded.Precoded), when read so
        self.origin = origin
        if self.labels.ndim != 1:
            raise SourceFormatError(
                f"{origin}: {name} labels must be 1-D, got shape {self.labels.shape}"
            )
        shape = self.image_shape
        if len(shape) > 31 or 0 in shape:  # (numpy 1 and HDF5 hold 32 axes; h5py no empty chunk)
            raise SourceFormatError(f"{origin}: {name} images have shape "
                                    f"{shortened(str((len(self.labels),) + shape), 80)}: images "
                                    "of 0 pixels or of more than 31 axes are not read")
        if len(shape) == 3 and shape[0] in _CHANNELS and shape[2] not in _CHANNELS:
            # (else 3x32x32 images were taken as 3 rows of 32 pixels of 32 channels)
            raise SourceFormatError(
                f"{origin}: {name} images have shape {(len(self.labels),) + shape}, channels "
                "first (N, C, H, W) as PyTorch holds them; int8store takes images channels "
                "last (N, H, W, C): store numpy.moveaxis(images, 1, -1)")

    @classmethod
    def from_arrays(cls, name, images, labels, origin):
        """A split over an array of images (or anything sliceable with a shape and
        dtype, such as an h5py dataset, read a slice at a time)."""
        images = as_images(images, origin, f"{name} images")
        labels = np.asarray(labels)
        if labels.ndim == 1 and len(images) != len(labels):
            raise SourceFormatError(
                f"{origin}: split {name!r} has {len(images)} images but {len(labels)} labels; "
                "every image needs exactly one label"
            )
        if isinstance(images, np.ndarray):
            split = cls(name, labels, images.shape[1:], images.dtype, None, origin)
            split._array = images  # read through _array, so release() frees it
            return split
        if isinstance(images, Precoded):  # float images, held as the codes they were read as
            split = cls(name, labels, images.shape[1:], images.dtype, None, origin)
            split._precoded = images
            return split
        return cls(name, labels, images.shape[1:], images.dtype,
                   lambda rows: (images[i:i + rows] for i in range(0, len(images), rows)),
                   origin)

    @property
    def count(self):
        return len(self.labels)

    @property
    def image_nbytes(self):
        return math.prod(self.image_shape) * self.dtype.itemsize

    @property
    def in_memory(self):
        """Whether the images are one array in memory (not streamed from a
        file), or the codes they were read as."""
        return self._array is not None or self._precoded is not None

    @property
    def random_access(self):
        """Whether :meth:`rows` reads examples in any order at the cost of
        reading them in order (an array in memory, image files one by one)."""
        return self.in_memory or self._read_rows is not None

    def codes_under(self, encoding):
        """The images' int8 codes under ``encoding`` where they were read as
        them (:mod:`int8store.codes.precoded`), else None."""
        return None if self._precoded is None else self._precoded.codes_under(encoding)

    def rows(self, indices):
        """The images at ``indices`` (int array), in that order; only for a
        split with :attr:`random_access`."""
        indices = np.asarray(indices, dtype=np.int64)
        if self._array is not None:
            return self._array[indices]
        if self._precoded is not None:
            return self._precoded.decoded(indices)
        if self._read_rows is None:
            raise SourceFormatError(f"{self.origin}: split {self.name!r} is read in its order only")
        return self._read_rows(indices)

    def _chunks_of_array(self, rows):
        if self._array is None:  # (codes: each chunk decoded)
            precoded = self._precoded
            return (precoded.decoded(slice(i, i + rows)) for i in range(0, self.count, rows))
        array = self._array
        return (array[i:i + rows] for i in range(0, len(array), rows))

    def release(self):
        """Drop the images held in memory (after they were encoded); the split
        cannot be read again."""
        self._array = self._precoded = None
        self._read_chunks = self._read_rows = None

    def hold(self, images):
        """Hold ``images`` as the split's own array again, after
        :meth:`release` (the planning step gives back, decoded, the floats of
        splits encoded under a candidate that a later split refused)."""
        self._array = images

    def chunks(self, rows) -> Iterator[np.ndarray]:
        """The images, ``rows`` at a time; checks that there are ``count`` of them."""
        if self.in_memory:
            read_chunks = self._chunks_of_array
        elif self._read_chunks is not None:
            read_chunks = self._read_chunks
        else:
            raise SourceFormatError(f"{self.origin}: split {self.name!r} was released after encoding")
        seen = 0
        for chunk in read_chunks(max(1, int(rows))):
            seen += len(chunk)
            if seen > self.count:
                break
            yield chunk
        if seen != self.count:
            found = f"more than {self.count}" if seen > self.count else f"{seen}"
            raise SourceFormatError(
                f"{self.origin}: split {self.name!r} has {found} images but {self.count} "
                "labels; every image needs exactly one label"
            )

    def images(self):
        """All images in one array (the split's own array when it has one: no
        copy; else a new array, read into :data:`IMAGES_CHUNK_BYTES` at a
        time, so that no chunk as large as the split is held beside it)."""
        if self._array is not None:
            return self._array
        if self._precoded is not None:
            return self._precoded.decoded()
        out = np.empty((self.count,) + self.image_shape, dtype=self.dtype)
        start = 0
        for chunk in self.chunks(max(1, IMAGES_CHUNK_BYTES // max(1, self.image_nbytes))):
            out[start:start + len(chunk)] = chunk
            start += len(chunk)
        return out


#: Image bytes :meth:`Split.images` reads at a time: each chunk is a
#: temporary beside the whole array (at 64 MiB, MNIST's 47 MB of training
#: images came as one chunk, then copied: twice their bytes at once).
IMAGES_CHUNK_BYTES = 4 << 20


@dataclass
class SourceData:
    """What a reader found.

    Attributes
    ----------
    splits : dict
        ``{split name: Split}`` in the archive's order.
    origin : str
        Where the data came from (paths or a dataset name), for messages.
    divisor : int, optional
        For integer pixels, the divisor of their unit scale (see
        :func:`~int8store.quantize`); None keeps the default.
    image_shape : tuple, optional
        Shape of one image when the images are stored as flat vectors.
    label_names : list of str, optional
        Names of the classes, by label.
    encoding : Encoding, optional
        Set when the images are already int8 codes under this encoding (a store).
    keeps_order : bool
        Whether the order of the examples means something and is kept: the
        classic sets' published splits and figures rest on it (IDX files,
        ``mnist.pkl.gz``, CIFAR-10's batches, the digits), and a store's
        order was settled when it was written. Such a source is never
        shuffled, and its validation split is cut from train's end unless a
        seed is given (see :mod:`int8store.plan`). Other sources (class
        folders, named arrays) are shuffled when their labels run by class.
    by_class : bool
        Whether the examples are read class by class however few they are
        (class folders): shuffled then, even where too few examples leave
        the runs of their labels no sign of it.
    notes : tuple of str
        What a user should hear about how the source is read, a line each
        (grey images held in colour beside colour ones).
    """

    splits: dict
    origin: str
    divisor: Optional[int] = None
    image_shape: Optional[tuple] = None
    label_names: Optional[list] = None
    encoding: Optional[object] = None
    keeps_order: bool = False
    by_class: bool = False
    notes: tuple = ()


def read_source(dataset, cache_dir=None, resize=None, keys=None, caller=None):
    """Read ``dataset``: ``"digits"``, ``"mnist"``, ``"cifar10"``, or one or more paths.

    Parameters
    ----------
    dataset : str, path, or list of paths
        See :func:`~int8store.load_data`; several paths are taken to be IDX
        files (paired by their ``train``/``t10k``/``test`` and
        ``images``/``labels`` names).
    resize : (rows, cols), optional
        For image files: the size every image is resized to.
    keys : dict, optional
        For ``.npz``/HDF5: ``{split: (images key, labels key)}``.
    caller : path, optional
        The file of the code that asked (a tutorial): a bare file name that
        is not in the working folder is looked for in ``../data/`` beside it,
        as the classic tutorials did (see :mod:`.locate`).
    """
    if isinstance(dataset, (list, tuple)) and len(dataset) == 1:
        dataset = dataset[0]  # one name keeps its meaning ("mnist", "digits")
    try:
        return _read_source(dataset, cache_dir, resize, keys, caller)
    except PermissionError as error:  # (a file or folder of the source, named)
        raise cannot_read(error.filename or dataset, error) from error


def _read_source(dataset, cache_dir, resize, keys, caller):
    kind, path = _kind(dataset, caller)
    if path is None and kind in _NAMED:
        _check_not_shadowing(kind, cache_dir)
    # (refused before the reading, which may take long)
    check_source_options(path or dataset, kind, resize=resize, keys=keys)
    if kind == "idx files":
        return _reader("idx").read_idx_files(path)
    if kind == "digits":
        return _reader("digits").read_digits()
    if kind == "mnist":
        try:
            return _reader("mnist").read_mnist(cache_dir)
        except DatasetNotFoundError as error:
            if path is None and str(dataset) != "mnist":  # (a path to mnist.pkl.gz, missing)
                from .locate import classic_candidates

                looked = " or ".join(map(str, classic_candidates(dataset, caller)))
                raise DatasetNotFoundError(f"{looked}: no such file, so the cache was tried: "
                                           f"{error}") from None
            raise
    if kind == "cifar10":
        return _reader("cifar10").read_cifar10(cache_dir)
    if kind == "idx folder":
        return _reader("idx").read_idx_folder(path)
    if kind == "cifar10 folder":
        return _reader("cifar10").read_cifar10_folder(path)
    if kind == "cifar10 archive":
        return _reader("cifar10").read_cifar10_archive(path)
    if kind == "image folder":
        return _reader("images").read_image_folder(path, resize)
    if kind == "image archive":
        return _reader("images").read_image_archive(path, resize)
    if kind == "pickle":
        return _reader("pickled").read_mnist_pickle(path)
    if kind == "npz":
        return _reader("npz").read_npz(path, keys)
    if kind == "store":  # (its magic already read: not again through read_hdf5)
        return _reader("hdf5").read_store(path)
    return _reader("hdf5").read_hdf5(path, keys)


def files_read(dataset):
    """``dataset`` (a path, or several) as a list of paths, each folder of
    IDX files or CIFAR-10 batches replaced by the files read there: a file
    written over one of them would replace the data it is made from."""
    files = []
    for path in dataset if isinstance(dataset, (list, tuple)) else [dataset]:
        kind = (_kind(path, None)[0] if isinstance(path, (str, os.PathLike)) and Path(path).is_dir()
                else None)
        if kind == "idx folder":
            files += _reader("idx").idx_folder_files(path)
        elif kind == "cifar10 folder":
            files += _reader("cifar10").cifar10_folder_files(path)
        else:
            files.append(path)
    return files


def class_folder_trees(dataset):
    """The folders among ``dataset`` (a path, or several) read as trees of
    class folders, where every file not hidden must be an image: a file
    written there would become part of the source."""
    paths = dataset if isinstance(dataset, (list, tuple)) else [dataset]
    return [Path(p) for p in paths if isinstance(p, (str, os.PathLike)) and Path(p).is_dir()
            and _kind(p, None)[0] == "image folder"]


def _reader(name):
    """The reader module ``name``, imported when it is needed: a loader's own
    imports count in the memory it takes."""
    from importlib import import_module

    return import_module(f".{name}", __name__)


#: The options each kind of source takes (others are refused, not ignored).
_TAKES = {"image folder": {"resize"}, "image archive": {"resize"}, "npz": {"keys"},
          "hdf5": {"keys"}}


#: The data sets int8store reads by name.
_NAMED = ("digits", "mnist", "cifar10")


def _check_not_shadowing(name, cache_dir):
    """Refuse a name that is also a file or folder here (not the cache's):
    ``digits`` read scikit-learn's digits beside a user's ``./digits``."""
    from .download import dataset_folder

    here = Path(name)
    if here.exists() and here.resolve() != dataset_folder(name, cache_dir).resolve():
        raise ArgumentError(f"{name!r} names int8store's own {name} data set, and ./{name} "
                            f"exists here too: give ./{name} to read it, or run elsewhere for "
                            f"the data set")


_OWN_ARRAYS = ("to hold arrays of your own, int8store.shared_dataset((images, labels)) takes "
               "them, or save them in an .npz (x_train, y_train, x_test, y_test) for load_data")


def _kind(dataset, caller):
    """``(kind, path)`` of ``dataset``: what :func:`read_source` reads it as."""
    if isinstance(dataset, (list, tuple)):
        if not all(isinstance(p, (str, os.PathLike)) for p in dataset):
            raise ArgumentError(
                f"dataset: a list or tuple names IDX files, and this one holds "
                f"{', '.join(sorted({type(p).__name__ for p in dataset}))}: {_OWN_ARRAYS}")
        paths = [Path(p) for p in dataset]
        _check_exist(paths)
        for path in paths:
            check_regular_file(path)
            _check_not_empty(path)
            if path.is_dir() or not _reader("idx").looks_like_idx(path):
                raise SourceFormatError(
                    f"{path}: several sources are read as the IDX files of one data set "
                    "(train-images-idx3-ubyte and the like), and this is not one: give other "
                    "sources one at a time")
        return "idx files", paths
    if hasattr(dataset, "shape") and hasattr(dataset, "dtype"):
        # (its repr was the message: 30 lines of an array)
        raise ArgumentError(
            f"dataset: an array of shape {shown(tuple(dataset.shape))} and dtype {dataset.dtype}, "
            f"where 'digits', 'mnist', 'cifar10' or a path is expected: {_OWN_ARRAYS}")
    if not isinstance(dataset, (str, os.PathLike)) or not str(dataset):
        # (None was a TypeError from pathlib; "" read the working folder)
        raise ArgumentError(f"dataset={shown(dataset)}: expected 'digits', 'mnist', 'cifar10', or "
                            "the path of a file or folder to read")
    if isinstance(dataset, str) and dataset in _NAMED:
        return dataset, None
    from .locate import classic_candidates

    candidates = classic_candidates(dataset, caller)
    path = next((p for p in candidates if p.exists()), None)
    if path is None:
        if Path(dataset).name == "mnist.pkl.gz":
            # The classic tutorials' default argument: then the cache, downloaded if missing.
            return "mnist", None
        _check_exist(candidates, either=True)
    if path.is_dir():
        if _reader("idx").holds_idx_files(path):
            return "idx folder", path
        if _reader("cifar10").holds_cifar10_batches(path):
            return "cifar10 folder", path
        return "image folder", path
    from ..store.file_format import is_store

    check_regular_file(path)  # (a FIFO is never opened: that waits for a writer)
    _check_not_empty(path)
    # A store by its magic, whatever its name (convert writes one under any
    # name, and the streams read it so).
    if is_store(path):
        return "store", path
    name = path.name.lower()
    if name.endswith((".pkl.gz", ".pkl")):
        return "pickle", path
    if name.endswith(".npz"):
        return "npz", path
    if name.endswith((".h5", ".hdf5")):
        return "hdf5", path
    if name.endswith((".tar", ".tar.gz", ".tgz")) and _reader("cifar10").is_cifar10_archive(path):
        return "cifar10 archive", path
    if name.endswith((".zip", ".tar", ".tar.gz", ".tgz")):
        return "image archive", path
    if _reader("idx").looks_like_idx(path):
        return "idx files", [path]
    raise SourceFormatError(
        f"{path}: unknown kind of file; expected mnist.pkl.gz (or .pkl), .npz, .h5, "
        ".zip/.tar(.gz) of class folders, IDX files, or a folder of IDX files or class folders"
    )


def _check_not_empty(path):
    """Refuse an empty file as such, whatever its name says it holds (each
    reader's own complaint about it was about a damaged format)."""
    try:
        empty = path.stat().st_size == 0
    except OSError:
        return  # (the reader says why it cannot be read)
    if empty:
        raise SourceFormatError(f"{path}: an empty file (0 bytes), nothing to read: an "
                                "interrupted download or copy?")


def check_source_options(source, kind, **options):
    """Refuse an option given (not None) that a source of ``kind`` has no use for."""
    given = [name for name, value in options.items()
             if value is not None and name not in _TAKES.get(kind, ())]
    if given:
        uses = {"resize": "image files (a folder or archive of class folders)",
                "keys": "the arrays of an .npz or of an HDF5 file that is not a store"}
        raise ArgumentError(
            f"{source if not isinstance(source, list) else source[0]}: "
            + "; ".join(f"{name} (--{name}) is for {uses[name]}" for name in given)
            + f", and this is {_KIND_NAMES.get(kind, kind)}: leave it out")


_KIND_NAMES = {"idx files": "IDX files", "digits": "scikit-learn's digits", "mnist": "MNIST",
               "cifar10": "CIFAR-10", "idx folder": "a folder of IDX files",
               "cifar10 folder": "CIFAR-10's folder", "cifar10 archive": "CIFAR-10's archive",
               "pickle": "a pickle of arrays", "store": "an int8store store, whose splits are "
               "its own", "image folder": "a folder of class folders",
               "image archive": "an archive of class folders", "npz": "an .npz",
               "hdf5": "an HDF5 file"}


def _check_exist(paths, either=False):
    """Raise naming the missing paths (``either``: each was a place to look)."""
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        bare = [p for p in missing if "/" not in p and "." not in p]  # (a name, not a path)
        near = nearest(bare[0].lower(), ["digits", "mnist", "cifar10"]) if len(bare) == 1 \
            else None
        raise DatasetNotFoundError(
            f"{(' or ' if either else ', ').join(missing)}: no such file or folder"
            + (f" (did you mean {near!r}?)" if near else "") + ". Expected 'digits', 'mnist', "
            "'cifar10', a path to mnist.pkl.gz, an .npz, an .h5 store, IDX files or a folder of "
            "them, cifar-10-python.tar.gz or its folder, or a folder (or .zip/.tar) of class "
            "folders of images"
        )


#: How many channels an image may have (grey, grey and alpha, colour, colour and alpha).
_CHANNELS = (1, 2, 3, 4)
