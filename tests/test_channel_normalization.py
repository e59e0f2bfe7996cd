"""Per-channel normalization in the graph: (x - mean_c) / 128 ("channel")
and (x - mean_c) * (1 / std_c) ("standard"), each channel's statistics
counted exactly from the codes (the training split's for every split), the
float32 values those of numpy's arithmetic on the same float32 operands, in
C and JAX modes, held whole, as a float copy and streamed."""

import importlib.util

import numpy as np
import pytest

from int8store import (ArgumentError, SharedDataset, StreamingSplit, dequantize, function_mode,
                       place, quantize, tensor_library)
from int8store.codes.channels import ChannelStatistics
from int8store.codes.histogram import channel_code_counts
from int8store.streaming.sources import ArrayShards

has_jax = importlib.util.find_spec("jax") is not None
MODES = ["c", pytest.param("jax", marks=pytest.mark.skipif(
    not has_jax, reason="JAX is not installed in this environment"))]
theano = tensor_library()
T = theano.tensor


def colour_images(n=60, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (n, 4, 5, 3), dtype=np.uint8)
    images[..., 1] //= 4  # channels of different spreads and means
    return images, rng.integers(0, 10, n)


def expected(images, normalize, mean, std):
    """numpy's float32 arithmetic: (level - mean32) / 128, or times the
    reciprocal of std rounded to float32."""
    centred = images.reshape(len(images), -1, 3).astype(np.float32) - mean.astype(np.float32)
    if normalize == "channel":
        return (centred / np.float32(128)).reshape(len(images), -1)
    return (centred * (1 / std).astype(np.float32)).reshape(len(images), -1)


def test_statistics_are_each_channels_counted_exactly():
    images, _ = colour_images()
    codes, encoding = quantize(images)
    stats = ChannelStatistics.of(codes, encoding, 3)
    pixels = images.reshape(-1, 3).astype(np.float64)
    assert np.allclose(stats.mean, pixels.mean(axis=0), rtol=0, atol=1e-12)
    assert np.allclose(stats.std, pixels.std(axis=0), rtol=0, atol=1e-12)
    # counted in pieces, the histograms add up
    assert (channel_code_counts(codes[:20], 3) + channel_code_counts(codes[20:], 3)
            == channel_code_counts(codes, 3)).all()
    constant = ChannelStatistics.of(np.zeros((2, 6), np.int8), encoding, 3)
    assert constant.std == (1.0, 1.0, 1.0)  # a constant channel is centred only
    with pytest.raises(ArgumentError, match="do not split into 3 channels"):
        channel_code_counts(np.zeros(7, np.int8), 3)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("normalize", ["channel", "standard"])
def test_minibatches_hold_numpys_float32_values(mode, normalize):
    images, labels = colour_images()
    split = SharedDataset.from_arrays(images, labels, name="train", dtype="float32",
                                      normalize=normalize)
    if mode == "jax":
        place([split], "jax")
    pixels = images.reshape(-1, 3).astype(np.float64)
    want = expected(images, normalize, pixels.mean(axis=0), pixels.std(axis=0))
    index = T.lscalar()
    classic = theano.function([index], split.x[index * 20:(index + 1) * 20],
                              mode=function_mode(mode))
    taken = theano.function([index], split.minibatch(index, 20)[0], mode=function_mode(mode))
    for i in range(3):
        assert (np.asarray(classic(i)) == want[i * 20:(i + 1) * 20]).all()
        assert (np.asarray(taken(i)) == want[i * 20:(i + 1) * 20]).all()
    assert (split.x.get_value() == want).all()
    copy = SharedDataset.from_arrays(images, labels, dtype="float32", normalize=normalize,
                                     storage="float")
    assert (copy.x.get_value() == want).all()


