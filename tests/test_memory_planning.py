"""Will it fit? The rule of thumb, the finer estimate, the largest batch size,
evaluation in chunks, and ``int8store budget``."""

import importlib.util
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import ROOT
from int8store import ArgumentError, load_data, max_batch_size
from int8store.training import evaluate_in_chunks
from int8store.backend import activate, conv2d, pool_2d
from int8store.cli import main
from int8store.memory.estimates import graph_counts, model_memory, rule_of_thumb_bytes, step_estimator
from int8store.runtime.limits import describe_bytes

api = activate()
lib, at = api.lib, api.at

has_jax = importlib.util.find_spec("jax") is not None


@pytest.fixture(autouse=True)
def floatx_not_named(monkeypatch):
    """budget plans floatX where the user named it (scripts/test.sh names it
    in the flags): these tests plan as for a user who did not, unless they
    say otherwise."""
    from int8store.backend.jax import run_setup

    monkeypatch.setattr(run_setup, "user_named_float_type", lambda: None)


def vgg16(batch_size=1):
    """VGG16's layers on 224x224x3 images (input, 13 convolutions, 5 poolings,
    flatten, 3 dense, as Keras lists them), symbolically: static shapes only,
    nothing allocated (its 138 million parameters are symbolic tensors)."""
    x = at.TensorType("float32", shape=(batch_size, 3, 224, 224))("images")
    layers, params, h, channels = [x], [], x, 3
    for block, (width, convs) in enumerate([(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)]):
        for i in range(convs):
            w = at.TensorType("float32", shape=(width, channels, 3, 3))(f"W{block}_{i}")
            b = at.TensorType("float32", shape=(width,))(f"b{block}_{i}")
            h = at.maximum(conv2d(h, w, border_mode="half", filter_shape=w.type.shape)
                           + b.dimshuffle("x", 0, "x", "x"), 0)
            layers.append(h)
            params += [w, b]
            channels = width
        h = pool_2d(h, (2, 2), ignore_border=True)
        layers.append(h)
    h = h.reshape((batch_size, 512 * 7 * 7))
    layers.append(h)  # the Flatten layer, one of VGG16's layers as Keras defines them
    for i, (n_in, n_out) in enumerate([(25088, 4096), (4096, 4096), (4096, 1000)]):
        w = at.TensorType("float32", shape=(n_in, n_out))(f"fc{i}")
        b = at.TensorType("float32", shape=(n_out,))(f"fc{i}_b")
        h = at.dot(h, w) + b
        h = at.maximum(h, 0) if i < 2 else h
        layers.append(h)
        params += [w, b]
    return layers, params


def test_the_rule_of_thumb_reproduces_the_vgg16_worked_example():
    neurons, parameters, nbytes = graph_counts(*vgg16())
    assert neurons == 15_262_696  # the input included
    assert parameters == 138_357_544 and nbytes == 4 * parameters
    assert rule_of_thumb_bytes(neurons, parameters, 8) == 2_083_672_896


@pytest.mark.parametrize("dtype, size", [("float32", 4), ("float64", 8)])
def test_the_step_estimate_counts_arguments_and_outputs_exactly(dtype, size):
    memory = model_memory("logistic", 50, (28, 28), 10, dtype)
    parameters = 784 * 10 + 10
    assert memory.parameters == parameters and memory.neurons == 784 + 10
    assert memory.parameter_bytes == size * parameters
    assert memory.step.arguments == 50 * 784 + 4 * 50 + size * parameters  # int8 codes, labels
    assert memory.step.outputs == size + size * parameters  # the cost, the updated parameters
    # at least the minibatch's float copy and the probabilities are temporaries
    assert memory.step.temporaries >= size * 50 * 784 + size * 50 * 10
    assert memory.rule_of_thumb == (794 * 50 + parameters) * 2 * size
    with pytest.raises(ArgumentError, match="dtype='float16': expected one of float32, float64"):
        model_memory("logistic", 50, (28, 28), 10, "float16")


def test_the_estimate_grows_with_the_batch_size():
    sizes = [model_memory("lenet5", b, (8, 8), 10).estimate for b in (16, 32, 64)]
    assert sizes[0] < sizes[1] < sizes[2]


@given(st.integers(1, 10_000), st.integers(0, 5_000), st.integers(1, 50), st.integers(0, 3))
def test_max_batch_size_fits_and_the_next_does_not(budget, fixed, slope, curve):
    def estimate(b):
        return fixed + slope * b + curve * b * b // 100  # grows, convex like a real step

    found = max_batch_size(estimate, budget, margin=0)
    if found == 0:
        assert estimate(1) > budget
    else:
        assert estimate(found) <= budget < estimate(found + 1)


def test_max_batch_size_refuses_a_budget_or_estimate_that_is_no_number():
    # NaN compares false with everything: a batch of 1 was said to fit
    for budget, estimate, said in ((float("nan"), lambda b: 10 * b, "budget=nan"),
                                   (float("inf"), lambda b: 10 * b, "budget=inf"),
                                   (100, lambda b: float("nan"), r"estimate\(1\) gave nan")):
        with pytest.raises(ArgumentError, match=said):
            max_batch_size(estimate, budget, margin=0)
    assert max_batch_size(lambda b: 10 * b, 5, margin=0) == 0


