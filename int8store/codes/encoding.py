"""Exact numpy-level encoding of image data as int8 codes.

An :class:`Encoding` says how an int8 code ``c`` maps back to a value:

* **affine** — the pixel *level* is ``c + offset`` (an exact integer) and the
  value is ``level / divisor``. uint8 pixels use ``offset=128``, so
  ``u == c + 128`` exactly; float data whose values are all ``k/256`` or all
  ``k/255`` (``k`` an integer in 0..255) is stored with that divisor, and
  decodes to the very same floats.
* **codebook** — the value is ``codebook[c + 128]``: any data with at most 256
  distinct values, still lossless.

:func:`encode` applies an encoding, and refuses any value it does not hold:
values are never wrapped around, every conversion checks its range first.
Which encoding a data set takes is :mod:`.survey`'s question.
"""

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..errors import EncodingError, shown

__all__ = ["Encoding", "encode", "new_codes", "is_power_of_two", "is_positive_integer",
           "is_divisor", "DEFAULT_DIVISOR", "MOST_DIVISOR", "MOST_MAGNITUDE"]

#: Divisor for 8-bit pixels: the scale of the classic tutorials' mnist.pkl.gz,
#: whose float32 pixels are exactly ``u / 256``.
DEFAULT_DIVISOR = 256

#: The largest divisor: integers to 2**53 are exact in float64 and finite in
#: float32, so ``level / divisor`` is one rounded division in every view (a
#: store's manifest announcing 10**400 raised OverflowError, 10**40 decoded
#: to zeros in float32).
MOST_DIVISOR = 1 << 53

#: The largest magnitude a value may have: its square, which a standard
#: deviation takes, is finite in float64 (1.7e308 was an OverflowError).
MOST_MAGNITUDE = 1e150

# Elements converted at a time: bounds the temporaries, and a block this size
# stays in the processor's cache between the passes over it.
CHUNK_ELEMENTS = 1 << 18


