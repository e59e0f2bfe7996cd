"""Many minibatch updates a call (int8store.training.steps_function): the same costs
and parameters as a call each, in C and JAX modes, resident, streamed and
over several devices; each call checked on the host in JAX mode; no more
device memory than one step; the tutorials' error lines unchanged."""

import contextlib
import importlib.util
import io
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import convolutional_mlp
import logistic_sgd
from conftest import ROOT, old_jax
from int8store import (ArgumentError, MinibatchIndexError, SharedDataset, StreamingSplit,
                       function_mode, keep_on_device, place, quantize, tensor_library)
from int8store.training import minibatch_calls, steps_function
from int8store.training.steps import carried_transposed
from int8store.streaming.sources import ArrayShards

has_jax = importlib.util.find_spec("jax") is not None
MODES = ["c", pytest.param("jax", marks=pytest.mark.skipif(
    not has_jax, reason="JAX is not installed in this environment"))]
theano = tensor_library()
T = theano.tensor


def digits_split(n=300, seed=None, dtype="float32"):
    from sklearn.datasets import load_digits

    digits = load_digits()
    data = SharedDataset.from_arrays((digits.images[:n] * 16).astype(np.uint8), digits.target[:n],
                                     name="train", dtype=dtype)
    return data.shuffle(seed) if seed is not None else data


def logistic_step(split, batch, rate=0.13, classic=True):
    """What the tutorial gives function([index], ...): params, index, cost,
    updates, givens (the classic slices, or int8store's minibatch op)."""
    index, x, y = T.lscalar(), T.matrix("x", dtype="float32"), T.ivector("y")
    model = logistic_sgd.LogisticRegression(input=x, n_in=split.n_features, n_out=10)
    cost = model.negative_log_likelihood(y)
    updates = [(p, p - np.float32(rate) * g) for p, g in zip(model.params, T.grad(cost, model.params))]
    if classic:
        givens = {x: split.x[index * batch:(index + 1) * batch],
                  y: split.y[index * batch:(index + 1) * batch]}
    else:
        givens = dict(zip((x, y), split.minibatch(index, batch)))
    return model.params, index, cost, updates, givens


def jax_on_cpu():
    import jax

    return jax.default_backend() == "cpu"


def compiled(function, explicit):
    """XLA's executable of a JAX-mode ``function`` called with the integer
    inputs ``explicit`` (called once first, so that its shared values are
    where the calls keep them)."""
    function(*explicit)
    if hasattr(function, "lower"):  # int8store's own, called directly
        return function.lower(*explicit).compile()
    arguments = [np.int64(v) for v in explicit] + \
        [c.storage[0] for c in function.input_storage[len(explicit):]]
    return function.maker.linker.jitted.lower(*arguments).compile()


def values(params):
    return [np.array(p.get_value()) for p in params]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", [None, 4])
def test_k_updates_a_call_are_k_calls_of_one(mode, seed):
    split = digits_split(seed=seed)
    if mode == "jax":
        place([split], "jax")
    params, index, cost, updates, givens = logistic_step(split, 10)
    one = theano.function([index], cost, updates=updates, givens=givens,
                          mode=function_mode(mode))
    steps = steps_function([index], cost, updates, givens, steps=8, mode=mode)
    if mode == "jax":
        keep_on_device(params, [one, steps.function])
    start = values(params)
    # shuffled, across an epoch's end too (minibatches 28, 29 of 30, then the next epoch's)
    first = 24 if seed is not None else 10
    singles = [float(one(i)) for i in range(first, first + 12)]
    by_one = values(params)
    for param, value in zip(params, start):
        param.set_value(value)
    if mode == "jax":
        keep_on_device(params, [one, steps.function])
    grouped = list(np.asarray(steps(first))) + list(np.asarray(steps(first + 8, 4)))
    assert len(grouped) == 12
    # JAX mode on a CPU carries W (64 x 10) through its loop transposed, b (a vector) as it is
    transposed = [mode == "jax" and carried_transposed(p) for p in params]
    assert transposed == [mode == "jax" and jax_on_cpu(), False]
    pairs = [(np.asarray(grouped, cost.dtype), np.asarray(singles, cost.dtype))]
    for a, b in pairs + list(zip(values(params), by_one)):
        if not any(transposed):  # exact: the same step, in the same order
            np.testing.assert_array_equal(a, b)
        else:  # the same sums of products, added in another order: a few units in the last place
            np.testing.assert_allclose(a, b, rtol=0, atol=16 * np.finfo(b.dtype).eps * abs(b).max())


