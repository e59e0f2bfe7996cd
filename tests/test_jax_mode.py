"""JAX mode on the CPU: data placed once, the minibatch op, the classic slices
in givens, the library's own JAX mode left alone, and the tutorials reaching the
same results as with the C backend."""

import json
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import convolutional_mlp  # noqa: E402
import logistic_sgd  # noqa: E402
from int8store import (MinibatchIndexError, SharedDataset, function_mode,  # noqa: E402
                       keep_on_device, load_data, place)
from int8store.nnet import minibatch  # noqa: E402
from int8store.backend import activate  # noqa: E402

api = activate()
lib, at, shared = api.lib, api.at, api.shared


def classic_step(datasets, batch_size, mode):
    """A logistic-regression step written as the classic tutorial writes it:
    its parameters shared variables of no static shape."""
    (train_x, train_y), _, _ = datasets
    index, x, y = at.lscalar(), at.matrix("x"), at.ivector("y")
    W = lib.shared(np.zeros((64, 10), dtype=lib.config.floatX), name="W")
    b = lib.shared(np.zeros(10, dtype=lib.config.floatX), name="b")
    p = at.special.softmax(at.dot(x, W) + b, axis=-1)
    cost = -at.mean(at.log(p)[at.arange(y.shape[0]), y])
    train = lib.function([index], cost,
                         updates=[(W, W - 0.1 * at.grad(cost, W)), (b, b - 0.1 * at.grad(cost, b))],
                         givens={x: train_x[index * batch_size:(index + 1) * batch_size],
                                 y: train_y[index * batch_size:(index + 1) * batch_size]},
                         mode=function_mode(mode))
    return train, W


@pytest.mark.aesara  # (PyTensor's JAX mode compiles for the new shape)
def test_a_parameter_given_another_shape_after_compiling_is_refused_by_name():
    """JAX mode compiles the classic parameters for their values' shapes
    (Aesara's conversions cannot trace them otherwise): a value of another
    shape is refused before the call, which left everything as it was."""
    from int8store import ArgumentError

    datasets = place(load_data("digits"), "jax")
    step, W = classic_step(datasets, 300, "jax")
    step(0)
    before = W.get_value()
    W.set_value(np.zeros((64, 11), dtype=lib.config.floatX))
    with pytest.raises(ArgumentError, match=r"^W: the function was compiled in JAX mode for its "
                       r"value of shape \(64, 10\); it now holds one of shape \(64, 11\): JAX "
                       "mode on Aesara compiles for the shapes of the variables a function "
                       "updates"):
        step(1)
    W.set_value(before)
    assert np.isfinite(float(step(1)))
    # Data the function reads but does not update may change its shape, as before.
    data = lib.shared(np.ones((10, 3), dtype=lib.config.floatX), name="X")
    mean = lib.function([], data.mean(axis=0) * 2, mode=function_mode("jax"))
    np.testing.assert_allclose(mean(), 2)
    data.set_value(np.full((7, 3), 3, dtype=lib.config.floatX))
    np.testing.assert_allclose(mean(), 6)


def test_images_stay_on_the_device_as_the_same_array_across_steps():
    datasets = place(load_data("digits"), "jax")
    train = datasets[0][0].dataset
    images, labels = train.data.get_value(borrow=True), train.y.get_value(borrow=True)
    assert isinstance(images, jax.Array) and images.dtype == np.int8
    assert images.devices() == {jax.devices()[0]}
    step, _ = classic_step(datasets, 300, "jax")
    for i in range(6):
        step(i % 3)
    assert train.data.get_value(borrow=True) is images  # never re-uploaded
    assert train.y.get_value(borrow=True) is labels
    assert train.nbytes * 4 == train.float32_nbytes


def test_the_classic_slices_become_static_minibatches_and_match_c_mode():
    costs = {}
    for mode in ("c", "jax"):
        datasets = place(load_data("digits"), mode)
        step, W = classic_step(datasets, 300, mode)
        costs[mode] = [float(step(i % 3)) for i in range(4)]
        if mode == "jax":
            ops = {type(n.op).__name__ for n in step.maker.fgraph.toposort()}
            assert "Minibatch" in ops and "Subtensor" not in ops
    np.testing.assert_allclose(costs["jax"], costs["c"], rtol=1e-5)


