"""Writers of small archives in the formats int8store reads, for the tests."""

import gzip
import pickle
import struct

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


def tar_folder(folder, archive_path):
    import tarfile

    with tarfile.open(archive_path, "w:gz") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.add(path, path.relative_to(folder).as_posix())
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
    from int8store.manifest import pack, read_manifest

    manifest = read_manifest(path)
    edit(manifest)
    with open(path, "r+b") as f:
        f.write(pack(manifest, manifest["userblock_size"]))
