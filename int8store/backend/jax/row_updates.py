"""One update a row, ``x[arange(n), cols] += v``, as an elementwise choice
instead of an XLA scatter.

It is the gradient of the classic negative log-likelihood,
``-mean(log(p)[arange(n), y])``, in every tutorial's training step. The
library's conversion makes it ``x.at[(rows, cols)].add(v)``: a scatter that
XLA must assume may hit an element twice, so on a GPU it adds with atomics,
and with deterministic GPU ops (int8store's default there) XLA rewrites it
into a sort. The rows being ``arange(n)``, no two updates meet, and
``where(column == cols, x + v, x)`` gives bitwise the same array (the same
one addition an element) in one fused elementwise pass. Negative columns
count from the end and columns out of range update nothing, as in JAX's
scatter.
"""

import jax.numpy as jnp
import numpy as np

__all__ = ["one_update_a_row", "row_update"]


def _is_constant_arange(variable):
    data = getattr(variable, "data", None)
    return (isinstance(data, np.ndarray) and data.ndim == 1 and data.dtype.kind in "iu"
            and np.array_equal(data, np.arange(len(data))))


def one_update_a_row(node):
    """Whether ``node`` (an advanced increment or set) updates one element
    in each row of a matrix: ``x[arange(n), cols]`` with ``n`` the rows of
    ``x`` where its type knows them, and one value a row (or one for all)."""
    op = node.op
    if len(node.inputs) != 4 or tuple(getattr(op, "idx_list", (0, 1))) != (0, 1):
        return False
    x, values, rows, cols = node.inputs
    if x.type.ndim != 2 or not _is_constant_arange(rows):
        return False
    n = len(rows.data)
    known_rows = x.type.shape[0]
    return (getattr(cols.type, "ndim", None) == 1 and cols.type.dtype.startswith(("int", "uint"))
            and known_rows in (None, n) and cols.type.shape[0] in (None, n)
            and (values.type.ndim == 0 or tuple(values.type.shape) == (n,)))


def row_update(op, general):
    """The JAX function of an update :func:`one_update_a_row` accepts;
    ``general`` (the library's conversion) serves a matrix whose row count
    turns out not to be the indices' at trace time."""
    set_instead = bool(getattr(op, "set_instead_of_inc", False))

    def update(x, values, rows, cols):
        if x.shape[0] != rows.shape[0]:
            return general(x, values, rows, cols)
        width = x.shape[1]
        cols = jnp.where(cols < 0, cols + width, cols)
        hit = jnp.arange(width)[None, :] == cols[:, None]
        values = jnp.broadcast_to(jnp.asarray(values).astype(x.dtype), rows.shape)[:, None]
        return jnp.where(hit, values if set_instead else x + values, x)

    return update
