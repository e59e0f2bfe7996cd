"""Writers of small archives in the formats int8store reads, for the tests."""

import gzip
import pickle
import struct
import zlib
from pathlib import Path

import numpy as np

_IDX_CODES = {np.dtype(np.uint8): 0x08, np.dtype(np.int8): 0x09, np.dtype(">i2"): 0x0B,
              np.dtype(">i4"): 0x0C, np.dtype(">f4"): 0x0D, np.dtype(">f8"): 0x0E}


def idx_bytes(array):
    """The bytes of an IDX file holding ``array``."""
    array = np.asarray(array)
    dtype = array.dtype.newbyteorder(">") if array.dtype.itemsize > 1 else array.dtype
    header = bytes([0, 0, _IDX_CODES[dtype], array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(dtype).tobytes()


def write_idx(path, array, gzipped=None):
    data = idx_bytes(array)
    if gzipped if gzipped is not None else str(path).endswith(".gz"):
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def fake_mnist(n_train=12, n_test=6, side=4, seed=0):
    """Random uint8 images and labels shaped like MNIST, but small."""
    rng = np.random.default_rng(seed)
    return {
        "train": (rng.integers(0, 256, (n_train, side, side), dtype=np.uint8),
                  rng.integers(0, 10, n_train, dtype=np.uint8)),
        "test": (rng.integers(0, 256, (n_test, side, side), dtype=np.uint8),
                 rng.integers(0, 10, n_test, dtype=np.uint8)),
    }


IDX_NAMES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
             "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def write_mnist_idx_folder(folder, data, gzipped=True):
    folder.mkdir(parents=True, exist_ok=True)
    suffix = ".gz" if gzipped else ""
    for split, (images_name, labels_name) in IDX_NAMES.items():
        images, labels = data[split]
        write_idx(folder / (images_name + suffix), images, gzipped)
        write_idx(folder / (labels_name + suffix), labels, gzipped)
    return folder


def fake_mnist_pickle_content(n=(10, 4, 4), width=16, seed=0):
    """Three (float32 k/256 images, int64 labels) pairs, as in mnist.pkl.gz."""
    rng = np.random.default_rng(seed)
    return tuple(
        ((rng.integers(0, 256, (count, width)).astype(np.float32) / 256).astype(np.float32),
         rng.integers(0, 10, count).astype(np.int64))
        for count in n
    )


def write_pickle_gz(path, content, protocol=2):
    with gzip.open(path, "wb") as f:
        pickle.dump(content, f, protocol=protocol)
    return path


def python2_array_pickle(array):
    """Pickle opcodes for ``array`` as Python 2's cPickle wrote them (protocol 2):
    the data is a byte *string* (BINSTRING), which Python 3 reads as latin-1 text."""
    array = np.ascontiguousarray(array)
    if array.dtype.byteorder not in "<=|":
        raise ValueError("little-endian arrays only")

    def string(text):
        raw = text.encode("latin1")
        return b"T" + struct.pack("<I", len(raw)) + raw  # BINSTRING

    def integer(value):
        return b"J" + struct.pack("<i", value)  # BININT

    def tuple_of(items):
        return b"(" + b"".join(items) + b"t"  # MARK ... TUPLE

    dtype_code = array.dtype.str[1:]  # e.g. 'f4', 'i8'
    order = "|" if array.dtype.itemsize == 1 else "<"
    dtype = (b"cnumpy\ndtype\n" + tuple_of([string(dtype_code), integer(0), integer(1)]) + b"R"
             + tuple_of([integer(3), string(order), b"N", b"N", b"N", integer(-1), integer(-1),
                         integer(0)]) + b"b")
    return (b"cnumpy.core.multiarray\n_reconstruct\n"
            + tuple_of([b"cnumpy\nndarray\n", tuple_of([integer(0)]), string("b")]) + b"R"
            + tuple_of([integer(1), tuple_of([integer(n) for n in array.shape]), dtype,
                        b"\x89",  # NEWFALSE: not Fortran order
                        string(array.tobytes().decode("latin1"))])
            + b"b")


def python2_pickle(content):
    """A protocol-2 pickle of nested tuples of arrays, written the Python 2 way."""
    def body(item):
        if isinstance(item, tuple):
            return b"(" + b"".join(body(i) for i in item) + b"t"
        return python2_array_pickle(item)
    return b"\x80\x02" + body(content) + b"."


def write_image_folder(root, images, labels, class_names=None, suffix=".png"):
    """Write ``images`` (uint8, (N, H, W) or (N, H, W, 3)) as CLASS/NNNNN.png files.

    Returns the files in the order int8store reads them (class, then name).
    """
    from PIL import Image

    class_names = class_names or [str(c) for c in range(int(np.max(labels)) + 1)]
    paths = []
    for index, (image, label) in enumerate(zip(images, labels)):
        folder = root / class_names[label]
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{index:05d}{suffix}"
        Image.fromarray(np.asarray(image, dtype=np.uint8)).save(path)
        paths.append((class_names[label], path.name, index))
    return [index for _, _, index in sorted(paths)]


def _members(folder, shuffle):
    """``folder``'s content in name order, or shuffled by the seed ``shuffle``
    (an archive's members in the order a file system listed them)."""
    paths = sorted(folder.rglob("*"))
    if shuffle is not None:
        np.random.default_rng(shuffle).shuffle(paths)
    return paths


def zip_folder(folder, archive_path, wrap=None, shuffle=None):
    """Zip ``folder``'s content (inside a top folder ``wrap`` if given), its
    members in name order or shuffled by the seed ``shuffle``."""
    import zipfile

    with zipfile.ZipFile(archive_path, "w") as archive:
        for path in _members(folder, shuffle):
            if path.is_file():
                name = path.relative_to(folder).as_posix()
                archive.write(path, f"{wrap}/{name}" if wrap else name)
    return archive_path


def without_utf8_flags(archive_path):
    """Clear the UTF-8 flag of every member of a zip, the names' bytes left
    UTF-8: what Info-ZIP's ``zip`` writes (zipfile then reads them as cp437)."""
    import struct
    import zipfile

    data = bytearray(archive_path.read_bytes())
    with zipfile.ZipFile(archive_path) as archive:
        offsets = [info.header_offset for info in archive.infolist()]
        position = archive.start_dir
    for offset in offsets:  # local headers: the flags at +6
        assert data[offset:offset + 4] == b"PK\x03\x04"
        data[offset + 7] &= ~0x08 & 0xFF  # (bit 11: bit 3 of the flags' second byte)
    for _ in offsets:  # the central directory's headers: the flags at +8
        assert data[position:position + 4] == b"PK\x01\x02"
        data[position + 9] &= ~0x08 & 0xFF
        name, extra, comment = struct.unpack("<HHH", data[position + 28:position + 34])
        position += 46 + name + extra + comment
    archive_path.write_bytes(bytes(data))
    return archive_path


def tar_folder(folder, archive_path, prefix="", shuffle=None):
    """Tar and gzip ``folder``'s content, member names starting with ``prefix``
    (``./`` as ``tar czf archive.tar.gz .`` writes them), in name order or
    shuffled by the seed ``shuffle``."""
    import tarfile

    with tarfile.open(archive_path, "w:gz") as archive:
        for path in _members(folder, shuffle):
            if path.is_file():
                archive.add(path, prefix + path.relative_to(folder).as_posix())
    return archive_path


def with_gzip_extra_field(path):
    """Give the gzip file ``path`` an extra field in its header (FEXTRA, as
    bgzip and other tools write one): the same data, still sound gzip."""
    data = bytearray(Path(path).read_bytes())
    field = b"IS" + (4).to_bytes(2, "little") + b"int8"  # one subfield, RFC 1952 2.3.1.1
    data[3] |= 0x04
    data[10:10] = len(field).to_bytes(2, "little") + field
    Path(path).write_bytes(bytes(data))
    return path


def flip_bit(path, offset, bit):
    """Flip one bit of a file in place."""
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ (1 << bit)]))


