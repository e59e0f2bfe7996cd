"""The symbolic float32 conversion, checked against numpy."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

from int8store import ArgumentError, dequantize, quantize
from int8store.backend import activate
from int8store.dataset.symbolic import normalization_mean

lib, at = activate().lib, activate().at

matrices = hnp.array_shapes(min_dims=2, max_dims=2, max_side=16)
pixels = hnp.arrays(np.uint8, matrices, elements=st.integers(0, 255))


_compiled = {}


def compile_dequantize(encoding, normalize="unit", dataset_mean=None, dtype="float32"):
    """The compiled conversion, once per encoding and settings: the property
    tests' examples share a handful of encodings, and compiling is most of
    their time."""
    fields = (getattr(encoding, f.name) for f in dataclasses.fields(encoding))
    key = tuple(v.tobytes() if isinstance(v, np.ndarray) else v for v in fields) \
        + (normalize, dataset_mean, dtype)
    if key not in _compiled:
        codes = at.matrix(dtype="int8")
        _compiled[key] = lib.function([codes], dequantize(codes, encoding, normalize,
                                                          dataset_mean, dtype))
    return _compiled[key]


@pytest.fixture(scope="module")
def unit_256():
    return compile_dequantize(quantize(np.zeros((1, 1), np.uint8))[1])


@given(pixels)
def test_unit_on_k_over_256_float32_is_bit_identical(unit_256, levels):
    original = (levels.astype(np.float32) / np.float32(256)).astype(np.float32)
    codes, enc = quantize(original)
    assert enc.divisor == 256
    converted = unit_256(codes)
    assert converted.dtype == np.float32
    np.testing.assert_array_equal(converted.view(np.uint32), original.view(np.uint32))


@pytest.fixture(scope="module")
def unit_255():
    return compile_dequantize(quantize(np.array([[1 / 255]], np.float32))[1])


@given(pixels.filter(lambda a: a.any()))
def test_unit_on_k_over_255_float32_is_bit_identical(unit_255, levels):
    original = (levels / 255).astype(np.float32)
    codes, enc = quantize(original)
    assert enc.divisor == 255
    np.testing.assert_array_equal(unit_255(codes).view(np.uint32), original.view(np.uint32))


def test_codebook_unit_is_a_lookup():
    values = np.array([[-3.5, 0.125, 7.0], [7.0, -3.5, 1e-3]], dtype=np.float32)
    codes, enc = quantize(values)
    assert enc.is_codebook
    np.testing.assert_array_equal(compile_dequantize(enc)(codes), values)


@given(pixels)
def test_batch_normalization_centres_on_the_tensor_mean(levels):
    codes, enc = quantize(levels)
    result = compile_dequantize(enc, "batch")(codes)
    expected = (levels - levels.mean()) / 128
    np.testing.assert_allclose(result, expected, rtol=0, atol=1e-6)


def test_dataset_and_none_normalizations():
    levels = np.array([[0, 10, 255], [128, 3, 7]], dtype=np.uint8)
    codes, enc = quantize(levels)
    mean = normalization_mean(codes, enc)
    assert mean == pytest.approx(levels.mean())
    result = compile_dequantize(enc, "dataset", mean)(codes)
    np.testing.assert_allclose(result, (levels - levels.mean()) / 128, atol=1e-6)
    np.testing.assert_array_equal(compile_dequantize(enc, "none")(codes), codes.astype(np.float32))


def test_the_centred_normalizations_span_about_minus_one_to_one_whatever_the_divisor():
    # They divided levels by 128 whatever the encoding: the digits' levels
    # 0..16 (k/16) came out within [-0.04, 0.09], and the logistic tutorial
    # with --normalize dataset ended at 69 % validation error against 6 %.
    from int8store import Encoding

    assert [Encoding(128, d).spread for d in (256, 255, 16, 1)] == [128, 128, 8, 0.5]
    levels = np.array([[0, 4, 16], [16, 8, 0]], dtype=np.uint8)
    codes, enc = quantize(levels, divisor=16)
    mean = normalization_mean(codes, enc)
    for normalize in ("batch", "dataset"):
        result = compile_dequantize(enc, normalize, mean if normalize == "dataset" else None)(codes)
        np.testing.assert_allclose(result, (levels - levels.mean()) / 8, rtol=0, atol=1e-6)
        assert -1.5 < result.min() < -0.5 and 0.5 < result.max() < 1.5


def test_decoding_refuses_what_is_no_int8_code():
    from int8store import EncodingError, Encoding

    assert Encoding().decode(np.array([-128, 127])).tolist() == [0.0, 0.99609375]
    for codes in (np.array([300]), np.array([-129]), np.array([0.5])):
        with pytest.raises(EncodingError, match="int8 codes"):
            Encoding().decode(codes)


@pytest.mark.parametrize("normalize, mean", [("unit", None), ("batch", None), ("dataset", 1.5),
                                             ("none", None)])
def test_dtype_follows_floatx_unless_given(normalize, mean):
    codes, enc = quantize(np.array([[1, 2]], np.uint8))
    c = at.matrix(dtype="int8")
    assert dequantize(c, enc, normalize, mean).dtype == lib.config.floatX
    for dtype in ("float32", "float64"):
        assert dequantize(c, enc, normalize, mean, dtype=dtype).dtype == dtype
    with pytest.raises(ArgumentError, match="float32 or float64"):
        dequantize(c, enc, normalize, mean, dtype="int16")


@given(pixels)
def test_float64_views_of_float32_sources_hold_the_same_values(levels):
    # What the classic shared variable held under floatX=float64: the file's
    # float32 values, widened. For k/255 that is not k/255 computed in float64.
    for divisor in (256, 255):
        original = (levels / divisor).astype(np.float32)
        codes, enc = quantize(original)
        widened = compile_dequantize(enc, dtype="float64")(codes)
        np.testing.assert_array_equal(widened, original.astype(np.float64))
        np.testing.assert_array_equal(enc.decode(codes, np.float64), original.astype(np.float64))


def test_bad_normalization_and_missing_mean():
    codes, enc = quantize(np.array([[1, 2]], np.uint8))
    with pytest.raises(ArgumentError, match="'z-score' is not one of unit, batch, dataset, channel, standard, none"):
        dequantize(at.matrix(dtype="int8"), enc, "z-score")
    with pytest.raises(ArgumentError, match="dataset_mean"):
        dequantize(at.matrix(dtype="int8"), enc, "dataset")


def test_dequantize_refuses_what_holds_no_int8_codes():
    # A float matrix was cast to the codes' levels in silence: 0.5 read as code 0.
    codes, enc = quantize(np.array([[1, 2]], np.uint8))
    for wrong in (at.matrix(dtype="float32"), at.matrix(dtype="uint8"), codes.astype(np.int16)):
        with pytest.raises(ArgumentError, match="expected int8 codes"):
            dequantize(wrong, enc)
    assert dequantize(at.matrix(dtype="int8"), enc).ndim == 2


def test_the_quotient_op_takes_an_encodings_offsets_only_and_gives_arrays():
    # (an offset of 64 computed in C where perform's table refused it; a NaN
    # divisor was int()'s ValueError; 0-d codes gave a numpy scalar)
    from int8store.backend.ops.quotient import LevelQuotient

    for offset, divisor in ((64, 256), (128, float("nan")), (128, 0)):
        with pytest.raises(ArgumentError, match="expected an offset of 0 or 128 and a positive"):
            LevelQuotient(offset, divisor, "float32", "float32")
    op, out = LevelQuotient(128, 256, "float32", "float32"), [[None]]
    op.perform(None, [np.array(-128, np.int8)], out)
    assert isinstance(out[0][0], np.ndarray) and out[0][0].shape == () and out[0][0] == 0.0