@pytest.mark.skipif(not has_jax, reason="JAX is not installed in this environment")
def test_made_for_a_gpu_the_loop_carries_parameters_as_they_are_and_matches_exactly():
    """Inside compiling_for("gpu") (a program compiled ahead of time for a
    GPU this machine lacks), int8store takes the GPU's forms on any
    machine: no parameter carried transposed, the library's convolutions;
    K updates a call then equal K calls of one bit for bit; outside, the
    default backend's forms again."""
    from int8store.backend.jax.channels_last import on_cpu
    from int8store.backend.jax.target import compiling_for

    split = digits_split()
    place([split], "jax")
    params, index, cost, updates, givens = logistic_step(split, 10)
    one = theano.function([index], cost, updates=updates, givens=givens, mode=function_mode("jax"))
    with compiling_for("gpu"):
        assert not on_cpu() and not any(carried_transposed(p) for p in params)
        steps = steps_function([index], cost, updates, givens, steps=6, mode="jax")
    assert on_cpu() == jax_on_cpu() and carried_transposed(params[0]) == jax_on_cpu()
    keep_on_device(params, [one, steps.function])
    start = values(params)
    singles = [float(one(i)) for i in range(3, 12)]
    by_one = values(params)
    for param, value in zip(params, start):
        param.set_value(value)
    keep_on_device(params, [one, steps.function])
    grouped = list(np.asarray(steps(3))) + list(np.asarray(steps(9, 3)))
    np.testing.assert_array_equal(np.asarray(grouped, cost.dtype), np.asarray(singles, cost.dtype))
    for a, b in zip(values(params), by_one):
        np.testing.assert_array_equal(a, b)
    # lowered with what ``like`` makes of each argument (the bench gives shapes on a GPU)
    seen = []
    steps.function.lower(like=lambda value: seen.append(np.shape(value)) or value).compile()
    assert seen == [(), (64, 10), (10,), (300, 64), (300,)]  # first, W and b, x and y
    with pytest.raises(ArgumentError, match="'cuda'"):
        with compiling_for("cuda"):
            pass


def host_to_device_transfers(capfd, call, times=3):
    """How many host-to-device copies ``times`` calls of ``call`` make
    (JAX's transfer guard logs each on the standard error)."""
    import jax

    call()
    capfd.readouterr()
    with jax.transfer_guard_host_to_device("log"):
        for _ in range(times):
            jax.block_until_ready(call())
    return capfd.readouterr().err.count("host-to-device transfer")


