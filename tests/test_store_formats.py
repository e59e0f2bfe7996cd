"""Store format 3 (XXH3-128 per chunk) beside format 2 (SHA-256 per chunk):
a format-2 store written by int8store 0.1.0 still loads and verifies, a
format-3 store names the chunk where a bit flipped, and ``verify`` says how
fast it checked."""

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from archives import fake_mnist, flip_bit, write_mnist_idx_folder
from int8store import StoreChecksumError, load_data, open_store
from int8store.store.checksums import chunk_digest
from int8store.cli import main
from int8store.converter import convert

FORMAT2 = Path(__file__).resolve().parent / "data" / "format2-digits.h5"


def test_a_format2_store_written_before_format3_loads_and_verifies(tmp_path, capsys):
    store = open_store(FORMAT2)  # every chunk checked, with SHA-256
    assert store.provenance["format_version"] == 2 and store.chunk_checksum == "sha256"
    assert store.provenance["writer"] == "int8store 0.1.0"
    assert store.splits == {"train": 200, "valid": 50, "test": 50}
    (train_x, train_y), _, (test_x, test_y) = load_data(FORMAT2, dtype="float32")
    assert train_y.get_value(borrow=True)[:10].tolist() == list(range(10))  # digits' first labels
    assert test_x.get_value().shape == (50, 64)
    assert main(["verify", str(FORMAT2)]) == 0
    assert "SHA-256 per chunk" in capsys.readouterr().out
    # A flipped bit in a format-2 chunk is still caught, by SHA-256.
    damaged = tmp_path / "damaged.h5"
    shutil.copy(FORMAT2, damaged)
    offset = store.manifest["splits"][0]["x"]["chunks"][0][0]
    flip_bit(damaged, offset + 100, 4)
    with pytest.raises(StoreChecksumError, match=r"split 'train' chunk 0 \(examples 0 to 199\) "
                                                 "does not match its checksum"):
        open_store(damaged)


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "m.h5"
    convert(write_mnist_idx_folder(tmp_path / "idx", fake_mnist(n_train=3000, n_test=10, side=28)), path)
    return path


def test_format3_checks_each_chunk_with_xxh3_128(store):
    s = open_store(store)
    assert s.provenance["format_version"] == 3 and s.manifest["chunk_checksum"] == "xxh3_128"
    layout = train_entry(s)
    with open(store, "rb") as f:
        for offset, nbytes, digest in layout["x"]["chunks"] + layout["y"]:
            f.seek(offset)
            assert chunk_digest("xxh3_128", f.read(nbytes)) == digest
    assert len(layout["x"]["chunks"]) >= 2  # the flip below is in a chunk other than the first


def test_a_flipped_bit_in_a_format3_store_names_its_chunk(store, capsys):
    s = open_store(store)
    chunks, rows = train_entry(s)["x"]["chunks"], train_entry(s)["x"]["chunk_rows"]
    flip_bit(store, chunks[1][0] + 12345 % chunks[1][1], 4)
    assert main(["verify", str(store)]) == 2
    err = capsys.readouterr().err
    last = min(2 * rows, s.splits["train"]) - 1
    assert f"split 'train' chunk 1 (examples {rows} to {last}) does not match its " \
           "checksum: the file is damaged" in err and str(store) in err
    with pytest.raises(StoreChecksumError, match="split 'train' chunk 1"):
        open_store(store, verify=False).read_rows("train", rows, rows + 1,
                                                  np.empty((1, 28, 28), np.int8))


def test_verify_reports_its_speed(store, capsys):
    assert main(["verify", str(store)]) == 0
    out = capsys.readouterr().out
    assert f"{store.stat().st_size:,} bytes in " in out and "B/s, XXH3-128 per chunk" in out
    assert re.search(r" s, \d+\.\d+ [GM]B/s, XXH3", out), out
    from int8store.cli import _rate
    assert (_rate(2.5e9), _rate(3.4e6)) == ("2.50 GB/s", "3.4 MB/s")


@pytest.mark.parametrize("workers", [1, 3])
def test_verify_in_threads_checks_every_chunk(store, workers, monkeypatch):
    s = open_store(store, verify=False)
    checked = []
    original = s._reader.read_range

    def recording(f, offset, views, digest, what):
        checked.append(offset)
        return original(f, offset, views, digest, what)

    monkeypatch.setattr(s._reader, "read_range", recording)
    s.verify(workers=workers)
    expected = [c[0] for split in s.manifest["splits"] for c in split["x"]["chunks"] + split["y"]]
    assert sorted(checked) == sorted(expected)


