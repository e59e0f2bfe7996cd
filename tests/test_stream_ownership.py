"""One owner for the pass in progress: a second pass over a streamed split is
refused at once (never a hang, never a shard swapped under the first), closing
gives every buffer back whatever a second Ctrl-C interrupts, the reading
process is bounded in every wait, evaluation never computes over padding,
and arrays are checked as a SharedDataset checks them."""

import importlib.util
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from archives import fake_mnist, write_mnist_idx_folder
from int8store import ArgumentError, EncodingError, StreamError, load_streams, quantize
from int8store.training import evaluate_in_chunks
from int8store.converter import convert
from int8store.store.reader import open_store
from int8store.streaming import buffers, shard_process
from int8store.streaming.sources import ArrayShards, StoreShards
from int8store.streaming.split import StreamingSplit, worker_threads

pytestmark = [pytest.mark.floatx_blind, pytest.mark.timeout(120)]  # a hang is a failure, not a stuck suite

needs_memfd = pytest.mark.skipif(not buffers.shared_memory_available(),
                                 reason="a reading process needs Linux's memfd_create")
MODES = ["c", pytest.param("jax", marks=pytest.mark.skipif(
    importlib.util.find_spec("jax") is None, reason="JAX is not installed in this environment"))]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("store")
    path = folder / "s.h5"
    convert(write_mnist_idx_folder(folder / "idx", fake_mnist(n_train=3000, n_test=10, side=28)),
            path)
    return path


def store_split(store, reader, mode="c", seed=None, prefetch=2, shard_size=700):
    opened = open_store(store, verify=False)
    return StreamingSplit(StoreShards(store, "train"), shard_size, opened.encoding, (28, 28),
                          reader=reader, mode=mode, seed=seed,
                          prefetch=1 if reader == "process" and not prefetch else prefetch)


def held(split, shard):
    """``(labels, codes)`` of the shard now in the shared variables."""
    labels = np.asarray(split.y.get_value())[:shard.count].copy()
    return labels, np.asarray(split.dataset.rows())[:shard.count].reshape(shard.count, -1).copy()


def assert_rows_match(store, seen):
    """Each shard seen holds its own examples, each image with its label."""
    codes, labels = open_store(store).read_split("train")
    codes = codes.reshape(len(codes), -1)
    for shard, (shard_labels, shard_codes) in seen:
        rows = range(shard.start, shard.start + shard.count)
        expected = {codes[r].tobytes(): int(labels[r]) for r in rows}
        got = {row.tobytes(): int(label) for row, label in zip(shard_codes, shard_labels)}
        assert got == expected


# -- two passes at once ----------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reader", ["views", "threads", "process"])
def test_a_second_pass_while_one_is_alive_is_refused_at_once(store, reader, mode):
    if reader == "process" and not buffers.shared_memory_available():
        pytest.skip("a reading process needs Linux's memfd_create")
    seed = None if (reader == "views" and mode == "jax") else 1  # (lent and shuffled: C only)
    split = store_split(store, reader, mode, seed=seed)
    first = split.epoch(0)
    seen = [(s := next(first), held(split, s))]
    with pytest.raises(StreamError, match=r"train: a pass over this split is in progress "
                                          r"\(epoch 0, 1 of 4 shards delivered\)"):
        split.epoch(1)
    with pytest.raises(StreamError, match="a pass over this split is in progress"):
        evaluate_in_chunks(lambda start: np.zeros(100), split, 100)  # its training error, mid-epoch
    seen += [(s, held(split, s)) for s in first]  # the first pass goes on, its shards its own
    assert sorted(s.index for s, _ in seen) == [0, 1, 2, 3]
    assert_rows_match(store, seen)
    again = [(s, held(split, s)) for s in split.epoch(1)]  # once it ended, another runs
    assert_rows_match(store, again)
    split.close()


def test_the_pass_of_a_load_streams_split_in_jax_mode_refuses_a_second(tmp_path):
    """The case reported: JAX mode, a seed, a 6,000-image store streamed in
    shards of under 200,000 bytes; a paused epoch() and a second one."""
    pytest.importorskip("jax")
    path = tmp_path / "six.h5"
    convert(write_mnist_idx_folder(tmp_path / "idx", fake_mnist(n_train=7000, n_test=100, side=28)),
            path, valid_size=1000)
    train, valid, test = load_streams(path, max_device_bytes=200_000, seed=1, mode="jax")
    assert train.n_examples == 6000 and train.n_shards > 2
    paused = train.epoch(0)
    next(paused)
    with pytest.raises(StreamError, match="a pass over this split is in progress"):
        next(iter(train.epoch(1)))
    paused.close()
    assert sum(s.count for s in train.epoch(1)) == 6000
    for split in (train, valid, test):
        split.close()