@pytest.mark.skipif(not has_jax, reason="JAX is not installed in this environment")
def test_a_held_mean_is_placed_on_the_device_once_not_sent_with_every_call(capfd):
    """normalize="dataset" reads the mean from a shared scalar (held: see
    int8store.dataset.symbolic._held); jitted with its numpy value it
    would be copied to the device at every call."""
    import jax
    from sklearn.datasets import load_digits

    from int8store.backend.jax.direct import JaxScore, jax_graph
    from int8store.training.steps import rebound

    digits = load_digits()
    split = SharedDataset.from_arrays((digits.images[:300] * 16).astype(np.uint8),
                                      digits.target[:300], name="train", dtype="float32",
                                      normalize="dataset")
    expected = abs(np.asarray(split.x.get_value(), np.float32))
    place([split], "jax")
    params, index, cost, updates, givens = logistic_step(split, 10)
    steps = steps_function([index], cost, updates, givens, steps=4, mode="jax")
    keep_on_device(params, [steps.function])
    start, window = T.lscalar(), T.lscalar()
    sizes = T.sum(abs(split.x[start:start + 10]), axis=1)
    (sums,), read = rebound([sizes], {}, {start: window})
    score = JaxScore(jax_graph([window, *read], [sums]), windows=30)
    held = [v for v in score.read if getattr(v.tag, "held_constant", False)]
    assert len(held) == 1 and held[0].name.startswith("dataset_mean_")
    plan = (np.arange(0, 300, 10), np.ones((30, 10), bool))
    total = float(score(*plan))  # the sum of every view value's size, as numpy's
    assert total == pytest.approx(expected.sum(dtype=np.float64), rel=1e-5)
    with jax.transfer_guard_host_to_device("disallow"):  # a plan seen before: nothing to copy
        assert float(score(*plan)) == total
    # A call each, the minibatch index (the library's function, and int8store's loop)
    one = theano.function([start], sizes, mode=function_mode("jax"))
    np.testing.assert_allclose(np.asarray(one(30)), expected[30:40].sum(axis=1), rtol=1e-6)
    assert host_to_device_transfers(capfd, lambda: one(30)) == 3
    assert host_to_device_transfers(capfd, lambda: steps(0)) == 3
    assert isinstance(held[0].container.storage[0], np.ndarray)  # (C functions read it too)


@pytest.mark.skipif(not has_jax, reason="JAX is not installed in this environment")
def test_on_a_cpu_only_matrices_of_short_rows_are_carried_transposed():
    """Rows of at most 128 bytes, more rows than columns: the logistic
    weights (784 x 10) and the MLP's output layer (500 x 10), float32 or
    float64; not the MLP's hidden layer (784 x 500), a wide matrix, a
    vector, nor rows of 20 float64 (160 bytes)."""
    cases = {(784, 10, "float32"): True, (500, 10, "float32"): True, (784, 10, "float64"): True,
             (784, 500, "float32"): False, (10, 784, "float32"): False,
             (784, 20, "float64"): False, (784, 32, "float32"): True, (784, 33, "float32"): False}
    on_cpu = jax_on_cpu()
    for (rows, columns, dtype), expected in cases.items():
        variable = theano.shared(np.zeros((rows, columns), dtype))
        assert carried_transposed(variable) == (on_cpu and expected), (rows, columns, dtype)
    assert not carried_transposed(theano.shared(np.zeros(784, "float32")))


@pytest.mark.parametrize("mode", MODES)
def test_a_call_past_the_split_is_refused(mode):
    """JAX mode checks the first and the last minibatch of a call on the host
    before it runs (JAX would clamp the index); the C backend checks each
    minibatch as its step takes it (int8store's minibatch op). Either way
    the call fails whole: nothing is trained."""
    split = digits_split()  # 30 minibatches of 10
    if mode == "jax":
        place([split], "jax")
    params, index, cost, updates, givens = logistic_step(split, 10, classic=False)
    steps = steps_function([index], cost, updates, givens, steps=5, mode=mode)
    before = values(params)
    with pytest.raises(MinibatchIndexError, match="minibatch index 30 is outside 0..29"):
        steps(26)  # its last step would take minibatch 30
    for a, b in zip(values(params), before):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ArgumentError, match="count=6: a call makes 1 to 5 steps"):
        steps(0, 6)
    with pytest.raises(ArgumentError, match="count=0"):
        steps(0, 0)
    assert len(steps(25)) == 5
    with pytest.raises(ArgumentError, match="steps=0"):
        steps_function([index], cost, updates, givens, steps=0, mode=mode)


