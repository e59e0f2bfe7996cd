"""conv2d and pool_2d for PyTensor (int8store.backend.ops: conv, im2col, pooling): checked against
direct NumPy loops, PyTensor's verify_grad, and their JAX conversions."""

import functools
import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.pytensor
pytest.importorskip("pytensor")

import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402
from pytensor.compile.mode import Mode  # noqa: E402
from pytensor.gradient import verify_grad  # noqa: E402

from int8store.backend.ops import im2col, pooling  # noqa: E402
from int8store.backend.ops.conv import Conv2d, Conv2dGradInputs, Conv2dGradWeights, conv2d  # noqa: E402
from int8store.backend.ops.pooling import MaxPool2d, MaxPool2dGrad, pool_2d  # noqa: E402


@pytest.fixture(autouse=True)
def float64_graphs():
    """The ops are checked against float64 references: the graphs here are
    float64 whatever the run's floatX (float32 cases name their dtype)."""
    with pytensor.config.change_flags(floatX="float64"):
        yield


# The ops run their NumPy perform whatever the linker; the Python VM compiles
# at once (PyTensor's default, Numba, would run them in object mode after a
# long compilation, and warn).
MODE = Mode(linker="py", optimizer="fast_compile")


def function(inputs, outputs):
    return pytensor.function(inputs, outputs, mode=MODE)


# -- NumPy references -------------------------------------------------------------------