def train_entry(store):
    return next(split for split in store.manifest["splits"] if split["name"] == "train")


@pytest.mark.parametrize("mistake", ["wrong dtype", "too few images"])
def test_a_writer_refusing_its_input_names_the_store_and_leaves_nothing(tmp_path, mistake):
    from int8store import StoreFormatError, quantize
    from int8store.store.writer import StoreWriter

    path = tmp_path / "out.h5"
    codes, encoding = quantize(np.zeros((3, 4), np.uint8))
    with pytest.raises(StoreFormatError, match=f"{path}: split 'train': "):
        with StoreWriter(path, encoding, (4,), {"train": np.arange(3)}) as writer:
            writer.append("train", codes.astype(np.int16) if mistake == "wrong dtype" else codes[:2])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["a/b", "", "train\x1b[2J", "t" * 101, ".", "encoding",
                                  "label_names"])
def test_a_writer_refuses_a_split_name_its_reader_would(tmp_path, name):
    """What may name a split is one rule (split_entries.is_split_name), held by
    the writer and the reader alike: a store it writes always opens."""
    from int8store import ArgumentError, quantize
    from int8store.store.writer import StoreWriter

    path = tmp_path / "out.h5"
    # ("." and the root's other groups were h5py's ValueError, "name already
    # exists", where a codebook or class names are written)
    codes, encoding = quantize(np.zeros((3, 4), np.float32) + [0, 0.1, 0.2, 0.3])
    with pytest.raises(ArgumentError, match="a split's name is 1 to 100 printable characters"):
        with StoreWriter(path, encoding, (4,), {name: np.arange(3)},
                         label_names=["a", "b", "c"]) as writer:
            writer.append(name, codes)
    assert list(tmp_path.iterdir()) == []
    with StoreWriter(path, encoding, (4,), {"t" * 100: np.arange(3)}) as writer:
        writer.append("t" * 100, codes)
    assert open_store(path).splits == {"t" * 100: 3}


@pytest.mark.parametrize("shape", [(), (0, 4), (4, -1)])
def test_a_writer_refuses_an_image_shape_its_reader_would(tmp_path, shape):
    # (() was written and published, and open_store refused it; a 0 or a
    # negative size was h5py's ValueError or OverflowError)
    from int8store import ArgumentError, quantize
    from int8store.store.writer import StoreWriter

    _, encoding = quantize(np.zeros(4, np.uint8))
    with pytest.raises(ArgumentError, match=rf"image_shape={re.escape(str(shape))}: expected one "
                                            "or more positive sizes"):
        with StoreWriter(tmp_path / "out.h5", encoding, shape, {"train": np.arange(3)}):
            pass
    assert list(tmp_path.iterdir()) == []


def test_appends_of_any_size_give_the_same_store_and_leave_the_callers_arrays(tmp_path, monkeypatch):
    """Whole chunks are written as they come (no copy), pieces go through
    the writer's chunk buffer: the same chunks either way, and the caller's
    arrays, read-only ones too, are neither written to nor needed writable."""
    from int8store import quantize
    from int8store.store import writer

    monkeypatch.setattr(writer, "CHUNK_BYTES", 40)  # chunks of 10 rows of 4 bytes
    codes, encoding = quantize((np.arange(57 * 4) % 251).astype(np.uint8).reshape(57, 4))
    frozen = np.frombuffer(codes.tobytes(), np.int8).reshape(57, 4)  # read-only
    assert not frozen.flags.writeable
    stores = {}
    for name, pieces in {"at once": [frozen], "whole chunks": np.split(frozen, [10, 20, 50]),
                         "pieces": np.split(frozen, [3, 13, 14, 34])}.items():
        path = tmp_path / f"{name}.h5"
        with writer.StoreWriter(path, encoding, (4,), {"train": np.arange(57)}) as w:
            for piece in pieces:
                w.append("train", piece)
        stores[name] = open_store(path)
    np.testing.assert_array_equal(frozen, codes)
    chunks = {name: train_entry(store)["x"]["chunks"] for name, store in stores.items()}
    assert len(chunks["at once"]) == 6  # 57 rows in chunks of 10: the last one padded
    for name, store in stores.items():
        assert [digest for _, _, digest in chunks[name]] == [d for _, _, d in chunks["at once"]]
        np.testing.assert_array_equal(store.read_split("train")[0].reshape(57, 4), codes)
        store.verify()
