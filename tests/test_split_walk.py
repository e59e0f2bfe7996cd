"""One split, one walk, one meaning (issue 45): every residency of a split
(held whole, over four devices, streamed) gives the same minibatches from
``minibatches()``, in order and shuffled, on the C backend as in JAX mode,
read through the classic slices ``x[i * B:(i + 1) * B]`` and ``y[...]``; an
index past the epoch is refused in each, never an empty or short
minibatch."""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import ROOT
from int8store import MinibatchIndexError, function_mode, load_splits, tensor_library
from int8store.dataset.split import Batch, Split

pytestmark = pytest.mark.floatx_blind

has_jax = importlib.util.find_spec("jax") is not None
MODES = ["c", pytest.param("jax", marks=pytest.mark.skipif(
    not has_jax, reason="JAX is not installed in this environment"))]
theano = tensor_library()
T = theano.tensor
B = 20


def classic_slices(split, mode):
    """``take(index)``: the labels and the float images the classic slices
    of ``split`` give at ``index``, compiled in ``mode``."""
    index = T.lscalar()
    take = theano.function([index], [split.y[index * B:(index + 1) * B],
                                      split.x[index * B:(index + 1) * B]],
                           mode=function_mode(mode))
    return lambda i: tuple(np.asarray(value) for value in take(i))


def walked(split, mode, epochs=(0, 1, 2)):
    """Each minibatch of each epoch, as the walk hands it out and the
    classic slices read it: ``[(epoch, number, labels, images)]``."""
    take = classic_slices(split, mode)
    seen = []
    for epoch in epochs:
        for batch in split.minibatches(epoch, B):
            assert isinstance(batch, Batch)
            labels, images = take(batch.index)
            seen.append((epoch, batch.number, labels, images))
    return seen


def digits(seed=None, mode="c"):
    split = load_splits("digits", mode=mode, seed=seed)["train"]
    assert isinstance(split, Split)
    return split


def assert_same(a, b):
    assert len(a) == len(b)
    for (ea, na, la, xa), (eb, nb, lb, xb) in zip(a, b):
        assert (ea, na) == (eb, nb)
        np.testing.assert_array_equal(la, lb)
        np.testing.assert_array_equal(xa, xb)