def reference_conv(img, kern, border_mode="valid", subsample=(1, 1), filter_flip=True):
    """Theano's conv2d, one output pixel at a time."""
    kh, kw = kern.shape[2:]
    if border_mode == "valid":
        pad = (0, 0)
    elif border_mode == "full":
        pad = (kh - 1, kw - 1)
    elif border_mode == "half":
        pad = (kh // 2, kw // 2)
    elif isinstance(border_mode, int):
        pad = (border_mode, border_mode)
    else:
        pad = tuple(border_mode)
    if filter_flip:
        kern = kern[:, :, ::-1, ::-1]
    n, c, rows, cols = img.shape
    padded = np.zeros((n, c, rows + 2 * pad[0], cols + 2 * pad[1]), np.float64)
    padded[:, :, pad[0]:pad[0] + rows, pad[1]:pad[1] + cols] = img
    out_rows = (rows + 2 * pad[0] - kh) // subsample[0] + 1
    out_cols = (cols + 2 * pad[1] - kw) // subsample[1] + 1
    out = np.zeros((n, kern.shape[0], out_rows, out_cols))
    for b, o, i, j in itertools.product(range(n), range(kern.shape[0]), range(out_rows), range(out_cols)):
        r, s = i * subsample[0], j * subsample[1]
        out[b, o, i, j] = np.sum(padded[b, :, r:r + kh, s:s + kw] * kern[o])
    return out


def reference_pool(x, ws, stride=None, ignore_border=True, pad=(0, 0)):
    """Aesara's Pool.perform for mode="max": windows clipped to the unpadded image."""
    stride = stride or ws
    out = [pooling.pool_out_len(x.shape[-2 + d], ws[d], stride[d], pad[d], ignore_border) for d in range(2)]
    result = np.empty(x.shape[:-2] + tuple(out), x.dtype)
    for i, j in itertools.product(range(out[0]), range(out[1])):
        r0, c0 = i * stride[0] - pad[0], j * stride[1] - pad[1]
        r1, c1 = min(r0 + ws[0], x.shape[-2]), min(c0 + ws[1], x.shape[-1])
        window = x[..., max(r0, 0):r1, max(c0, 0):c1]
        result[..., i, j] = window.max(axis=(-2, -1))
    return result


def reference_pool_grad(x, gz, ws, stride=None, ignore_border=True, pad=(0, 0)):
    """Aesara's MaxPoolGrad: every input equal to its window's maximum gets gz (ties too)."""
    stride = stride or ws
    maxout = reference_pool(x, ws, stride, ignore_border, pad)
    grad = np.zeros_like(x)
    for i, j in itertools.product(range(maxout.shape[-2]), range(maxout.shape[-1])):
        r0, c0 = i * stride[0] - pad[0], j * stride[1] - pad[1]
        r1, c1 = min(r0 + ws[0], x.shape[-2]), min(c0 + ws[1], x.shape[-1])
        r0, c0 = max(r0, 0), max(c0, 0)
        hit = x[..., r0:r1, c0:c1] == maxout[..., i, j, None, None]
        grad[..., r0:r1, c0:c1] += hit * gz[..., i, j, None, None]
    return grad


def rng(seed=0):
    return np.random.default_rng(seed)


def distinct(shape, seed=0, dtype="float64"):
    """Values without ties, well apart (finite differences cannot swap a window's maximum)."""
    values = rng(seed).permutation(int(np.prod(shape))).reshape(shape)
    return (values * 0.1 - values.size * 0.05).astype(dtype)


# -- conv2d forward ----------------------------------------------------------------------

BORDER_MODES = ["valid", "full", "half", 1, (2, 1), (0, 3)]


@pytest.mark.parametrize("border_mode", BORDER_MODES)
@pytest.mark.parametrize("subsample", [(1, 1), (2, 2), (3, 2)])
def test_conv2d_matches_the_direct_formula(border_mode, subsample):
    img = rng(1).standard_normal((2, 3, 9, 8))
    kern = rng(2).standard_normal((4, 3, 3, 2))
    x, w = pt.dtensor4("x"), pt.dtensor4("w")
    f = function([x, w], conv2d(x, w, border_mode=border_mode, subsample=subsample))
    np.testing.assert_allclose(f(img, kern), reference_conv(img, kern, border_mode, subsample), rtol=1e-10)


@pytest.mark.parametrize("filter_flip", [True, False])
def test_filter_flip_is_a_convolution_and_no_flip_a_correlation(filter_flip):
    img = np.zeros((1, 1, 5, 5))
    img[0, 0, 2, 2] = 1.0  # an impulse: the output is the kernel, flipped by a convolution
    kern = np.arange(9.0).reshape(1, 1, 3, 3)
    x, w = pt.dtensor4("x"), pt.dtensor4("w")
    out = function([x, w], conv2d(x, w, border_mode="half", filter_flip=filter_flip))(img, kern)
    expected = kern[0, 0] if filter_flip else kern[0, 0, ::-1, ::-1]
    np.testing.assert_array_equal(out[0, 0, 1:4, 1:4], expected)
    np.testing.assert_allclose(out, reference_conv(img, kern, "half", filter_flip=filter_flip))


@pytest.mark.parametrize("chunk_bytes", [None, 1])  # 1: the images go one by one
@pytest.mark.parametrize("layout", ["cnhw", "chwn"])
@pytest.mark.parametrize("shapes", [((3, 1, 7, 11), (2, 1, 3, 5)), ((5, 4, 6, 5), (3, 4, 5, 2)),
                                    ((1, 2, 3, 3), (1, 2, 3, 3))])
def test_both_im2col_layouts(monkeypatch, layout, shapes, chunk_bytes):
    monkeypatch.setattr(im2col, "_layout", lambda *args: layout)
    if chunk_bytes is not None:
        monkeypatch.setattr(im2col, "_CHUNK_BYTES", chunk_bytes)
    img, kern = rng(3).standard_normal(shapes[0]), rng(4).standard_normal(shapes[1])
    for border_mode, subsample in [("valid", (1, 1)), ("full", (2, 1)), ((1, 2), (1, 3))]:
        expected = reference_conv(img, kern, border_mode, subsample)
        got = im2col.conv2d_forward(img, kern, border_mode, subsample)
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
        # The gradients are the forward's adjoints: <top, conv(x, w)> in each argument.
        top = rng(5).standard_normal(expected.shape)
        grad_w = im2col.conv2d_grad_weights(img, top, kern.shape[2:], border_mode, subsample)
        grad_x = im2col.conv2d_grad_inputs(kern, top, img.shape[2:], border_mode, subsample)
        dw, dx = rng(6).standard_normal(kern.shape), rng(7).standard_normal(img.shape)
        np.testing.assert_allclose(np.sum(grad_w * dw), np.sum(top * reference_conv(img, dw, border_mode, subsample)))
        np.testing.assert_allclose(np.sum(grad_x * dx), np.sum(top * reference_conv(dx, kern, border_mode, subsample)))


@pytest.mark.parametrize("layout", ["cnhw", "chwn"])
@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 9), c=st.integers(1, 3), o=st.integers(1, 4), rows=st.integers(3, 9),
       cols=st.integers(3, 9), kh=st.integers(1, 3), kw=st.integers(1, 3),
       border_mode=st.sampled_from(["valid", "full", "half", (1, 2)]),
       subsample=st.sampled_from([(1, 1), (2, 1), (1, 3)]), chunk_bytes=st.sampled_from([None, 1, 600]),
       dtype=st.sampled_from(["float32", "float64"]))
