"""Parsing an HDF5 source in a process of its own, held to a time and a
memory limit.

The HDF5 library parses a file's metadata (B-trees, heaps, object headers)
in C, trusting what it reads: on a damaged or hostile file it can loop for
ever, allocate without bound or crash. int8store stores are safe (their
manifest is checked before HDF5 sees them), but any other HDF5 file is
opened here, in a child process:

* each request (list the datasets and read the labels; read rows of images)
  must be answered within ``time_limit`` seconds (:data:`TIME_LIMIT`), or
  the child is killed and the error names the file;
* the child's address space is limited to the memory ceiling
  (:func:`int8store.runtime.limits.max_memory`) plus room for the interpreter,
  or to the limit it inherited if that is lower (``ulimit -v``: a process
  may lower its limits, never raise them);
* a crash of the library is an error naming the file and the signal, not
  the end of the trainer or the converter;
* a child that cannot start (a missing module, a limit too low for the
  interpreter) is reported as that, with its own last line of standard
  error, not as a damaged file: it says it is ready before it opens the file,
  within ``time_limit`` too. Its standard error is read as it comes and only
  the last :data:`_STDERR_TAIL` bytes are kept.

It is started isolated from the working directory (:mod:`int8store.runtime.processes`).
Every wait on it is bounded: a reply by ``time_limit``, its end by
:data:`_END_WAIT` seconds before it is killed.

What comes back is checked before it is used: a header line of JSON
(numeric dtype, shape, within the memory ceiling), then the array's raw
bytes; never a pickle. The child ignores SIGINT (Ctrl-C is the parent's)
and ends when its input closes.

Protocol: first, out, ``{"ready": true}`` once the child has started; then
one JSON line in (``["describe", keys]``, ``["read", key, start,
stop]``); out, an error line ``{"error": class, "message": text}``, or for
``describe`` a line listing the splits followed by each split's labels, for
``read`` the rows; an array is a line ``{"dtype": ..., "shape": [...]}``
followed by its bytes.
"""

import json
import math
import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref

import numpy as np

from .. import errors
from ..runtime import processes
from ..errors import SourceFormatError, located, shortened, shown
from ..runtime.limits import (check_in_file, check_memory, describe_bytes, limit_address_space,
                              max_memory)

__all__ = ["Hdf5Process", "TIME_LIMIT", "MAX_CHUNK_BYTES"]

#: Seconds the child may take to answer one request before it is killed.
TIME_LIMIT = 60.0
#: Largest HDF5 chunk read: each chunk is decompressed whole, whatever slice is asked.
MAX_CHUNK_BYTES = 256 << 20
# Address space for the interpreter, numpy and h5py, beyond the memory ceiling.
_INTERPRETER_ROOM = 1 << 30
_MAX_HEADER = 1 << 20  # longest header line the parent reads
_STDERR_TAIL = 4096  # bytes of the child's standard error kept, for its last line
_END_WAIT = 5.0  # seconds the child has to end once its input closes (or it stopped replying)
# The errors the child may report, raised again in the parent by name.
_REPORTED = {cls.__name__: cls for cls in (errors.SourceFormatError, errors.SizeLimitError,
                                           errors.StoreFormatError, errors.StoreChecksumError)}