@pytest.mark.parametrize("mode", MODES)
def test_classic_parameters_train_and_bad_updates_are_refused_by_name(mode):
    """Parameters made as the classic tutorials make them (no static shape)
    failed in JAX mode on Aesara: the loop carried them without one, and
    Aesara's conversions traced shapes XLA refuses. An update of another
    rank, or a variable updated twice, failed inside the library or XLA
    naming nothing (review)."""
    split = digits_split()
    if mode == "jax":
        place([split], "jax")
    index, x, y = T.lscalar(), T.matrix("x", dtype="float32"), T.ivector("y")
    W = theano.shared(np.zeros((64, 10), np.float32), name="W")  # (no shape=, as the classic)
    b = theano.shared(np.zeros(10, np.float32), name="b")
    p_y = T.special.softmax(T.dot(x, W) + b, axis=-1)
    cost = -T.mean(T.log(p_y)[T.arange(y.shape[0]), y])
    gW, gb = T.grad(cost, [W, b])
    givens = dict(zip((x, y), split.minibatch(index, 10)))
    steps = steps_function([index], cost, [(W, W - np.float32(0.1) * gW),
                                           (b, b - np.float32(0.1) * gb)], givens, steps=3,
                           mode=mode)
    assert len(steps(0)) == 3 and np.abs(W.get_value()).sum() > 0
    for updates, message in [([(W, W - gW), (b, T.shape_padleft(b - gb))],
                              r"the update of b: 2-D values for a 1-D shared variable"),
                             ([(W, W - gW), (b, b - gb), (b, b + 1)],
                              r"b is updated twice")]:
        with pytest.raises(ArgumentError, match=message):
            steps_function([index], cost, updates, givens, steps=3, mode=mode)


@pytest.mark.parametrize("mode", MODES)
def test_a_64_bit_variable_updated_by_the_steps_keeps_its_type(mode):
    """A step counter (int64) and a float64 sum among the updates: in JAX
    mode without 64-bit types (floatX float32) the loop computes them in 32
    bits, and its int32 and float32 arrays were stored in the variables as
    they were: get_value() gave another dtype than the variable's type."""
    split = digits_split()
    if mode == "jax":
        place([split], "jax")
    params, index, cost, updates, givens = logistic_step(split, 10)
    t = theano.shared(np.int64(0), name="t")
    total = theano.shared(np.float64(0), name="total")
    updates = updates + [(t, t + 1), (total, total + T.cast(cost, "float64"))]
    steps = steps_function([index], cost, updates, givens, steps=4, mode=mode)
    with warnings.catch_warnings():  # (JAX's own, on the 64-bit types it truncates)
        warnings.simplefilter("ignore", UserWarning)
        costs = list(np.asarray(steps(0))) + list(np.asarray(steps(4, 2)))
    assert np.asarray(t.get_value()).dtype == np.int64 and int(t.get_value()) == 6
    assert np.asarray(total.get_value()).dtype == np.float64
    assert float(total.get_value()) == pytest.approx(float(np.sum(costs)), rel=1e-6)


@pytest.mark.skipif(not has_jax, reason="JAX is not installed in this environment")
def test_many_updates_a_call_hold_no_minibatch_more_on_the_device():
    """XLA's memory analysis of the compiled calls: K = 100 holds the
    temporaries of K = 1 (each minibatch sliced and widened inside the loop,
    never the K minibatches at once; older XLAs keep a second copy of the
    parameters the loop carries) and outputs K costs instead of one."""
    split = digits_split(n=1500)
    place([split], "jax")
    params, index, cost, updates, givens = logistic_step(split, 10)
    one = theano.function([index], cost, updates=updates, givens=givens,
                          mode=function_mode("jax"))
    many = steps_function([index], cost, updates, givens, steps=100, mode="jax")
    keep_on_device(params, [one, many.function])

    single = compiled(one, [0]).memory_analysis()
    hundred = compiled(many.function, [0, 100]).memory_analysis()
    carried = sum(np.asarray(p.get_value()).nbytes for p in params)
    cost_bytes = np.dtype(cost.dtype).itemsize
    assert hundred.temp_size_in_bytes <= single.temp_size_in_bytes + carried + 100 * cost_bytes
    assert hundred.temp_size_in_bytes < single.temp_size_in_bytes + 100 * 10 * split.n_features
    assert hundred.output_size_in_bytes - single.output_size_in_bytes == 99 * cost_bytes


