"""A tutorial's checkpoints: its best model's parameters, or its run's, in
an ``.npz``, replaced at each write as the classic tutorials did, but never
left half-written: a write that fails (an interrupt, a full disk, a
read-only folder, a file-size limit) keeps the previous checkpoint as it
was and leaves no temporary file.

A failed write is one line naming the checkpoint
(:class:`~int8store.OutputError`). Within :func:`checkpoint_writes` (the
tutorials run inside it), a run goes on instead: the line is said at each
failure, the failures are counted for the run's summary, and the next
write is tried as usual. A checkpoint insures the work since the last one;
losing the work in memory because its copy cannot be written (a disk that
may have room again at the next write) would cost more than what it
insures.
"""

import json
import os
import sys
import zipfile
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

from ..errors import ArgumentError, OutputError, SourceFormatError
from ..runtime.npz import NpzArchive
from .atomic import atomic_output

__all__ = ["save_checkpoint", "npz_path", "open_checkpoint", "checkpoint_writes", "CheckpointWrites",
           "RUN_DESCRIPTION", "MODEL_DESCRIPTION", "description_array", "read_description"]

#: The member that holds a run checkpoint's description
#: (:mod:`int8store.training.run`); a saved best model has none.
RUN_DESCRIPTION = "int8store_run"
#: The member that holds what a saved best model was trained on (its images'
#: normalization, which ``--predict`` checks); a model saved before it, none.
MODEL_DESCRIPTION = "int8store_model"

_writes = ContextVar("int8store_checkpoint_writes", default=None)


def description_array(description):
    """``description`` (JSON's types) as a checkpoint holds it: the bytes of
    its JSON, a uint8 array, a member of the ``.npz`` beside the arrays."""
    text = json.dumps(description, sort_keys=True, allow_nan=True).encode()
    return np.frombuffer(text, dtype=np.uint8)


def read_description(archive, name, most_bytes):
    """The description :func:`description_array` wrote as ``archive``'s
    member ``name`` (its header checked before it is read: uint8, at most
    ``most_bytes``); refused as damaged where it is not JSON."""
    member = archive[name]
    if member.dtype != np.uint8 or len(member.shape) != 1 or member.nbytes > most_bytes:
        raise SourceFormatError(f"{archive.path}: its description is {member.describe()}, "
                                f"expected at most {most_bytes:,} bytes of JSON (uint8)")
    try:
        return json.loads(member.read().tobytes())
    except (ValueError, RecursionError):
        raise SourceFormatError(f"{archive.path}: its description is damaged") from None


def npz_path(path):
    """``path`` as ``numpy.savez`` writes it: ``.npz`` added to a name without it."""
    path = str(path)
    return path if path.endswith(".npz") else path + ".npz"


def open_checkpoint(path, kind):
    """The ``.npz`` at :func:`npz_path` of ``path``, its headers read
    (:class:`~int8store.runtime.npz.NpzArchive`); an
    :class:`~int8store.ArgumentError` saying "no such ``kind``" where
    there is none."""
    path = npz_path(path)
    if not os.path.exists(path):
        raise ArgumentError(f"{path}: no such {kind}")
    return NpzArchive(path)


def save_checkpoint(path, *arrays, **named):
    """What ``numpy.savez(path, *arrays, **named)`` writes, written beside
    ``path``, synced, and renamed over it when complete (at
    :func:`npz_path`).
    Returns the path written.

    A write that fails raises :class:`~int8store.OutputError` ("FILE: not
    written (No space left on device) ..."), the
    previous file left as it was; within :func:`checkpoint_writes` it is
    said and counted instead, and None is returned.
    """
    path = npz_path(path)
    named = _named(arrays, named)
    for key, value in named.items():  # (before the write: the previous file stays)
        if np.asanyarray(value).dtype.hasobject:
            raise ArgumentError(f"{path}: {key} is an array of Python objects, which a "
                                "checkpoint does not hold (it could not be read back without "
                                "unpickling); save numbers")
    writes = _writes.get()
    try:
        with atomic_output(path, force=True) as temporary:
            with open(temporary, "wb") as f:
                _write_npz(f, named)
                f.flush()
                os.fsync(f.fileno())  # a full disk said now, not after the rename
    except OSError as error:  # (OutputError too: a folder that cannot be written to)
        failure = OutputError(f"{path}: not written ({_reason(error)}); the previous file, if "
                              "any, is left as it was")
        if writes is None:
            raise failure from error
        writes.failed(path, _reason(error), failure)
        return None
    if writes is not None:
        writes.succeeded(path)
    return path