@dataclass(frozen=True, eq=False)
class Encoding:
    """How int8 codes map back to values (see the module docstring).

    Parameters
    ----------
    offset : int
        ``level = code + offset``; 128 for uint8 levels, 0 for int8 levels.
    divisor : int
        ``value = level / divisor`` for affine encodings.
    codebook : ndarray of 256 values, optional
        If given, ``value = codebook[code + 128]`` and offset/divisor are unused.
    max_error : float
        Largest absolute error of a lossy quantization; 0 when lossless.
    precision : {"float32", "float64"}, optional
        For float sources: the dtype the values were in. ``level / divisor``
        is computed in it, then widened, so every view holds exactly the
        source's values; None (integer sources) computes in the view's dtype.

    Examples
    --------
    >>> import numpy as np
    >>> enc = Encoding(offset=128, divisor=256)   # uint8 pixel u is code u - 128
    >>> codes = np.array([-128, 0, 127], dtype=np.int8)   # pixels 0, 128, 255
    >>> enc.decode(codes).tolist()
    [0.0, 0.5, 0.99609375]
    """

    offset: int = 128
    divisor: int = DEFAULT_DIVISOR
    codebook: Optional[np.ndarray] = None
    max_error: float = 0.0
    precision: Optional[str] = None

    def __post_init__(self):
        if self.codebook is not None:
            book = np.asarray(self.codebook)
            if book.shape != (256,):
                raise EncodingError(f"a codebook needs exactly 256 entries, got shape {book.shape}")
            if book.dtype.kind == "f" and np.abs(book).max() > MOST_MAGNITUDE:
                raise EncodingError(f"a codebook's values are within ±{MOST_MAGNITUDE:g}, got "
                                    f"{book.min():g} to {book.max():g}")
        elif self.offset not in (0, 128):
            raise EncodingError(f"offset must be 128 (uint8 levels) or 0 (int8 levels), got "
                                f"{self.offset}")
        elif not is_divisor(self.divisor):
            raise EncodingError(f"divisor must be a positive integer up to 2**53, got "
                                f"{shown(self.divisor)}")
        else:  # (2.0 is 2: described and compared as the integer)
            object.__setattr__(self, "divisor", int(self.divisor))
        if self.precision not in (None, "float32", "float64"):
            raise EncodingError(f"precision must be float32, float64 or None, got {self.precision!r}")

    def __repr__(self):  # (not the dataclass's: a codebook's 256 values would fill a screen)
        book = "" if self.codebook is None else f"codebook=<{self.describe()}>, "
        return (f"Encoding(offset={self.offset}, divisor={self.divisor}, {book}max_error="
                f"{self.max_error}, precision={self.precision!r})")

    @property
    def is_codebook(self):
        return self.codebook is not None

    @property
    def lossless(self):
        return self.max_error == 0.0

    @property
    def spread(self):
        """What the centred normalizations divide by (``(x - mean) /
        spread``), so that the result spans about [-1, 1] on the encoding's
        own scale. For levels, half the divisor (values ``k/divisor`` span
        [0, 1]: the result is ``2 * (value - mean)``), rounded to a power of
        two so that the division is exact in every mode: 128 for 8-bit
        pixels (k/256 and k/255 alike), 8 for scikit-learn's digits (k/16),
        0.5 for 0/1 images. It follows the scale the encoding gives the
        values, as ``"unit"`` does, not the levels a set happens to use
        (uint8 levels 0..16 stored as k/256 stay within about ±0.06). For a
        codebook, half its range."""
        if self.is_codebook:
            book = np.asarray(self.codebook, dtype=np.float64)
            half = (book.max() - book.min()) / 2
            return float(half) if half > 0 else 1.0
        return 2.0 ** round(math.log2(self.divisor / 2))

    def levels(self, codes):
        """Integer levels ``codes + offset`` (int16, so 127 + 128 cannot wrap)."""
        return np.asarray(codes, dtype=np.int16) + np.int16(self.offset)

    def table(self, dtype=np.float32):
        """The 256 values of codes -128..127, as ``dtype``: what ``"unit"`` gives."""
        if np.issubdtype(np.dtype(dtype), np.integer):
            return self._integer_table(np.dtype(dtype))
        if self.is_codebook:
            return np.asarray(self.codebook, dtype=np.float64).astype(dtype)
        levels = self.levels(np.arange(-128, 128))
        # One correctly rounded division in the source's precision, as the
        # symbolic path does, then widened.
        precision = self.precision or np.dtype(dtype)
        return (levels.astype(precision) / np.asarray(self.divisor, dtype=precision)).astype(dtype)

    def _integer_table(self, dtype):
        """The 256 values as integers of ``dtype``, refused where one is not
        an integer or does not fit (astype would truncate or wrap)."""
        if self.is_codebook:
            values = np.asarray(self.codebook)
            if values.dtype.kind == "f" and not (values == np.rint(values)).all():
                raise EncodingError(f"cannot decode to {dtype}: the codebook holds values that "
                                    "are not integers")
        elif self.divisor != 1:
            raise EncodingError(f"cannot decode to {dtype}: values are levels / {self.divisor}")
        else:
            values = self.levels(np.arange(-128, 128))
        low, high = int(values.min()), int(values.max())
        if low < np.iinfo(dtype).min or high > np.iinfo(dtype).max:
            raise EncodingError(f"cannot decode to {dtype}: values are "
                                f"{'levels' if not self.is_codebook else 'integers'} {low}..{high}")
        return values.astype(dtype)

    def decode(self, codes, dtype=np.float32):
        """The values the codes stand for, as ``dtype`` (numpy, not symbolic).

        A lookup in :meth:`table`, a chunk at a time: no temporary larger
        than the result.
        """
        codes = _as_codes(codes)
        table = self.table(dtype)
        out = np.empty(codes.shape, dtype=table.dtype)
        flat_codes, flat_out = codes.reshape(-1), out.reshape(-1)
        for start in range(0, flat_codes.size, CHUNK_ELEMENTS):
            index = flat_codes[start:start + CHUNK_ELEMENTS].view(np.uint8) ^ np.uint8(0x80)
            flat_out[start:start + index.size] = table[index]
        return out

    def describe(self):
        """One line for summaries, e.g. ``level / 256, level = code + 128``."""
        if self.is_codebook:
            book = np.asarray(self.codebook, dtype=np.float64)
            kind = f"codebook of 256 values, {book.min():g} to {book.max():g}"
            return kind if self.lossless else f"{kind}, lossy (max error {self.max_error:g})"
        return f"level / {self.divisor}, level = code + {self.offset}"


