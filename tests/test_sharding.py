"""A split over several devices (JAX's sharding, on 4 CPU devices forced
with XLA_FLAGS): each device holds exactly its block of int8 rows, the
compiled step gathers no data, and the results equal one device fed the same
examples in the same order.

JAX fixes its device count when it starts, so the multi-device checks run in
a process of their own (``sharded_run``), which prints what it saw as JSON.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import ROOT
from int8store.order.blocks import Blocks

# Several devices or processes: PyTensor's float64 run leaves these out (its
# float32 run and Aesara's JAX run have them; scripts/test.sh).
pytestmark = pytest.mark.devices

needs_jax = pytest.mark.skipif(
    subprocess.run([sys.executable, "-c", "import jax"], capture_output=True).returncode != 0,
    reason="JAX is not installed in this environment")


# -- the layout: a pure function of (device, device count, split length) -------------

def test_rows_are_spread_over_the_devices_and_padding_is_never_trained_on():
    blocks = Blocks(10, 4)
    assert blocks.rows_per_device == 3 and blocks.padded_rows == 12
    assert [list(blocks.rows_of(d)) for d in range(4)] == [[0, 4, 8], [1, 5, 9], [2, 6], [3, 7]]
    assert blocks.fewest_rows == 2 and blocks.n_batches(4) == 2  # as on one device: 10 // 4
    np.testing.assert_array_equal(blocks.global_rows(1, 2),
                                  [[4, 8], [5, 9], [6, -1], [7, -1]])
    # minibatch i is rows [i*B, (i+1)*B) whatever the count: B/D of each device, in turn
    np.testing.assert_array_equal(Blocks(16, 4).order(8), [0, 4, 1, 5, 2, 6, 3, 7,
                                                           8, 12, 9, 13, 10, 14, 11, 15])
    for devices in (1, 2, 4, 8):
        order = Blocks(40, devices).order(8).reshape(5, 8)
        assert [sorted(m) for m in order.tolist()] == [list(range(8 * i, 8 * i + 8))
                                                       for i in range(5)]
    held = Blocks(10, 4).on_devices(np.arange(10))
    assert held.tolist() == [0, 4, 8, 1, 5, 9, 2, 6, 0, 3, 7, 0]
    assert Blocks(10, 4).in_split_order(held).tolist() == list(range(10))
    with pytest.raises(ValueError, match="multiple of 4"):
        blocks.n_batches(6)
    with pytest.raises(ValueError, match="3 examples cannot be split over 4 devices"):
        Blocks(3, 4)
    with pytest.raises(ValueError, match="the split is empty"):
        Blocks(0, 1)
    assert Blocks(4, 4).fewest_rows == 1  # every count from the device count on


def test_the_process_helpers_set_up_no_graph_library_and_start_no_jax():
    """start_processes must run before anything else uses JAX: reaching it
    (and is_main_process) imports neither JAX nor PyTensor or Aesara."""
    code = ("import sys, int8store; int8store.parallel.start_processes, int8store.parallel.is_main_process(); "
            "print(sorted(m for m in ('jax', 'pytensor', 'aesara') if m in sys.modules))")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == ["[]"]


@pytest.mark.timeout(10)
def test_a_shuffled_epoch_is_the_same_minibatches_on_1_2_4_and_8_devices():
    orders = {d: Blocks(1197, d).order(40, seed=3, epoch=2).reshape(-1, 40)
              for d in (1, 2, 4, 8)}
    for devices, order in orders.items():
        assert order.shape == (29, 40)
        assert [sorted(m) for m in order.tolist()] == [sorted(m) for m in orders[1].tolist()]
    whole = orders[1].reshape(-1)
    assert len(set(whole.tolist())) == len(whole) and whole.max() < 1197
    assert not (np.sort(whole[:40]) == np.arange(40)).all()  # shuffled
    with pytest.raises(ValueError, match="device counts dividing 8"):
        Blocks(1197, 3).order(39, seed=3)
    # No whole minibatch: an empty order, at once; more than there are: refused.
    assert Blocks(7, 4).order(8, seed=3).tolist() == []
    with pytest.raises(ValueError, match=r"n_batches=3: 8 examples make 2 whole minibatches "
                                         r"of 4; ask for 0 to 2"):
        Blocks(8, 4).order(4, n_batches=3, seed=1)
    # seed and epoch by name: order(40, 3, 1), as docs/devices.md once wrote
    # it, was 3 minibatches under seed 1, epoch 0, without a word
    with pytest.raises(TypeError):
        Blocks(1197, 4).order(40, 3, 1)


@pytest.mark.timeout(10)
def test_a_shuffle_of_an_empty_domain_raises_instead_of_walking_forever():
    from int8store.order.shuffle import permuted

    with pytest.raises(ValueError, match=r"empty domain \(n = 0\) has no row for position 0"):
        permuted(np.arange(3), 0, 1, 0)
    with pytest.raises(ValueError, match="empty domain"):  # one device's domain empty
        permuted(np.arange(2)[None, :], np.array([[3], [0]]), 7, 1)
    with pytest.raises(ValueError, match=r"position 5 is outside the shuffle's domain \[0, 5\)"):
        permuted(np.arange(5, 8), 5, 1, 0)  # would give a row twice
    assert permuted(np.arange(0), 0, 1, 0).tolist() == []  # nothing to fill: nothing to do


@needs_jax
@pytest.mark.timeout(60, method="thread")  # a signal cannot stop XLA's loop: end the run
def test_the_device_shuffle_ends_for_positions_outside_their_domain():
    import jax
    import jax.numpy as jnp

    from int8store.backend.jax.shuffle import permuted_jax
    from int8store.order.shuffle import permuted

    with pytest.raises(ValueError, match=r"empty domain \(n = 0\)"):
        permuted_jax(jnp.arange(3), 0, 4, 1, 0)
    # Traced positions cannot be refused on the device: those outside their
    # domain are not walked (JAX's while_loop would never end), the others
    # give numpy's rows. int8store's JAX mode checks indices on the host.
    shuffled = jax.jit(lambda p, n: permuted_jax(p, n, 8, 1, 0))
    rows = np.asarray(shuffled(jnp.arange(8), jnp.asarray(5)))
    np.testing.assert_array_equal(rows[:5], permuted(np.arange(5), 5, 1, 0))
    rows = np.asarray(shuffled(jnp.arange(3), jnp.asarray(0)))  # an empty traced domain
    assert rows.shape == (3,)


def test_evaluation_over_blocks_counts_each_real_example_once():
    from int8store.training import evaluate_in_chunks

    blocks = Blocks(10, 4)
    padded = blocks.on_devices(np.arange(10, dtype=float)).reshape(4, 3)  # row r scores r

    def evaluate(start):  # what a sharded window gives: 1 row from each device
        return padded[:, start:start + 1].reshape(-1)

    mean, count = evaluate_in_chunks(evaluate, blocks, 4)
    assert count == 10 and mean == pytest.approx(np.arange(10).mean())
    assert evaluate_in_chunks(lambda s: padded[:, s:s + 2].reshape(-1), blocks, 8) == (
        pytest.approx(np.arange(10).mean()), 10)  # an overlapping last window


# -- on 4 devices ----------------------------------------------------------------------

RUN = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, {tutorials!r})
    import int8store
    from int8store import load_splits, SharedDataset
    from int8store.training import evaluate_in_chunks
    lib = int8store.tensor_library(); T = lib.tensor
    B, EPOCHS = 100, 3

    def trainer(devices, order=None):
        splits = load_splits("digits")
        train, valid = splits["train"], splits["valid"]
        if order is not None:  # one device, fed the examples in the sharded order
            codes = np.asarray(train.data.get_value())[order]
            labels = np.asarray(train.y.get_value())[order]
            train = SharedDataset(codes, labels, train.encoding, name="train",
                                  dtype=lib.config.floatX)
        int8store.place([train, valid], "jax", devices=devices)
        W = lib.shared(np.zeros((64, 10), dtype=lib.config.floatX), shape=(64, 10))
        b = lib.shared(np.zeros(10, dtype=lib.config.floatX), shape=(10,))
        x, y, i, start = T.matrix(), T.ivector(), T.lscalar(), T.lscalar()
        p = T.special.softmax(T.dot(x, W) + b, axis=-1)
        cost = -T.mean(T.log(p)[T.arange(y.shape[0]), y])
        mode = int8store.function_mode("jax")
        step = lib.function([i], cost, mode=mode,
                            updates=[(W, W - 0.13 * T.grad(cost, W)),
                                     (b, b - 0.13 * T.grad(cost, b))],
                            givens={{x: train.x[i * B:(i + 1) * B], y: train.y[i * B:(i + 1) * B]}})
        errors = lib.function([start], T.neq(T.argmax(p, axis=1), y), mode=mode,
                              givens={{x: valid.x[start:start + B], y: valid.y[start:start + B]}})
        int8store.keep_on_device([W, b], [step, errors], devices=devices)

        def scores(chunk, classic=False):  # a call a window, and one call in all
            givens = {{x: valid.x[start:start + chunk], y: valid.y[start:start + chunk]}}
            window = lib.function([start], T.neq(T.argmax(p, axis=1), y), mode=mode,
                                  givens=givens)
            one_call = int8store.training.scoring_function([start], T.neq(T.argmax(p, axis=1), y),
                                                  givens, valid, chunk, classic, mode="jax")
            return (evaluate_in_chunks(window, valid.blocks or valid, chunk, classic),
                    one_call(), one_call.calls)

        train.scores = scores
        return train, valid, step, errors, W

    train4, valid4, step4, errors4, W4 = trainer(4)
    n = train4.n_batches(B)
    shards = train4.data.container.storage[0].addressable_shards
    label_shards = train4.y.container.storage[0].addressable_shards
    args = [np.asarray(0, dtype="int64") if c.storage[0] is None else c.storage[0]
            for c in step4.input_storage]
    hlo = step4.maker.linker.jitted.lower(*args).compile().as_text()
    costs4 = [float(step4(k)) for _ in range(EPOCHS) for k in range(n)]
    score4 = evaluate_in_chunks(errors4, valid4.blocks, B)
    one_call4 = [train4.scores(chunk, classic) for chunk in (B, 40) for classic in (False, True)]
    train1, valid1, step1, errors1, W1 = trainer(None, train4.blocks.order(B))
    costs1 = [float(step1(k)) for _ in range(EPOCHS) for k in range(n)]
    score1 = evaluate_in_chunks(errors1, valid1.n_examples, B)
    print(json.dumps({{
        "devices": [s.device.id for s in shards],
        "blocks": [s.data.shape[0] for s in shards],
        "starts": [s.index[0].start or 0 for s in shards],
        "dtype": str(shards[0].data.dtype),
        "rows": [np.asarray(s.data).tolist() for s in shards],
        "labels": [np.asarray(s.data).tolist() for s in label_shards],
        "n_batches": n, "codes": np.asarray(train1.data.get_value()).tolist(),
        "all_gather": hlo.count("all-gather"), "all_reduce": hlo.count("all-reduce"),
        "costs4": costs4, "costs1": costs1, "score4": score4, "score1": score1,
        "one_call4": one_call4,
        "W4": np.asarray(W4.get_value()).tolist(), "W1": np.asarray(W1.get_value()).tolist(),
    }}))
""")


