"""Which symbolic slices of a split's rows int8store's JAX mode takes, read
from their bounds: :func:`minibatch_of_window` and :func:`refusal`.

JAX traces a program for static shapes, so a slice whose bounds are known
only at call time reaches it as a slice of unknown length, which it
refuses ("Array slice indices must have static start/stop/step"). A slice
of the rows whose stop is its start plus a constant has a length all the
same: each bound is read as an integer sum ``a1 * t1 + ... + c`` of terms
(inputs, or any expression that is not a sum or a multiple), and where
``stop - start`` is a constant ``n``, the slice is ``n`` rows from
``start = stride * index`` (``stride``: the greatest common divisor of the
coefficients and ``c``), that is :class:`~.minibatch.Minibatch` ``(n,
stride)`` at ``index``: ``data[(i + 1) * B:(i + 2) * B]`` is minibatch
``i + 1``, ``data[i * B + 3:(i + 1) * B + 3]`` a window of ``B`` rows from
row ``5 * i + 3``. Any other slice whose bounds are computed at call time
is refused, in one line naming the data, the slice and the forms taken.

:func:`~.minibatch.minibatch_of_slice` reads the classic forms
(``data[i * B:(i + 1) * B]``, ``data[s:s + n]``) wherever a split's rows are
sliced, in every mode; this module only in int8store's JAX mode, which
needs a static length.
"""

import math

import numpy as np

from ...errors import ArgumentError
from ..setup.activation import activate
from .minibatch import minibatch, same_value

_api = activate()

__all__ = ["TAKEN", "minibatch_of_window", "refusal"]

#: The forms JAX mode takes, for messages and docs.
TAKEN = ("JAX mode takes a slice of the rows whose stop is its start plus a constant, with no "
         "step and constants or scalar indices on the other axes: data[i * B:(i + 1) * B], "
         "data[e * B:(e + 1) * B] and data[e * B + c:(e + 1) * B + c] for an integer "
         "expression e of the inputs, data[s:s + n]")


def _entries(node):
    """The indices of a ``Subtensor`` node, one an axis: slices of variables
    (or None) and scalar variables, as the node's inputs give them."""
    indices_from_subtensor = _api.module("tensor.subtensor").indices_from_subtensor
    return tuple(indices_from_subtensor(node.inputs[1:], node.op.idx_list))


def _parts(entry):
    return (entry.start, entry.stop, entry.step) if isinstance(entry, slice) else (entry,)


def computed_at_call(variable):
    """Whether ``variable`` (an index) depends on a value known only when the
    function is called: an input's or a shared variable's (not its shape,
    which JAX knows when it traces)."""
    basic, shape = _api.module("graph.basic"), _api.module("tensor.shape")
    stack, seen = [variable], set()
    while stack:
        variable = stack.pop()
        if not isinstance(variable, basic.Variable) or variable in seen \
                or isinstance(variable, basic.Constant):
            continue
        seen.add(variable)
        if variable.owner is None:
            return True
        if not isinstance(variable.owner.op, (shape.Shape, shape.Shape_i)):
            stack.extend(variable.owner.inputs)
    return False


def _constant(variable):
    """The integer value of a constant scalar, else None."""
    data = getattr(variable, "data", None) \
        if isinstance(variable, _api.module("graph.basic").Constant) else None
    if data is None or np.ndim(data) or not np.issubdtype(np.asarray(data).dtype, np.integer):
        return None
    return int(data)


def _through(variable):
    """What ``variable`` passes on unchanged: a scalar-tensor conversion's or
    a widening integer cast's input, else None."""
    basic = _api.module("tensor.basic")
    owner = variable.owner
    if owner is None:
        return None
    if isinstance(owner.op, (basic.ScalarFromTensor, basic.TensorFromScalar)):
        return owner.inputs[0]
    scalar = getattr(owner.op, "scalar_op", owner.op)
    source = owner.inputs[0]
    if isinstance(scalar, _api.module("scalar").Cast) and len(owner.inputs) == 1 \
            and np.can_cast(source.dtype, variable.dtype, "safe"):
        return source
    return None


