"""int8store's ops in PyTensor's Numba mode (PyTensor's default linker in 3.x).

Without this, ``pytensor.function`` in the default mode warns "Numba will use
object mode to run Minibatch's perform method" for every ``dataset.minibatch``
and every conv2d or pooling op of :mod:`.conv` and :mod:`.pooling`.

Each op module declares how its ops run there, with :func:`declare`: the
plain minibatch is compiled by Numba (:mod:`.minibatch`: a view, its index
checked as in the C backend); every other op (the shuffled minibatch, the
gathered rows of :mod:`.gather`, conv2d, pooling and their gradients) runs
its ``perform`` in Numba's object mode, as PyTensor does for any op it
cannot compile, but without the warning: that numpy-and-BLAS code is these
ops' implementation on every backend but JAX.

Installed here only, once, with the first declaration on PyTensor (on Aesara
nothing is installed), and lazily, so that C-mode users never import numba:
a rewrite tagged ``"numba"`` in PyTensor's rewrite database, which PyTensor
runs only for its Numba linker; the first time it runs, it registers the
declared implementations on PyTensor's Numba dispatchers and leaves the
graph as it was. The registrations concern int8store's own op classes only.
This module imports none of the op modules: they import it.
"""

import threading
import warnings

from ..setup.activation import activate

__all__ = ["declare", "object_mode", "register"]

_declared = {}  # op class -> its implementation (a funcify-and-cache-key function)
_installed = False
_lock = threading.Lock()


def declare(op_class, implementation=None):
    """How ``op_class`` (and its subclasses) runs in PyTensor's Numba mode:
    ``implementation(op, node, **kwargs)`` returns ``(function, cache key)``
    as PyTensor's ``numba_funcify_and_cache_key`` does; None runs the op's
    ``perform`` in object mode, quietly (:func:`object_mode`)."""
    _declared[op_class] = implementation or object_mode
    _install()


def _install():
    """Add the registering rewrite to PyTensor's rewrite database (once, on PyTensor)."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        if activate().NAME != "pytensor":
            return
    from pytensor.compile import optdb
    from pytensor.graph.rewriting.basic import GraphRewriter

    class RegisterNumbaOps(GraphRewriter):
        """Registers int8store's Numba implementations; changes no graph."""

        def apply(self, fgraph):
            register()

    if "int8store_numba_ops" not in optdb:
        optdb.register("int8store_numba_ops", RegisterNumbaOps(), "numba", position=0)


def register():
    """Register the declared implementations on PyTensor's Numba dispatchers,
    those not there already (imports numba). Registering twice, from two
    threads at once, registers the same functions again: harmless."""
    from pytensor.link.numba.dispatch import basic

    registry = basic.numba_funcify_and_cache_key.registry
    for op_class, implementation in list(_declared.items()):
        if registry.get(op_class) is not implementation:
            basic.register_funcify_and_cache_key(op_class)(implementation)


def object_mode(op, node, **kwargs):
    """``op.perform`` in object mode, without PyTensor's warning; not cached
    on disk (the function calls back into Python).

    The node handed on is detached from the graph: its inputs are new
    variables of the same types and names (constants kept). Numba pickles
    the Python function its object mode calls, with what it closes over,
    into the compiled code: with the graph's own node that was the whole
    graph, shared variables' values included. A LeNet5 over MNIST in
    PyTensor's default mode held a copy of the data set in every conv2d
    and pooling op (4 GB at int8, 15 GB over the classic's floats), and
    compiling took minutes."""
    from pytensor.link.numba.dispatch.basic import generate_fallback_impl

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Numba will use object mode", category=UserWarning)
        return generate_fallback_impl(op, detached(node), **kwargs), None


def detached(node):
    """A copy of ``node`` whose inputs are new variables (of the same types
    and names), constants kept: nothing of the graph above it."""
    Constant = activate().module("graph.basic").Constant
    inputs = [v if isinstance(v, Constant) else v.type(name=v.name) for v in node.inputs]
    return node.clone_with_new_inputs(inputs, strict=True)
