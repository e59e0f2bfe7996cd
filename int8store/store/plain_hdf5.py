"""The root attributes of a plain HDF5 file (one without a store's
manifest), read in a process of its own: the HDF5 library parses a file's
metadata in C, trusting it, and a damaged file can crash the process that
opens it. They say whether the file is an int8store file this release
cannot read (format 1, or a store whose manifest is damaged:
:func:`~.file_format.refuse_unreadable_store`).

Run as a module, it prints ``{"format": ..., "format_version": ...}`` (or
``{"error": ...}``) for the file named by its argument.
"""

import json
import signal
import subprocess
import sys

from ..runtime import processes

__all__ = ["root_attributes", "TIME_LIMIT", "ADDRESS_SPACE"]

#: Seconds the child may take to open the file and read two attributes.
TIME_LIMIT = 60.0
#: Bytes of address space the child may use: the interpreter with h5py (about
#: 150 MB), and room for two attributes a damaged file may announce as huge.
ADDRESS_SPACE = 1 << 30


def root_attributes(path, time_limit=None):
    """``(attributes, None)``: the file's ``format`` and ``format_version``
    (None where absent); or ``(None, why)`` where the HDF5 library could not
    read them (an error, a crash, no answer within ``time_limit`` seconds,
    more memory than :data:`ADDRESS_SPACE`)."""
    time_limit = TIME_LIMIT if time_limit is None else time_limit
    child = processes.start("int8store.store.plain_hdf5", [path, str(ADDRESS_SPACE)],
                            stderr=subprocess.DEVNULL,
                            env={"OPENBLAS_NUM_THREADS": "1"})
    try:
        out, _ = child.communicate(timeout=time_limit)
    except subprocess.TimeoutExpired:
        return None, f"gave no answer within {time_limit:g} s"
    finally:  # (Ctrl-C too: the child, in a session of its own, reads no input to end on)
        if child.poll() is None:
            child.kill()
            child.communicate()
    if child.returncode < 0:
        return None, f"crashed (signal {signal.Signals(-child.returncode).name}) reading it"
    try:
        reply = json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError, UnicodeDecodeError):
        return None, f"ended its reader with status {child.returncode}"
    if not isinstance(reply, dict) or "error" in reply:
        return None, f"said: {reply.get('error') if isinstance(reply, dict) else reply}"
    return reply, None


def _attributes(path):
    import h5py
    import numpy as np

    with h5py.File(path, "r") as f:
        found, version = f.attrs.get("format"), f.attrs.get("format_version")
    if isinstance(found, bytes):
        found = found.decode("utf-8", "replace")
    version = np.asarray(version) if version is not None else None
    return {"format": None if found is None else str(found),
            "format_version": int(version) if version is not None and version.ndim == 0
            and version.dtype.kind in "iu" else None}


if __name__ == "__main__":
    from ..runtime.limits import limit_address_space

    limit_address_space(int(sys.argv[2]))
    try:
        print(json.dumps(_attributes(sys.argv[1])))
    except Exception as error:  # noqa: BLE001 - said to the parent, which names the file
        print(json.dumps({"error": " ".join(str(error).split())[:300] or type(error).__name__}))
