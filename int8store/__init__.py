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
    HelperStartError,
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
    "shared_dataset": "dataset.shared",
    "SharedDataset": "dataset.shared",
    "STORAGES": "codes.vocabulary",
    "dequantize": "dataset.symbolic",
    "NORMALIZATIONS": "codes.vocabulary",
    "quantize": "codes.encoding",
    "Encoding": "codes.encoding",
    "open_store": "store.reader",
    "Store": "store.reader",
    "convert": "converter",
    "plan_splits": "plan.splits",
    "SPLITS": "codes.vocabulary",
    "memory_table": "memory.estimates",
    "max_batch_size": "memory.estimates",
    "model_memory": "memory.estimates",
    "evaluate_in_chunks": "training.scoring",
    "scoring_function": "training.scoring",
    "StreamingSplit": "streaming.split",
    "StoreShards": "streaming.sources",
    "ArrayShards": "streaming.sources",
    "stream": "streaming.split",
    "load_streams": "loading",
    "stop_requests": "runtime.interrupts",
    "EpochLines": "runtime.progress",
    "stop_requested": "runtime.interrupts",
    "save_checkpoint": "store.checkpoint",
    "checkpoint_writes": "store.checkpoint",
    "fits_in_memory": "loading",
    "steps_function": "training.steps",
    "set_up_run": "backend.jax.run_setup",
    "RunCheckpoint": "training.run",
    "RunState": "training.run",
    "run_identity": "training.run",
    "load_parameters": "training.parameters",
    "EARLY_STOPPING": "training.early_stopping",
    "Augmentation": "augment.spec",
    "minibatch_calls": "training.steps",
    "default_steps": "training.steps",
    "ACCELERATOR_STEPS": "training.steps",
    "tensor_library": "backend",
    "conv2d": "backend",
    "pool_2d": "backend",
    "function_mode": "backend",
    "MODES": "codes.vocabulary",
    "minibatch": "backend.ops.minibatch",
    "place": "backend.jax.device",
    "keep_on_device": "backend.jax.device",
    "start_processes": "backend.jax.sharding",
    "is_main_process": "backend.jax.sharding",
    "check_same_data": "backend.jax.sharding",
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
    "HelperStartError",
]


def __getattr__(name):
    if name == "__version__":  # read on first use (see runtime.version)
        from .runtime.version import package_version

        value = globals()["__version__"] = package_version()
        return value
    if name in _LAZY:
        value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'int8store' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
