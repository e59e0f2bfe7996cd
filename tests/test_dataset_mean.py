"""normalize="dataset" on a store: the training split's mean comes from the
histogram of its codes the manifest records, so streaming from a store reads
no image before the first shard is asked for, and the mean is, bit for bit,
the one counting the codes gives (every encoding: affine with divisor 256 or
255, a codebook). A store written before the histogram was recorded still
gives it, by reading the split. Images with a channel axis have their
histogram recorded channel by channel too, which gives each channel's mean
and standard deviation (numpy's, to the last bits)."""

import numpy as np
import pytest

from archives import rewrite_manifest
from int8store import load_data, load_streams, open_store, quantize
from int8store.codes.histogram import (channel_code_counts, channel_means, channel_stds,
                                       code_counts, code_sum, mean_of_code_counts)
from int8store.dataset.symbolic import normalization_mean
from int8store.store.mapped import MappedSplit
from int8store.store.chunk_reading import ChunkReader
from int8store.store.split_entries import CHANNEL_CODE_COUNTS, CODE_COUNTS
from int8store.store.writer import StoreWriter

SIZES = {"train": 300, "valid": 40, "test": 40}


def values(kind, rng, image_shape=(6, 5)):
    """Images whose quantize() gives the encoding ``kind``."""
    shape = (sum(SIZES.values()),) + image_shape
    if kind == "uint8":
        return rng.integers(0, 256, shape, dtype=np.uint8)
    if kind == "k/255":
        return (rng.integers(0, 256, shape) / 255).astype(np.float32)
    if kind == "k/256":
        return (rng.integers(0, 256, shape) / 256).astype(np.float32)
    levels = np.sort(rng.standard_normal(200)) * 3.7 + 0.1  # 200 values of no common scale
    return levels[rng.integers(0, 200, shape)].astype(np.float32)


def write_store(path, kind, seed=0, image_shape=(6, 5)):
    codes, encoding = quantize(values(kind, np.random.default_rng(seed), image_shape))
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
    read_range = ChunkReader.read_range
    lend = MappedSplit.rows

    def counted_range(self, f, offset, views, digest, what):
        if "chunk" in what:
            reads.append(what)
        return read_range(self, f, offset, views, digest, what)

    def counted_lend(self, start, stop, mark=None):
        reads.append(f"{self.name} rows {start} to {stop} lent")
        return lend(self, start, stop, mark)

    monkeypatch.setattr(ChunkReader, "read_range", counted_range)
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


@pytest.mark.parametrize("kind", KINDS)
def test_the_recorded_channel_histograms_give_each_channels_mean_and_std(tmp_path, kind):
    path = tmp_path / "rgb.h5"
    codes, encoding = write_store(path, kind, image_shape=(6, 5, 3))
    store = open_store(path)
    recorded = store.channel_code_counts("train")
    assert recorded.shape == (3, 256) and recorded.dtype == np.int64
    assert store.manifest["splits"][0][CHANNEL_CODE_COUNTS] == recorded.tolist()
    np.testing.assert_array_equal(recorded, channel_code_counts(codes, 3))
    np.testing.assert_array_equal(recorded, store.count_codes("train", channels=3))
    np.testing.assert_array_equal(recorded.sum(axis=0), store.recorded_code_counts("train"))
    for c in range(3):  # channel c as numpy counts it, and its values
        np.testing.assert_array_equal(recorded[c], np.bincount(codes[..., c].view(np.uint8).ravel(),
                                                               minlength=256))
    x = (encoding.codebook[codes.astype(np.int16) + 128].astype(np.float64) if encoding.is_codebook
         else codes.astype(np.float64) + encoding.offset).reshape(-1, 3)
    means, stds = channel_means(recorded, store.encoding), channel_stds(recorded, store.encoding)
    assert means.dtype == stds.dtype == np.float64 and means.shape == stds.shape == (3,)
    if not encoding.is_codebook:  # integer levels: numpy's float64 sum is exact too
        np.testing.assert_array_equal(means, x.mean(axis=0))
    np.testing.assert_allclose(means, x.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(stds, x.std(axis=0), rtol=1e-12)
    assert (stds > 0).all()


def test_channel_moments_are_exact_where_they_are_easy_to_know():
    from int8store.codes.encoding import Encoding

    # levels 0, 255 (channel 0) and 128 twice (channel 1): means 127.5, 128; stds 127.5, 0
    codes = np.array([[[-128, 0]], [[127, 0]]], dtype=np.int8)  # 2 images of 1x1 pixel, 2 channels
    counts = channel_code_counts(codes, 2)
    assert channel_means(counts, Encoding(128, 256)).tolist() == [127.5, 128.0]
    assert channel_stds(counts, Encoding(128, 256)).tolist() == [127.5, 0.0]
    with pytest.raises(ValueError, match="shape \\(channels, 256\\)"):
        channel_means(counts[0], Encoding(128, 256))


def test_a_store_without_channel_histograms_counts_them_from_its_data(tmp_path):
    path = tmp_path / "rgb.h5"
    codes, _ = write_store(path, "uint8", image_shape=(6, 5, 3))
    rewrite_manifest(path, lambda m: [split.pop(CHANNEL_CODE_COUNTS) for split in m["splits"]])
    store = open_store(path)  # a store written before the field: it loads
    assert CHANNEL_CODE_COUNTS not in store.manifest["splits"][0]
    np.testing.assert_array_equal(store.channel_code_counts("train"), channel_code_counts(codes, 3))


def test_images_without_a_channel_axis_are_one_channel(tmp_path):
    path = tmp_path / "grey.h5"
    codes, _ = write_store(path, "uint8")
    store = open_store(path)
    assert CHANNEL_CODE_COUNTS not in store.manifest["splits"][0]
    np.testing.assert_array_equal(store.channel_code_counts("train"), code_counts(codes)[None])
