"""Stop anywhere, resume exactly: the tutorials' --checkpoint and --resume.

A run killed with SIGKILL at a step drawn at random and resumed from its
last checkpoint prints the error lines the uninterrupted run prints, and
ends with bitwise the same parameters (logistic regression and LeNet5, C
and JAX modes, a store held whole and streamed shuffled); a run stopped
(as by Ctrl-C) at a shard's boundary or in the middle of a shard goes on
from there; a stream resumed mid-epoch reads no shard before its start;
a checkpoint of another run is refused with the difference named."""

import importlib.util
import json
import os
import random
import re
import subprocess
import sys

import numpy as np
import pytest

import int8store
import logistic_sgd
from conftest import ROOT, old_jax
from int8store import ArgumentError, StreamingSplit, tensor_library
from int8store.training import RunCheckpoint, RunState
from int8store.training import runner

pytestmark = pytest.mark.floatx_blind

has_jax = importlib.util.find_spec("jax") is not None
needs_jax = pytest.mark.skipif(not has_jax, reason="JAX is not installed in this environment")
theano = tensor_library()

# (tutorial, mode, its arguments): every model, mode and way of holding the
# training split appears at least once.
RUNS = {
    "logistic-c-resident": ("logistic_sgd.py", "c", ["--batch-size", "20", "--epochs", "8"]),
    "logistic-jax-streamed": ("logistic_sgd.py", "jax", ["--batch-size", "20", "--epochs", "8",
                                                         "--max-device-bytes", "20000",
                                                         "--seed", "5"]),
    "lenet5-c-streamed": ("convolutional_mlp.py", "c", ["--batch-size", "50", "--epochs", "6",
                                                        "--nkerns", "4", "6",
                                                        "--max-device-bytes", "40000",
                                                        "--seed", "2"]),
    "lenet5-jax-resident": ("convolutional_mlp.py", "jax", ["--batch-size", "50", "--epochs", "6",
                                                            "--nkerns", "4", "6", "--seed", "3",
                                                            "--augment", "translate=1"]),
}


@pytest.fixture(scope="module")
def digits_store(tmp_path_factory):
    """The digits as a store: the runs below read it held whole or streamed."""
    from int8store.cli import main

    path = tmp_path_factory.mktemp("store") / "digits.h5"
    assert main(["convert", "digits", "-o", str(path)]) == 0
    return path


def tutorial(script, mode, arguments, checkpoint, cwd, resume=None, kill_after=None,
             dataset="digits"):
    """The error lines a tutorial run prints; with ``kill_after``, SIGKILLed
    once it has printed that many validation lines (the lines it printed
    before the signal reached it included)."""
    command = [sys.executable, str(ROOT / "tutorials" / script), "--dataset", str(dataset),
               "--mode", mode, "--save-model", "", "--checkpoint", str(checkpoint)] + arguments
    if resume:
        command += ["--resume", str(resume)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=cwd, env=env)
    lines, validations = [], 0
    for line in process.stdout:
        if "error" in line:
            lines.append(line.rstrip("\n"))
            validations += "validation error" in line
        if kill_after is not None and validations == kill_after:
            process.kill()
            break
    process.wait(timeout=600)
    # What the run printed before the kill reached it: on a busy machine it
    # may have gone past the line the kill was sent at (and checkpointed there).
    lines += [line.rstrip("\n") for line in process.stdout if "error" in line]
    stderr = process.stderr.read()
    process.stdout.close()
    process.stderr.close()
    if kill_after is None:
        assert process.returncode == 0, stderr
    return lines


def parameters(path):
    with np.load(path, allow_pickle=False) as held:
        return [held[name] for name in sorted(held.files) if name.startswith("param_")]


@pytest.mark.own_flags
@pytest.mark.parametrize("name", [pytest.param(n, marks=needs_jax) if "jax" in n else n
                                  for n in RUNS])
