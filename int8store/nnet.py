"""Theano's ``conv2d`` and ``pool_2d`` on either library (Aesara's own; on
PyTensor, which has none, int8store's ops with the same semantics), and
int8store's static-size ``minibatch`` op: what the classic convolutional
tutorials import from ``theano.tensor.nnet`` and ``theano.tensor.signal``.

May import: everything below it on the spine.
"""

from .runtime.exports import lazy_exports

_LAZY = {
    "conv2d": ".backend",
    "pool_2d": ".backend",
    "minibatch": ".backend.ops.minibatch",
}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