@pytest.mark.skipif(not has_jax, reason="JAX is not installed in this environment")
def test_convolutions_inside_the_loop_take_xla_cpus_fast_form():
    """Inside a loop's body XLA:CPU does not put a convolution into the one
    form its fast kernels take (images and outputs batch-major and
    channels-last, filters HWIO: ``b01f_01io->b01f``), and ran LeNet5's
    many-steps loop 13-17 times slower than its steps alone; int8store's
    conversions write conv2d and both gradients in that form on the CPU.
    Every convolution of a two-layer convolutional step's compiled loop is
    in it."""
    import re

    if not jax_on_cpu():
        pytest.skip("the channels-last forms are for XLA:CPU")
    split = digits_split(n=200, dtype=theano.config.floatX)  # as the layers' parameters
    place([split], "jax")
    index, x, y = T.lscalar(), T.matrix("x"), T.ivector("y")
    rng = np.random.RandomState(1)
    layer0 = convolutional_mlp.LeNetConvPoolLayer(rng, x.reshape((10, 1, 8, 8)), (4, 1, 3, 3),
                                                  (10, 1, 8, 8))
    layer1 = convolutional_mlp.LeNetConvPoolLayer(rng, layer0.output, (6, 4, 2, 2), (10, 4, 3, 3))
    top = logistic_sgd.LogisticRegression(input=layer1.output.flatten(2), n_in=6, n_out=10)
    params = top.params + layer1.params + layer0.params
    cost = top.negative_log_likelihood(y)
    updates = [(p, p - 0.1 * g) for p, g in zip(params, T.grad(cost, params))]
    givens = dict(zip((x, y), split.minibatch(index, 10)))
    steps = steps_function([index], cost, updates, givens, steps=4, mode="jax")
    keep_on_device(params, [steps.function])
    text = compiled(steps.function, [0, 4]).as_text()
    assert "while" in text
    forms = re.findall(r"convolution\(.*?dim_labels=(\S+?),", text)
    assert len(forms) == 5, forms  # two forward, two weights' gradients, one images'
    assert set(forms) == {"b01f_01io->b01f"}


# -- an epoch's minibatches in calls ----------------------------------------------

def test_calls_never_cross_a_shard_and_end_where_asked():
    codes, encoding = quantize(np.arange(230 * 4, dtype=np.uint8).reshape(230, 4) % 251)
    stream = StreamingSplit(ArrayShards(codes, np.arange(230)), 100, encoding, (4,), prefetch=0)
    calls = list(minibatch_calls(stream, 0, 10, steps=4, ends=lambda number: number == 14))
    # shards of 100, 100 and 30 examples: 10, 10 and 3 minibatches
    assert calls == [(0, 0, 4), (4, 4, 4), (8, 8, 2), (10, 0, 4), (14, 4, 1), (15, 5, 4),
                     (19, 9, 1), (20, 0, 3)]
    # and each shard is in the shared variables while its calls are made
    seen = []
    for first, index, count in minibatch_calls(stream, 1, 10, steps=4):
        seen += list(np.asarray(stream.y.get_value())[index * 10:(index + count) * 10])
    assert sorted(seen) == list(range(230))
    stream.close()


# -- the tutorials: the same lines with K = 1 and K = 10 ----------------------------