class Hdf5Process:
    """The child parsing ``path`` (see the module docstring).

    Raises :class:`~int8store.errors.HelperStartError` if the
    child does not say it is ready within ``time_limit`` seconds (it ended,
    or it hangs, before opening the file).
    """

    def __init__(self, path, time_limit=None):
        self.path = str(path)
        self.time_limit = TIME_LIMIT if time_limit is None else float(time_limit)
        self._lock = threading.Lock()  # one request at a time
        self._process = processes.start(
            "int8store.sources.hdf5_process", [self.path, max_memory()], bufsize=0,
            stderr=subprocess.PIPE,  # kept for its last line, not shown
            env={"OPENBLAS_NUM_THREADS": "1"})  # the child does no linear algebra
        self._buffer = bytearray()
        self._stderr, self._stderr_open = b"", True
        self._ready = False
        self.close = weakref.finalize(self, processes.end, self._process, _END_WAIT)
        if self._header(time.monotonic() + self.time_limit) != {"ready": True}:
            self._fail("an unexpected first reply")
        self._ready = True

    def describe(self, keys=None):
        """``[(split, images key, image shape, image dtype, labels, labels key)]`` of the file."""
        with self._lock:
            deadline = self._send(["describe", {s: list(p) for s, p in keys.items()} if keys else None])
            header = self._header(deadline)
            splits = header.get("splits")
            if not isinstance(splits, list):
                self._fail("an unexpected reply")
            described = []
            for split in splits:
                shape, dtype = _checked_layout(split.get("shape"), split.get("dtype"), self.path)
                labels = self._array(deadline)
                described.append((str(split["name"]), str(split["images"]), shape, dtype, labels,
                                  str(split.get("labels"))))
            return described

    def read(self, key, start, stop, image_shape, dtype):
        """Rows ``start:stop`` of dataset ``key``."""
        check_memory((stop - start) * math.prod(image_shape) * np.dtype(dtype).itemsize,
                     f"{stop - start} rows of {key!r}", self.path)
        with self._lock:
            deadline = self._send(["read", key, int(start), int(stop)])
            rows = self._array(deadline)
        if rows.shape != (stop - start,) + tuple(image_shape) or rows.dtype != dtype:
            self._fail(f"rows of {key!r} of shape {rows.shape} and dtype {rows.dtype}")
        return rows

    # -- the parent's side of the protocol ---------------------------------------

    def _send(self, request):
        # Never blocks for long: one short request at a time, sent once the
        # previous reply was read whole (or its child killed).
        try:
            self._process.stdin.write(json.dumps(request).encode() + b"\n")
            self._process.stdin.flush()
        except OSError:
            pass  # the child has ended: reading its reply says how
        return time.monotonic() + self.time_limit

    def _header(self, deadline):
        while b"\n" not in self._buffer:
            if len(self._buffer) > _MAX_HEADER:
                self._fail("a reply line longer than 1 MiB")
            self._buffer += self._receive(1 << 16, deadline)
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        try:
            header = json.loads(line)
        except ValueError:
            self._fail("a reply that is not JSON")
        if not isinstance(header, dict):
            self._fail("an unexpected reply")
        if "error" in header:
            cls = _REPORTED.get(header["error"], SourceFormatError)
            raise cls(str(header.get("message")))
        return header

    def _array(self, deadline):
        header = self._header(deadline)
        shape, dtype = _checked_layout(header.get("shape"), header.get("dtype"), self.path)
        array = np.empty(shape, dtype)
        view = memoryview(array.reshape(-1).view(np.uint8))
        filled = min(len(self._buffer), len(view))
        view[:filled] = self._buffer[:filled]
        del self._buffer[:filled]
        while filled < len(view):
            data = self._receive(len(view) - filled, deadline)
            view[filled:filled + len(data)] = data
            filled += len(data)
        return array

    def _receive(self, most, deadline):
        """Up to ``most`` bytes from the child, waiting no later than
        ``deadline``; its standard error is read meanwhile (it must never
        fill its pipe and block the child)."""
        out, err = self._process.stdout, self._process.stderr
        while True:
            remaining = deadline - time.monotonic()
            streams = [out, err] if self._stderr_open else [out]
            ready = select.select(streams, [], [], remaining)[0] if remaining > 0 else []
            if not ready:
                self._process.kill()
                self._process.wait()  # SIGKILL: the kernel ends it
                self._ended(timed_out=True)
            if err in ready:
                self._read_stderr()
            if out in ready:
                data = out.read(min(most, 1 << 20))
                if not data:
                    self._ended(timed_out=False)
                return data

    def _read_stderr(self):
        """Keep the tail of what the child wrote on its standard error."""
        data = os.read(self._process.stderr.fileno(), 1 << 16)
        self._stderr = (self._stderr + data)[-_STDERR_TAIL:]
        self._stderr_open = bool(data)
        return data

    def _ended(self, timed_out):
        """Raise the error that says how the child stopped answering."""
        if not timed_out:
            try:  # its output is closed: it is ending
                code = self._process.wait(timeout=_END_WAIT)
            except subprocess.TimeoutExpired:
                self._process.kill()
                code = self._process.wait()
            # The rest of its standard error: at its end-of-file now, unless
            # the child left a process of its own holding it.
            end = time.monotonic() + 1
            while self._stderr_open and (remaining := end - time.monotonic()) > 0 and \
                    select.select([self._process.stderr], [], [], remaining)[0]:
                self._read_stderr()
        self.close()
        said = _last_line(self._stderr)
        if not self._ready:
            reason = (f"it did not say it was ready within {self.time_limit:g} s" if timed_out
                      else said or _exit(code))
            raise errors.HelperStartError(
                f"{self.path}: the process reading this HDF5 file could not start: {reason} "
                "(the Python environment or a limit such as ulimit -v, not the file, is the "
                "cause)")
        if timed_out:
            raise SourceFormatError(
                f"{self.path}: the HDF5 library did not finish reading this file within "
                f"{self.time_limit:g} s (damaged metadata can make it loop for ever); "
                "the file is damaged or not an HDF5 file int8store can read")
        if code < 0:
            how = f"the HDF5 library crashed ({_exit(code)})"
        else:  # most likely out of its address space
            how = (f"the process reading it ended ({_exit(code)}{': ' + said if said else ''}; "
                   f"it may use {describe_bytes(max_memory())} of data)")
        raise SourceFormatError(
            f"{self.path}: {how} while reading this file; the file is damaged or not an "
            "HDF5 file int8store can read")

    def _fail(self, what):
        self.close()
        raise SourceFormatError(f"{self.path}: the process reading this HDF5 file sent {what}")


