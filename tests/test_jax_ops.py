"""Each JAX conversion int8store adds, against the library's C backend on random
inputs, gradients included; each test also checks that the JAX graph really
holds the op under test."""

import numpy as np
import pytest

pytest.importorskip("jax")

from int8store import function_mode  # noqa: E402
from int8store.backend import activate, conv2d, pool_2d  # noqa: E402

api = activate()
lib, at = api.lib, api.at

rng = np.random.default_rng(0)


def both_modes(inputs, outputs, expect_op):
    c = lib.function(inputs, outputs, mode=function_mode("c"))
    jax = lib.function(inputs, outputs, mode=function_mode("jax"))
    names = {type(node.op).__name__ for node in jax.maker.fgraph.toposort()}
    assert expect_op in names, f"{expect_op} is not in the JAX graph ({sorted(names)})"
    return c, jax


def assert_same(c_results, jax_results, tolerance=1e-5):
    for c_value, jax_value in zip(c_results, jax_results):
        np.testing.assert_allclose(np.asarray(jax_value), c_value, rtol=tolerance, atol=tolerance)


# The ops behind conv2d and pool_2d: Aesara's own, or int8store's on PyTensor.
CONV_OPS = {"aesara": ("AbstractConv2d", "AbstractConv2d_gradInputs", "AbstractConv2d_gradWeights"),
            "pytensor": ("Conv2d", "Conv2dGradInputs", "Conv2dGradWeights")}
POOL_OPS = {"aesara": ("Pool", "MaxPoolGrad"), "pytensor": ("MaxPool2d", "MaxPool2dGrad")}

CONV_CASES = [
    dict(border_mode="valid", subsample=(1, 1), filter_flip=True),
    dict(border_mode="full", subsample=(1, 1), filter_flip=True),
    dict(border_mode="half", subsample=(1, 1), filter_flip=False),
    dict(border_mode=(1, 2), subsample=(2, 1), filter_flip=True),
    dict(border_mode=2, subsample=(2, 2), filter_flip=False),
]


@pytest.mark.parametrize("options", CONV_CASES, ids=lambda o: "-".join(map(str, o.values())))
def test_conv2d_and_both_gradients(options):
    image_shape, filter_shape = (2, 3, 9, 8), (4, 3, 3, 2)
    x = at.TensorType("float32", shape=image_shape)("x")
    w = at.TensorType("float32", shape=filter_shape)("w")
    out = conv2d(x, w, input_shape=image_shape, filter_shape=filter_shape, **options)
    weights = at.TensorType("float32", shape=(None,) * 4)("r")
    cost = (out * weights).sum()
    outputs = [out] + at.grad(cost, [x, w])
    images = rng.normal(size=image_shape).astype(np.float32)
    filters = rng.normal(size=filter_shape).astype(np.float32)
    shape = lib.function([x, w], out.shape)(images, filters)
    r = rng.normal(size=shape).astype(np.float32)
    for expect in CONV_OPS[api.NAME]:
        c, jax = both_modes([x, w, weights], outputs, expect)
    assert_same(c(images, filters, r), jax(images, filters, r), 1e-4)


@pytest.mark.parametrize("ignore_border", [True, False])
@pytest.mark.parametrize("window,stride", [((2, 2), None), ((2, 3), (2, 3)), ((3, 2), (2, 1)),
                                           ((2, 3), (3, 3))])
def test_max_pool_and_its_gradient(ignore_border, window, stride):
    shape = (2, 3, 7, 8)
    x = at.TensorType("float32", shape=shape)("x")
    out = pool_2d(x, ws=window, stride=stride, ignore_border=ignore_border)
    images = rng.normal(size=shape).astype(np.float32)
    images[0, 0, :2, :2] = 1.5  # ties: every maximal input gets the gradient, as in Aesara
    weights = at.TensorType("float32", shape=(None,) * 4)("r")
    outputs = [out, at.grad((out * weights).sum(), x)]
    out_shape = lib.function([x], out.shape)(images)
    r = rng.normal(size=out_shape).astype(np.float32)
    both_modes([x, weights], outputs, POOL_OPS[api.NAME][0])
    c, jax = both_modes([x, weights], outputs, POOL_OPS[api.NAME][1])
    assert_same(c(images, r), jax(images, r))


