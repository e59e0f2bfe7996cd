"""A manifest is bounded before it is read and checked field by field before
it is used; a signed manifest covers the data through its BLAKE3 digests.

* a (sparse) file whose manifest or user block announces more than
  :data:`~int8store.store.manifest.MAX_USERBLOCK_BYTES` is refused before
  anything that size is read or allocated;
* any malformed entry of a manifest whose SHA-256 matches (as a forger or a
  buggy tool would write it) is a :class:`StoreFormatError` naming the file,
  never a TypeError, KeyError or IndexError;
* chunk bytes swapped under an XXH3-128 checksum rewritten to match (a forged
  collision) pass the plain checks but not ``verify(strong=True)``.
"""

import copy
import json
import re
import shutil
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archives import fake_mnist, rewrite_manifest, write_mnist_idx_folder
from conftest import one_short_line
from int8store import StoreChecksumError, StoreFormatError, open_store
from int8store.cli import describe, main
from int8store.converter import convert
from int8store.store.checksums import chunk_digest
from int8store.store.manifest import MAGIC, MAX_USERBLOCK_BYTES, pack, read_manifest

pytestmark = pytest.mark.graph_free

HUGE = 1 << 39  # 512 GiB: the length line holds at most 12 digits


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A small real store (several chunks a split), built once."""
    from int8store.store import writer

    folder = tmp_path_factory.mktemp("built")
    path = folder / "m.h5"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(writer, "CHUNK_BYTES", 256)  # 16 images a chunk: several chunks a split
        convert(write_mnist_idx_folder(folder / "idx", fake_mnist(n_train=40, n_test=7, side=4)),
                path)
    return path


@pytest.fixture
def store(built, tmp_path):
    path = tmp_path / "m.h5"
    shutil.copy(built, path)
    return path


def traced_peak(function):
    """Run ``function`` under tracemalloc; return what it raised and the peak of traced memory."""
    tracemalloc.start()
    try:
        function()
    except Exception as error:  # noqa: BLE001 (returned for the test to judge)
        raised = error
    else:
        raised = None
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return raised, peak


# -- bounded before it is read ------------------------------------------------

def test_a_sparse_file_announcing_a_huge_manifest_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "sparse.h5"
    with open(path, "wb") as f:
        f.write(MAGIC + b"%d\n{" % HUGE)
        f.truncate(HUGE + 4096)  # sparse: nothing of it is on the disk
    raised, peak = traced_peak(lambda: open_store(path))
    assert isinstance(raised, StoreFormatError), repr(raised)
    assert str(path) in str(raised) and f"{HUGE} bytes" in str(raised)
    assert peak < 1 << 20, f"{peak:,} bytes traced"


def test_a_sparse_file_whose_manifest_announces_a_huge_user_block_is_refused(store):
    manifest = read_manifest(store)
    block = manifest["userblock_size"]
    manifest["userblock_size"] = HUGE
    manifest["file_size"] = HUGE + 4096
    with open(store, "r+b") as f:
        f.write(pack(manifest, block))
        f.truncate(HUGE + 4096)
    raised, peak = traced_peak(lambda: open_store(store))
    assert isinstance(raised, StoreFormatError), repr(raised)
    assert str(store) in str(raised) and f"user block size {HUGE}" in str(raised)
    assert peak < 1 << 20, f"{peak:,} bytes traced"


def test_empty_splits_announcing_huge_images_are_verified_without_allocating_one(tmp_path):
    """Only the manifest holds the image shape of a store whose splits are all
    empty (up to 2**40 bytes an image): verify and read_split allocated a
    chunk of one image each, 512 GiB here ("out of memory", naming no file)."""
    import numpy as np

    from int8store import quantize
    from int8store.store.writer import StoreWriter

    path = tmp_path / "empty.h5"
    codes, encoding = quantize(np.zeros((0, 4, 4), np.uint8))
    with StoreWriter(path, encoding, (4, 4), {"train": [], "test": []}):
        pass
    rewritten(path, lambda m: m.update(image_shape=[1 << 20, 1 << 19]) and None)
    opened = open_store(path, verify=False)
    raised, peak = traced_peak(lambda: (opened.verify(), opened.verify(strong=True),
                                        opened.read_split("train"), opened.count_codes("test")))
    assert raised is None and peak < 1 << 20, (raised, peak)


def test_the_cap_is_well_above_the_manifest_of_a_100_gb_store():
    """The manifest of a 100 GB store of 1 MiB chunks, as the writer lays it out."""
    chunks = 100 * 10 ** 9 // (1 << 20)
    entry = [10 ** 11, 1 << 20, "0" * 32]
    text = json.dumps({"splits": [{"x": {"chunks": [entry] * chunks}}]}, separators=(",", ":"))
    assert len(text) * 8 < MAX_USERBLOCK_BYTES


# -- every field checked before use -------------------------------------------

def train(manifest):
    return manifest["splits"][0]


MALFORMED = {
    "chunk of one number": lambda m: train(m)["x"]["chunks"].__setitem__(0, [5]),
    "chunk that is a number": lambda m: train(m)["x"]["chunks"].__setitem__(0, 5),
    "chunk offset a float": lambda m: train(m)["x"]["chunks"][1].__setitem__(
        0, float(train(m)["x"]["chunks"][1][0])),
    "chunk offset a string": lambda m: train(m)["x"]["chunks"][0].__setitem__(0, "4096"),
    "chunk size a bool": lambda m: train(m)["y"][0].__setitem__(1, True),
    "digest a number": lambda m: train(m)["x"]["chunks"][0].__setitem__(2, 7),
    "digest too short": lambda m: train(m)["y"][0].__setitem__(2, "abc"),
    "digest not hex": lambda m: train(m)["y"][0].__setitem__(2, "g" * 32),
    "labels a dict": lambda m: train(m).__setitem__("y", {"a": 1}),
    "labels of nested lists": lambda m: train(m).__setitem__("y", [[[[1]]]]),
    "count a string": lambda m: train(m).__setitem__("count", "40"),
    "count negative": lambda m: train(m).__setitem__("count", -1),
    "count a bool": lambda m: m["splits"][2].__setitem__("count", True),
    "code mean a string": lambda m: train(m).__setitem__("code_mean", "high"),
    "split a list": lambda m: m["splits"].__setitem__(0, ["train"]),
    "split without x": lambda m: train(m).pop("x"),
    "name a list": lambda m: train(m).__setitem__("name", ["train"]),
    "name with a terminal's escape": lambda m: train(m).__setitem__("name", "train\x1b[2J"),
    "name of a page": lambda m: train(m).__setitem__("name", "t" * 1000),
    "name with a slash": lambda m: train(m).__setitem__("name", "a/b"),
    "name empty": lambda m: train(m).__setitem__("name", ""),
    "splits a dict": lambda m: m.__setitem__("splits", {"train": 1}),
    "format_version a string": lambda m: m.__setitem__("format_version", "3"),
    "format_version a bool": lambda m: m.__setitem__("format_version", True),
    "image shape nested": lambda m: m.__setitem__("image_shape", [[4], 4]),
    "image shape with a zero": lambda m: m.__setitem__("image_shape", [0, 4]),
    "encoding a string": lambda m: m.__setitem__("encoding", "affine"),
    "encoding divisor a string": lambda m: m["encoding"].__setitem__("divisor", "256"),
    # (an OverflowError traceback; 10**40 decoded every code to 0.0 in float32)
    "encoding divisor beyond float64": lambda m: m["encoding"].__setitem__("divisor", 10 ** 400),
    "encoding divisor beyond float32": lambda m: m["encoding"].__setitem__("divisor", 10 ** 40),
    "codebook of garbage": lambda m: m.__setitem__("encoding", {"kind": "codebook", "codebook": [[]],
                                                                "dtype": "<f4", "max_error": 0}),
    "codebook of a huge dtype": lambda m: m.__setitem__("encoding", {
        "kind": "codebook", "codebook": [0] * 256, "dtype": "V1000000000000", "max_error": 0}),
    "codebook of values whose squares overflow": lambda m: m.__setitem__("encoding", {
        "kind": "codebook", "codebook": [1.7e308] * 256, "dtype": "<f8", "max_error": 0}),
    "label names a string": lambda m: m.__setitem__("label_names", "abc"),
    "axes a number": lambda m: m.__setitem__("axes", 3),
    "writer a list": lambda m: m.__setitem__("writer", ["int8store"]),
    "chunk rows beyond the count": lambda m: m["splits"][1].update(count=0, x={"chunk_rows": 1 << 60,
                                                                                "chunks": []}, y=[]),
    "blake3 a number": lambda m: train(m).__setitem__("blake3_rows", 5),
    "blake3 of a store before 0.3.1 a number": lambda m: train(m).update(blake3=5)
        or train(m).pop("blake3_rows"),
    "code counts a string": lambda m: train(m).__setitem__("code_counts", "many"),
    "code counts of 255 bins": lambda m: train(m)["code_counts"].pop(),
    "code counts negative": lambda m: train(m)["code_counts"].__setitem__(0, -1),
    "code counts a float": lambda m: train(m)["code_counts"].__setitem__(
        0, float(train(m)["code_counts"][0])),
    "code counts not summing to the codes": lambda m: train(m)["code_counts"].__setitem__(
        0, train(m)["code_counts"][0] + 1),
    "code counts against the code mean": lambda m: train(m)["code_counts"].__setitem__(
        slice(0, 2), [train(m)["code_counts"][0] - 1, train(m)["code_counts"][1] + 1]),
    "blake3 too short": lambda m: train(m).__setitem__("blake3_rows", "ab"),
    "channel code counts without a channel axis": lambda m: train(m).__setitem__(
        "channel_code_counts", [train(m)["code_counts"]]),
}


@pytest.fixture(scope="module")
def built_rgb(tmp_path_factory):
    """A small store of 4x3 colour images, with their histograms channel by channel."""
    import numpy as np

    from int8store import quantize
    from int8store.store.writer import StoreWriter

    path = tmp_path_factory.mktemp("rgb") / "rgb.h5"
    codes, encoding = quantize(np.random.default_rng(2).integers(0, 256, (30, 4, 3, 3), np.uint8))
    with StoreWriter(path, encoding, (4, 3, 3), {"train": np.arange(30) % 3}) as writer:
        writer.append("train", codes)
    return path


def channels(m):
    return train(m)["channel_code_counts"]


def move_one_count(row):
    """One count of ``row`` moved to the next bin: the row's sum is kept."""
    first = next(i for i, n in enumerate(row) if n)
    row[first] -= 1
    row[(first + 1) % 256] += 1


