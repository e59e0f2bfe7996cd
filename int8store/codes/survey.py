"""Which :class:`~.encoding.Encoding` stores a data set, exactly, or why none does.

:func:`quantize` encodes one array; :func:`choose_encoding` finds one encoding
for several arrays (the splits of a data set) and :func:`survey_encoding` for
data seen a chunk at a time, in bounded memory. uint8 pixels take ``u - 128``;
floats that are all ``k/256`` or all ``k/255`` keep that divisor; other data
with at most 256 distinct values takes a codebook of them. Anything else is
refused with an :class:`~int8store.errors.EncodingError` that says what was
seen, unless lossy quantization is asked for explicitly.
"""

import numpy as np

from ..errors import EncodingError, shown
from .vocabulary import check_flag
from .encoding import (CHUNK_ELEMENTS, DEFAULT_DIVISOR, Encoding, as_numeric, encode,
                       encode_scaled_exactly, exact_levels, is_divisor, nearest_entry,
                       MOST_MAGNITUDE)

__all__ = ["quantize", "choose_encoding", "survey_encoding", "float_candidates",
           "EncodingSurvey", "FLOAT_DIVISORS"]

# Float divisors recognised as lossless, in the order they are tried.
FLOAT_DIVISORS = (256, 255)


def quantize(values, divisor=None, lossy=False, name="data"):
    """Encode ``values`` as int8 codes, exactly, or refuse.

    Parameters
    ----------
    values : array_like
        uint8/int8 (or other integer) pixels, or floats.
    divisor : int, optional
        For integer data, the divisor of its unit scale (default 256, the
        mnist.pkl.gz convention). For float data, the divisor to insist on;
        by default 256 and then 255 are tried.
    lossy : bool
        If the data cannot be stored exactly, quantize it to 256 evenly spaced
        levels instead of refusing; ``encoding.max_error`` reports the error.
    name : str
        How the data is named in error messages (a file or split name).

    Returns
    -------
    codes : ndarray of int8, same shape as ``values``
    encoding : Encoding

    Raises
    ------
    EncodingError
        If the data cannot be stored losslessly (and ``lossy`` is false).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([0, 3, 255], dtype=np.float32) / 256
    >>> codes, enc = quantize(x)
    >>> bool((enc.decode(codes) == x).all()), enc.divisor
    (True, 256)
    """
    values = np.asarray(values)
    encoding = choose_encoding([values], divisor=divisor, lossy=lossy, names=[name])
    return encode(values, encoding, name=name), encoding


def choose_encoding(arrays, divisor=None, lossy=False, names=None):
    """One :class:`Encoding` that stores every array in ``arrays`` (see :func:`quantize`)."""
    names = names or ["data"] * len(arrays)
    return survey_encoding(lambda: zip(names, arrays), divisor=divisor, lossy=lossy)


def survey_encoding(chunks, divisor=None, lossy=False):
    """The one encoding for data seen a chunk at a time.

    ``chunks()`` yields ``(name, array)`` pairs, every chunk of every split;
    it is called again only when no affine encoding fits (to collect the
    distinct values for a codebook, or the range for a lossy one), so an
    archive of any size is surveyed in bounded memory.
    """
    lossy = check_flag("lossy", lossy)  # (before the survey, which may take a while)
    survey = EncodingSurvey(divisor)
    for name, chunk in chunks():
        survey.add(chunk, name)
    if survey.needs_distinct_values():
        for name, chunk in chunks():
            survey.add_distinct(chunk)
    if survey.too_many_values and lossy:
        return _lossy_encoding(chunks, survey)
    if survey.too_many_values:  # the error says how many: one more pass, on failure only
        survey.distinct_count = _count_distinct(chunks)
    return survey.encoding()


# Integers up to this magnitude are exact in float64.
_FLOAT64_EXACT = 2 ** 53