def test_a_run_killed_anywhere_and_resumed_ends_as_the_uninterrupted_one(tmp_path, name,
                                                                          digits_store):
    script, mode, arguments = RUNS[name]
    whole = tutorial(script, mode, arguments, tmp_path / "whole.npz", tmp_path,
                     dataset=digits_store)
    validations = sum("validation error" in line for line in whole)
    kill_after = random.Random().randint(2, validations - 1)  # (drawn anew each run)
    killed = tutorial(script, mode, arguments, tmp_path / "run.npz", tmp_path,
                      kill_after=kill_after, dataset=digits_store)
    resumed = tutorial(script, mode, arguments, tmp_path / "run.npz", tmp_path,
                       resume=tmp_path / "run.npz", dataset=digits_store)
    before = len(whole) - len(resumed)  # the lines printed before the checkpoint resumed from
    assert 0 < before <= len(killed), f"killed after validation {kill_after}"
    assert killed[:before] + resumed == whole, f"killed after validation {kill_after}"
    for ended, uninterrupted in zip(parameters(tmp_path / "run.npz"),
                                    parameters(tmp_path / "whole.npz")):
        assert (ended == uninterrupted).all() and ended.dtype == uninterrupted.dtype


def stopping_at(calls):
    """A stand-in for the run's stop_requested that asks to stop at its
    ``calls``-th call (the tutorial asks once a minibatch) and then says so."""
    count = [0]

    def stop_requested():
        count[0] += 1
        return count[0] >= calls

    return stop_requested


@pytest.mark.parametrize("stop_after", [14, 20], ids=["at a shard boundary", "inside a shard"])
def test_a_stream_stopped_at_a_shard_boundary_or_inside_one_goes_on_from_there(
        tmp_path, monkeypatch, stop_after, digits_store):
    # the store's 1,197 training examples in shards of 280: 14 minibatches of 20 a shard
    run = dict(dataset=str(digits_store), batch_size=20, n_epochs=3, model_path=None,
               max_device_bytes=20000, seed=7)
    whole = logistic_sgd.sgd_optimization_mnist(checkpoint=tmp_path / "whole", **run)
    assert whole["datasets"][0].shard_size == 280
    with monkeypatch.context() as patched:
        patched.setattr(runner, "stop_requested", stopping_at(stop_after))
        stopped = logistic_sgd.sgd_optimization_mnist(checkpoint=tmp_path / "run", **run)
    assert stopped["interrupted"]
    assert not (stopped["params"][0] == whole["params"][0]).all()  # (stopped before the end)
    resumed = logistic_sgd.sgd_optimization_mnist(checkpoint=tmp_path / "run",
                                                  resume=tmp_path / "run", **run)
    assert not resumed["interrupted"]
    for ended, uninterrupted in zip(resumed["params"], whole["params"]):
        assert (ended == uninterrupted).all()
    assert resumed["best_validation_loss"] == whole["best_validation_loss"]
    assert resumed["test_score"] == whole["test_score"]


def test_the_mlp_stopped_mid_epoch_goes_on_from_there(tmp_path, monkeypatch):
    import mlp

    run = dict(dataset="digits", batch_size=20, n_epochs=2, n_hidden=16)
    whole = mlp.test_mlp(checkpoint=tmp_path / "whole", **run)
    with monkeypatch.context() as patched:
        patched.setattr(runner, "stop_requested", stopping_at(37))  # epoch 1, minibatch 37
        assert mlp.test_mlp(checkpoint=tmp_path / "run", **run)["interrupted"]
    resumed = mlp.test_mlp(checkpoint=tmp_path / "run", resume=tmp_path / "run", **run)
    assert all((a == b).all() for a, b in zip(resumed["params"], whole["params"]))
    assert (resumed["best_validation_loss"], resumed["best_iter"]) == \
        (whole["best_validation_loss"], whole["best_iter"])


@pytest.mark.parametrize("mode, steps", [pytest.param("jax", None, marks=needs_jax),
                                         ("c", 10)], ids=["jax, an epoch a call", "c, 10 a call"])
