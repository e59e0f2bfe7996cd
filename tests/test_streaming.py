"""Streaming a split shard by shard: every example once per epoch, orders
from a seed, damage named in the training loop, no thread left behind."""

from contextlib import nullcontext

import numpy as np
import pytest

from archives import fake_mnist, write_mnist_idx_folder
from int8store import StreamError, quantize
from int8store.converter import convert
from int8store.store import open_store
from int8store.streaming import ArrayShards, StoreShards, StreamingSplit, worker_threads

pytestmark = pytest.mark.timeout(300)  # a lost buffer would hang a worker: fail, not hang


def array_stream(n=50, shard_size=8, **kwargs):
    images = np.arange(n * 3, dtype=np.uint8).reshape(n, 3) % 251
    codes, encoding = quantize(images)
    labels = np.arange(n)  # each example's label is its number: what was seen is visible
    return StreamingSplit(ArrayShards(codes, labels), shard_size, encoding, (3,), **kwargs), codes


def visit(stream, epoch):
    """The example numbers in the order an epoch shows them, and each shard's
    codes as the device holds them, checked against the labels."""
    seen = []
    for shard in stream.epoch(epoch):
        labels = np.asarray(stream.y.get_value())[:shard.count]
        codes = np.asarray(stream.dataset.data.get_value())[:shard.count]
        seen.append((labels, codes))
    return seen


@pytest.mark.parametrize("seed", [None, 7])
@pytest.mark.parametrize("prefetch", [0, 1, 3])
def test_every_example_once_per_epoch(seed, prefetch):
    stream, codes = array_stream(seed=seed, prefetch=prefetch, workers=2)
    assert stream.n_shards == 7  # 50 examples in shards of 8: the last holds 2
    for epoch in range(3):  # (epochs 1 and 2 start with shards read ahead)
        shards = visit(stream, epoch)
        order = np.concatenate([labels for labels, _ in shards])
        assert sorted(order.tolist()) == list(range(50))
        for labels, shard_codes in shards:  # the images travel with their labels
            np.testing.assert_array_equal(shard_codes, codes[labels])
    visit(stream, 7)  # an epoch other than the one read ahead: those shards are dropped
    stream.close()
    assert worker_threads() == []


def test_the_order_comes_from_the_seed_and_changes_between_epochs():
    def order(seed, epoch):
        stream, _ = array_stream(seed=seed)
        return np.concatenate([labels for labels, _ in visit(stream, epoch)]).tolist()

    assert order(7, 0) == order(7, 0)  # the same seed, the same order
    assert order(7, 0) != order(7, 1)  # a new order each epoch
    assert order(7, 0) != order(8, 0)
    assert order(None, 0) == order(None, 5) == list(range(50))  # no seed: the split's order


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "s.h5"
    data = fake_mnist(n_train=3000, n_test=10, side=28)
    convert(write_mnist_idx_folder(tmp_path / "idx", data), path)
    return path


def test_a_store_streams_every_example_checked(store):
    codes, labels = open_store(store).read_split("train")
    stream = StreamingSplit(StoreShards(store, "train"), 700, open_store(store).encoding,
                            (28, 28), seed=3)
    seen = np.zeros(len(labels), dtype=int)
    for shard in stream.epoch(0):
        device = np.asarray(stream.dataset.data.get_value())[:shard.count]
        rows = [np.flatnonzero((codes.reshape(len(codes), -1) == row).all(axis=1))[0] for row in device]
        seen[rows] += 1
    assert (seen == 1).all()


def test_a_damaged_shard_is_named_in_the_training_loop(store):
    s = open_store(store)
    offset, _, _ = s.manifest["splits"][0]["x"]["chunks"][1]  # the second stored chunk of train
    with open(store, "r+b") as f:
        f.seek(offset + 10)
        byte = f.read(1)[0]
        f.seek(offset + 10)
        f.write(bytes([byte ^ 1]))
    rows = s.manifest["splits"][0]["x"]["chunk_rows"]
    stream = StreamingSplit(StoreShards(store, "train"), rows, s.encoding, (28, 28))
    with pytest.raises(StreamError, match=r"train: shard 1 \(examples .*chunk 1 .*does not match "
                                          r"its checksum") as error:
        for _ in stream.epoch(0):
            pass
    assert str(store) in str(error.value)
    assert worker_threads() == []


@pytest.mark.parametrize("stop", ["break", "error", "interrupt"])
def test_no_worker_thread_remains_after_an_interrupted_epoch(stop):
    stream, _ = array_stream(n=400, shard_size=10, workers=3, prefetch=4)
    stream.source.delay = 0.01  # workers busy when the loop stops
    with pytest.raises((ValueError, KeyboardInterrupt)) if stop != "break" else nullcontext():
        for shard in stream.epoch(0):
            if shard.number == 2:
                if stop == "break":
                    break
                raise ValueError("the loss went NaN") if stop == "error" else KeyboardInterrupt
    # (after a break the loop drops the generator, whose closing stops the workers)
    assert worker_threads() == []


def test_the_tutorial_streams_and_matches_the_resident_run(capsys):
    import logistic_sgd

    common = ["--dataset", "digits", "--epochs", "20", "--save-model", ""]
    assert logistic_sgd.main(common + ["--max-device-bytes", "16384"]) == 0
    streamed = capsys.readouterr().out
    assert "streaming train in 5 shards of 240 examples" in streamed
    # The same batch size and the split's own order: the same minibatches.
    assert logistic_sgd.main(common + ["--batch-size", "240"]) == 0
    resident = capsys.readouterr().out

    def errors(out):
        return [line for line in out.splitlines() if line.startswith(("best validation", "test error"))]

    assert errors(streamed) == errors(resident)
    # Shuffled shards: a different order, close to the same result.
    assert logistic_sgd.main(common + ["--max-device-bytes", "16384", "--seed", "1"]) == 0
    shuffled = capsys.readouterr().out
    test = [float(line.split()[2]) for line in errors(shuffled) + errors(resident)
            if line.startswith("test error")]
    assert abs(test[0] - test[1]) <= 0.5
    assert worker_threads() == []


def test_switching_epochs_while_reading_ahead_never_loses_a_buffer():
    """Shards read ahead for the next epoch, some still being read, are given
    back when another epoch is asked for: the buffers never run out."""
    stream, _ = array_stream(n=60, shard_size=6, workers=2, prefetch=2)
    stream.source.delay = 0.002
    for epoch in (0, 5, 2, 9, 1, 7, 3, 8):  # never the epoch read ahead
        assert sorted(np.concatenate([labels for labels, _ in visit(stream, epoch)])) == list(range(60))
    stream.close()  # shards read ahead give their buffers back
    assert stream._free.qsize() == stream.prefetch + 1  # all but the loaded one
    assert worker_threads() == []
