"""CIFAR-10 (python version) as a source: ``cifar-10-python.tar.gz`` as
distributed, its folder, and ``"cifar10"`` from the cache, downloaded from a
server the test starts on 127.0.0.1. The archives are made here in the exact
format: the batches pickled the Python 2 way (str keys, numpy.core, as the
real archive holds them) or the Python 3 way (bytes keys, this numpy's
names). Images come out channels last, pixel for pixel the R, G, B planes;
hostile archives are refused in one line naming the file and the member."""

import gzip
import io
import pickle
import pickletools
import re
import struct
import tarfile
import tracemalloc

import numpy as np
import pytest

from archives import (CIFAR10_BATCHES, CIFAR10_CLASSES, channels_last_by_planes,
                      cifar10_batch_pickle, cifar10_members, cifar10_meta_pickle, fake_cifar10,
                      python2_pickle_of, tar_folder, tar_gz_with_zeros, write_cifar10_archive,
                      write_cifar10_folder, write_image_folder)
from int8store import (DatasetNotFoundError, SizeLimitError, SourceFormatError,
                       UnsafePickleError, load_splits, open_store)
from int8store.cli import main
from int8store.codes.histogram import channel_code_counts
from int8store.order.classes import stratified_pick
from int8store.plan.arrangement import VALID_STREAM
from int8store.sources import read_source
from int8store.sources import cifar10
from test_download import leftovers, remote_for, server  # noqa: F401 (server: a fixture)

TRAIN = CIFAR10_BATCHES[:5]
STYLES = ["python2", "python3"]


def expected_splits(data):
    """(images channels last, labels) of train and test, from the planes."""
    train = [data[name] for name in TRAIN]
    return {"train": (channels_last_by_planes(np.concatenate([rows for rows, _ in train])),
                      np.concatenate([labels for _, labels in train])),
            "test": (channels_last_by_planes(data["test_batch"][0]),
                     np.array(data["test_batch"][1]))}


@pytest.fixture
def data():
    return fake_cifar10()


@pytest.fixture
def archive(tmp_path, data):
    return write_cifar10_archive(tmp_path / "cifar-10-python.tar.gz", cifar10_members(data))


# -- reading ------------------------------------------------------------------

@pytest.mark.graph_free
def test_the_python2_batches_are_the_real_archives_opcodes(data):
    # What the reader is tested on is what cPickle wrote: str keys (SHORT_BINSTRING),
    # the data a BINSTRING, numpy 1.x's module path, and nothing of Python 3's.
    rows, labels = data["data_batch_1"]
    ops = list(pickletools.genops(cifar10_batch_pickle(rows, labels)))
    names = {op.name for op, _, _ in ops}
    assert ("GLOBAL", "numpy.core.multiarray _reconstruct") in {(op.name, arg) for op, arg, _ in ops}
    assert {"SHORT_BINSTRING", "BINSTRING", "EMPTY_DICT", "SETITEMS", "APPENDS", "BINPUT"} <= names
    assert not names & {"BINUNICODE", "SHORT_BINBYTES", "BINBYTES", "FRAME", "MEMOIZE"}
    assert ops[0][1] == 2  # PROTO 2


def cpickle_batch(rows, labels):
    """A batch as cPickle began data_batch_1 of the real archive, byte for
    byte but for the sizes: memo from 1, sizes as BININT2, the dtype's
    arguments as BININT1, the data one BINSTRING; then the labels in APPENDS."""
    n = len(rows)
    return (b"\x80\x02}q\x01(U\x04dataq\x02cnumpy.core.multiarray\n_reconstruct\nq\x03"
            b"cnumpy\nndarray\nq\x04K\x00\x85U\x01b\x87Rq\x05(K\x01M" + struct.pack("<H", n)
            + b"M\x00\x0c\x86cnumpy\ndtype\nq\x06U\x02u1K\x00K\x01\x87Rq\x07(K\x03U\x01|NNNJ"
            b"\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89T" + struct.pack("<i", rows.nbytes)
            + rows.tobytes() + b"tbU\x06labelsq\x08]q\t("
            + b"".join(b"K" + bytes([v]) for v in labels) + b"eu.")