def test_a_run_of_many_updates_a_call_stopped_mid_call_goes_on_from_there(tmp_path, monkeypatch,
                                                                        mode, steps):
    # The loop sees a call's minibatches after the call made them all: a stop
    # at the 25th was checkpointed there with 30 (or 59) updates made, and the
    # resume made the rest of the call again: another run than the one stopped.
    run = dict(dataset="digits", batch_size=20, n_epochs=2, model_path=None, mode=mode,
               steps_per_call=steps)
    whole = logistic_sgd.sgd_optimization_mnist(checkpoint=tmp_path / "whole", **run)
    with monkeypatch.context() as patched:
        patched.setattr(runner, "stop_requested", stopping_at(25))
        stopped = logistic_sgd.sgd_optimization_mnist(checkpoint=tmp_path / "run", **run)
    assert stopped["interrupted"]
    resumed = logistic_sgd.sgd_optimization_mnist(checkpoint=tmp_path / "run",
                                                  resume=tmp_path / "run", **run)
    assert all((a == b).all() for a, b in zip(resumed["params"], whole["params"]))
    assert resumed["best_validation_loss"] == whole["best_validation_loss"]


@pytest.mark.parametrize("reader", ["views", "threads"])
def test_a_stream_resumed_mid_epoch_reads_no_shard_before_its_start(tmp_path, reader):
    from sklearn.datasets import load_digits

    from int8store import convert
    from int8store.streaming.sources import StoreShards

    digits = load_digits()
    images = (digits.images * 16).astype(np.uint8)
    np.savez(tmp_path / "digits.npz", x_train=images[:1000], y_train=digits.target[:1000],
             x_test=images[1000:], y_test=digits.target[1000:])
    store = convert(str(tmp_path / "digits.npz"), str(tmp_path / "digits.h5"), valid_size=100,
                    valid_seed=0)
    source = StoreShards(store, "train")
    read = []
    for method in ("lend", "read"):
        original = getattr(source, method)

        def counted(start, stop, *rest, original=original):
            read.append(start)
            return original(start, stop, *rest)

        setattr(source, method, counted)
    stream = StreamingSplit(source, 100, source.store.encoding, (8, 8), seed=3, prefetch=0,
                            reader=reader, workers=1)
    try:
        order = stream.shard_order(2)
        first, before, skip = stream.layout.start_of(2, 20, 27)  # shards of 5 minibatches
        assert (first, before, skip) == (5, 25, 2)
        # (each index read while its shard is loaded, as a training loop reads it)
        taken = [(batch.number, batch.index) for batch in stream.minibatches(2, 20, start=27)]
        assert [number for number, _ in taken] == list(range(27, 45))
        assert taken[0][1] == 2  # the third minibatch of its shard
        skipped = {order[place] * 100 for place in range(first)}
        assert read and not skipped & set(read)
        assert read[0] == order[first] * 100
    finally:
        stream.close()


def test_a_centred_normalization_is_recorded_with_its_spread_where_0_3_1_used_another():
    # 0.3.1 divided levels by 128 whatever the divisor, and a codebook by half
    # its range as now: only the first kind of run is recorded anew.
    from int8store import SharedDataset, quantize
    from int8store.training.run import run_identity

    def identity(values, normalize, **kwargs):
        codes, encoding = quantize(values, **kwargs)
        split = SharedDataset(codes, np.zeros(len(codes), np.int32), encoding, normalize=normalize,
                              dtype="float32")
        return run_identity("p", [split], [], 10, normalize=normalize)["normalize"]

    pixels = np.arange(256, dtype=np.uint8).reshape(16, 16)
    assert identity(pixels, "dataset") == "dataset"
    assert identity(pixels % 17, "batch", divisor=16) == "batch / 8"
    assert identity(np.array([[0.0, 3.7], [1000.0, 2.5]]), "dataset") == "dataset"  # (a codebook)
    assert identity(pixels % 17, "unit", divisor=16) == "unit"