def _add(terms, more, factor=1):
    """``terms`` (a list of ``[term, coefficient]``) plus ``factor`` times ``more``."""
    for term, coefficient in more:
        for entry in terms:
            if same_value(entry[0], term):
                entry[1] += factor * coefficient
                break
        else:
            terms.append([term, factor * coefficient])
    return terms


def _read(variable):
    """``(terms, constant)`` with ``variable == sum(a * t for t, a in terms) +
    constant`` (terms are what is not a sum, a difference, a negation or a
    multiple by a constant), or None when ``variable`` is no integer scalar."""
    if variable is None or getattr(variable.type, "ndim", 0) != 0 \
            or not str(variable.dtype).startswith(("int", "uint")):
        return None
    value = _constant(variable)
    if value is not None:
        return [], value
    inner = _through(variable)
    if inner is not None:
        return _read(inner)
    scalar = _api.module("scalar")
    op = getattr(variable.owner, "op", None)
    op = getattr(op, "scalar_op", op)
    inputs = variable.owner.inputs if variable.owner else []
    parts = [_read(v) for v in inputs]
    if inputs and all(p is not None for p in parts):
        if isinstance(op, scalar.Add):
            return _sum(parts, [1] * len(parts))
        if isinstance(op, scalar.Sub) and len(parts) == 2:
            return _sum(parts, [1, -1])
        if isinstance(op, scalar.Neg):
            return _sum(parts, [-1])
        if isinstance(op, scalar.Mul):
            variables = [p for p in parts if p[0]]
            if len(variables) <= 1:
                factor = math.prod(p[1] for p in parts if not p[0])
                return _sum(variables or [([], 1)], [factor])
    return [[variable, 1]], 0


def _sum(parts, factors):
    terms, constant = [], 0
    for (more, value), factor in zip(parts, factors):
        _add(terms, more, factor)
        constant += factor * value
    return [t for t in terms if t[1]], constant


def _length(rows):
    """The constant ``stop - start`` of a slice of variables, else None."""
    start, stop = _read(rows.start), _read(rows.stop)
    if start is None or stop is None:
        return None
    terms, length = _sum([stop, start], [1, -1])
    return None if terms else length


def minibatch_of_window(node, devices=1):
    """The :class:`~.minibatch.Minibatch` for a ``Subtensor`` node that slices
    the rows by a constant length from a start computed at call time (see
    the module docstring), the other axes indexed as the node does; None for
    any other node. ``devices``: the data is split over that many devices
    (:mod:`int8store.backend.jax.sharding`). A form this op cannot take there
    exactly, or from a shuffled split's rows, is refused
    (:class:`~int8store.ArgumentError`)."""
    if not isinstance(node.op, _api.module("tensor.subtensor").Subtensor):
        return None
    entries = _entries(node)
    if not entries or not isinstance(entries[0], slice):
        return None
    rows, rest = entries[0], entries[1:]
    if rows.step is not None or not computed_at_call(rows.start) \
            or any(isinstance(e, slice) and any(map(computed_at_call, _parts(e))) for e in rest):
        return None
    length = _length(rows)
    if length is None or length < 1:
        return None
    data = node.inputs[0]
    terms, constant = _read(rows.start)
    if not terms:  # (a constant written with inputs, i - i: the library folds it)
        return None
    stride = math.gcd(constant, *(coefficient for _, coefficient in terms))
    if getattr(data, "shuffled", None) is not None:
        raise ArgumentError(
            f"{describe(node)}: of a shuffled split's rows, JAX mode takes the minibatch "
            "data[i * B:(i + 1) * B] (in the epoch's order) and the window data[s:s + n] (in "
            "the split's order) only: write one of them, or slice the unshuffled split")
    if devices > 1 and (stride % devices or length % devices):
        raise ArgumentError(
            f"{describe(node)}: over {devices} devices JAX mode takes a slice of the rows "
            f"whose start is a multiple of {devices} for every index and whose length is too "
            f"(each device takes its own rows of it); this one starts at "
            f"{_render(rows.start)} and takes {length} rows")
    index = _index(rows.start, terms, constant, stride)
    taken = minibatch(data, index, length, stride=stride, keep_short=True)
    if not rest:
        return taken
    return taken[(slice(None),) + tuple(map(_as_index, rest))]


