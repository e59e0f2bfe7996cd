"""The Python source JAX traces: a graph converted to a Python function.

The library writes each converted graph's source to a file, kept for
tracebacks. By default that is a new file in the system's temporary folder
that nothing removes: a run in JAX mode would leave one for each compiled
function, and one for each fused scalar graph inside it, in ``/tmp`` for
good. PyTensor (3.3.7 on) can instead keep them named by their content in a
folder it prunes (``config.generated_src_dir``). For int8store's own
conversions, where the user has not named that folder, it is
``generated_src`` in PyTensor's compile directory, beside the C modules it
already keeps there: a run leaves nothing in ``/tmp``, and a second run
reuses the first's files. Where the library has no such setting (Aesara;
PyTensor before 3.3.7, which Python 3.11 gets), the files the conversion
just wrote to the temporary folder are removed and their source kept in
memory instead (:mod:`linecache`, which tracebacks and
:func:`inspect.getsource` read).
"""

import contextlib
import functools
import linecache
import os
import tempfile

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
    to :func:`source_folder`, or kept in memory. ``kwargs`` go to the
    library's ``fgraph_to_python``."""
    from .conversions import convert, typify

    api = activate()
    fgraph_to_python = api.module("link.utils").fgraph_to_python
    folder = source_folder()
    in_folder = folder is not None and _writable(folder)
    with api.lib.config.change_flags(**({"generated_src_dir": folder} if in_folder else {})):
        function = fgraph_to_python(fgraph, convert, type_conversion_fn=typify,
                                    fgraph_name=name, **kwargs)
    if not in_folder:
        for generated in _generated_functions(function):
            _keep_in_memory(generated)
    return function


def _writable(folder):
    """Whether source can be written in ``folder`` (made if missing); if not
    (a read-only home), it is kept in memory instead."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK)


def _generated_functions(function):
    """The functions the library compiled from generated source (they carry
    it as ``__source__``) that ``function`` calls: itself, and those its
    globals and closures reach, through the wrappers JAX and the library put
    around them."""
    found, seen, pending = [], set(), [function]
    while pending:
        value = pending.pop()
        if id(value) in seen or not callable(value):
            continue
        seen.add(id(value))
        reached = [getattr(value, "__wrapped__", None)]
        if isinstance(value, functools.partial):
            reached += [value.func, *value.args, *value.keywords.values()]
        if hasattr(value, "__code__"):
            reached += [cell.cell_contents for cell in value.__closure__ or ()
                        if _filled(cell)]
            if hasattr(value, "__source__"):
                found.append(value)
                # (a generated function's globals hold the converted ops it
                # calls; a library function's are its module's: not followed)
                reached += list(value.__globals__.values())
        pending += reached
    return found


def _filled(cell):
    try:
        cell.cell_contents
    except ValueError:  # (a cell not yet assigned)
        return False
    return True


def _keep_in_memory(function):
    """Its source in :mod:`linecache` (with no modification time, so it is
    never checked against a file), and its file, one the library wrote to the
    temporary folder a moment ago, removed."""
    path = function.__code__.co_filename
    folder, file = os.path.split(path)
    if (folder != os.path.abspath(tempfile.gettempdir())
            or not file.startswith(tempfile.gettempprefix())):
        return
    source = function.__source__
    linecache.cache[path] = (len(source), None, source.splitlines(keepends=True), path)
    with contextlib.suppress(OSError):
        os.unlink(path)
