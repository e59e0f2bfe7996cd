"""The int8store file format: one self-describing, checksummed HDF5 file.

Layout (format version 1)::

    /                      attributes: format="int8store", format_version=1,
                           requires_int8store (first release that reads it),
                           writer, command_line, source, created (UTC, ISO 8601),
                           encoding_kind ("affine" | "codebook"),
                           encoding_offset, encoding_divisor (affine),
                           encoding_precision (affine, float sources: the
                           dtype level / divisor is computed in),
                           image_shape, axes, splits (their order)
    /encoding/codebook     the 256 values (codebook encodings only)
    /label_names           class names by label (optional)
    /SPLIT/x               int8 codes, shape (N, *image_shape), chunked along N
    /SPLIT/y               int32 labels, shape (N,)
                           SPLIT attributes: count, code_mean (mean of the codes)

Every dataset carries a ``sha256`` attribute: the SHA-256 of its content
(C order, little-endian; label names as UTF-8 lines). :func:`open_store`
refuses a newer format version, naming the release that reads it, and
verifies every checksum unless ``verify=False``.

Writing goes to a temporary file beside the target, renamed into place only
once complete: a failed or interrupted write leaves nothing behind.
"""

import hashlib
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from .atomic import atomic_output
from .encoding import Encoding
from .errors import StoreChecksumError, StoreFormatError

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "StoreWriter", "Store", "open_store",
           "is_store", "axes_for"]

FORMAT_NAME = "int8store"
FORMAT_VERSION = 1
#: For each format version, the first int8store release that reads it.
FIRST_READER = {1: "0.1.0"}
# HDF5 chunks of x hold about this many bytes.
_CHUNK_BYTES = 1 << 20
# Rows read at a time when verifying or loading.
_READ_BYTES = 16 << 20


def _version():
    from . import __version__
    return __version__


def axes_for(image_shape):
    """Axis labels of x: ``example`` then ``row, column[, channel]`` or ``feature``."""
    named = {1: ("feature",), 2: ("row", "column"), 3: ("row", "column", "channel")}
    return ("example",) + named.get(len(image_shape), tuple(f"axis{i}" for i in range(1, len(image_shape) + 1)))


def _sha256_of_names(names):
    return hashlib.sha256("\n".join(names).encode("utf-8")).hexdigest()


