"""A benchmark's scratch folder: made new, removed when its process exits
(the stores and arrays the benchmarks write were left in /tmp, a gigabyte a
run of big_store.py)."""

import atexit
import shutil
import tempfile

__all__ = ["scratch_folder"]


def scratch_folder(prefix):
    """The path of a new temporary folder, removed with what it holds at exit."""
    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, True)
    return folder
