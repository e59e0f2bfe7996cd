"""mnist.pkl.gz read with a restricted unpickler.

Plain ``pickle.load`` runs whatever a file asks for. This unpickler rebuilds
numpy arrays, dtypes, tuples and lists, and refuses any other global, naming
it. Python 2 pickles (the classic file) are read with the latin-1 encoding.
"""

import pickle
import struct

import numpy as np

from ..errors import SourceFormatError, UnsafePickleError
from . import SourceData, Split
from ._files import open_maybe_gzipped

__all__ = ["restricted_load", "read_mnist_pickle"]

_SPLITS = ("train", "valid", "test")


def _reconstruct(subtype, shape, dtype):
    if subtype is not np.ndarray:
        raise pickle.UnpicklingError(f"only plain numpy arrays may be rebuilt, not {subtype!r}")
    return np.ndarray.__new__(np.ndarray, shape, _dtype(dtype))


def _dtype(spec, align=False, copy=False):
    dtype = np.dtype(spec, align, copy)
    if dtype.hasobject:
        raise pickle.UnpicklingError("arrays of Python objects are not allowed")
    return dtype


def _frombuffer(buffer, dtype, shape, order):
    return np.frombuffer(buffer, dtype=_dtype(dtype)).reshape(shape, order=order)


def _latin1_bytes(text, encoding="latin1"):
    # Python 3 writes bytes into protocol-2 pickles as _codecs.encode(str, "latin1").
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("_codecs.encode is allowed only to rebuild latin-1 bytes")
    return text.encode("latin1")


# (module, name) -> the callable given to the pickle instead. Old and new
# numpy module paths both appear in the wild.
_ALLOWED = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): _dtype,
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
    ("_codecs", "encode"): _latin1_bytes,
}


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"the pickle asks for {module}.{name}, which is not allowed: only numpy "
                "arrays, dtypes, tuples and lists are rebuilt"
            ) from None

    def persistent_load(self, pid):
        raise UnsafePickleError("the pickle uses persistent ids, which are not allowed")


def restricted_load(file, origin="pickle"):
    """Unpickle numpy arrays/tuples/lists from a binary file object, nothing else."""
    try:
        return _RestrictedUnpickler(file, encoding="latin1").load()
    except UnsafePickleError as error:
        raise UnsafePickleError(f"{origin}: {error}") from None
    except EOFError as error:
        raise SourceFormatError(
            f"{origin}: the file is truncated: it ends in the middle of the data"
        ) from error
    except (pickle.UnpicklingError, ValueError, TypeError, AttributeError, IndexError) as error:
        raise SourceFormatError(f"{origin}: not a valid pickle of numpy arrays ({error})") from error


def read_mnist_pickle(path):
    """The classic ``((train_x, train_y), (valid_x, valid_y), (test_x, test_y))``.

    The classic file (a Python 2 pickle) is read by :mod:`.py2pickle`, which
    reads the images straight into their arrays; any other pickle by the
    restricted unpickler.
    """
    content = _read_python2_arrays(path)
    if content is None:
        with open_maybe_gzipped(path) as f:
            content = restricted_load(f, origin=str(path))
    if not (isinstance(content, (tuple, list)) and len(content) == 3
            and all(isinstance(s, (tuple, list)) and len(s) == 2 for s in content)):
        raise SourceFormatError(
            f"{path}: expected three (images, labels) pairs (train, valid, test), "
            f"got {_shape_of(content)}"
        )
    splits = {name: Split.from_arrays(name, images, labels, str(path))
              for name, (images, labels) in zip(_SPLITS, content)}
    # The classic file holds flat 28x28 images.
    image_shape = (28, 28) if splits["train"].image_shape == (784,) else None
    return SourceData(splits, origin=str(path), image_shape=image_shape)


def _read_python2_arrays(path):
    """The content by :func:`.py2pickle.read_arrays`, or None if it does not apply."""
    from .py2pickle import Unsupported, read_arrays

    try:
        with open_maybe_gzipped(path) as f:
            return read_arrays(f, origin=str(path))
    except Unsupported:
        return None
    except EOFError as error:
        raise SourceFormatError(str(error)) from error
    except (struct.error, KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
        raise SourceFormatError(f"{path}: not a valid pickle of numpy arrays ({error})") from error


def _shape_of(content):
    if isinstance(content, (tuple, list)):
        return f"a {type(content).__name__} of {len(content)} items"
    return type(content).__name__