class EncodingSurvey:
    """Finds one lossless encoding for data seen a chunk at a time.

    Call :meth:`add` with every chunk of every split; if
    :meth:`needs_distinct_values`, call :meth:`add_distinct` with every chunk
    again; then :meth:`encoding`. It keeps a few numbers and at most 256
    distinct values, and makes no temporary larger than a block of
    ``CHUNK_ELEMENTS`` values.
    """

    def __init__(self, divisor=None):
        if divisor is not None and not is_divisor(divisor):
            raise EncodingError(f"divisor={shown(divisor)}: expected a positive integer up to "
                                "2**53 (256 for pixels k/256, 255 for k/255)")
        self.divisor = divisor
        self.integer = True
        self.all_int8 = True
        self.all_bool = True
        self.low = self.high = None
        self.fits = set((divisor,) if divisor else FLOAT_DIVISORS)
        self.float_dtypes = set()
        self.distinct = np.empty(0)  # None once there are more than 256
        self.distinct_count = None  # how many there are, if counted (for the error)
        self.names = []

    def add(self, chunk, name="data"):
        self.all_bool &= np.asarray(chunk).dtype == np.bool_
        chunk = as_numeric(chunk, name)
        if not chunk.size:
            return
        if name not in self.names:
            self.names.append(name)
        self.all_int8 &= chunk.dtype == np.int8
        low, high = chunk.min(), chunk.max()
        self.low = low if self.low is None else min(self.low, low)
        self.high = high if self.high is None else max(self.high, high)
        if not np.issubdtype(chunk.dtype, np.integer):
            self.integer = False
            self.float_dtypes.add(chunk.dtype)
            if not (np.isfinite(low) and np.isfinite(high)):
                raise EncodingError(f"{name}: contains NaN or infinite values; images must be finite")
            if max(-float(low), float(high)) > MOST_MAGNITUDE:
                # (a standard deviation squares them: 1.7e308 was an OverflowError traceback)
                raise EncodingError(f"{name}: holds values from {float(low):g} to {float(high):g}, "
                                    f"beyond ±{MOST_MAGNITUDE:g}, whose squares overflow float64; "
                                    "scale the images first")
            self.fits = {d for d in self.fits if _fits_divisor(chunk, d)}

    def _affine(self):
        """The affine encoding that fits, or None."""
        # (booleans are the values 0 and 1, as numpy widens them)
        default = self.divisor or (1 if self.all_bool else DEFAULT_DIVISOR)
        if self.low is None:
            return Encoding(128, default)
        if self.integer:
            if self.all_int8:
                return Encoding(0, default)  # signed bytes stay as they are
            if 0 <= self.low and self.high <= 255:
                return Encoding(128, default)
            if -128 <= self.low and self.high <= 127:
                return Encoding(0, default)
            return None
        return next((e for e in float_candidates(self.divisor, self.float_dtypes)
                     if e.divisor in self.fits), None)

    def needs_distinct_values(self):
        return self._affine() is None and not (self.divisor and not self.integer)

    def add_distinct(self, chunk):
        if self.distinct is None or not np.asarray(chunk).size:
            return
        flat = np.asarray(chunk).reshape(-1)
        for start in range(0, flat.size, CHUNK_ELEMENTS):
            self.distinct = np.union1d(self.distinct, np.unique(flat[start:start + CHUNK_ELEMENTS]))
            if self.distinct.size > 256:
                self.distinct = None
                return

    @property
    def too_many_values(self):
        return self.distinct is None

    def encoding(self):
        """The encoding, or an :class:`EncodingError` saying why there is none."""
        affine = self._affine()
        if affine is not None:
            return affine
        names = ", ".join(self.names)
        if self.divisor and not self.integer:
            raise EncodingError(f"{names}: not every value is k/{self.divisor} for an integer k "
                                "in 0..255")
        if self.distinct is not None:
            # (self.low and self.high are the data's own integers: the distinct
            # values, in float64, had already rounded 2**53 + 1 down to 2**53)
            if self.integer and self.distinct.size and \
                    max(abs(int(self.low)), abs(int(self.high))) > _FLOAT64_EXACT:
                raise EncodingError(
                    f"{names}: holds integers beyond ±2**53 (from {int(self.low)} to "
                    f"{int(self.high)}): "
                    "float64, the widest view, cannot tell such neighbours apart, so they "
                    "cannot be stored losslessly; rescale them first")
            padding = np.repeat(self.distinct[-1:], 256 - self.distinct.size)
            return Encoding(codebook=np.concatenate([self.distinct, padding]))
        count = (f"{self.distinct_count:,}" if self.distinct_count and self.distinct_count <= _COUNT_CAP
                 else f"more than {_COUNT_CAP if self.distinct_count else 256:,}")
        raise EncodingError(
            f"{names}: cannot be stored losslessly as int8: {count} distinct values "
            f"(at most 256 fit) ranging from {self.low} to {self.high}, and they are not "
            "all k/256 or k/255 for integers k in 0..255. Pass lossy=True (command line: "
            "--lossy) to quantize to 256 levels and report the largest error."
        )


def float_candidates(divisor, dtypes):
    """The affine encodings float data of ``dtypes`` may fit, in the order they
    are tried: ``divisor`` if given, else k/256 then k/255; computed in the
    data's precision."""
    precision = "float64" if any(np.dtype(d).itemsize > 4 for d in dtypes) else "float32"
    # (float16 is decoded in float32, as :func:`exact_levels` checks)
    return [Encoding(128, d, precision=precision) for d in ((divisor,) if divisor else FLOAT_DIVISORS)]


@np.errstate(invalid="ignore")
def _fits_divisor(values, divisor):
    flat = values.reshape(-1)
    scratch = np.empty(min(flat.size, CHUNK_ELEMENTS), dtype=np.int8)
    probe = Encoding(128, divisor)
    for start in range(0, flat.size, CHUNK_ELEMENTS):
        chunk = flat[start:start + CHUNK_ELEMENTS]
        if encode_scaled_exactly(chunk, probe, scratch[:chunk.size]):
            continue
        levels = exact_levels(chunk, divisor)
        if levels is None or levels.min() < 0 or levels.max() > 255:
            return False
    return True


# Distinct values counted for an error message, at most (bounds its memory).
_COUNT_CAP = 1 << 20


def _count_distinct(chunks):
    """How many distinct values the chunks hold, or ``_COUNT_CAP + 1`` if more."""
    seen = np.empty(0)
    for _, chunk in chunks():
        flat = np.asarray(chunk).reshape(-1)
        for start in range(0, flat.size, CHUNK_ELEMENTS):
            seen = np.union1d(seen, flat[start:start + CHUNK_ELEMENTS])
            if seen.size > _COUNT_CAP:
                return _COUNT_CAP + 1
    return int(seen.size)


def _lossy_encoding(chunks, survey):
    """256 evenly spaced levels over the data's range, with the largest error."""
    codebook = np.linspace(float(survey.low), float(survey.high), 256)
    error = 0.0
    for _, chunk in chunks():
        flat = np.asarray(chunk).reshape(-1)
        for start in range(0, flat.size, CHUNK_ELEMENTS):
            block = flat[start:start + CHUNK_ELEMENTS]
            if block.size:
                error = max(error, float(np.abs(codebook[nearest_entry(block, codebook)] - block).max()))
    return Encoding(codebook=codebook, max_error=error)
