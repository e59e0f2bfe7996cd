"""The levels of int8 codes divided by their divisor, rounded as numpy rounds,
in an op of its own: the per-pixel stage of the ``"unit"`` view.

:class:`LevelQuotient` gives the values ``level / divisor`` of int8 codes
(``level = code + offset``: ``k/256`` pixels are levels over 256, ``k/255``
ones over 255), computed in the source's ``precision`` and given in
``dtype``, each rounded as numpy rounds ``levels.astype(precision) / divisor``.

Why an op and not graph arithmetic:

* The rest of the graph is compiled as the classic's was. The classic
  tutorials' images were a float shared variable, a value the graph
  computes from; ``(c + 128) * 2**-8`` is an expression the libraries'
  algebraic rewrites see through and distribute other products over (the
  denoising autoencoder's ``(1 - x) * log(1 - z)`` became
  ``-log(1 - z) - x * log(1 - z)``), rounding otherwise than the classic
  graph: its costs differed in the 7th digit under float32 though every
  pixel was the same.
* A divisor that is no power of two cannot be left to arithmetic in every
  mode: Aesara rewrites ``x / c`` into ``x * (1 / c)``, Numba's fast-math
  does the same to any division, and XLA's CPU division (float32, and
  float64 with x64) was an ulp off numpy's for a tenth to a half of the levels.

So the op owns the rounding: its C code divides in double (exact for a
power of two; a float32 quotient taken in double and rounded once is the
correctly rounded one: 53 >= 2 * 24 + 2 bits, Figueroa's bound). In JAX
mode a power of two is arithmetic, exact, which XLA fuses into the step;
other divisors, and PyTensor's Numba mode and ``perform``, look the 256
values numpy computed once up.
"""

import functools

import numpy as np

from ...codes.encoding import Encoding, is_power_of_two
from ...errors import ArgumentError, EncodingError
from ..setup.activation import activate
from . import numba

_api = activate()
at = _api.at

__all__ = ["LevelQuotient", "level_quotient"]


class LevelQuotient(_api.module("link.c.op").COp):
    """``(code + offset) / divisor`` of int8 codes, in ``precision``, given as ``dtype``."""

    __props__ = ("offset", "divisor", "precision", "dtype")

    def __init__(self, offset, divisor, precision, dtype):
        for name, value in (("precision", precision), ("dtype", dtype)):
            if value not in _api.FLOAT_DTYPES:
                raise ArgumentError(f"{name}={value!r}: expected float32 or float64")
        try:  # (an Encoding's offset and divisor: its table is what perform reads)
            Encoding(offset, divisor, precision=precision)
        except EncodingError:
            raise ArgumentError(f"offset={offset!r}, divisor={divisor!r}: expected an offset "
                                "of 0 or 128 and a positive integer divisor") from None
        self.offset, self.divisor = int(offset), int(divisor)
        self.precision, self.dtype = precision, dtype

    @functools.cached_property
    def table(self):
        """The 256 values of codes -128..127, numpy's: the encoding's own
        (:meth:`~int8store.codes.encoding.Encoding.table`), made once."""
        return Encoding(self.offset, self.divisor, precision=self.precision).table(self.dtype)

    def make_node(self, codes):
        codes = at.as_tensor_variable(codes)
        if codes.dtype != "int8":
            raise ArgumentError(f"levels are divided from int8 codes, got {codes.type}")
        out = at.TensorType(self.dtype, shape=codes.type.shape)()
        return _api.module("graph.basic").Apply(self, [codes], [out])

    def perform(self, node, inputs, outputs):
        (codes,) = inputs
        outputs[0][0] = np.asarray(self.table[codes.astype(np.int16) + 128])  # (0-d: an array)

    def infer_shape(self, *node_and_shapes):
        # Aesara passes (fgraph, node, shapes); PyTensor (node, shapes).
        return [node_and_shapes[-1][0]]

    def grad(self, inputs, output_grads):
        return [_api.module("gradient").grad_not_implemented(
            self, 0, inputs[0], "stored codes are not differentiable")]

    def c_code_cache_version(self):
        return (2,)

    def c_code(self, node, name, inputs, outputs, sub):
        (codes,), (out,), fail = inputs, outputs, sub["fail"]
        out_type, type_num = f"npy_{self.dtype}", f"NPY_{self.dtype.upper()}"
        by = (f"* {1 / self.divisor!r}" if is_power_of_two(self.divisor)  # (exact, and vectorized)
              else f"/ {float(self.divisor)!r}")
        quotient = f"((double)(src[i] + {self.offset}) {by})"
        if self.precision == "float32":
            quotient = f"(npy_float32){quotient}"
        return f"""
        {{
        PyArrayObject *source = PyArray_GETCONTIGUOUS({codes});  /* a new reference */
        if (!source) {{ {fail} }}
        int reuse = {out} != NULL && PyArray_IS_C_CONTIGUOUS({out})
                    && PyArray_NDIM({out}) == PyArray_NDIM(source);
        for (int d = 0; reuse && d < PyArray_NDIM(source); d++)
            reuse = PyArray_DIMS({out})[d] == PyArray_DIMS(source)[d];
        if (!reuse) {{
            Py_XDECREF({out});
            {out} = (PyArrayObject*)PyArray_EMPTY(PyArray_NDIM(source), PyArray_DIMS(source),
                                                  {type_num}, 0);
            if (!{out}) {{ Py_DECREF(source); {fail} }}
        }}
        const npy_int8 *src = (const npy_int8*)PyArray_DATA(source);
        {out_type} *dst = ({out_type}*)PyArray_DATA({out});
        npy_intp n = PyArray_SIZE(source);
        for (npy_intp i = 0; i < n; i++) dst[i] = ({out_type}){quotient};
        Py_DECREF(source);
        }}
        """


def level_quotient(codes, offset, divisor, precision, dtype):
    """Symbolic ``(codes + offset) / divisor`` (see :class:`LevelQuotient`)."""
    return LevelQuotient(offset, divisor, precision, dtype)(codes)


def _in_numba(op, node, **kwargs):
    """The op compiled by Numba (PyTensor's Numba mode): the 256 values looked up."""
    from pytensor.link.numba.dispatch.basic import numba_njit

    table = op.table

    @numba_njit
    def quotient(codes):
        flat = np.ascontiguousarray(codes).reshape(-1)
        out = np.empty(flat.shape[0], dtype=table.dtype)
        for i in range(flat.shape[0]):
            out[i] = table[np.int16(flat[i]) + 128]
        return out.reshape(codes.shape)

    return quotient, (f"int8store.LevelQuotient({op.offset}, {op.divisor}, {op.precision}, "
                      f"{op.dtype}) v1")


numba.declare(LevelQuotient, _in_numba)