def test_the_scratch_the_planner_counts_is_what_the_calls_keep(layout, n, c, o, rows, cols, kh, kw,
                                                                border_mode, subsample, chunk_bytes,
                                                                dtype):
    """im2col.scratch_bytes, which int8store budget --mode c adds to a step,
    names every buffer each kind of call leaves in the thread's scratch, and
    its size."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(im2col, "_layout", lambda *args: layout)
        if chunk_bytes is not None:
            patch.setattr(im2col, "_CHUNK_BYTES", chunk_bytes)
        img = rng(8).standard_normal((n, c, rows, cols)).astype(dtype)
        kern = rng(9).standard_normal((o, c, kh, kw)).astype(dtype)
        calls = {"forward": lambda: im2col.conv2d_forward(img, kern, border_mode, subsample),
                 "weights": lambda: im2col.conv2d_grad_weights(img, top, (kh, kw), border_mode,
                                                               subsample),
                 "inputs": lambda: im2col.conv2d_grad_inputs(kern, top, (rows, cols), border_mode,
                                                             subsample)}
        top = calls["forward"]()
        for kind, call in calls.items():
            im2col._scratch_buffers.__dict__.clear()
            call()
            kept = {name: buffer.nbytes for name, buffer in vars(im2col._scratch_buffers).items()}
            assert kept == im2col.scratch_bytes(kind, img.shape, kern.shape, border_mode, subsample,
                                                dtype), kind
            # The planner's bound: never less, nor less for one image more.
            bound, more = (im2col.scratch_bytes(kind, (m,) + img.shape[1:], kern.shape, border_mode,
                                                subsample, dtype, bound=True) for m in (n, n + 1))
            assert all(bound.get(name, 0) >= size for name, size in kept.items()), kind
            assert sum(more.values()) >= sum(bound.values()), kind
        im2col._scratch_buffers.__dict__.clear()


def test_long_products_of_small_results():
    """The weight gradient of a first layer: a small result summed over many positions
    goes as a batch of short products (same sum)."""
    a, b = rng(41).standard_normal((2, 20, 5000)), rng(42).standard_normal((2, 25, 5000))
    expected = a[0] @ b[0].T + a[1] @ b[1].T
    for length in [5000, 4999, 300]:  # in pieces of 500; prime: whole; short: whole
        total = np.ones((20, 25))
        im2col._add_products(total, a[..., :length], b[..., :length])
        np.testing.assert_allclose(total, 1 + a[0, :, :length] @ b[0, :, :length].T
                                   + a[1, :, :length] @ b[1, :, :length].T, rtol=1e-12)
    total = np.zeros((20, 25), "float32")
    im2col._add_products(total, a.astype("float32"), b.astype("float32"))
    np.testing.assert_allclose(total, expected, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtypes", [("float32", "float32", "float32"), ("float64", "float64", "float64"),
                                    ("float32", "float64", "float64"), ("int8", "float32", "float32")])
def test_conv2d_dtypes(dtypes):
    img_dtype, kern_dtype, out_dtype = dtypes
    x = pt.tensor("x", dtype=img_dtype, shape=(None,) * 4)
    w = pt.tensor("w", dtype=kern_dtype, shape=(None,) * 4)
    y = conv2d(x, w, border_mode="full", subsample=(1, 2))
    assert y.dtype == out_dtype
    img = rng(8).integers(-5, 5, (2, 2, 5, 7)).astype(img_dtype)
    kern = rng(9).standard_normal((3, 2, 2, 3)).astype(kern_dtype)
    out = function([x, w], y)(img, kern)
    assert out.dtype == out_dtype
    tolerance = 1e-5 if out_dtype == "float32" else 1e-12
    np.testing.assert_allclose(out, reference_conv(img.astype("float64"), kern.astype("float64"), "full", (1, 2)),
                               rtol=tolerance, atol=tolerance)
    # The filters' gradient, also for int8 images (PyTensor wants float gradients).
    gw = function([x, w], pytensor.grad(y.sum(), w))(img, kern)
    assert gw.dtype == kern_dtype and gw.shape == kern.shape


def test_conv2d_static_shapes_and_hints():
    x = pt.tensor("x", shape=(None, 1, 28, 28))
    w = pt.tensor("w", shape=(20, 1, 5, 5))
    assert conv2d(x, w).type.shape == (None, 20, 24, 24)
    assert conv2d(x, w, border_mode="full").type.shape == (None, 20, 32, 32)
    assert conv2d(x, w, border_mode="half", subsample=(2, 3)).type.shape == (None, 20, 14, 10)
    assert conv2d(x, w, border_mode=(1, 2)).type.shape == (None, 20, 26, 28)
    # Hints complete what the types leave open.
    x4, w4 = pt.dtensor4("x"), pt.dtensor4("w")
    assert conv2d(x4, w4).type.shape == (None,) * 4
    y = conv2d(x4, w4, input_shape=(500, None, 12, 12), filter_shape=(50, 20, 5, 5))
    assert y.type.shape == (500, 50, 8, 8)
    # The gradients keep the inputs' static shapes.
    grads = pytensor.grad(conv2d(x, w, subsample=(2, 2)).sum(), [x, w])
    assert [g.type.shape for g in grads] == [(None, 1, 28, 28), (20, 1, 5, 5)]
    grads = pytensor.grad(y.sum(), [x4, w4])
    assert [g.type.shape for g in grads] == [(500, 20, 12, 12), (50, 20, 5, 5)]  # channels: from the filters
    # infer_shape: the shape without running the convolution.
    f = function([x4, w4], conv2d(x4, w4, border_mode="full", subsample=(2, 1)).shape)
    np.testing.assert_array_equal(f(np.zeros((2, 3, 7, 6)), np.zeros((4, 3, 3, 2))), (2, 4, 5, 7))


def test_conv2d_rejects():
    x, w = pt.dtensor4("x"), pt.dtensor4("w")
    with pytest.raises(NotImplementedError, match="filter_dilation"):
        conv2d(x, w, filter_dilation=(2, 2))
    with pytest.raises(NotImplementedError, match="num_groups"):
        conv2d(x, w, num_groups=2)
    with pytest.raises(ValueError, match="border_mode"):
        conv2d(x, w, border_mode="same")
    with pytest.raises(ValueError, match="channels"):
        conv2d(pt.tensor("x", shape=(None, 3, 8, 8)), pt.tensor("w", shape=(2, 4, 3, 3)))
    with pytest.raises(ValueError, match="does not fit"):
        conv2d(pt.tensor("x", shape=(None, 3, 4, 4)), pt.tensor("w", shape=(2, 3, 5, 5)))
    with pytest.raises(ValueError, match="hint"):
        conv2d(pt.tensor("x", shape=(None, 3, 4, 4)), w, input_shape=(None, 3, 5, 5))
    f = function([x, w], conv2d(x, w, input_shape=(None, 1, 6, 6)))
    with pytest.raises(ValueError, match="built"):
        f(np.zeros((1, 1, 7, 7)), np.zeros((1, 1, 2, 2)))


# -- conv2d gradients ----------------------------------------------------------------------

@pytest.mark.parametrize("border_mode, subsample, filter_flip", [
    ("valid", (1, 1), True), ("full", (1, 1), False), ("half", (2, 2), True), ((1, 2), (2, 1), True),
    ("valid", (3, 2), False),
])
def test_conv2d_gradients(border_mode, subsample, filter_flip):
    img = rng(10).standard_normal((2, 2, 7, 6))
    kern = rng(11).standard_normal((3, 2, 3, 2))
    verify_grad(lambda x, w: conv2d(x, w, border_mode=border_mode, subsample=subsample,
                                    filter_flip=filter_flip),
                [img, kern], rng=rng(12), mode=MODE)


def test_conv2d_second_derivatives():
    """The gradient ops' own gradients (each other): a Hessian-vector product."""
    img = rng(13).standard_normal((2, 2, 5, 5))
    kern = rng(14).standard_normal((2, 2, 3, 3))

    def grad_of_squares(x, w):
        gx, gw = pytensor.grad((conv2d(x, w, border_mode="half", subsample=(2, 1)) ** 2).sum(), [x, w])
        return (gx ** 2).sum() + (gw ** 2).sum()

    verify_grad(grad_of_squares, [img, kern], rng=rng(15), mode=MODE)