MALFORMED_CHANNELS = {
    "a string": lambda m: train(m).__setitem__("channel_code_counts", "many"),
    "two channels of three": lambda m: channels(m).pop(),
    "a row of 255 bins": lambda m: channels(m)[1].pop(),
    "a count negative": lambda m: channels(m)[0].__setitem__(0, -1),
    "a count a float": lambda m: channels(m)[0].__setitem__(0, float(channels(m)[0][0])),
    "a row not summing to the channel's codes": lambda m: channels(m)[2].__setitem__(
        5, channels(m)[2][5] + 1),
    "rows against the code counts": lambda m: move_one_count(channels(m)[0]),
}


@pytest.mark.parametrize("edit", list(MALFORMED_CHANNELS))
def test_malformed_channel_code_counts_are_a_format_error_naming_the_file(built_rgb, tmp_path, edit):
    path = tmp_path / "rgb.h5"
    shutil.copy(built_rgb, path)
    assert open_store(path).channel_code_counts("train").shape == (3, 256)
    rewritten(path, lambda m: MALFORMED_CHANNELS[edit](m) and None)
    with pytest.raises(StoreFormatError, match=re.escape(str(path))):
        open_store(path)


def rewritten(path, edit):
    """Rewrite the manifest of the store at ``path`` in place with ``edit``
    (or replace it by what ``edit`` returns), its SHA-256 recomputed."""
    manifest = read_manifest(path)
    block = manifest["userblock_size"]
    edited = edit(manifest)
    with open(path, "r+b") as f:
        f.write(_pack_any(manifest if edited is None else edited, block))


