"""Starting one of int8store's helper processes: ``python -m int8store.…``.

Two things run in a process of their own: reading a store's shards while the
trainer trains (:mod:`int8store.streaming.shard_process`), and parsing HDF5 sources,
whose library can hang or crash on a damaged file
(:mod:`int8store.sources.hdf5_process`). Both are started the same way: the
same interpreter, this copy of int8store first on the path (a checkout that
was never installed works), pipes on standard input and output.
"""

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["start", "end"]


def start(module, args, pass_fds=(), bufsize=-1, env=None):
    """``python -m module args…`` with pipes on its standard input and output,
    and the variables in ``env`` set besides this process's own. The child
    runs in a session of its own, out of the terminal's reach: Ctrl-C is the
    parent's to handle, even while the child is still starting (before it
    can ignore SIGINT itself), and the child ends when its input closes."""
    package_parent = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    return subprocess.Popen([sys.executable, "-m", module, *map(str, args)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, pass_fds=pass_fds, env=env, bufsize=bufsize,
                            start_new_session=True)


def end(process, timeout):
    """Close a helper's input (it then finishes what it was asked, and
    exits), wait ``timeout`` seconds for it, kill it if it has not ended."""
    try:
        process.stdin.close()
    except OSError:
        pass
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    process.stdout.close()