def test_the_slice_of_the_deep_network_tutorials_becomes_a_minibatch_too():
    data = place(shared(np.arange(40, dtype=np.int8).reshape(10, 4), name="rows"), "jax")
    index = at.lscalar()
    begin = index * 5
    f = lib.function([index], data[begin:begin + 5] * 1, mode=function_mode("jax"))
    assert "Minibatch" in {type(n.op).__name__ for n in f.maker.fgraph.toposort()}
    np.testing.assert_array_equal(f(1), np.arange(20, 40).reshape(5, 4))
    from int8store.backend.ops.minibatch import minibatch_of_slice

    assert minibatch_of_slice(data[begin:begin + 5].owner).owner.op.stride == 5
    part = data[begin:begin + 3]  # part of a minibatch: 3 rows from index * 5
    assert (minibatch_of_slice(part.owner).owner.op.size,
            minibatch_of_slice(part.owner).owner.op.stride) == (3, 5)
    # A window from any row (as evaluate_in_chunks takes for a split's last
    # examples) becomes a static-size window, and its start is checked too.
    start = at.lscalar()
    window = lib.function([start], data[start:start + 3] * 1, mode=function_mode("jax"))
    assert "Minibatch" in {type(n.op).__name__ for n in window.maker.fgraph.toposort()}
    np.testing.assert_array_equal(window(7), np.arange(28, 40).reshape(3, 4))
    with pytest.raises(MinibatchIndexError, match="a window of 3 rows from row 8"):
        window(8)