@pytest.mark.graph_free
def test_a_batch_as_cpickle_began_the_real_one_reads(tmp_path):
    rows = np.random.default_rng(3).integers(0, 256, (300, 3072), dtype=np.uint8)
    labels = [i % 10 for i in range(300)]
    members = cifar10_members(fake_cifar10())
    members["test_batch"] = cpickle_batch(rows, labels)
    test = read_source(write_cifar10_archive(tmp_path / "c.tar.gz", members)).splits["test"]
    np.testing.assert_array_equal(test.images(), channels_last_by_planes(rows))
    np.testing.assert_array_equal(test.labels, labels)


@pytest.mark.graph_free
@pytest.mark.parametrize("style", STYLES)
def test_the_archive_gives_train_and_test_channels_last(tmp_path, data, style):
    path = write_cifar10_archive(tmp_path / "cifar-10-python.tar.gz", cifar10_members(data, style))
    source = read_source(path)
    assert list(source.splits) == ["train", "test"] and source.label_names == CIFAR10_CLASSES
    for name, (images, labels) in expected_splits(data).items():
        split = source.splits[name]
        assert split.image_shape == (32, 32, 3) and split.dtype == np.uint8
        np.testing.assert_array_equal(split.images(), images)
        np.testing.assert_array_equal(split.labels, labels)
    # pixel (row r, column c) of channel ch is byte ch*1024 + r*32 + c of the image's row
    rows = data["data_batch_2"][0]
    images = source.splits["train"].images()[3:5]  # data_batch_1 holds 3
    for n, r, c, ch in [(0, 0, 0, 0), (0, 0, 1, 2), (1, 31, 0, 1), (1, 5, 17, 2), (0, 31, 31, 0)]:
        assert images[n, r, c, ch] == rows[n, ch * 1024 + r * 32 + c]


@pytest.mark.graph_free
def test_the_folder_and_a_folder_holding_it_read_as_the_archive(tmp_path, data):
    folder = write_cifar10_folder(tmp_path / "cifar-10-batches-py", cifar10_members(data))
    for path in (folder, tmp_path):
        source = read_source(path)
        assert source.label_names == CIFAR10_CLASSES
        for name, (images, labels) in expected_splits(data).items():
            np.testing.assert_array_equal(source.splits[name].images(), images)
            np.testing.assert_array_equal(source.splits[name].labels, labels)


@pytest.mark.graph_free
def test_an_archive_is_known_by_its_first_member_whatever_its_name(tmp_path, data):
    path = write_cifar10_archive(tmp_path / "c10.tgz", cifar10_members(data))
    assert read_source(path).splits["test"].count == 3
    # an archive of class folders of images is still one
    write_image_folder(tmp_path / "imgs", np.zeros((4, 3, 3), np.uint8), [0, 1, 0, 1], ["a", "b"])
    images = tar_folder(tmp_path / "imgs", tmp_path / "imgs.tar.gz")
    assert read_source(images).label_names == ["a", "b"]


@pytest.mark.graph_free
def test_without_batches_meta_the_classes_are_unnamed(tmp_path, data):
    members = cifar10_members(data)
    del members["batches.meta"]
    path = write_cifar10_archive(tmp_path / "c.tar.gz", members)
    source = read_source(path)
    assert source.label_names is None
    assert source.notes == (f"{path}:cifar-10-batches-py/ holds no batches.meta: the classes "
                            "are unnamed (labels 0 to 9)",)  # (they were, without a word)
    assert read_source(write_cifar10_archive(tmp_path / "named.tar.gz",
                                             cifar10_members(data))).notes == ()


# -- convert and load ---------------------------------------------------------

