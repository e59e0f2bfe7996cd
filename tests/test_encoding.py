"""Property tests: every encoding round-trips exactly, or is refused with a reason."""

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

from int8store import Encoding, EncodingError, quantize
from int8store.codes.encoding import encode
from int8store.codes.survey import choose_encoding

pytestmark = pytest.mark.graph_free

shapes = hnp.array_shapes(min_dims=1, max_dims=3, max_side=12)


def levels_array(dtype=np.uint8, low=0, high=255):
    return hnp.arrays(dtype, shapes, elements=st.integers(low, high))


@given(levels_array())
def test_uint8_codes_are_pixels_minus_128(pixels):
    codes, enc = quantize(pixels)
    assert codes.dtype == np.int8
    assert (enc.offset, enc.divisor, enc.is_codebook) == (128, 256, False)
    np.testing.assert_array_equal(codes.astype(np.int16) + 128, pixels)
    np.testing.assert_array_equal(enc.decode(codes, np.float64), pixels / 256)


@given(levels_array(np.int8, -128, 127))
def test_int8_data_is_stored_as_is(values):
    codes, enc = quantize(values)
    assert enc.offset == 0
    np.testing.assert_array_equal(codes, values)


@given(levels_array(np.int64, 0, 255))
def test_wide_integers_in_pixel_range_use_the_uint8_offset(values):
    codes, enc = quantize(values, divisor=255)
    assert (enc.offset, enc.divisor) == (128, 255)
    np.testing.assert_array_equal(enc.levels(codes), values)


@pytest.mark.parametrize("divisor", [256, 255])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@given(data=st.data())
def test_k_over_256_and_255_floats_round_trip_bit_for_bit(divisor, dtype, data):
    levels = data.draw(levels_array())
    values = (levels.astype(np.float64) / divisor).astype(dtype)
    codes, enc = quantize(values)
    # Only 0 is both k/256 and k/255; 256 is tried first.
    assert enc.divisor == (256 if divisor == 256 or not levels.any() else 255)
    decoded = enc.decode(codes, dtype)
    assert decoded.dtype == dtype
    np.testing.assert_array_equal(decoded.view(np.uint8), values.view(np.uint8))


@pytest.mark.parametrize("divisor", [256, 255])
@given(data=st.data())
def test_float16_sources_come_back_as_their_own_values_in_every_view(divisor, data):
    # float16(k/255) is not float32(k/255): such data was taken as k/255 and
    # came back as float32's values, 762 of 768 off in the last bits.
    levels = data.draw(levels_array())
    values = (levels.astype(np.float64) / divisor).astype(np.float16)
    codes, enc = quantize(values)
    assert enc.lossless
    for view in (np.float32, np.float64):
        np.testing.assert_array_equal(enc.decode(codes, view), values.astype(view))


finite_floats = st.floats(-1e6, 1e6, allow_nan=False, width=32)


@given(st.lists(finite_floats, min_size=1, max_size=256, unique=True), st.data())
def test_up_to_256_distinct_values_use_an_exact_codebook(distinct, data):
    pool = np.array(distinct, dtype=np.float32)
    index = data.draw(hnp.arrays(np.int64, shapes, elements=st.integers(0, len(pool) - 1)))
    values = pool[index]
    codes, enc = quantize(values)
    decoded = enc.decode(codes, np.float32)
    np.testing.assert_array_equal(decoded, values)
    if enc.is_codebook:
        assert enc.codebook.shape == (256,) and enc.lossless


@given(st.integers(257, 600))
def test_more_than_256_distinct_values_are_refused_with_count_and_range(n):
    values = np.linspace(0.1, 0.9, n, dtype=np.float64) + 1e-9
    with pytest.raises(EncodingError) as error:
        quantize(values, name="scans.npz")
    message = str(error.value)
    assert "scans.npz" in message and f"{n} distinct values" in message
    assert f"from {values.min()} to {values.max()}," in message  # (not numpy 2's np.float64(...))


@given(st.integers(257, 3000), st.integers(0, 2**32 - 1))
def test_lossy_quantization_only_on_request_and_reports_its_error(n, seed):
    values = np.random.default_rng(seed).normal(size=n)
    with pytest.raises(EncodingError):
        quantize(values)
    codes, enc = quantize(values, lossy=True)
    assert not enc.lossless
    step = (values.max() - values.min()) / 255
    errors = np.abs(enc.decode(codes, np.float64) - values)
    assert errors.max() == pytest.approx(enc.max_error)
    assert enc.max_error <= step / 2 * (1 + 1e-9)