class StoreWriter:
    """Writes a store, atomically: use as a context manager.

    Examples
    --------
    >>> import tempfile, pathlib, numpy as np
    >>> from int8store import quantize
    >>> codes, enc = quantize(np.arange(12, dtype=np.uint8).reshape(3, 2, 2))
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "tiny.h5"
    >>> with StoreWriter(path, enc, (2, 2), source="example") as writer:
    ...     split = writer.add_split("train", np.array([0, 1, 0]))
    ...     split.append(codes)
    >>> open_store(path).splits
    {'train': 3}
    """

    def __init__(self, path, encoding, image_shape, label_names=None, source="",
                 command_line=None, force=False):
        self.path = Path(path)
        self.encoding = encoding
        self.image_shape = tuple(int(n) for n in image_shape)
        self.label_names = label_names
        self.source = str(source)
        self.command_line = command_line if command_line is not None else shlex.join(sys.argv)
        self.force = force
        self._splits = []

    def __enter__(self):
        import h5py

        self._output = atomic_output(self.path, self.force)
        temporary = self._output.__enter__()
        try:
            self._file = h5py.File(temporary, "w")
            self._write_header()
        except BaseException:
            self._output.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, kind, error, trace):
        try:
            if kind is None:
                for split in self._splits:
                    split.finish()
                self._file.attrs["splits"] = [s.name for s in self._splits]
        finally:
            self._file.close()
        # Renames the temporary file into place, or removes it after a failure.
        return self._output.__exit__(kind, error, trace)

    def _write_header(self):
        attrs = self._file.attrs
        attrs["format"] = FORMAT_NAME
        attrs["format_version"] = FORMAT_VERSION
        attrs["requires_int8store"] = FIRST_READER[FORMAT_VERSION]
        attrs["writer"] = f"int8store {_version()}"
        attrs["command_line"] = self.command_line
        attrs["source"] = self.source
        attrs["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        attrs["image_shape"] = np.array(self.image_shape, dtype=np.int64)
        attrs["axes"] = list(axes_for(self.image_shape))
        if self.encoding.is_codebook:
            if not self.encoding.lossless:
                attrs["encoding_max_error"] = self.encoding.max_error
            attrs["encoding_kind"] = "codebook"
            book = self._file.create_dataset("encoding/codebook", data=np.asarray(self.encoding.codebook))
            book.attrs["sha256"] = _sha256_of_array(book[()])
        else:
            attrs["encoding_kind"] = "affine"
            attrs["encoding_offset"] = self.encoding.offset
            attrs["encoding_divisor"] = self.encoding.divisor
            if self.encoding.precision:
                attrs["encoding_precision"] = self.encoding.precision
        if self.label_names is not None:
            import h5py
            names = [str(n) for n in self.label_names]
            ds = self._file.create_dataset("label_names", data=names, dtype=h5py.string_dtype())
            ds.attrs["sha256"] = _sha256_of_names(names)

    def add_split(self, name, labels):
        """Start split ``name`` with its labels; append its codes in order."""
        if name in [s.name for s in self._splits]:
            raise StoreFormatError(f"{self.path}: split {name!r} written twice")
        split = _SplitWriter(self._file, name, np.asarray(labels, dtype=np.int32), self.image_shape)
        self._splits.append(split)
        return split


class _SplitWriter:
    def __init__(self, h5file, name, labels, image_shape):
        self.name = name
        self.count = len(labels)
        group = h5file.create_group(name)
        row_bytes = max(1, int(np.prod(image_shape, dtype=np.int64)))
        rows = max(1, min(self.count, _CHUNK_BYTES // row_bytes))
        self.x = group.create_dataset("x", shape=(self.count,) + image_shape, dtype=np.int8,
                                      chunks=(rows,) + image_shape if self.count else None)
        y = group.create_dataset("y", data=labels.astype("<i4"))
        y.attrs["sha256"] = _sha256_of_labels(labels)
        self.group = group
        self.written = 0
        self.total = 0
        self.digest = hashlib.sha256()

    def append(self, codes):
        codes = np.ascontiguousarray(codes, dtype=np.int8)
        end = self.written + len(codes)
        if end > self.count:
            raise StoreFormatError(f"split {self.name!r}: more than its {self.count} images written")
        self.x[self.written:end] = codes
        self.digest.update(codes)
        self.total += int(codes.sum(dtype=np.int64))
        self.written = end

    def finish(self):
        if self.written != self.count:
            raise StoreFormatError(
                f"split {self.name!r}: {self.written} images written for {self.count} labels"
            )
        self.x.attrs["sha256"] = self.digest.hexdigest()
        self.group.attrs["count"] = self.count
        self.group.attrs["code_mean"] = self.total / self.x.size if self.x.size else np.nan


def is_store(path):
    """Whether ``path`` is an HDF5 file written by int8store."""
    import h5py
    try:
        with h5py.File(path, "r") as f:
            return f.attrs.get("format") == FORMAT_NAME
    except OSError:
        return False


class Store:
    """An int8store file, opened by :func:`open_store` (holds no open handle).

    Attributes
    ----------
    path : Path
    encoding : Encoding
    image_shape : tuple
    axes : tuple of str
    label_names : list of str or None
    splits : dict
        ``{split name: example count}``, in the order written.
    code_means : dict
        ``{split name: mean of its codes}``.
    provenance : dict
        writer, command_line, source, created, format_version.
    """

    def __init__(self, path):
        import h5py

        self.path = Path(path)
        try:
            with h5py.File(self.path, "r") as f:
                self._read_header(f)
        except OSError as error:
            raise StoreFormatError(f"{self.path}: not a readable HDF5 file ({error})") from error
        except KeyError as error:
            raise StoreFormatError(f"{self.path}: incomplete int8store file: missing {error}") from error

    def _read_header(self, f):
        attrs = f.attrs
        if attrs.get("format") != FORMAT_NAME:
            raise StoreFormatError(
                f"{self.path}: not an int8store file (its format attribute is "
                f"{attrs.get('format')!r}); convert archives with 'int8store convert'"
            )
        version = int(attrs["format_version"])
        if version > FORMAT_VERSION:
            needed = attrs.get("requires_int8store", "a newer release")
            raise StoreFormatError(
                f"{self.path}: format version {version} is newer than this int8store "
                f"({_version()}) reads (up to version {FORMAT_VERSION}); it was written by "
                f"{attrs.get('writer', 'a newer int8store')}: install int8store >= {needed} to read it"
            )
        self.provenance = {key: _text(attrs.get(key, "")) for key in
                           ("writer", "command_line", "source", "created")}
        self.provenance["format_version"] = version
        self.image_shape = tuple(int(n) for n in attrs["image_shape"])
        self.axes = tuple(_text(a) for a in attrs["axes"])
        if _text(attrs["encoding_kind"]) == "codebook":
            self.encoding = Encoding(codebook=f["encoding/codebook"][()],
                                     max_error=float(attrs.get("encoding_max_error", 0.0)))
        else:
            precision = _text(attrs["encoding_precision"]) if "encoding_precision" in attrs else None
            self.encoding = Encoding(int(attrs["encoding_offset"]), int(attrs["encoding_divisor"]),
                                     precision=precision)
        self.label_names = ([_text(n) for n in f["label_names"][()]]
                            if "label_names" in f else None)
        order = [_text(n) for n in attrs["splits"]]
        self.splits = {name: int(f[name].attrs["count"]) for name in order}
        self.code_means = {name: float(f[name].attrs["code_mean"]) for name in order}

    def read_split(self, name, verify=True):
        """``(codes, labels)`` of split ``name``; checks the checksums on the way."""
        import h5py

        if name not in self.splits:
            raise StoreFormatError(f"{self.path}: no split {name!r}; it has {', '.join(self.splits)}")
        with h5py.File(self.path, "r") as f:
            x, y = f[name]["x"], f[name]["y"]
            codes = np.empty(x.shape, dtype=np.int8)
            digest = _read_rows(x, codes)
            labels = y[()]
            if verify:
                self._check(name, "x", x, digest)
                self._check(name, "y", y, _sha256_of_labels(labels))
        return codes, labels.astype(np.int32)

    def verify(self, splits=True):
        """Check every dataset against its checksum (only the encoding and label
        names if ``splits`` is false); returns the datasets checked."""
        import h5py

        checked = []
        with h5py.File(self.path, "r") as f:
            if "encoding/codebook" in f:
                book = f["encoding/codebook"]
                self._check(None, "encoding/codebook", book, _sha256_of_array(book[()]))
                checked.append("encoding/codebook")
            if "label_names" in f:
                names = [_text(n) for n in f["label_names"][()]]
                self._check(None, "label_names", f["label_names"], _sha256_of_names(names))
                checked.append("label_names")
            for name in self.splits if splits else ():
                self._check(name, "x", f[name]["x"], _read_rows(f[name]["x"]))
                self._check(name, "y", f[name]["y"], _sha256_of_labels(f[name]["y"][()]))
                checked += [f"{name}/x", f"{name}/y"]
        return checked

    def _check(self, split, dataset, h5dataset, actual):
        expected = _text(h5dataset.attrs.get("sha256", ""))
        if actual != expected:
            where = f"split {split!r} dataset {dataset!r}" if split else f"dataset {dataset!r}"
            raise StoreChecksumError(
                f"{self.path}: {where} does not match its checksum (sha256 {actual}, "
                f"recorded {expected or 'nothing'}): the file is damaged"
            )

    def __repr__(self):
        return f"Store({str(self.path)!r}, splits={self.splits})"


def open_store(path, verify=True):
    """Open an int8store file: check its format version and, unless ``verify``
    is false, every checksum. Returns a :class:`Store`."""
    store = Store(path)
    if verify:
        store.verify()
    return store


def _read_rows(x, out=None):
    """Read int8 dataset ``x`` in blocks of rows, into ``out`` if given (else
    through a block-sized buffer); return the SHA-256 of its content."""
    digest = hashlib.sha256()
    rows = max(1, min(x.shape[0], _READ_BYTES // max(1, int(np.prod(x.shape[1:], dtype=np.int64)))))
    buffer = out if out is not None else np.empty((rows,) + x.shape[1:], dtype=np.int8)
    for start in range(0, x.shape[0], rows):
        stop = min(start + rows, x.shape[0])
        into = np.s_[start:stop] if out is not None else np.s_[0:stop - start]
        x.read_direct(buffer, np.s_[start:stop], into)
        digest.update(buffer[into])
    return digest.hexdigest()


def _sha256_of_array(values, dtype=None):
    """SHA-256 of an array's bytes in C order (in ``dtype`` if given)."""
    return hashlib.sha256(np.ascontiguousarray(values, dtype=dtype)).hexdigest()


def _sha256_of_labels(labels):
    return _sha256_of_array(labels, "<i4")


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