def test_a_pass_left_in_a_variable_is_ended_by_close_or_by_dropping_it(store):
    split = store_split(store, "threads", seed=2)
    paused = split.epoch(0)
    next(paused)
    split.close()  # ends the pass in progress too
    assert sum(s.count for s in split.epoch(1)) == 2500
    paused = split.epoch(2)
    next(paused)
    del paused  # dropped unfinished: it gives its shards back
    assert sum(s.count for s in split.epoch(3)) == 2500
    split.close()
    assert worker_threads() == [] and split._pool.n_free == split.prefetch + 1


# -- closing, whatever a second Ctrl-C interrupts --------------------------------

@needs_memfd
@pytest.mark.parametrize("reader", ["threads", "process"])
def test_ctrl_c_twice_during_close_still_gives_every_buffer_back(store, reader, monkeypatch,
                                                                  ctrl_c_raises):
    split = store_split(store, reader, seed=4)
    shards = split.epoch(0)
    next(shards)
    # Two Ctrl-C while the reader's workers (or its process) are being stopped.
    def twice():
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)

    if reader == "process":
        process = split._reader._process
        real_end = process.end

        def end():
            twice()
            real_end()
        monkeypatch.setattr(process, "end", end)
    else:
        from concurrent.futures import ThreadPoolExecutor
        real_shutdown = ThreadPoolExecutor.shutdown

        def shutdown(self, *args, **kwargs):
            twice()
            real_shutdown(self, *args, **kwargs)
        monkeypatch.setattr(ThreadPoolExecutor, "shutdown", shutdown)
    with pytest.raises(KeyboardInterrupt):
        split.close()
    monkeypatch.undo()
    assert split._pool.n_free == split.prefetch + 1  # every buffer but the one loaded
    seen = [(s, held(split, s)) for s in split.epoch(1)]  # and the next epoch does not hang
    assert sorted(s.index for s, _ in seen) == [0, 1, 2, 3]
    assert_rows_match(store, seen)
    split.close()
    split.close()  # idempotent


# -- the reading process: isolated output, bounded waits, nothing leaked ---------