def _pack_any(manifest, block):
    """:func:`pack` for any JSON value (a forger's manifest need not be a dict)."""
    import hashlib

    text = json.dumps(manifest, separators=(",", ":"), sort_keys=True).encode()
    data = MAGIC + b"%d\n" % len(text) + text + b"\n" + hashlib.sha256(text).hexdigest().encode() + b"\n"
    assert len(data) <= block, "the edited manifest outgrew the user block"
    return data + bytes(block - len(data))


@pytest.mark.parametrize("edit", list(MALFORMED))
def test_a_malformed_manifest_is_a_format_error_naming_the_file(store, edit):
    rewritten(store, lambda m: MALFORMED[edit](m) and None)
    with pytest.raises(StoreFormatError, match=re.escape(str(store))) as refusal:
        open_store(store)
    one_short_line(refusal.value, store)


def test_a_manifest_that_is_not_an_object_is_a_format_error(store):
    rewritten(store, lambda m: [m])
    with pytest.raises(StoreFormatError, match=rf"{re.escape(str(store))}: the manifest is "
                                               r"\[.*\], not a JSON object"):
        open_store(store)


def test_the_edits_above_change_a_store_that_opens(store):
    opened = open_store(store)
    assert len(opened.manifest["splits"][0]["x"]["chunks"]) >= 2 and opened.splits["train"] == 34


