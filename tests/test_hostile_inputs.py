"""Hostile and broken inputs: nothing runs, nothing leaks, nothing explodes,
nothing is lost.

Every case is run through ``int8store convert`` and asserts the promise:
exit status 2, one line on stderr naming the file, no output file, no
temporary file, and memory bounded far below what the file announces.
"""

import gzip
import io
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tarfile
import textwrap
import tracemalloc
import zipfile
import zlib

import h5py
import numpy as np
import pytest

from archives import (fake_mnist, python2_array_pickle, python2_pickle, tar_folder,
                      tar_gz_with_zeros, write_image_folder, write_mnist_idx_folder, zip_folder,
                      zip_with_zeros)
from int8store import (EncodingError, SourceFormatError, StoreFormatError, load_data, load_splits,
                       open_store)
from conftest import one_short_line
from int8store.cli import main
from int8store.sources import read_source

pytestmark = pytest.mark.graph_free

BOUND = 64 << 20  # traced memory allowed for any refusal below


def refused(tmp_path, capsys, sources, *fragments, extra=()):
    """Convert ``sources``; assert the clean refusal and return the error line."""
    out = tmp_path / "out" / "store.h5"
    out.parent.mkdir(exist_ok=True)
    tracemalloc.start()
    try:
        status = main(["convert", *map(str, sources), "-o", str(out), *extra])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    for fragment in fragments:
        assert fragment in err, err
    assert sorted(p.name for p in out.parent.iterdir()) == []  # no output, no temporary file
    assert peak < BOUND, peak
    return err