@needs_memfd
def test_output_of_the_reading_process_is_never_taken_for_a_reply(store, monkeypatch):
    """A library in the reading process that prints (even a line that looks
    like a reply) writes to standard error: the replies are untouched."""
    code = ("import os, sys\n"
            "import int8store.streaming.sources as sources\n"
            "real = sources.fill_shard\n"
            "def noisy(*args):\n"
            "    os.write(1, b'ok 0 0\\n'); print('a stray line', flush=True)\n"
            "    return real(*args)\n"
            "sources.fill_shard = noisy\n"
            "from int8store.streaming.shard_process import _serve\n"
            "_serve(sys.argv[1:])\n")

    def start(module, args, pass_fds=(), **kwargs):
        return subprocess.Popen([sys.executable, "-c", code, *map(str, args)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, pass_fds=pass_fds,
                                start_new_session=True)

    monkeypatch.setattr(shard_process.processes, "start", start)
    split = store_split(store, "process", seed=5)
    for epoch in (0, 1):
        seen = [(s, held(split, s)) for s in split.epoch(epoch)]
        assert sorted(s.index for s, _ in seen) == [0, 1, 2, 3]
        assert_rows_match(store, seen)
    split.close()


@needs_memfd
def test_a_reading_process_that_does_not_answer_is_stopped_within_its_bound(store, monkeypatch):
    monkeypatch.setattr(shard_process, "REPLY_TIMEOUT", 0.5)
    split = store_split(store, "process", seed=1)
    split.source.delay = 30.0  # each shard would take 30 s to come
    with pytest.raises(StreamError, match=r"train: shard \d \(examples .*\): the process reading "
                                          r"the shards did not answer within 0.5 s; it was stopped"):
        next(split.epoch(0))
    split.source.delay = 0.0
    assert sum(s.count for s in split.epoch(1)) == 2500  # a new process reads the next epoch
    split.close()


@needs_memfd
def test_closing_a_busy_reading_process_waits_at_most_its_bound(store, monkeypatch):
    """The process is asked to end, and killed if it has not ended within
    END_TIMEOUT: close() does not wait for the replies to every shard asked."""
    monkeypatch.setattr(shard_process, "END_TIMEOUT", 0.5)
    split = store_split(store, "process", seed=1, prefetch=2)
    shards = split.epoch(0)
    next(shards)
    child = split._reader._process._process
    os.kill(child.pid, signal.SIGSTOP)  # it cannot answer, nor end by itself
    split.close()
    assert child.poll() is not None
    assert split._pool.n_free == split.prefetch + 1


def test_shared_buffers_that_fail_midway_close_what_they_opened(monkeypatch):
    if not buffers.shared_memory_available():
        pytest.skip("needs Linux's memfd_create")
    before = set(os.listdir("/proc/self/fd"))
    real, made = os.memfd_create, []

    def third_fails(name, *args):
        if len(made) == 2:
            raise OSError(24, "Too many open files")
        made.append(real(name, *args))
        return made[-1]

    monkeypatch.setattr(buffers.os, "memfd_create", third_fails)
    with pytest.raises(OSError):
        buffers.BufferPool("train", 4, 10, 16, shared=True)
    assert set(os.listdir("/proc/self/fd")) <= before


# -- evaluation never computes over padding ----------------------------------------

@pytest.mark.parametrize("shard_size, chunk", [(100, 30), (100, 60), (120, 40), (80, 40)])
def test_a_streamed_evaluation_chunk_holds_real_examples_only(shard_size, chunk):
    """250 examples, shards of 100 (the last holds 50) and chunks of 30 or
    60, or shards of 120 or 80 (the last holds 10) and chunks of 40: every
    row of every chunk evaluated is a real example; and with shards of whole
    chunks, under normalize="batch" (each chunk centred on its own mean)
    the scores are those of the split held whole, whose last chunk is its
    last 40 examples."""
    rng = np.random.default_rng(0)
    images = rng.integers(1, 256, (250, 6), dtype=np.uint8)  # no zero pixel: padding would show
    codes, encoding = quantize(images)
    labels = np.arange(250)
    stream = StreamingSplit(ArrayShards(codes, labels), shard_size, encoding, (6,),
                            normalize="batch", prefetch=0, dtype="float64")

    def mean_pixel(x):  # per-example score under batch normalization: its centred mean
        return x.mean(axis=1)

    evaluated = []

    def on_the_stream(start):
        rows = np.asarray(stream.dataset.data.get_value(borrow=True))[start:start + chunk]
        held_labels = np.asarray(stream.y.get_value(borrow=True))[start:start + chunk]
        np.testing.assert_array_equal(rows, codes[held_labels])  # real examples, each its own
        evaluated.append(held_labels)
        floats = (rows.astype(np.float64) + 128) / 256
        return mean_pixel((floats - floats.mean()) / 128)

    def on_the_split(start):
        floats = (codes[start:start + chunk].astype(np.float64) + 128) / 256
        return mean_pixel((floats - floats.mean()) / 128)

    streamed = evaluate_in_chunks(on_the_stream, stream, chunk)
    expected = evaluate_in_chunks(on_the_split, 250, chunk)
    assert streamed[1] == expected[1] == 250
    assert len(np.unique(np.concatenate(evaluated))) == 250  # (each example scored)
    if shard_size % chunk == 0:  # the same chunks as the split held whole
        assert streamed[0] == pytest.approx(expected[0], rel=1e-9, abs=1e-15)
    stream.close()


# -- arrays are checked as SharedDataset checks them -----------------------------

def test_array_shards_refuse_what_a_shared_dataset_refuses():
    codes, _ = quantize(np.zeros((4, 3), np.uint8))
    with pytest.raises(ArgumentError, match=r"train: codes must be an int8 array of shape \(N, "
                                            r"\.\.\.\), got uint8 .*int8store\.quantize"):
        ArrayShards(np.full((4, 3), 200, np.uint8), np.arange(4))
    with pytest.raises(EncodingError, match="train labels: labels must be integers"):
        ArrayShards(codes, np.array([0.0, 1.5, 2.0, 3.0]))
    with pytest.raises(EncodingError, match="does not fit int32"):
        ArrayShards(codes, np.array([0, 1, 2, 2 ** 40]))
    with pytest.raises(ArgumentError, match="4 images but 3 labels"):
        ArrayShards(codes, np.arange(3))
    assert ArrayShards(codes, np.array([0.0, 1.0, 2.0, 3.0])).labels.dtype == np.int32