@pytest.mark.parametrize("normalize", ["channel", "standard"])
def test_pixels_taken_from_a_view_hold_the_values_of_the_whole_rows(normalize):
    """``x[rows, pixels]`` once took the pixels off the codes before the
    channels' statistics were laid along them: columns 1..3 of an RGB row
    were normalized as channels 0..2 (PyTensor), or failed an assertion
    naming nothing (Aesara) (review)."""
    images, labels = colour_images()
    split = SharedDataset.from_arrays(images, labels, name="train", dtype="float32",
                                      normalize=normalize)
    whole = split.x.get_value()
    for key in [(slice(0, 20), slice(1, 4)), (slice(None), 4), (7, slice(2, 9)), (Ellipsis, 5),
                (None, slice(0, 3)), (slice(5, 9),)]:
        # (to float32's rounding: on a column, PyTensor rearranges (x - m) * r
        # into x * r - m * r; the wrong statistics were off by up to 16)
        np.testing.assert_allclose(split.x[key].eval(), whole[key], rtol=0, atol=4e-7)


def test_every_split_takes_the_training_splits_statistics(tmp_path):
    from int8store import load_splits

    train, labels = colour_images(60, seed=1)
    test, _ = colour_images(30, seed=2)
    path = tmp_path / "colour.npz"
    np.savez(path, x_train=train, y_train=labels, x_test=test, y_test=labels[:30])
    splits = load_splits(str(path), normalize="standard", valid_size=10, valid_seed=0)
    stats = splits["train"].channel_statistics
    assert splits["valid"].channel_statistics == stats == splits["test"].channel_statistics
    pixels = splits["train"].encoding.levels(splits["train"].rows()).reshape(-1, 3)
    assert np.allclose(stats.mean, pixels.mean(axis=0), rtol=0, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_a_stream_normalizes_as_the_split_held_whole(mode):
    images, labels = colour_images(70)
    codes, encoding = quantize(images)
    whole = SharedDataset(codes, labels, encoding, normalize="standard", dtype="float32")
    stream = StreamingSplit(ArrayShards(codes, labels), 30, encoding, (4, 5, 3),
                            normalize="standard", dtype="float32", mode=mode)
    assert stream.dataset.channel_statistics == whole.channel_statistics
    index = T.lscalar()
    f = theano.function([index], stream.x[index * 10:(index + 1) * 10], mode=function_mode(mode))
    want, seen = whole.x.get_value(), []
    for number, i, _ in stream.minibatches(0, 10):
        seen.append(np.asarray(f(i)))
    stream.close()
    assert (np.concatenate(seen) == want[:len(seen) * 10]).all()


def test_per_channel_normalization_needs_its_statistics():
    images, labels = colour_images(10)
    codes, encoding = quantize(images)
    with pytest.raises(ArgumentError, match="needs channel_statistics"):
        dequantize(T.TensorType("int8", shape=(None, 60))(), encoding, "standard")
    with pytest.raises(ArgumentError, match="static width"):
        dequantize(T.matrix(dtype="int8"), encoding, "channel",
                   channel_statistics=ChannelStatistics.of(codes, encoding, 3))


def test_a_store_streams_with_the_statistics_its_manifest_records(tmp_path):
    from int8store import convert, load_splits, load_streams, open_store

    images, labels = colour_images(80, seed=3)
    path = tmp_path / "colour.npz"
    np.savez(path, x_train=images, y_train=labels, x_test=images[:20], y_test=labels[:20])
    store = tmp_path / "colour.h5"
    convert(str(path), str(store), valid_size=20, valid_seed=1)
    counts = open_store(store).channel_code_counts("train")  # the manifest's
    held = load_splits(str(store), normalize="standard")["train"]
    streams = load_streams(str(store), 2000, 10, normalize="standard")
    try:
        assert streams[0].n_shards > 1
        recorded = ChannelStatistics.from_counts(counts, held.encoding)
        assert held.channel_statistics == recorded == streams[0].dataset.channel_statistics
    finally:
        for stream in streams:
            stream.close()
