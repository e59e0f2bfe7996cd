"""Streaming a split shard by shard: every example once per epoch, orders
from a seed, damage named in the training loop, no thread left behind."""

import os
import signal
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest

from archives import fake_mnist, flip_bit, write_mnist_idx_folder
from int8store import (ArgumentError, SharedDataset, StoreChecksumError, StreamError, load_data,
                       load_streams, quantize)
from int8store.training import evaluate_in_chunks
from int8store.loading import fits_in_memory
from int8store.converter import convert
from int8store.store.reader import ChunkBuffer, open_store
from int8store.streaming import shard_process
from int8store.streaming.buffers import shared_memory_available
from int8store.streaming.sources import ArrayShards, StoreShards
from int8store.streaming.split import StreamingSplit, worker_threads

pytestmark = [pytest.mark.floatx_blind, pytest.mark.timeout(300)]  # a lost buffer would hang a worker: fail, not hang


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
        codes = np.asarray(stream.dataset.rows())[:shard.count]
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


@pytest.mark.parametrize("reader", ["views", "threads"])
def test_a_seed_of_any_integer_type_streams_as_its_int(reader):
    """A numpy int32 seed passed check_seed, then reached the shard orders
    unconverted and overflowed their 32-bit mask (review)."""
    walks = []
    for seed in (7, np.int32(7), np.uint8(7)):
        stream, _ = array_stream(seed=seed, reader=reader)
        walks.append([labels.tolist() for labels, _ in visit(stream, 1)])
        stream.close()
    assert walks[0] == walks[1] == walks[2]


def test_a_pass_and_a_resumed_epoch_take_only_whole_numbers_in_range():
    """epoch(0, first=6) of 5 shards gave epoch 1's shards numbered as 0's
    and then an IndexError; first=-1 and epoch -1 were taken too; a start
    of 2.0, taken held whole, failed streamed (review)."""
    stream, _ = array_stream(n=40)
    assert stream.n_shards == 5
    for first in (6, -1, 1.5, True):
        with pytest.raises(ArgumentError, match=f"a pass cannot start at shard {first!r}: "
                                                r"expected 0 to 5"):
            stream.epoch(0, first=first)
    with pytest.raises(ArgumentError, match="epoch -1: expected a whole number"):
        stream.epoch(-1)
    assert list(stream.epoch(0, first=5)) == []  # (the epoch over: a run stopped at its end)
    whole = [(b.number, b.index) for b in stream.minibatches(0, 4, start=2)]
    assert [(b.number, b.index) for b in stream.minibatches(0, 4, start=2.0)] == whole
    stream.close()


def test_a_lent_epoch_may_end_and_the_next_start_with_the_short_shard():
    """Lent shards need a buffer only for the short shard: read again right
    after itself (the end of one shuffled epoch, the start of the next), it
    is read into that buffer in place instead of waiting for it."""
    stream, codes = array_stream(seed=0, prefetch=2)  # 7 shards, one short
    assert stream.reader == "views" and len(stream._pool.buffers) == 1
    short = stream.layout.short_shard
    epoch = next(e for e in range(1000) if stream.shard_order(e)[-1] == short(e)
                 and stream.shard_order(e + 1)[0] == short(e + 1))
    for shards in (visit(stream, epoch), visit(stream, epoch + 1)):
        assert sorted(np.concatenate([labels for labels, _ in shards]).tolist()) == list(range(50))
        for labels, shard_codes in shards:
            np.testing.assert_array_equal(shard_codes, codes[labels])
    stream.close()