def tutorial_lines(model, mode, streamed, steps_per_call, everything=False):
    """The error lines a tutorial prints (``everything``: all its lines)
    and its final parameters."""
    out = io.StringIO()
    options = dict(dataset="digits", batch_size=20, mode=mode, steps_per_call=steps_per_call,
                   max_device_bytes=20 * 68 * 10 if streamed else None,
                   seed=3 if streamed else None)
    with contextlib.redirect_stdout(out):
        if model == "logistic":
            result = logistic_sgd.sgd_optimization_mnist(n_epochs=6, model_path=None, **options)
        else:
            result = convolutional_mlp.evaluate_lenet5(n_epochs=3, nkerns=[4, 8], **options)
    lines = [line for line in out.getvalue().splitlines()
             if everything or ("error" in line or "validation" in line or "training @" in line)
             and "epochs/sec" not in line]
    return lines, result["params"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("streamed", [False, True], ids=["resident", "streamed"])
@pytest.mark.parametrize("model", ["logistic", "lenet5"])
def test_the_tutorials_print_the_same_lines_with_ten_updates_a_call(model, mode, streamed):
    one, params_one = tutorial_lines(model, mode, streamed, 1)
    ten, params_ten = tutorial_lines(model, mode, streamed, 10)
    assert len(one) >= 6 and ten == one
    # C mode: the same arithmetic. JAX mode: XLA may fuse the step inside its
    # loop otherwise than alone: within a few float32 units in the last place.
    for a, b in zip(params_ten, params_one):
        if mode == "c":
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


@pytest.mark.devices
@pytest.mark.skipif(not has_jax or old_jax(),
                    reason="needs JAX >= 0.12: older XLA:CPU runtimes can deadlock a step "
                           "that reduces over forced CPU devices when the cores are busy "
                           "(conftest.old_jax)")
def test_over_four_devices_ten_updates_a_call_print_the_same_lines(tmp_path):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}

    def lines(k):
        run = subprocess.run(
            [sys.executable, str(ROOT / "tutorials" / "logistic_sgd.py"), "--dataset", "digits",
             "--mode", "jax", "--devices", "4", "--epochs", "4", "--batch-size", "20",
             "--save-model", "", "--steps-per-call", str(k)],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
        assert run.returncode == 0, run.stderr
        return [line for line in run.stdout.splitlines() if "error" in line]

    one, ten = lines(1), lines(10)
    assert len(one) >= 4 and ten == one


def test_one_update_a_call_by_default_where_more_do_not_pay():
    from int8store.training import ACCELERATOR_STEPS, default_steps

    assert default_steps("c") == 1 and default_steps("c", devices=4) == 1
    if has_jax:
        assert default_steps("jax") == ACCELERATOR_STEPS
        # loops over several devices only off the CPU
        assert default_steps("jax", devices=4) == (1 if jax_on_cpu() else ACCELERATOR_STEPS)
    with pytest.raises(ArgumentError, match="mode='gpu' is not one of c, jax"):
        default_steps("gpu")


@pytest.mark.skipif(not has_jax, reason="JAX is not installed in this environment")
@pytest.mark.parametrize("model", ["logistic", "lenet5"])
def test_the_tutorials_choose_their_updates_a_call(model):
    """With no --steps-per-call, the tutorials make default_steps's updates
    a call in JAX mode, 100, but no more than an epoch's minibatches (59 of
    20 digits: every call is then a whole epoch, a loop of one fixed
    length), and print the same lines as with one a call."""
    from int8store import load_splits
    from int8store.training import default_steps

    epoch = load_splits("digits")["train"].n_examples // 20
    lines, _ = tutorial_lines(model, "jax", False, None, everything=True)
    said = [line for line in lines if "minibatch updates a call" in line]
    assert epoch == 59 and said == [f"... up to {min(default_steps('jax'), epoch)} minibatch "
                                    "updates a call"]
    one, _ = tutorial_lines(model, "jax", False, 1)
    assert [line for line in lines if line in one] == one


@pytest.mark.parametrize("mode", MODES)
def test_more_updates_a_call_than_an_epoch_holds_are_cut_to_an_epoch(mode, capsys):
    # --steps-per-call 10**12 sized each call's costs by it (8 TB: a traceback);
    # no call makes more than an epoch's minibatches (3 of 300 here) anyway
    result = logistic_sgd.sgd_optimization_mnist(dataset="digits", batch_size=300, n_epochs=1,
                                                 model_path=None, mode=mode,
                                                 steps_per_call=10 ** 12)
    assert result["train_model"].steps == 3
    assert ("... --steps-per-call 1000000000000: a call takes at most an epoch's 3 minibatches: "
            "using 3") in capsys.readouterr().out
