"""int8store: image training sets held as int8 on the device, widened to float32
symbolically, one minibatch at a time.

>>> from int8store import load_data
>>> (train_x, train_y), (valid_x, valid_y), (test_x, test_y) = load_data("digits")

The names below are imported on first use, so that tools that do not build
graphs (the ``int8store`` command, the readers) start without Aesara.
"""

from importlib import import_module

from .aesara_config import apply_defaults as _apply_aesara_defaults
from .errors import (
    ArgumentError,
    DatasetNotFoundError,
    DownloadError,
    EncodingError,
    Int8StoreError,
    MissingDependencyError,
    OutputExistsError,
    SourceFormatError,
    StoreChecksumError,
    StoreFormatError,
    UnsafePickleError,
)

__version__ = "0.1.0"

# Before anything imports Aesara, which reads its configuration once.
_apply_aesara_defaults()

# Public name -> the module that defines it.
_LAZY = {
    "load_data": "loading",
    "load_splits": "loading",
    "shared_dataset": "dataset",
    "SharedDataset": "dataset",
    "STORAGES": "dataset",
    "dequantize": "symbolic",
    "NORMALIZATIONS": "symbolic",
    "quantize": "encoding",
    "Encoding": "encoding",
    "open_store": "store",
    "Store": "store",
    "convert": "converter",
    "function_mode": "modes",
    "MODES": "modes",
    "keep_on_device": "device",
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
    "MissingDependencyError",
]


def __getattr__(name):
    if name in _LAZY:
        value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'int8store' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