def test_values_beyond_int8_are_never_wrapped():
    values = np.array([0, 300, 300, -5], dtype=np.int16)
    codes, enc = quantize(values)
    assert enc.is_codebook  # two's-complement wrap would have given 44 for 300
    np.testing.assert_array_equal(enc.decode(codes, np.int64), values)
    with pytest.raises(EncodingError, match="outside"):
        encode(np.array([256]), Encoding(offset=128), name="x")
    with pytest.raises(EncodingError, match="outside"):
        encode(np.array([-1]), Encoding(offset=128), name="x")


def test_one_encoding_for_all_splits():
    train = np.array([0.0, 0.5], dtype=np.float32)
    test = np.array([0.25, 1.0], dtype=np.float32)  # 1.0 is not k/256 for k <= 255
    enc = choose_encoding([train, test], names=["train", "test"])
    assert enc.is_codebook
    for values in (train, test):
        np.testing.assert_array_equal(enc.decode(encode(values, enc)), values)


def test_nan_and_non_numeric_data_are_refused():
    with pytest.raises(EncodingError, match="NaN"):
        quantize(np.array([0.0, np.nan]), name="a.npz")
    with pytest.raises(EncodingError, match="dtype"):
        quantize(np.array(["a", "b"]))


def test_insisting_on_a_divisor_that_does_not_fit():
    with pytest.raises(EncodingError, match="k/255"):
        quantize(np.array([0.5], dtype=np.float32), divisor=255, name="half")


def test_decoding_to_an_integer_type_too_narrow_is_refused_not_wrapped():
    codes, encoding = quantize(np.arange(256, dtype=np.uint8), divisor=1)
    assert (encoding.decode(codes, np.int16) == np.arange(256)).all()
    with pytest.raises(EncodingError, match=r"cannot decode to int8: values are levels 0\.\.255"):
        encoding.decode(codes, np.int8)  # (255 came back as -1)


def test_a_codebook_decoded_to_integers_is_refused_where_they_would_not_hold_it():
    # (a codebook was cast with astype: 70000 came back as 4464, 0.25 as 0)
    codes, encoding = quantize(np.array([0, 300, 1000, 70000], dtype=np.int32))
    assert encoding.is_codebook
    assert encoding.decode(codes, np.int32).tolist() == [0, 300, 1000, 70000]
    with pytest.raises(EncodingError, match=r"cannot decode to int16: values are integers "
                                            r"0\.\.70000"):
        encoding.decode(codes, np.int16)
    codes, encoding = quantize(np.array([0.25, 0.5, 1.75], dtype=np.float32))
    with pytest.raises(EncodingError, match="cannot decode to int32: the codebook holds values "
                                            "that are not integers"):
        encoding.decode(codes, np.int32)


@pytest.mark.parametrize("big", [2 ** 53 + 1, -(2 ** 53) - 1])
def test_integers_just_past_float64s_exact_range_are_refused_not_rounded(big):
    with pytest.raises(EncodingError, match=r"beyond ±2\*\*53 \(from -?\d+ to -?\d+\)"):
        quantize(np.array([0, big], dtype=np.int64))


@pytest.mark.parametrize("divisor", [float("nan"), float("inf"), True, 0, 2.5, "256", 10 ** 400,
                                     2 ** 53 + 2])
def test_a_divisor_that_is_no_positive_integer_is_refused_by_name(divisor):
    # (NaN and infinity were int()'s ValueError and OverflowError; 10**400
    # math.isfinite's OverflowError)
    images = np.arange(4, dtype=np.float32) / 2
    with pytest.raises(EncodingError, match="divisor=.*expected a positive integer"):
        quantize(images, divisor=divisor)
    with pytest.raises(EncodingError, match="divisor must be a positive integer"):
        Encoding(divisor=divisor)
    assert Encoding(divisor=2.0).divisor == 2 and "level / 2," in Encoding(divisor=2.0).describe()


@pytest.mark.parametrize("big", [1.7e308, -1e200])
def test_values_whose_squares_overflow_are_refused_in_one_line(big):
    # (quantize took them, then a standard deviation was an OverflowError traceback)
    with pytest.raises(EncodingError, match=r"data: holds values from .* beyond ±1e\+150, whose "
                                            r"squares overflow float64; scale the images first"):
        quantize(np.array([[0.0, big], [0.5, 1.0]]))
    with pytest.raises(EncodingError, match=r"a codebook's values are within ±1e\+150"):
        Encoding(codebook=np.linspace(0, big, 256))
