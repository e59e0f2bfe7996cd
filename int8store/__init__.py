"""int8store: image training sets held as int8 on the device, widened to float32
symbolically, one minibatch at a time.

>>> from int8store import load_data
>>> (train_x, train_y), (valid_x, valid_y), (test_x, test_y) = load_data("digits")

The top level holds what a user of the drop-in and of the store needs:
loading (:func:`load_data`, :func:`load_splits`, :func:`load_streams`), the
splits (:class:`SharedDataset`, :class:`StreamingSplit`), the codes
(:func:`quantize`, :func:`dequantize`), the store (:func:`convert`,
:func:`open_store`), will it fit (:func:`memory_table`,
:func:`max_batch_size`, :func:`model_memory`), the graph library
(:func:`tensor_library`, :func:`function_mode`, :func:`place`,
:func:`keep_on_device`) and the errors. The rest lives in namespaces:
:mod:`int8store.training` (a run's tools: many steps a call, scoring,
checkpoints, the tutorials' run), :mod:`int8store.streaming` (splits fed
shard by shard), :mod:`int8store.parallel` (several devices and processes)
and :mod:`int8store.nnet` (Theano's conv2d and pool_2d on either library).

Importing the package changes nothing outside it: the names are imported
on first use, so tools that build no graph (the ``int8store`` command, the
readers) never import a graph library, and the library (PyTensor or Aesara,
see :mod:`int8store.backend`) is set up (a BLAS, fixes of its defects) by the
first call that builds a graph, through :func:`int8store.backend.activate`.
"""

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
    SourceReadError,
    StoreChecksumError,
    StreamError,
    StoreFormatError,
    UnsafePickleError,
)
from .runtime.exports import lazy_exports

# Public name -> the module that defines it.
_LAZY = {
    "load_data": ".loading",
    "load_splits": ".loading",
    "load_streams": ".loading",
    "shared_dataset": ".dataset.shared",
    "SharedDataset": ".dataset.shared",
    "StreamingSplit": ".streaming.split",
    "dequantize": ".dataset.symbolic",
    "quantize": ".codes.survey",
    "Encoding": ".codes.encoding",
    "convert": ".converter",
    "plan_splits": ".plan.splits",
    "open_store": ".store.reader",
    "Store": ".store.reader",
    "memory_table": ".memory.estimates",
    "max_batch_size": ".memory.estimates",
    "model_memory": ".memory.estimates",
    "tensor_library": ".backend",
    "function_mode": ".backend",
    "place": ".backend.jax.device",
    "keep_on_device": ".backend.jax.device",
    "NORMALIZATIONS": ".codes.vocabulary",
    "STORAGES": ".codes.vocabulary",
    "SPLITS": ".codes.vocabulary",
    "MODES": ".codes.vocabulary",
}

# Names that moved out of the top level, kept until 0.4 (with a DeprecationWarning).
_MOVED = {
    **dict.fromkeys(["steps_function", "minibatch_calls", "default_steps", "ACCELERATOR_STEPS",
                     "scoring_function", "evaluate_in_chunks", "RunCheckpoint", "RunState",
                     "run_identity", "load_parameters", "EARLY_STOPPING", "set_up_run",
                     "Augmentation", "EpochLines", "stop_requests", "stop_requested",
                     "save_checkpoint", "checkpoint_writes"], "int8store.training"),
    **dict.fromkeys(["StoreShards", "ArrayShards", "stream"], "int8store.streaming"),
    "fits_in_memory": "int8store.loading",
    **dict.fromkeys(["start_processes", "is_main_process", "check_same_data"],
                    "int8store.parallel"),
    **dict.fromkeys(["conv2d", "pool_2d", "minibatch"], "int8store.nnet"),
}

__all__ = list(_LAZY) + [
    "Int8StoreError",
    "ArgumentError",
    "EncodingError",
    "SourceFormatError",
    "SourceReadError",
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

_names, __dir__ = lazy_exports(__name__, _LAZY, _MOVED, stacklevel=3)


#: The namespaces, imported on first use too (``int8store.training.Run``).
_NAMESPACES = ("training", "streaming", "parallel", "nnet", "loading")


def __getattr__(name):
    if name == "__version__":  # read on first use (see runtime.version)
        from .runtime.version import package_version

        value = globals()["__version__"] = package_version()
        return value
    if name in _NAMESPACES:
        from importlib import import_module

        return import_module(f".{name}", __name__)
    return _names(name)