def test_max_batch_size_for_a_real_model_and_a_margin():
    estimate = step_estimator("lenet5", (8, 8), 10)
    budget = 20 << 20
    found = max_batch_size(estimate, budget, margin=0.25)
    assert estimate(found) <= 0.75 * budget < estimate(found + 1)


# -- evaluation in chunks -----------------------------------------------------------

@pytest.fixture(scope="module")
def classifier():
    """A trained-for-a-few-steps logistic regression on digits, tutorial style."""
    (train_x, train_y), _, (test_x, test_y) = load_data("digits", dtype="float32")
    x, y, start = at.matrix("x", dtype="float32"), at.ivector("y"), at.lscalar()
    rng = np.random.default_rng(0)
    W = lib.shared(rng.normal(0, 0.1, (64, 10)).astype("float32"))
    predictions = at.argmax(at.dot(x, W), axis=1)
    wrong = at.neq(predictions, y)
    one_shot = lib.function([], at.mean(wrong), givens={x: test_x, y: test_y})
    return test_x, test_y, x, y, start, wrong, one_shot


@pytest.mark.parametrize("chunk", [1, 7, 128, 300])  # one, a remainder, a power of two, all
def test_evaluate_in_chunks_equals_the_one_shot_value(classifier, chunk):
    test_x, test_y, x, y, start, wrong, one_shot = classifier
    window = lib.function([start], wrong, givens={x: test_x[start:start + chunk],
                                                      y: test_y[start:start + chunk]})
    value, count = evaluate_in_chunks(window, 300, chunk)
    assert count == 300 and value == pytest.approx(float(one_shot()), abs=1e-6)
    stop = at.lscalar()
    mean = lib.function([start, stop], at.mean(wrong), givens={x: test_x[start:stop],
                                                                  y: test_y[start:stop]})
    value, count = evaluate_in_chunks(mean, 300, chunk, static=False)
    assert count == 300 and value == pytest.approx(float(one_shot()), abs=1e-6)
    classic, count = evaluate_in_chunks(window, 300, chunk, classic_count=True)
    assert count == 300 // chunk * chunk
    assert classic == pytest.approx(np.mean([window(s) for s in range(0, count, chunk)]), abs=1e-12)


def test_the_lenet5_tutorial_scores_every_test_example(capsys):
    import convolutional_mlp

    assert convolutional_mlp.main(["--dataset", "digits", "--epochs", "1", "--batch-size", "128"]) == 0
    out = capsys.readouterr().out
    assert "test error of best model" in out and "over 300 examples" in out
    assert [line for line in out.splitlines() if line.startswith("test error")][0].endswith(
        "over 300 examples")


# -- int8store budget -----------------------------------------------------------------

def planned_estimator(model, image_shape, at_batch):
    """The step estimate budget plans with in JAX mode: the graph's, scaled by
    XLA's figure at the planned batch wherever JAX is there to compile it."""
    estimate = step_estimator(model, image_shape, 10)
    if not has_jax:
        return estimate
    from int8store.memory.estimates import xla_step_memory

    scale = (xla_step_memory(model, at_batch, image_shape, 10).total
             / model_memory(model, at_batch, image_shape, 10).estimate)
    return lambda batch_size: math.ceil(estimate(batch_size) * scale)


def test_budget_prints_both_storages_and_batches_that_fit(capsys):
    assert main(["budget", "--dataset", "digits", "--model", "lenet5", "--device-memory",
                 "3MiB", "--batch-size", "100"]) == 0
    out = capsys.readouterr().out
    assert "rule of thumb" in out and "finer estimate" in out and "*" not in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.startswith(("int8 ", "float32 "))}
    int8_batch, float_batch = (int(rows[k][-2].replace(",", "")) for k in ("int8", "float32"))
    assert 300 > int8_batch > float_batch > 0  # int8 data leaves more room
    estimate = planned_estimator("lenet5", (8, 8), 100)
    data = 1797 * 64 + 4 * 1797  # all of digits as int8, with labels
    usable = int(0.9 * (3 << 20)) - data
    assert estimate(int8_batch) <= usable < estimate(int8_batch + 1)


