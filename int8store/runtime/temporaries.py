"""Temporary files named for the process that writes them, so that a later
run can remove those a killed run left (SIGKILL or a power cut cannot clean
up): ``.TARGET.HOST.PID.RANDOM`` + a suffix, beside the target. A store's
conversion (:mod:`int8store.store.atomic`) and a download
(:mod:`int8store.sources.download`) write theirs so.
"""

import os
import socket
import tempfile
from pathlib import Path

__all__ = ["new_temporary", "remove_stale_temporaries"]


def new_temporary(path, suffix):
    """``(handle, name)`` of a new temporary file beside ``path``
    (:func:`tempfile.mkstemp`), named for this process."""
    path = Path(path)
    return tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{_host()}.{os.getpid()}.",
                            suffix=suffix)


def remove_stale_temporaries(path, suffix):
    """Remove the temporary files left for ``path`` by processes of this
    host that are gone; returns their paths. One that cannot be removed
    (another user's, in a shared folder) is left: the cleanup is a courtesy,
    and the write under way must not fail for it."""
    path = Path(path)
    removed = []
    for candidate in path.parent.glob(f".{_glob_escape(path.name)}.*{suffix}"):
        fields = candidate.name[len(path.name) + 2:-len(suffix)].split(".")
        if len(fields) == 3 and fields[0] == _host() and fields[1].isascii() \
                and fields[1].isdigit() and not _alive(int(fields[1])):
            try:
                candidate.unlink()
                removed.append(candidate)
            except OSError:
                pass  # another run removed it first, or it is not ours to remove
    return removed


def _glob_escape(name):
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def _host():
    return socket.gethostname().replace(".", "_") or "host"


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # (another user's; no pid at all: not ours, left)
        return True
    return True
