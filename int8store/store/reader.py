"""The int8store file format: one self-describing, checksummed HDF5 file.

Layout (format version 3; version 2 differs only in its chunk checksum)::

    user block             the manifest (see :mod:`int8store.store.manifest`): what
                           the data means and the checksum of every byte
    /                      attributes, for other HDF5 tools: format="int8store",
                           format_version, requires_int8store, writer,
                           command_line, source, created, encoding_kind,
                           encoding_offset / encoding_divisor / encoding_precision
                           (affine) or encoding_max_error (lossy codebook),
                           image_shape, axes, splits (their order)
    /encoding/codebook     the 256 values (codebook encodings only)
    /label_names           class names by label (optional)
    /SPLIT/x               int8 codes, shape (N, *image_shape), in chunks of
                           about 1 MiB along N, each with its own checksum
                           (XXH3-128; SHA-256 in format 2: see
                           :mod:`int8store.store.checksums`)
    /SPLIT/y               int32 labels (little-endian), shape (N,)
                           SPLIT attributes: count, code_mean

Each split's entry in the manifest also records the histogram of its codes
(``code_counts``: 256 counts, bin ``b`` for the code whose byte is ``b``;
:mod:`int8store.codes.histogram`), an optional field of format 3 (stores
written before it lack it): ``normalize="dataset"`` takes the training
split's mean from it without reading an image (:meth:`Store.code_counts`).
For images with a channel axis (``(rows, cols, channels)``, channels last)
it also records the histogram channel by channel (``channel_code_counts``:
``channels`` rows of 256 counts; optional too): :meth:`Store.channel_code_counts`.

The reader takes the meaning from the manifest and checks the HDF5 metadata
against it before any HDF5 parser reads the file, then reads the data
ranges itself, checking each chunk as it goes. :func:`open_store` refuses a
newer format version, naming the release that reads it.
"""

import contextlib
import math
import os
from pathlib import Path

import numpy as np

from .checksums import CHUNK_CHECKSUMS, SPLIT_DIGEST, chunk_hasher
from ..codes.encoding import Encoding
from ..codes.histogram import channel_code_counts, channels_of, code_counts
from ..errors import EncodingError, StoreChecksumError, StoreFormatError
from .manifest import (HDF5_SIGNATURE, MAGIC, field, is_count, is_number, manifest_digest,
                       read_manifest, shown)
from .order_entry import ORDER, read_order
from .split_entries import SplitEntry

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "FIRST_READER", "Store", "ChunkBuffer", "open_store",
           "is_store", "axes_for", "refuse_unreadable_store", "changed_store_error",
           "check_same_store", "damaged_error"]

FORMAT_NAME = "int8store"
FORMAT_VERSION = 3
#: For each format version, the first int8store release that reads it.
FIRST_READER = {1: "0.1.0", 2: "0.2.0", 3: "0.3.0"}


def _version():
    from ..runtime.version import package_version
    return package_version()


def axes_for(image_shape):
    """Axis labels of x: ``example`` then ``row, column[, channel]`` or ``feature``."""
    named = {1: ("feature",), 2: ("row", "column"), 3: ("row", "column", "channel")}
    return ("example",) + named.get(len(image_shape), tuple(f"axis{i}" for i in range(1, len(image_shape) + 1)))