def _last_line(data):
    """What a child's standard error ``data`` says last, in one short line:
    its last line (a traceback's exception), or an interpreter's fatal error
    (followed by a dump of its state)."""
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    fatal = [line for line in lines if line.startswith("Fatal Python error")]
    last = (fatal or lines or [""])[-1]
    return last if len(last) <= 300 else last[:297] + "..."


def _exit(code):
    try:
        return f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
    except ValueError:
        return f"signal {-code}"


def _checked_layout(shape, dtype, path):
    """A reply's shape and numeric dtype, or an error: the parent never
    trusts what the child sends beyond this."""
    try:
        dtype = np.dtype(str(dtype))
        shape = tuple(int(n) for n in shape)
    except (TypeError, ValueError):
        raise SourceFormatError(f"{path}: the process reading this HDF5 file sent an unexpected "
                                "reply") from None
    if dtype.kind not in "biuf" or any(n < 0 for n in shape):
        raise SourceFormatError(f"{path}: the process reading this HDF5 file sent an array of "
                                f"dtype {dtype} and shape {shown(shape)}")
    check_memory(math.prod(shape) * dtype.itemsize, f"an array of shape {shown(shape)}", path)
    return shape, dtype


# -- the child ----------------------------------------------------------------------

def _serve(path, ceiling):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    address_space = limit_address_space(ceiling + _INTERPRETER_ROOM)
    import h5py

    from ..runtime.limits import memory_ceiling
    from ..store.reader import refuse_unreadable_store
    from .named_arrays import choose_keys

    out = sys.stdout.buffer
    _send_header(out, {"ready": True})  # started: from now on, failures are the file's
    out.flush()
    file = datasets = None
    with memory_ceiling(ceiling):
        for line in sys.stdin.buffer:
            try:
                request = json.loads(line)
                if file is None:
                    file = h5py.File(path, "r")
                    refuse_unreadable_store(path, file.attrs)
                    datasets = _datasets(file, path)
                if request[0] == "describe":
                    keys = request[1] and {s: tuple(p) for s, p in request[1].items()}
                    chosen = choose_keys({n: d.shape for n, d in datasets.items()}, path, keys)
                    labels = [_labels(datasets, path, images, key) for images, key in chosen.values()]
                    _send_header(out, {"splits": [
                        {"name": split, "images": images, "labels": key,
                         "shape": datasets[images].shape[1:], "dtype": datasets[images].dtype.str}
                        for split, (images, key) in chosen.items()]})
                    for array in labels:
                        _send_array(out, array)
                else:
                    _, key, start, stop = request
                    _send_array(out, datasets[key][start:stop])
            except Exception as error:  # noqa: BLE001 - reported to the parent, which raises it
                _send_header(out, _describe_error(error, path, address_space))
            out.flush()


