"""Shards of a split streamed in its own order, lent without a copy: views of
a store mapped into memory (or of arrays), each chunk checked before its rows
are lent, once an epoch; pages given back after use; the same shards as
copying them."""

import os
import shutil

import numpy as np
import pytest

from archives import fake_mnist, flip_bit, write_mnist_idx_folder
from int8store import ArgumentError, StreamError, load_data, quantize
from int8store.converter import convert
from int8store.store import mapped
from int8store.store.reader import open_store
from int8store.store.writer import StoreWriter
from int8store.streaming.sources import ArrayShards, StoreShards
from int8store.streaming.of_loaded import stream
from int8store.streaming.split import StreamingSplit, worker_threads

pytestmark = pytest.mark.floatx_blind


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "s.h5"
    convert(write_mnist_idx_folder(tmp_path / "idx", fake_mnist(n_train=3000, n_test=10, side=28)), path)
    return path


def lent_stream(path, shard_size=700, **kwargs):
    s = open_store(path, verify=False)
    return StreamingSplit(StoreShards(path, "train"), shard_size, s.encoding, (28, 28), **kwargs)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_shards_in_order_are_views_of_the_file_the_last_filled_from_before(store, prefetch):
    codes, labels = open_store(store).read_split("train")
    split = lent_stream(store, prefetch=prefetch)
    assert split.reader == "views"
    for epoch in (0, 1):
        seen = []
        for shard in split.epoch(epoch):
            held = split.dataset.data.get_value(borrow=True)
            rows = codes[shard.start:shard.start + shard.count].reshape(shard.count, -1)
            np.testing.assert_array_equal(held[:shard.count].reshape(shard.count, -1), rows)
            # the short last shard's other rows: the examples before it, nearest first
            rest = split.shard_size - shard.count
            if rest:
                before = codes[shard.start - rest:shard.start][::-1].reshape(rest, -1)
                np.testing.assert_array_equal(held[shard.count:].reshape(rest, -1), before)
            # a whole shard is the mapped file itself, read-only; the short last one a copy
            assert held.flags.writeable == (shard.count < split.shard_size)
            seen += list(split.y.get_value()[:shard.count])
        assert seen == list(labels)
    split.close()


@pytest.fixture
def hashed(monkeypatch):
    """The chunk checksums computed in mapped files, by name."""
    names = []
    real = mapped.chunk_hasher
    monkeypatch.setattr(mapped, "chunk_hasher", lambda name: names.append(name) or real(name))
    return names


def n_chunks(path):
    return len(open_store(path).manifest["splits"][0]["x"]["chunks"])


def test_chunks_are_checked_each_epoch_when_pages_are_given_back(store, hashed):
    split = lent_stream(store, shard_size=500, prefetch=0)  # shards end inside chunks
    assert split._reader.release_pages  # 5 shards, one held
    for epoch, checked in ((0, 1), (1, 2), (0, 3)):  # epoch 0 again: checked again
        assert sum(s.count for s in split.epoch(epoch)) == 2500
        assert len(hashed) == checked * n_chunks(store)
    split.close()


def test_a_split_kept_mapped_whole_is_checked_once(store, hashed):
    split = lent_stream(store, shard_size=700, prefetch=2)  # 4 shards, 4 held
    assert not split._reader.release_pages
    for epoch in (0, 1, 2):
        assert sum(s.count for s in split.epoch(epoch)) == 2500
    # (the short last shard is copied, its chunk checked as it is read, not here)
    assert len(hashed) == n_chunks(store)
    split.close()


def test_a_file_written_in_place_is_checked_again(store, hashed):
    """The modification time changes: every chunk is checked again, so a
    touched file trains on, and one damaged in place names its chunk."""
    split = lent_stream(store, shard_size=700, prefetch=2)
    assert sum(s.count for s in split.epoch(0)) == 2500
    assert len(hashed) == n_chunks(store)
    os.utime(store, ns=(1, 1))  # touched: same bytes, checked again, accepted
    assert sum(s.count for s in split.epoch(1)) == 2500
    assert len(hashed) == 2 * n_chunks(store)
    flip_bit(store, open_store(store).manifest["splits"][0]["x"]["chunks"][0][0] + 3, 4)
    with pytest.raises(StreamError, match=r"shard 0 .*chunk 0 .*does not match its checksum"):
        next(split.epoch(2))
    split.close()