def is_store(path):
    """Whether ``path`` starts with an int8store manifest (read without HDF5)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def damaged_error(path, what):
    """The error for a range (``what``: a chunk, labels) that fails its checksum."""
    return StoreChecksumError(f"{path}: {what} does not match its checksum: the file is damaged")


def changed_store_error(path):
    """The error for a store whose file is no longer the one opened."""
    return StoreFormatError(f"{path}: the file changed since the store was opened (replaced or "
                            "rewritten): its shards would not match the labels read before")


def check_same_store(path, digest, file=None):
    """Raise :func:`changed_store_error` for ``path`` unless the file there
    (or ``file``: an open file's ``/proc/self/fd/N``) still holds the store
    whose manifest digest is ``digest``: its manifest is read again and
    compared. A manifest that cannot be read, or is damaged, is another
    store's."""
    try:
        same = manifest_digest(read_manifest(file or path)) == digest
    except (OSError, StoreFormatError) as error:
        raise changed_store_error(path) from error
    if not same:
        raise changed_store_error(path)


def refuse_unreadable_store(path, attrs):
    """Called on a plain HDF5 file's root attributes: raise if it is an
    int8store file this release cannot read (format 1, or a damaged manifest)."""
    if _text(attrs.get("format", "")) != FORMAT_NAME:
        return
    version = attrs.get("format_version")
    if version == 1:
        raise StoreFormatError(
            f"{path}: an int8store file of format version 1 (int8store 0.1), whose checksums "
            "do not cover its metadata; convert the source again with 'int8store convert'")
    raise StoreChecksumError(f"{path}: an int8store file whose manifest is missing or damaged: "
                             "the file is damaged")


class ChunkBuffer:
    """A buffer for one stored chunk, and which chunk it now holds: ``(store
    path, split, chunk index)``, and whether it was checked when read."""

    def __init__(self, nbytes):
        self.array = np.empty(nbytes, dtype=np.uint8)
        self._key, self._checked = None, False

    def holds(self, key, checked):
        """Whether the buffer holds chunk ``key`` whole (checked, if ``checked``)."""
        return self._key == key and (self._checked or not checked)

    def remember(self, key, checked):
        self._key, self._checked = key, checked

    def forget(self):
        self._key = None


class Store:
    """An int8store file, opened by :func:`open_store` (holds no open handle).

    Opening checks the manifest and the HDF5 metadata (a few kilobytes read);
    the data is checked as it is read, or all at once by :meth:`verify`.

    Attributes
    ----------
    path : Path
        As given (messages name it).
    file : Path
        The absolute path the data is read from: reads made after a change
        of the working directory still find the store.
    encoding : Encoding
    image_shape : tuple
    axes : tuple of str
    label_names : list of str or None
    splits : dict
        ``{split name: example count}``, in the order written.
    code_means : dict
        ``{split name: mean of its codes}`` (None for an empty split).
        Each split's histogram of codes: :meth:`code_counts`.
    provenance : dict
        writer, command_line, source, created, format_version.
    order : dict or None
        How the examples were ordered and cut when the store was written
        (the seed, the splits shuffled: :mod:`int8store.store.order_entry`);
        None for a store written before it was recorded.
    manifest : dict
        The manifest as read (see :mod:`int8store.store.manifest`).
    """

    def __init__(self, path):
        self.path = Path(path)
        self.file = self.path.absolute()
        try:
            self._read_header()
        except OSError as error:
            raise StoreFormatError(f"{self.path}: cannot read ({error.strerror or error})") from error

    def _read_header(self):
        if not is_store(self.path):
            self._refuse_non_store()
        manifest = read_manifest(self.path)
        self.manifest = manifest
        try:
            self._interpret(manifest)
        except EncodingError as error:
            raise StoreFormatError(f"{self.path}: {error}") from error

    def _refuse_non_store(self):
        with open(self.path, "rb") as f:
            head = f.read(len(HDF5_SIGNATURE))
        if head == HDF5_SIGNATURE:
            import h5py
            with h5py.File(self.path, "r") as f:
                refuse_unreadable_store(self.path, f.attrs)
        raise StoreFormatError(
            f"{self.path}: not an int8store file; convert archives with 'int8store convert'")

    def _interpret(self, manifest):
        path = self.path
        if field(manifest, "format", str, path) != FORMAT_NAME:
            raise StoreFormatError(f"{path}: not an int8store manifest ({shown(manifest['format'])})")
        version = field(manifest, "format_version", int, path)
        if version > FORMAT_VERSION:
            raise StoreFormatError(
                f"{path}: format version {version} is newer than this int8store "
                f"({_version()}) reads (up to version {FORMAT_VERSION}); it was written by "
                f"{_said(manifest.get('writer', 'a newer int8store'))}: install int8store >= "
                f"{_said(manifest.get('requires_int8store', 'a newer release'))} to read it")
        if version not in CHUNK_CHECKSUMS:
            raise StoreFormatError(f"{path}: unknown format version {version!r}")
        # Format 2 checked chunks with SHA-256; format 3 names its checksum.
        self.chunk_checksum = manifest.get("chunk_checksum", CHUNK_CHECKSUMS[version])
        if self.chunk_checksum != CHUNK_CHECKSUMS[version]:
            raise StoreFormatError(f"{path}: format version {version} with chunk checksum "
                                   f"{shown(self.chunk_checksum)}, which it does not use")
        self.provenance = {key: field(manifest, key, str, path) for key in
                           ("writer", "command_line", "source", "created")}
        self.provenance["format_version"] = version
        shape = field(manifest, "image_shape", list, path)
        if not shape or not all(is_count(n) and n > 0 for n in shape) or math.prod(shape) > 1 << 40:
            raise StoreFormatError(f"{path}: the manifest's image shape {shown(shape)} is not a "
                                   "list of positive sizes (of at most 2**40 bytes an image)")
        self.image_shape = tuple(shape)
        axes = field(manifest, "axes", list, path)
        if len(axes) != len(shape) + 1 or not all(isinstance(a, str) for a in axes):
            raise StoreFormatError(f"{path}: the manifest's axes {shown(axes)} are not one name "
                                   f"for the examples and one for each of the {len(shape)} "
                                   "image axes")
        self.axes = tuple(axes)
        self.encoding = _encoding(field(manifest, "encoding", dict, path), path)
        names = manifest.get("label_names")
        if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise StoreFormatError(f"{path}: the manifest's label names {shown(names)} are not a "
                                   "list of text")
        self.label_names = None if names is None else list(names)
        self.splits, self.code_means, self._layout = {}, {}, {}
        for entry in manifest["splits"]:  # (objects: checked by read_manifest)
            name = field(entry, "name", str, path, "a split")
            if name in self.splits:
                raise StoreFormatError(f"{path}: split {name!r} listed twice")
            count = field(entry, "count", int, path, f"split {name!r}")
            self.splits[name] = count
            self._layout[name] = SplitEntry(entry, name, count, math.prod(shape),
                                            self.chunk_checksum, path,
                                            shape[-1] if len(shape) == 3 else None)
            self.code_means[name] = self._layout[name].code_mean
        self.order = read_order(manifest.get(ORDER), self.splits, path)

    # -- reading --------------------------------------------------------------

    @contextlib.contextmanager
    def _reading(self):
        """Bytes that fail their check in a file that is no longer this store
        (another one written at its path since it was opened: each read
        opens the path) are reported as that, not as damage."""
        try:
            yield
        except StoreChecksumError as error:
            try:
                check_same_store(self.path, self.manifest_digest, self.file)
            except StoreFormatError as changed:
                raise changed from error
            raise

    def read_labels(self, name, verify=True):
        """The int32 labels of split ``name``."""
        layout = self._split(name)
        labels = np.empty(layout.count, dtype="<i4")
        with self._reading(), open(self.file, "rb", buffering=0) as f:
            for offset, nbytes, digest in layout.labels:
                self._read_range(f, offset, memoryview(labels).cast("B"), digest if verify else None,
                                 f"split {name!r} labels")
        return labels.astype(np.int32, copy=False)

    def read_split(self, name, verify=True):
        """``(codes, labels)`` of split ``name``; checks each chunk as it is read."""
        codes = np.empty((self._split(name).count,) + self.image_shape, dtype=np.int8)
        self.read_rows(name, 0, len(codes), codes, verify)
        return codes, self.read_labels(name, verify)

    def chunks(self, name, verify=True):
        """``(first example, codes)`` for each stored chunk of split ``name``, in
        order, each checked against its checksum (unless ``verify`` is false)
        before it is yielded."""
        layout = self._split(name)
        scratch = ChunkBuffer(self.chunk_bytes(name))
        with self._reading(), open(self.file, "rb", buffering=0) as f:
            for start in range(0, layout.count, layout.rows):
                codes = np.empty((min(layout.rows, layout.count - start),) + self.image_shape,
                                 dtype=np.int8)
                self._read_rows(f, layout, name, start, start + len(codes), codes, verify, scratch)
                yield start, codes

    def code_counts(self, name):
        """The histogram of split ``name``'s codes (int64, 256 bins:
        :func:`int8store.codes.histogram.code_counts`): the manifest's, read
        with it, where the store records it (written by this release), else
        counted from the data (every chunk read and checked:
        :meth:`count_codes`)."""
        recorded = self.recorded_code_counts(name)
        return recorded if recorded is not None else self.count_codes(name)

    def recorded_code_counts(self, name):
        """The histogram of split ``name``'s codes the manifest records, or
        None for a store written before it recorded them."""
        recorded = self._split(name).code_counts
        return None if recorded is None else recorded.copy()

    def channel_code_counts(self, name):
        """The histogram of split ``name``'s codes channel by channel (int64,
        ``(channels, 256)``: :func:`int8store.codes.histogram.channel_code_counts`;
        images without a channel axis are one channel): the manifest's where
        it records them, else counted from the data (every chunk read and
        checked). :func:`~int8store.codes.histogram.channel_means` and
        :func:`~int8store.codes.histogram.channel_stds` take it."""
        recorded = self._split(name).channel_code_counts
        if recorded is not None:
            return recorded.copy()
        channels = channels_of(self.image_shape)
        if channels == 1 and self._split(name).code_counts is not None:
            return self._split(name).code_counts.reshape(1, 256).copy()
        return self.count_codes(name, channels=channels)

    def count_codes(self, name, start=0, stop=None, channels=None):
        """The histogram of the codes of examples ``[start, stop)`` of split
        ``name`` (default: all), counted from the data, read (and checked)
        16 MiB at a time; with ``channels``, channel by channel (channels
        last: ``(channels, 256)``)."""
        layout = self._split(name)
        stop = layout.count if stop is None else stop
        counts = np.zeros(256 if channels is None else (channels, 256), dtype=np.int64)
        rows = max(1, (16 << 20) // layout.row_bytes)
        buffer = np.empty((min(rows, max(stop - start, 0)), layout.row_bytes), dtype=np.int8)
        scratch = ChunkBuffer(self.chunk_bytes(name))
        for first in range(start, stop, rows):
            last = min(first + rows, stop)
            self.read_rows(name, first, last, buffer[:last - first], scratch=scratch)
            counts += (code_counts(buffer[:last - first]) if channels is None
                       else channel_code_counts(buffer[:last - first], channels))
        return counts

    def chunk_bytes(self, name):
        """Bytes of one stored chunk of split ``name`` (the ``scratch`` of :meth:`read_rows`)."""
        layout = self._split(name)
        return layout.rows * layout.row_bytes

    def read_rows(self, name, start, stop, out, verify=True, scratch=None, positions=None):
        """Read examples ``[start, stop)`` of split ``name`` into ``out`` (int8,
        ``stop - start`` rows), checking every stored chunk they touch.

        Example ``start + i`` goes to row ``i`` of ``out``, or to row
        ``positions[i]`` when ``positions`` (a permutation) is given: the
        shuffled shard is gathered in the same pass that reads it. Whole
        chunks in order are read straight into ``out``, then hashed while
        they are still in the cache; any other chunk is read whole into
        ``scratch`` (a :class:`ChunkBuffer` of :meth:`chunk_bytes`, made if
        not given), checked there, and its rows copied once to their places.
        The buffer remembers the chunk it holds: a read that starts in the
        chunk the previous one ended in (shards read in order) takes its rows
        from there instead of reading and checking the chunk again.
        Reads and hashing release the GIL; each call opens its own file
        handle, so calls may run in several threads (each with its own
        ``scratch``)."""
        layout = self._split(name)
        if scratch is None:
            scratch = ChunkBuffer(self.chunk_bytes(name))
        with self._reading(), open(self.file, "rb", buffering=0) as f:
            self._read_rows(f, layout, name, start, stop, out, verify, scratch, positions)

    def _read_rows(self, f, layout, name, start, stop, out, verify, scratch, positions=None):
        flat = out.reshape(len(out), layout.row_bytes)
        for index in layout.chunks_over(start, stop):
            offset, nbytes, digest = layout.chunks[index]
            first = index * layout.rows
            last = min(first + layout.rows, layout.count)
            what = layout.chunk_name(name, index)
            if positions is None and start <= first and last <= stop:
                held = (last - first) * layout.row_bytes
                if nbytes > held:  # the split's last chunk: its padding goes to the buffer
                    scratch.forget()
                views = [memoryview(flat[first - start:last - start].reshape(-1)).cast("B"),
                         memoryview(scratch.array)[:nbytes - held]]
                self._read_range(f, offset, views, digest if verify else None, what)
                continue
            # (the chunk's place and checksum too: a store rewritten at the same path differs)
            key = (self.path, name, index, offset, digest)
            if not scratch.holds(key, verify):
                scratch.forget()  # until the chunk is read whole (and checked, if asked)
                self._read_range(f, offset, memoryview(scratch.array)[:nbytes],
                                 digest if verify else None, what)
                scratch.remember(key, verify)
            rows = scratch.array[:nbytes].view(np.int8).reshape(layout.rows, layout.row_bytes)
            lo, hi = max(start, first), min(stop, last)
            if positions is None:
                flat[lo - start:hi - start] = rows[lo - first:hi - first]
            else:
                flat[positions[lo - start:hi - start]] = rows[lo - first:hi - first]

    def _read_range(self, f, offset, views, digest, what):
        views = views if isinstance(views, list) else [views]
        hasher = chunk_hasher(self.chunk_checksum)
        f.seek(offset)
        for view in views:
            done = 0
            while done < len(view):  # a raw file may read less than asked
                got = f.readinto(view[done:])
                if not got:
                    raise StoreChecksumError(f"{self.path}: {what}: the file ends early: it is truncated")
                done += got
            if digest is not None:
                hasher.update(view)
        if digest is not None and hasher.hexdigest() != digest:
            raise damaged_error(self.path, what)

    def verify(self, splits=True, workers=None, strong=False):
        """Check every chunk and label range against its checksum (the manifest
        and the metadata were checked on opening), chunks in ``workers``
        threads (default: half the cores, up to 4; one on two cores, where
        a second thread was measured to slow it down); returns what was
        checked.
        The first damaged range found raises :class:`StoreChecksumError`
        naming it.

        With ``strong``, each split is read once, in order, and its BLAKE3
        recomputed as well (:mod:`int8store.store.checksums`): data swapped
        for other bytes with the same XXH3-128 raises
        :class:`StoreChecksumError` naming the split, so that a signature of
        the manifest covers every byte. A store whose splits lack the digest
        (written before it was added) raises :class:`StoreFormatError`
        saying so, before anything is read."""
        checked = ["manifest", "metadata"]
        names = list(self.splits) if splits else []
        for name in names if strong else ():
            if self._layout[name].strong is None:
                raise StoreFormatError(
                    f"{self.path}: split {name!r} has no BLAKE3 digest: the store predates "
                    "strong digests (format 2, or format 3 written before they were added); "
                    f"convert it again ('int8store convert {self.path} -o NEW.h5') to check "
                    "it strongly")
        for name in names:
            if strong:
                self._check_strong(name)
                checked += [f"{name}/x", f"{name}/y"]
                continue
            layout = self._split(name)
            starts = range(0, layout.count, layout.rows)
            workers = workers or min(4, max(1, (os.cpu_count() or 1) // 2))
            if workers > 1 and len(starts) > 1:
                from concurrent.futures import ThreadPoolExecutor
                with ThreadPoolExecutor(workers, thread_name_prefix="int8store-verify") as pool:
                    for _ in pool.map(lambda first: self._check_chunks(name, first, workers),
                                      starts[:workers]):
                        pass
            else:
                self._check_chunks(name, 0, 1)
            self.read_labels(name)
            checked += [f"{name}/x", f"{name}/y"]
        return checked

    def split_digest(self, name):
        """Split ``name``'s BLAKE3 (its codes in order, then its labels:
        :func:`~int8store.store.checksums.split_digest`): the manifest's,
        else computed from the data, every chunk read and checked."""
        return self._split(name).strong or self._computed_digest(name)

    def _computed_digest(self, name):
        layout = self._split(name)
        hasher = chunk_hasher(SPLIT_DIGEST)
        scratch = np.empty(layout.rows * layout.row_bytes, dtype=np.uint8)
        with self._reading(), open(self.file, "rb", buffering=0) as f:
            for index, (offset, nbytes, digest) in enumerate(layout.chunks):
                view = memoryview(scratch)[:nbytes]
                self._read_range(f, offset, view, digest, layout.chunk_name(name, index))
                hasher.update(view)
        hasher.update(self.read_labels(name).astype("<i4", copy=False).view(np.uint8))
        return hasher.hexdigest()

    def _check_strong(self, name):
        """Check each chunk of ``name`` and its labels against their checksums
        and all of them, in order, against the split's BLAKE3."""
        layout = self._split(name)
        if self._computed_digest(name) != layout.strong:
            raise StoreChecksumError(
                f"{self.path}: split {name!r} does not match its BLAKE3 digest, though each of "
                f"its chunks matches its {self.chunk_checksum.upper().replace('_', '-')} "
                "checksum: its data was replaced on purpose (or the manifest edited): do not "
                "use this file")

    def _check_chunks(self, name, first, step):
        """Check every ``step``-th stored chunk of ``name`` from example ``first``."""
        layout = self._split(name)
        scratch = np.empty(layout.rows * layout.row_bytes, dtype=np.uint8)
        with self._reading(), open(self.file, "rb", buffering=0) as f:
            for index in range(first // layout.rows, len(layout.chunks), step):
                offset, nbytes, digest = layout.chunks[index]
                self._read_range(f, offset, memoryview(scratch)[:nbytes], digest,
                                 layout.chunk_name(name, index))

    @property
    def manifest_digest(self):
        """SHA-256 of the manifest as read: which store this is, to a process
        that opens the same path later."""
        return manifest_digest(self.manifest)

    @property
    def nbytes(self):
        """Bytes of data (codes and labels) the store holds: what :meth:`verify` reads."""
        return sum(n for layout in self._layout.values()
                   for _, n, _ in layout.chunks + layout.labels)

    def _split(self, name):
        if name not in self.splits:
            raise StoreFormatError(f"{self.path}: no split {name!r}; it has {', '.join(self.splits)}")
        return self._layout[name]

    def __repr__(self):
        return f"Store({str(self.path)!r}, splits={self.splits})"


def open_store(path, verify=True):
    """Open an int8store file: check its manifest, its metadata and format
    version and, unless ``verify`` is false, every chunk of data. Returns a
    :class:`Store`."""
    store = Store(path)
    if verify:
        store.verify()
    return store


def _encoding(spec, path):
    kind = spec.get("kind")
    if kind == "codebook":
        book = field(spec, "codebook", list, path, "the codebook encoding")
        text = field(spec, "dtype", str, path, "the codebook encoding")
        error = spec.get("max_error")
        try:
            dtype = np.dtype(text) if len(text) <= 8 else None
        except (TypeError, ValueError):
            dtype = None
        if dtype is None or dtype.kind not in "iuf" or dtype.itemsize > 8 or len(book) != 256 \
                or not all(is_number(v) for v in book) or not is_number(error) or error < 0:
            raise StoreFormatError(f"{path}: the manifest's codebook is not 256 numbers of an "
                                   f"integer or float dtype (dtype {shown(text)}) with a "
                                   f"non-negative max_error ({shown(error)})")
        try:
            values = np.array(book, dtype=dtype)
        except (OverflowError, ValueError):
            values = None
        if values is None or values.tolist() != book or not np.isfinite(values).all():
            raise StoreFormatError(f"{path}: the manifest's codebook holds values its dtype "
                                   f"{dtype} does not hold exactly")
        return Encoding(codebook=values, max_error=float(error))
    if kind == "affine":
        precision = spec.get("precision")
        if precision is not None and not isinstance(precision, str):
            raise StoreFormatError(f"{path}: the manifest's encoding precision is {shown(precision)}")
        return Encoding(field(spec, "offset", int, path, "the affine encoding"),
                        field(spec, "divisor", int, path, "the affine encoding"), precision=precision)
    raise StoreFormatError(f"{path}: unknown encoding kind {shown(kind)}")


def _said(value):
    """A manifest's text as a message shows it (anything else: a short ``repr``)."""
    return value[:80] if isinstance(value, str) else shown(value)


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