def test_convert_and_load_data_give_the_same_channels_last_images(tmp_path, archive, data):
    expected = expected_splits(data)
    train_images, train_labels = expected["train"]
    store = tmp_path / "cifar.h5"
    assert main(["convert", str(archive), "-o", str(store), "--valid-size", "3",
                 "--valid-seed", "4"]) == 0
    opened = open_store(store)
    assert opened.image_shape == (32, 32, 3) and opened.axes == ("example", "row", "column", "channel")
    assert opened.label_names == CIFAR10_CLASSES and opened.splits == {"train": 9, "valid": 3, "test": 3}
    # the planning step's rule: a seed draws the validation split stratified by class
    chosen = stratified_pick(train_labels, 3, seed=4, stream=VALID_STREAM)
    for name, (images, labels) in {"train": (train_images[~chosen], train_labels[~chosen]),
                                   "valid": (train_images[chosen], train_labels[chosen]),
                                   "test": expected["test"]}.items():
        codes, stored_labels = opened.read_split(name)
        np.testing.assert_array_equal(codes.astype(np.int16) + 128, images)
        np.testing.assert_array_equal(stored_labels, labels)
        # the manifest's histograms, channel by channel, are the images'
        np.testing.assert_array_equal(opened.channel_code_counts(name), channel_code_counts(codes, 3))
        for channel in range(3):
            np.testing.assert_array_equal(
                opened.channel_code_counts(name)[channel],
                np.bincount((images[..., channel].astype(np.int16) - 128).astype(np.int8)
                            .view(np.uint8).ravel(), minlength=256))
    # load_data, from the store and from the archive, holds the same values
    # and knows the classes' names (a tutorial's saved model records them)
    for source in (store, archive):
        splits = load_splits(source, valid_size=None if source == store else 3,
                             valid_seed=None if source == store else 4, dtype="float64")
        assert splits["train"].image_shape == (32, 32, 3)
        assert all(split.label_names == CIFAR10_CLASSES for split in splits.values())
        np.testing.assert_array_equal(
            splits["valid"].x.get_value().reshape(-1, 32, 32, 3), train_images[chosen] / 256)
        np.testing.assert_array_equal(splits["test"].y.get_value(), expected["test"][1])


@pytest.mark.graph_free
def test_the_folder_converts_to_the_same_store_content(tmp_path, archive, data):
    folder = write_cifar10_folder(tmp_path / "cifar-10-batches-py", cifar10_members(data))
    for source, out in ((archive, "a.h5"), (folder, "f.h5")):
        assert main(["convert", str(source), "-o", str(tmp_path / out)]) == 0
    a, f = open_store(tmp_path / "a.h5"), open_store(tmp_path / "f.h5")
    for name in ("train", "valid", "test"):
        for x, y in zip(a.read_split(name), f.read_split(name)):
            np.testing.assert_array_equal(x, y)


# -- the cache and its download -----------------------------------------------

@pytest.fixture
def served(server, archive, monkeypatch):
    """The archive served on 127.0.0.1 as the one expected, named by the mirrors variable."""
    body = archive.read_bytes()
    server.serve("/kriz/cifar-10-python.tar.gz", body)
    monkeypatch.setattr(cifar10, "CIFAR10_ARCHIVE", remote_for("cifar-10-python.tar.gz", body))
    monkeypatch.setenv("INT8STORE_CIFAR10_MIRRORS", f"{server.url}nowhere/, {server.url}kriz/")
    return body


@pytest.mark.graph_free
def test_cifar10_is_downloaded_verified_into_the_cache_then_read_from_it(tmp_path, server, served,
                                                                         data, monkeypatch):
    monkeypatch.setenv("INT8STORE_DATA", str(tmp_path / "cache"))
    source = read_source("cifar10")
    np.testing.assert_array_equal(source.splits["test"].images(), expected_splits(data)["test"][0])
    folder = tmp_path / "cache" / "cifar10"
    assert leftovers(folder) == ["cifar-10-python.tar.gz"]
    assert (folder / "cifar-10-python.tar.gz").read_bytes() == served
    server.shutdown()  # from now on only the cache can answer
    assert read_source("cifar10").splits["train"].count == 12


def test_load_data_cifar10_from_the_cache(tmp_path, served, data):
    splits = load_splits("cifar10", cache_dir=tmp_path, dtype="float64")
    assert splits["train"].image_shape == (32, 32, 3)
    assert [splits[n].n_examples for n in ("train", "valid", "test")] == [10, 2, 3]  # a sixth
    np.testing.assert_array_equal(splits["test"].x.get_value().reshape(-1, 32, 32, 3),
                                  expected_splits(data)["test"][0] / 256)