def encode(values, encoding, name="data", overwrite=False):
    """int8 codes of ``values`` under ``encoding``; raises if any value does not fit.

    For a lossy encoding the nearest codebook entry is used. Works a block of
    values at a time: no temporary larger than a block. ``overwrite``: the
    caller gives up ``values`` (uint8 pixels are then flipped in place)."""
    values = as_numeric(values, name)
    if encoding.is_codebook:
        return _encode_by_codebook(values, encoding, name)
    if values.dtype == np.uint8 and encoding.offset == 128:
        # u - 128 in two's complement is u with its top bit flipped: exact, no range to check.
        out = values if overwrite and values.flags.writeable else None
        return np.bitwise_xor(values, np.uint8(0x80), out=out).view(np.int8)
    if values.dtype == np.int8 and encoding.offset == 0:
        return values
    codes = new_codes(values.shape)
    flat_in, flat_out = values.reshape(-1), codes.reshape(-1)
    _encode_blocks(flat_in, encoding, flat_out, name)
    return codes


def _as_codes(codes):
    """``codes`` as int8, refused where a value is no code (300 wrapped to 44)."""
    codes = np.asarray(codes)
    if codes.dtype == np.int8:
        return codes
    if not np.issubdtype(codes.dtype, np.integer):
        raise EncodingError(f"codes of dtype {codes.dtype}: expected int8 codes (integers)")
    if codes.size and (codes.min() < -128 or codes.max() > 127):
        raise EncodingError(f"codes from {codes.min()} to {codes.max()}: int8 codes lie in "
                            "-128..127")
    return codes.astype(np.int8)


def new_codes(shape):
    """An int8 array for codes, in ordinary pages.

    numpy asks the kernel for transparent huge pages for large arrays; right
    after a loader has freed hundreds of megabytes of floats, the kernel may
    first compact memory to find them, which made encoding MNIST take 0.1 s
    instead of 0.02 s. A bytearray's memory comes from the ordinary allocator.
    """
    size = int(np.prod(shape, dtype=np.int64))
    return np.frombuffer(bytearray(size), dtype=np.int8).reshape(shape)


@np.errstate(invalid="ignore")  # casts of out-of-range values, caught where they happen
def _encode_blocks(flat_in, encoding, flat_out, name):
    low, high = -128 + encoding.offset, 127 + encoding.offset
    for start in range(0, flat_in.size, CHUNK_ELEMENTS):
        chunk = flat_in[start:start + CHUNK_ELEMENTS]
        if encode_scaled_exactly(chunk, encoding, flat_out[start:start + chunk.size]):
            continue
        if np.issubdtype(chunk.dtype, np.integer):
            levels = chunk
        else:
            levels = exact_levels(chunk, encoding.divisor)
            if levels is None:
                raise EncodingError(f"{name}: not every value is k/{encoding.divisor} for an "
                                    f"integer k in {low}..{high}, so it cannot use this encoding")
        chunk_low, chunk_high = levels.min(), levels.max()
        if chunk_low < low or chunk_high > high:
            raise EncodingError(f"{name}: levels range from {chunk_low} to {chunk_high}, outside "
                                f"{low}..{high} that int8 codes with offset {encoding.offset} hold")
        np.subtract(levels, encoding.offset, out=flat_out[start:start + chunk.size],
                    casting="unsafe")  # in range: checked just above