def test_a_split_kept_whole_is_checked_again_when_its_file_is_written(store, hashed):
    """A split of one shard stays lent in the shared variables pass after
    pass (validation, scored each epoch): a write in place under the run must
    be caught before the next pass reads it, not only at the next lending
    (a helper's damaged validation chunks were scored: 66.97 -> 88.27 %)."""
    split = lent_stream(store, shard_size=2500, prefetch=2)  # the whole split, one shard
    assert split._whole and split.reader == "views"
    for epoch in (0, 1):
        assert sum(s.count for s in split.epoch(epoch)) == 2500
    assert len(hashed) == n_chunks(store)  # checked once while nothing changes
    flip_bit(store, open_store(store).manifest["splits"][0]["x"]["chunks"][1][0] + 3, 4)
    os.utime(store, ns=(1, 1))  # (the write's time, whatever the clock's grain)
    with pytest.raises(StreamError, match=r"train: shard 0 .*chunk 1 .*does not match its checksum"):
        next(split.epoch(2))
    split.close()


def test_a_file_truncated_in_place_is_refused_before_it_is_read(store, tmp_path):
    short = tmp_path / "short.h5"
    shutil.copy(store, short)
    split = lent_stream(short, shard_size=700, prefetch=2)
    assert sum(s.count for s in split.epoch(0)) == 2500
    with open(short, "r+b") as f:  # in place, as a cp over it would
        f.truncate(os.path.getsize(short) // 2)
    with pytest.raises(StreamError, match=r"short\.h5: split 'train': the file was truncated"):
        next(split.epoch(1))
    split.close()


def test_a_damaged_chunk_is_never_lent(store):
    s = open_store(store)
    offset, _, _ = s.manifest["splits"][0]["x"]["chunks"][1]
    flip_bit(store, offset + 5, 4)
    split = lent_stream(store, prefetch=0)
    first_bad = s.manifest["splits"][0]["x"]["chunk_rows"]
    delivered = []
    with pytest.raises(StreamError, match=r"train: shard \d \(examples .*\): .*s\.h5: split 'train' "
                                          r"chunk 1 \(examples .*\) does not match its checksum"):
        for shard in split.epoch(0):
            delivered.append(shard.start + shard.count)
    assert delivered and max(delivered) <= first_bad


def test_a_store_truncated_before_it_is_mapped_is_refused(store, tmp_path):
    short = tmp_path / "short.h5"
    shutil.copy(store, short)
    split = lent_stream(short, prefetch=0)
    os.truncate(short, os.path.getsize(short) - 100_000)
    with pytest.raises(StreamError, match=r"short\.h5: the file changed since the store was opened"):
        next(split.epoch(0))


@pytest.mark.parametrize("prefetch", [0, 2])
def test_a_store_replaced_before_it_is_mapped_is_refused(store, tmp_path, prefetch):
    split = lent_stream(store, prefetch=prefetch)
    other = fake_mnist(n_train=3000, n_test=10, side=28, seed=9)
    convert(write_mnist_idx_folder(tmp_path / "other", other), store, force=True)
    with pytest.raises(StreamError, match="the file changed since the store was opened"):
        next(split.epoch(0))


def test_a_store_replaced_once_mapped_leaves_the_mapping_intact(store, tmp_path):
    codes, _ = open_store(store).read_split("train")
    split = lent_stream(store, prefetch=0)
    first = [np.array(split.dataset.data.get_value(borrow=True)) for _ in split.epoch(0)]
    other = fake_mnist(n_train=3000, n_test=10, side=28, seed=9)
    convert(write_mnist_idx_folder(tmp_path / "other", other), store, force=True)  # atomic
    again = [np.array(split.dataset.data.get_value(borrow=True)) for _ in split.epoch(1)]
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(first[0].reshape(700, 28, 28), codes[:700])


def _rss_file_kb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssFile:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux's /proc")
def test_lent_pages_leave_memory_once_used(tmp_path):
    """A split larger than the shards memory may hold: each shard's pages are
    unmapped once the next replaces it, so the process's resident memory
    grows by a few shards, not by the split."""
    rng = np.random.default_rng(0)
    path = tmp_path / "big.h5"
    n, shard = 20_000, 1_000  # 15.7 MB of images, shards of 0.78 MB
    codes, encoding = quantize(rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
    with StoreWriter(path, encoding, (28, 28), {"train": rng.integers(0, 10, n)}, source="test") as w:
        w.append("train", codes)
    del codes
    split = StreamingSplit(StoreShards(path, "train"), shard, encoding, (28, 28), prefetch=2)
    assert split.reader == "views"
    before, most = _rss_file_kb(), 0
    for epoch in (0, 1):
        for _ in split.epoch(epoch):
            most = max(most, _rss_file_kb() - before)
    split.close()
    assert most < 5 * shard * 784 // 1024  # kB: the shard in use, those in flight, edges


def test_arrays_in_order_are_lent_without_a_copy():
    codes, encoding = quantize(np.arange(60 * 4, dtype=np.uint8).reshape(60, 4))
    split = StreamingSplit(ArrayShards(codes, np.arange(60)), 20, encoding, (4,))
    assert split.reader == "views"
    for shard in split.epoch(0):
        assert np.shares_memory(split.dataset.data.get_value(borrow=True), codes)
    split.close()


def test_stream_over_a_loaded_split_lends_its_rows():
    from int8store import SharedDataset

    codes, encoding = quantize(np.arange(60 * 4, dtype=np.uint8).reshape(60, 4))
    loaded = SharedDataset(codes, np.arange(60), encoding, image_shape=(4,), name="train")
    split = stream(loaded.x, loaded.y, max_device_bytes=20 * 8)
    held = np.asarray(loaded.data.get_value(borrow=True))
    for shard in split.epoch(0):
        value = split.dataset.data.get_value(borrow=True)
        assert np.shares_memory(value, held)
        np.testing.assert_array_equal(value, held[shard.start:shard.start + shard.count])
    split.close()


@pytest.mark.parametrize("seed", [None, 3])
def test_a_split_kept_mapped_whole_is_read_ahead_in_its_first_epoch_only(store, monkeypatch, seed):
    """Once read, every page of a split kept mapped whole is in this process:
    later epochs ask the kernel for nothing."""
    split = lent_stream(store, prefetch=2, seed=seed)  # 4 shards of 700: kept mapped whole
    asked = []
    monkeypatch.setattr(split.source, "read_ahead", lambda start, stop: asked.append(start))
    for epoch in range(3):
        assert sum(s.count for s in split.epoch(epoch)) == 2500
    assert not split._reader.release_pages and len(asked) == 3
    starts = [split.layout.bounds(index, 0)[0] for index in range(4)]  # (the short one drawn)
    assert sorted(asked + [starts[split.shard_order(0)[0]]]) == sorted(starts)


def test_lent_shards_are_read_ahead_by_the_kernel_each_once(store, monkeypatch):
    split = lent_stream(store, shard_size=500, prefetch=2)
    asked = []
    monkeypatch.setattr(split.source, "read_ahead", lambda start, stop: asked.append((start, stop)))
    assert sum(s.count for s in split.epoch(0)) == 2500
    # each shard after the first, then the next epoch's first two, prepared at the end of this one
    assert asked == [(start, start + 500) for start in range(500, 2500, 500)] + [(0, 500), (500, 1000)]
    assert worker_threads() == []  # no worker thread: checked when needed


def test_stream_takes_a_size_as_load_streams_does():
    (x, y), _, _ = load_data("digits")
    split = stream(x, y, "16KiB", batch_size=100)
    try:
        assert split.shard_size == 16384 // 68 // 100 * 100
    finally:
        split.close()
    for bad in ("0", float("nan"), "abc"):
        with pytest.raises(ArgumentError, match="max_device_bytes="):
            stream(x, y, bad, batch_size=100)


def test_stream_refuses_a_float_copy_and_a_batch_size_that_is_no_positive_integer():
    """A split held as floats was refused as if uint8 pixels had been passed
    ("quantized first"), a batch size of 0 divided by zero, and one of -4
    made shards larger than max_device_bytes (review)."""
    (x, y), _, _ = load_data("digits", storage="float")
    with pytest.raises(ArgumentError, match=r"train: held as floats \(storage='float'\)"):
        stream(x, y, "16KiB", batch_size=100)
    (x, y), _, _ = load_data("digits")
    for bad in (0, -4, 2.5):
        with pytest.raises(ArgumentError, match=f"train: batch_size must be a positive integer, "
                                                f"got {bad}"):
            stream(x, y, "16KiB", batch_size=bad)


def test_a_shuffled_split_streams_shuffled_by_its_own_seed():
    """stream() of a split shuffled by load_data's seed streamed it in order
    (review): by default it takes the split's seed, and a seed given wins."""
    (x, y), _, _ = load_data("digits")
    shuffled_x, shuffled_y = x.dataset.shuffle(5).x, x.dataset.shuffle(5).y
    assert stream(shuffled_x, shuffled_y, "16KiB", batch_size=100).seed == 5
    assert stream(shuffled_x, shuffled_y, "16KiB", batch_size=100, seed=2).seed == 2
    assert stream(x, y, "16KiB", batch_size=100).seed is None
