"""Where graphs run: ``"c"`` (Aesara's C backend, on the CPU) or ``"jax"``
(JAX's default device: a GPU when JAX sees one).

:func:`function_mode` gives the Aesara mode to compile with. int8store's JAX
mode is Aesara's JAX mode with three additions, all local to this mode
(Aesara's own ``mode="JAX"`` is left as Aesara ships it):

* the classic slice ``data[index * size:(index + 1) * size]`` becomes the
  static-size :class:`~.minibatch.Minibatch` op (JAX refuses a slice with a
  symbolic start), so the classic tutorials' ``givens`` run unchanged;
* ops are converted with int8store's conversions first (:mod:`.jax_ops`:
  conv2d, pooling, the softmax ops, corrections of Aesara's own), then
  Aesara's;
* every minibatch index is checked on the host before each call: inside a
  jitted function JAX cannot raise, and its dynamic slice would clamp an index
  past the end without a word.
"""

from ..errors import ArgumentError, MissingDependencyError

__all__ = ["MODES", "function_mode", "check_mode", "require_jax"]

MODES = ("c", "jax")

_JAX_MODE = None


def require_jax():
    """The ``jax`` module, or a clear error saying how to install it."""
    try:
        import jax
    except ImportError as error:
        raise MissingDependencyError(
            "JAX mode needs JAX: pip install 'int8store[jax]' (CPU) or "
            "'int8store[cuda12]' (NVIDIA GPUs)"
        ) from error
    return jax


def check_mode(mode):
    """``mode`` lower-cased, if it is one of :data:`MODES`."""
    chosen = str(mode).lower()
    if chosen not in MODES:
        raise ArgumentError(f"mode={mode!r} is not one of {', '.join(MODES)}")
    return chosen


def function_mode(mode):
    """The ``mode=`` argument of ``aesara.function`` for an int8store mode.

    Examples
    --------
    >>> function_mode("c") is None   # Aesara's default, the C backend
    True
    """
    global _JAX_MODE
    if check_mode(mode) == "c":
        return None
    if _JAX_MODE is None:
        require_jax()
        from . import activate
        activate()
        _JAX_MODE = _make_jax_mode()
    return _JAX_MODE


def _make_jax_mode():
    from aesara.compile.mode import JAX, Mode, optdb
    from aesara.graph.basic import Constant
    from aesara.graph.rewriting.basic import GraphRewriter, in2out, node_rewriter
    from aesara.link.jax.dispatch import jax_typify
    from aesara.link.jax.linker import JAXLinker
    from aesara.link.utils import fgraph_to_python
    from aesara.tensor.subtensor import Subtensor

    from .jax_ops import convert
    from .minibatch import Minibatch, check_index, minibatch_of_slice

    class CheckedJAXLinker(JAXLinker):
        """Aesara's JAX linker with int8store's conversions and a host-side
        check of minibatch indices."""

        def fgraph_convert(self, fgraph, input_storage, storage_map, **kwargs):
            self._index_checks = [_index_check(fgraph, node) for node in fgraph.apply_nodes
                                  if isinstance(node.op, Minibatch)]
            # What JAXLinker.fgraph_convert does, with int8store's conversions
            # (Aesara's for every other op).
            return fgraph_to_python(fgraph, convert, type_conversion_fn=jax_typify,
                                    fgraph_name="jax_funcified_fgraph",
                                    input_storage=input_storage, storage_map=storage_map,
                                    **kwargs)

        def jit_compile(self, fn):
            jitted = super().jit_compile(fn)
            self.jitted = jitted  # for jitted.lower(...): XLA's memory analysis
            checks = [c for c in self._index_checks if c is not None]
            if not checks:
                return jitted

            def checked(*args):
                for position, size, rows, name, stride in checks:
                    check_index(args[position], size, rows, name, stride)
                return jitted(*args)

            return checked

    def _index_check(fgraph, node):
        data, index = node.inputs
        rows = data.type.shape[0]
        name = data.name or "data"
        if rows is None:
            raise ArgumentError(
                f"{name}: in JAX mode minibatches need data of a static length "
                "(int8store's shared datasets have one)"
            )
        if isinstance(index, Constant):
            check_index(index.data, node.op.size, rows, name, node.op.stride)
            return None
        if index not in fgraph.inputs:
            raise ArgumentError(
                f"{name}: in JAX mode the minibatch index must be an input of the function, "
                "so that it can be checked before JAX runs (JAX would clamp it silently)"
            )
        return fgraph.inputs.index(index), node.op.size, rows, name, node.op.stride

    @node_rewriter([Subtensor])
    def classic_slices_to_minibatches(fgraph, node):
        replacement = minibatch_of_slice(node)
        return [replacement] if replacement is not None else None

    class MinibatchesFirst(GraphRewriter):
        """The slice rewrite on its own, then Aesara's JAX rewrites. Run as one
        sequence, Aesara's would attach their shape tracker first, which keeps
        the slices' symbolic lengths (JAX cannot trace them) after the slices
        are gone."""

        def __init__(self, first, rest):
            super().__init__()
            self.first, self.rest = first, rest

        def add_requirements(self, fgraph):
            pass  # each part adds its own, in turn

        def apply(self, fgraph):
            self.first.rewrite(fgraph)
            return self.rest.rewrite(fgraph)

        def print_summary(self, stream=None, level=0, depth=-1):
            for part in (self.first, self.rest):
                part.print_summary(stream, level, depth)

    # Keep conv2d abstract (int8store converts the abstract ops to JAX): leave
    # out the rewrites to CPU convolutions and the check that none remain.
    query = JAX.provided_optimizer.excluding("conv_opts", "AbstractConvCheck")
    first = in2out(classic_slices_to_minibatches, name="int8store_minibatches")
    return Mode(linker=CheckedJAXLinker(), optimizer=MinibatchesFirst(first, optdb.query(query)))
