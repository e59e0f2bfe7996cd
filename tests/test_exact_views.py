"""Every normalization's values are numpy's, bit for bit, in every mode a
user compiles in: the library's default (PyTensor's is Numba, with
fast-math), int8store's C mode and JAX mode, and ``x.get_value()``.

Each source below broke that once: the library folds a float offset into
the mean (``c + (128 - mean)``, rounded twice), PyTensor's C code wrote a
float32 mean as a double literal (and so subtracted in double; a grey
image's channel mean, folded into a scalar, too), and Numba's
fast-math and XLA's CPU division (float32 without x64, float64 with it)
are an ulp off numpy's for levels / 255; Aesara's JAX conversion could not
look a constant table up at all."""

import importlib.util

import numpy as np
import pytest

from int8store import SharedDataset, function_mode, place, tensor_library

has_jax = importlib.util.find_spec("jax") is not None
MODES = ["library default", "c", pytest.param("jax", marks=pytest.mark.skipif(
    not has_jax, reason="JAX is not installed in this environment"))]
theano = tensor_library()
T = theano.tensor
rng = np.random.default_rng(5)
GREY = rng.integers(0, 256, (30, 6, 6)).astype(np.uint16)  # (levels = the values)
COLOUR = rng.integers(0, 256, (30, 4, 4, 3)).astype(np.uint8)
COLOUR[..., 0] //= 7  # (a mean below 64: 128 - mean is not exact in float32)


def levels_and_source(name):
    """The pixel levels ``x`` the docs' formulas take, and the source."""
    if name == "k/255 in float64":
        return GREY.reshape(30, -1), GREY / 255.0
    if name == "k/255 in float32":
        return GREY.reshape(30, -1), (GREY / np.float32(255)).astype(np.float32)
    if name == "codebook":
        values = (COLOUR.astype(np.float64) ** 2 / 3.0).astype(np.float32)
        return values.reshape(30, -1).astype(np.float64), values
    source = COLOUR if name == "colour" else GREY
    return source.reshape(30, -1), source


def expected(levels, split, normalize, dtype):
    """numpy's arithmetic on the same operands, in ``dtype``."""
    x = levels.astype(dtype)
    spread = np.asarray(128 if not split.encoding.is_codebook else
                        (x.max() - x.min()) / 2, dtype)
    if normalize == "dataset":
        return (x - np.asarray(split.dataset_mean, dtype)) / spread
    statistics = split.channel_statistics
    repeat = x.shape[1] // statistics.channels
    centred = x - np.tile(np.asarray(statistics.mean, dtype), repeat)
    if normalize == "channel":
        return centred / spread
    return centred * np.tile((1 / np.asarray(statistics.std)).astype(dtype), repeat)


CASES = [("k/255 in float64", "unit", "float64"), ("k/255 in float64", "unit", "float32"),
         ("k/255 in float32", "unit", "float32"), ("k/255 in float32", "unit", "float64"),
         ("grey", "unit", "float32"), ("grey", "unit", "float64"),
         ("grey", "dataset", "float32"), ("grey", "channel", "float32"),
         ("grey", "standard", "float32"), ("colour", "dataset", "float32"),
         ("colour", "channel", "float32"), ("colour", "standard", "float32"),
         ("colour", "standard", "float64"), ("codebook", "dataset", "float32"),
         ("codebook", "unit", "float64")]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("source, normalize, dtype", CASES,
                         ids=[" ".join(case) for case in CASES])
def test_minibatches_hold_numpys_values_in_every_mode(source, normalize, dtype, mode):
    levels, images = levels_and_source(source)
    split = SharedDataset.from_arrays(images, np.arange(30) % 3, name="train", dtype=dtype,
                                      normalize=normalize)
    assert split.encoding.is_codebook == (source == "codebook")
    if normalize == "unit":  # (integer pixels: their own scale, the classic k/256)
        want = images.reshape(30, -1).astype(dtype) if images.dtype.kind == "f" \
            else levels.astype(dtype) / np.asarray(256, dtype)
    else:
        want = expected(levels, split, normalize, dtype)
    if mode == "jax":
        import jax

        if dtype == "float64" and not jax.config.jax_enable_x64:  # (float32 arrays then)
            pytest.skip("float64 in JAX mode needs x64, on where floatX is float64")
        place([split], "jax")
    index = T.lscalar()
    minibatch = theano.function([index], split.x[index * 10:(index + 1) * 10],
                                mode=None if mode == "library default" else function_mode(mode))
    got = np.concatenate([np.asarray(minibatch(i)) for i in range(3)])
    assert got.dtype == want.dtype and (got == want).all(), \
        f"{int((got != want).sum())} of {want.size} values differ"
    assert (split.x.get_value() == want).all()


@pytest.mark.parametrize("mode", ["library default", "c"])
@pytest.mark.parametrize("slicing", ["classic", "begin and length"])
def test_a_cost_over_the_view_compiles_as_over_the_classic_shared_variable(mode, slicing):
    """A denoising autoencoder's step (the images elementwise in the cost, a
    mean over the minibatch), compiled once over a classic float shared
    variable and once over int8store's view of the same values: the same
    costs and weights, bit for bit. They differed in the last digits: the
    library distributed the cost's products over the conversion
    ``(c + 128) * 2**-8``, and a minibatch length known to the type made the
    mean a product by a constant (the classic's slice has no static length)."""
    pixels = np.random.default_rng(7).integers(0, 256, (60, 49)).astype(np.uint8)
    dtype = theano.config.floatX
    classic = theano.shared((pixels / np.float32(256)).astype(dtype))
    split = SharedDataset.from_arrays(pixels.reshape(60, 7, 7), np.arange(60) % 3, name="train")
    costs = {}
    for name, images in (("classic", classic), ("int8store", split.x)):
        weights = np.random.default_rng(8).uniform(-0.1, 0.1, (49, 13)).astype(dtype)
        W = theano.shared(weights)
        x, index = T.matrix("x"), T.lscalar()
        z = T.sigmoid(T.dot(T.sigmoid(T.dot(x * 0.7, W)), W.T))
        cost = T.mean(-T.sum(x * T.log(z) + (1 - x) * T.log(1 - z), axis=1))
        begin = index * 20
        rows = (images[index * 20:(index + 1) * 20] if slicing == "classic"
                else images[begin:begin + 20])
        step = theano.function([index], cost, updates=[(W, W - 0.1 * T.grad(cost, W))],
                               givens={x: rows},
                               mode=None if mode == "library default" else function_mode(mode))
        costs[name] = [step(i % 3) for i in range(9)] + [W.get_value()]
    for classic_value, int8store_value in zip(costs["classic"], costs["int8store"]):
        np.testing.assert_array_equal(classic_value, int8store_value)
