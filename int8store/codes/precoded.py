"""Float images encoded as they are read: :func:`read_encoded`, :class:`Precoded`.

A float source (the classic ``mnist.pkl.gz``: 219.5 MB of float32 pixels
``k/256``) was read whole before the planning step chose its encoding and
encoded it: every split's floats in memory at once, 4.2 times the codes
kept. Read a block at a time, each block encoded as it comes under the
first candidate the planning step would try (:func:`~.survey.float_candidates`)
that holds every value so far, the floats are never all in memory: a block
that no candidate holds turns the codes so far back into floats (exactly:
each code was checked to give its value back) and the rest is read as it is.

The planning step takes the codes where its choice is the encoding they
were made under (:meth:`Precoded.codes_under`), and decodes them otherwise:
the result is the same codes, bit for bit, as encoding the floats whole.
"""

import math

import numpy as np

from ..errors import EncodingError
from .encoding import encode, new_codes
from .survey import float_candidates

__all__ = ["Precoded", "read_encoded", "read_into", "DataEnded"]

#: Values read and encoded at a time.
BLOCK_BYTES = 1 << 20


class DataEnded(EOFError):
    """The data read ended early: the file (once gunzipped) is cut short,
    not the gzip stream around it (whose EOFError is gzip's own)."""


class Precoded:
    """Float values of ``dtype`` held as int8 ``codes`` under ``encoding``
    (affine, lossless: every code decodes to its value)."""

    def __init__(self, codes, encoding, dtype):
        self.codes, self.encoding, self.dtype = codes, encoding, np.dtype(dtype)

    @property
    def shape(self):
        return self.codes.shape

    def __len__(self):
        return len(self.codes)

    def codes_under(self, encoding):
        """The codes if ``encoding`` is the one they were made under, else None."""
        mine = self.encoding
        if encoding.is_codebook or (encoding.offset, encoding.divisor, encoding.precision) \
                != (mine.offset, mine.divisor, mine.precision):
            return None
        return self.codes

    def decoded(self, rows=slice(None)):
        """The float values (of ``rows``), exactly as they were read."""
        return self.encoding.decode(self.codes[rows], self.dtype)


def read_encoded(readinto, shape, dtype, where):
    """The C-order float array of ``shape`` and ``dtype`` that
    ``readinto(buffer)`` fills (a file's ``readinto``), as a
    :class:`Precoded` where a candidate encoding holds every value, else as
    the float array. Raises EOFError, naming ``where``, if the data ends
    early."""
    dtype = np.dtype(dtype)
    count = math.prod(shape)
    candidates = float_candidates(None, [dtype])
    codes = new_codes((count,))
    block = np.empty(max(1, min(count, BLOCK_BYTES // dtype.itemsize)), dtype)
    chosen, done = 0, 0
    while done < count:
        values = block[:min(len(block), count - done)]
        read_into(readinto, values, where)
        while True:
            try:
                codes[done:done + len(values)] = encode(values, candidates[chosen])
                break
            except EncodingError:
                later = _next_holding(codes[:done], values, candidates, chosen, dtype)
                if later is None:
                    return _read_as_floats(readinto, codes[:done], candidates[chosen], values,
                                           shape, dtype, where)
                chosen = later
        done += len(values)
    return Precoded(codes.reshape(shape), candidates[chosen], dtype)


def _next_holding(codes, values, candidates, chosen, dtype):
    """The index of the next candidate after ``chosen`` that holds ``values``
    and the values ``codes`` stand for under ``candidates[chosen]``, with
    ``codes`` made again under it; None if there is none."""
    for later in range(chosen + 1, len(candidates)):
        try:
            encode(values, candidates[later])
            for start in range(0, len(codes), BLOCK_BYTES):  # checked first, then rewritten
                encode(candidates[chosen].decode(codes[start:start + BLOCK_BYTES], dtype),
                       candidates[later])
        except EncodingError:
            continue
        for start in range(0, len(codes), BLOCK_BYTES):
            piece = codes[start:start + BLOCK_BYTES]
            piece[...] = encode(candidates[chosen].decode(piece, dtype), candidates[later])
        return later
    return None


def _read_as_floats(readinto, codes, encoding, values, shape, dtype, where):
    """The float array: the values ``codes`` stand for under ``encoding``
    (those read so far), then ``values`` (the block no candidate holds),
    then the rest, read."""
    floats = np.empty(shape, dtype)
    flat, done = floats.reshape(-1), len(codes)
    for start in range(0, done, BLOCK_BYTES):
        piece = codes[start:start + BLOCK_BYTES]
        flat[start:start + len(piece)] = encoding.decode(piece, dtype)
    del codes
    flat[done:done + len(values)] = values
    read_into(readinto, flat[done + len(values):], where)
    return floats


def read_into(readinto, array, where):
    """Fill ``array`` (contiguous) from ``readinto``, :data:`BLOCK_BYTES` at a
    time (a short read is not the end); EOFError naming ``where`` if the
    data ends first."""
    view = memoryview(array.reshape(-1)).cast("B")
    got = 0
    while got < len(view):
        more = readinto(view[got:got + BLOCK_BYTES])
        if not more:
            raise DataEnded(f"{where}: the file is truncated: it ends in the middle of the data")
        got += more