def test_a_checkpoint_of_another_run_is_refused_with_the_difference_named(tmp_path):
    run = dict(dataset="digits", batch_size=20, n_epochs=1, model_path=None)
    logistic_sgd.sgd_optimization_mnist(checkpoint=tmp_path / "run", **run)
    for changed, message in [({"batch_size": 30}, r"the batch size differs \(20 then, 30 now\); "
                              r"resume with --batch-size 20 \(the batch the run took, after any "
                              "cut"),  # (a run on 4 devices took 48 of 50: 50 on 2 was refused)
                             ({"max_device_bytes": 20000, "seed": 4},
                              r"the seed \(--seed\) differs \(not given then, 4 now\)"),
                             # (each went on silently, another run than the one stopped)
                             # (the digits' levels 0..16 are centred and divided by 8:
                             # 0.3.1 divided by 128, and its checkpoints say "dataset")
                             ({"normalize": "dataset"}, r"the images' normalization "
                              r"\(--normalize\) differs \('unit' then, 'dataset / 8' now\)"),
                             ({"learning_rate": 0.5}, r"the learning rate \(--learning-rate\) "
                              r"differs \(0.13 then, 0.5 now\)"),
                             # (scored over 294 examples after, 300 before)
                             ({"classic_count": True}, r"how the splits are scored "
                              r"\(--classic-count\) differs \(False then, True now\)")]:
        with pytest.raises(ArgumentError, match=message):
            logistic_sgd.sgd_optimization_mnist(resume=tmp_path / "run", **{**run, **changed})
    # streamed from the same data: the same run (each split's digest agrees)
    logistic_sgd.sgd_optimization_mnist(resume=tmp_path / "run", max_device_bytes=20000, **run)
    # ...but not under a seed, whose stream shuffles by shard: the resume went
    # on in another order (9.67 % where the run it stopped printed 10.33 %)
    logistic_sgd.sgd_optimization_mnist(checkpoint=tmp_path / "seeded", seed=3, **run)
    with pytest.raises(ArgumentError, match=r"how the shuffled training split is held \(--max-"
                                            r"device-bytes, --max-memory\) differs \('whole' "
                                            r"then, 'streamed in shards of \d+ examples, the "
                                            r"short one drawn each epoch' now\)"):
        logistic_sgd.sgd_optimization_mnist(resume=tmp_path / "seeded", seed=3,
                                            max_device_bytes=20000, **run)
    images = (np.arange(40 * 64) % 17).reshape(40, 8, 8).astype(np.uint8)
    np.savez(tmp_path / "other.npz", x_train=images, y_train=np.arange(40) % 10,
             x_test=images[:20], y_test=np.arange(20) % 10)
    with pytest.raises(ArgumentError, match=r"the data differs \(splits train, valid, test hold "
                                            r"other examples or labels: BLAKE3 \w{12}/\w{12}/\w{12} "
                                            r"then, \w{12}/\w{12}/\w{12} now\)"):
        logistic_sgd.sgd_optimization_mnist(resume=tmp_path / "run", **{
            **run, "dataset": str(tmp_path / "other.npz")})
    # The same codes and labels at another scale (levels / 255, not / 16):
    # other images, and the resumed run printed 18 % where the run had 4 %.
    from int8store.sources.digits import read_digits

    digits = read_digits()
    np.savez(tmp_path / "same_levels.npz", **{f"{kind}_{name}": array
             for name, split in digits.splits.items()
             for kind, array in zip("xy", (split.images(), split.labels))})
    with pytest.raises(ArgumentError, match=r"the values the images' codes stand for \(their "
                                            r"scale or codebook\) differs"):
        logistic_sgd.sgd_optimization_mnist(resume=tmp_path / "run", **{
            **run, "dataset": str(tmp_path / "same_levels.npz")})
    # fewer epochs than the run had made: nothing ran, and it said "epochs 1"
    logistic_sgd.sgd_optimization_mnist(checkpoint=tmp_path / "two", **{**run, "n_epochs": 2})
    with pytest.raises(ArgumentError, match=r"two.npz: the run stopped in epoch 2, past the 1 "
                                            r"asked \(--epochs 1\): ask for 2 or more"):
        logistic_sgd.sgd_optimization_mnist(resume=tmp_path / "two", **run)
    with pytest.raises(ArgumentError, match="not a run checkpoint"):
        np.savez(tmp_path / "model.npz", W=np.zeros(3))
        logistic_sgd.sgd_optimization_mnist(resume=tmp_path / "model.npz", **run)