def rewrite_manifest(path, edit):
    """Apply ``edit`` to a store's manifest and write it back with a matching
    checksum (as a forger, or a buggy tool, would)."""
    from int8store.store.manifest import pack, read_manifest

    manifest = read_manifest(path)
    edit(manifest)
    with open(path, "r+b") as f:
        f.write(pack(manifest, manifest["userblock_size"]))


# -- Archives holding a long run of zeros, written without ever holding it ----------

_MiB = 1 << 20


def _deflate(data, finish):
    """Raw deflate of ``data``, starting afresh and ending byte-aligned on a full
    flush (or a final block): such pieces can be concatenated into one stream."""
    compressor = zlib.compressobj(1, zlib.DEFLATED, -15)
    return compressor.compress(data) + compressor.flush(zlib.Z_FINISH if finish else zlib.Z_FULL_FLUSH)


def _deflated_zeros(nbytes, tail=b""):
    """Raw deflate of ``nbytes`` zeros (a multiple of 1 MiB), then ``tail``: one
    compressed MiB repeated, about 4.5 KB per MiB."""
    assert nbytes % _MiB == 0
    return _deflate(bytes(_MiB), finish=False) * (nbytes // _MiB) + _deflate(tail, finish=True)


def zip_with_zeros(archive_path, files, name, nbytes):
    """A zip of ``files`` ({member name: bytes}) and a member ``name`` of
    ``nbytes`` zeros, deflated, with ZIP64 sizes. The zero member's CRC is left
    0: a reader that checks its announced length never gets that far."""
    entries = [(n, _deflate(data, finish=True), zlib.crc32(data), len(data)) for n, data in files.items()]
    entries.append((name, _deflated_zeros(nbytes), 0, nbytes))
    central, offset = [], 0
    with open(archive_path, "wb") as out:
        for member, body, crc, size in entries:
            raw = member.encode()
            sizes = struct.pack("<HHQQ", 1, 16, size, len(body))  # ZIP64 extra field
            out.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 8, 0, 0x21, crc,
                                  0xFFFFFFFF, 0xFFFFFFFF, len(raw), len(sizes)) + raw + sizes + body)
            central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 8, 0, 0x21, crc,
                                       0xFFFFFFFF, 0xFFFFFFFF, len(raw), len(sizes), 0, 0, 0,
                                       0o644 << 16, offset) + raw + sizes)
            offset += 30 + len(raw) + len(sizes) + len(body)
        directory = b"".join(central)
        out.write(directory + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries),
                                          len(directory), offset, 0))
    return archive_path


