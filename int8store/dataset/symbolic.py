"""Symbolic int8 → float conversion, built inside the graph (PyTensor or Aesara).

:func:`dequantize` returns the float expression for a tensor of int8 codes,
with one of four normalizations:

``"unit"``
    The data's own scale: ``(c + 128) / 256`` for mnist.pkl.gz, which gives the
    very floats the classic tutorial stored (one correctly rounded division).
``"batch"``
    ``(x - mean(x)) / s`` over the tensor given — the minibatch when the
    codes are sliced first, as :class:`~int8store.SharedDataset` does.
``"dataset"``
    ``(x - dataset_mean) / s`` with a mean computed once (the training split's).
``"channel"``
    ``(x - mean_c) / s`` with each channel's mean (images stored
    channels-last; the training split's, :class:`~int8store.codes.channels.ChannelStatistics`).
``"standard"``
    ``(x - mean_c) / std_c``: each channel centred and scaled by its
    standard deviation (the usual normalization of colour sets such as
    CIFAR-10), as ``(x - mean_c) * r_c`` with ``r_c = 1 / std_c`` rounded to
    the view's dtype: each value rounded the same way in every mode.
``"none"``
    The raw codes as floats.

``x`` above is the pixel level ``c + offset``, and ``s`` half the
encoding's divisor rounded to a power of two (an exact division;
:attr:`~int8store.codes.encoding.Encoding.spread`): 128 for 8-bit pixels,
8 for the digits' k/16, so the result is ``2 * (value - mean)`` on the
scale ``"unit"`` gives, about [-1, 1]. A codebook encoding has no levels:
there ``x`` is the looked-up value and ``s`` half the codebook's range.

The result's dtype follows the library's ``floatX`` unless ``dtype`` is given, as
the classic tutorials' shared variables did: float32 and float64 views both
hold exactly the values the source held.

The conversion is split in two stages so that a float copy of a dataset (the
classic way, kept for comparison) can be made by running the first, per-pixel
stage once: :func:`per_pixel_stage` and :func:`per_batch_stage`.
"""

import numpy as np

from ..backend import activate
from ..codes.channels import PER_CHANNEL
from ..codes.encoding import Encoding
from ..codes.histogram import code_counts, mean_of_code_counts
from ..codes.vocabulary import NORMALIZATIONS, check_choice
from ..errors import ArgumentError, shortened

__all__ = ["dequantize", "normalization_mean", "per_pixel_stage", "per_batch_stage"]

def dequantize(codes, encoding, normalize="unit", dataset_mean=None, dtype=None,
               channel_statistics=None):
    """Float expression for int8 ``codes`` under ``encoding``.

    Parameters
    ----------
    codes : int8 tensor variable
        A shared variable of codes, or a slice of one. Slice *before* calling
        this, so only the slice is widened.
    encoding : Encoding
        How the codes map to values (from :func:`~int8store.quantize`).
    normalize : {"unit", "batch", "dataset", "none"}
        See the module docstring.
    dataset_mean : float, optional
        The mean of ``x`` over the training data; required for ``"dataset"``
        (see :func:`normalization_mean`).
    dtype : {"float32", "float64"}, optional
        The result's dtype; default the library's ``floatX``.
    channel_statistics : ChannelStatistics, optional
        Each channel's mean and standard deviation of ``x`` over the training
        data; required for ``"channel"`` and ``"standard"``.

    Returns
    -------
    float tensor variable

    Examples
    --------
    >>> import numpy as np
    >>> from int8store import quantize
    >>> from int8store.backend import activate
    >>> at = activate().at
    >>> codes, enc = quantize(np.array([[0, 64, 255]], dtype=np.uint8))
    >>> c = at.matrix(dtype="int8")
    >>> f = activate().function([c], dequantize(c, enc, "unit", dtype="float32"))
    >>> f(codes).tolist()
    [[0.0, 0.25, 0.99609375]]
    """
    dtype = activate().float_dtype(dtype)
    given = getattr(codes, "dtype", type(codes).__name__)
    if str(given) != "int8":  # (a float tensor was cast to levels in silence)
        raise ArgumentError(f"dequantize: codes of dtype {given}: expected int8 codes (a shared "
                            "variable of quantize's codes, or a slice of one)")
    if not isinstance(encoding, Encoding):  # (an AttributeError, "has no attribute 'is_codebook'")
        raise ArgumentError(f"dequantize: encoding={shortened(repr(encoding))}: expected an "
                            "int8store.Encoding (quantize gives the codes and theirs)")
    return per_batch_stage(
        per_pixel_stage(codes, encoding, normalize, dataset_mean, dtype, channel_statistics),
        encoding, normalize, dtype
    )


