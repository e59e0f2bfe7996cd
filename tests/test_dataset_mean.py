"""normalize="dataset" on a store: the training split's mean comes from the
histogram of its codes the manifest records, so streaming from a store reads
no image before the first shard is asked for, and the mean is, bit for bit,
the one counting the codes gives (every encoding: affine with divisor 256 or
255, a codebook). A store written before the histogram was recorded still
gives it, by reading the split."""

import numpy as np
import pytest

from archives import rewrite_manifest
from int8store import load_data, load_streams, open_store, quantize
from int8store.codes.histogram import code_counts, code_sum, mean_of_code_counts
from int8store.dataset.symbolic import normalization_mean
from int8store.store.mapped import MappedSplit
from int8store.store.reader import Store
from int8store.store.split_entries import CODE_COUNTS
from int8store.store.writer import StoreWriter

SIZES = {"train": 300, "valid": 40, "test": 40}


def values(kind, rng):
    """Images whose quantize() gives the encoding ``kind``."""
    shape = (sum(SIZES.values()), 6, 5)
    if kind == "uint8":
        return rng.integers(0, 256, shape, dtype=np.uint8)
    if kind == "k/255":
        return (rng.integers(0, 256, shape) / 255).astype(np.float32)
    if kind == "k/256":
        return (rng.integers(0, 256, shape) / 256).astype(np.float32)
    levels = np.sort(rng.standard_normal(200)) * 3.7 + 0.1  # 200 values of no common scale
    return levels[rng.integers(0, 200, shape)].astype(np.float32)


def write_store(path, kind, seed=0):
    codes, encoding = quantize(values(kind, np.random.default_rng(seed)))
    labels = {name: np.arange(n) % 10 for name, n in SIZES.items()}
    with StoreWriter(path, encoding, codes.shape[1:], labels, source=kind) as writer:
        start = 0
        for name, n in SIZES.items():
            writer.append(name, codes[start:start + n])
            start += n
    return codes[:SIZES["train"]], encoding


KINDS = ["uint8", "k/255", "k/256", "codebook"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_recorded_histogram_gives_the_mean_of_the_codes_exactly(tmp_path, kind):
    path = tmp_path / "s.h5"
    codes, encoding = write_store(path, kind)
    store = open_store(path)
    assert store.encoding.is_codebook == (kind == "codebook")
    if kind != "codebook":
        assert store.encoding.divisor == (255 if kind == "k/255" else 256)
    recorded = store.recorded_code_counts("train")
    np.testing.assert_array_equal(recorded, code_counts(codes))
    np.testing.assert_array_equal(recorded, store.count_codes("train"))
    assert store.code_means["train"] == code_sum(recorded) / codes.size
    from_manifest = mean_of_code_counts(recorded, store.encoding)
    assert from_manifest == normalization_mean(codes, encoding)  # ==: the same float64
    (resident, _), _, _ = load_data(path, normalize="dataset")
    assert resident.dataset.dataset_mean == from_manifest


def test_counting_in_pieces_and_in_pairs_is_exact():
    rng = np.random.default_rng(3)
    for size in (0, 1, 2, 3, (1 << 18) - 1, 1 << 18, (1 << 18) + 1, 700_001):
        codes = rng.integers(-128, 128, size, dtype=np.int8)
        expected = np.bincount(codes.view(np.uint8), minlength=256)
        np.testing.assert_array_equal(code_counts(codes), expected)
        assert code_sum(expected) == int(codes.sum(dtype=np.int64))


def counting_reads(monkeypatch):
    """A list that records each stored chunk of images read or checked."""
    reads = []
    read_range = Store._read_range
    lend = MappedSplit.rows

    def counted_range(self, f, offset, views, digest, what):
        if "chunk" in what:
            reads.append(what)
        return read_range(self, f, offset, views, digest, what)

    def counted_lend(self, start, stop, mark=None):
        reads.append(f"{self.name} rows {start} to {stop} lent")
        return lend(self, start, stop, mark)

    monkeypatch.setattr(Store, "_read_range", counted_range)
    monkeypatch.setattr(MappedSplit, "rows", counted_lend)
    return reads


@pytest.mark.parametrize("kind", ["uint8", "codebook"])
def test_load_streams_reads_no_image_before_the_first_shard(tmp_path, monkeypatch, kind):
    path = tmp_path / "s.h5"
    codes, encoding = write_store(path, kind)
    reads = counting_reads(monkeypatch)
    train, valid, _ = load_streams(path, max_device_bytes=50 * 34, batch_size=10,
                                   normalize="dataset", seed=1)
    assert train.n_shards > 1 and reads == []  # labels only, and the manifest
    assert train.dataset.dataset_mean == valid.dataset.dataset_mean \
        == normalization_mean(codes, encoding)
    with train.epoch(0) as shards:
        next(shards)
    assert reads  # (the count sees reads: the first shard's)
    train.close()


def test_a_store_without_the_histogram_is_read_for_its_mean(tmp_path, monkeypatch):
    path = tmp_path / "s.h5"
    codes, encoding = write_store(path, "codebook")
    rewrite_manifest(path, lambda m: [split.pop(CODE_COUNTS) for split in m["splits"]])
    store = open_store(path)
    assert store.recorded_code_counts("train") is None
    reads = counting_reads(monkeypatch)
    train, _, _ = load_streams(path, max_device_bytes=50 * 34, batch_size=10, normalize="dataset")
    assert any("'train' chunk" in what for what in reads)  # read through once, at start
    assert train.dataset.dataset_mean == normalization_mean(codes, encoding)
    train.close()