def _labels(datasets, path, images_key, labels_key):
    images, labels = datasets[images_key], datasets[labels_key]
    for key, dataset in ((images_key, images), (labels_key, labels)):
        if dataset.dtype.kind not in "biuf" or not dataset.shape:
            raise SourceFormatError(f"{path}: {key!r} holds {dataset.dtype} of shape "
                                    f"{dataset.shape}, not an array of numbers")
    check_memory(labels.nbytes, f"dataset {labels_key!r}", path)
    labels = labels[()]
    if labels.ndim == 1 and images.shape[0] != len(labels):
        raise SourceFormatError(
            f"{path}: {images_key!r} holds {images.shape[0]} images but "
            f"{labels_key!r} holds {len(labels)} labels; they must match")
    return labels


def _describe_error(error, path, address_space):
    if isinstance(error, tuple(_REPORTED.values())):
        return {"error": type(error).__name__, "message": str(error)}
    if isinstance(error, MemoryError):
        limit, inherited = address_space
        held = (f"the address-space limit it inherited ({describe_bytes(limit)}, ulimit -v), "
                "lower than the memory ceiling" if inherited else
                f"the memory ceiling of {describe_bytes(max_memory())}")
        return {"error": "SizeLimitError", "message": (
            f"{path}: reading it needs more memory than {held} allows: the file is damaged "
            "or its chunks too large, or the limit too low for it")}
    reason = shortened(" ".join(str(error).split()))  # (HDF5's words can run over lines)
    return {"error": "SourceFormatError",
            "message": f"{path}: not a readable HDF5 file ({reason})"}


def _send_header(out, header):
    out.write(json.dumps(header).encode() + b"\n")


def _send_array(out, array):
    array = np.ascontiguousarray(array)
    _send_header(out, {"dtype": array.dtype.str, "shape": array.shape})
    out.write(memoryview(array.reshape(-1).view(np.uint8)))


def _datasets(f, path):
    """``{name: dataset}`` of every dataset reached by hard links, each checked;
    raises on external links, external storage and virtual datasets. An
    object is visited once: hard links can make groups a cycle."""
    import h5py

    found, seen = {}, set()
    pending = [("", f)]  # a stack, not recursion: files can nest groups deeply
    while pending:
        prefix, group = pending.pop()
        for name in group:
            full = f"{prefix}{name}"
            link = group.get(name, getlink=True)
            if isinstance(link, h5py.ExternalLink):
                raise SourceFormatError(
                    f"{path}: {full!r} is an external link to {link.filename}:{link.path}; "
                    "int8store reads self-contained HDF5 files only")
            if isinstance(link, h5py.SoftLink):
                continue  # another name for an object inside the file: listed under its own
            item = group[name]
            address = h5py.h5o.get_info(item.id).addr
            if address in seen:
                continue  # another hard link to an object already listed
            seen.add(address)
            if isinstance(item, h5py.Group):
                pending.append((f"{full}/", item))
            elif isinstance(item, h5py.Dataset):
                _check_dataset(item, full, path)
                found[full] = item
    return found


def _check_dataset(dataset, name, path):
    where = located(path, name)
    if dataset.is_virtual:
        raise SourceFormatError(f"{where}: is a virtual dataset (its data lies in other files); "
                                "int8store reads self-contained HDF5 files only")
    if dataset.external:
        raise SourceFormatError(
            f"{where}: keeps its data in external files ({', '.join(str(e[0]) for e in dataset.external)}); "
            "int8store reads self-contained HDF5 files only")
    if dataset.dtype.kind not in "biuf":
        return  # strings and other kinds are never read as images or labels
    nbytes = math.prod(dataset.shape or ()) * dataset.dtype.itemsize
    if dataset.chunks:
        chunk = math.prod(dataset.chunks) * dataset.dtype.itemsize
        if chunk > MAX_CHUNK_BYTES:
            raise SourceFormatError(
                f"{where}: its chunks hold {describe_bytes(chunk)} each, more than the "
                f"{describe_bytes(MAX_CHUNK_BYTES)} int8store decompresses at once; rechunk it "
                "(h5repack -l CHUNK=...)")
    check_in_file(nbytes, dataset.id.get_storage_size(), f"dataset of shape {shown(dataset.shape)}",
                  where, compressed=bool(dataset.compression or dataset.shuffle
                                         or dataset.scaleoffset or dataset.fletcher32))


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
