"""int8store: image training sets held as int8 on the device, widened to float32
symbolically, one minibatch at a time.

>>> from int8store import load_data
>>> (train_x, train_y), (valid_x, valid_y), (test_x, test_y) = load_data("digits")

Importing the package changes nothing outside it: the names below are
imported on first use, so tools that build no graph (the ``int8store``
command, the readers) never import a graph library, and the library (PyTensor
or Aesara, see :mod:`int8store.backend`) is set up (a BLAS, fixes of its
defects) by the first call that builds a graph, through
:func:`int8store.backend.activate`.
"""

from importlib import import_module

from .errors import (
    ArgumentError,
    DatasetNotFoundError,
    DownloadError,
    EncodingError,
    Int8StoreError,
    MinibatchIndexError,
    MissingDependencyError,
    OutputExistsError,
    OutputError,
    SizeLimitError,
    SourceFormatError,
    StoreChecksumError,
    StreamError,
    StoreFormatError,
    UnsafePickleError,
)

# Public name -> the module that defines it.
_LAZY = {
    "load_data": "loading",
    "load_splits": "loading",
    "shared_dataset": "dataset",
    "SharedDataset": "dataset",
    "STORAGES": "vocabulary",
    "dequantize": "symbolic",
    "NORMALIZATIONS": "vocabulary",
    "quantize": "encoding",
    "Encoding": "encoding",
    "open_store": "store",
    "Store": "store",
    "convert": "converter",
    "plan_splits": "plan",
    "SPLITS": "vocabulary",
    "memory_table": "memory",
    "max_batch_size": "memory",
    "model_memory": "memory",
    "evaluate_in_chunks": "evaluation",
    "StreamingSplit": "streaming",
    "StoreShards": "streaming",
    "ArrayShards": "streaming",
    "stream": "streaming",
    "load_streams": "stream_loading",
    "stop_requests": "interrupts",
    "stop_requested": "interrupts",
    "save_checkpoint": "checkpoint",
    "fits_in_memory": "stream_loading",
    "tensor_library": "backend",
    "conv2d": "backend",
    "pool_2d": "backend",
    "function_mode": "backend.modes",
    "MODES": "backend.modes",
    "minibatch": "backend.minibatch",
    "place": "backend.device",
    "keep_on_device": "backend.device",
}

__all__ = list(_LAZY) + [
    "Int8StoreError",
    "ArgumentError",
    "EncodingError",
    "SourceFormatError",
    "UnsafePickleError",
    "StoreFormatError",
    "StoreChecksumError",
    "DatasetNotFoundError",
    "DownloadError",
    "OutputExistsError",
    "OutputError",
    "SizeLimitError",
    "MissingDependencyError",
    "MinibatchIndexError",
    "StreamError",
]


def _version():
    # Read from the installed metadata, the one place the version is written
    # (pyproject.toml), on first use: importlib.metadata takes longer to
    # import than the rest of the package, and the helper processes
    # (int8store.helper_process) never need it.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(__name__)
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def __getattr__(name):
    if name == "__version__":
        value = globals()["__version__"] = _version()
        return value
    if name in _LAZY:
        value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'int8store' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