def test_budget_says_which_float_type_and_backend_it_plans_for(capsys, monkeypatch):
    from int8store.backend.jax import run_setup

    args = ["budget", "--dataset", "digits", "--model", "lenet5", "--device-memory", "1GB"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "step:     float32 in JAX mode, as the tutorials train on an accelerator" in out
    # floatX named by the user: the tutorials follow it on an accelerator too
    monkeypatch.setattr(run_setup, "user_named_float_type", lambda: "PYTENSOR_FLAGS")
    assert main(args) == 0
    assert (f"step:     {api.lib.config.floatX} in JAX mode, floatX as named in PYTENSOR_FLAGS, "
            "which the tutorials follow") in capsys.readouterr().out
    assert main(args + ["--dtype", "float64", "--mode", "c"]) == 0
    out64 = capsys.readouterr().out
    assert "model:    lenet5, 34,760 parameters (271.6 KiB)" in out64
    assert "step:     float64 on the C backend\n" in out64
    assert "x 2 x 8 bytes" in out64 and "x 2 x 4 bytes" in out


def test_budget_on_the_c_backend_plans_in_floatx_on_one_cpu(capsys):
    """The C backend's tutorials train in floatX (float64 unless the flags
    say otherwise) and on one CPU, so budget --mode c plans so by default."""
    floatx = api.lib.config.floatX
    assert main(["budget", "--dataset", "digits", "--model", "logistic", "--mode", "c"]) == 0
    out = capsys.readouterr().out
    assert (f"step:     {floatx} on the C backend, floatX, as the tutorials train on the C "
            "backend (--dtype to plan another)\n") in out
    assert f"x 2 x {np.dtype(floatx).itemsize} bytes" in out
    for dtype in ("float64", "float32"):  # (the classic holds its images in floatX)
        assert main(["budget", "--dataset", "digits", "--model", "logistic", "--mode", "c",
                     "--dtype", dtype]) == 0
        rows = [line.split()[:3] for line in capsys.readouterr().out.splitlines()
                if line.startswith(("int8 ", "float"))]
        assert [row[0] for row in rows] == ["int8", dtype]
        images, labels = 1797 * 64, 4 * 1797
        assert " ".join(rows[1][1:3]) == describe_bytes(np.dtype(dtype).itemsize * images + labels)
    assert main(["budget", "--dataset", "digits", "--model", "logistic", "--mode", "c",
                 "--devices", "2"]) == 2
    assert capsys.readouterr().err == ("error: --devices 2 needs --mode jax: the C backend runs "
                                       "on one CPU\n")


def test_budget_with_no_accelerator_plans_for_jax_on_the_cpu_or_names_both_ways_out(
        capsys, monkeypatch):
    """No GPU to ask: JAX mode runs on the CPU where JAX is installed, so the
    budget is this machine's memory; without JAX, it says what to give."""
    import os

    from int8store.memory import budget, estimates

    monkeypatch.setattr(estimates, "accelerator", lambda: None)
    monkeypatch.setattr(estimates.shutil, "which", lambda name: None)
    if has_jax:
        assert main(["budget", "--dataset", "digits", "--model", "logistic"]) == 0
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        assert (f"device:   {describe_bytes(physical)} (this machine's memory, where JAX runs "
                "here; --device-memory to plan for a GPU)") in capsys.readouterr().out
    monkeypatch.setattr(budget, "jax_device", lambda: None)  # (no JAX)
    assert main(["budget", "--dataset", "digits", "--model", "logistic"]) == 2
    assert capsys.readouterr().err == (
        "error: no accelerator found (JAX on the CPU, no nvidia-smi): give --device-memory, or "
        "--mode c to plan for this machine's CPU\n")


def test_budget_plans_the_mlp_tutorials_model(capsys):
    """mlp.py's model: 500 tanh units, logistic regression, its batch of 20."""
    assert main(["budget", "--dataset", "digits", "--model", "mlp", "--device-memory",
                 "64MiB"]) == 0
    out = capsys.readouterr().out
    parameters = 64 * 500 + 500 + 500 * 10 + 10
    assert f"model:    mlp, {parameters:,} parameters" in out
    assert "activations per example" in out and "batch 20: rule of thumb" in out
    memory = model_memory("mlp", 20, (8, 8), 10)
    assert memory.parameters == parameters and memory.neurons == 64 + 500 + 10
    assert memory.step.arguments == 20 * 64 + 4 * 20 + 4 * parameters
    assert memory.step.outputs == 4 + 4 * parameters  # the cost, the updated parameters


@pytest.mark.skipif(api.NAME != "pytensor", reason="Aesara has no such fusion: its C mode "
                    "squares the weights into a copy, as its estimate says")
def test_the_c_estimate_rewrites_as_the_c_mode_does():
    """PyTensor's C mode sums the MLP's squared weights (its L2 penalty) in one
    loop; the estimate, compiled without C code, rewrites the same way and
    holds no squared copy of the 784x500 weights."""
    weights = 784 * 500 * 4
    for mode in ("c", "jax"):
        assert model_memory("mlp", 20, (28, 28), 10, mode=mode).step.temporaries < weights / 4


# (room beside the step at 300, in shards of 300: the whole data needs 1.5)
@pytest.mark.parametrize("shards_of_a_batch", [1.2, 0.5])
def test_budget_says_how_to_stream_a_set_that_does_not_fit_whole(capsys, shards_of_a_batch):
    """The --max-device-bytes it names makes shards of the batch it names
    (the tutorials' 300, or a smaller one where no shard of 300 fits), and a
    shard of each split, with one more swapping in, fits beside the step."""
    import re

    from int8store import load_streams

    estimate = planned_estimator("logistic", (8, 8), 300)
    four_shards = 4 * 300 * (64 + 4)  # (a shard of each of 3 splits, one more swapping in)
    usable = estimate(300) + int(shards_of_a_batch * four_shards)
    memory = str(-(-usable * 10 // 9) + 1)  # (budget keeps 10 % free)
    assert main(["budget", "--dataset", "digits", "--model", "logistic", "--device-memory",
                 memory]) == 0
    out = capsys.readouterr().out
    line = [row for row in out.splitlines() if row.startswith("streamed:")][0]
    shard_bytes = int(re.search(r"--max-device-bytes [^(]+\((\d+)\)", line).group(1))
    examples = int(re.search(r"shards of ([\d,]+) examples", line).group(1).replace(",", ""))
    smaller = re.search(r"with --batch-size ([\d,]+)", line)
    batch = int(smaller.group(1).replace(",", "")) if smaller else 300
    assert (smaller is None) == (shards_of_a_batch > 1) and 0 < batch <= 300
    streams = load_streams("digits", max_device_bytes=shard_bytes, batch_size=batch)
    assert [s.shard_size for s in streams] == [examples] * 3 and examples % batch == 0
    assert estimate(batch) + 4 * shard_bytes <= int(0.9 * int(memory))
    assert main(["budget", "--dataset", "digits", "--model", "logistic", "--device-memory",
                 "1MiB"]) == 0
    assert "streamed:" not in capsys.readouterr().out  # (held whole, it fits)


def test_budget_for_the_c_backend_plans_for_this_machines_memory(capsys):
    import os

    assert main(["budget", "--dataset", "digits", "--model", "logistic", "--mode", "c"]) == 0
    out = capsys.readouterr().out
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert f"device:   {describe_bytes(physical)} (this machine's memory, where the C backend " \
           "runs)" in out


def test_budget_names_the_dataset_whose_images_lenet5_cannot_take(capsys, tmp_path):
    flat = tmp_path / "flat.npz"
    np.savez(flat, x_train=np.zeros((100, 64), np.uint8), y_train=np.arange(100) % 10)
    assert main(["budget", "--dataset", str(flat), "--device-memory", "1GiB"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {flat}: images of 64 values, not rows")


def test_budget_on_class_folders_says_the_size_is_the_first_images(capsys, tmp_path):
    # (it planned a folder of mixed sizes as fitting; budget decodes no image)
    from PIL import Image

    for name, size in (("a/1.png", (8, 8)), ("a/2.png", (8, 8)), ("b/3.png", (8, 9))):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        Image.fromarray(np.zeros(size, np.uint8)).save(tmp_path / name)
    assert main(["budget", "--dataset", str(tmp_path), "--model", "logistic",
                 "--device-memory", "1GiB"]) == 0
    assert ("images of 8x8 (the first image's size: convert and load_data check every "
            "image's), 2 classes") in capsys.readouterr().out
    assert main(["budget", "--dataset", "digits", "--model", "logistic", "--device-memory",
                 "1GiB"]) == 0
    assert "first image" not in capsys.readouterr().out


def test_budget_says_when_it_cuts_the_tutorials_own_batch(capsys):
    assert main(["budget", "--dataset", "digits", "--model", "logistic", "--device-memory",
                 "1GiB", "--devices", "7"]) == 0
    assert ("batch:    600 (the tutorial's batch size) is more than the 300 valid examples: the "
            "tutorials take batches of 294, a multiple of the 7 devices, planned here") \
        in capsys.readouterr().out


def test_the_c_backends_order_holds_more_than_the_graphs_own():
    """The C backend's virtual machine computes each output in turn, depth
    first (LeNet5's first layer's gradients wait for the second's): it held
    15 MiB more at batch 500 than the graph's topological order, which comes
    closer to XLA's figure."""
    from int8store.memory.step_memory import vm_order

    in_c, in_jax = (model_memory("lenet5", 64, (28, 28), 10, mode=m).step for m in ("c", "jax"))
    assert in_c.arguments == in_jax.arguments and in_c.outputs == in_jax.outputs
    assert in_c.temporaries > in_jax.temporaries
    x = at.vector("x")
    y = at.exp(x)
    fgraph = api.module("graph.fg").FunctionGraph([x], [y * 2, y + 1, at.log(x)], clone=True)
    order = vm_order(fgraph)
    assert set(order) == set(fgraph.apply_nodes)
    # the outputs in turn: log(x), needed by the last, comes last, exp(x) first
    assert order[0] is fgraph.outputs[0].owner.inputs[0].owner and order[-1] is fgraph.outputs[2].owner


@pytest.mark.pytensor  # (Aesara's convolutions are its own, and keep none)
@pytest.mark.parametrize("image_shape", [(28, 28), (12, 12, 3)])
def test_the_c_estimate_counts_the_scratch_the_convolutions_keep(image_shape):
    """On PyTensor, int8store's own convolutions keep scratch buffers from
    call to call (up to 14 MiB for LeNet5 on MNIST): the C estimate counts
    what a compiled step leaves there, and the JAX estimate none (XLA's
    programs keep none)."""
    from int8store import function_mode
    from int8store.memory.reference_models import build_step

    in_c, in_jax = (model_memory("lenet5", 40, image_shape, 10, mode=m).step
                    for m in ("c", "jax"))
    assert in_jax.scratch == 0
    assert in_c.total == in_c.arguments + in_c.outputs + in_c.temporaries + in_c.scratch
    from int8store.backend.ops import im2col

    graph = build_step("lenet5", 40, image_shape, 10)
    step = api.function(graph.inputs, graph.outputs, mode=function_mode("c"))
    arguments = [np.zeros(v.type.shape, v.type.dtype) for v in graph.inputs]
    im2col._scratch_buffers.__dict__.clear()
    step(*arguments)
    kept = sum(buffer.nbytes for buffer in vars(im2col._scratch_buffers).values())
    im2col._scratch_buffers.__dict__.clear()
    assert in_c.scratch == kept > 0  # (40 images: one chunk, the planner's bound is exact)


def test_budget_plans_no_batch_larger_than_the_tutorials_take(capsys):
    """The tutorials cut a batch to their smallest split (300 valid digits)."""
    assert main(["budget", "--dataset", "digits", "--model", "logistic", "--device-memory",
                 "1GB", "--batch-size", "5000"]) == 0
    out = capsys.readouterr().out
    assert "5,000 is more than the 300 valid examples: the tutorials take batches of 300" in out
    assert "batch 300: rule of thumb" in out
    rows = [line.split() for line in out.splitlines() if line.startswith(("int8 ", "float32 "))]
    assert [row[-2] for row in rows] == ["300*", "300*"]  # not the search's limit, 1,048,576
    assert "* all of the smallest split (300 valid examples)" in out


@pytest.mark.parametrize("args, message", [
    (["--batch-size", "0"], "batch_size=0: expected a positive integer (--batch-size)"),
    (["--margin", "-0.1"], "margin=-0.1: expected a fraction in [0, 1) (--margin)"),
    (["--margin", "1"], "margin=1.0: expected a fraction in [0, 1) (--margin)"),
    (["--device-memory", "1.2.3GB"], "--device-memory: '1.2.3GB': expected a size such as"),
    (["--device-memory", "."], "--device-memory: '.': expected a size such as"),
])
def test_budget_refuses_what_it_cannot_plan_in_one_line(capsys, args, message):
    try:  # (a size is refused by argparse, as it parses the command line)
        status = main(["budget", "--dataset", "digits", "--model", "logistic",
                       "--device-memory", "1GB"] + args)
    except SystemExit as stopped:
        status = stopped.code
    assert status == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@given(st.integers(1, 10 ** 12), st.sampled_from(["", "b", "k", "KB", "KiB", "Mi", "GB", "gib",
                                                  "T", "TiB"]), st.sampled_from(["", " "]))
def test_a_whole_number_of_units_is_its_bytes(number, unit, space):
    from int8store.runtime.limits import _UNITS, parse_size

    assert parse_size(f"{number}{space}{unit}") == number * _UNITS[unit.lower()]


@given(st.text(max_size=12))
def test_any_text_is_a_positive_size_or_refused_in_words(text):
    from int8store.runtime.limits import parse_size

    try:
        size = parse_size(text)
    except ArgumentError as error:
        assert repr(text) in str(error)
    else:
        assert isinstance(size, int) and size >= 1


def test_sizes_are_read_in_every_usual_spelling():
    from int8store.errors import ArgumentError
    from int8store.runtime.limits import parse_size

    assert [parse_size(s) for s in ("1GB", "512MiB", "1e9", "1e+9", "1Gi", ".5k", np.int64(7))] \
        == [10 ** 9, 512 << 20, 10 ** 9, 10 ** 9, 1 << 30, 500, 7]
    for bad in ("1.2.3GB", ".", "-5", "1e-3", "0", True):
        with pytest.raises(ArgumentError):
            parse_size(bad)
    with pytest.raises(ArgumentError, match="a size too large to be one"):
        parse_size("1e400")
    with pytest.raises(ArgumentError, match=r"--device-memory='0.5': expected a positive size "
                       r"\(a bare number counts bytes: 0.5GiB\?\)"):
        parse_size("0.5", "--device-memory")  # (a trial's half a gigabyte)
    with pytest.raises(ArgumentError, match=r"--device-memory='1.5': bytes are counted whole "
                       r"\(a bare number counts bytes: 1.5GiB\?\)"):
        parse_size("1.5", "--device-memory")  # (it was 1 byte)
    assert parse_size("1.5KiB") == 1536 and parse_size("0.3KiB") == 307
    with pytest.raises(ArgumentError, match=r"'2.5b': bytes are counted whole$"):
        parse_size("2.5b")
    with pytest.raises(ArgumentError, match=r"'0': expected a positive size$"):
        parse_size("0")
    assert max_batch_size(lambda b: 1000 + 10 * b, "2kB", margin=0) == 100
    with pytest.raises(ArgumentError, match="budget=None: expected bytes"):
        max_batch_size(lambda b: b, None)


def test_examples_that_fit_takes_a_size_as_text_as_max_batch_size_does():
    """examples_that_fit("1GiB", ...) was a TypeError (str minus int), where
    max_batch_size, documented beside it, takes "2kB"."""
    from int8store.memory.estimates import examples_that_fit

    assert examples_that_fit("1MiB", (28, 28), reserved=1024) \
        == examples_that_fit(1 << 20, (28, 28), reserved=1024) \
        == {"int8": ((1 << 20) - 1024) // 788, "float32": ((1 << 20) - 1024) // 3140}
    with pytest.raises(ArgumentError, match="budget='1.5': bytes are counted whole"):
        examples_that_fit("1.5", (28, 28))


def test_budget_answers_per_device(capsys):
    args = ["budget", "--dataset", "digits", "--model", "logistic", "--device-memory", "64MiB",
            "--batch-size", "300"]
    assert main(args + ["--devices", "4"]) == 0
    out = capsys.readouterr().out
    # 1,197 / 300 / 300 examples in blocks of 300 / 75 / 75: 450 examples of 64 bytes each
    assert "devices:  4, each holding 1/4 of every split: 300 train, 75 valid, 75 test" in out
    assert "a minibatch of 300 is 75 on each" in out and "batch 75 per device" in out
    int8_row = next(line for line in out.splitlines() if line.startswith("int8 "))
    assert int8_row.split()[1:3] == ["29.9", "KiB"]  # 450 x (64 bytes + a 4-byte label)
    # a batch that is no multiple of the devices is cut to one, as the tutorials cut it (it
    # was refused here: "cannot be split evenly over 7 devices", while the run took 294)
    assert main(args + ["--devices", "7"]) == 0
    out = capsys.readouterr().out
    assert "batch:    300 is not a multiple of the 7 devices: the tutorials take batches of 294, " \
           "planned here" in out and "a minibatch of 294 is 42 on each" in out
    assert main(args[:-1] + ["3", "--devices", "4"]) == 2  # a device without a row: refused
    assert "--batch-size 3 over 4 devices: expected at least 4" in capsys.readouterr().err
    # a batch cut to the smallest split is then cut to a multiple of the devices, as the
    # tutorials cut it (it was refused: "a batch of 300 cannot be split evenly over 8")
    assert main(args[:-1] + ["600", "--devices", "8"]) == 0
    out = capsys.readouterr().out
    assert "the tutorials take batches of 296, a multiple of the 8 devices" in out
    assert "a minibatch of 296 is 37 on each" in out


def test_budget_takes_all_devices_as_the_tutorials_do(capsys):
    # (it was refused: "invalid int value: 'all'")
    args = ["budget", "--dataset", "digits", "--model", "logistic", "--device-memory", "64MiB"]
    assert main(args + ["--mode", "c", "--devices", "all"]) == 0  # the C backend's one CPU
    assert capsys.readouterr().out == (main(args + ["--mode", "c"]), capsys.readouterr().out)[1]
    if has_jax:
        import jax

        assert main(args + ["--devices", "all"]) == 0
        every = capsys.readouterr().out
        assert main(args + ["--devices", str(jax.device_count())]) == 0
        assert every == capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(args + ["--devices", "some"])
    assert "--devices: expected a number of devices or 'all', got 'some'" in capsys.readouterr().err


@pytest.mark.skipif(not has_jax, reason="JAX is not installed in this environment")
def test_xlas_own_figure_counts_the_steps_arguments_exactly():
    from int8store.memory.estimates import xla_step_memory

    figure = xla_step_memory("lenet5", 40, (8, 8), 10)
    graph = model_memory("lenet5", 40, (8, 8), 10)
    # codes (int8) and labels, then the parameters, as the graph's estimate counts them
    assert figure.arguments == graph.step.arguments == 40 * 64 + 40 * 4 + graph.parameter_bytes
    assert 0.8 < graph.estimate / figure.total < 1.25  # (0.91-1.02 of XLA's on a CPU)


@pytest.mark.skipif(not has_jax, reason="JAX is not installed in this environment")
def test_budget_on_an_accelerator_plans_with_xlas_own_figure(capsys, monkeypatch):
    """Where JAX's device is a GPU, XLA's figure counts the workspaces cuDNN
    and cuBLAS get there (LeNet5's step: 1.9-2.0x the graph's estimate on an
    H200): the table plans with it. Here JAX's CPU device stands in."""
    import jax

    from int8store.memory import budget
    from int8store.memory.estimates import xla_step_memory

    monkeypatch.setattr(budget, "accelerator", lambda: jax.devices()[0])
    args = ["budget", "--dataset", "digits", "--model", "lenet5", "--device-memory", "3MiB",
            "--batch-size", "100"]
    assert main(args) == 0
    out = capsys.readouterr().out
    figure = xla_step_memory("lenet5", 100, (8, 8), 10)
    scale = figure.total / model_memory("lenet5", 100, (8, 8), 10).estimate
    assert f"XLA's own figure for the step compiled for the cpu: " \
           f"{describe_bytes(figure.total)} ({scale:.2f}x the estimate" in out
    int8_row = next(line for line in out.splitlines() if line.startswith("int8 ")).split()
    assert " ".join(int8_row[3:5]) == describe_bytes(figure.total)
    largest = int(int8_row[-2].replace(",", ""))
    estimate = step_estimator("lenet5", (8, 8), 10)
    usable = int(0.9 * (3 << 20)) - (1797 * 64 + 4 * 1797)
    assert estimate(largest) * scale <= usable < estimate(largest + 1) * scale
    assert "run budget where the GPU is" not in out


def test_budget_without_an_accelerator_says_what_a_gpu_adds(capsys, monkeypatch):
    """JAX mode on the CPU still plans with XLA's figure for the CPU (LeNet5's
    convolutions hold layout copies the graph does not show: the estimate is
    0.87-0.96 of it), and says that a GPU adds more."""
    from int8store.memory import budget

    monkeypatch.setattr(budget, "accelerator", lambda: None)
    if has_jax:  # (on a machine with a GPU, the CPU's XLA stands in here too)
        import jax

        monkeypatch.setattr(budget, "jax_device", lambda: jax.devices("cpu")[0])
    assert main(["budget", "--dataset", "digits", "--model", "lenet5", "--device-memory",
                 "1GB"]) == 0
    out = capsys.readouterr().out
    assert "run budget where the GPU is, and it asks XLA" in out
    assert "(LeNet5's step took 1.9-2.0x the finer estimate on an H200)" in out
    assert main(["budget", "--dataset", "digits", "--model", "logistic", "--device-memory",
                 "1GB"]) == 0
    other = capsys.readouterr().out  # (LeNet5's figure is its convolutions')
    assert "workspaces a graph cannot show: run budget where" in other and "LeNet5" not in other
    if has_jax:
        from int8store.memory.estimates import xla_step_memory

        figure = describe_bytes(xla_step_memory("lenet5", 300, (8, 8), 10).total)
        assert f"XLA's own figure for the step compiled for the cpu: {figure} (" in out
        assert "workspaces included" not in out
        int8_row = next(line for line in out.splitlines() if line.startswith("int8 ")).split()
        assert " ".join(int8_row[3:5]) == figure
    else:  # (no JAX to compile it: the graph's estimate is planned with)
        assert "XLA's own" not in out
    assert main(["budget", "--dataset", "digits", "--model", "lenet5", "--device-memory",
                 "1GB", "--mode", "c"]) == 0
    assert "GPU" not in capsys.readouterr().out  # (the C backend runs on the CPU)


@pytest.mark.skipif(not has_jax, reason="JAX is not installed in this environment")
def test_budget_in_float64_on_an_accelerator_asks_xla_only_with_64_bit_jax(capsys, monkeypatch):
    import jax

    from int8store.memory import budget

    monkeypatch.setattr(budget, "accelerator", lambda: jax.devices()[0])
    assert main(["budget", "--dataset", "digits", "--model", "logistic", "--device-memory",
                 "1GB", "--dtype", "float64"]) == 0
    out = capsys.readouterr().out
    if jax.config.jax_enable_x64:  # (a run whose floatX is float64 turned it on)
        assert "XLA's own figure for the step compiled for the cpu" in out
    else:  # XLA would have compiled float32: not asked, and the line says how to ask it
        assert "XLA's own" not in out and f"{api.NAME.upper()}_FLAGS=floatX=float64" in out
    # Without an accelerator, where the GPU is: with 64-bit JAX there too
    # (a trial: it said only "where the GPU is", which would not do).
    monkeypatch.setattr(budget, "accelerator", lambda: None)
    monkeypatch.setattr(budget, "jax_device", lambda: jax.devices("cpu")[0])
    monkeypatch.setattr(budget, "xla_compiles", lambda dtype: dtype == "float32")  # (no x64)
    assert main(["budget", "--dataset", "digits", "--model", "logistic", "--device-memory",
                 "1GB", "--dtype", "float64"]) == 0
    assert (f"run budget where the GPU is, with floatX=float64 ({api.NAME.upper()}_FLAGS="
            "floatX=float64), which turns JAX's 64-bit mode on, and it asks XLA for it") \
        in capsys.readouterr().out


def _budget(args, **env):
    """``python -m int8store budget ARGS`` in a fresh process (floatX and
    JAX's 64-bit mode are set once a process)."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    done = subprocess.run([sys.executable, "-m", "int8store", "budget"] + args,
                          capture_output=True, text=True, env=environment, timeout=600)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.skipif(not has_jax, reason="JAX is not installed in this environment")
def test_budget_for_jax_on_this_cpu_plans_the_float_type_the_run_takes(capsys, monkeypatch):
    """Without an accelerator JAX mode runs on this CPU, in floatX (set_up_run
    leaves it); planned for this machine's memory, budget plans in it too
    (it planned float32, half a float64 run's step)."""
    import jax

    from int8store.memory import budget

    monkeypatch.setattr(budget, "accelerator", lambda: None)
    monkeypatch.setattr(budget, "jax_device", lambda: jax.devices("cpu")[0])
    floatx = api.lib.config.floatX
    assert main(["budget", "--dataset", "digits", "--model", "logistic"]) == 0
    out = capsys.readouterr().out
    assert f"step:     {floatx} in JAX mode" in out
    assert f"x 2 x {np.dtype(floatx).itemsize} bytes" in out
    # Given a device's memory, the plan is for an accelerator: float32, unless floatX was named.
    assert main(["budget", "--dataset", "digits", "--model", "logistic", "--device-memory",
                 "1GiB"]) == 0
    assert "step:     float32 in JAX mode" in capsys.readouterr().out


@pytest.mark.own_flags
@pytest.mark.skipif(not has_jax, reason="JAX is not installed in this environment")
def test_xlas_float64_figure_is_asked_only_where_xla_compiles_float64():
    """The library's JAX dispatch sets JAX's 64-bit mode from floatX when it
    is imported, whatever JAX_ENABLE_X64 said: with floatX=float32, XLA's
    figure for --dtype float64 was a float32 step's (0.54x the estimate),
    and with the default float64 it was never asked."""
    flags = f"{api.NAME.upper()}_FLAGS"
    args = ["--dataset", "digits", "--model", "lenet5", "--dtype", "float64",
            "--device-memory", "1GiB"]
    status, out, err = _budget(args, **{flags: "floatX=float32", "JAX_ENABLE_X64": "1"})
    assert status == 0, err
    assert "XLA's own figure" not in out
    assert f"{flags}=floatX=float64" in out and "JAX_ENABLE_X64" not in out
    status, out, err = _budget(args, **{flags: "floatX=float64"})
    assert status == 0, err
    assert "XLA's own figure for the step compiled for the cpu" in out
    scale = float(out.split("MiB (")[-1].split("x the estimate")[0])
    assert 0.8 < scale < 1.6  # (a float64 step's figure: a float32 one was 0.54x)
    code = ("from int8store.memory.estimates import xla_step_memory\n"
            "try:\n    xla_step_memory('logistic', 10, (8, 8), 10, 'float64')\n"
            "except Exception as e:\n    print(type(e).__name__, e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), flags: "floatX=float32",
                               "JAX_ENABLE_X64": "1"}, timeout=600)
    assert done.stdout.startswith("ArgumentError dtype='float64': XLA compiles float64 only"), \
        done.stdout + done.stderr


def test_max_batch_size_looks_past_a_batch_of_one_that_holds_more():
    """A static batch of one is a graph of its own (the MLP's weight gradient
    an outer product, not an in-place GEMM): it may hold more than two."""
    def estimate(batch_size):
        return 5000 if batch_size == 1 else 1000 + 10 * batch_size

    assert max_batch_size(estimate, 2000, margin=0) == 100
    assert max_batch_size(estimate, 1010, margin=0) == 0  # (not even two)
    assert max_batch_size(estimate, 2000, margin=0, limit=1) == 0


def test_budget_says_no_largest_batch_of_0_beside_a_batch_that_fits(capsys, tmp_path):
    """PyTensor's MLP at a batch of one holds 1.5 MiB more than at two (28x28):
    budget said "fits yes" at its batch and "largest batch 0" beside it."""
    rng = np.random.default_rng(0)
    path = tmp_path / "m28.npz"
    np.savez(path, x_train=rng.integers(0, 256, (100, 28, 28), dtype=np.uint8),
             y_train=np.arange(100) % 10,
             x_test=rng.integers(0, 256, (50, 28, 28), dtype=np.uint8),
             y_test=np.arange(50) % 10)
    assert main(["budget", "--dataset", str(path), "--model", "mlp", "--device-memory",
                 "4.6MiB", "--mode", "c", "--dtype", "float32"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()
            if line.startswith(("int8 ", "float32 "))]
    for row in rows:  # (PyTensor's step fits there; Aesara's, without the in-place GEMM, not)
        assert row[5] == "no" or row[6] != "0", row
    assert api.NAME != "pytensor" or all(row[5] == "yes" for row in rows)


@pytest.mark.parametrize("command", [
    ["convert", "digits", "-o", "{tmp}/x.h5", "--max-memory", "0"],
    ["preview", "digits", "-o", "{tmp}/x.png", "--max-memory", "0"],
    ["budget", "--model", "logistic", "--device-memory", "0"],
])
def test_size_options_are_refused_by_their_names_before_any_work(capsys, tmp_path, command):
    command = [word.format(tmp=tmp_path) for word in command]
    with pytest.raises(SystemExit) as stopped:
        main(command)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {command[-2]}: '0': expected a positive size" in err
    assert err.count("\n") == 1 and "max_memory=" not in err
    assert not list(tmp_path.iterdir())


def test_budget_counts_a_single_example_in_the_singular(monkeypatch):
    """A split of one example reads as one ("(1 train examples)" was printed)."""
    from int8store.memory import budget

    monkeypatch.setattr(budget, "dataset_summary",
                        lambda dataset: ({"train": 1, "valid": 40, "test": 40}, (8, 8), 10, False))
    out = budget.budget_report("tiny.npz", "logistic", batch_size=20, device_bytes="1GB",
                               mode="c")
    assert "20 is more than the 1 train example: the tutorials take batches of 1" in out
    assert "* all of the smallest split (1 train example)" in out


def test_budget_says_when_the_model_alone_does_not_fit(capsys):
    # (a user trial: the streamed line said "not even one example of each split
    # fits beside the step" where the step alone, at a batch of 1, did not fit)
    assert main(["budget", "--dataset", "digits", "--model", "mlp", "--mode", "c",
                 "--device-memory", "200KiB"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("streamed: none: the step alone, at a batch of 1, takes "), line
    assert line.endswith(" more than the 180.0 KiB planned for: a larger device or a smaller "
                         "model"), line