def is_positive_integer(value):
    """Whether ``value`` is a whole number from 1 (NaN, infinities, booleans
    and non-numbers are not; int() raised for some, math.isfinite for an
    int beyond float64)."""
    try:
        return not isinstance(value, bool) and math.isfinite(value) and int(value) == value \
            and value >= 1
    except (TypeError, ValueError, OverflowError):
        return False


def is_divisor(value):
    """Whether ``value`` may divide levels: a positive integer up to
    :data:`MOST_DIVISOR`."""
    return is_positive_integer(value) and value <= MOST_DIVISOR


def is_power_of_two(divisor):
    """Whether dividing by ``divisor`` (a positive integer) is exact
    arithmetic: a product by its reciprocal, in every float precision."""
    return divisor & (divisor - 1) == 0


def encode_scaled_exactly(chunk, encoding, out):
    """The fast road for float data and a power-of-two divisor: ``chunk *
    divisor`` is exact, and its cast to 8 bits is the code when, and only
    when, the cast gives back the very same number. Writes ``out`` and
    returns True, or returns False (another road must decide)."""
    divisor = encoding.divisor
    if np.issubdtype(chunk.dtype, np.integer) or chunk.dtype.itemsize < 4 \
            or not is_power_of_two(divisor) or not chunk.size:
        return False
    with np.errstate(over="ignore", invalid="ignore"):  # huge values: refused just below
        levels = chunk * chunk.dtype.type(divisor)
        small = np.uint8 if encoding.offset == 128 else np.int8
        cast = levels.astype(small)
    if not (cast == levels).all():
        return False
    if encoding.offset == 128:
        np.bitwise_xor(cast, np.uint8(0x80), out=out.view(np.uint8))  # u - 128
    else:
        out[...] = cast
    return True


def as_numeric(values, name):
    values = np.asarray(values)
    if values.dtype == np.bool_:
        return values.view(np.uint8)
    if not (np.issubdtype(values.dtype, np.integer) or np.issubdtype(values.dtype, np.floating)):
        raise EncodingError(f"{name}: cannot store dtype {values.dtype} as int8 codes; expected "
                            "integer pixels or floats")
    return values


def exact_levels(chunk, divisor):
    """Integer levels (as float64) if every value is exactly ``k / divisor``,
    else None. (Powers of two in range take the faster road first:
    :func:`encode_scaled_exactly`.)"""
    levels = np.rint(chunk.astype(np.float64) * divisor)
    # The division the decoder does, in the precision it does it in
    # (:func:`float_candidates`): the data's own, but float32 for float16,
    # whose k/255 are not float32's.
    precision = np.result_type(chunk.dtype, np.float32)
    if not np.array_equal((levels / divisor).astype(precision), chunk.astype(precision)):
        return None
    return levels


def nearest_entry(values, codebook):
    """Index of the nearest entry of an evenly spaced ``codebook``."""
    step = (codebook[-1] - codebook[0]) / 255 or 1.0
    index = np.rint((values.astype(np.float64) - codebook[0]) / step)
    return np.clip(index, 0, 255).astype(np.int16)


def _encode_by_codebook(values, encoding, name):
    book = np.asarray(encoding.codebook)
    codes = np.empty(values.shape, dtype=np.int8)
    flat_in, flat_out = values.reshape(-1), codes.reshape(-1)
    for start in range(0, flat_in.size, CHUNK_ELEMENTS):
        block = flat_in[start:start + CHUNK_ELEMENTS]
        if not encoding.lossless:
            index = nearest_entry(block, book)
        else:
            index = np.clip(np.searchsorted(book, block), 0, 255)
            if not np.array_equal(book[index], block):
                raise EncodingError(f"{name}: holds values that are not in the encoding's codebook")
        flat_out[start:start + block.size] = index - 128
    return codes