@pytest.mark.graph_free
def test_a_download_with_the_wrong_checksum_leaves_nothing(tmp_path, server, served, monkeypatch):
    server.serve("/kriz/cifar-10-python.tar.gz", served[:-1] + bytes([served[-1] ^ 1]))
    with pytest.raises(DatasetNotFoundError, match="sha256 [0-9a-f]{64}, expected") as error:
        read_source("cifar10", cache_dir=tmp_path)
    message = str(error.value)
    assert "\n" not in message and f"CIFAR-10 is not in the cache folder {tmp_path / 'cifar10'}" in message
    assert "HTTP 404" in message and "cifar-10-python.tar.gz" in message  # both mirrors, in order
    assert leftovers(tmp_path / "cifar10") == []


@pytest.mark.graph_free
def test_offline_with_an_empty_cache_says_what_to_put_where(tmp_path, monkeypatch):
    monkeypatch.setenv("INT8STORE_OFFLINE", "1")
    with pytest.raises(DatasetNotFoundError, match="INT8STORE_OFFLINE is set") as error:
        read_source("cifar10", cache_dir=tmp_path)
    assert "Put cifar-10-python.tar.gz (170,498,071 bytes" in str(error.value)
    assert str(tmp_path / "cifar10") in str(error.value)


@pytest.mark.graph_free
def test_a_damaged_cached_archive_is_reported(tmp_path, served):
    read_source("cifar10", cache_dir=tmp_path)
    cached = tmp_path / "cifar10" / "cifar-10-python.tar.gz"
    content = bytearray(cached.read_bytes())
    content[len(content) // 2] ^= 0xFF
    cached.write_bytes(bytes(content))
    with pytest.raises(SourceFormatError, match="delete it to download it again") as error:
        read_source("cifar10", cache_dir=tmp_path)
    assert str(cached) in str(error.value)


def test_the_known_archive_is_the_published_one():
    assert cifar10.CIFAR10_ARCHIVE.name == "cifar-10-python.tar.gz"
    assert cifar10.CIFAR10_ARCHIVE.size == 170_498_071
    assert re.fullmatch("[0-9a-f]{64}", cifar10.CIFAR10_ARCHIVE.digest)
    assert cifar10.CIFAR10_MIRRORS == ("https://www.cs.toronto.edu/~kriz/",)


# -- hostile archives ---------------------------------------------------------

def replaced(data, entries=None, body=None, batch="data_batch_3"):
    """The archive's members with one batch's pickle replaced: its ``entries``
    changed, or ``body`` in its place."""
    members = cifar10_members(data)
    rows, labels = data[batch]
    members[batch] = body if body is not None else cifar10_batch_pickle(rows, labels,
                                                                        entries=entries)
    return members


def huge_string_pickle():
    """A batch whose data string announces 2 GiB - 1 bytes, in a few bytes."""
    return (b"\x80\x02}(U\x04dataT" + struct.pack("<i", (1 << 31) - 1) + b"abc")


def global_pickle(module, name):
    return b"\x80\x02}(U\x04datac" + f"{module}\n{name}\n".encode() + b"U\x02ls\x85RU\x06labels]u."


HOSTILE_BATCHES = {
    "data of 3071 bytes an image": (
        lambda d: dict(data=d["data_batch_3"][0][:, :3071]), SourceFormatError,
        r"its data has shape \(4, 3071\), expected \(N, 3072\)"),
    "data already channels last": (
        lambda d: dict(data=d["data_batch_3"][0].reshape(4, 32, 32, 3)), SourceFormatError,
        r"its data has shape \(4, 32, 32, 3\)"),
    "data of int16": (
        lambda d: dict(data=d["data_batch_3"][0].astype(np.int16)), SourceFormatError,
        "its data has dtype int16, expected uint8"),
    "data a list": (lambda d: dict(data=[1, 2, 3]), SourceFormatError, "its data is a list"),
    "no images": (lambda d: dict(data=np.zeros((0, 3072), np.uint8), labels=[]), SourceFormatError,
                  r"holds no image \(its data has shape \(0, 3072\)\); a CIFAR-10 batch holds "
                  "10,000"),
    "a label too few": (lambda d: dict(labels=d["data_batch_3"][1][:-1]), SourceFormatError,
                        "has 4 images but 3 labels"),
    "a label too many": (lambda d: dict(labels=d["data_batch_3"][1] + [0]), SourceFormatError,
                         "has 4 images but 5 labels"),
    "a label of 10": (lambda d: dict(labels=[0, 1, 10, 2]), SourceFormatError,
                      r"holds the label 10, outside 0\.\.9"),
    "a label of -1": (lambda d: dict(labels=[0, 1, -1, 2]), SourceFormatError, "holds the label -1"),
    "labels as text": (lambda d: dict(labels=["0", "1", "2", "3"]), SourceFormatError,
                       "labels are not a list of ints"),
    "an unexpected key": (lambda d: dict(coarse_labels=[0, 0, 0, 0]), SourceFormatError,
                          "holds the key 'coarse_labels'; expected data, labels"),
    "no labels": (lambda d: dict(labels=None), SourceFormatError, "holds no labels"),
    "file names of the wrong count": (lambda d: dict(filenames=["a.png"]), SourceFormatError,
                                      "filenames are not text, one file name an image"),
}


@pytest.mark.graph_free
@pytest.mark.parametrize("case", list(HOSTILE_BATCHES))
def test_a_hostile_batch_is_refused_in_one_line_naming_the_archive_and_member(tmp_path, data,
                                                                             capsys, case):
    entries, kind, message = HOSTILE_BATCHES[case]
    path = write_cifar10_archive(tmp_path / "cifar-10-python.tar.gz",
                                 replaced(data, entries(data)))
    refused_in_one_line(path, "cifar-10-batches-py/data_batch_3", kind, message, capsys)


def refused_in_one_line(path, member, kind, message, capsys, tmp_path=None):
    """``path`` refused by the reader with ``kind`` matching ``message``,
    naming the file (and ``member``), and by the command line in one line."""
    with pytest.raises(kind, match=message) as error:
        read_source(path)
    text = str(error.value)
    assert "\n" not in text and text.startswith(f"{path}:{member}" if member else str(path)), text
    out = path.parent / "out.h5"
    assert main(["convert", str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and not out.exists()


HOSTILE_PICKLES = {
    "a string announcing 2 GiB": (huge_string_pickle(), SizeLimitError,
                                  r"announces 2,147,483,\d{3} bytes but the file holds 18 bytes"),
    "os.system": (global_pickle("os", "system"), UnsafePickleError,
                  "asks for os.system, which is not allowed: only dicts, byte strings, ints, a "
                  "uint8 array and lists are rebuilt"),
    "builtins.eval": (global_pickle("builtins", "eval"), UnsafePickleError, "builtins.eval"),
    "an INST opcode": (b"\x80\x02}(U\x04data(U\x02lsios\nsystem\n", UnsafePickleError,
                       "uses the opcode INST"),
    "protocol 4 framing": (pickle.dumps({"data": 1}, protocol=4), UnsafePickleError,
                           r"the pickle is of protocol 4 \(the opcode FRAME\), where this file's "
                           r"kind of pickle is of protocol 2 at most: was it pickled again\?"),
    "framing in protocol 2": (b"\x80\x02\x95" + bytes(8), UnsafePickleError,
                              "uses the opcode FRAME where this file's kind of pickle has none: "
                              "it is damaged"),
    "a float": (b"\x80\x02}(U\x06labels]G?\xf0\x00\x00\x00\x00\x00\x00au.", UnsafePickleError,
                "uses the opcode BINFLOAT"),
    "a byte that is no opcode": (b"\x80\x02}\xff", UnsafePickleError, "the byte 0xff, which is no pickle"),
    "a list, not a dict": (python2_pickle_of([1, 2]), SourceFormatError, "holds a list, expected a dict"),
    "cut short in its data": (cifar10_batch_pickle(*fake_cifar10()["data_batch_3"])[:5000],
                              SizeLimitError, "announces 12,[0-9]{3} bytes but the file holds 5,000"),
    "cut short at its end": (cifar10_batch_pickle(*fake_cifar10()["data_batch_3"])[:-20],
                             SourceFormatError, "truncated"),
    "a numpy array of objects": (
        b"\x80\x02}(U\x04datacnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85U\x01b"
        b"\x87R(K\x01K\x01\x85cnumpy\ndtype\nU\x02O8K\x00K\x01\x87R(K\x03U\x01|NNNJ\xff\xff\xff\xff"
        b"J\xff\xff\xff\xffK\x3ftb\x89]tbu.", SourceFormatError, "Python objects"),
}


@pytest.mark.graph_free
@pytest.mark.parametrize("case", list(HOSTILE_PICKLES))
def test_a_hostile_pickle_is_refused_in_one_line_naming_the_archive_and_member(tmp_path, data,
                                                                              capsys, case):
    body, kind, message = HOSTILE_PICKLES[case]
    path = write_cifar10_archive(tmp_path / "cifar-10-python.tar.gz", replaced(data, body=body))
    tracemalloc.start()
    try:
        with pytest.raises(kind):
            read_source(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20  # nothing the pickle announced was allocated
    refused_in_one_line(path, "cifar-10-batches-py/data_batch_3", kind, message, capsys)


HOSTILE_META = {
    "nine names": (cifar10_meta_pickle(CIFAR10_CLASSES[:9]), "label_names are not a list of 10 names"),
    "another image size": (python2_pickle_of({"label_names": CIFAR10_CLASSES, "num_vis": 1024}),
                           "says num_vis=1024, not 3072"),
    "num_vis an array": (python2_pickle_of({"label_names": CIFAR10_CLASSES,
                                            "num_vis": np.array([1, 2], np.uint8)}),
                         r"says num_vis=array\(\[1, 2\], dtype=uint8\), not 3072"),
    "an unexpected key": (python2_pickle_of({"label_names": CIFAR10_CLASSES, "fine_names": []}),
                          "holds the key 'fine_names'"),
    "os.system": (global_pickle("os", "system"), "asks for os.system"),
}


@pytest.mark.graph_free
@pytest.mark.parametrize("case", list(HOSTILE_META))
def test_a_hostile_batches_meta_is_refused_in_one_line(tmp_path, data, capsys, case):
    body, message = HOSTILE_META[case]
    members = cifar10_members(data)
    members["batches.meta"] = body
    path = write_cifar10_archive(tmp_path / "cifar-10-python.tar.gz", members)
    refused_in_one_line(path, "cifar-10-batches-py/batches.meta", SourceFormatError, message, capsys)


@pytest.mark.graph_free
def test_a_hostile_batch_in_the_folder_is_refused_naming_the_file(tmp_path, data):
    folder = write_cifar10_folder(tmp_path / "cifar-10-batches-py",
                                  replaced(data, body=global_pickle("os", "system")))
    with pytest.raises(UnsafePickleError, match=re.escape(f"{folder / 'data_batch_3'}: the pickle "
                                                          "asks for os.system")):
        read_source(folder)


def link(name, target, kind=tarfile.SYMTYPE):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def special(name, kind):
    info = tarfile.TarInfo(name)
    info.type = kind
    return info


HOSTILE_MEMBERS = {
    "a symbolic link": ([link("cifar-10-batches-py/extra", "/etc/passwd")],
                        "cifar-10-batches-py/extra", "is a symbolic link to /etc/passwd"),
    "a hard link": ([link("cifar-10-batches-py/extra", "cifar-10-batches-py/test_batch",
                          tarfile.LNKTYPE)], "cifar-10-batches-py/extra", "is a hard link"),
    "a '..' name": ([special("cifar-10-batches-py/../../evil", tarfile.REGTYPE)],
                    "cifar-10-batches-py/../../evil", "absolute path or '..'"),
    "an absolute name": ([special("/tmp/evil", tarfile.REGTYPE)], "/tmp/evil",
                         "absolute path or '..'"),
    "a device": ([special("cifar-10-batches-py/dev", tarfile.CHRTYPE)],
                 "cifar-10-batches-py/dev", "is not a regular file"),
    "a pipe": ([special("cifar-10-batches-py/fifo", tarfile.FIFOTYPE)],
               "cifar-10-batches-py/fifo", "is not a regular file"),
}


@pytest.mark.graph_free
@pytest.mark.parametrize("case", list(HOSTILE_MEMBERS))
def test_a_hostile_member_is_refused_in_one_line(tmp_path, data, capsys, case):
    extra, member, message = HOSTILE_MEMBERS[case]
    path = write_cifar10_archive(tmp_path / "cifar-10-python.tar.gz", cifar10_members(data),
                                 extra=extra)
    refused_in_one_line(path, member, SourceFormatError, re.escape(message), capsys)


@pytest.mark.graph_free
def test_a_symbolic_link_in_place_of_a_batch_is_refused(tmp_path, data, capsys):
    members = cifar10_members(data)
    del members["test_batch"]
    path = write_cifar10_archive(tmp_path / "cifar-10-python.tar.gz", members,
                                 extra=[link("cifar-10-batches-py/test_batch", "data_batch_1")])
    refused_in_one_line(path, "cifar-10-batches-py/test_batch", SourceFormatError,
                        "is a symbolic link", capsys)


@pytest.mark.graph_free
def test_missing_and_repeated_batches_are_named(tmp_path, data, capsys):
    members = cifar10_members(data)
    del members["data_batch_4"], members["test_batch"]
    path = write_cifar10_archive(tmp_path / "cifar-10-python.tar.gz", members)
    refused_in_one_line(path, None, SourceFormatError,
                        f"^{re.escape(str(path))}:cifar-10-batches-py/: holds no data_batch_4, "
                        "test_batch; CIFAR-10", capsys)  # (the archive named once)
    again = write_cifar10_archive(tmp_path / "twice.tar.gz", cifar10_members(data),
                                  extra=[special("cifar-10-batches-py/data_batch_1", tarfile.REGTYPE)])
    refused_in_one_line(again, "cifar-10-batches-py/data_batch_1", SourceFormatError,
                        "a second data_batch_1", capsys)


@pytest.mark.graph_free
def test_a_member_larger_than_any_of_cifar10_is_refused_before_it_is_unpacked(tmp_path, data,
                                                                               capsys):
    # 1 GiB of zeros in 4.6 MB: within deflate's ratio, beyond any CIFAR-10 member
    members = {f"cifar-10-batches-py/{n}": b for n, b in cifar10_members(data).items()}
    path = tar_gz_with_zeros(tmp_path / "cifar-10-python.tar.gz", members,
                             "cifar-10-batches-py/zeros", 1 << 30)
    tracemalloc.start()
    try:
        with pytest.raises(SizeLimitError, match="is 1.0 GiB, more than any member of CIFAR-10"):
            read_source(path)
        assert tracemalloc.get_traced_memory()[1] < 16 << 20
    finally:
        tracemalloc.stop()
    refused_in_one_line(path, "cifar-10-batches-py/zeros", SizeLimitError, "1.0 GiB", capsys)


@pytest.mark.graph_free
def test_a_member_announcing_more_than_the_archive_can_hold_is_refused(tmp_path, capsys):
    info = tarfile.TarInfo("cifar-10-batches-py/data_batch_1")
    info.size = 1 << 40  # a header, and nothing behind it
    path = tmp_path / "cifar-10-python.tar.gz"
    path.write_bytes(gzip.compress(info.tobuf(format=tarfile.GNU_FORMAT)))
    refused_in_one_line(path, "cifar-10-batches-py/data_batch_1", SizeLimitError,
                        "its header announces 1,099,511,627,776 bytes but the file holds", capsys)
    # Members each within the archive's bytes, together beyond them:
    with tarfile.open(path, "w") as archive:
        for name in ("readme.html", "readme.txt"):
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = 3000
            archive.addfile(info, io.BytesIO(b"\0" * 3000))
        header = tarfile.TarInfo("cifar-10-batches-py/data_batch_2")
        header.size = 5000
        archive.fileobj.write(header.tobuf(format=tarfile.GNU_FORMAT))
        archive.offset += tarfile.BLOCKSIZE
    refused_in_one_line(path, None, SizeLimitError,
                        "the headers of its members up to cifar-10-batches-py/data_batch_2 "
                        "announce 11,000 bytes but the file holds", capsys)
