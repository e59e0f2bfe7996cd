"""Writers of small archives in the formats int8store reads, for the tests."""

import gzip
import pickle
import struct
import zlib

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


def zip_folder(folder, archive_path, wrap=None):
    """Zip ``folder``'s content (inside a top folder ``wrap`` if given)."""
    import zipfile

    with zipfile.ZipFile(archive_path, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                name = path.relative_to(folder).as_posix()
                archive.write(path, f"{wrap}/{name}" if wrap else name)
    return archive_path


def tar_folder(folder, archive_path, prefix=""):
    """Tar and gzip ``folder``'s content, member names starting with ``prefix``
    (``./`` as ``tar czf archive.tar.gz .`` writes them)."""
    import tarfile

    with tarfile.open(archive_path, "w:gz") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.add(path, prefix + path.relative_to(folder).as_posix())
    return archive_path


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
