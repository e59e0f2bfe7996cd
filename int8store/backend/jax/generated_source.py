"""The Python source JAX traces: a graph converted to a Python function.

The library writes each converted graph's source to a file, kept for
tracebacks. By default that is a new file in the system's temporary folder
that nothing removes: a run in JAX mode would leave one a compiled function
(and, on Aesara, one for each fused scalar graph inside it) in ``/tmp`` for
good. PyTensor (3.3.7 on) can instead keep them named by their content in a
folder it prunes (``config.generated_src_dir``). For int8store's own
conversions, where the user has not named that folder, it is
``generated_src`` in PyTensor's compile directory, beside the C modules it
already keeps there: a run leaves nothing in ``/tmp``, and a second run
reuses the first's files. Aesara has no such setting; its files stay where
it writes them.
"""

import contextlib
import os

from ..setup.activation import activate

__all__ = ["graph_to_python", "source_folder"]


def source_folder():
    """The folder int8store's conversions write their source in: the user's
    ``generated_src_dir``, else PyTensor's compile directory's
    ``generated_src``; ``None`` where the library has no such setting (the
    system's temporary folder, one file each)."""
    config = activate().lib.config
    if not hasattr(config, "generated_src_dir"):
        return None
    return config.generated_src_dir or os.path.join(config.compiledir, "generated_src")


def graph_to_python(fgraph, name, **kwargs):
    """``fgraph`` as a Python function of its inputs that JAX can trace,
    through int8store's conversions (then the library's), its source written
    to :func:`source_folder`. ``kwargs`` go to the library's
    ``fgraph_to_python``."""
    from .conversions import convert, typify

    api = activate()
    fgraph_to_python = api.module("link.utils").fgraph_to_python
    folder = source_folder()
    chosen = (contextlib.nullcontext() if folder is None
              else api.lib.config.change_flags(generated_src_dir=folder))
    with chosen:
        return fgraph_to_python(fgraph, convert, type_conversion_fn=typify, fgraph_name=name,
                                **kwargs)