def sharded_run(script, devices=4):
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def four_devices():
    return sharded_run(RUN.format(tutorials=str(ROOT / "tutorials")))


@needs_jax
def test_each_device_holds_exactly_its_rows_of_int8_codes(four_devices):
    from int8store import load_splits

    train = load_splits("digits")["train"]  # 1,197 rows: 300 a device, 3 of padding
    codes, labels = np.asarray(train.data.get_value()), np.asarray(train.y.get_value())
    seen = four_devices
    assert seen["devices"] == [0, 1, 2, 3] and seen["blocks"] == [300] * 4
    assert seen["starts"] == [0, 300, 600, 900] and seen["dtype"] == "int8"
    for device, (rows, tags) in enumerate(zip(seen["rows"], seen["labels"])):
        mine = codes[device::4]  # row r on device r % 4
        np.testing.assert_array_equal(np.asarray(rows[:len(mine)]), mine)
        np.testing.assert_array_equal(tags[:len(mine)], labels[device::4])
        assert np.asarray(rows[len(mine):]).tolist() == [[0] * 64] * (300 - len(mine))


@needs_jax
def test_the_compiled_step_reduces_gradients_and_gathers_no_data(four_devices):
    assert four_devices["all_gather"] == 0
    assert four_devices["all_reduce"] >= 1  # XLA's own gradient reduction


