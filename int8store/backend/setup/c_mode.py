"""int8store's C mode on PyTensor: :func:`c_mode`.

PyTensor's default mode is now Numba; int8store's ``"c"`` mode is its C
backend (``Mode("cvm", "fast_run")``), because int8store's convolution and
pooling are numpy-and-BLAS ops that Numba could run only in its slow object
mode.

PyTensor 3.0 to 3.3.0 (3.0 is the last release for Python 3.11) make softmax
and log-softmax symbolic ops (an ``OpFromGraph``) that their C mode keeps
whole: each runs from Python, its inner graph compiled on the first call in
the default mode, Numba. A first run of the logistic tutorial on the digits
(PyTensor 3.0.7) took 7 s instead of 0.3 s, nearly all of it Numba compiling
two softmaxes, and every call went through Python. PyTensor 3.3.1 inlines
them at fusion (``inline_symbolic_for_fusion``). Where PyTensor does not,
int8store's C mode inlines them at the same point, after the rewrites that
match on the whole op (the log of a softmax made a log-softmax, ...), so
that their bodies fuse into C loops as 3.3.1's do. PyTensor's own modes are
left as it ships them.
"""

import functools

__all__ = ["c_mode", "symbolic_ops_kept_whole", "INLINE_POSITION"]

#: Where in PyTensor's rewrites the inlining runs: after ``add_mul_fusion``
#: (48), just before ``elemwise_fusion`` (49), where PyTensor 3.3.1 inlines.
INLINE_POSITION = 48.5


def symbolic_ops_kept_whole(api):
    """The softmax op classes that PyTensor's fast_run leaves whole (an
    ``OpFromGraph`` that fusion does not inline): none on Aesara and on
    PyTensor releases that inline them at fusion themselves."""
    if api.NAME != "pytensor":
        return ()
    if hasattr(api.module("tensor.rewriting.ofg"), "inline_symbolic_for_fusion"):
        return ()
    special = api.module("tensor.special")
    graph_op = api.module("compile.builders").OpFromGraph
    return tuple(op for op in (getattr(special, "Softmax", None),
                               getattr(special, "LogSoftmax", None))
                 if isinstance(op, type) and issubclass(op, graph_op))


def c_mode(api, linker="cvm"):
    """The library's C mode with fast_run, the softmax ops that PyTensor would
    keep whole inlined (:func:`symbolic_ops_kept_whole`). ``linker="py"``:
    the same graph, without generating code (what the memory estimates read)."""
    if linker == "py":
        linker = _python_linker_with_c_rewrites(api)
    mode = api.module("compile.mode").Mode(linker=linker, optimizer="fast_run")
    kept_whole = symbolic_ops_kept_whole(api)
    if not kept_whole:
        return mode
    rewriting = api.module("graph.rewriting.basic")
    inline_node = api.module("tensor.rewriting.ofg").inline_ofg_node

    @rewriting.node_rewriter(list(kept_whole))
    def inline_symbolic_softmax(fgraph, node):
        return inline_node(node)

    return mode.register((rewriting.dfs_rewriter(inline_symbolic_softmax), INLINE_POSITION))


def _python_linker_with_c_rewrites(api):
    """Python's linker, rewriting as the C one does. PyTensor's leaves out the
    rewrites tagged ``cxx_only`` (a sum of an elementwise expression fused
    into one loop, ...), so the graph it compiles would hold temporaries the
    C mode does not (the MLP's penalty: a squared copy of its 784x500
    weights); Aesara's keeps them wherever a compiler is."""
    perform_linker = api.module("link.basic").PerformLinker
    if not getattr(perform_linker, "incompatible_rewrites", ()):
        return "py"
    return _with_c_rewrites(perform_linker)()


@functools.cache
def _with_c_rewrites(perform_linker):
    return type("CRewritesPerformLinker", (perform_linker,), {"incompatible_rewrites": ()})