def refused_in_child(tmp_path, source, *fragments, setup=""):
    """``refused`` in a child process, for a case that could crash or exhaust
    the caller; ``setup``: Python lines the child runs first (a resource
    limit). Returns the error line."""
    import subprocess
    import sys

    out = tmp_path / "out" / "store.h5"
    out.parent.mkdir(exist_ok=True)
    script = f"{setup}\nimport sys\nfrom int8store.cli import main\nsys.exit(main(sys.argv[1:]))"
    run = subprocess.run([sys.executable, "-c", script, "convert", str(source), "-o", str(out)],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("error: ") and run.stderr.count("\n") == 1, run.stderr
    for fragment in fragments:
        assert fragment in run.stderr, run.stderr
    assert list(out.parent.iterdir()) == []  # no output, no temporary file
    return run.stderr


# -- IDX --------------------------------------------------------------------------

def idx_header(type_code, dims):
    return bytes([0, 0, type_code, len(dims)]) + struct.pack(f">{len(dims)}I", *dims)


@pytest.mark.parametrize("gzipped", [False, True])
def test_an_idx_header_announcing_four_billion_labels(tmp_path, capsys, gzipped):
    folder = write_mnist_idx_folder(tmp_path / "idx", fake_mnist(), gzipped=False)
    labels = folder / "train-labels-idx1-ubyte"
    data = idx_header(0x08, [2 ** 32 - 1]) + bytes(12)
    labels.write_bytes(gzip.compress(data) if gzipped else data)
    err = refused(tmp_path, capsys, [folder], str(labels))
    assert "4294967295" in err.replace(",", "")


def test_an_idx_image_header_announcing_more_than_the_gzip_can_hold(tmp_path, capsys):
    folder = write_mnist_idx_folder(tmp_path / "idx", fake_mnist(), gzipped=True)
    images = folder / "train-images-idx3-ubyte.gz"
    images.write_bytes(gzip.compress(idx_header(0x08, [3_000_000, 784, 784]) + bytes(100)))
    refused(tmp_path, capsys, [folder], str(images), "decompress to at most")


@pytest.mark.parametrize("kind", ["idx", "idx.gz", "npz", "hdf5"])
def test_a_header_announcing_hundreds_of_huge_dimensions_is_one_short_line(tmp_path, capsys,
                                                                            kind):
    """An IDX header of 200 dimensions of 2**31 (805 bytes) was an
    OverflowError traceback (its size in GiB, past a float); with fewer, and
    in an .npz or HDF5 header, the shape and its bytes were spelt out whole:
    error lines of 800 to 2,600 characters."""
    folder = write_mnist_idx_folder(tmp_path / "idx", fake_mnist(), gzipped=False)
    images = folder / "train-images-idx3-ubyte"
    if kind.startswith("idx"):
        data = idx_header(0x08, [60] + [2 ** 31] * 199)
        if kind == "idx.gz":
            images.unlink()
            images = folder / "train-images-idx3-ubyte.gz"
            data = gzip.compress(data)
        images.write_bytes(data)
        source = folder
    elif kind == "npz":
        source = images = tmp_path / "d.npz"
        with zipfile.ZipFile(source, "w") as z:
            z.writestr("x_train.npy", _npy_member(
                f"{{'descr': '|u1', 'fortran_order': False, 'shape': {(6,) + (2 ** 40,) * 60}, }}"))
            z.writestr("y_train.npy", _npy_member(
                "{'descr': '|u1', 'fortran_order': False, 'shape': (6,), }", bytes(6)))
    else:
        source = images = tmp_path / "d.h5"
        with h5py.File(source, "w") as f:
            f.create_dataset("x_train", shape=(6,) + (2 ** 60,) * 20, dtype=np.uint8,
                             chunks=(1,) * 21)
            f["y_train"] = np.zeros(6, np.uint8)
    err = refused(tmp_path, capsys, [source], str(images), "...")
    one_short_line(err.removeprefix("error: ").rstrip("\n"), images)


# -- pickles ----------------------------------------------------------------------

def test_a_pickle_declaring_millions_of_images_in_a_few_bytes(tmp_path, capsys):
    # A Python 2 array pickle whose data string announces 2,000,000 x 784 bytes.
    small = python2_array_pickle(np.zeros((2, 784), np.uint8))
    forged = small.replace(struct.pack("<i", 2 * 784), struct.pack("<i", 2_000_000 * 784), 1)
    labels = python2_array_pickle(np.zeros(2, np.int64))
    path = tmp_path / "mnist.pkl.gz"
    path.write_bytes(gzip.compress(b"\x80\x02((" + forged + labels + b"t(" + small + labels
                                   + b"t(" + small + labels + b"tt."))
    refused(tmp_path, capsys, [path], str(path), "the pickle")


def test_a_pickled_list_repeating_one_array_is_refused(tmp_path, capsys):
    row = np.zeros(784, np.float32)
    images = [row] * 100  # unpickles as 100 references: a bomb if made into an array
    path = tmp_path / "mnist.pkl.gz"
    labels = np.zeros(100, np.int64)
    path.write_bytes(gzip.compress(pickle.dumps(((images, labels),) * 3, protocol=4)))
    refused(tmp_path, capsys, [path], str(path), "the train images are a list, expected a numpy array")


def test_a_pickled_array_without_data_is_refused(tmp_path, capsys):
    # _reconstruct without BUILD: an array that never receives its data.
    empty = (b"cnumpy.core.multiarray\n_reconstruct\nq\x01cnumpy\nndarray\nq\x02K\x00\x85U\x01b\x87R")
    labels = python2_array_pickle(np.zeros(3, np.int64))
    pair = b"(" + empty + labels + b"t"
    path = tmp_path / "mnist.pkl.gz"
    path.write_bytes(gzip.compress(b"\x80\x02(" + pair * 3 + b"t."))
    refused(tmp_path, capsys, [path], str(path))


class _Uninitialised:
    """Pickles as numpy.ndarray(shape, "u1"): an array of whatever memory held."""

    def __init__(self, shape):
        self.shape = shape

    def __reduce__(self):
        return (np.ndarray, (self.shape, "u1"))


@pytest.mark.parametrize("protocol", [2, 4])
def test_a_pickle_calling_numpy_ndarray_directly_is_refused(tmp_path, capsys, protocol):
    """numpy.ndarray((N, 784), "u1") allocates without filling: a 3 KB pickle
    made a 2.35 GB store of leaked memory. Only arrays whose bytes come from
    the file are rebuilt, by both pickle readers (protocol 2 is read by the
    Python 2 reader first)."""
    labels = np.zeros(3000, np.int64)
    content = ((_Uninitialised((3000, 784)), labels),) * 3
    path = tmp_path / "mnist.pkl.gz"
    path.write_bytes(gzip.compress(pickle.dumps(content, protocol=protocol)))
    assert len(path.read_bytes()) < 3000
    refused(tmp_path, capsys, [path], str(path), "numpy.ndarray(...)", "uninitialised memory")


@pytest.mark.parametrize("kind", ["M8", "m8", "V8", "S4", "U2"])
def test_a_pickle_giving_a_dtype_other_than_a_numbers_state_is_refused(tmp_path, kind):
    """numpy.dtype(KIND) then BUILD with the state numpy writes for numbers:
    numpy trusts it (a datetime dtype crashes the process, a byte-string one
    gets a size of -1). Both pickle readers refuse it; in a child process, so
    that a crash fails this test, not the suite."""
    minus_one = b"J" + struct.pack("<i", -1)
    data = (b"\x80\x02cnumpy\ndtype\n(U" + bytes([len(kind)]) + kind.encode() + b"K\x00K\x01tR"
            b"(K\x03U\x01<NNN" + minus_one + minus_one + b"K\x00tb.")
    path = tmp_path / "mnist.pkl.gz"
    path.write_bytes(gzip.compress(data))
    err = refused_in_child(tmp_path, path, "only numbers' dtypes are rebuilt")
    assert err.startswith(f"error: {path}: "), err


def test_a_pickle_asking_for_a_huge_byte_string(tmp_path, capsys):
    # BINBYTES8 announcing 2**40 bytes, then nothing.
    path = tmp_path / "mnist.pkl.gz"
    path.write_bytes(gzip.compress(b"\x80\x04\x8e" + struct.pack("<Q", 2 ** 40)))
    refused(tmp_path, capsys, [path], str(path))


@pytest.mark.parametrize("gzipped", [False, True])
@pytest.mark.parametrize("framed", [False, True])
def test_a_pickle_announcing_a_gigabyte_bytearray_allocates_none_of_it(tmp_path, capsys, gzipped,
                                                                       framed):
    # BYTEARRAY8 (protocol 5: a writable array's bytes) announcing 1 GiB, then
    # a few bytes, in a FRAME or not: Python's unpickler would allocate the
    # gigabyte first (the fuzz found this); refused() holds it to 64 MiB.
    array = b"\x96" + struct.pack("<Q", 1 << 30) + b"\x00" * 64
    if framed:
        array = b"\x95" + struct.pack("<Q", len(array)) + array
    data = b"\x80\x05" + array + b"."
    path = tmp_path / ("mnist.pkl.gz" if gzipped else "mnist.pkl")
    path.write_bytes(gzip.compress(data) if gzipped else data)
    err = refused(tmp_path, capsys, [path], str(path))
    assert framed or "announces 1,073,741,8" in err, err


def test_a_pickle_line_that_never_ends_is_read_no_further_than_the_ceiling(tmp_path, capsys):
    # GLOBAL, then 100 MiB without a newline (100 KB of gzip): both pickle
    # readers read a line of a length the file decides, each within the ceiling.
    path = tmp_path / "mnist.pkl.gz"
    path.write_bytes(gzip.compress(b"\x80\x02c" + b"a" * (100 << 20), compresslevel=9))
    refused(tmp_path, capsys, [path], str(path), "ceiling of 1.0 MiB", extra=["--max-memory", "1MiB"])


def test_a_pickle_that_runs_code_is_refused(tmp_path, capsys):
    class Payload:
        def __reduce__(self):
            return (os.system, ("touch pwned",))

    path = tmp_path / "mnist.pkl.gz"
    path.write_bytes(gzip.compress(pickle.dumps(Payload(), protocol=2)))
    refused(tmp_path, capsys, [path], str(path), "not allowed")
    assert not (tmp_path / "pwned").exists() and not os.path.exists("pwned")


# -- npz --------------------------------------------------------------------------

def test_an_npz_header_announcing_more_than_the_member_holds(tmp_path, capsys):
    path = tmp_path / "d.npz"
    np.savez(path, x_train=np.zeros((4, 3, 3), np.uint8), y_train=np.zeros(4, np.uint8))
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    members["x_train.npy"] = members["x_train.npy"].replace(b"(4, 3, 3)", b"(4000000, 3, 3)")
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    refused(tmp_path, capsys, [path], f"{path}:x_train.npy", "announces shape (4000000, 3, 3)")


def test_an_npz_of_python_objects_is_refused(tmp_path, capsys):
    path = tmp_path / "d.npz"
    np.savez(path, x_train=np.array([[1, "a"]], dtype=object), y_train=np.zeros(1, np.uint8))
    refused(tmp_path, capsys, [path], "Python objects")


# -- archives of images -----------------------------------------------------------

def image_folder(tmp_path, count=4):
    root = tmp_path / "imgs"
    write_image_folder(root, np.zeros((count, 3, 3), np.uint8), [i % 2 for i in range(count)],
                       ["cat", "dog"])
    return root


def test_a_resize_no_image_may_have_is_refused_before_any_is_read(tmp_path, capsys):
    # 100000x100000 was killed by the OOM killer; 12000x12000 under --max-memory
    # 100MiB churned towards a store of 17 GB.
    root = image_folder(tmp_path)
    refused(tmp_path, capsys, [root], "--resize 100000x100000 makes images of "
            "10,000,000,000 pixels, beyond Pillow's decompression-bomb limit",
            extra=["--resize", "100000x100000"])
    refused(tmp_path, capsys, [zip_folder(root, tmp_path / "imgs.zip")],
            "an image resized to 5000x5000 (--resize) needs 190.7 MiB in memory at once, more "
            "than the ceiling of 100.0 MiB", extra=["--resize", "5000x5000", "--max-memory", "100MiB"])


def test_a_tar_that_loses_an_image_after_its_listing_was_read_is_refused(tmp_path):
    """A tar out of name order is read once into name order; if it no longer
    holds every image its listing named, it is refused, not read with a
    row of zeros."""
    root = image_folder(tmp_path)
    path = tar_folder(root, tmp_path / "set.tar.gz", shuffle=1)
    split = read_source(path).splits["train"]
    files = sorted(root.rglob("*.png"))
    files[-1].unlink()
    tar_folder(root, path, shuffle=1)
    with pytest.raises(SourceFormatError, match=f"{path}: holds {len(files) - 1} of the "
                       f"{len(files)} images its listing named; was it changed while read"):
        split.images()


@pytest.mark.parametrize("gzipped", [False, True])
def test_a_tar_cut_inside_a_member_or_after_its_first_says_so(tmp_path, capsys, gzipped):
    # (tarfile's "unexpected end of data" was said as "not a readable tar
    # archive", and a cut after one member as "after 1 members")
    root = image_folder(tmp_path, count=4)
    whole = tmp_path / "whole.tar"
    with tarfile.open(whole, "w") as archive:
        for path in sorted(root.rglob("*.png")):
            archive.add(path, path.relative_to(root).as_posix())
    with tarfile.open(whole) as archive:
        second = archive.getmembers()[1]
    for cut, said in ((second.offset_data + 10, "it ends inside a member's data; copy it again"),
                      (second.offset, "it ends after 1 member, where a header")):
        data = whole.read_bytes()[:cut]
        path = tmp_path / ("cut.tar.gz" if gzipped else "cut.tar")
        path.write_bytes(gzip.compress(data) if gzipped else data)
        refused(tmp_path, capsys, [path], f"{path}: the tar archive is cut short: {said}")


def test_tar_links_are_reported_not_skipped(tmp_path, capsys):
    root = image_folder(tmp_path)
    for kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
        path = tmp_path / f"links{kind}.tar"
        with tarfile.open(path, "w") as archive:
            for file in sorted(root.rglob("*.png")):
                archive.add(file, file.relative_to(root).as_posix())
            link = tarfile.TarInfo("cat/extra.png")
            link.type, link.linkname = kind, "cat/00000.png"
            archive.addfile(link)
        refused(tmp_path, capsys, [path], f"{path}:cat/extra.png", "link to cat/00000.png")


@pytest.mark.parametrize("cut, gzipped", [(0, False), (300, False), (300, True)])
def test_a_tar_cut_at_or_inside_a_header_is_refused(tmp_path, capsys, cut, gzipped):
    # tarfile ends an archive quietly at a header cut short or missing after
    # the first: 12 images would have loaded as 5, without a word.
    root = image_folder(tmp_path, count=12)
    whole = tmp_path / "whole.tar"
    with tarfile.open(whole, "w") as archive:
        for path in sorted(root.rglob("*")):
            archive.add(path, path.relative_to(root).as_posix(), recursive=False)
    with tarfile.open(whole) as archive:
        sixth = [m for m in archive.getmembers() if m.isfile()][5]
    data = whole.read_bytes()[:sixth.offset + cut]
    path = tmp_path / ("cut.tar.gz" if gzipped else "cut.tar")
    path.write_bytes(gzip.compress(data) if gzipped else data)
    refused(tmp_path, capsys, [path], f"{path}: the tar archive is cut short: it ends after ")
    out = tmp_path / "out" / "whole.h5"
    assert main(["convert", str(whole), "-o", str(out)]) == 0  # (the whole one converts)
    capsys.readouterr()


@pytest.mark.parametrize("name", ["images.tar.gz", "cifar-10-python.tar.gz"])
def test_a_gzip_header_announcing_an_extra_field_it_lacks_is_refused(tmp_path, capsys, name):
    # The gzip header's flags say "an extra field" (FEXTRA) where the compressed
    # data begins: Python's tarfile before 3.11.5 (Debian 12's 3.11.2) raised
    # AttributeError there (python/cpython#107396). Both tar readers refuse it.
    path = tar_folder(image_folder(tmp_path), tmp_path / name)
    data = bytearray(path.read_bytes())
    data[3] = 0x04
    path.write_bytes(data)
    refused(tmp_path, capsys, [path], f"{path}: not a readable tar archive")


def test_zip_symlinks_and_escaping_names_are_refused(tmp_path, capsys):
    root = image_folder(tmp_path)
    path = zip_folder(root, tmp_path / "a.zip")
    with zipfile.ZipFile(path, "a") as archive:
        info = zipfile.ZipInfo("cat/link.png")
        info.external_attr = (0o120777 << 16)
        archive.writestr(info, "/etc/passwd")
    refused(tmp_path, capsys, [path], f"{path}:cat/link.png", "symbolic link")
    path = zip_folder(root, tmp_path / "b.zip")
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("../cat/evil.png", b"x")
    refused(tmp_path, capsys, [path], f"{path}:../cat/evil.png", "absolute path or '..'")
    # A name that starts with a NUL byte: zipfile reads it as empty (and its
    # ZipInfo.is_dir failed on one before Python 3.12).
    path = zip_folder(root, tmp_path / "c.zip")
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("cat/nameless.png", b"x")
    data = path.read_bytes()
    path.write_bytes(data.replace(b"cat/nameless.png", b"\x00at/nameless.png"))
    refused(tmp_path, capsys, [path], f"{path}: a member with an empty name")


def test_a_windows_style_member_name_is_named_for_what_it_is(tmp_path, capsys):
    path = zip_folder(image_folder(tmp_path), tmp_path / "w.zip")
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("cat\\0.png", b"x")
    err = refused(tmp_path, capsys, [path], f"{path}:cat\\0.png", "a backslash")
    assert "absolute path" not in err


def test_a_file_in_an_archive_twice_is_refused_not_read_twice(tmp_path, capsys):
    # Both copies were read: 17 images where the extracted archive holds 16.
    root = image_folder(tmp_path)
    path = zip_folder(root, tmp_path / "twice.zip")
    with zipfile.ZipFile(path, "a") as archive, pytest.warns(UserWarning, match="Duplicate"):
        archive.write(root / "cat" / "00000.png", "cat/00000.png")
    refused(tmp_path, capsys, [path], f"{path}:cat/00000.png", "is in the archive twice")
    for prefix in ("", "./"):
        path = tar_folder(root, tmp_path / f"twice{len(prefix)}.tar.gz")
        with tarfile.open(path, "w:gz") as archive:  # (rewritten, the copy added)
            for image in sorted(root.rglob("*.png")):
                archive.add(image, image.relative_to(root).as_posix())
            archive.add(root / "dog" / "00001.png", prefix + "dog/00001.png")
        refused(tmp_path, capsys, [path], f"{path}:{prefix}dog/00001.png",
                "is in the archive twice")


def test_a_class_folder_without_images_is_refused_not_skipped(tmp_path, capsys):
    # Skipped, it gave the classes after it other labels than their folders'
    # places (here "fish" label 1, not 2), without a word.
    root = image_folder(tmp_path)
    (root / "bird").mkdir()
    (root / "bird" / ".DS_Store").write_bytes(b"")
    (root / "dog").rename(root / "fish")
    refused(tmp_path, capsys, [root], f"{root}/bird: a class folder with no image")
    zipped = zip_folder(root, tmp_path / "empty.zip")
    with zipfile.ZipFile(zipped, "a") as archive:
        archive.writestr("bird/", b"")
    refused(tmp_path, capsys, [zipped], f"{zipped}:bird: a class folder with no image")
    tarred = tmp_path / "empty.tar"
    with tarfile.open(tarred, "w") as archive:
        archive.add(root, "./", recursive=True)
    refused(tmp_path, capsys, [tarred], f"{tarred}:./bird: a class folder with no image")
    # A split layout: a class with images in one split only is a class.
    for split, cls in (("train", "cat"), ("train", "fish"), ("test", "cat")):
        (tmp_path / "layout" / split / cls).mkdir(parents=True)
    write_image_folder(tmp_path / "layout" / "train", np.zeros((2, 3, 3), np.uint8), [0, 1],
                       ["cat", "fish"])
    write_image_folder(tmp_path / "layout" / "test", np.zeros((1, 3, 3), np.uint8), [0], ["fish"])
    (tmp_path / "layout" / "valid" / "bird").mkdir(parents=True)
    refused(tmp_path, capsys, [tmp_path / "layout"],
            f"{tmp_path / 'layout'}/valid/bird: a class folder with no image")
    (tmp_path / "layout" / "valid" / "bird").rmdir()
    # An empty split folder is refused too: taken as no split, one was cut
    # from train without a word.
    refused(tmp_path, capsys, [tmp_path / "layout"],
            f"{tmp_path / 'layout'}/valid: a split folder with no image: add its class folders, "
            "or remove it (a split the source lacks is cut from train)")
    zipped = zip_folder(tmp_path / "layout", tmp_path / "layout.zip")
    with zipfile.ZipFile(zipped, "a") as archive:
        archive.writestr("valid/", b"")
    refused(tmp_path, capsys, [zipped], f"{zipped}:valid: a split folder with no image")
    (tmp_path / "layout" / "valid").rmdir()
    assert main(["convert", str(tmp_path / "layout"), "-o", str(tmp_path / "l.h5"),
                 "--valid-size", "1"]) == 0


def test_a_symbolic_link_back_into_the_tree_is_refused_by_name(tmp_path, capsys):
    """A link up the tree (a loop) or to a folder read already: its images
    would be read forever or twice; said in a line naming the link."""
    root = image_folder(tmp_path)
    (root / "dog" / "loop").symlink_to(root)
    refused(tmp_path, capsys, [root], f"{root}/dog/loop: leads to {root} again (a symbolic "
            "link): its images would be read twice, or forever; remove the link")
    (root / "dog" / "loop").unlink()
    (root / "dog" / "cats").symlink_to(root / "cat")
    refused(tmp_path, capsys, [root], f"{root}/dog/cats: leads to {root}/cat again")
    (root / "dog" / "cats").unlink()
    (root / "ant").symlink_to(root / "cat")  # (met before the folder it names)
    refused(tmp_path, capsys, [root], f"{root}/ant: leads to {root}/cat again")
    (root / "ant").unlink()
    elsewhere = image_folder(tmp_path / "other")
    (root / "bird").symlink_to(elsewhere / "cat")  # (a class folder kept elsewhere: read)
    assert main(["convert", str(root), "-o", str(tmp_path / "linked.h5")]) == 0
    # a link to nothing: it said "No such file or directory" of a name it listed
    (root / "dog" / "gone.png").symlink_to(tmp_path / "gone.png")
    refused(tmp_path, capsys, [root], f"{root}/dog/gone.png: cannot read: a symbolic link to "
            f"'{tmp_path}/gone.png', which does not exist")


def test_a_folder_of_only_test_class_folders_is_a_test_split_not_train(tmp_path, capsys):
    # (it was taken for a wrapping folder: the test images became train and valid)
    write_image_folder(tmp_path / "only" / "test", np.zeros((4, 3, 3), np.uint8), [0, 0, 1, 1])
    refused(tmp_path, capsys, [tmp_path / "only"], "only: has splits test; a train split is needed")
    write_image_folder(tmp_path / "only" / "train", np.zeros((6, 3, 3), np.uint8), [0, 1] * 3)
    assert main(["convert", str(tmp_path / "only"), "-o", str(tmp_path / "o.h5")]) == 0
    assert open_store(tmp_path / "o.h5").splits["test"] == 4


def test_a_stray_file_is_named_and_capitalised_split_folders_are_splits(tmp_path, capsys):
    # (a README beside the split folders made the error blame an image:
    # ".../test/eight/img0076.png: not in a class folder"; so did Train/Test)
    for split, count in (("train", 6), ("test", 4)):
        write_image_folder(tmp_path / "set" / split, np.zeros((count, 3, 3), np.uint8),
                           [0, 1] * (count // 2))
    (tmp_path / "set" / "digits.dat").write_bytes(b"my digits")
    refused(tmp_path, capsys, [tmp_path / "set"], f"{tmp_path / 'set'}/digits.dat: not an image "
                                                  "file", "the tree of class folders must hold "
                                                  "only images")
    (tmp_path / "set" / "digits.dat").unlink()
    (tmp_path / "set" / "README.txt").write_text("my digits")  # (a document: skipped, said)
    write_image_folder(tmp_path / "set" / "stray", np.zeros((2, 3, 3), np.uint8), [0, 1])
    refused(tmp_path, capsys, [tmp_path / "set"], f"{tmp_path / 'set'}/stray: a folder beside "
            "the split folders (test, train) that is not one")
    shutil.rmtree(tmp_path / "set" / "stray")
    for split in ("train", "test"):
        (tmp_path / "set" / split).rename(tmp_path / "set" / split.capitalize())
    assert main(["convert", str(tmp_path / "set"), "-o", str(tmp_path / "s.h5")]) == 0
    assert open_store(tmp_path / "s.h5").splits["test"] == 4
    assert f"note: skipped 1 document beside the images (no image is read from them): " \
           f"{tmp_path / 'set' / 'README.txt'}\n" in capsys.readouterr().out


def test_grey_images_in_a_set_with_colour_ones_are_colour_and_other_sizes_told_to_resize(
        tmp_path, capsys):
    from PIL import Image

    root = image_folder(tmp_path)
    Image.fromarray(np.full((3, 3, 3), [9, 99, 199], np.uint8)).save(root / "dog" / "colour.png")
    images = read_source(root).splits["train"].images()  # (the grey in each channel)
    assert images.shape == (5, 3, 3, 3) and sorted({tuple(p) for p in images.reshape(-1, 3)}) \
        == [(0, 0, 0), (9, 99, 199)]
    (root / "dog" / "colour.png").unlink()
    Image.fromarray(np.zeros((5, 3), np.uint8)).save(root / "dog" / "tall.png")
    refused(tmp_path, capsys, [root], "tall.png: is 5x3 but", "--resize HxW resizes every image: int8store convert and preview take it")
    # In a set held in colour, a grey image of another size is not called
    # colour (it was: "is 5x3 colour", the grey read in each channel).
    Image.fromarray(np.full((3, 3, 3), 9, np.uint8)).save(root / "cat" / "colour.png")
    refused(tmp_path, capsys, [root], "tall.png: is 5x3 but", "is 3x3; all images must share")
    (root / "cat" / "colour.png").unlink()
    # A colour image of another size names the grey one the size came from
    # (it named itself on both sides: "colour.png is 5x3 colour but colour.png is 6x5").
    (root / "dog" / "tall.png").unlink()
    Image.fromarray(np.zeros((5, 3, 3), np.uint8)).save(root / "dog" / "colour.png")
    err = refused(tmp_path, capsys, [root], "colour.png: is 5x3 but", "is 3x3; all images "
                  "must share a size (--resize HxW resizes every image")
    assert err.count("colour.png") == 1


def test_a_member_named_over_lines_and_pages_is_named_on_one_short_line(tmp_path, capsys):
    """A member's name is the file's to give: a newline in it, or 4,000
    characters, is shown escaped and shortened, the line still one line."""
    root = image_folder(tmp_path)
    for kind in ("zip", "tar"):
        for name, shown in (("cat/two\nlines.png", "cat/two\\nlines.png"),
                            ("cat/" + "x" * 4000 + ".png", "cat/xxx")):
            path = tmp_path / f"named.{kind}"
            if kind == "zip":
                path = zip_folder(root, path)
                with zipfile.ZipFile(path, "a") as archive:
                    archive.writestr(name, b"not an image")
            else:
                with tarfile.open(path, "w") as archive:
                    for image in sorted(root.rglob("*.png")):
                        archive.add(image, image.relative_to(root).as_posix())
                    info = tarfile.TarInfo(name)
                    info.size = 12
                    archive.addfile(info, io.BytesIO(b"not an image"))
            err = refused(tmp_path, capsys, [path], f"{path}:", shown, "cannot read this image")
            assert len(err) < len(str(path)) + 400, err


def test_a_member_beyond_the_memory_ceiling_is_refused_before_reading(tmp_path, capsys):
    root = image_folder(tmp_path)
    (root / "cat" / "big.png").write_bytes(bytes(3 << 20))  # zeros: compress 1000:1
    for path in (zip_folder(root, tmp_path / "a.zip"), tmp_path / "a.tar.gz"):
        if path.suffix == ".gz":
            with tarfile.open(path, "w:gz") as archive:
                archive.add(root, ".")
        refused(tmp_path, capsys, [path], "cat/big.png", "ceiling of 1.0 MiB",
                extra=["--max-memory", "1MiB"])


@pytest.mark.parametrize("write", [zip_with_zeros, tar_gz_with_zeros])
def test_a_4gib_member_is_refused_unread_under_a_512mib_address_space(tmp_path, write):
    """4 GiB of zeros named like an image (18 MB compressed): refused from the
    length it announces, in a process that cannot map more than 512 MiB."""
    root = image_folder(tmp_path)
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.png"))}
    path = write(tmp_path / f"bomb{'.zip' if write is zip_with_zeros else '.tar.gz'}", files,
                 "cat/zbomb.png", 4 << 30)
    limit = 512 << 20
    refused_in_child(tmp_path, path, f"{path}:cat/zbomb.png: ", "4.0 GiB",
                     setup=f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))")


def test_an_image_file_is_never_read_past_the_length_it_announced(tmp_path):
    from int8store.errors import SizeLimitError, SourceFormatError
    from int8store.sources import image_files

    class Growing:  # a file that grows after it was listed
        def read(self, n):
            return bytes(n)

    with pytest.raises(SourceFormatError, match="more bytes than the 10 it announced"):
        image_files.read_image_file(Growing(), 10, "grows.png")
    largest = image_files.largest_image_file()
    with pytest.raises(SizeLimitError, match="more than any image int8store decodes"):
        image_files.read_image_file(Growing(), largest + 1, "huge.png")


def png_header_only(width, height):
    """A PNG whose header announces ``width`` x ``height`` grey pixels, with no pixels."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b""))


def test_a_decompression_bomb_png_is_refused_before_decoding(tmp_path, capsys):
    root = image_folder(tmp_path)
    bomb = root / "cat" / "bomb.png"
    bomb.write_bytes(png_header_only(100_000, 100_000))
    refused(tmp_path, capsys, [root], str(bomb), "decompression-bomb limit")


def test_a_postscript_file_named_png_is_never_decoded(tmp_path, capsys, monkeypatch):
    from PIL import EpsImagePlugin

    def ghostscript(*args, **kwargs):
        raise AssertionError("Ghostscript was reached")

    monkeypatch.setattr(EpsImagePlugin, "Ghostscript", ghostscript)
    root = image_folder(tmp_path)
    fake = root / "cat" / "fake.png"
    fake.write_bytes(b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 3 3\nshowpage\n")
    err = refused(tmp_path, capsys, [root], str(fake), "cannot read this image")
    assert "BytesIO" not in err  # the file is named, not an in-memory buffer


def test_folders_nested_too_deep_are_one_error(tmp_path, capsys):
    deep = tmp_path / "deep"
    folder = deep
    for level in range(40):
        folder = folder / f"d{level}"
    folder.mkdir(parents=True)
    (folder / "x.png").write_bytes(b"")
    refused(tmp_path, capsys, [deep], "nested more than 32")


def test_a_folder_name_that_is_not_utf8_is_printed_not_a_traceback(tmp_path, capsys):
    root = image_folder(tmp_path)
    odd = os.fsencode(root) + b"/\xff\xfe"
    os.mkdir(odd)
    with open(odd + b"/x.png", "wb") as f:
        f.write(b"not an image")
    refused(tmp_path, capsys, [root], "\\udcff")


# -- HDF5 sources -----------------------------------------------------------------

def test_hdf5_external_storage_is_refused(tmp_path, capsys):
    secret = tmp_path / "secret.txt"
    secret.write_bytes(bytes(range(256)) * 4)
    path = tmp_path / "ext.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x_train", shape=(4, 16, 16), dtype=np.uint8, external=[(str(secret), 0, 1024)])
        f["y_train"] = np.zeros(4, np.uint8)
    refused(tmp_path, capsys, [path], f"{path}:x_train", "external files")


def test_hdf5_external_links_and_virtual_datasets_are_refused(tmp_path, capsys):
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["x"] = np.zeros((4, 3, 3), np.uint8)
    path = tmp_path / "link.h5"
    with h5py.File(path, "w") as f:
        f["x_train"] = h5py.ExternalLink(str(other), "x")
        f["y_train"] = np.zeros(4, np.uint8)
    refused(tmp_path, capsys, [path], str(path), "external link")
    path = tmp_path / "vds.h5"
    layout = h5py.VirtualLayout(shape=(4, 3, 3), dtype=np.uint8)
    layout[:] = h5py.VirtualSource(str(other), "x", shape=(4, 3, 3))
    with h5py.File(path, "w") as f:
        f.create_virtual_dataset("x_train", layout)
        f["y_train"] = np.zeros(4, np.uint8)
    refused(tmp_path, capsys, [path], f"{path}:x_train", "virtual dataset")


def test_hdf5_huge_chunks_and_unwritten_datasets_are_refused(tmp_path, capsys):
    path = tmp_path / "chunk.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x_train", shape=(2, 20000, 20000), dtype=np.uint8,
                         chunks=(1, 20000, 20000), compression="gzip")
        f["y_train"] = np.zeros(2, np.uint8)
    refused(tmp_path, capsys, [path], f"{path}:x_train", "rechunk")
    path = tmp_path / "empty.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x_train", shape=(100000, 100, 100), dtype=np.uint8, chunks=(10, 100, 100))
        f["y_train"] = np.zeros(100000, np.uint8)
    refused(tmp_path, capsys, [path], f"{path}:x_train", "announces 1,000,000,000 bytes")


def test_hdf5_labels_of_two_dimensions_are_named_by_their_own_key(tmp_path, capsys):
    """They were named by the images' key, "train/x: train labels must be 1-D"."""
    path = tmp_path / "grouped.h5"
    with h5py.File(path, "w") as f:
        f["train/x"] = np.zeros((4, 3, 3), np.uint8)
        f["train/y"] = np.zeros((4, 1), np.uint8)
    refused(tmp_path, capsys, [path], f"{path}:train/y: train labels must be 1-D, got shape (4, 1)")


def hdf5_source(path, groups=()):
    with h5py.File(path, "w") as f:
        f.create_dataset("x_train", data=np.arange(6 * 9, dtype=np.uint8).reshape(6, 3, 3),
                         chunks=(2, 3, 3), compression="gzip")
        f["y_train"] = np.arange(6) % 2
        for group in groups:
            f.create_group(group)
    return path


def test_hdf5_groups_linked_in_a_cycle_are_walked_once(tmp_path):
    path = hdf5_source(tmp_path / "cycle.h5", ["a/b"])
    with h5py.File(path, "a") as f:
        f["a/b/up"] = f["a"]  # a hard link to an ancestor: the groups form a cycle
    from int8store.sources.hdf5 import read_hdf5

    train = read_hdf5(path).splits["train"]
    np.testing.assert_array_equal(train.labels, np.arange(6) % 2)
    np.testing.assert_array_equal(train.images().reshape(-1), np.arange(54))


def damaged_attribute_source(path, damage):
    """An HDF5 source (default file format: no metadata checksums) whose root
    attribute ``format`` (a variable-length string, which int8store reads to
    tell a store) is damaged: ``"heap"`` zeroes the size of its value in the
    global heap (HDF5 2.0 then loops for ever reading it), ``"type"``
    garbles its datatype's class bits (reading it then crashes the library
    with SIGSEGV)."""
    hdf5_source(path)
    with h5py.File(path, "a") as f:
        f.attrs["format"] = "toy"
    data = bytearray(path.read_bytes())
    if damage == "heap":
        at = data.find(b"GCOL")  # header 16 bytes; object 1: index, count, reserved, size
        assert at >= 0 and int.from_bytes(data[at + 16:at + 18], "little") == 1
        data[at + 24:at + 32] = bytes(8)
    else:
        at = data.find(b"format\x00\x00")  # the attribute message's name, padded to 8
        assert at >= 0 and data[at + 8] == 0x19  # datatype version 1, class 9 (variable length)
        data[at + 9] = 0xFF
    path.write_bytes(bytes(data))
    return path


def test_an_hdf5_source_that_hangs_the_library_is_one_error_within_the_limit(tmp_path):
    import time

    from int8store.sources.hdf5 import read_hdf5

    path = damaged_attribute_source(tmp_path / "loops.h5", "heap")
    start = time.monotonic()
    with pytest.raises(SourceFormatError, match=r"loops\.h5: ") as error:
        read_hdf5(path, time_limit=3)
    assert time.monotonic() - start < 3 + 5  # the limit, and the child's end
    assert "\n" not in str(error.value)
    # HDF5 2.0 loops here (an HDF5 that stops instead gives its own error, in time too)
    print(error.value)


def test_an_hdf5_source_that_crashes_the_library_is_one_error(tmp_path, capsys):
    path = damaged_attribute_source(tmp_path / "crash.h5", "type")
    refused(tmp_path, capsys, [path], str(path), "the file is damaged")


@pytest.mark.timeout(120)
def test_an_hdf5_file_that_crashes_or_hangs_the_library_is_one_error_for_the_store_commands(
        tmp_path, capsys, monkeypatch):
    """info, verify and manifest read a plain HDF5 file's root attributes to
    tell an old or damaged store: in their own process, where a damaged file
    killed them with SIGSEGV (review); convert and load_data read it in a
    child process already."""
    from int8store.store import plain_hdf5

    crash = damaged_attribute_source(tmp_path / "crash.h5", "type")
    said = (f"error: {crash}: not an int8store file; as an HDF5 file it is damaged (the HDF5 "
            "library crashed (signal SIGSEGV) reading it)\n")
    for command in ("info", "verify", "manifest"):
        assert main([command, str(crash)]) == 2
        assert capsys.readouterr().err == said
    with pytest.raises(StoreFormatError, match="crash.h5: not an int8store file"):
        open_store(crash)
    monkeypatch.setattr(plain_hdf5, "TIME_LIMIT", 3)
    loops = damaged_attribute_source(tmp_path / "loops.h5", "heap")
    assert main(["info", str(loops)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {loops}: not an int8store file; as an HDF5 "
                                              "file it is damaged (the HDF5 library ")
    plain = hdf5_source(tmp_path / "plain.h5")  # (a readable one: the usual line)
    assert main(["info", str(plain)]) == 2
    assert capsys.readouterr().err == (f"error: {plain}: not an int8store file; convert archives "
                                       "with 'int8store convert'\n")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["pipe.h5", "pipe.npz", "mnist.pkl.gz", "pipe.zip", "pipe.tar.gz",
                                  "train-images-idx3-ubyte"])
def test_a_source_that_is_a_pipe_is_refused_not_waited_on(tmp_path, capsys, name):
    # Only an .h5 was refused: the other readers opened a FIFO, which waits
    # for a writer for ever (and /dev/zero never ends).
    fifo = tmp_path / name
    os.mkfifo(fifo)
    refused(tmp_path, capsys, [fifo], f"{fifo}: is not a regular file (a FIFO)")
    with pytest.raises(SourceFormatError, match="is not a regular file"):
        load_data(str(fifo))


@pytest.mark.timeout(60)
def test_a_pipe_is_not_opened_by_info_verify_preview_nor_among_class_folders(tmp_path, capsys):
    # (the review: each of these opened a pipe before any check)
    fifo = tmp_path / "pipe.h5"
    os.mkfifo(fifo)
    for command in (["info", str(fifo)], ["verify", str(fifo)],
                    ["preview", str(fifo), "-o", str(tmp_path / "g.png")]):
        assert main(command) == 2
        assert f"{fifo}: is not a regular file (a FIFO)" in capsys.readouterr().err
    write_image_folder(tmp_path / "imgs", np.zeros((6, 4, 4), np.uint8), np.arange(6) % 2)
    os.mkfifo(tmp_path / "imgs" / "1" / "late.png")
    refused(tmp_path, capsys, [tmp_path / "imgs"], "late.png: is not a regular file (a FIFO)")


def test_an_npz_row_beyond_the_memory_ceiling_is_refused_before_it_is_read(tmp_path, capsys):
    # An .npz member is read a chunk of rows at a time, not held to the ceiling
    # whole; a single row of 6 MiB (zeros: 6 kB deflated) must still be refused.
    wide = np.zeros((4, 6 << 20), np.uint8)
    np.savez_compressed(tmp_path / "wide.npz", x_train=wide[:3], y_train=np.arange(3) % 2,
                        x_test=wide[3:], y_test=np.zeros(1, np.uint8))
    refused(tmp_path, capsys, [tmp_path / "wide.npz"], "wide.npz:x_train.npy", "ceiling",
            extra=["--max-memory", "4MiB"])


@pytest.mark.timeout(60)
def test_a_source_linked_to_a_device_is_refused(tmp_path, capsys):
    link = tmp_path / "zeros.npz"
    link.symlink_to("/dev/zero")
    refused(tmp_path, capsys, [link], f"{link}: is not a regular file (a character device)")


UNREADABLE = textwrap.dedent("""
    import os, sys
    from int8store import Int8StoreError, load_data
    try:
        load_data(sys.argv[1])
    except Int8StoreError as error:
        print(type(error).__name__, error)
""")


@pytest.mark.parametrize("what", ["mnist.pkl.gz", "data.npz", "idx file", "idx folder"])
def test_a_source_that_cannot_be_read_is_one_error_naming_it(tmp_path, what):
    # A permission denied was Python's PermissionError, from the readers'
    # first look at the file (its gzip magic, the folder's listing).
    from archives import fake_mnist_pickle_content, write_pickle_gz

    if what == "mnist.pkl.gz":
        source = denied = write_pickle_gz(tmp_path / what, fake_mnist_pickle_content())
    elif what == "data.npz":
        source = denied = save_npz(tmp_path, np.zeros((12, 2, 2), np.uint8))
    else:
        source = write_mnist_idx_folder(tmp_path / "idx", fake_mnist())
        denied = source if what == "idx folder" else next(source.glob("train-images*"))
    denied.chmod(0)
    command = [sys.executable, "-c", UNREADABLE, str(source)]
    if os.geteuid() == 0:  # (root reads anything: without the capability that lets it)
        if shutil.which("setpriv") is None:
            pytest.skip("run as root, and no setpriv to drop the capability to read anything")
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] + command
    run = subprocess.run(command, capture_output=True, text=True, timeout=120)
    denied.chmod(0o700)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert run.stdout == f"SourceReadError {denied}: cannot read (Permission denied)\n"


# -- data that would change silently ---------------------------------------------

def test_integers_beyond_float64s_exact_range_are_refused(tmp_path):
    big = np.array([2 ** 60, 2 ** 60 + 1] * 6, dtype=np.int64).reshape(12, 1)
    with pytest.raises(EncodingError, match=r"beyond ±2\*\*53"):
        load_splits(save_npz(tmp_path, big))


def save_npz(tmp_path, images):
    path = tmp_path / "big.npz"
    labels = np.zeros(len(images), np.uint8)
    np.savez(path, x_train=images, y_train=labels, x_test=images, y_test=labels)
    return path


def test_negative_labels_are_refused(tmp_path, capsys):
    path = tmp_path / "neg.npz"
    images = np.zeros((12, 2, 2), np.uint8)
    np.savez(path, x_train=images, y_train=np.array([0, 1, -1] * 4), x_test=images,
             y_test=np.zeros(12, np.int8))
    # (the source's labels are checked before any split is cut from them)
    refused(tmp_path, capsys, [path], "(train) labels", "4 are negative")


def test_valid_size_says_how_it_was_read(tmp_path, capsys):
    folder = write_mnist_idx_folder(tmp_path / "idx", fake_mnist(n_train=20))
    for given, said in (("0.1", "2 of the 20 training examples (valid_size=0.1, read as a fraction)"),
                        ("3", "3 of the 20 training examples (valid_size=3, read as a count)"),
                        # a whole number with an exponent is a count, as it reads; 1e-1 a fraction
                        ("1e1", "10 of the 20 training examples (valid_size=10, read as a count)"),
                        ("1e-1", "2 of the 20 training examples (valid_size=0.1, read as a fraction)")):
        out = tmp_path / f"{given}.h5"
        assert main(["convert", str(folder), "-o", str(out), "--valid-size", given]) == 0
        assert said in capsys.readouterr().out
    refused(tmp_path, capsys, [folder], "valid_size=1.0 (--valid-size)",
            extra=["--valid-size", "1.0"])


# -- outputs ----------------------------------------------------------------------

def test_outputs_that_cannot_be_written_are_one_line(tmp_path, capsys):
    folder = write_mnist_idx_folder(tmp_path / "idx", fake_mnist())
    (tmp_path / "a_file").write_text("x")
    for out, fragment in ((tmp_path / "a_file" / "m.h5", "cannot write here"),
                          (tmp_path, "is a folder")):
        status = main(["convert", str(folder), "-o", str(out)])
        err = capsys.readouterr().err
        assert status == 2 and err.count("\n") == 1 and fragment in err, err


def test_a_full_disk_is_one_line_and_leaves_nothing(tmp_path):
    """The file-size limit (RLIMIT_FSIZE) makes writes fail as a full disk does."""
    folder = write_mnist_idx_folder(tmp_path / "idx", fake_mnist(n_train=3000, side=28))
    refused_in_child(tmp_path, folder, str(tmp_path / "out" / "store.h5"), "cannot write",
                     setup="import resource, signal; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
                           "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))")


# -- pickles that name one object from many places, or nest it in itself --------

def _nested_pairs(levels):
    """A protocol-2 pickle of ``levels`` tuples, each holding the one before
    twice (through the memo): 2**levels references in ~6*levels bytes."""
    body = b"\x80\x02]q\x00"
    for i in range(1, levels + 1):
        body += b"(h" + bytes([i - 1]) + b"h" + bytes([i - 1]) + b"tq" + bytes([i])
    return body + b"."


@pytest.mark.parametrize("name, body", [
    ("shared", _nested_pairs(60)),  # (took 50 s and 670 MB at 22 levels, exponentially more)
    ("cycle", b"\x80\x02]q\x00h\x00a."),  # a list holding itself (a RecursionError)
    ("deep", b"\x80\x02N" + b"\x85" * 100_000 + b"."),  # (a RecursionError)
])
def test_a_pickle_of_shared_or_nested_lists_is_refused_at_once(tmp_path, capsys, name, body):
    source = tmp_path / f"{name}.pkl"
    source.write_bytes(body)
    refused(tmp_path, capsys, [source], str(source), "expected three (images, labels) pairs")


def test_a_pickle_setting_items_in_an_array_is_refused(tmp_path, capsys):
    # SETITEM on an ndarray wrote into its data (numpy 2: an OverflowError traceback).
    array = pickle.dumps(np.zeros(3, np.uint8), protocol=2)[:-1]
    source = tmp_path / "setitem.pkl"
    source.write_bytes(array + b"K\x00M\xe8\x03s.")
    refused(tmp_path, capsys, [source], str(source), "items set in a ndarray, not a dict")


def test_a_whole_gzip_of_a_cut_pickle_is_not_called_damaged_gzip(tmp_path, capsys):
    rng = np.random.default_rng(0)
    content = tuple(((rng.integers(0, 256, (400, 784)) / 256).astype(np.float32),
                     np.zeros(400, np.int64)) for _ in range(3))
    data = python2_pickle(content)
    source = tmp_path / "mnist.pkl.gz"
    source.write_bytes(gzip.compress(data[:len(data) // 2]))
    err = refused(tmp_path, capsys, [source], str(source), "truncated")
    assert "damaged gzip" not in err, err


def test_images_of_no_pixel_are_refused(tmp_path, capsys):
    source = tmp_path / "d.npz"  # (an h5py ValueError traceback in convert)
    np.savez(source, x_train=np.zeros((40, 0), np.uint8), y_train=np.zeros(40, np.int64),
             x_test=np.zeros((20, 0), np.uint8), y_test=np.zeros(20, np.int64))
    refused(tmp_path, capsys, [source], str(source), "images have shape (40, 0)")


@pytest.mark.parametrize("axes", [33, 65])  # (numpy 1 holds 32 axes, numpy 2 64)
def test_idx_images_of_more_axes_than_numpy_holds_are_refused(tmp_path, capsys, axes):
    folder = tmp_path / "idx"
    write_mnist_idx_folder(folder, fake_mnist(n_train=40, n_test=20))
    for name, count in (("train-images-idx3-ubyte.gz", 40), ("t10k-images-idx3-ubyte.gz", 20)):
        header = b"\x00\x00\x08" + bytes([axes]) + struct.pack(f">{axes}I", count, *[1] * (axes - 1))
        (folder / name).write_bytes(gzip.compress(header + bytes(count)))
    refused(tmp_path, capsys, [folder], "train-images-idx3-ubyte.gz", "more than 31 axes")


def test_timedelta_images_or_labels_are_not_numbers(tmp_path, capsys):
    # (numpy counts timedelta64 an integer: both were read as numbers)
    source = tmp_path / "d.npz"
    np.savez(source, x_train=np.zeros((40, 4, 4), "m8[s]"), y_train=np.zeros(40, np.int64),
             x_test=np.zeros((20, 4, 4), np.uint8), y_test=np.zeros(20, np.int64))
    refused(tmp_path, capsys, [source], str(source), "timedelta64")
    np.savez(source, x_train=np.zeros((40, 4, 4), np.uint8), y_train=np.zeros(40, "m8[s]"),
             x_test=np.zeros((20, 4, 4), np.uint8), y_test=np.zeros(20, np.int64))
    refused(tmp_path, capsys, [source], str(source), "labels must be integers, got dtype timedelta64")


def test_a_protocol_0_pickle_asking_for_os_system_is_refused_as_that(tmp_path, capsys):
    # (it starts as text: it was called "text, not a pickle (it starts 'cposix')")
    source = tmp_path / "evil.pkl"
    source.write_bytes(b"cposix\nsystem\n(S'echo PWNED'\ntR.")
    refused(tmp_path, capsys, [source], str(source), "asks for posix.system, which is not allowed")


# -- .npz headers numpy's own check takes --------------------------------------------

def _npy_member(header, data=b""):
    text = header.encode("latin1")
    text += b" " * (64 - (10 + len(text) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + data


@pytest.mark.parametrize("header, data", [
    ("{'descr': '|V0', 'fortran_order': False, 'shape': (1000000000000000000,), }", b""),
    ("{'descr': ('<f8', (2,)), 'fortran_order': False, 'shape': (3,), }", bytes(48)),
    ("{'descr': '<f8', 'fortran_order': False, 'shape': (True,), }", bytes(8)),
])
def test_npz_headers_numpy_takes_but_cannot_read_are_damage(tmp_path, header, data):
    path = tmp_path / "a.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x.npy", _npy_member(header, data))
    from int8store.runtime.npz import NpzArchive

    with pytest.raises(SourceFormatError, match=r"a\.npz:x\.npy: its header announces"):
        NpzArchive(path)["x"].read()