@needs_jax
def test_results_equal_one_device_fed_the_same_order(four_devices):
    seen = four_devices
    assert seen["n_batches"] == 11  # 297 real rows on the last device: 11 of 25 each
    # The same examples, the same order; sums over four devices add in another
    # order, so the floats agree to rounding, and the errors exactly.
    np.testing.assert_allclose(seen["costs4"], seen["costs1"], rtol=1e-5)
    np.testing.assert_allclose(seen["W4"], seen["W1"], rtol=1e-4, atol=1e-6)
    assert seen["score4"] == seen["score1"] and seen["score4"][1] == 300


@needs_jax
def test_a_split_over_four_devices_is_scored_in_one_call_as_in_chunks(four_devices):
    """Each device its own rows, padding never counted: the same mean and
    count as a call a window, in chunks of 100 (25 local rows of 75 a
    device) and 40 (10: a last window overlapping the one before), every
    example or whole chunks only; one call each."""
    counts = []
    for (chunked, one_call, calls) in four_devices["one_call4"]:
        assert one_call == chunked and calls == 1
        counts.append(chunked[1])
    assert counts == [300, 300, 300, 280]  # classic: 7 whole windows of 10 on every device


@needs_jax
def test_the_tutorials_train_over_four_devices(tmp_path):
    for tutorial, extra in (("logistic_sgd.py", ["--epochs", "3"]),
                            ("convolutional_mlp.py", ["--epochs", "1", "--batch-size", "100"])):
        done = subprocess.run(
            [sys.executable, str(ROOT / "tutorials" / tutorial), "--dataset", "digits",
             "--mode", "jax", "--devices", "4", "--save-model", str(tmp_path / "m.npz"), *extra],
            capture_output=True, text=True, timeout=600, cwd=tmp_path,
            env={**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"})
        assert done.returncode == 0, done.stderr[-2000:]
        assert "each split over 4 devices, row r on device r % 4" in done.stdout
        assert "best validation error" in done.stdout


@needs_jax
def test_a_split_too_small_for_the_devices_is_named_with_its_dataset(tmp_path, capsys):
    """The refusal named the split only (review): from a file, a store read
    for each device's rows, and budget's plan."""
    from int8store.cli import main

    np.savez(tmp_path / "t7.npz", x_train=np.zeros((7, 4, 4), np.uint8),
             y_train=np.arange(7) % 2)
    assert main(["convert", str(tmp_path / "t7.npz"), "-o", str(tmp_path / "t7.h5")]) == 0
    for source in ("t7.npz", "t7.h5"):
        done = subprocess.run(
            [sys.executable, str(ROOT / "tutorials" / "logistic_sgd.py"), "--dataset", source,
             "--mode", "jax", "--devices", "4"], capture_output=True, text=True, timeout=600,
            cwd=tmp_path, env={**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"})
        assert (done.returncode, done.stderr) == (2, (
            f"error: {source}: split 'valid': 1 example cannot be split over 4 devices: each "
            "needs at least one real row (use at most 1 device)\n"))
    capsys.readouterr()
    assert main(["budget", "--dataset", str(tmp_path / "t7.npz"), "--devices", "4",
                 "--model", "logistic"]) == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 't7.npz'}: the 1 valid example is too few for a batch over 4 "
        "devices (--devices 4): each needs one; use --devices 1\n")


def test_devices_need_jax_mode(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "tutorials" / "logistic_sgd.py"),
                           "--dataset", "digits", "--devices", "2"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 2 and "--devices needs --mode jax" in done.stderr


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_together(commands, cwd, env, timeout=600):
    """Run the processes of one multi-process run side by side; their output
    goes to files (a full pipe would block one at a barrier while the other
    waits for it). Returns [(returncode, stdout, stderr)]."""
    runs = []
    for i, command in enumerate(commands):
        out, err = open(cwd / f"out{i}.txt", "w+"), open(cwd / f"err{i}.txt", "w+")
        runs.append((subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=err, text=True),
                     out, err))
    results = []
    for process, out, err in runs:
        process.wait(timeout=timeout)
        out.seek(0), err.seek(0)
        results.append((process.returncode, out.read(), err.read()))
        out.close(), err.close()
    return results


def results(out):
    """The lines of a tutorial's output that carry its figures."""
    return [line for line in out.splitlines()
            if line.startswith(("epoch ", "     epoch ", "best validation", "test error"))]


@needs_jax
def test_two_processes_train_as_one_process_over_their_devices(tmp_path):
    """Two jax.distributed processes on the CPU (Gloo), two devices each, and
    one process with four: each process reads only its own devices' blocks,
    and the run gives the same errors, epoch by epoch."""
    tutorial = [sys.executable, str(ROOT / "tutorials" / "logistic_sgd.py"), "--dataset",
                "digits", "--epochs", "3", "--save-model", "m.npz"]
    address = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    outs = run_together([tutorial + ["--coordinator", address, "--num-processes", "2",
                                     "--process-id", str(i), "--checkpoint", "run.npz"]
                         for i in (0, 1)], tmp_path, env)
    assert (tmp_path / "run.npz").exists()  # (its identity needs every split's digest)
    for i, (code, out, err) in enumerate(outs):
        assert code == 0, err[-2000:]
        assert out.startswith(f"... process {i} of 2: waiting for the others at the coordinator "
                              f"{address} (process 0's; SIGTERM stops the wait)\n")
        assert "each split over 4 devices, row r on device r % 4" in out
    single = subprocess.run(tutorial[:-1] + ["single.npz", "--mode", "jax", "--devices", "4"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"})
    assert single.returncode == 0, single.stderr[-2000:]
    assert results(outs[0][1]) == results(outs[1][1]) == results(single.stdout)
    assert len(results(single.stdout)) >= 5
    with np.load(tmp_path / "m.npz") as multi, np.load(tmp_path / "single.npz") as one:
        np.testing.assert_allclose(multi["W"], one["W"], rtol=1e-5, atol=1e-7)


@needs_jax
def test_processes_holding_different_data_stop_before_the_first_step(tmp_path):
    script = textwrap.dedent("""
        import sys
        import numpy as np
        import int8store
        int8store.parallel.start_processes(sys.argv[1], 2, int(sys.argv[2]))
        images = np.full((8, 4), int(sys.argv[2]) * 3, np.uint8)  # process 1's differ
        data = int8store.SharedDataset.from_arrays(images, np.arange(8) % 2, name="train")
        try:
            int8store.place([data], "jax", devices="all")
        except int8store.Int8StoreError as error:
            print("error:", error)
            sys.exit(2)
    """)
    address = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}
    outs = run_together([[sys.executable, "-c", script, address, str(i)] for i in (0, 1)],
                        tmp_path, env, timeout=300)
    for code, out, err in outs:
        assert code == 2, err[-2000:]
        assert "split 'train': process 1 holds other data than process 0" in out


@needs_jax
def test_each_process_keeps_only_its_own_devices_rows_of_a_store(tmp_path):
    from int8store.cli import main

    store = tmp_path / "digits.h5"
    assert main(["convert", "digits", "-o", str(store)]) == 0
    script = textwrap.dedent("""
        import json, sys
        import numpy as np
        import int8store
        int8store.parallel.start_processes(sys.argv[1], 2, int(sys.argv[2]))
        splits = int8store.load_splits(sys.argv[3], mode="jax", devices="all", normalize="dataset")
        train = splits["train"]
        mine = [np.asarray(s.data).tolist() for s in train.data.container.storage[0].addressable_shards]
        print(json.dumps({"read": {n: s.rows_read for n, s in splits.items()},
                          "blocks": train.blocks.rows_per_device, "rows": mine,
                          "mean": train.dataset_mean, "count": train.n_examples,
                          "digest": train.digest()}))
    """)
    address = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    outs = run_together([[sys.executable, "-c", script, address, str(i), str(store)]
                         for i in (0, 1)], tmp_path, env, timeout=300)
    seen = []
    for code, out, err in outs:
        assert code == 0, err[-2000:]
        seen.append(json.loads(out.strip().splitlines()[-1]))
    from int8store import open_store
    from int8store.dataset.symbolic import normalization_mean

    opened = open_store(store)
    codes = opened.read_split("train")[0].reshape(opened.splits["train"], -1)
    blocks = Blocks(len(codes), 4)
    for process in (0, 1):
        mine = [blocks.rows_of(d) for d in (2 * process, 2 * process + 1)]
        # asked for its own devices' rows only (each device's, every 4th row)
        assert [tuple(r) for r in seen[process]["read"]["train"]] == \
            [(r.start, r.stop, r.step) for r in mine]
        for rows_of, rows in zip(mine, seen[process]["rows"]):
            np.testing.assert_array_equal(np.asarray(rows)[:len(rows_of)], codes[rows_of])
        assert seen[process]["mean"] == normalization_mean(codes, opened.encoding)
        assert seen[process]["digest"] == opened.split_digest("train")  # (no process holds it all)
        assert seen[process]["count"] == len(codes)


# -- the seeded order: O(1) a position, the same on the host, the C backend and JAX ----

def test_the_shuffle_is_a_bijection_a_new_one_each_epoch():
    from int8store.order.shuffle import permuted

    for n in (1, 2, 3, 10, 297, 1000, 4097):
        orders = [permuted(np.arange(n), n, 42, epoch) for epoch in range(3)]
        for order in orders:
            assert sorted(order.tolist()) == list(range(n))
        if n > 3:
            assert not np.array_equal(orders[0], orders[1])
    # position by position: any slice of positions gives the same rows
    whole = permuted(np.arange(1000), 1000, 7, 4)
    np.testing.assert_array_equal(permuted(np.arange(600, 700), 1000, 7, 4), whole[600:700])
    # The order is part of a data position's meaning ((seed, epoch, step) must
    # name the same examples on every machine): pinned, on numpy 1 and 2 alike.
    np.testing.assert_array_equal(permuted(np.arange(10), 10, 42, 0), [1, 9, 4, 2, 0, 6, 5, 8, 3, 7])
    # one domain per device (the last block holds fewer real rows)
    per_device = permuted(np.arange(297)[None, :], np.array([[300], [297]]), 7, 1)
    assert per_device[1].max() < 297 and len(set(per_device[0].tolist())) == 297


PADDED = """import json
import numpy as np
import int8store
from int8store import SharedDataset
lib = int8store.tensor_library(); T = lib.tensor
B = 4
images = (np.arange(902 * 4) % 251).astype(np.uint8).reshape(902, 4)
labels = np.arange(902) % 10 + 1  # no label 0: the padding's label is 0
train = SharedDataset.from_arrays(images, labels, name="train", dtype=lib.config.floatX)
train_set_x, train_set_y = train.x, train.y
int8store.place([train], "jax", devices=4)
seen = {"n_batches": train.n_batches(B),
        "y_borrowed": list(train_set_y.get_value(borrow=True).shape),
        "y": np.asarray(train_set_y.get_value()).tolist(),
        "x": list(train_set_x.get_value(borrow=True).shape),
        "codes": np.asarray(train.data.get_value()).tolist(),
        "held": [list(v.get_value(return_internal_type=True).shape) for v in (train.data, train.y)],
        "nbytes": train.nbytes}
i = T.lscalar()
step = lib.function([i], train_set_y[i * B:(i + 1) * B], mode=int8store.function_mode("jax"))
# A classic loop counts its minibatches from the labels: 902 // 4 = 225.
n_train_batches = train_set_y.get_value(borrow=True).shape[0] // B
seen["classic"], seen["taken"] = n_train_batches, []
try:
    for index in range(n_train_batches + 1):  # one past the end
        seen["taken"] += np.asarray(step(index)).tolist()
except int8store.MinibatchIndexError as error:
    seen["refused"], seen["refused_at"] = str(error), index
try:
    train_set_y.set_value(np.zeros(902, np.int32))
except Exception as error:
    seen["set_value"] = f"{type(error).__name__}: {error}"
int8store.place([train], "jax")  # back to one device: the split, no padding
seen["gathered"] = [list(np.shape(v.get_value(borrow=True))) for v in (train.data, train.y)]
seen["gathered_blocks"] = [v.blocks for v in (train.data, train.y)]
train_set_y.set_value(np.arange(902, dtype=np.int32))  # held whole again: the library's own
seen["set_again"] = int(train_set_y.get_value()[901])
tiny = SharedDataset.from_arrays(images[:3], labels[:3], name="tiny")
try:
    int8store.place([tiny], "jax", devices=4)
except int8store.ArgumentError as error:
    seen["tiny"] = str(error)
print(json.dumps(seen))
"""


@needs_jax
def test_a_classic_loop_over_four_devices_counts_real_examples_and_never_reaches_padding():
    """902 examples over 4 devices: 226 rows each, 904 held (the last two
    devices' last rows are padding). What a classic loop counts (the labels'
    length, x.get_value()) is 902, and its 225 minibatches of 4 are those of
    one device, every row real; minibatch 225 is refused, saying how many
    there are and what to count with."""
    seen = sharded_run(PADDED)
    labels = np.arange(902) % 10 + 1
    assert seen["y_borrowed"] == [902] and seen["x"] == [902, 4]
    assert seen["y"] == labels.tolist()
    assert np.array_equal(seen["codes"], (np.arange(902 * 4) % 251).reshape(902, 4) - 128)
    assert seen["held"] == [[904, 4], [904]] and seen["nbytes"] == 904 * 4  # the devices' arrays
    assert seen["classic"] == 225 and seen["n_batches"] == 225
    assert seen["refused_at"] == 225  # minibatches 0..224 ran, on real rows only
    assert len(seen["taken"]) == 225 * 4 and 0 not in seen["taken"]
    assert seen["taken"] == (Blocks(902, 4).order(4) % 10 + 1).tolist()
    assert sorted(seen["taken"]) == sorted(labels[:900].tolist())  # rows 0..899, as on one
    assert seen["refused"].startswith(
        "train_y: minibatch index 225 is outside 0..224: 902 examples make 225 whole "
        "minibatches of 4 (over 4 devices as on one)")
    assert seen["set_value"].startswith("ArgumentError: train_y: held in blocks over 4 devices")
    assert seen["gathered"] == [[902, 4], [902]] and seen["gathered_blocks"] == [None, None]
    assert seen["set_again"] == 901
    assert seen["tiny"].startswith("split 'tiny': 3 examples cannot be split over 4 devices")


REPLACED = """import json
import numpy as np
import int8store
from int8store import SharedDataset
images = (np.arange(13 * 4) % 251).astype(np.uint8).reshape(13, 4)
split = SharedDataset.from_arrays(images, np.arange(13) % 10 + 1, name="valid")
seen = {}
for devices in (4, 2, 3, None):
    int8store.place([split], "jax", devices=devices)
    first = split.data.container.storage[0].addressable_shards[0].data
    seen[str(devices)] = [np.asarray(split.data.get_value()).tolist(),
                          np.asarray(split.y.get_value()).tolist(), np.asarray(first).tolist()]
print(json.dumps(seen))
"""


@needs_jax
def test_a_split_placed_again_over_another_device_count_keeps_its_rows():
    """Placed over 4 devices, then 2, then 3, then one: each time the
    split's own rows in its order, device 0 holding rows 0, D, 2D, ...
    (the padded array of the count before was taken for the split's rows)."""
    seen = sharded_run(REPLACED)
    codes = ((np.arange(13 * 4) % 251).reshape(13, 4) - 128).tolist()
    labels = (np.arange(13) % 10 + 1).tolist()
    for devices, (held_codes, held_labels, first) in seen.items():
        assert held_codes == codes and held_labels == labels, devices
        step = 1 if devices == "None" else int(devices)
        assert first[:len(codes[::step])] == codes[::step], devices


RECOMPILE = """import json
import numpy as np
import int8store
from int8store import SharedDataset
lib = int8store.tensor_library(); T = lib.tensor
split = SharedDataset.from_arrays(np.zeros((96, 4), np.uint8), np.arange(96) % 10, name="train")
i = T.lscalar()
seen = {}
for first, then in ((None, 4), (4, 2), (4, None), (4, 4)):
    int8store.place([split], "jax", devices=first)
    take = lib.function([i], split.y[i * 8:(i + 1) * 8], mode=int8store.function_mode("jax"))
    before = np.asarray(take(1)).tolist()
    int8store.place([split], "jax", devices=then)
    try:
        seen[f"{first} {then}"] = [before, np.asarray(take(1)).tolist()]
    except Exception as error:
        seen[f"{first} {then}"] = [before, f"{type(error).__name__}: {error}"]
print(json.dumps(seen))
"""


@needs_jax
def test_a_function_compiled_before_its_data_was_placed_again_refuses_it():
    """A JAX-mode function is converted for its data's layout: placed over
    another device count after, its minibatches took other rows (minibatch
    1 of one device gave labels 5, 0, 8, ... over four) without a word."""
    seen = sharded_run(RECOMPILE)
    one, four = [8, 9, 0, 1, 2, 3, 4, 5], [8, 2, 9, 3, 0, 4, 1, 5]  # (labels r % 10)
    assert seen["4 4"] == [four, four]
    for placed, (before, message) in seen.items():
        if placed == "4 4":
            continue
        first, then = placed.split()
        assert before == (one if first == "None" else four)
        count = 1 if then == "None" else int(then)
        assert isinstance(message, str) and message.startswith(
            f"ArgumentError: train_y: placed over {count} device{'s' if count > 1 else ''} since this "
            f"function was compiled for {1 if first == 'None' else 4}"), message
        assert "compile the function again" in message


SHUFFLED = """import json, sys
import numpy as np
import int8store
from int8store import load_splits, SharedDataset
lib = int8store.tensor_library(); T = lib.tensor
B, EPOCHS, SEED = 100, 2, 11

def model(train, devices, mode="jax"):
    W = lib.shared(np.zeros((64, 10), dtype=lib.config.floatX), shape=(64, 10))
    x, y, i = T.matrix(), T.ivector(), T.lscalar()
    p = T.special.softmax(T.dot(x, W), axis=-1)
    cost = -T.mean(T.log(p)[T.arange(y.shape[0]), y])
    step = lib.function([i], cost, mode=int8store.function_mode(mode),
                        updates=[(W, W - 0.13 * T.grad(cost, W))],
                        givens={x: train.x[i * B:(i + 1) * B], y: train.y[i * B:(i + 1) * B]})
    if mode == "jax":
        int8store.keep_on_device([W], [step], devices=devices)
    return step, W

train = load_splits("digits")["train"]
codes, labels = np.asarray(train.data.get_value()), np.asarray(train.y.get_value())
int8store.place([train], "jax", devices=4)
train = train.shuffle(SEED)
step4, W4 = model(train, 4)
n = train.n_batches(B)
costs4 = []
for e in range(EPOCHS):
    costs4 += [float(step4(index)) for _, index, _ in train.minibatches(e, B)]
hlo = step4.maker.linker.jitted.lower(*[np.asarray(0, dtype="int64") if c.storage[0] is None else c.storage[0] for c in step4.input_storage]).compile().as_text()
W = lib.shared(np.zeros((64, 10), dtype=lib.config.floatX), shape=(64, 10))
costs1 = []
for e in range(EPOCHS):  # one device fed each epoch's order
    order = train.blocks.order(B, seed=SEED, epoch=e)
    one = SharedDataset(codes[order], labels[order], train.encoding, name="one", dtype=lib.config.floatX)
    int8store.place([one], "jax")
    x, y, i = T.matrix(), T.ivector(), T.lscalar()
    p = T.special.softmax(T.dot(x, W), axis=-1)
    cost = -T.mean(T.log(p)[T.arange(y.shape[0]), y])
    step = lib.function([i], cost, mode=int8store.function_mode("jax"), updates=[(W, W - 0.13 * T.grad(cost, W))],
                        givens={x: one.x[i * B:(i + 1) * B], y: one.y[i * B:(i + 1) * B]})
    costs1 += [float(step(k)) for k in range(n)]
# one device shuffled, C backend (perform) against JAX mode
single = SharedDataset(codes, labels, train.encoding, name="s", dtype=lib.config.floatX).shuffle(SEED)
i = T.lscalar()
xb, yb = single.minibatch(i, B)
at3 = 3 * single.n_batches(B) + 2  # epoch 3, minibatch 2
c_rows = lib.function([i], [xb, yb], mode=int8store.function_mode("c"))(at3)
j_rows = lib.function([i], [xb, yb], mode=int8store.function_mode("jax"))(at3)
from int8store.order.blocks import Blocks
order = Blocks(len(codes), 1).order(B, seed=SEED, epoch=3)[2 * B:3 * B]
print(json.dumps({"costs4": costs4, "costs1": costs1, "gather": hlo.count("all-gather"),
                  "c_equals_jax": bool(np.array_equal(np.asarray(c_rows[1]), np.asarray(j_rows[1]))
                                       and np.allclose(np.asarray(c_rows[0]), np.asarray(j_rows[0]))),
                  "c_is_order": bool(np.array_equal(np.asarray(c_rows[1]), labels[order])),
                  "epochs_differ": costs4[:n] != costs4[n:]}))
"""


@needs_jax
def test_a_shuffled_split_over_four_devices_equals_one_device_fed_its_order():
    seen = sharded_run(SHUFFLED)
    assert seen["gather"] == 0  # each device gathers from its own block
    np.testing.assert_allclose(seen["costs4"], seen["costs1"], rtol=1e-5)
    assert seen["epochs_differ"]  # a new order each epoch
    assert seen["c_equals_jax"] and seen["c_is_order"]  # the C backend, JAX and the host agree


@needs_jax
@pytest.mark.parametrize("devices", ["4", "all"])
def test_a_batch_smaller_than_the_device_count_is_refused_in_a_line(tmp_path, devices):
    """A batch size is cut down to a multiple of the device count: below it,
    to none (it said "using 0", then failed)."""
    done = subprocess.run([sys.executable, str(ROOT / "tutorials" / "logistic_sgd.py"),
                           "--dataset", "digits", "--epochs", "1", "--mode", "jax",
                           "--devices", devices, "--batch-size", "3"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ,
                               "XLA_FLAGS": "--xla_force_host_platform_device_count=4"})
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1] == (
        "error: --batch-size 3 over 4 devices: expected at least 4, a row on each device (a "
        "batch size is cut down to a multiple of 4); raise --batch-size or lower --devices")
    assert "using 0" not in done.stdout and not (tmp_path / "best_model.npz").exists()


@needs_jax
def test_asking_for_more_devices_than_jax_sees_says_what_it_sees(monkeypatch):
    import re
    from types import SimpleNamespace

    import jax

    from int8store import ArgumentError
    from int8store.backend.jax.sharding import data_mesh

    monkeypatch.setattr(jax, "devices", lambda: [SimpleNamespace(platform="gpu")] * 2)
    with pytest.raises(ArgumentError, match="^devices=3: JAX sees 2 gpu devices; ask for 1 to 2$"):
        data_mesh(3)
    monkeypatch.setattr(jax, "devices", lambda: [SimpleNamespace(platform="cpu")])
    with pytest.raises(ArgumentError, match="^" + re.escape(
            "devices=2: JAX sees 1 cpu device; XLA_FLAGS=--xla_force_host_platform_device_count=N, "
            "set before the run, splits the CPU into N") + "$"):
        data_mesh(2)
    with pytest.raises(ArgumentError, match="^devices=0: ask for 1 device or more$"):
        data_mesh(0)
