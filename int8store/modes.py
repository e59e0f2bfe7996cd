"""Where graphs run: ``"c"`` (Aesara's C backend, on the CPU) or ``"jax"``
(JAX's default device: a GPU when JAX sees one).

:func:`function_mode` gives the Aesara mode to compile with. int8store's JAX
mode is Aesara's, with a linker that checks every minibatch index on the host
before each call: inside a jitted function JAX cannot raise, and its dynamic
slice would clamp an index past the end without a word.
"""

from .errors import ArgumentError, MissingDependencyError

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
    mode = str(mode).lower()
    if mode not in MODES:
        raise ArgumentError(f"mode={mode!r} is not one of {', '.join(MODES)}")
    return mode


def function_mode(mode):
    """The ``mode=`` argument of ``aesara.function`` for an int8store mode."""
    global _JAX_MODE
    if check_mode(mode) == "c":
        return None  # Aesara's default: the C backend
    if _JAX_MODE is None:
        require_jax()
        _JAX_MODE = _make_jax_mode()
    return _JAX_MODE


def _make_jax_mode():
    from aesara.compile.mode import JAX, Mode
    from aesara.link.jax.linker import JAXLinker

    from . import jax_ops  # noqa: F401  (registers the conversions int8store needs)
    from .minibatch import Minibatch, check_index

    class CheckedJAXLinker(JAXLinker):
        """Aesara's JAX linker, plus a host-side check of minibatch indices."""

        def fgraph_convert(self, fgraph, **kwargs):
            self._index_checks = []
            for node in fgraph.apply_nodes:
                if isinstance(node.op, Minibatch):
                    self._index_checks.append(_index_check(fgraph, node))
            return super().fgraph_convert(fgraph, int8store_checked=True, **kwargs)

        def jit_compile(self, fn):
            jitted = super().jit_compile(fn)
            checks = [c for c in self._index_checks if c is not None]
            if not checks:
                return jitted

            def checked(*args):
                for position, size, rows, name in checks:
                    check_index(args[position], size, rows, name)
                return jitted(*args)

            return checked

    def _index_check(fgraph, node):
        from aesara.graph.basic import Constant

        data, index = node.inputs
        rows = data.type.shape[0]
        name = data.name or "data"
        if rows is None:
            raise ArgumentError(
                f"{name}: in JAX mode minibatches need data of a static length "
                "(int8store's shared datasets have one)"
            )
        if isinstance(index, Constant):
            check_index(index.data, node.op.size, rows, name)
            return None
        if index not in fgraph.inputs:
            raise ArgumentError(
                f"{name}: in JAX mode the minibatch index must be an input of the function, "
                "so that it can be checked before JAX runs (JAX would clamp it silently)"
            )
        return fgraph.inputs.index(index), node.op.size, rows, name

    # Keep conv2d abstract (int8store converts the abstract ops to JAX): leave
    # out the rewrites to CPU convolutions and the check that none remain.
    optimizer = JAX.provided_optimizer.excluding("conv_opts", "AbstractConvCheck")
    return Mode(linker=CheckedJAXLinker(), optimizer=optimizer)