def tar_gz_with_zeros(archive_path, files, name, nbytes):
    """A .tar.gz of ``files`` ({member name: bytes}) and a member ``name`` of
    ``nbytes`` zeros. The gzip CRC is left 0 (see :func:`zip_with_zeros`)."""
    import tarfile

    def header(member, size):
        info = tarfile.TarInfo(member)
        info.size, info.mode = size, 0o644
        return info.tobuf(format=tarfile.GNU_FORMAT)

    head = b"".join(header(n, len(data)) + data + bytes(-len(data) % 512) for n, data in files.items())
    body = (_deflate(head + header(name, nbytes), finish=False)
            + _deflated_zeros(nbytes, tail=bytes(1024)))  # the tar's two end blocks
    with open(archive_path, "wb") as out:
        out.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + body
                  + struct.pack("<II", 0, (nbytes + len(head) + 1536) & 0xFFFFFFFF))
    return archive_path


# -- CIFAR-10 (python version) ------------------------------------------------

CIFAR10_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch",)
CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                   "ship", "truck"]


def fake_cifar10(sizes=(3, 2, 4, 1, 2, 3), seed=0):
    """``{batch name: (rows, labels)}``: uint8 rows of 3072 (R, G, B planes of
    32x32) and a list of ints 0..9, ``sizes`` images for data_batch_1..5, test_batch."""
    rng = np.random.default_rng(seed)
    return {name: (rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                   [int(v) for v in rng.integers(0, 10, n)])
            for name, n in zip(CIFAR10_BATCHES, sizes)}


