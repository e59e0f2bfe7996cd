"""Writing an int8store file (the format is described in :mod:`int8store.store.file_format`).

The HDF5 part is written with a user block reserved for the manifest; each
chunk of codes is written whole (``write_direct_chunk``) and hashed on the
way: its XXH3-128, and into the BLAKE3 of its split (its chunks in order,
then its labels: :mod:`int8store.store.checksums`); its codes are counted
into the split's histogram (:mod:`int8store.codes.histogram`), which the
manifest records with the codes' mean, and for images with a channel axis
(at most :data:`MOST_RECORDED_CHANNELS`) channel by channel. Once HDF5 has closed the
file, the data ranges are looked up, the rest of the file (HDF5's metadata)
is hashed, and the manifest is written into the user block; then the file
is published atomically
(:mod:`int8store.store.atomic`). A failure at any point leaves no output.
"""

import json
import os
import shlex
import sys
import threading
from datetime import datetime, timezone

import numpy as np

from .atomic import atomic_output
from .checksums import CHUNK_CHECKSUMS, ROWS_DIGEST, SPLIT_DIGEST, chunk_digest, chunk_hasher
from ..codes.histogram import channel_code_counts, code_counts, code_sum
from ..errors import ArgumentError, Int8StoreError, OutputError, StoreFormatError, shown
from ..runtime.interrupts import interrupts_deferred, interrupts_remembered, raise_if_interrupted
from ..runtime.version import package_version
from .encoding_entry import encoding_entry
from .file_format import FIRST_READER, FORMAT_NAME, FORMAT_VERSION, axes_for
from .manifest import MAX_USERBLOCK_BYTES, data_ranges, hash_outside, pack, userblock_size_for
from .order_entry import ORDER
from .split_entries import CHANNEL_CODE_COUNTS, CODE_COUNTS, SPLIT_NAME_RULE, is_split_name

__all__ = ["StoreWriter", "CHUNK_BYTES", "MOST_RECORDED_CHANNELS"]

#: Bytes of codes per stored chunk (one checksum each).
CHUNK_BYTES = 1 << 20
#: Bytes written between two flushes of the temporary file (see _Writeback):
#: what the fsync before publication may still wait for. Measured on a
#: 57 MB store: 16 MiB left some 30 ms to wait at the end, 4 MiB 5 ms.
WRITEBACK_BYTES = 4 << 20
#: The checksum of each chunk and label range (format 3's).
CHUNK_CHECKSUM = CHUNK_CHECKSUMS[FORMAT_VERSION]
# Manifest bytes per chunk entry, at most: [offset,size,"hex digest"], with margin.
_ENTRY_BYTES = 2 * 21 + 64 + 8
# Manifest bytes per split for its code histogram, at most: 256 counts.
_COUNTS_BYTES = 256 * 21 + 32
#: The most channels whose histograms the manifest records (5.4 kB each, at
#: most, a split): images of more (an npz of feature maps) have none recorded,
#: and their readers count them from the data.
MOST_RECORDED_CHANNELS = 64


def _text(value):
    """``value`` as text HDF5 can hold (UTF-8): a path's bytes that are not
    UTF-8 (``os.fsdecode`` gives them as lone surrogates, which h5py cannot
    write: a traceback) as ``\\xNN``, as ``ls -b`` shows them."""
    text = str(value)
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # (a surrogate no file name gives: from a store's manifest)
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


