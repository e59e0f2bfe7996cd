"""MNIST from the cache folder, downloaded into it when missing.

The cache is ``$INT8STORE_DATA/mnist``, else ``~/.cache/int8store/mnist``. It may
hold the classic ``mnist.pkl.gz`` (used first: the tutorials' own file) or the
four gzipped IDX files; either is verified by size and checksum on every load.
"""

import os
from pathlib import Path

from ..download import DEFAULT_TIMEOUT, RemoteFile, download, verify_file
from ..errors import DatasetNotFoundError, DownloadError, SourceFormatError
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

# Set to 1 to never touch the network (fail at once when nothing is cached).
_OFFLINE_VARIABLE = "INT8STORE_OFFLINE"
# Comma-separated mirror URLs to use instead of MNIST_MIRRORS (a local mirror, a proxy).
_MIRRORS_VARIABLE = "INT8STORE_MNIST_MIRRORS"


def cache_folder(cache_dir=None):
    """Where MNIST is looked for: ``cache_dir``, ``$INT8STORE_DATA``, or
    ``~/.cache/int8store``, each with ``mnist/`` appended."""
    root = cache_dir or os.environ.get("INT8STORE_DATA") or Path.home() / ".cache" / "int8store"
    return Path(root).expanduser() / "mnist"


def mirrors_in_use():
    """``$INT8STORE_MNIST_MIRRORS`` (comma-separated URLs) if set, else the defaults."""
    configured = os.environ.get(_MIRRORS_VARIABLE, "")
    return tuple(m.strip() for m in configured.split(",") if m.strip()) or MNIST_MIRRORS


def read_mnist(cache_dir=None, mirrors=None, files=MNIST_IDX_FILES, timeout=DEFAULT_TIMEOUT):
    """MNIST as ``SourceData``: from the cached mnist.pkl.gz, else the IDX files
    (downloaded if missing, from ``mirrors`` or :func:`mirrors_in_use`)."""
    folder = cache_folder(cache_dir)
    pickle_path = folder / MNIST_PICKLE.name
    if pickle_path.is_file():
        _check_cached(pickle_path, MNIST_PICKLE)
        return read_mnist_pickle(pickle_path)
    fetch_mnist_idx(folder, mirrors or mirrors_in_use(), files, timeout)
    return read_idx_folder(folder)


def fetch_mnist_idx(folder, mirrors=MNIST_MIRRORS, files=MNIST_IDX_FILES, timeout=DEFAULT_TIMEOUT):
    """Make sure ``folder`` holds ``files``, verified; download the missing ones."""
    folder = Path(folder)
    missing = []
    for remote in files:
        path = folder / remote.name
        if path.is_file():
            _check_cached(path, remote)
        else:
            missing.append(remote)
    if not missing:
        return folder
    offline = os.environ.get(_OFFLINE_VARIABLE, "") not in ("", "0")
    failures = ["the network is off ($INT8STORE_OFFLINE is set)"] if offline else []
    for remote in [] if offline else missing:
        try:
            download(remote, mirrors, folder, timeout)
        except DownloadError as error:
            failures.append(str(error))
            break  # The other files would fail the same way: do not wait on them.
    if failures:
        raise DatasetNotFoundError(
            f"MNIST is not in the cache folder {folder} and could not be downloaded "
            f"({'; '.join(failures)}). Put the classic mnist.pkl.gz, or the four files "
            f"{', '.join(r.name for r in files)}, into {folder} "
            "(or set INT8STORE_DATA to a folder whose mnist/ subfolder holds them)."
        )
    return folder


def _check_cached(path, remote):
    problem = verify_file(path, remote)
    if problem:
        raise SourceFormatError(
            f"{path}: does not match the known {remote.name} ({problem}); "
            "the file is damaged or a different version: delete it to download it again"
        )
