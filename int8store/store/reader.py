"""Opening and reading an int8store file: :func:`open_store`, :class:`Store`.

The reader takes the meaning from the manifest and checks the HDF5 metadata
against it before any HDF5 parser reads the file (:mod:`.manifest`), then
reads the data ranges itself, checking each chunk as it goes
(:mod:`.chunk_reading`). :func:`open_store` refuses a newer format version,
naming the release that reads it. The format itself, and how a file is
recognised as a store, are :mod:`.file_format`'s; the names it defines, and
the chunk buffer, are importable from here too.
"""

import contextlib
import math
import os
from pathlib import Path

import numpy as np

from .checksums import CHECKSUM_NAMES, SPLIT_DIGEST, chunk_hasher
from ..codes.histogram import channel_code_counts, channels_of, code_counts
from ..codes.vocabulary import check_flag
from ..errors import (ArgumentError, DatasetNotFoundError, EncodingError, StoreChecksumError,
                      StoreFormatError, path_argument)
from ..runtime.files import check_regular_file
from .chunk_reading import ChunkBuffer, ChunkReader, damaged_error
from .encoding_entry import read_encoding
from .file_format import (FIRST_READER, FORMAT_NAME, FORMAT_VERSION, axes_for, changed_store_error,
                          check_same_store, is_store, readable_format, refuse_non_store,
                          refuse_unreadable_store)
from .manifest import field, is_count, manifest_digest, read_manifest, shown
from .order_entry import ORDER, read_order
from .split_entries import SPLIT_NAME_RULE, SplitEntry, is_split_name