def test_grad_ops_directly():
    kern = rng(16).standard_normal((3, 2, 3, 3))
    img = rng(17).standard_normal((2, 2, 8, 7))
    top = rng(18).standard_normal((2, 3, 3, 3))  # stride 2, valid: 8 and 7 rows/cols both give 3
    for rows, cols in [(8, 7), (7, 8)]:
        verify_grad(lambda w, t: Conv2dGradInputs(subsample=(2, 2))(w, t, [rows, cols]), [kern, top],
                    rng=rng(19), mode=MODE)
    verify_grad(lambda x, t: Conv2dGradWeights(subsample=(2, 2))(x, t, [3, 3]), [img, top],
                rng=rng(20), mode=MODE)
    node = Conv2dGradInputs()(pt.dtensor4(), pt.dtensor4(), [4, 5]).owner
    assert node.op.connection_pattern(node) == [[True], [True], [False]]
    assert node.outputs[0].type.shape == (None, None, 4, 5)


# -- max pooling -----------------------------------------------------------------------------

POOLINGS = [  # ws, stride, ignore_border, pad
    ((2, 2), None, True, (0, 0)),
    ((2, 2), None, False, (0, 0)),
    ((3, 2), (1, 2), True, (0, 0)),
    ((3, 3), (2, 2), False, (0, 0)),
    ((2, 3), (3, 1), False, (0, 0)),
    ((3, 3), (2, 2), True, (1, 2)),
    ((1, 1), (2, 2), True, (0, 0)),
]