def test_a_function_of_int8stores_jax_mode_pickles_and_runs_in_a_fresh_process(tmp_path):
    """As one of the library's own JAX mode does (a user trial: "Can't
    pickle local object '_make_jax_mode.<locals>.CheckedJAXLinker'");
    unpickled, its minibatch index is still checked."""
    import pickle
    import subprocess
    import sys

    from conftest import ROOT

    datasets = place(load_data("digits"), "jax")
    step, _ = classic_step(datasets, 300, "jax")
    step(0)
    pickled = pickle.dumps(step)  # (its parameters as one step left them)
    unpickled = pickle.loads(pickled)
    expected = [float(unpickled(i)) for i in (1, 2)]
    assert expected == [float(step(i)) for i in (1, 2)]
    (tmp_path / "step.pkl").write_bytes(pickled)
    fresh = f"""if True:
        import pickle
        import int8store
        step = pickle.loads(open({str(tmp_path / "step.pkl")!r}, "rb").read())
        print([float(step(i)) for i in (1, 2)])
        try:
            step(4)
        except int8store.MinibatchIndexError as error:
            print(str(error).splitlines()[0])
    """
    done = subprocess.run([sys.executable, "-c", fresh], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    costs, refusal = done.stdout.strip().splitlines()[-2:]
    # (another process compiles its own program: under float64 its sums
    # came out in another order, 2e-11 apart)
    np.testing.assert_allclose(json.loads(costs), expected, rtol=1e-6)
    assert "minibatch index 4 is outside 0..2" in refusal


def test_a_slice_whose_bounds_write_the_start_twice_becomes_a_minibatch():
    """``data[index * 5:index * 5 + 5]`` (two equal products, not one
    variable) is the deep-network tutorials' minibatch too: it was left a
    slice, and JAX refused its symbolic bounds in a traceback."""
    data = place(shared(np.arange(40, dtype=np.int8).reshape(10, 4), name="rows"), "jax")
    index = at.lscalar()
    f = lib.function([index], data[index * 5:index * 5 + 5] * 1, mode=function_mode("jax"))
    assert "Minibatch" in {type(n.op).__name__ for n in f.maker.fgraph.toposort()}
    np.testing.assert_array_equal(f(1), np.arange(20, 40).reshape(5, 4))
    with pytest.raises(MinibatchIndexError, match="minibatch index 2 is outside 0..1"):
        f(2)


def test_parameters_kept_on_the_device_stay_there():
    datasets = place(load_data("digits"), "jax")
    step, W = classic_step(datasets, 300, "jax")
    keep_on_device([W], [step])
    for i in range(3):
        step(i)
    assert isinstance(W.get_value(borrow=True), jax.Array)
    assert np.abs(np.asarray(W.get_value())).sum() > 0


def test_the_same_dataset_moves_between_backends():
    ds = SharedDataset.from_arrays(np.arange(24, dtype=np.uint8).reshape(6, 4), np.arange(6),
                                   dtype="float32")
    place(ds, "jax")
    assert isinstance(ds.data.get_value(borrow=True), jax.Array)
    place(ds, "c")
    assert isinstance(ds.data.get_value(borrow=True), np.ndarray)
    index = at.lscalar()
    batch = lib.function([index], ds.minibatch(index, 2)[0])(2)
    np.testing.assert_array_equal(batch, np.arange(16, 24).reshape(2, 4) / 256)


@pytest.mark.parametrize("mode", ["c", "jax"])
def test_minibatch_rows_and_out_of_range_index(mode):
    data = shared(np.arange(30, dtype=np.int8).reshape(10, 3), name="rows")
    place(data, mode)
    index = at.lscalar()
    f = lib.function([index], minibatch(data, index, 3) * 1, mode=function_mode(mode))
    np.testing.assert_array_equal(f(0), np.arange(9).reshape(3, 3))
    np.testing.assert_array_equal(f(2), np.arange(18, 27).reshape(3, 3))  # the last whole one
    for bad in (3, -1):
        with pytest.raises(MinibatchIndexError, match=rf"rows: minibatch index {bad} is outside 0\.\.2"):
            f(bad)


@pytest.mark.aesara
def test_aesaras_plain_jax_mode_is_left_as_aesara_ships_it():
    from aesara.link.jax.dispatch import jax_funcify
    from aesara.tensor.nnet.basic import SoftmaxWithBias

    function_mode("jax")  # int8store's JAX mode exists, and registered nothing globally
    with pytest.raises(NotImplementedError):
        jax_funcify(SoftmaxWithBias())


def test_the_librarys_plain_jax_mode_is_left_as_it_ships():
    function_mode("jax")  # int8store's JAX mode exists, and registered nothing globally
    data = shared(np.zeros((4, 2), np.int8), name="d")
    index = at.lscalar()
    with pytest.raises(NotImplementedError):
        lib.function([index], minibatch(data, index, 2) * 1, mode="JAX")


@pytest.mark.slow
def test_logistic_tutorial_in_jax_mode_matches_c_mode(tmp_path):
    runs = {mode: logistic_sgd.sgd_optimization_mnist(dataset="digits", n_epochs=60, mode=mode,
                                                      model_path=tmp_path / f"{mode}.npz")
            for mode in ("c", "jax")}
    assert runs["jax"]["best_validation_loss"] == pytest.approx(runs["c"]["best_validation_loss"], abs=1e-6)
    assert runs["jax"]["test_score"] == pytest.approx(runs["c"]["test_score"], abs=1e-6)
    with np.load(tmp_path / "jax.npz") as j, np.load(tmp_path / "c.npz") as c:
        for name in ("W", "b"):
            np.testing.assert_allclose(j[name], c[name], rtol=0, atol=1e-4)


def test_a_shard_on_the_device_keeps_its_values_when_its_host_buffer_is_reused():
    """JAX on the CPU may alias a numpy array's memory: a shard placed from a
    host buffer that is then read into again must not change on the device."""
    from int8store import quantize
    from int8store.streaming.sources import ArrayShards
    from int8store.streaming.split import StreamingSplit

    codes, encoding = quantize((np.arange(40 * 16384) % 251).astype(np.uint8).reshape(40, 16384))
    split = StreamingSplit(ArrayShards(codes, np.arange(40)), 20, encoding, (16384,), prefetch=0,
                           mode="jax")
    shards = split.epoch(0)
    next(shards)
    first = split.dataset.data.container.storage[0]
    next(shards)  # read into the same, only host buffer
    np.testing.assert_array_equal(np.asarray(first), codes[:20])
    np.testing.assert_array_equal(np.asarray(split.dataset.data.container.storage[0]), codes[20:])
    split.close()


def test_a_store_streamed_in_jax_mode_matches_it_loaded_whole_in_c_mode():
    """Shards read from the file and placed on JAX's device one at a time,
    validation and test scored shard by shard: the errors of the C backend
    with the store loaded whole."""
    store = Path(__file__).resolve().parent / "data" / "format2-digits.h5"
    common = dict(dataset=str(store), n_epochs=8, batch_size=10, model_path=None)
    loaded = logistic_sgd.sgd_optimization_mnist(mode="c", **common)
    streamed = logistic_sgd.sgd_optimization_mnist(mode="jax", max_device_bytes=20 * 68, **common)
    assert [s.n_shards for s in streamed["datasets"]] == [10, 3, 3]
    assert streamed["best_validation_loss"] == pytest.approx(loaded["best_validation_loss"], abs=1e-6)
    assert streamed["test_score"] == pytest.approx(loaded["test_score"], abs=1e-6)
    assert streamed["test_count"] == loaded["test_count"] == 50


@pytest.mark.slow
def test_lenet5_tutorial_in_jax_mode_matches_c_mode():
    runs = {mode: convolutional_mlp.evaluate_lenet5(dataset="digits", n_epochs=12, mode=mode)
            for mode in ("c", "jax")}
    # the same errors (their means are float32 in JAX without x64)
    assert runs["jax"]["best_validation_loss"] == pytest.approx(runs["c"]["best_validation_loss"], abs=1e-6)
    assert runs["jax"]["test_score"] == pytest.approx(runs["c"]["test_score"], abs=1e-6)
    assert runs["jax"]["best_iter"] == runs["c"]["best_iter"]
    for jax_param, c_param in zip(runs["jax"]["params"], runs["c"]["params"]):
        np.testing.assert_allclose(jax_param, c_param, rtol=0, atol=1e-4)


@pytest.mark.slow
def test_lenet5_trains_in_jax_mode_with_its_images_placed_once(monkeypatch):
    from int8store.backend.jax import device
    placed = []
    place_once = device.place

    def recording_place(splits, mode, devices=None):  # (as the loading places the splits)
        splits = place_once(splits, mode, devices=devices)
        placed.extend((split.data, split.data.get_value(borrow=True)) for split in splits)
        return splits

    monkeypatch.setattr(device, "place", recording_place)
    run = convolutional_mlp.evaluate_lenet5(dataset="digits", n_epochs=2, mode="jax")
    assert run["test_score"] < 0.95 and len(placed) == 3
    for variable, images in placed:  # the very array placed before the first step: never re-sent
        assert isinstance(images, jax.Array) and images.dtype == np.int8
        assert variable.get_value(borrow=True) is images


def test_a_compiled_function_leaves_no_source_file_in_the_temporary_folder(tmp_path,
                                                                           monkeypatch):
    """The converted graph's source goes to one pruned folder, named by its
    content, where the library has that setting (PyTensor 3.3.7 on), the
    user's if named; elsewhere (Aesara) it is kept in memory, the file
    removed. Either way tracebacks still show the generated lines."""
    import inspect
    import re
    import tempfile
    import traceback

    from int8store.backend.jax import generated_source
    from int8store.backend.jax.generated_source import graph_to_python, source_folder

    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    x = at.vector("x")
    # (not rewritten: one file; the compiled step below adds fused scalar graphs'
    # files, converted apart, and int8store's JAX mode's)
    graph = api.module("graph.fg").FunctionGraph([x], [at.exp(x) * 2 + 1])
    folder = source_folder()
    assert (folder is None) == (not hasattr(lib.config, "generated_src_dir"))
    chosen = [None] if folder is None else [None, tmp_path / "mine"]
    for named in chosen:
        flags = {} if named is None else {"generated_src_dir": str(named)}
        with lib.config.change_flags(**flags):
            values = graph_to_python(graph, "doubled")
        source = Path(values.__code__.co_filename)
        if folder is not None:
            assert source.parent == (named or Path(lib.config.compiledir) / "generated_src")
            assert source.exists()
        assert "def doubled(" in inspect.getsource(values)
        np.testing.assert_allclose(values(np.zeros(2))[0], [3.0, 3.0])
        with pytest.raises(Exception) as raised:
            values("not an array")
        shown = "".join(traceback.format_exception(raised.value))
        # (the generated line itself, read from the file or from memory)
        assert re.search(re.escape(f'File "{source}"') + r", line \d+, in doubled\n +\w+ = ",
                         shown), shown
    assert not list(temporary.iterdir())
    if folder is not None:  # a folder that cannot be written: kept in memory too
        def refused(*args, **kwargs):
            raise PermissionError("read-only")

        monkeypatch.setattr(generated_source.os, "makedirs", refused)
        values = graph_to_python(graph, "doubled")
        assert Path(values.__code__.co_filename).parent == temporary  # (written, removed)
        assert "def doubled(" in inspect.getsource(values)
        monkeypatch.undo()
        monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    assert not list(temporary.iterdir())
    step, _ = classic_step(place(load_data("digits"), "jax"), 300, "jax")
    step(0)
    assert not list(temporary.iterdir())
    if folder is not None:
        assert lib.config.generated_src_dir == ""  # the setting is left as it was


@pytest.mark.slow
@pytest.mark.aesara  # (where Aesara's JAX conversions needed static shapes before)
def test_a_classic_client_runs_in_jax_mode_with_the_two_additions(tmp_path_factory):
    """A client written as users have the classic logistic_sgd.py, its
    parameters shared variables of no static shape, with the two additions
    docs/backends.md names (place the data, give the mode): the figures of
    the same client in C mode."""
    from test_classic_clients import make_classic_layout, run_client

    layout = make_classic_layout(tmp_path_factory.mktemp("tutorials"))
    floatx = lib.config.floatX
    in_c, in_jax = (run_client(layout, "classic_logistic.py", "int8store", floatx, "--epochs",
                               "2", *extra) for extra in ([], ["--jax"]))
    for key in ("batches", "valid_errors", "test_error", "predicted"):
        assert in_jax[key] == in_c[key], key
    close = {"float64": 1e-9, "float32": 1e-4}[floatx]
    for key in ("last_costs", "W"):
        np.testing.assert_allclose(in_jax[key], in_c[key], rtol=close, atol=close)



@pytest.mark.parametrize("mode", ["c", "jax"])
def test_a_split_shorter_than_a_minibatch_compiles_as_the_classic_did(mode):
    # A validation split of 500 and a batch of 600: the classic compiled the
    # slice and counted 0 minibatches; the drop-in refused it as the graph was
    # built ("500 rows cannot fill a minibatch of 600", a trial of logistic_cg.py).
    datasets = load_data("digits")
    valid_x = place(datasets, mode)[1][0]
    rows = valid_x.get_value(borrow=True)
    index, x = at.lscalar(), at.matrix("x")
    first = lib.function([index], x * 1, givens={x: valid_x[index * 600:(index + 1) * 600]},
                         mode=function_mode(mode))
    assert rows.shape[0] // 600 == 0 and rows.shape[0] < 600
    np.testing.assert_array_equal(first(0), rows)  # the classic's short slice, all of it
    with pytest.raises(MinibatchIndexError, match=f"its {rows.shape[0]} rows are fewer than a "
                       "slice of 600, so only index 0"):
        first(1)  # (the classic gave an empty minibatch)
    # a graph built for the batch size (LeNet's reshape) compiles too, as the classic's did
    # (the minibatch's length is not static: PyTensor refused the reshape as it compiled)
    images = x.reshape((600, 1, 8, 8))
    lib.function([index], images.sum(), givens={x: valid_x[index * 600:(index + 1) * 600]},
                 mode=function_mode(mode))


def test_an_assertion_is_skipped_without_a_warning_a_false_one_raised():
    """JAX cannot check an assertion inside its trace: the library's
    conversion skips it with a warning for each, and PyTensor's own
    broadcasting checks put one in a user's classic graph (a trial's first
    run printed it). int8store's JAX mode skips it quietly; one false
    whatever the inputs is still raised."""
    import warnings

    Assert = api.module("raise_op").Assert
    x = at.vector("x")
    checked = Assert("x must be short")(x, at.lt(x.shape[0], 10))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        twice = lib.function([x], checked * 2, mode=function_mode("jax"))
        np.testing.assert_array_equal(twice(np.ones(3, dtype=x.dtype)), [2, 2, 2])
    never = Assert("never")(x, at.constant(False))
    with pytest.raises(AssertionError, match="never"):
        lib.function([x], never * 2, mode=function_mode("jax"))