@pytest.mark.aesara
def test_softmax_with_bias_and_the_cross_entropy_ops():
    from aesara.tensor.nnet.basic import (crossentropy_softmax_1hot_with_bias_dx,
                                          crossentropy_softmax_argmax_1hot_with_bias,
                                          softmax_with_bias)
    x = at.TensorType("float32", shape=(6, 5))("x")
    b = at.TensorType("float32", shape=(5,))("b")
    y = at.TensorType("int32", shape=(6,))("y")
    dy = at.TensorType("float32", shape=(6,))("dy")
    values = (rng.normal(size=(6, 5)).astype(np.float32), rng.normal(size=5).astype(np.float32),
              rng.integers(0, 5, 6).astype(np.int32), rng.normal(size=6).astype(np.float32))
    c, jax = both_modes([x, b], softmax_with_bias(x, b), "SoftmaxWithBias")
    assert_same([c(*values[:2])], [jax(*values[:2])])
    nll, sm, am = crossentropy_softmax_argmax_1hot_with_bias(x, b, y)
    c, jax = both_modes([x, b, y], [nll, sm, am], "CrossentropySoftmaxArgmax1HotWithBias")
    assert_same(c(*values[:3]), jax(*values[:3]))
    dx = crossentropy_softmax_1hot_with_bias_dx(dy, sm, y)
    c, jax = both_modes([x, b, y, dy], dx, "CrossentropySoftmax1HotWithBiasDx")
    assert_same([c(*values)], [jax(*values)])


def test_argmax_and_float32_sums():
    x = at.TensorType("float32", shape=(4, 3, 5))("x")
    values = rng.normal(size=(4, 3, 5)).astype(np.float32)
    c, jax = both_modes([x], [at.argmax(x, axis=1), at.argmax(x, axis=(0, 2))], "Argmax")
    assert_same(c(values), jax(values))
    total = x.sum(axis=0)  # float32 values summed in a float64 accumulator
    c, jax = both_modes([x], total, "Sum")
    result = jax(values)
    assert np.asarray(result).dtype == np.float32
    assert_same([c(values)], [result])


def test_partially_specified_shapes():
    x = at.TensorType("float32", shape=(None, None))("x")
    y = at.specify_shape(x, (None, 3)) * 2
    c, jax = both_modes([x], y, "SpecifyShape")
    values = rng.normal(size=(4, 3)).astype(np.float32)
    assert_same([c(values)], [jax(values)])


@pytest.mark.parametrize("padding", [((0, 0), (0, 0)), ((1, 1), (1, 1)), ((2, 2), (1, 1)),
                                     ((0, 2), (1, 0))])
def test_channels_last_forms_give_the_library_forms_bits(padding):
    """XLA:CPU's fast form of conv2d and both gradients (what int8store's
    conversions use on the CPU, inside loops too) against lax's NCHW
    correlation and its pullbacks: the same bits."""
    import jax

    from int8store.backend.jax.channels_last import (correlate, correlate_grad_inputs,
                                                     correlate_grad_weights, gradients_apply)

    img = rng.normal(size=(3, 4, 9, 8)).astype(np.float32)
    kern = rng.normal(size=(5, 4, 3, 3)).astype(np.float32)

    def nchw(img, kern):
        return jax.lax.conv_general_dilated(img, kern, (1, 1), padding,
                                            dimension_numbers=("NCHW", "OIHW", "NCHW"))

    out, pullback = jax.vjp(nchw, img, kern)
    cotangent = rng.normal(size=out.shape).astype(np.float32)
    d_img, d_kern = pullback(cotangent)
    assert gradients_apply((1, 1), padding, (3, 3))
    np.testing.assert_array_equal(correlate(img, kern, (1, 1), padding), out)
    np.testing.assert_array_equal(correlate_grad_weights(img, cotangent, padding), d_kern)
    np.testing.assert_array_equal(correlate_grad_inputs(kern, cotangent, padding), d_img)
    # a true convolution's kernel (filter_flip): the correlating one turned half-way round
    np.testing.assert_array_equal(correlate_grad_weights(img, cotangent, padding, flip=True),
                                  d_kern[:, :, ::-1, ::-1])
    np.testing.assert_array_equal(
        correlate_grad_inputs(kern[:, :, ::-1, ::-1], cotangent, padding, flip=True), d_img)
    # strides, dilations, groups and paddings of a kernel's size or more keep the pullbacks
    assert not gradients_apply((2, 1), padding, (3, 3))
    assert not gradients_apply((1, 1), padding, (3, 3), dilation=(2, 2))
    assert not gradients_apply((1, 1), padding, (3, 3), groups=2)
    assert not gradients_apply((1, 1), ((3, 3), (0, 0)), (3, 3))