@pytest.mark.parametrize("ws, stride, ignore_border, pad", POOLINGS)
@pytest.mark.parametrize("shape", [(7, 9), (2, 3, 5, 6), (2, 1, 2, 4, 4)])
def test_pool_2d(ws, stride, ignore_border, pad, shape):
    data = rng(21).standard_normal(shape)
    x = pt.tensor("x", shape=(None,) * len(shape))
    y = pool_2d(x, ws, ignore_border=ignore_border, stride=stride, pad=pad)
    out = function([x], y)(data)
    np.testing.assert_array_equal(out, reference_pool(data, ws, stride, ignore_border, pad))
    # The static shape, when the input's is known, and infer_shape otherwise.
    static = pool_2d(pt.tensor("s", shape=shape), ws, ignore_border=ignore_border, stride=stride, pad=pad)
    assert static.type.shape == out.shape
    np.testing.assert_array_equal(function([x], y.shape)(data), out.shape)


@pytest.mark.parametrize("ws, stride, ignore_border, pad", POOLINGS)
def test_pooling_in_chunks_of_planes_is_pooling_whole(ws, stride, ignore_border, pad, monkeypatch):
    """Max pooling takes its images in chunks (its temporary stays small):
    chunks of one image, of two and of all give the reference's values, for
    contiguous images and for views of them (taken as they are, not copied)."""
    from int8store.backend.ops import pooling

    whole = rng(22).standard_normal((6, 5, 7, 9)).astype(np.float32)
    for data in (whole[:3], whole[::2], whole.transpose(0, 1, 3, 2)[..., :7, :7]):
        expected = reference_pool(data, ws, stride, ignore_border, pad)
        for chunk in (1, 2 * 5 * 7 * 9 * 4, 1 << 20):
            monkeypatch.setattr(pooling, "_POOL_CHUNK_BYTES", chunk)
            np.testing.assert_array_equal(
                pooling.max_pool_forward(data, ws, stride or ws, pad, ignore_border), expected)


@pytest.mark.parametrize("ws, stride, ignore_border, pad", POOLINGS)
def test_max_pool_gradient(ws, stride, ignore_border, pad):
    data = distinct((2, 2, 7, 8), seed=22)
    verify_grad(lambda x: pool_2d(x, ws, ignore_border=ignore_border, stride=stride, pad=pad),
                [data], rng=rng(23), mode=MODE)