def _paths(value, here=()):
    """Every place in a JSON value: key paths into dicts and lists."""
    yield here
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, here + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value[:4]):
            yield from _paths(item, here + (index,))


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.integers(-3, 5000)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=70)
    | st.sampled_from(["", "0" * 32, "f" * 64, "xxh3_128", "sha256", "affine", "codebook", "<f4"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8)


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_entry_replaced_by_any_json_is_refused_by_name_or_read(built, tmp_path_factory, data):
    """Any place of a real manifest replaced by any JSON value (or removed), the
    SHA-256 recomputed: the store opens, checks and describes itself, or
    :func:`open_store` raises StoreFormatError naming it in one short line;
    nothing else, and nothing a terminal would take for an escape."""
    path = tmp_path_factory.mktemp("mutated") / "m.h5"
    shutil.copy(built, path)
    manifest = read_manifest(path)
    places = list(_paths(manifest))
    place = data.draw(st.sampled_from(places[1:]), label="place")
    edited = copy.deepcopy(manifest)
    parent = edited
    for step in place[:-1]:
        parent = parent[step]
    if data.draw(st.booleans(), label="remove") and isinstance(parent, dict):
        del parent[place[-1]]
    else:
        parent[place[-1]] = data.draw(_JSON, label="value")
    block = manifest["userblock_size"]
    with open(path, "r+b") as f:
        f.write(_pack_any(edited, block))
    try:
        text = describe(open_store(path).path)
    except StoreFormatError as error:
        one_short_line(error, path)
    else:
        assert all(line.isprintable() for line in text.splitlines()), text


# -- strong digests -----------------------------------------------------------

def forge_collision(path, split=0, chunk=0):
    """Replace a chunk's bytes by others and rewrite only its XXH3-128 in the
    manifest (as a forged collision would leave it): the BLAKE3 digests stay."""
    manifest = read_manifest(path)
    entry = manifest["splits"][split]["x"]["chunks"][chunk]
    offset, nbytes, _ = entry
    with open(path, "r+b") as f:
        f.seek(offset)
        forged = bytes(255 - b for b in f.read(nbytes))
        f.seek(offset)
        f.write(forged)
    entry[2] = chunk_digest("xxh3_128", forged)
    with open(path, "r+b") as f:
        f.write(pack(manifest, manifest["userblock_size"]))


def test_a_forged_collision_passes_xxh3_but_not_the_strong_check(store, capsys):
    forge_collision(store, split=0, chunk=1)
    opened = open_store(store)  # every XXH3-128 checksum matches
    opened.verify()
    with pytest.raises(StoreChecksumError, match=rf"{re.escape(str(store))}: split 'train'.*BLAKE3"):
        opened.verify(strong=True)
    assert main(["verify", str(store)]) == 0
    assert main(["verify", "--strong", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "split 'train'" in err and "BLAKE3" in err


def test_each_split_records_the_blake3_of_its_examples_then_its_labels(store, capsys):
    """The digest a split held anywhere has (split_digest): the last chunk's
    padding left out, so that a run resumed held whole from a stream agrees."""
    import blake3

    from int8store.store.checksums import split_digest

    opened = open_store(store)
    padded = 0
    with open(store, "rb") as f:
        for split in opened.manifest["splits"]:
            hasher = blake3.blake3()
            row_bytes = split["x"]["chunks"][0][1] // split["x"]["chunk_rows"]
            left = split["count"] * row_bytes
            for offset, nbytes, _ in split["x"]["chunks"]:
                f.seek(offset)
                hasher.update(f.read(min(nbytes, left)))
                padded += nbytes > left
                left -= nbytes
            f.seek(split["y"][0][0])
            hasher.update(f.read(split["y"][0][1]))
            assert split["blake3_rows"] == hasher.hexdigest() and "blake3" not in split
            codes, labels = opened.read_split(split["name"])
            assert split_digest(codes, labels) == hasher.hexdigest()
            assert opened.split_digest(split["name"]) == hasher.hexdigest()
    assert padded  # (a split whose last chunk is padded was among them)
    assert opened.verify(strong=True)[-1] == "test/y"
    # A split of no example (the writer takes one): the digest of nothing,
    # where a cast of the empty codes raised a TypeError (review)
    assert split_digest(np.zeros((0, 3, 3), np.int8), np.zeros(0, np.int32)) \
        == blake3.blake3().hexdigest()
    assert main(["verify", "--strong", str(store)]) == 0
    assert "BLAKE3 per split" in capsys.readouterr().out


def as_before_0_3_1(path):
    """Give each split the digest stores before 0.3.1 recorded: BLAKE3 of the
    stored chunks whole, the last one's padding included, then the labels."""
    import blake3

    def padded(manifest):
        with open(path, "rb") as f:
            for split in manifest["splits"]:
                hasher = blake3.blake3()
                for offset, nbytes, _ in split["x"]["chunks"] + split["y"]:
                    f.seek(offset)
                    hasher.update(f.read(nbytes))
                del split["blake3_rows"]
                split["blake3"] = hasher.hexdigest()
    rewrite_manifest(path, padded)


def test_a_store_from_before_0_3_1_is_checked_as_it_was_written(store):
    as_before_0_3_1(store)
    opened = open_store(store)
    assert opened.verify(strong=True)[-1] == "test/y"
    recorded = opened.manifest["splits"][0]["blake3"]
    assert opened.split_digest("train") == recorded  # what its runs' checkpoints hold
    forge_collision(store, split=0, chunk=1)
    with pytest.raises(StoreChecksumError, match="split 'train'.*BLAKE3"):
        open_store(store).verify(strong=True)


def test_a_store_without_strong_digests_still_reads_and_is_told_to_convert_again(store, capsys):
    rewrite_manifest(store, lambda m: [split.pop("blake3_rows") for split in m["splits"]])
    opened = open_store(store)  # a format-3 store written before strong digests
    assert opened.verify()[-1] == "test/y"
    with pytest.raises(StoreFormatError, match="predates strong digests.*convert it again"):
        opened.verify(strong=True)
    assert main(["verify", "--strong", str(store)]) == 2
    assert "predates strong digests" in capsys.readouterr().err


def test_a_split_stripped_of_its_digest_is_not_verified_strongly(store):
    rewrite_manifest(store, lambda m: m["splits"][1].pop("blake3_rows"))
    with pytest.raises(StoreFormatError, match="split 'valid' has no BLAKE3 digest"):
        open_store(store).verify(strong=True)


def test_a_manifest_nested_deeper_than_json_can_parse_is_a_format_error(store):
    import hashlib

    text = b"[" * 100_000 + b"]" * 100_000
    block = MAGIC + b"%d\n" % len(text) + text + b"\n" + hashlib.sha256(text).hexdigest().encode() + b"\n"
    with open(store, "r+b") as f:
        f.write(block)
    with pytest.raises(StoreFormatError, match=rf"{re.escape(str(store))}: the manifest is not JSON"):
        open_store(store)


def test_a_store_whose_manifest_would_pass_the_cap_is_refused_before_writing(tmp_path, monkeypatch):
    from int8store.store import writer

    monkeypatch.setattr(writer, "MAX_USERBLOCK_BYTES", 2048)  # below the smallest block
    out = tmp_path / "out" / "m.h5"
    out.parent.mkdir()
    with pytest.raises(StoreFormatError, match=rf"{re.escape(str(out))}: a store of .* chunks needs a "
                                               r"manifest .* convert the source in parts"):
        convert(write_mnist_idx_folder(tmp_path / "idx", fake_mnist(n_train=3000, side=28)), out)
    assert list(out.parent.iterdir()) == []