def _as_index(entry):
    """An index on another axis as the library's indexing takes it."""
    if isinstance(entry, slice):
        return slice(*map(_as_index, _parts(entry)))
    if not isinstance(entry, _api.module("graph.basic").Variable):
        return entry
    value = _constant(entry)
    return value if value is not None else _passed(entry)


def _passed(variable):
    """``variable`` as a tensor, through scalar conversions and widening casts."""
    inner = _through(variable)
    return variable if inner is None else _passed(inner)


def _index(start, terms, constant, stride):
    """``(start) / stride`` as an integer expression, in ``start``'s dtype:
    ``start`` itself for a stride of 1. (A term read through a widening
    cast, ``cast(i, "int64") * 5``, is widened again: in its own dtype the
    index would wrap where the start the user wrote does not.)"""
    dtype, start = start.dtype, _passed(start)
    if stride == 1:
        return start
    index = None
    for term, coefficient in terms:
        part = _api.at.cast(term, dtype)
        part = part if coefficient == stride else part * (coefficient // stride)
        index = part if index is None else index + part
    return index + constant // stride if constant else index


def refusal(node):
    """Why JAX mode cannot take the ``Subtensor`` ``node``, in one line naming
    the data, the slice and the forms taken; None when JAX can (no slice's
    bound is computed at call time)."""
    if not isinstance(node.op, _api.module("tensor.subtensor").Subtensor):
        return None
    entries = _entries(node)
    dynamic = [axis for axis, entry in enumerate(entries) if isinstance(entry, slice)
               and any(map(computed_at_call, _parts(entry)))]
    if not dynamic:
        return None
    rows = entries[0]
    if dynamic != [0]:
        why = f"a slice along axis {max(dynamic)} computed at call time"
    elif rows.step is not None:
        why = "a step"
    elif not (isinstance(rows.start, _api.module("graph.basic").Variable)
              and rows.stop is not None and (_length(rows) or 0) >= 1):
        why = "a length that is not a positive constant"
    else:
        why = "a form it does not read"
    return (f"{describe(node)}: JAX mode cannot take this slice, with {why} (JAX traces "
            f"arrays of static shapes); {TAKEN}. int8store's 'c' mode takes any slice")


def describe(node):
    """``data[start:stop:step, ...]`` of a ``Subtensor`` node, as written."""
    def entry(index):
        if not isinstance(index, slice):
            return _render(index)
        parts = [_render(p) if p is not None else "" for p in _parts(index)]
        return ":".join(parts if parts[2] else parts[:2])

    name = node.inputs[0].name or "data"
    return f"{name}[{', '.join(entry(e) for e in _entries(node))}]"


_SIGNS = (("Add", " + "), ("Sub", " - "), ("Mul", " * "), ("IntDiv", " // "), ("Mod", " % "))


def _render(variable, inner=False):
    """An integer expression as a user writes it (its inputs by name)."""
    if not isinstance(variable, _api.module("graph.basic").Variable):
        return str(variable)
    value = _constant(variable)
    if value is not None:
        return str(value)
    through = _through(variable)
    if through is not None:
        return _render(through, inner)
    if variable.owner is None:
        return variable.name or f"<{variable.dtype} input>"
    scalar = _api.module("scalar")
    op = getattr(variable.owner.op, "scalar_op", variable.owner.op)
    if isinstance(op, scalar.Neg):
        return "-" + _render(variable.owner.inputs[0], True)
    for name, sign in _SIGNS:
        if isinstance(op, getattr(scalar, name, ())):
            text = sign.join(_render(v, name != "Add") for v in variable.owner.inputs)
            return f"({text})" if inner and name in ("Add", "Sub") else text
    return variable.name or str(_api.module("printing").pprint(variable))