def python2_pickle_of(value):
    """``value`` (dicts, lists, str, small ints, numpy arrays) pickled as
    Python 2's cPickle wrote CIFAR-10 (protocol 2): str as SHORT_BINSTRING or
    BINSTRING, each container and string memoized (BINPUT), arrays through
    ``numpy.core.multiarray._reconstruct`` (numpy 1.x), lists in APPENDS of
    at most 1000 items."""
    memo = iter(range(1, 1 << 30))

    def put():
        return b"q" + bytes([next(memo) % 256])  # (BINPUT's index is one byte: wraps, harmless)

    def body(item):
        if isinstance(item, dict):
            return b"}" + put() + b"(" + b"".join(body(k) + body(v) for k, v in item.items()) + b"u"
        if isinstance(item, list):
            out = b"]" + put()
            for start in range(0, len(item), 1000):
                out += b"(" + b"".join(body(v) for v in item[start:start + 1000]) + b"e"
            return out
        if isinstance(item, str):
            raw = item.encode("latin1")
            head = b"U" + bytes([len(raw)]) if len(raw) < 256 else b"T" + struct.pack("<i", len(raw))
            return head + raw + put()
        if isinstance(item, int) and 0 <= item < 256:
            return b"K" + bytes([item])
        if isinstance(item, int):
            return b"J" + struct.pack("<i", item)
        return python2_array_pickle(item) + put()

    return b"\x80\x02" + body(value) + b"."


def cifar10_batch_pickle(rows, labels, style="python2", entries=None):
    """A batch's pickle: ``python2`` (the archive's own bytes: str keys,
    numpy.core) or ``python3`` (``pickle.dumps(..., protocol=2)`` with bytes
    keys, this numpy's module names). ``entries`` add or replace keys (None
    removes one)."""
    batch = {"batch_label": "training batch 1 of 5", "labels": labels, "data": rows,
             "filenames": [f"image_{i}.png" for i in range(len(rows))]}
    batch.update(entries or {})
    batch = {k: v for k, v in batch.items() if v is not None}
    if style == "python2":
        return python2_pickle_of(batch)

    def as_bytes(value):
        return value.encode() if isinstance(value, str) else value

    return pickle.dumps({k.encode(): ([as_bytes(v) for v in value] if isinstance(value, list)
                                      else as_bytes(value))
                         for k, value in batch.items()}, protocol=2)


def cifar10_meta_pickle(names=CIFAR10_CLASSES, style="python2"):
    meta = {"num_cases_per_batch": 10000, "label_names": list(names), "num_vis": 3072}
    if style == "python2":
        return python2_pickle_of(meta)
    return pickle.dumps({k.encode(): [n.encode() for n in v] if isinstance(v, list) else v
                         for k, v in meta.items()}, protocol=2)


def cifar10_members(data, style="python2"):
    """``{member name: bytes}`` of an archive of ``data`` (see :func:`fake_cifar10`)."""
    members = {name: cifar10_batch_pickle(rows, labels, style) for name, (rows, labels) in data.items()}
    members["batches.meta"] = cifar10_meta_pickle(style=style)
    members["readme.html"] = b"<html>CIFAR-10</html>"
    return members


def write_cifar10_archive(path, members, folder="cifar-10-batches-py", extra=()):
    """``cifar-10-python.tar.gz`` as distributed: the folder's entry, then
    ``members`` ({name: bytes}) inside it; ``extra``: more TarInfo entries."""
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as archive:
        entry = tarfile.TarInfo(folder)
        entry.type, entry.mode = tarfile.DIRTYPE, 0o755
        archive.addfile(entry)
        for name, body in members.items():
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size, info.mode = len(body), 0o644
            archive.addfile(info, io.BytesIO(body))
        for info in extra:
            archive.addfile(info)
    return path


def write_cifar10_folder(folder, members):
    """The folder ``cifar-10-batches-py/`` the archive unpacks to."""
    folder.mkdir(parents=True)
    for name, body in members.items():
        (folder / name).write_bytes(body)
    return folder


def channels_last_by_planes(rows):
    """CIFAR-10 rows as (N, 32, 32, 3), plane by plane: the reference layout."""
    planes = [rows[:, c * 1024:(c + 1) * 1024].reshape(-1, 32, 32) for c in range(3)]
    return np.stack(planes, axis=-1)
