"""int8store's ops in PyTensor's Numba mode (PyTensor's default linker in 3.x).

Without this, ``pytensor.function`` in the default mode warns "Numba will use
object mode to run Minibatch's perform method" for every ``dataset.minibatch``
and every conv2d or pooling op of :mod:`.pytensor_nnet`. Here:

* the plain minibatch is compiled by Numba: a view, its index checked as in
  the C backend (the message cannot name the rows: Numba raises constant
  messages);
* every other int8store op (the shuffled minibatch, the gathered rows of
  :mod:`.gather`, conv2d, pooling and their gradients) runs its ``perform`` in Numba's object mode, as PyTensor does for
  any op it cannot compile, but without the warning: that numpy-and-BLAS code
  is these ops' implementation on every backend but JAX.

Registered lazily, so that C-mode users never import numba:
:func:`install` (called when :mod:`.api` or :mod:`.pytensor_nnet` is
first imported) adds a rewrite tagged
``"numba"`` to PyTensor's rewrite database, which PyTensor runs only for its
Numba linker; the first time it runs, it registers the implementations below
on PyTensor's Numba dispatchers and leaves the graph as it was. The
registrations concern int8store's own op classes only.
"""

import warnings

__all__ = ["install"]

_CACHE_VERSION = 1  # changes whenever the compiled minibatch does


def install():
    """Add the registering rewrite to PyTensor's rewrite database (once)."""
    from pytensor.compile import optdb
    from pytensor.graph.rewriting.basic import GraphRewriter

    class RegisterNumbaOps(GraphRewriter):
        """Registers int8store's Numba implementations; changes no graph."""

        def apply(self, fgraph):
            register()

    if "int8store_numba_ops" not in optdb:
        optdb.register("int8store_numba_ops", RegisterNumbaOps(), "numba", position=0)


def register():
    """Register the implementations on PyTensor's Numba dispatchers, unless
    they are there already (imports numba). Registering twice, from two
    threads at once, registers the same functions again: harmless."""
    from pytensor.link.numba.dispatch import basic

    from .gather import GatherRows
    from .minibatch import Minibatch
    from .pytensor_nnet import _Conv2dBase, _PoolBase

    if Minibatch in basic.numba_funcify_and_cache_key.registry:
        return
    basic.register_funcify_and_cache_key(Minibatch)(_minibatch)
    for op_class in (GatherRows, _Conv2dBase, _PoolBase):
        basic.register_funcify_and_cache_key(op_class)(_object_mode)


def _object_mode(op, node, **kwargs):
    """``op.perform`` in object mode, without PyTensor's warning; not cached
    on disk (the function calls back into Python)."""
    from pytensor.link.numba.dispatch.basic import generate_fallback_impl

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Numba will use object mode", category=UserWarning)
        return generate_fallback_impl(op, node, **kwargs), None


def _minibatch(op, node, **kwargs):
    if op.seed is not None:  # the shuffle's Feistel walk runs in numpy
        return _object_mode(op, node, **kwargs)
    from pytensor.link.numba.dispatch.basic import numba_njit

    from ..errors import MinibatchIndexError

    size, stride = op.size, op.stride
    name = node.inputs[0].name or "data"
    message = (f"{name}: minibatch index outside the data (a minibatch of {size} rows "
               f"from row index * {stride})")

    @numba_njit
    def minibatch(data, index):
        start = index.item() * stride
        if start < 0 or start + size > data.shape[0]:
            raise MinibatchIndexError(message)
        return data[start:start + size]

    return minibatch, f"int8store.Minibatch({size}, {stride}, {name!r}) v{_CACHE_VERSION}"