@pytest.mark.parametrize("seed", [None, 5])
def test_the_classic_slice_means_the_same_minibatch_in_c_and_jax_mode(seed):
    """Held whole, in order and shuffled: the C backend's classic slice is
    the walk's minibatch as JAX mode's is, bitwise, every epoch (epoch 2's
    last minibatch of a shuffled split too, which was an empty slice in C
    mode)."""
    if not has_jax:
        pytest.skip("JAX is not installed in this environment")
    in_c, in_jax = walked(digits(seed, "c"), "c"), walked(digits(seed, "jax"), "jax")
    assert len(in_c) == 3 * (1197 // B)
    assert_same(in_c, in_jax)
    orders = [np.concatenate([labels for e, _, labels, _ in in_c if e == epoch])
              for epoch in range(3)]
    if seed is None:
        assert all((order == orders[0]).all() for order in orders)
    else:  # a new order each epoch
        assert not (orders[0] == orders[1]).all() and not (orders[1] == orders[2]).all()


@pytest.mark.parametrize("mode", MODES)
def test_a_streamed_split_walks_the_same_minibatches_as_held_whole(mode, tmp_path):
    """In the split's own order, streamed in shards of 280 (each whole
    minibatch of each shard) and held whole give the same minibatches: the
    walk's index reads the shard now loaded."""
    from int8store.cli import main

    store = tmp_path / "digits.h5"
    assert main(["convert", "digits", "-o", str(store)]) == 0
    whole = load_splits(str(store), mode=mode)["train"]
    streamed = load_splits(str(store), mode=mode, max_device_bytes=280 * 68,
                           batch_size=B)["train"]
    # 1,197 examples: four shards of 14 minibatches and one of 77 examples
    # (3 minibatches): the 59 whole minibatches held whole make, the same rows
    assert streamed.shard_size == 280 and streamed.n_batches(B) == whole.n_batches(B) == 59
    assert_same(walked(whole, mode, (1,)), walked(streamed, mode, (1,)))
    streamed.close()


@pytest.mark.skipif(not has_jax, reason="JAX is not installed in this environment")
def test_a_shuffled_stream_walks_the_same_minibatches_in_c_and_jax_mode(tmp_path):
    """Streamed with a seed, the shards and their examples in a new order
    each epoch (a shuffle within and between shards, which keeps each shard
    read whole): the C backend (shards lent in the split's order, the step
    gathering each minibatch's rows by the shard's order) and JAX mode
    (shards copied in that order) give the same minibatches, bitwise."""
    from int8store.cli import main

    store = tmp_path / "digits.h5"
    assert main(["convert", "digits", "-o", str(store)]) == 0
    walks = {}
    for mode in ("c", "jax"):
        streamed = load_splits(str(store), mode=mode, max_device_bytes=280 * 68, batch_size=B,
                               seed=5)["train"]
        walks[mode] = walked(streamed, mode, (0, 1))
        streamed.close()
    assert_same(walks["c"], walks["jax"])
    first = np.concatenate([labels for e, _, labels, _ in walks["c"] if e == 0])
    second = np.concatenate([labels for e, _, labels, _ in walks["c"] if e == 1])
    assert not (first == second).all()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", [None, 5])
def test_an_index_past_the_epoch_is_refused(mode, seed):
    """Held whole in order: minibatch n_batches is past the split; shuffled,
    the index counts epochs, so only a negative one is; a streamed shard:
    past its own minibatches. Never an empty or short minibatch."""
    split = digits(seed, mode)
    take = classic_slices(split, mode)
    past = -1 if seed is not None else split.n_batches(B)
    with pytest.raises(MinibatchIndexError):
        take(past)
    labels, images = take(split.n_batches(B) - 1)
    assert labels.shape == (B,) and images.shape == (B, 64)


@pytest.mark.parametrize("mode", MODES)
def test_a_slice_whose_start_is_written_twice_is_a_minibatch_too(mode):
    """``x[i * B:i * B + B]`` (the start written out twice, two graphs of one
    value) is minibatch ``i`` as ``x[i * B:(i + 1) * B]`` is: past the
    split it is refused, not a short or empty slice on the C backend, and
    in JAX mode it compiles (a user trial: JAX refused its symbolic start)."""
    split = digits(None, mode)
    index = T.lscalar()
    take = theano.function([index], [split.y[index * B:index * B + B],
                                      split.x[index * B:index * B + B]], mode=function_mode(mode))
    last = split.n_batches(B) - 1
    for got, want in zip(take(last), classic_slices(split, mode)(last)):
        np.testing.assert_array_equal(np.asarray(got), want)
    with pytest.raises(MinibatchIndexError, match=f"minibatch index {last + 1} is outside"):
        take(last + 1)


def stream_of_100(mode):
    """A stream of 100 examples (labels 0..99) in shards of 40, and a
    function giving minibatch ``index``'s 10 labels."""
    from int8store.streaming.sources import ArrayShards
    from int8store.streaming.split import StreamingSplit
    from int8store import quantize

    codes, encoding = quantize(np.arange(100 * 4, dtype=np.uint8).reshape(100, 4))
    stream = StreamingSplit(ArrayShards(codes, np.arange(100)), 40, encoding, (4,), mode=mode,
                            prefetch=0)
    index = T.lscalar()
    return stream, theano.function([index], stream.y[index * 10:(index + 1) * 10],
                                   mode=function_mode(mode))


@pytest.mark.parametrize("held", ["whole", "streamed"])
def test_an_epoch_or_batch_size_that_is_no_whole_number_is_refused(held):
    # n_batches(True) counted minibatches of 1, and minibatches(-1, ...) drew
    # an order of its own (a user trial)
    from int8store import ArgumentError

    split = load_splits("digits", residency=held, max_device_bytes=None if held == "whole"
                        else 20000, batch_size=20)["train"]
    for bad in (True, 0, 2.5, "20"):
        with pytest.raises(ArgumentError, match="batch_size must be a positive integer"):
            split.n_batches(bad)
    for bad in (-1, 1.5, True, 1 << 32):  # (2**32 was epoch 0's order again)
        with pytest.raises(ArgumentError, match=f"epoch {bad!r}: expected a whole number from 0"):
            next(iter(split.minibatches(bad, 20)))
    assert split.n_batches(np.int64(20)) == split.n_batches(20) > 0
    if held == "streamed":
        split.close()


@pytest.mark.parametrize("held", ["whole", "streamed"])
def test_a_walk_is_refused_at_the_call_held_whole_as_streamed(held):
    """Held whole, minibatches() refused a bad epoch, batch size or start
    when called; streamed, only at its first minibatch (review)."""
    from int8store import ArgumentError

    split = load_splits("digits", residency=held, max_device_bytes=None if held == "whole"
                        else 20000, batch_size=20)["train"]
    count = split.n_batches(20)
    for epoch, batch_size, start in ((-1, 20, 0), (0, 0, 0), (0, 20, count + 1)):
        with pytest.raises(ArgumentError):
            split.minibatches(epoch, batch_size, start)
    assert len(list(split.minibatches(0, 20, count - 1))) == 1
    split.close()


@pytest.mark.parametrize("mode", MODES)
def test_an_index_past_a_shard_is_refused(mode):
    stream, take = stream_of_100(mode)
    assert [b.index for b in stream.minibatches(0, 10)] == [0, 1, 2, 3] * 2 + [0, 1]
    assert [b.ends_shard for b in stream.minibatches(0, 10)].count(True) == 3
    with pytest.raises(MinibatchIndexError):
        take(4)
    stream.close()


@pytest.mark.parametrize("mode", MODES)
def test_a_streamed_minibatch_kept_past_its_shard_is_refused_not_read_from_another(mode):
    # A list of the epoch's minibatches made first ran the whole pass: every
    # index then read the last shard, and a step trained on it in silence.
    from int8store import StreamError

    stream, take = stream_of_100(mode)
    as_reached = [np.asarray(take(b.index)).tolist() for b in stream.minibatches(0, 10)]
    assert sorted(sum(as_reached, [])) == list(range(100))
    batches = list(stream.minibatches(0, 10))
    with pytest.raises(StreamError, match="minibatch 0 of epoch 0 lay in a shard that has left"):
        batches[0].index
    assert (batches[0].number, batches[0][0], batches[0][2]) == (0, 0, False)  # (no index read)
    assert [np.asarray(take(b.index)).tolist() for b in batches[-2:]] == as_reached[-2:]
    stream.close()


FOUR_DEVICES = textwrap.dedent("""
    import json, sys
    import numpy as np
    import int8store
    from int8store import function_mode, load_splits, tensor_library
    lib = tensor_library(); T = lib.tensor
    B = 20
    out = {}
    for seed in (None, 5):
        split = load_splits("digits", mode="jax", devices=4, seed=seed)["train"]
        index = T.lscalar()
        take = lib.function([index], [split.y[index * B:(index + 1) * B]],
                            mode=function_mode("jax"))
        seen = [np.asarray(take(b.index)[0]).tolist()
                for epoch in (0, 1, 2) for b in split.minibatches(epoch, B)]
        try:
            take(-1 if seed is not None else split.n_batches(B))
            refused = False
        except int8store.MinibatchIndexError:
            refused = True
        out[str(seed)] = {"labels": seen, "refused": refused}
    print(json.dumps(out))
""")


@pytest.mark.devices
@pytest.mark.skipif(not has_jax, reason="JAX is not installed in this environment")
def test_over_four_devices_the_walk_gives_the_same_minibatches(tmp_path):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    done = subprocess.run([sys.executable, "-c", FOUR_DEVICES], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    for seed in (None, 5):
        # the same examples in each minibatch, the devices' in turn (each
        # device's B / 4 rows: Blocks.order)
        one = [sorted(labels.tolist()) for _, _, labels, _ in walked(digits(seed, "jax"), "jax")]
        assert [sorted(labels) for labels in seen[str(seed)]["labels"]] == one
        assert seen[str(seed)]["refused"]


@pytest.mark.slow
def test_the_tutorials_seed_works_on_the_c_backend(capsys):
    """--seed on a split held whole in C mode (it was refused): the same
    error lines as JAX mode's, whose order is the same."""
    import logistic_sgd

    lines = {}
    for mode in ["c"] + (["jax"] if has_jax else []):
        assert logistic_sgd.main(["--dataset", "digits", "--epochs", "4", "--batch-size", "20",
                                  "--save-model", "", "--mode", mode, "--seed", "3"]) == 0
        lines[mode] = [line for line in capsys.readouterr().out.splitlines()
                       if "validation error" in line and "epoch" in line]
    assert len(lines["c"]) == 4
    if has_jax:
        assert lines["c"] == lines["jax"]