def test_a_resumed_run_times_the_epochs_it_ran(tmp_path, capsys):
    """A run resumed once it had ended said "The code run for 2 epochs, with
    380 epochs/sec", though it ran none."""
    run = dict(dataset="digits", batch_size=20, model_path=None, checkpoint=tmp_path / "run")
    logistic_sgd.sgd_optimization_mnist(n_epochs=2, **run)
    assert "The code run for 2 epochs, with " in capsys.readouterr().out
    logistic_sgd.sgd_optimization_mnist(n_epochs=2, resume=tmp_path / "run", **run)
    out = capsys.readouterr().out
    assert "The run was complete at epoch 2 when resumed: no epoch was run\n" in out
    assert "The code run for" not in out
    logistic_sgd.sgd_optimization_mnist(n_epochs=4, resume=tmp_path / "run", **run)
    assert "The code run for 2 epochs, with " in capsys.readouterr().out


def test_a_run_that_ends_between_validations_checkpoints_its_end(tmp_path, capsys):
    """With more minibatches an epoch than half the patience, the classic
    loop validates every 2,500: a run of 3,000 ended with a checkpoint of
    minibatch 2,500, so a resume made the last 500 updates again (review)."""
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "many.npz", x_train=rng.integers(0, 256, (3010, 2, 2), dtype=np.uint8),
             y_train=np.arange(3010) % 2, x_valid=rng.integers(0, 256, (10, 2, 2), dtype=np.uint8),
             y_valid=np.arange(10) % 2, x_test=rng.integers(0, 256, (10, 2, 2), dtype=np.uint8),
             y_test=np.arange(10) % 2)
    run = dict(dataset=tmp_path / "many.npz", batch_size=1, model_path=None)
    logistic_sgd.sgd_optimization_mnist(n_epochs=1, checkpoint=tmp_path / "one", **run)
    with np.load(tmp_path / "one.npz") as held:
        state = json.loads(bytes(held["int8store_run"]))
    assert (state["epoch"], state["step"]) == (1, 3010)
    logistic_sgd.sgd_optimization_mnist(n_epochs=2, checkpoint=tmp_path / "whole", **run)
    logistic_sgd.sgd_optimization_mnist(n_epochs=2, resume=tmp_path / "one",
                                        checkpoint=tmp_path / "one", **run)
    assert "resumed from" in capsys.readouterr().out
    for ended, uninterrupted in zip(parameters(tmp_path / "one.npz"),
                                    parameters(tmp_path / "whole.npz"), strict=True):
        assert (ended == uninterrupted).all()


def test_an_augmentation_written_another_way_is_the_same_run(tmp_path):
    run = dict(dataset="digits", batch_size=20, n_epochs=1, model_path=None)
    logistic_sgd.sgd_optimization_mnist(checkpoint=tmp_path / "run", augment="translate=1,cutout=2",
                                        **run)
    logistic_sgd.sgd_optimization_mnist(resume=tmp_path / "run", checkpoint=tmp_path / "again",
                                        augment="cutout=2, translate=1, fill=zero", **run)
    with pytest.raises(ArgumentError, match=r"the augmentation \(--augment\) differs"):
        logistic_sgd.sgd_optimization_mnist(resume=tmp_path / "run", augment="translate=2", **run)
    # A fill with no translation, refused since (it did nothing), that an older
    # checkpoint recorded, is the same run as one without it: still resumed.
    from int8store.training.run import _augmentation_key

    assert _augmentation_key("translate=0,fill=edge,flip=random,cutout=0") == \
        _augmentation_key("flip") == "translate=0,fill=zero,flip=random,cutout=0"