__all__ = ["Store", "open_store",
           # (their home is .file_format and .chunk_reading; importable from here too)
           "FORMAT_NAME", "FORMAT_VERSION", "FIRST_READER", "ChunkBuffer", "is_store", "axes_for",
           "refuse_unreadable_store", "changed_store_error", "check_same_store", "damaged_error"]


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
        self.path = Path(path_argument(path, "path"))
        self.file = self.path.absolute()
        try:
            self._read_header()
        except FileNotFoundError as error:  # (a FileNotFoundError, as load_data raises)
            raise DatasetNotFoundError(f"{self.path}: no such store") from error
        except IsADirectoryError as error:  # (it said "cannot read (Is a directory)")
            raise StoreFormatError(f"{self.path}: a folder, not an int8store file; convert a "
                                   "folder of images or IDX files with 'int8store convert'") \
                from error
        except OSError as error:
            raise StoreFormatError(f"{self.path}: cannot read ({error.strerror or error})") from error

    def _read_header(self):
        check_regular_file(self.path)
        if not is_store(self.path):
            refuse_non_store(self.path)
        manifest = read_manifest(self.path)
        self.manifest = manifest
        try:
            self._interpret(manifest)
        except EncodingError as error:
            raise StoreFormatError(f"{self.path}: {error}") from error
        self._reader = ChunkReader(self.path, self.chunk_checksum)

    def _interpret(self, manifest):
        path = self.path
        version, self.chunk_checksum = readable_format(manifest, path)
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
        self.encoding = read_encoding(field(manifest, "encoding", dict, path), path)
        names = manifest.get("label_names")
        if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise StoreFormatError(f"{path}: the manifest's label names {shown(names)} are not a "
                                   "list of text")
        self.label_names = None if names is None else list(names)
        self.splits, self.code_means, self._layout = {}, {}, {}
        for entry in manifest["splits"]:  # (objects: checked by read_manifest)
            name = field(entry, "name", str, path, "a split")
            if not is_split_name(name):
                raise StoreFormatError(f"{path}: a split named {shown(name)}; {SPLIT_NAME_RULE}")
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
                self._reader.read_range(f, offset, memoryview(labels).cast("B"),
                                        digest if verify else None, f"split {name!r} label array")
        if labels.size and labels.min() < 0:
            # (checksums recomputed by a forger: load_data refused them, a stream took them)
            raise StoreFormatError(
                f"{self.path}: split {name!r} has labels from {labels.min()} to {labels.max()}: "
                "class numbers start at 0 (a negative label would index the class "
                "probabilities from the end): the store is damaged")
        if self.label_names is not None and labels.size \
                and not 0 <= labels.min() <= labels.max() < len(self.label_names):
            # (the checksums hold for a manifest forged whole: preview then indexed past names)
            raise StoreFormatError(
                f"{self.path}: split {name!r} has labels from {labels.min()} to {labels.max()}, "
                f"but the manifest names {len(self.label_names)} classes (0 to "
                f"{len(self.label_names) - 1}): the store is damaged")
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
                self._reader.read_rows(f, layout, name, start, start + len(codes), codes, verify,
                                       scratch)
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
        start, stop = self._range(name, start, layout.count if stop is None else stop)
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
        """Bytes of one stored chunk of split ``name`` (the ``scratch`` of
        :meth:`read_rows`); 0 for a split without any, whose image shape
        only the manifest announces (up to 2**40 bytes: nothing in the file
        holds one)."""
        layout = self._split(name)
        return layout.rows * layout.row_bytes if layout.chunks else 0

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
        start, stop = self._range(name, start, stop)
        if not (isinstance(out, np.ndarray) and out.dtype == np.int8 and len(out) == stop - start
                and out.size == (stop - start) * layout.row_bytes and out.flags.c_contiguous):
            raise ArgumentError(f"out: expected a C-contiguous int8 array of {stop - start} rows "
                                f"of {layout.row_bytes} codes (examples {start} to {stop} of "
                                f"{name}), got {_described(out)}")
        if positions is not None:
            positions = np.asarray(positions)
            if positions.shape != (stop - start,) or positions.dtype.kind not in "iu" or \
                    (positions.size and (positions.min() < 0 or positions.max() >= positions.size
                                         or np.bincount(positions).max() > 1)):
                raise ArgumentError(f"positions: expected a permutation of 0..{stop - start - 1} "
                                    f"(each row of out once), got {_described(positions)}")
        if scratch is None:
            scratch = ChunkBuffer(self.chunk_bytes(name))
        with self._reading(), open(self.file, "rb", buffering=0) as f:
            self._reader.read_rows(f, layout, name, start, stop, out, verify, scratch, positions)

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
                import threading
                from concurrent.futures import ThreadPoolExecutor
                stop = threading.Event()  # (a damaged chunk or Ctrl-C ends the others' work)
                with ThreadPoolExecutor(workers, thread_name_prefix="int8store-verify") as pool:
                    try:
                        for _ in pool.map(lambda first: self._check_chunks(name, first, workers,
                                                                           stop),
                                          starts[:workers]):
                            pass
                    finally:
                        stop.set()
            else:
                self._check_chunks(name, 0, 1)
            self.read_labels(name)
            checked += [f"{name}/x", f"{name}/y"]
        return checked

    def split_digest(self, name):
        """Split ``name``'s BLAKE3 (its codes in order, then its labels:
        :func:`~int8store.store.checksums.split_digest`): the manifest's,
        else computed from the data, every chunk read and checked."""
        # (A store written before 0.3.1 gives the digest it recorded, over the
        # last chunk's padding too: what its runs' checkpoints hold.)
        return self._split(name).strong or self._computed_digest(name)

    def _computed_digest(self, name, padded=False):
        """The split's BLAKE3 from its data, every chunk read and checked:
        of its examples' codes, or ``padded``, of the stored chunks whole."""
        layout = self._split(name)
        hasher = chunk_hasher(SPLIT_DIGEST)
        scratch = np.empty(self.chunk_bytes(name), dtype=np.uint8)
        with self._reading(), open(self.file, "rb", buffering=0) as f:
            for index, (offset, nbytes, digest) in enumerate(layout.chunks):
                view = memoryview(scratch)[:nbytes]
                self._reader.read_range(f, offset, view, digest, layout.chunk_name(name, index))
                examples = min(layout.rows, layout.count - index * layout.rows)
                hasher.update(view if padded else view[:examples * layout.row_bytes])
        hasher.update(self.read_labels(name).astype("<i4", copy=False).view(np.uint8))
        return hasher.hexdigest()

    def _check_strong(self, name):
        """Check each chunk of ``name`` and its labels against their checksums
        and all of them, in order, against the split's BLAKE3."""
        layout = self._split(name)
        if self._computed_digest(name, layout.strong_padded) != layout.strong:
            raise StoreChecksumError(
                f"{self.path}: split {name!r} does not match its BLAKE3 digest, though each of "
                f"its chunks matches its {CHECKSUM_NAMES[self.chunk_checksum]} "
                "checksum: its data was replaced on purpose (or the manifest edited): do not "
                "use this file")

    def _check_chunks(self, name, first, step, stop=None):
        """Check every ``step``-th stored chunk of ``name`` from example
        ``first``, until ``stop`` (a :class:`threading.Event`) is set; a
        damaged chunk sets it for the others. (The caller waits for the
        workers in order: one that found damage after the first worker had
        started waited for it to check all its chunks.)"""
        layout = self._split(name)
        scratch = np.empty(self.chunk_bytes(name), dtype=np.uint8)
        with self._reading(), open(self.file, "rb", buffering=0) as f:
            for index in range(first // layout.rows, len(layout.chunks), step):
                if stop is not None and stop.is_set():
                    return
                offset, nbytes, digest = layout.chunks[index]
                try:
                    self._reader.read_range(f, offset, memoryview(scratch)[:nbytes], digest,
                                            layout.chunk_name(name, index))
                except BaseException:
                    if stop is not None:
                        stop.set()
                    raise

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

    def _range(self, name, start, stop):
        """``(start, stop)``, examples of split ``name``, checked: integers,
        ``0 <= start <= stop <=`` its count."""
        count = self._split(name).count
        ok = all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in (start, stop))
        if not ok or not 0 <= start <= stop <= count:
            raise ArgumentError(f"examples {start!r} to {stop!r} of {name}: expected integers "
                                f"with 0 <= start <= stop <= {count}, the split's examples")
        return int(start), int(stop)

    def _split(self, name):
        if name not in self.splits:
            raise StoreFormatError(f"{self.path}: no split {name!r}; it has {', '.join(self.splits)}")
        return self._layout[name]

    def __repr__(self):
        return f"Store({str(self.path)!r}, splits={self.splits})"


def _described(array):
    """``int8 array of shape (3, 4)``, or the type of what is no array."""
    return (f"{array.dtype} array of shape {array.shape}" if isinstance(array, np.ndarray)
            else type(array).__name__)


def open_store(path, verify=True):
    """Open an int8store file: check its manifest, its metadata and format
    version and, unless ``verify`` is false, every chunk of data. Returns a
    :class:`Store`."""
    verify = check_flag("verify", verify)
    store = Store(path)
    if verify:
        store.verify()
    return store