@pytest.mark.parametrize("set_instead", [False, True], ids=["increment", "set"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_update_a_row_gives_the_scatter_bits(set_instead, dtype):
    """x[arange(n), cols] (+)= v, the classic NLL's gradient, converted to an
    elementwise choice: the bits of the library's scatter, negative columns
    and columns out of range (JAX drops them) included, one value a row or
    one for all."""
    import jax.numpy as jnp

    from int8store.backend.jax.conversions import convert

    _jax_funcify = api.module("link.jax.dispatch").jax_funcify
    n, width = 6, 5
    x = at.TensorType(dtype, shape=(n, None))("x")
    cols = at.TensorType("int32", shape=(n,))("cols")
    rows = at.constant(np.arange(n, dtype="uint8"))
    x_values = rng.normal(size=(n, width)).astype(dtype)
    col_values = np.array([0, 4, -1, 2, 7, -5], np.int32)  # 7: out of range
    for values in (at.TensorType(dtype, shape=(n,))("v"), at.TensorType(dtype, shape=())("v")):
        update = (at.set_subtensor if set_instead else at.inc_subtensor)(x[rows, cols], values)
        node = update.owner
        assert type(node.op).__name__ == "AdvancedIncSubtensor"
        v = rng.normal(size=values.type.shape).astype(dtype)
        arguments = [jnp.asarray(a) for a in (x_values, v, rows.data, col_values)]
        ours = convert(node.op, node=node)(*arguments)
        library = _jax_funcify(node.op, node=node)(*arguments)
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(library))
        assert np.asarray(ours).dtype == np.asarray(library).dtype  # (float32 without x64)
    # rows that are not arange(n) keep the library's scatter
    other = at.inc_subtensor(x[at.constant(np.array([1, 0, 2, 3, 4, 5])), cols], values).owner
    from int8store.backend.jax.row_updates import one_update_a_row
    assert one_update_a_row(node) and not one_update_a_row(other)


def test_a_tutorial_step_has_no_scatter():
    """The NLL step, many a call, compiles to an XLA loop without a scatter
    (which a GPU makes with atomics, or sorts under deterministic ops)."""
    from int8store import SharedDataset
    from int8store.training import steps_function

    data = SharedDataset.from_arrays(rng.integers(0, 256, (40, 12)).astype(np.uint8),
                                     rng.integers(0, 3, 40), name="train", dtype="float32")
    w = lib.shared(np.zeros((12, 3), np.float32), name="w")
    index, x, y = at.lscalar(), at.matrix("x", dtype="float32"), at.ivector("y")
    p = api.module("tensor.special").softmax(x @ w, axis=-1)
    cost = -at.mean(at.log(p)[at.arange(y.shape[0]), y])
    steps = steps_function([index], cost, [(w, w - np.float32(0.1) * at.grad(cost, w))], mode="jax",
                           givens={x: data.x[index * 10:(index + 1) * 10],
                                   y: data.y[index * 10:(index + 1) * 10]}, steps=4)
    text = steps.function.lower().as_text()
    assert "while" in text and "scatter" not in text
    steps(0)
    assert np.isfinite(w.get_value()).all() and np.abs(w.get_value()).sum() > 0


def test_an_update_of_another_dtype_is_refused_with_the_variable_named():
    from int8store import ArgumentError
    from int8store.training import steps_function

    w = lib.shared(np.zeros(3, np.float32), name="w")
    index = at.lscalar()
    with pytest.raises(ArgumentError, match="update of w: float64 values for a float32"):
        steps_function([index], w.sum(), [(w, w - at.constant(np.float64(0.1)))], mode="jax")


@pytest.mark.parametrize("apart", [False, True], ids=["folded", "apart"])
def test_the_forward_kernel_turn_kept_apart_on_a_gpu_computes_the_same(monkeypatch, apart):
    """In programs made for a GPU (``compiling_for("gpu")``, traced and run
    here on the CPU) with ``kernel_turn.TURN_APART_ON_GPU``, the forward
    convolution's turned kernel, and only its, sits behind an optimization
    barrier, which makes XLA call cuDNN's forward convolution; the values and
    both gradients are the C backend's, as without the barrier."""
    import jax

    from int8store.backend.jax import kernel_turn
    from int8store.backend.jax.direct import jax_graph
    from int8store.backend.jax.generated_source import graph_to_python
    from int8store.backend.jax.target import compiling_for

    monkeypatch.setattr(kernel_turn, "TURN_APART_ON_GPU", apart)
    image_shape, filter_shape = (4, 2, 10, 9), (3, 2, 5, 5)  # LeNet5's kernels, valid
    x = at.TensorType("float32", shape=image_shape)("x")
    w = at.TensorType("float32", shape=filter_shape)("w")
    out = conv2d(x, w, input_shape=image_shape, filter_shape=filter_shape)
    weights = at.TensorType("float32", shape=(4, 3, 6, 5))("r")
    outputs = [out] + at.grad((out * weights).sum(), [x, w])
    values = [rng.normal(size=v.type.shape).astype(np.float32) for v in (x, w, weights)]
    with compiling_for("gpu"):
        converted = graph_to_python(jax_graph([x, w, weights], outputs), "kernel_turn_test")
        jaxpr = str(jax.make_jaxpr(converted)(*values))
        results = jax.jit(converted)(*values)
    assert jaxpr.count("optimization_barrier") == (1 if apart else 0)
    assert_same(lib.function([x, w, weights], outputs, mode=function_mode("c"))(*values),
                results, 1e-4)
    on_this_cpu = str(jax.make_jaxpr(lambda kern: kernel_turn.turned(kern, forward=True))(
        values[1]))  # (a forward convolution's kernel, in a program made for the CPU)
    assert "rev" in on_this_cpu and "optimization_barrier" not in on_this_cpu