def test_a_checkpoint_from_before_the_normalization_was_recorded_still_resumes(tmp_path):
    from int8store.training import run as run_files

    run = dict(dataset="digits", batch_size=20, n_epochs=1, model_path=None)
    logistic_sgd.sgd_optimization_mnist(checkpoint=tmp_path / "run", **run)
    path = tmp_path / "run.npz"
    with np.load(path) as held:
        arrays = dict(held)
    description = json.loads(arrays[run_files.RUN_DESCRIPTION].tobytes())
    for key in run_files._RECORDED_SINCE_0_3_1:
        del description["identity"][key]
    arrays[run_files.RUN_DESCRIPTION] = np.frombuffer(json.dumps(description).encode(), np.uint8)
    np.savez(path, **arrays)
    logistic_sgd.sgd_optimization_mnist(resume=path, **{**run, "n_epochs": 2})


def test_a_split_has_one_digest_held_whole_streamed_or_from_its_source(tmp_path, monkeypatch):
    """A run's identity names its data by BLAKE3, so one split held whole,
    streamed from its store, or read from the store's source must have one
    digest: the store's used to cover its last chunk's zero padding, and a
    run stopped held whole was refused when resumed streamed (or the other
    way) wherever a split's count was not a whole number of chunks."""
    from int8store.cli import main
    from int8store.store import writer
    from int8store.streaming.sources import StoreShards

    monkeypatch.setattr(writer, "CHUNK_BYTES", 64 * 16)  # 16 digits a chunk: 1,197 = 74 x 16 + 13
    store = tmp_path / "digits.h5"
    assert main(["convert", "digits", "-o", str(store)]) == 0
    held = int8store.load_splits(str(store))
    source = int8store.load_splits("digits")
    for name in ("train", "valid", "test"):
        streamed = StoreShards(str(store), name).digest()
        assert held[name].digest() == streamed == source[name].digest(), name


def test_the_checkpoint_holds_a_few_integers_of_data_position(tmp_path):
    w = theano.shared(np.arange(3.0), name="w")
    identity = int8store.training.run_identity("demo", [], [w], 10, seed=1)
    run = RunCheckpoint(tmp_path / "run", [w], identity)
    run.save(RunState(4, 17, {"patience": 5000, "best_validation_loss": float("inf")},
                      [np.ones(3)]))
    w.set_value(np.zeros(3))
    state = run.resume(tmp_path / "run.npz")
    assert (state.epoch, state.step) == (4, 17) and identity["seed"] == 1
    assert state.loop == {"patience": 5000, "best_validation_loss": float("inf")}
    assert w.get_value().tolist() == [0.0, 1.0, 2.0] and state.best[0].tolist() == [1.0] * 3
    other = RunCheckpoint(None, [theano.shared(np.zeros(4), name="w")],
                          int8store.training.run_identity("demo", [], [theano.shared(np.zeros(4), name="w")],
                                                 10, seed=1))
    with pytest.raises(ArgumentError, match=r"the model differs \(parameter 0 w: 3 float64 "
                                            r"then, 4 float64 now\)"):
        other.resume(tmp_path / "run.npz")
    # Of many parameters, the one that differs is named (a shortened list of
    # all of them cut it out: "parameter 4 8 ... 64").
    many = [theano.shared(np.zeros(shape), name=f"p{i}") for i, shape in
            enumerate([(20, 1, 5, 5), (20,), (50, 20, 5, 5), (50,), (800, 500), (500,)])]
    RunCheckpoint(tmp_path / "many", many, int8store.training.run_identity(
        "demo", [], many, 10)).save(RunState(1, 0))
    many[2] = theano.shared(np.zeros((51, 20, 5, 5)), name="p2")
    with pytest.raises(ArgumentError, match=r"the model differs \(parameter 2 p2: 50x20x5x5 "
                                            r"float64 then, 51x20x5x5 float64 now\)"):
        RunCheckpoint(None, many, int8store.training.run_identity("demo", [], many, 10)).resume(
            tmp_path / "many.npz")