def per_pixel_stage(codes, encoding, normalize, dataset_mean=None, dtype=None,
                    channel_statistics=None):
    """Everything of the conversion that is done pixel by pixel, each
    value numpy's in every mode (the library's default, C, JAX).

    Three things rounded otherwise: the library folds a float offset into
    the mean (``c + (128 - mean)``, rounded twice), so the levels are added
    in integers (:func:`_centred`); PyTensor's C code writes a float32
    constant as a double literal of its shortest decimal, so a scalar the
    arithmetic must round with is held in a shared variable (:func:`_held`);
    and a division by a divisor that is no power of two (``k/255``) is
    rewritten into a product (Aesara, Numba's fast-math) or taken an ulp off
    (XLA's CPU division), so it is an op of its own
    (:class:`~int8store.backend.ops.quotient.LevelQuotient`). A codebook's
    values are looked up in a table numpy computed (:func:`_lookup`).
    """
    api = activate()
    dtype = api.float_dtype(dtype)
    _check_normalize(normalize)
    if normalize == "none":
        return api.at.cast(codes, dtype)
    if normalize == "unit":
        if encoding.is_codebook:
            return _lookup(codes, encoding.table(dtype), dtype)
        # Computed in the source's precision (float32 for mnist.pkl.gz), then
        # widened: the view holds exactly the values the source held, and is
        # a value to the rest of the graph, as the classic's shared variable
        # was (an op of its own: the libraries' rewrites see no arithmetic
        # in it to distribute the step's products over).
        from ..backend.ops.quotient import level_quotient

        return level_quotient(codes, encoding.offset, encoding.divisor,
                              encoding.precision or dtype, dtype)
    if normalize == "batch":
        return (_lookup(codes, encoding.codebook, dtype) if encoding.is_codebook
                else _levels(codes, encoding, dtype))
    if normalize in PER_CHANNEL:
        return _per_channel(codes, encoding, normalize, channel_statistics, dtype)
    if dataset_mean is None:
        raise ArgumentError(
            'normalize="dataset" needs dataset_mean: the mean of the training '
            "split, from int8store.dataset.symbolic.normalization_mean(codes, encoding)"
        )
    if encoding.is_codebook:
        return _lookup(codes, (_bases(encoding, dtype) - np.asarray(dataset_mean, dtype))
                       / np.asarray(encoding.spread, dtype), dtype)
    return _centred(codes, encoding, _held(dataset_mean, dtype, "dataset_mean"), dtype) \
        / api.float_constant(encoding.spread, dtype)


def per_batch_stage(x, encoding, normalize, dtype=None):
    """The part that depends on the whole tensor: centring by its mean."""
    api = activate()
    _check_normalize(normalize)
    if normalize != "batch":
        return x
    dtype = api.float_dtype(dtype)
    return (x - api.at.mean(x)) / api.float_constant(encoding.spread, dtype)


def normalization_mean(codes, encoding):
    """Mean of ``x`` (levels, or codebook values) over ``codes``, in float64.

    Computed exactly from a 256-bin histogram of the codes
    (:mod:`int8store.codes.histogram`).
    """
    return mean_of_code_counts(code_counts(codes), encoding)