@pytest.mark.parametrize("ws, stride, ignore_border, pad", POOLINGS)
def test_max_pool_gradient_ties(ws, stride, ignore_border, pad):
    """Every input equal to its window's maximum receives the window's gradient."""
    data = rng(24).integers(0, 3, (2, 3, 7, 8)).astype("float64")  # many ties
    x = pt.tensor("x", shape=(None,) * 4)
    y = pool_2d(x, ws, ignore_border=ignore_border, stride=stride, pad=pad)
    gz = pt.tensor("gz", shape=(None,) * 4)
    gx = pytensor.grad(None, x, known_grads={y: gz})
    upstream = rng(25).standard_normal(reference_pool(data, ws, stride, ignore_border, pad).shape)
    np.testing.assert_allclose(function([x, gz], gx)(data, upstream),
                               reference_pool_grad(data, upstream, ws, stride, ignore_border, pad))


def test_max_pool_tie_rule_by_hand():
    data = np.array([[1.0, 3.0, 0.0, 0.0],
                     [3.0, 2.0, 0.0, 0.0]])
    x = pt.dmatrix("x")
    gx = pytensor.grad(pool_2d(x, (2, 2)).sum(), x)
    np.testing.assert_array_equal(function([x], gx)(data), [[0, 1, 1, 1], [1, 0, 1, 1]])
    # Overlapping windows add up: the middle 3 is the maximum of both windows.
    row = np.array([[0.0, 3.0, 1.0]])
    gx = pytensor.grad(pool_2d(x, (1, 2), stride=(1, 1)).sum(), x)
    np.testing.assert_array_equal(function([x], gx)(row), [[0, 2, 0]])


def test_pool_dtypes_and_static_shapes():
    for dtype in ["float32", "float64", "int16", "uint8"]:
        x = pt.tensor("x", dtype=dtype, shape=(3, None, 5, 7))
        y = pool_2d(x, (2, 3), ignore_border=False)
        assert y.dtype == dtype and y.type.shape == (3, None, 3, 3)
        data = rng(26).integers(0, 100, (3, 2, 5, 7)).astype(dtype)
        out = function([x], y)(data)
        assert out.dtype == dtype
        np.testing.assert_array_equal(out, reference_pool(data, (2, 3), None, False))
    x = pt.tensor("x", shape=(2, 3, 8, 8))
    assert pytensor.grad(pool_2d(x, (2, 2)).sum(), x).type.shape == (2, 3, 8, 8)


def test_pool_rejects():
    x = pt.dtensor4("x")
    with pytest.raises(NotImplementedError, match="average_exc_pad"):
        pool_2d(x, (2, 2), mode="average_exc_pad")
    with pytest.raises(ValueError, match="mode"):
        pool_2d(x, (2, 2), mode="min")
    with pytest.raises(NotImplementedError, match="ignore_border"):
        pool_2d(x, (2, 2), ignore_border=False, pad=(1, 1))
    with pytest.raises(NotImplementedError, match="smaller"):
        pool_2d(x, (2, 2), pad=(2, 0))
    with pytest.raises(NotImplementedError, match="dimension"):
        pool_2d(pt.vector("v"), (2, 2))


@pytest.mark.parametrize("ws, stride, ignore_border, pad", POOLINGS)
def test_max_pool_second_derivatives(ws, stride, ignore_border, pad):
    """The gradient op's own gradient in gz (Aesara's DownsampleFactorMaxGradGrad):
    double backpropagation and R-operator products through max pooling."""
    x = distinct((2, 3, 5, 6), seed=40) / 180  # (small: the finite differences stay exact)

    def grad_of_cubes(x):
        y = pool_2d(x, ws, ignore_border=ignore_border, stride=stride, pad=pad)
        return (pytensor.grad((y ** 3).sum(), x) ** 2).sum()

    verify_grad(grad_of_cubes, [x], rng=rng(41), mode=MODE)
    xs, v = pt.dtensor4("x"), pt.dtensor4("v")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # (Rop's new name, pushforward, is PyTensor 3's)
        pushed = pytensor.gradient.Rop(pool_2d(xs, ws, ignore_border=ignore_border, stride=stride,
                                               pad=pad), xs, v, use_op_rop_implementation=False)
    f = pytensor.function([xs, v], pushed, mode=MODE, on_unused_input="ignore")
    direction = rng(42).standard_normal(x.shape)
    step = 1e-6  # max pooling is linear between ties
    expected = (reference_pool(x + step * direction, ws, stride, ignore_border, pad)
                - reference_pool(x, ws, stride, ignore_border, pad)) / step
    np.testing.assert_allclose(f(x, direction), expected, rtol=1e-6, atol=1e-8)