def lenet(nkerns, dtype="float64"):
    """LeNet5's parameters as the tutorial makes them (unnamed)."""
    shapes = [(nkerns[0], 1, 5, 5), (nkerns[0],), (nkerns[1], nkerns[0], 5, 5), (nkerns[1],),
              (nkerns[1] * 16, 500), (500,), (500, 10), (10,)]
    return [theano.shared(np.zeros(shape, dtype)) for shape in shapes]


def resumed_with(path, params):
    identity = int8store.training.run_identity("demo", [], params, 10)
    with pytest.raises(ArgumentError) as refusal:
        RunCheckpoint(None, params, identity).resume(path)
    return str(refusal.value)


def test_a_model_that_differs_in_many_parameters_is_named_in_whole_entries(tmp_path):
    """--nkerns 4 8 then 5 8: three parameters differ, and the message's
    shortening to 160 characters cut one in two ("... 6 5x3x5x5 float64 now;")."""
    params = lenet((4, 8))
    RunCheckpoint(tmp_path / "run", params, int8store.training.run_identity(
        "demo", [], params, 10)).save(RunState(1, 0))
    for nkerns, differ in [((5, 8), 3), ((6, 9), 5)]:
        message = resumed_with(tmp_path / "run.npz", lenet(nkerns))
        detail = re.search(r"the model differs \((.*)\); resume with", message).group(1)
        entries = detail.split("; ")
        more = re.fullmatch(r"and (\d+) more", entries[-1])
        shown = entries[:-1] if more else entries
        assert shown[0] == f"parameter 0: 4x1x5x5 float64 then, {nkerns[0]}x1x5x5 float64 now"
        for entry in shown:
            assert re.fullmatch(r"parameter \d: [0-9x]+ float64 then, [0-9x]+ float64 now",
                                entry), message
        assert len(shown) + (int(more.group(1)) if more else 0) == differ, message
        assert len(detail) <= 160 and "..." not in detail, message
    assert more, message  # (the five of 6 9 do not fit)


def test_a_model_of_another_float_type_names_the_flag_it_was_written_under(tmp_path):
    """A float32 checkpoint resumed under float64 said only '... float32
    then, ... float64 now'."""
    written = lenet((4, 8), "float32")
    RunCheckpoint(tmp_path / "run", written, int8store.training.run_identity(
        "demo", [], written, 10)).save(RunState(1, 0))
    flags = f"{theano.__name__.upper()}_FLAGS"
    message = resumed_with(tmp_path / "run.npz", lenet((4, 8), "float64"))
    assert message.endswith(f"; it was written under floatX=float32: resume with "
                            f"{flags}=floatX=float32, or start afresh"), message
    # another shape besides: another model, whatever the float type
    message = resumed_with(tmp_path / "run.npz", lenet((5, 8), "float64"))
    assert "floatX" not in message and "resume with what it was written with" in message


@pytest.mark.devices
@pytest.mark.skipif(not has_jax or old_jax(),
                    reason="needs JAX >= 0.12: older XLA:CPU runtimes can deadlock a step "
                           "that reduces over forced CPU devices when the cores are busy "
                           "(conftest.old_jax)")
