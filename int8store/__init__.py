"""int8store: image training sets held as int8 on the device, widened to float32
symbolically, one minibatch at a time.

>>> from int8store import load_data
>>> (train_x, train_y), (valid_x, valid_y), (test_x, test_y) = load_data("digits")
"""

from .dataset import STORAGES, SharedDataset, shared_dataset
from .dequantize import NORMALIZATIONS, dequantize
from .encoding import Encoding, quantize
from .loading import load_data, load_splits
from .errors import (
    ArgumentError,
    DatasetNotFoundError,
    DownloadError,
    EncodingError,
    Int8StoreError,
    SourceFormatError,
    UnsafePickleError,
)

__version__ = "0.1.0"

__all__ = [
    "load_data",
    "load_splits",
    "shared_dataset",
    "SharedDataset",
    "dequantize",
    "quantize",
    "Encoding",
    "NORMALIZATIONS",
    "STORAGES",
    "Int8StoreError",
    "ArgumentError",
    "EncodingError",
    "SourceFormatError",
    "UnsafePickleError",
    "DatasetNotFoundError",
    "DownloadError",
]