class StoreWriter:
    """Writes a store atomically: use as a context manager.

    Parameters
    ----------
    path : path
        The file to write; an existing one is replaced only with ``force``.
    encoding : Encoding
    image_shape : tuple
    labels : dict
        ``{split name: labels}`` in the order the splits are to be stored;
        each split's codes are then given to :meth:`append`, in order.
    label_names, source, command_line
        Recorded in the file.
    order : dict, optional
        How the planning step ordered and cut the examples (its seed, the
        splits it shuffled, how valid and test were made), recorded in the
        manifest as ``order`` (:class:`~int8store.plan.arrangement.Arrangement`).
    report : callable, optional
        Told, in a line, of an output folder that had to be created.

    The manifest's ``created`` is the time of writing, or the one
    ``$SOURCE_DATE_EPOCH`` gives (seconds since 1970, the reproducible
    builds' convention): then the same conversion writes the same bytes.

    Examples
    --------
    >>> import tempfile, pathlib, numpy as np
    >>> from int8store import quantize, open_store
    >>> codes, enc = quantize(np.arange(12, dtype=np.uint8).reshape(3, 2, 2))
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "tiny.h5"
    >>> with StoreWriter(path, enc, (2, 2), {"train": [0, 1, 0]}, source="example") as writer:
    ...     writer.append("train", codes)
    >>> open_store(path).splits
    {'train': 3}
    """

    def __init__(self, path, encoding, image_shape, labels, label_names=None, source="",
                 command_line=None, force=False, order=None, report=None):
        self.path = path
        self.encoding = encoding
        self.image_shape = tuple(int(n) for n in image_shape)
        if not self.image_shape or min(self.image_shape) < 1:  # (as the reader checks it)
            raise ArgumentError(f"{path}: image_shape={self.image_shape}: expected one or more "
                                "positive sizes")
        for name in labels:
            if not is_split_name(str(name)):
                raise ArgumentError(f"{path}: cannot name a split {shown(name)}; {SPLIT_NAME_RULE}")
        self.labels = {str(name): _checked_labels(values, name) for name, values in labels.items()}
        self.label_names = None if label_names is None else [_text(n) for n in label_names]
        self.source = _text(source)
        self.command_line = _text(shlex.join(sys.argv) if command_line is None else command_line)
        self.force = force
        self.order = order
        self.report = report
        self.row_bytes = max(1, int(np.prod(self.image_shape, dtype=np.int64)))
        self.chunk_rows = max(1, CHUNK_BYTES // self.row_bytes)
        # Channels last, counted one by one in the manifest; None: not recorded.
        self.channels = (self.image_shape[-1] if len(self.image_shape) == 3
                         and self.image_shape[-1] <= MOST_RECORDED_CHANNELS else None)

    def __enter__(self):
        self._interrupts = interrupts_remembered()
        self._interrupts.__enter__()
        self._output = atomic_output(self.path, self.force, report=self.report)
        try:
            self._temporary = self._output.__enter__()
            self.userblock_size = userblock_size_for(len(json.dumps(self._manifest(0, ""))) + 256
                                                     + _ENTRY_BYTES * self._chunk_count()
                                                     + _COUNTS_BYTES * len(self.labels)
                                                     * (1 + (self.channels or 0)))
            if self.userblock_size > MAX_USERBLOCK_BYTES:
                raise StoreFormatError(
                    f"{self.path}: a store of {self._chunk_count():,} chunks needs a manifest "
                    f"of up to {self.userblock_size:,} bytes, beyond the {MAX_USERBLOCK_BYTES:,} "
                    "int8store reads (about 0.6 TB of images): convert the source in parts")
            self._open()
        except BaseException:
            self._leave(*sys.exc_info())
            raise
        return self

    def _chunk_count(self):
        return sum(-(-len(v) // self.chunk_rows) + 1 for v in self.labels.values())

    def _open(self):
        import h5py

        try:
            self._file = h5py.File(self._temporary, "w", userblock_size=self.userblock_size,
                                   libver=("v110", "latest"))
            self._write_header()
            self._writeback = _Writeback(self._temporary)
            self._splits = {name: _SplitWriter(self._file, name, labels, self.image_shape,
                                               self.chunk_rows, self._writeback.wrote, self.path,
                                               self.channels)
                            for name, labels in self.labels.items()}
        except OSError as error:
            raise _write_error(self.path, error) from error

    def append(self, name, codes):
        """Append int8 codes to split ``name`` (splits in the order of ``labels``)."""
        try:
            self._splits[name].append(codes)
        except KeyError:
            raise StoreFormatError(f"{self.path}: no split {name!r} was declared") from None
        except OSError as error:
            raise _write_error(self.path, error) from error

    def __exit__(self, kind, error, trace):
        if kind is None:
            try:
                self._finish()
            except BaseException:
                self._leave(*sys.exc_info())
                raise
        return self._leave(kind, error, trace)

    def _leave(self, kind, error, trace):
        try:
            # A second interrupt (Ctrl-C pressed again) waits until the
            # temporary file is closed and removed, or published.
            with interrupts_deferred():
                writeback = getattr(self, "_writeback", None)
                if writeback is not None:
                    writeback.close(check=False)  # (a failure is already on its way)
                try:
                    file = getattr(self, "_file", None)
                    if file is not None and file.id.valid:
                        file.close()
                except Exception:  # the original failure matters more than a failed close
                    pass
                # Publishes the temporary file, or removes it after a failure.
                return self._output.__exit__(kind, error, trace) if hasattr(self, "_output") else False
        finally:
            self._interrupts.__exit__(kind, error, trace)

    def _finish(self):
        try:
            entries = [split.finish() for split in self._splits.values()]
            self._file.attrs["splits"] = list(self._splits)
            self._file.close()
            self._writeback.close()  # raises what the disk refused while writing
            raise_if_interrupted()
            self._write_manifest(entries)
        except OSError as error:
            raise _write_error(self.path, error) from error

    def _write_header(self):
        attrs = self._file.attrs
        manifest = self._manifest(0, "")
        for key in ("format", "format_version", "requires_int8store", "writer", "command_line",
                    "source", "created"):
            attrs[key] = manifest[key]
        attrs["image_shape"] = np.array(self.image_shape, dtype=np.int64)
        attrs["axes"] = list(axes_for(self.image_shape))
        encoding = self.encoding
        if encoding.is_codebook:
            attrs["encoding_kind"] = "codebook"
            if not encoding.lossless:
                attrs["encoding_max_error"] = encoding.max_error
            self._file.create_dataset("encoding/codebook", data=np.asarray(encoding.codebook))
        else:
            attrs["encoding_kind"] = "affine"
            attrs["encoding_offset"] = encoding.offset
            attrs["encoding_divisor"] = encoding.divisor
            if encoding.precision:
                attrs["encoding_precision"] = encoding.precision
        if self.label_names is not None:
            import h5py
            self._file.create_dataset("label_names", data=self.label_names, dtype=h5py.string_dtype())

    def _manifest(self, file_size, metadata_sha256, splits=()):
        if not getattr(self, "_created", None):
            self._created = _created()
        manifest = {
            "format": FORMAT_NAME, "format_version": FORMAT_VERSION,
            "requires_int8store": FIRST_READER[FORMAT_VERSION],
            "writer": f"int8store {package_version()}", "command_line": self.command_line,
            "source": self.source, "created": self._created,
            "encoding": encoding_entry(self.encoding), "image_shape": list(self.image_shape),
            "axes": list(axes_for(self.image_shape)), "label_names": self.label_names,
            "splits": list(splits), "userblock_size": getattr(self, "userblock_size", 0),
            "file_size": file_size, "metadata_sha256": metadata_sha256,
            "chunk_checksum": CHUNK_CHECKSUM,
        }
        if self.order is not None:
            manifest[ORDER] = self.order
        return manifest

    def _write_manifest(self, entries):
        """Look up where HDF5 put each chunk, hash everything else, write the manifest."""
        import h5py

        with h5py.File(self._temporary, "r") as f:
            for entry in entries:
                x, y = f[entry["name"]]["x"], f[entry["name"]]["y"]
                for index, chunk in enumerate(entry["x"]["chunks"]):
                    corner = (index * entry["x"]["chunk_rows"],) + (0,) * len(self.image_shape)
                    info = x.id.get_chunk_info_by_coord(corner)
                    if info.size != chunk[1] or info.filter_mask:
                        raise StoreFormatError(f"{self.path}: HDF5 stored a chunk of "
                                               f"{info.size} bytes for {chunk[1]}: a bug in int8store")
                    chunk[0] = int(info.byte_offset)
                if entry["count"]:
                    entry["y"] = [[int(y.id.get_offset()), int(y.id.get_storage_size()),
                                   entry["y"][0][2]]]
        size = os.path.getsize(self._temporary)
        manifest = self._manifest(size, "", entries)
        with open(self._temporary, "r+b") as f:
            self._check_first_chunks(f, entries)
            manifest["metadata_sha256"] = hash_outside(f, self.userblock_size, size,
                                                       data_ranges(manifest, self.path))
            f.seek(0)
            f.write(pack(manifest, self.userblock_size))
            f.flush()
            os.fsync(f.fileno())

    def _check_first_chunks(self, f, entries):
        # The byte offsets HDF5 reports are taken to count from the file's
        # start; one chunk per split read back confirms it.
        for entry in entries:
            for offset, nbytes, digest in entry["x"]["chunks"][:1] + entry["y"]:
                f.seek(offset)
                if chunk_digest(CHUNK_CHECKSUM, f.read(nbytes)) != digest:
                    raise StoreFormatError(f"{self.path}: data not found where HDF5 says it "
                                           "is: a bug in int8store")


class _SplitWriter:
    def __init__(self, h5file, name, labels, image_shape, chunk_rows, wrote, path, channels):
        self.name = name
        self.where = f"{path}: split {name!r}"  # what its errors name
        self.wrote = wrote  # told the bytes of each chunk written
        self.count = len(labels)
        self.image_shape = image_shape
        self.rows = max(1, min(chunk_rows, self.count))
        group = h5file.create_group(name)
        self.x = group.create_dataset("x", shape=(self.count,) + image_shape, dtype=np.int8,
                                      chunks=(self.rows,) + image_shape if self.count else None)
        labels = labels.astype("<i4")
        group.create_dataset("y", data=labels)
        self.labels_entry = [[0, labels.nbytes, chunk_digest(CHUNK_CHECKSUM, labels)]] if self.count else []
        self.labels = labels
        self.strong = chunk_hasher(SPLIT_DIGEST)  # the examples' codes, then the labels
        self.group = group
        self.buffer = None  # one chunk, for rows that do not come a whole chunk at a time
        self.filled = 0  # rows in the buffer
        self.written = 0  # rows in the file
        self.chunks = []
        self.counts = np.zeros(256, dtype=np.int64)  # the codes' histogram
        self.channels = channels  # or None: no histogram channel by channel
        self.channel_counts = None if channels is None else np.zeros((channels, 256), np.int64)

    def append(self, codes):
        codes = np.asarray(codes)
        if codes.dtype != np.int8 or codes.shape[1:] != self.image_shape:
            raise StoreFormatError(f"{self.where}: expected int8 codes of shape "
                                   f"(N, {self.image_shape}), got {codes.dtype} {codes.shape}")
        if self.written + self.filled + len(codes) > self.count:
            raise StoreFormatError(f"{self.where}: more than its {self.count} images written")
        while len(codes):
            if not self.filled and len(codes) >= self.rows and codes.flags.c_contiguous:
                self._write_chunk(codes[:self.rows], self.rows)  # a whole chunk, not copied
                codes = codes[self.rows:]
                continue
            if self.buffer is None:
                self.buffer = np.empty((self.rows,) + self.image_shape, dtype=np.int8)
            taken = min(len(codes), self.rows - self.filled)
            self.buffer[self.filled:self.filled + taken] = codes[:taken]
            self.filled += taken
            codes = codes[taken:]
            if self.filled == self.rows or self.written + self.filled == self.count:
                self._write_chunk(self.buffer, self.filled)
                self.filled = 0
        if self.written == self.count:
            self.buffer = None  # complete: its memory goes back before the next split's

    def _write_chunk(self, chunk, filled):
        """Write ``chunk`` (a whole chunk's rows) holding ``filled`` real rows."""
        # The last chunk is written whole, zero-padded: every stored byte is hashed.
        if filled < len(chunk):
            chunk[filled:] = 0
        self.x.id.write_direct_chunk((self.written,) + (0,) * len(self.image_shape), chunk)
        self.wrote(chunk.nbytes)
        self.chunks.append([0, chunk.nbytes, chunk_digest(CHUNK_CHECKSUM, chunk)])
        if self.channels is None:
            self.counts += code_counts(chunk[:filled])
        else:
            per_channel = channel_code_counts(chunk[:filled], self.channels)
            self.channel_counts += per_channel
            self.counts += per_channel.sum(axis=0)
        self.strong.update(chunk[:filled])  # (the examples: split_digest's bytes)
        self.written += filled

    def finish(self):
        if self.filled:
            self._write_chunk(self.buffer, self.filled)
            self.filled = 0
        if self.written != self.count:
            raise StoreFormatError(
                f"{self.where}: {self.written} images written for {self.count} labels")
        self.buffer = None
        pixels = self.count * int(np.prod(self.image_shape))
        code_mean = code_sum(self.counts) / pixels if self.count else None
        self.group.attrs["count"] = self.count
        self.group.attrs["code_mean"] = np.nan if code_mean is None else code_mean
        self.strong.update(self.labels.view(np.uint8))
        entry = {"name": self.name, "count": self.count, "code_mean": code_mean,
                 CODE_COUNTS: self.counts.tolist(),
                 "x": {"chunk_rows": self.rows, "chunks": self.chunks}, "y": self.labels_entry,
                 ROWS_DIGEST: self.strong.hexdigest()}
        if self.channel_counts is not None:
            entry[CHANNEL_CODE_COUNTS] = self.channel_counts.tolist()
        return entry


class _Writeback:
    """Gets the disk writing the store while the conversion goes on: a thread
    flushes the temporary file (``fdatasync``) each time another ``step``
    bytes were written to it, so that the ``fsync`` before publication finds
    little left to wait for. An error it meets (a full disk, EIO) is kept
    and raised by :meth:`close` before anything is published: Linux reports
    a writeback error once, to the first flush that sees it, so the last
    ``fsync`` would not."""

    def __init__(self, path, step=None):
        step = step or WRITEBACK_BYTES
        self._fd = os.open(path, os.O_RDONLY)
        self._step, self._pending = step, 0
        self._wake, self._stopping, self._error = threading.Event(), False, None
        self._thread = threading.Thread(target=self._run, name="int8store-writeback", daemon=True)
        self._thread.start()

    def wrote(self, nbytes):
        self._pending += nbytes
        if self._pending >= self._step:
            self._pending = 0
            self._wake.set()

    def _run(self):
        flush = getattr(os, "fdatasync", os.fsync)
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            try:
                flush(self._fd)
            except OSError as error:
                self._error = error
                return

    def close(self, check=True):
        """Stop the thread; with ``check``, raise the error a flush met."""
        if self._thread is not None:
            self._stopping = True
            self._wake.set()
            self._thread.join()
            self._thread = None
            os.close(self._fd)
        if check and self._error is not None:
            error, self._error = self._error, None
            raise error


def _created():
    """The time recorded as ``created``: now, or ``$SOURCE_DATE_EPOCH``'s."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if epoch:
        try:
            when = datetime.fromtimestamp(int(epoch), timezone.utc)
        except (ValueError, OverflowError, OSError):
            raise ArgumentError(f"SOURCE_DATE_EPOCH={epoch!r}: expected the time to record as "
                              "whole seconds since 1970-01-01 UTC, such as 1700000000; unset "
                              "it to record the time of writing") from None
    else:
        when = datetime.now(timezone.utc)
    return when.isoformat(timespec="seconds")


def _checked_labels(labels, name):
    from ..codes.labels import as_int32_labels

    return as_int32_labels(labels, name=f"split {name!r}")


def _write_error(path, error):
    if isinstance(error, Int8StoreError):
        return error
    # (h5py's strerror is the HDF5 library's paragraph: the temporary file's
    # name, a time, a buffer's address; errno says it in the system's words)
    reason = (os.strerror(error.errno) if error.errno else error.strerror) or str(error) \
        or type(error).__name__
    return OutputError(f"{path}: cannot write the store ({reason})")