@pytest.mark.parametrize("seed", [[], ["--seed", "5"]], ids=["in order", "shuffled"])
def test_any_device_count_trains_alike_and_a_run_stopped_on_four_resumes_on_two(tmp_path, seed):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}

    def lines(devices, epochs, checkpoint, resume=None):
        command = [sys.executable, str(ROOT / "tutorials" / "logistic_sgd.py"), "--dataset",
                   "digits", "--mode", "jax", "--devices", str(devices), "--epochs", str(epochs),
                   "--batch-size", "20", "--save-model", "", "--checkpoint", str(checkpoint)]
        run = subprocess.run(command + seed + (["--resume", str(resume)] if resume else []),
                             capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        return [l for l in run.stdout.splitlines() if "error" in l]

    # (two devices are shown by the resumed run: its lines are the four's)
    whole = {devices: lines(devices, 6, tmp_path / f"whole{devices}") for devices in (1, 4)}
    assert whole[1] == whole[4] and len(whole[4]) >= 8
    first = lines(4, 3, tmp_path / "run")
    rest = lines(2, 6, tmp_path / "run", resume=tmp_path / "run")
    summary = [l for l in first if l.startswith(("best", "test error "))]
    assert [l for l in first if l not in summary] + rest == whole[4]
    # the same minibatches; a reduction over 2 devices adds in another order than over 4
    for resumed, uninterrupted in zip(parameters(tmp_path / "run.npz"),
                                      parameters(tmp_path / "whole4.npz")):
        np.testing.assert_allclose(resumed, uninterrupted, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("loop, refused", [
    ({"patience": 7498.5}, None),
    ({"best_validation_loss": 1.7}, "the loop's best_validation_loss is 1.7, expected a number "
                                    "from 0 to 1"),
    ({"patience": np.int64(5000), "best_validation_loss": np.float32(0.25),
      "finished": np.bool_(False)}, None)],
    ids=["a float patience", "a loss above 1", "numpy's scalars"])
def test_a_checkpoint_is_written_only_as_a_resume_reads_it(tmp_path, loop, refused):
    # A patience of 7498.5 (patience_increase = 1.5) was written at every
    # validation and refused by every resume, as a loss above 1 still is (it is
    # refused when written now); numpy's scalars (a mean of float32 errors)
    # failed the write with a TypeError.
    w = theano.shared(np.zeros(3), name="w")
    identity = {"program": "demo", "data": [], "model": [["w", [3], "float64"]],
                "batch_size": 10, "seed": None, "augmentation": None, "augment_seed": None}
    run = RunCheckpoint(tmp_path / "run", [w], identity, loop=list(loop), batches=100)
    if refused:
        with pytest.raises(ArgumentError, match=re.escape(refused)):
            run.save(RunState(epoch=2, step=5, loop=loop))
        assert not (tmp_path / "run.npz").exists()
        return
    state = run.resume(run.save(RunState(epoch=2, step=5, loop=loop)))
    assert state.loop == loop and all(type(value) in (int, float, bool)
                                      for value in state.loop.values())


def test_a_batch_cut_by_smaller_shards_is_refused_with_advice_that_can_be_followed(tmp_path):
    # A run held whole at batch 300 resumed streamed in shards of fewer
    # examples was told "resume with --batch-size 300", which it had been
    # given: the shards cut it again, and the same refusal came back.
    run = dict(dataset="digits", batch_size=300, n_epochs=1, model_path=None)
    logistic_sgd.sgd_optimization_mnist(checkpoint=tmp_path / "run", **run)
    with pytest.raises(ArgumentError, match=r"the batch size differs \(300 then, \d+ now\); a "
                                            r"shard here holds \d+ examples \(--max-device-bytes, "
                                            r"--max-memory\), fewer than the 300 a minibatch of "
                                            r"the run took: resume with shards that hold them"):
        logistic_sgd.sgd_optimization_mnist(resume=tmp_path / "run", max_device_bytes=8000,
                                            **{**run, "n_epochs": 2})
    # with shards that hold the batch, it goes on
    logistic_sgd.sgd_optimization_mnist(resume=tmp_path / "run", max_device_bytes=40000,
                                        **{**run, "n_epochs": 2})
