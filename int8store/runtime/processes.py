"""Starting one of int8store's helper processes, isolated from the caller's folder.

Two things run in a process of their own: reading a store's shards while the
trainer trains (:mod:`int8store.streaming.shard_process`), and parsing HDF5
sources, whose library can hang or crash on a damaged file
(:mod:`int8store.sources.hdf5_process`). Both are started the same way: the
same interpreter, pipes on standard input and output, and the import path
chosen here rather than by where the user happens to be.

``python -m module`` would put the working directory first on ``sys.path``:
a ``numpy.py`` or ``h5py.py`` in the folder where someone runs ``int8store
convert ~/Downloads/x.h5`` would be imported into the very process meant to
parse that untrusted file. So a helper starts as ``python -I -c BOOTSTRAP``:

* ``-I`` (isolated mode; ``-P`` would do only from Python 3.11, and the
  package supports 3.10): neither the working directory nor the user's
  site-packages is on the path, and no ``PYTHON*`` variable (``PYTHONPATH``,
  ``PYTHONSTARTUP``, ...) is read;
* the bootstrap (:data:`_BOOTSTRAP`) then sets the path to **the parent's own
  ``sys.path`` less the working directory** (``''``, ``'.'`` and the folder
  itself), so the child imports the very numpy and h5py the parent imported,
  ``PYTHONPATH`` entries included, and nothing the parent did not look at;
* the name ``int8store`` alone is looked up in **this copy's folder** (the
  parent of the package), ahead of the path, so the child runs the same
  int8store as the parent even from a checkout that was never installed; and
  nothing else of that folder, even when it is the working directory (a
  checkout run from its own folder);
* it then runs the module as ``python -m`` would (:func:`runpy.run_module`).

The least surprising path for the child is the parent's: what the user's
environment made importable stays importable, what merely lies in the
folder they stand in does not.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

__all__ = ["start", "end", "helper_path"]

# Runs in the child before anything else of its own: argv is [-c, package
# parent, JSON path, module, args...]. A start-up hook of the environment (a
# .pth file: int8store's Aesara BLAS hook) may already have imported another
# copy of int8store than the parent's; it is forgotten, so that this one runs.
_BOOTSTRAP = """\
import importlib.machinery, json, os, runpy, sys
parent, path, module = sys.argv[1:4]
loaded = getattr(sys.modules.get("int8store"), "__path__", None)
if loaded is not None and [os.path.realpath(p) for p in loaded] != [
        os.path.realpath(os.path.join(parent, "int8store"))]:
    for name in [n for n in sys.modules if n.split(".")[0] == "int8store"]:
        del sys.modules[name]
class ThisCopy:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "int8store":
            return importlib.machinery.PathFinder.find_spec(name, [parent])
sys.meta_path.insert(0, ThisCopy)
sys.path[:] = json.loads(path)
sys.argv = [module, *sys.argv[4:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def helper_path(path=None, cwd=None):
    """The import path a helper gets: ``path`` (by default this process's
    ``sys.path``) without the working directory ``cwd``, in any spelling
    (``''``, ``'.'``, relative or absolute), other entries made absolute."""
    cwd = os.path.realpath(os.getcwd() if cwd is None else cwd)
    kept = []
    for entry in sys.path if path is None else path:
        if not isinstance(entry, str):
            continue
        absolute = os.path.abspath(os.path.join(cwd, entry))
        if os.path.realpath(absolute) != cwd and absolute not in kept:
            kept.append(absolute)
    return kept


def start(module, args, pass_fds=(), bufsize=-1, env=None, stderr=None):
    """Start ``module`` with ``args`` as ``python -m`` would, but isolated
    (see the module docstring), with pipes on its standard input and output.

    The variables in ``env`` are set besides this process's own (``PYTHON*``
    variables are ignored by the child); ``stderr`` is passed to
    :class:`subprocess.Popen` (None: this process's own). The child runs in
    a session of its own, out of the terminal's reach: Ctrl-C is the
    parent's to handle, even while the child is still starting (before it
    can ignore SIGINT itself), and the child ends when its input closes.
    """
    package_parent = str(Path(__file__).resolve().parent.parent.parent)
    command = [sys.executable, "-I", "-c", _BOOTSTRAP, package_parent,
               json.dumps(helper_path()), module, *map(str, args)]
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=stderr, pass_fds=pass_fds, env={**os.environ, **(env or {})},
                            bufsize=bufsize, start_new_session=True)


def end(process, timeout):
    """Close a helper's input (it then finishes what it was asked, and
    exits), wait at most ``timeout`` seconds for it, then kill it; the wait
    after a kill is bounded by the kernel (SIGKILL cannot be ignored)."""
    try:
        process.stdin.close()
    except OSError:
        pass
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