def _named(arrays, named):
    """``numpy.savez``'s names: ``arr_0``, ``arr_1``... for ``arrays``."""
    positional = {f"arr_{i}": array for i, array in enumerate(arrays)}
    if positional.keys() & named.keys():
        raise ArgumentError(f"cannot name an array {sorted(positional.keys() & named.keys())[0]} "
                         "and give arrays without names too")
    return {**positional, **named}


def _write_npz(file, named):
    """What ``numpy.savez(file, **named)`` writes, its zip file closed
    whatever happens (numpy 1.x leaves it open when a write fails, and
    closing it later writes again, to a closed file: a traceback on
    stderr). Arrays of Python objects are refused: they would not be read."""
    with zipfile.ZipFile(file, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for key, value in named.items():
            with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)


def _reason(error):
    """The system's words for ``error`` (or for the error it was raised from);
    int8store's own, for a refusal it raised itself (a folder at the path)."""
    while error is not None:
        if isinstance(error, OSError) and error.strerror:
            return error.strerror
        if isinstance(error, OutputError) and error.__cause__ is None and error.__context__ is None:
            return str(error).split(": ", 1)[-1]  # (less the path, which the line names)
        error = error.__cause__ or error.__context__
    return "an error of the system"


class CheckpointWrites:
    """The checkpoint writes made within :func:`checkpoint_writes`: how
    many were ``written``, and the ``failures`` (path, the system's reason),
    each said by ``report`` when it happens, once for a path that keeps
    failing for one reason (a run of 100 epochs said an unwritable folder
    100 times) until a write there succeeds."""

    def __init__(self, report):
        self.report, self.written, self.failures = report, 0, []
        self._said = set()  # (path, reason) said since the path was last written
        self._written_to = set()

    def failed(self, path, reason, failure):
        self.failures.append((path, reason))
        if (path, reason) not in self._said:
            self._said.add((path, reason))
            self.report(f"warning: {failure}; the run goes on (not said again while this file "
                        "fails so)")

    def succeeded(self, path):
        self.written += 1
        self._written_to.add(path)
        self._said = {(p, reason) for p, reason in self._said if p != path}

    def summary(self):
        """One line on the failures (None without any)."""
        if not self.failures:
            return None
        total = self.written + len(self.failures)
        paths = list(dict.fromkeys(path for path, _ in self.failures))
        reasons = list(dict.fromkeys(reason for _, reason in self.failures))
        kept = [str(path) for path in paths if path in self._written_to]
        lost = [str(path) for path in paths if path not in self._written_to]
        said = ([f"{', '.join(kept)} {'holds' if len(kept) == 1 else 'hold'} the last written"]
                if kept else []) + \
               ([f"{', '.join(lost)} {'was' if len(lost) == 1 else 'were'} not written in this "
                 "run"] if lost else [])
        return (f"warning: {len(self.failures)} of the run's {total} file writes failed "
                f"({', '.join(reasons)}): {'; '.join(said)}")


@contextmanager
def checkpoint_writes(report=None):
    """Within the block, a checkpoint that cannot be written
    (:func:`save_checkpoint`, :meth:`~int8store.training.RunCheckpoint.save`) does
    not stop the run: it is said in one line by ``report`` (by default on
    stderr) and counted, and the write returns None. Yields the
    :class:`CheckpointWrites`; its ``summary()`` is the run's last word on
    them.

    Examples
    --------
    >>> import os, tempfile
    >>> blocked = os.path.join(tempfile.mkdtemp(), "a_file")
    >>> open(blocked, "w").close()  # a file where the checkpoint's folder should be
    >>> said = []
    >>> with checkpoint_writes(report=said.append) as writes:
    ...     save_checkpoint(os.path.join(blocked, "m.npz"), w=[1])
    >>> len(writes.failures), "is left as it was; the run goes on" in said[0]
    (1, True)
    """
    writes = CheckpointWrites(report or (lambda line: print(line, file=sys.stderr, flush=True)))
    token = _writes.set(writes)
    try:
        yield writes
    finally:
        _writes.reset(token)