def test_a_shuffled_stream_trains_on_every_example_over_its_epochs():
    """Each shard's examples left over its whole minibatches are not trained
    on in an epoch. The short shard was always the last: the docs' streamed
    digits (1,197 in shards of 240, batch 240) never trained on the last 237
    (review). Shuffled, the short shard is drawn each epoch; in order, it is
    the last, as the split held whole drops its last examples."""
    from int8store.streaming.layout import ShardLayout

    layout, batch = ShardLayout("train", 1197, 240, seed=1), 240
    trained, shorts = set(), set()
    for epoch in range(40):
        bounds = sorted(layout.bounds(index, epoch) for index in range(layout.n_shards))
        assert [b for a in bounds for b in a] == [0] + [b for a in bounds for b in a][1:-1] + [1197]
        assert all(stop == start for (_, stop), (start, _) in zip(bounds, bounds[1:]))
        shorts.add(layout.short_shard(epoch))
        for index in layout.visit_order(epoch):
            start, stop = layout.bounds(index, epoch)
            assert stop - start == (237 if index == layout.short_shard(epoch) else 240)
            order, _ = layout.shuffled_labels(np.arange(1197), epoch, index)
            trained.update((start + order[:(stop - start) // batch * batch]).tolist())
    assert trained == set(range(1197)) and len(shorts) > 1
    assert ShardLayout("train", 1197, 240).bounds(4, 7) == (960, 1197)  # (no seed: the last)


def test_the_order_comes_from_the_seed_and_changes_between_epochs():
    def order(seed, epoch):
        stream, _ = array_stream(seed=seed)
        return np.concatenate([labels for labels, _ in visit(stream, epoch)]).tolist()

    assert order(7, 0) == order(7, 0)  # the same seed, the same order
    assert order(7, 0) != order(7, 1)  # a new order each epoch
    assert order(7, 0) != order(8, 0)
    assert order(None, 0) == order(None, 5) == list(range(50))  # no seed: the split's order


def test_a_jax_mode_stream_orders_its_shards_without_the_c_op():
    """A shard's order is order.shuffle's arithmetic: the C backend's trainer
    draws it with a C op, a JAX-mode stream in numpy, without importing (or
    compiling) that op, and both give the same order."""
    pytest.importorskip("jax")
    import json
    import subprocess
    import sys

    code = ("import json, sys\n"
            "import numpy as np\n"
            "from int8store import quantize\n"
            "from int8store.streaming.sources import ArrayShards\n"
            "from int8store.streaming.split import StreamingSplit\n"
            "codes, encoding = quantize(np.arange(150, dtype=np.uint8).reshape(50, 3) % 251)\n"
            "stream = StreamingSplit(ArrayShards(codes, np.arange(50)), 8, encoding, (3,), seed=7,"
            " mode='jax')\n"
            "order = []\n"
            "for epoch in (0, 1):\n"
            "    for shard in stream.epoch(epoch):\n"
            "        order += np.asarray(stream.y.get_value())[:shard.count].tolist()\n"
            "stream.close()\n"
            "print(json.dumps([order, 'int8store.backend.ops.permutation' in sys.modules]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    jax_order, imported = json.loads(done.stdout.splitlines()[-1])
    assert not imported
    stream, _ = array_stream(seed=7)  # the C backend: the C op draws each shard's order
    assert stream.layout.orders_in_c
    c_order = [int(n) for epoch in (0, 1) for labels, _ in visit(stream, epoch) for n in labels]
    stream.close()
    assert c_order == jax_order


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
        device = np.asarray(stream.dataset.rows())[:shard.count]
        rows = [np.flatnonzero((codes.reshape(len(codes), -1) == row).all(axis=1))[0] for row in device]
        seen[rows] += 1
    assert (seen == 1).all()


def test_a_damaged_shard_is_named_in_the_training_loop(store):
    s = open_store(store)
    offset, _, _ = s.manifest["splits"][0]["x"]["chunks"][1]  # the second stored chunk of train
    flip_bit(store, offset + 10, 0)
    rows = s.manifest["splits"][0]["x"]["chunk_rows"]
    stream = StreamingSplit(StoreShards(store, "train"), rows, s.encoding, (28, 28))
    with pytest.raises(StreamError, match=r"train: shard 1 \(examples .*chunk 1 .*does not match "
                                          r"its checksum") as error:
        for _ in stream.epoch(0):
            pass
    assert str(store) in str(error.value)
    assert worker_threads() == []


@pytest.mark.parametrize("seed", [None, 3])
def test_shards_read_in_order_read_each_stored_chunk_once(store, seed, monkeypatch):
    codes, _ = open_store(store).read_split("train")
    source = StoreShards(store, "train")
    rows = source.store.manifest["splits"][0]["x"]["chunk_rows"]
    read = []
    original = source.store._reader.read_range

    def recording(f, offset, views, digest, what):
        read.append(offset)
        return original(f, offset, views, digest, what)

    monkeypatch.setattr(source.store._reader, "read_range", recording)
    size = rows * 2 // 3  # shards that start and end inside stored chunks
    out = np.empty((size, 28, 28), np.int8)
    for first in range(0, len(codes), size):
        count = min(size, len(codes) - first)
        positions = None if seed is None else np.random.default_rng(seed).permutation(count)
        source.read(first, first + count, out[:count], positions)
        np.testing.assert_array_equal(_placed(out[:count], positions), codes[first:first + count])
    chunks = [c[0] for c in source.store.manifest["splits"][0]["x"]["chunks"]]
    assert sorted(read) == chunks  # every chunk read (and checked) once, none twice


def _placed(out, positions):
    """The shard's rows back in the split's order."""
    return out if positions is None else out[positions]


def test_a_chunk_read_unchecked_is_checked_when_asked(store):
    s = open_store(store, verify=False)
    rows = s.manifest["splits"][0]["x"]["chunk_rows"]
    offset = s.manifest["splits"][0]["x"]["chunks"][0][0]
    buffer = ChunkBuffer(s.chunk_bytes("train"))
    s.read_rows("train", 1, 2, np.empty((1, 28, 28), np.int8), verify=False, scratch=buffer)
    flip_bit(store, offset + 5, 0)  # damaged after that read
    with pytest.raises(StoreChecksumError, match="split 'train' chunk 0"):
        s.read_rows("train", 2, rows, np.empty((rows - 2, 28, 28), np.int8), scratch=buffer)


def test_a_chunk_buffer_never_answers_for_a_store_rewritten_at_its_path(tmp_path, store):
    buffer = ChunkBuffer(open_store(store).chunk_bytes("train"))
    out = np.empty((5, 28, 28), np.int8)
    open_store(store).read_rows("train", 1, 6, out, scratch=buffer)
    other = fake_mnist(n_train=3000, n_test=10, side=28, seed=9)
    convert(write_mnist_idx_folder(tmp_path / "other", other), store, force=True)
    rewritten = open_store(store)
    rewritten.read_rows("train", 1, 6, out, scratch=buffer)
    np.testing.assert_array_equal(out, rewritten.read_split("train")[0][1:6])


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
    assert "train: 1,197 examples streamed in 5 shards of 240 examples" in streamed
    # The same batch size and the split's own order: the same minibatches.
    assert logistic_sgd.main(common + ["--batch-size", "240"]) == 0
    resident = capsys.readouterr().out

    def errors(out):
        return [line for line in out.splitlines() if line.startswith(("best validation", "test error"))]

    assert errors(streamed) == errors(resident)
    # Shuffled shards: a different order, close to the same result: within
    # the test error's sampling error (1.7 points for 300 examples at 9 %),
    # where images trained on with the wrong labels would be far off.
    assert logistic_sgd.main(common + ["--max-device-bytes", "16384", "--seed", "1"]) == 0
    shuffled = capsys.readouterr().out
    test = [float(line.split()[2]) for line in errors(shuffled) + errors(resident)
            if line.startswith("test error")]
    assert test[0] != test[1] or errors(shuffled) != errors(resident)  # another order
    assert abs(test[0] - test[1]) <= 1.7
    assert worker_threads() == []


def test_shards_are_sized_for_the_batch_cut_to_the_smallest_split(capsys):
    """The default batch (600) is cut to the 300 examples of the smallest
    split; shards sized for 600 held 400 examples, one minibatch and 100
    that no minibatch read (the trial's fifth of the training set unseen)."""
    import logistic_sgd

    common = ["--dataset", "digits", "--epochs", "3", "--save-model", ""]
    assert logistic_sgd.main(common + ["--max-device-bytes", str(400 * (64 + 4))]) == 0
    streamed = capsys.readouterr().out
    assert "train: 1,197 examples streamed in 4 shards of 300 examples" in streamed
    assert logistic_sgd.main(common) == 0
    resident = capsys.readouterr().out
    for out in (streamed, resident):
        assert ("batch size 600 is larger than the validation and test splits (300 "
                "examples each): using 300") in out

    def errors(out):
        return [line for line in out.splitlines() if "error" in line]

    assert errors(streamed) == errors(resident) and "minibatch 3/3" in errors(streamed)[0]


def test_switching_epochs_while_reading_ahead_never_loses_a_buffer():
    """Shards read ahead for the next epoch, some still being read, are given
    back when another epoch is asked for: the buffers never run out."""
    stream, _ = array_stream(n=60, shard_size=6, workers=2, prefetch=2, reader="threads")
    stream.source.delay = 0.002
    for epoch in (0, 5, 2, 9, 1, 7, 3, 8):  # never the epoch read ahead
        assert sorted(np.concatenate([labels for labels, _ in visit(stream, epoch)])) == list(range(60))
    stream.close()  # shards read ahead give their buffers back
    assert stream._pool.n_free == stream.prefetch + 1  # all but the loaded one
    assert worker_threads() == []


# -- from a store on disk, without loading it ---------------------------------

FORMAT2 = Path(__file__).resolve().parent / "data" / "format2-digits.h5"


def test_load_streams_never_reads_a_split_whole(monkeypatch):
    from int8store.store.reader import Store

    def refuse(*args, **kwargs):
        raise AssertionError("a split was read whole")

    monkeypatch.setattr(Store, "read_split", refuse)
    monkeypatch.setattr(Store, "chunks", refuse)
    train, valid, test = load_streams(FORMAT2, max_device_bytes=20 * 68, batch_size=10)
    assert [s.n_shards for s in (train, valid, test)] == [10, 3, 3]
    assert [s.prefetch for s in (train, valid, test)] == [2, 0, 0]
    expected = open_store(FORMAT2)
    seen = np.concatenate([np.asarray(train.y.get_value())[:shard.count] for shard in train.epoch(0)])
    np.testing.assert_array_equal(seen, expected.read_labels("train"))
    train.close()


def test_a_batch_larger_than_a_shard_is_said_on_load_and_refused_by_the_loop():
    """Shards of 20 for a batch of 30: a loop over minibatches(epoch, 30)
    did nothing, every epoch, without a word (a user's trial). The load
    says the batch must come down, and the loop refuses it; a batch larger
    than the whole split still gives no minibatch, as the classic slices do."""
    lines = []
    train, valid, test = load_streams(FORMAT2, max_device_bytes=20 * 68, batch_size=30,
                                      report=lines.append)
    assert train.shard_size == 20 and train.n_examples == 200
    assert lines[-1] == ("... batch size 30 is larger than a shard of 20 examples: "
                         "take minibatches of 20 at most")
    for refused in (lambda: train.n_batches(30), lambda: next(train.minibatches(0, 30)),
                    lambda: valid.n_batches(21)):
        with pytest.raises(ArgumentError, match="batch_size=.* is larger than a shard of 20 "
                           "examples, so no shard would give a minibatch: take minibatches "
                           "of 20 at most"):
            refused()
    assert train.n_batches(20) == 10 and len(list(train.minibatches(0, 20))) == 10
    assert train.n_batches(201) == 0 and list(train.minibatches(0, 201)) == []
    assert valid.n_batches(51) == 0
    lines.clear()
    load_streams(FORMAT2, max_device_bytes=20 * 68, batch_size=20, report=lines.append)
    assert not any("batch size" in line for line in lines)


def test_the_tutorial_says_it_takes_a_shards_size_for_its_batch(capsys):
    import logistic_sgd

    assert logistic_sgd.main(["--dataset", "digits", "--epochs", "1", "--save-model", "",
                              "--max-device-bytes", "16384"]) == 0
    out = capsys.readouterr().out
    assert ("... batch size 600 is larger than a shard of 240 examples: take minibatches of 240 "
            "at most\n... using minibatches of 240\n") in out
    assert "epoch 1, minibatch 4/4" in out  # (a minibatch a shard; the fifth, 237, gives none)


def test_a_split_that_fits_in_a_shard_is_read_once_and_kept(monkeypatch):
    train, valid, test = load_streams(FORMAT2, max_device_bytes=1 << 20, batch_size=10)
    assert [s.n_shards for s in (train, valid, test)] == [1, 1, 1]
    reads = []
    for way in ("read", "lend"):
        monkeypatch.setattr(valid.source, way, lambda *a, original=getattr(valid.source, way):
                            reads.append(a[:2]) or original(*a))
    for _ in range(3):
        assert sum(shard.count for shard in valid.passes()) == 50
    assert reads == [(0, 50)]


@pytest.mark.parametrize("shard_size", [7, 10, 50])
@pytest.mark.parametrize("classic_count", [False, True])
def test_a_streamed_split_is_scored_like_a_resident_one(shard_size, classic_count):
    """Per-example values summed shard by shard, each example once: the same
    mean and count as evaluate_in_chunks over the split in memory, whatever
    the shard size against the chunk size."""
    stream, codes = array_stream(n=50, shard_size=shard_size, prefetch=1)
    values = (np.arange(50) * 7919 % 13).astype(float)  # a value per example, by its label

    def on_the_device(start):  # the chunk of 5 from `start` in the shard now loaded
        return values[np.asarray(stream.y.get_value())[start:start + 5]]

    expected = evaluate_in_chunks(lambda start: values[start:start + 5], 50, 5, classic_count)
    assert evaluate_in_chunks(on_the_device, stream, 5, classic_count) == pytest.approx(expected)
    stream.close()


def test_prefetch_is_bounded_in_bytes():
    stream, _ = array_stream(n=100, shard_size=10, prefetch=4, max_prefetch_bytes=3 * 70,
                             reader="threads")
    assert stream.shard_bytes == 70 and stream.prefetch == 2  # 3 shards in flight at most
    assert stream._pool.n_free == stream.prefetch + 2
    with pytest.raises(ArgumentError, match=r"a shard of 10 examples takes 70 bytes, more than "
                                            r"the 69 bytes allowed in flight"):
        array_stream(n=100, shard_size=10, max_prefetch_bytes=69)
    alone, _ = array_stream(n=100, shard_size=10, prefetch=4, max_prefetch_bytes=70,
                            reader="threads")
    assert alone.prefetch == 0 and alone._pool.n_free == 1  # read in place, in the caller's thread
    assert sorted(np.concatenate([labels for labels, _ in visit(alone, 0)])) == list(range(100))


def test_load_streams_refuses_a_shard_larger_than_the_memory_ceiling():
    with pytest.raises(ArgumentError, match=r"train: a shard of 200 examples takes 13,600 bytes, "
                                            r"more than the 5,000 bytes allowed in flight"):
        load_streams(FORMAT2, max_device_bytes=1 << 20, max_memory=10_000)


def test_a_ceiling_too_small_for_one_example_names_the_ceiling_not_max_device_bytes():
    # (an eighth of the ceiling, 62 bytes, against rows of 28x28 + 4)
    with pytest.raises(ArgumentError, match=r"streamed without max_device_bytes "
                                            r"\(--max-device-bytes\), in shards of an eighth of "
                                            r"the memory ceiling \(500 bytes, --max-memory\)"):
        load_streams(FORMAT2, max_memory=500)


def test_a_shard_budget_below_one_byte_is_refused_zero_too():
    # 0 read as "not given": the splits were streamed in an eighth of memory
    for size in (0, -1):
        with pytest.raises(ArgumentError, match=f"max_device_bytes={size}: expected a positive size"):
            load_streams(FORMAT2, max_device_bytes=size)


def test_dataset_normalization_streamed_uses_the_whole_training_split():
    train, valid, _ = load_streams(FORMAT2, max_device_bytes=20 * 68, batch_size=10,
                                   normalize="dataset")
    (resident_x, _), _, _ = load_data(FORMAT2, normalize="dataset")
    assert train.dataset.dataset_mean == resident_x.dataset.dataset_mean
    assert valid.dataset.dataset_mean == resident_x.dataset.dataset_mean


@pytest.mark.parametrize("reader", ["views", "threads"])
def test_a_stream_made_without_a_dataset_mean_centres_on_its_whole_split(reader):
    """Made directly with normalize="dataset" and no dataset_mean, a stream
    took the mean of the placeholder shard its view is made over (zeros:
    128, whatever the images), and its values were those of no split
    (review). Its split's own mean, as a SharedDataset takes it."""
    images = np.random.default_rng(0).integers(0, 60, (40, 4)).astype(np.uint8)  # dark: mean ~30
    codes, encoding = quantize(images)
    held = SharedDataset(codes, np.arange(40), encoding, normalize="dataset", dtype="float64")
    stream = StreamingSplit(ArrayShards(codes, np.arange(40)), 8, encoding, (4,), seed=3,
                            normalize="dataset", dtype="float64", reader=reader)
    try:
        assert stream.dataset.dataset_mean == held.dataset_mean
        for shard in stream.epoch(0):
            labels = np.asarray(stream.y.get_value())[:shard.count]
            np.testing.assert_array_equal(stream.x.get_value()[:shard.count],
                                          held.x.get_value()[labels])
    finally:
        stream.close()


def test_an_empty_split_is_refused_streamed_as_held_whole():
    """Held whole, a split of no example is refused; streamed, its epochs
    were empty and evaluate_in_chunks scored it (nan, 0) (review)."""
    codes, encoding = quantize(np.zeros((0, 3), np.uint8))
    with pytest.raises(ArgumentError, match=r"train: no examples .*a split holds at least one"):
        ArrayShards(codes, np.arange(0))


def test_a_store_too_large_for_memory_is_streamed_by_the_tutorial(capsys):
    import logistic_sgd

    common = ["--dataset", str(FORMAT2), "--epochs", "6", "--batch-size", "10", "--save-model", ""]
    nbytes = open_store(FORMAT2).nbytes
    assert not fits_in_memory(FORMAT2, nbytes - 1) and fits_in_memory(FORMAT2, nbytes)
    assert fits_in_memory("digits", 1)  # other sources are held to the ceiling as they are read
    assert logistic_sgd.main(common + ["--max-memory", str(4 * nbytes)]) == 0
    resident = capsys.readouterr().out
    assert "streamed" not in resident
    assert logistic_sgd.main(common + ["--max-memory", str(nbytes - 1)]) == 0
    streamed = capsys.readouterr().out
    assert "... train: 200 examples streamed in 7 shards of 30 examples" in streamed  # an eighth of the ceiling each
    assert logistic_sgd.main(common + ["--max-device-bytes", str(20 * 68)]) == 0
    sharded = capsys.readouterr().out
    assert "... train: 200 examples streamed in 10 shards of 20 examples" in sharded

    def errors(out):
        return [line for line in out.splitlines() if "error" in line]

    assert len(errors(resident)) > 6 and errors(streamed) == errors(resident) == errors(sharded)
    assert worker_threads() == []


# -- the reading process --------------------------------------------------------

needs_memfd = pytest.mark.skipif(not shared_memory_available(),
                                 reason="a reading process needs Linux's memfd_create")


@needs_memfd
@pytest.mark.parametrize("seed", [None, 5])
def test_a_reading_process_gives_the_shards_threads_give(store, seed):
    """A reading process, and the default (shards lent from the mapped file,
    shuffled or not), give the same shards, in the same order, as reading
    them in threads, across epochs read ahead and not."""
    encoding = open_store(store).encoding

    def shards(reader):
        split = StreamingSplit(StoreShards(store, "train"), 700, encoding, (28, 28), seed=seed,
                               reader=reader)
        seen = [(np.asarray(split.y.get_value())[:s.count].copy(),
                 np.asarray(split.dataset.rows())[:s.count].copy())
                for epoch in (0, 1, 5, 2) for s in split.epoch(epoch)]  # 5, 2: not read ahead
        split.close()
        return split.reader, seen

    (process, by_process), (threads, by_threads) = shards("process"), shards("threads")
    auto, by_auto = shards("auto")  # no seed: lent from the mapped file
    assert (process, threads, auto) == ("process", "threads", "views")
    assert len(by_process) == len(by_threads) == len(by_auto) == 4 * 4  # 2500 in shards of 700
    for (labels_p, codes_p), (labels_a, codes_a), (labels_t, codes_t) in \
            zip(by_process, by_auto, by_threads):
        np.testing.assert_array_equal(labels_p, labels_t)
        np.testing.assert_array_equal(labels_a, labels_t)
        np.testing.assert_array_equal(codes_p, codes_t)
        np.testing.assert_array_equal(codes_a, codes_t)


@needs_memfd
def test_the_reading_process_ignores_ctrl_c_and_ends_with_the_stream(store):
    split = StreamingSplit(StoreShards(store, "train"), 700, open_store(store).encoding, (28, 28),
                           reader="process")
    shards = split.epoch(0)
    next(shards)
    child = split._reader._process._process
    # A terminal's Ctrl-C goes to its foreground process group: not the
    # child's, from the moment it starts; and a SIGINT sent to it is ignored.
    assert os.getpgid(child.pid) != os.getpgrp()
    os.kill(child.pid, signal.SIGINT)
    assert sum(1 for _ in shards) == 3 and child.poll() is None
    split.close()
    assert child.poll() is not None and split._reader._process is None


@needs_memfd
def test_a_reading_process_that_dies_is_an_error_in_the_training_loop(store):
    split = StreamingSplit(StoreShards(store, "train"), 700, open_store(store).encoding, (28, 28),
                           prefetch=1, reader="process")
    shards = split.epoch(0)
    next(shards)
    split._reader._process._process.kill()
    with pytest.raises(StreamError, match=r"train: shard \d \(examples .*\): the process reading "
                                          r"the shards ended \(exit status -9\)"):
        for _ in shards:
            pass
    split.close()


def test_a_reading_process_is_only_for_a_stores_shards(store):
    with pytest.raises(ArgumentError, match="a reading process needs a store's shards"):
        array_stream(reader="process")
    assert array_stream(seed=1, prefetch=0)[0].reader == array_stream()[0].reader == "views"
    # (a prefetch that max_prefetch_bytes lowered to 0 is said: it was asked as 2)
    with pytest.raises(ArgumentError, match=r"prefetch > 0 \(here 0, max_prefetch_bytes "):
        StreamingSplit(StoreShards(store, "train"), 700, open_store(store).encoding, (28, 28),
                       reader="process", prefetch=2, max_prefetch_bytes=700 * 790)


@needs_memfd
def test_a_delivery_interrupted_loses_no_buffer(store, monkeypatch):
    """Ctrl-C (or an error) while a shard is being put on the device: the
    next epoch still gets every buffer back, and every example."""
    split = StreamingSplit(StoreShards(store, "train"), 700, open_store(store).encoding, (28, 28),
                           prefetch=1, reader="process")
    load, calls = split._load, []

    def interrupted_once(prepared):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        load(prepared)

    monkeypatch.setattr(split, "_load", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        for _ in split.epoch(0):
            pass
    seen = np.concatenate([np.asarray(split.y.get_value())[:s.count].copy() for s in split.epoch(1)])
    assert len(seen) == 2500
    split.close()
    assert split._pool.n_free == split.prefetch + 1  # all but the loaded one


@needs_memfd
@pytest.mark.parametrize("where", ["after loading a shard", "asking the reader for one"])
def test_an_interruption_anywhere_leaves_every_buffer_to_one_owner(store, monkeypatch, where):
    """Ctrl-C caught by the user (a notebook) after a shard went into the
    shared variables but before it left the queue, or after a buffer was
    taken for a shard but before the reader was asked: the next epochs read
    each shard into a buffer of its own, never the one being trained on, and
    never wait for a buffer that was lost."""
    codes = open_store(store).read_split("train")[0]
    split = StreamingSplit(StoreShards(store, "train"), 700, open_store(store).encoding, (28, 28),
                           prefetch=2, reader="process")
    for _ in split.epoch(0):
        pass
    calls = []

    def once(real):
        def interrupted(*args):
            calls.append(1)
            if where == "asking the reader for one" and len(calls) == 2:
                raise KeyboardInterrupt
            result = real(*args)
            if where == "after loading a shard" and len(calls) == 2:
                raise KeyboardInterrupt
            return result
        return interrupted

    if where == "after loading a shard":
        monkeypatch.setattr(split, "_load", once(split._load))
    else:
        monkeypatch.setattr(shard_process.ShardProcess, "submit", once(shard_process.ShardProcess.submit))
    with pytest.raises(KeyboardInterrupt):
        for _ in split.epoch(1):
            pass
    monkeypatch.undo()
    buffers = [id(b) for b in split._pool._free]
    assert len(buffers) == len(set(buffers)) == split.prefetch + 1
    assert id(split._loaded.buffer) not in buffers
    assert_epochs_hold_the_split_in_order(split, codes, (2, 3))
    split.close()


@needs_memfd
@pytest.mark.parametrize("method", ["take", "submit"])
def test_ctrl_c_right_after_a_reply_or_a_request_pairs_no_reply_with_the_wrong_shard(
        store, monkeypatch, method, ctrl_c_raises):
    """A real SIGINT that comes just after a reply was read, or a request
    written, is raised once the job it belongs to is recorded: the stream
    closes without waiting for a reply that will never come, and the next
    epochs get the right shards."""
    codes = open_store(store).read_split("train")[0]
    split = StreamingSplit(StoreShards(store, "train"), 700, open_store(store).encoding, (28, 28),
                           prefetch=2, reader="process")
    real, calls = getattr(shard_process.ShardProcess, method), []

    def then_ctrl_c(self, *args):
        result = real(self, *args)
        calls.append(1)
        if len(calls) == 2:
            signal.raise_signal(signal.SIGINT)
        return result

    monkeypatch.setattr(shard_process.ShardProcess, method, then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        for _ in split.epoch(0):
            pass
    monkeypatch.undo()
    assert_epochs_hold_the_split_in_order(split, codes, (1, 2))
    split.close()


def assert_epochs_hold_the_split_in_order(split, codes, epochs):
    """Each shard of ``epochs`` (a split streamed in its own order) holds
    its rows of ``codes``."""
    for epoch in epochs:
        for shard in split.epoch(epoch):
            held = np.asarray(split.dataset.data.get_value())[:shard.count]
            np.testing.assert_array_equal(held.reshape(shard.count, -1),
                                          codes[shard.start:shard.start + shard.count].reshape(shard.count, -1))


@needs_memfd
def test_a_store_replaced_after_opening_is_refused_by_the_reading_process(tmp_path, store):
    split = StreamingSplit(StoreShards(store, "train"), 700, open_store(store).encoding, (28, 28),
                           reader="process")
    other = fake_mnist(n_train=3000, n_test=10, side=28, seed=9)
    convert(write_mnist_idx_folder(tmp_path / "other", other), store, force=True)
    with pytest.raises(StreamError, match="the file changed since the store was opened"):
        for _ in split.epoch(0):
            pass
    split.close()


@pytest.mark.parametrize("prefetch", [0, 2])
def test_a_store_replaced_after_opening_is_named_as_such_by_reading_threads(tmp_path, store, prefetch):
    """Threads read the store by its path: the other store's bytes fail the
    checks of the one opened, and the error says the file was replaced, not
    that it is damaged."""
    split = StreamingSplit(StoreShards(store, "train"), 700, open_store(store).encoding, (28, 28),
                           seed=0, reader="threads", prefetch=prefetch)
    other = fake_mnist(n_train=3000, n_test=10, side=28, seed=9)
    convert(write_mnist_idx_folder(tmp_path / "other", other), store, force=True)
    with pytest.raises(StreamError, match="the file changed since the store was opened") as caught:
        for _ in split.epoch(0):
            pass
    assert "damaged" not in str(caught.value)
    split.close()


def test_a_store_damaged_in_place_is_still_reported_as_damaged(tmp_path, store):
    opened = open_store(store)
    offset, _, _ = opened.manifest["splits"][0]["x"]["chunks"][0]
    flip_bit(store, offset, 0)
    with pytest.raises(StoreChecksumError, match="chunk 0 .*does not match its checksum: the file "
                                                 "is damaged"):
        opened.read_split("train")


@pytest.mark.parametrize("reader", ["views", "threads", "process"])
def test_a_store_opened_by_a_relative_path_streams_after_a_chdir(store, tmp_path, monkeypatch, reader):
    """Shards are read after the training script may have changed its working
    directory: the store opened as a relative path is still the one read."""
    monkeypatch.chdir(store.parent)
    split = StreamingSplit(StoreShards(store.name, "train"), 700, open_store(store).encoding,
                           (28, 28), reader=reader, prefetch=1 if reader == "process" else 0)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert sum(shard.count for shard in split.epoch(0)) == 2500
    split.close()