def _per_channel(codes, encoding, normalize, statistics, dtype):
    """``(x - mean_c) / s`` (``"channel"``) or ``(x - mean_c) * r_c``
    (``"standard"``, ``r_c = 1 / std_c`` rounded to the view's dtype), the
    statistics repeated along each row of channels-last pixels; for a
    codebook, a table of its 256 values per channel (numpy's), the channel
    of each pixel choosing its part."""
    if statistics is None:
        raise ArgumentError(
            f'normalize="{normalize}" needs channel_statistics: each channel\'s mean and '
            "standard deviation over the training split, from "
            "int8store.codes.channels.ChannelStatistics.of(codes, encoding, channels)")
    width = codes.type.shape[-1]
    if width is None or width % statistics.channels:
        raise ArgumentError(f"per-channel normalization needs rows of a static width, a "
                            f"multiple of {statistics.channels} channels; got {width}")
    repeat = width // statistics.channels
    reciprocal = (1.0 / np.asarray(statistics.std, dtype=np.float64)).astype(dtype)
    if encoding.is_codebook:  # (the codebook is looked up anyway: the whole value is)
        centred = _bases(encoding, dtype) - np.asarray(statistics.mean, dtype)[:, None]
        table = (centred / np.asarray(encoding.spread, dtype) if normalize == "channel"
                 else centred * reciprocal[:, None])
        return _lookup(codes, table, dtype, parts=np.arange(width) % statistics.channels)
    api = activate()
    centred = _centred(codes, encoding, _row(statistics.mean, repeat, dtype, "channel_mean"),
                       dtype)
    if normalize == "channel":
        return centred / api.float_constant(encoding.spread, dtype)
    return centred * _row(reciprocal, repeat, dtype, "channel_reciprocal")


def _row(values, repeat, dtype, name):
    """Each channel's value repeated along a row of channels-last pixels, a
    constant; one value for all (one channel): held (:func:`_held`), as the
    library would fold such a constant into a scalar one."""
    values = np.asarray(values, dtype)
    if (values == values[0]).all():
        return _held(values[0], dtype, name)
    return activate().float_constant(np.tile(values, repeat), dtype)


def _centred(codes, encoding, mean, dtype):
    """``levels - mean`` (``mean`` a variable of ``dtype``), the levels
    added in integers: a float offset, the library folds into the mean
    (``c + (128 - mean)``, rounded twice)."""
    api = activate()
    levels = api.at.cast(codes, "int16")
    if encoding.offset:
        levels = levels + np.int16(encoding.offset)
    return api.at.cast(levels, dtype) - mean


def _bases(encoding, dtype):
    """The 256 values ``x`` of codes -128..127 in ``dtype``: the levels
    (exact), or the codebook's values."""
    if encoding.is_codebook:
        return np.asarray(encoding.codebook, dtype=np.float64).astype(dtype)
    return encoding.levels(np.arange(-128, 128)).astype(dtype)


def _levels(codes, encoding, dtype):
    # Exact in float32: levels are integers in -128..255.
    api = activate()
    levels = api.at.cast(codes, dtype)
    if encoding.offset:
        levels = levels + api.float_constant(encoding.offset, dtype)
    return levels


def _held(value, dtype, name):
    """A read-only shared scalar of ``value`` in ``dtype``, one per value:
    compiled code reads it as a value. A constant may be rewritten (``x /
    c`` into ``x * (1 / c)``), and PyTensor's C code writes a float32
    constant as a double literal of its shortest decimal (``x -
    131.00972``), so float32 arithmetic with it was done in double."""
    value = np.asarray(value, dtype=dtype)
    key = (value.item(), value.dtype.str)
    if key not in _HELD:
        held = activate().shared(value, name=f"{name}_{value.item()}")
        held.tag.held_constant = True  # (never updated: int8store's JAX calls place it once)
        _HELD[key] = held
    return _HELD[key]


# Read-only shared scalars, one per value and dtype (see _held).
_HELD = {}


def _lookup(codes, table, dtype, parts=None):
    """``table[code + 128]`` for each code, the table's values in ``dtype``;
    with ``parts`` (a vector along the last axis) a table of rows of 256,
    ``table[part, code + 128]``."""
    api = activate()
    table = np.asarray(table, dtype=np.float64).astype(dtype)
    if parts is None:
        index = api.at.cast(codes, "int16") + 128
    else:
        index = api.at.cast(codes, "int32") + api.at.constant(
            (128 + 256 * np.asarray(parts)).astype(np.int32))
    table = api.float_constant(table.reshape(-1), dtype)
    return table[index.flatten()].reshape(codes.shape, ndim=codes.ndim)


def _check_normalize(normalize):
    check_choice("normalize", normalize, NORMALIZATIONS)