def test_default_mode_runs_the_ops():
    """PyTensor's default linker (Numba in 3.x) runs the ops' perform in object
    mode, without PyTensor's warning (int8store.backend.ops.numba)."""
    pytest.importorskip("numba")
    x = pt.tensor("x", dtype="float32", shape=(2, 1, 8, 8))
    w = pt.tensor("w", dtype="float32", shape=(3, 1, 3, 3))
    cost = pool_2d(pt.tanh(conv2d(x, w)), (2, 2)).sum()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Numba will use object mode ..." included
        f = pytensor.function([x, w], [cost] + pytensor.grad(cost, [x, w]))
    img = rng(27).standard_normal((2, 1, 8, 8)).astype("float32")
    kern = rng(28).standard_normal((3, 1, 3, 3)).astype("float32")
    out, gx, gw = f(img, kern)
    expected = reference_pool(np.tanh(reference_conv(img, kern)), (2, 2)).sum()
    np.testing.assert_allclose(out, expected, rtol=1e-5)
    assert gx.dtype == gw.dtype == "float32" and gx.shape == img.shape and gw.shape == kern.shape


# -- JAX conversions -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def convert():
    pytest.importorskip("jax")
    from int8store.backend.jax.pytensor_conversions import register

    dispatcher = functools.singledispatch(lambda op, **kwargs: None)
    register(dispatcher)
    return dispatcher


def _run_both(convert, node, *values):
    """The node's perform and its JAX conversion, on the same NumPy values."""
    storage = [[None]]
    node.op.perform(node, list(values), storage)
    jax_out = np.asarray(convert(node.op, node=node)(*values))
    return storage[0][0], jax_out


CONV_CASES = [("valid", (1, 1), True), ("full", (2, 1), False), ("half", (1, 2), True), ((1, 2), (2, 2), True)]


@pytest.mark.parametrize("border_mode, subsample, filter_flip", CONV_CASES)
def test_jax_conv_ops(convert, border_mode, subsample, filter_flip):
    settings = dict(border_mode=border_mode, subsample=subsample, filter_flip=filter_flip)
    img = rng(30).standard_normal((2, 3, 7, 6)).astype("float32")
    kern = rng(31).standard_normal((4, 3, 3, 2)).astype("float32")
    x = pt.tensor("x", dtype="float32", shape=img.shape)
    w = pt.tensor("w", dtype="float32", shape=kern.shape)
    node = Conv2d(**settings)(x, w).owner
    out, jax_out = _run_both(convert, node, img, kern)
    np.testing.assert_allclose(jax_out, out, rtol=1e-4, atol=1e-4)
    top = rng(32).standard_normal(out.shape).astype("float32")
    t = pt.tensor("t", dtype="float32", shape=top.shape)
    node = Conv2dGradWeights(**settings)(x, t, kern.shape[2:]).owner
    np.testing.assert_allclose(*_run_both(convert, node, img, top, np.array(kern.shape[2:])), rtol=1e-4, atol=1e-3)
    node = Conv2dGradInputs(**settings)(w, t, img.shape[2:]).owner
    np.testing.assert_allclose(*_run_both(convert, node, kern, top, np.array(img.shape[2:])), rtol=1e-4, atol=1e-3)


def test_jax_conv_grads_with_unknown_static_shapes(convert):
    """Shapes left open in the types: the conversion reads the shape input."""
    img = rng(33).standard_normal((2, 2, 7, 7)).astype("float32")
    kern = rng(34).standard_normal((3, 2, 3, 3)).astype("float32")
    top = rng(35).standard_normal((2, 3, 3, 3)).astype("float32")
    x, w, t = (pt.tensor(n, dtype="float32", shape=(None,) * 4) for n in "xwt")
    shape = pt.vector("shape", dtype="int64")
    node = Conv2dGradInputs(subsample=(2, 2))(w, t, shape).owner
    np.testing.assert_allclose(*_run_both(convert, node, kern, top, np.array([7, 7])), rtol=1e-4, atol=1e-4)
    node = Conv2dGradWeights(subsample=(2, 2))(x, t, shape).owner
    np.testing.assert_allclose(*_run_both(convert, node, img, top, np.array([3, 3])), rtol=1e-4, atol=1e-3)


