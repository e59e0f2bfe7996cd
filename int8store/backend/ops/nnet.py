"""Theano's ``conv2d`` and ``pool_2d`` on the library that runs: Aesara's own
(``aesara.tensor.nnet.conv2d``, ``aesara.tensor.signal.pool.pool_2d``), or
int8store's ops on PyTensor, which has neither (:mod:`.conv`,
:mod:`.pooling`). What the tutorials import as ``int8store.nnet.conv2d`` and
``int8store.nnet.pool_2d``.
"""

import contextlib
import warnings

from ..setup.activation import activate
from .windows import pool_arguments

__all__ = ["conv2d", "pool_2d", "aesara_nnet_quietly"]


def conv2d(input, filters, input_shape=None, filter_shape=None, border_mode="valid",
           subsample=(1, 1), filter_flip=True):
    """Theano's ``conv2d`` (NCHW images, flipped kernels) on either library:
    Aesara's own, or int8store's ops on PyTensor (see :mod:`.conv`)."""
    if activate().NAME == "aesara":
        with aesara_nnet_quietly():
            from aesara.tensor.nnet import conv2d as convolution
    else:
        from .conv import conv2d as convolution
    return convolution(input, filters, input_shape=input_shape, filter_shape=filter_shape,
                       border_mode=border_mode, subsample=subsample, filter_flip=filter_flip)


def pool_2d(input, ws=None, ignore_border=True, stride=None, pad=(0, 0), mode="max", ds=None,
            st=None, padding=None):
    """Theano's ``pool_2d`` on either library (see :func:`conv2d`), Theano's
    old names included: ``ds``, ``st`` and ``padding`` for ``ws``, ``stride``
    and ``pad`` (:func:`~.windows.pool_arguments`), on Aesara without its
    DeprecationWarning."""
    ws, stride, pad = pool_arguments(ws, stride, pad, ds, st, padding)
    if activate().NAME == "aesara":
        with aesara_nnet_quietly():
            from aesara.tensor.signal.pool import pool_2d as pooling
    else:
        from .pooling import pool_2d as pooling
    return pooling(input, ws, ignore_border=ignore_border, stride=stride, pad=pad, mode=mode)


@contextlib.contextmanager
def aesara_nnet_quietly():
    """Imports of Aesara's ``nnet`` and ``signal`` modules, where its conv2d,
    pooling and the classic softmax ops live (deprecated in 2.9.4, its last
    release, and the only ones), without their deprecation warnings."""
    with warnings.catch_warnings():
        for deprecated in ("The module `aesara.tensor.nnet` is deprecated",
                           "The module `aesara.tensor.signal` is deprecated",
                           "`aesara.tensor.nnet.basic.logsoftmax` has been moved"):
            warnings.filterwarnings("ignore", message=deprecated, category=DeprecationWarning)
        yield