def test_jax_conv_mixed_dtypes(convert):
    img = rng(36).integers(-3, 3, (1, 2, 5, 5)).astype("int8")
    kern = rng(37).standard_normal((2, 2, 2, 2)).astype("float32")
    x = pt.tensor("x", dtype="int8", shape=img.shape)
    node = Conv2d()(x, pt.tensor("w", dtype="float32", shape=kern.shape)).owner
    out, jax_out = _run_both(convert, node, img, kern)
    assert jax_out.dtype == np.float32
    np.testing.assert_allclose(jax_out, out, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ws, stride, ignore_border, pad", POOLINGS)
def test_jax_pool_ops(convert, ws, stride, ignore_border, pad):
    settings = dict(ws=ws, stride=stride, ignore_border=ignore_border, pad=pad)
    data = rng(38).integers(0, 4, (2, 3, 7, 8)).astype("float32")  # ties
    x = pt.tensor("x", dtype="float32", shape=data.shape)
    node = MaxPool2d(**settings)(x).owner
    out, jax_out = _run_both(convert, node, data)
    np.testing.assert_array_equal(jax_out, out)
    gz = rng(39).standard_normal(out.shape).astype("float32")
    m, g = pt.tensor("m", dtype="float32", shape=out.shape), pt.tensor("g", dtype="float32", shape=out.shape)
    node = MaxPool2dGrad(**settings)(x, m, g).owner
    np.testing.assert_allclose(*_run_both(convert, node, data, out, gz), rtol=1e-6, atol=1e-6)


def test_jax_pool_on_other_ranks(convert):
    data = rng(40).standard_normal((5, 7)).astype("float64")
    node = MaxPool2d((2, 2), ignore_border=False)(pt.tensor("x", dtype="float64", shape=data.shape)).owner
    out, jax_out = _run_both(convert, node, data)
    np.testing.assert_allclose(jax_out, out)  # float32 in JAX unless x64 is enabled


def test_jax_conversions_under_jit(convert):
    """Traced (as in a JAX function): the static shapes come from the node's types."""
    import jax

    img = rng(43).standard_normal((2, 3, 9, 8)).astype("float32")
    kern = rng(44).standard_normal((4, 3, 3, 2)).astype("float32")
    x = pt.tensor("x", dtype="float32", shape=img.shape)
    w = pt.tensor("w", dtype="float32", shape=kern.shape)
    settings = dict(border_mode="half", subsample=(2, 3))
    forward = Conv2d(**settings)(x, w)
    top = rng(45).standard_normal(forward.type.shape).astype("float32")
    t = pt.tensor("t", dtype="float32", shape=top.shape)
    pooled = MaxPool2d((3, 3), stride=(2, 2), pad=(1, 1))(x)
    gz = rng(46).standard_normal(pooled.type.shape).astype("float32")
    maxout = pooling.max_pool_forward(img, (3, 3), (2, 2), (1, 1), True)
    cases = [(forward.owner, [img, kern]),
             (Conv2dGradWeights(**settings)(x, t, kern.shape[2:]).owner, [img, top, np.array(kern.shape[2:])]),
             (Conv2dGradInputs(**settings)(w, t, img.shape[2:]).owner, [kern, top, np.array(img.shape[2:])]),
             (pooled.owner, [img]),
             (MaxPool2dGrad((3, 3), stride=(2, 2), pad=(1, 1))(x, pooled, pooled).owner, [img, maxout, gz])]
    for node, values in cases:
        storage = [[None]]
        node.op.perform(node, values, storage)
        traced = np.asarray(jax.jit(convert(node.op, node=node))(*values))
        np.testing.assert_allclose(traced, storage[0][0], rtol=1e-4, atol=1e-4)
    # Left open in the types, the images' size is unknown while tracing: said so.
    open_node = Conv2dGradInputs()(pt.tensor("k", dtype="float32", shape=(None,) * 4),
                                   pt.tensor("g", dtype="float32", shape=(None,) * 4),
                                   pt.vector("s", dtype="int64")).owner
    with pytest.raises(NotImplementedError, match="input_shape"):
        jax.jit(convert(open_node.op, node=open_node))(kern, np.zeros((2, 4, 7, 7), "float32"), np.array([9, 8]))
