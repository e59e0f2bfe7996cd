"""int8store's own compiled JAX functions, called without the library's
``Function``: many training steps a call (:class:`JaxSteps`) and a split
scored in one call (:class:`JaxScore`).

A function the library compiles (``function(..., mode=...)``) goes through
its ``Function`` and its linker's thunk on every call: inputs filtered,
outputs stored, updates written back through containers. For the two
functions int8store builds itself that is all the host work of a call, and
on a GPU it costs more than a small model's step. Here the graph, rewritten
as int8store's JAX mode rewrites a function's (:func:`jax_graph`: the
classic slices as minibatch ops) and converted with int8store's conversions
(:func:`.generated_source.graph_to_python`), is given to ``jax.jit`` as a
function of plain arguments and called with the shared variables' arrays as
they lie on the device: the parameters donated (XLA writes their updates
over them), the data read where it is, nothing brought back to the host that
the caller does not ask for. Minibatch indices are checked on the host
before each call, as int8store's JAX mode checks them (JAX would clamp
them).
"""

import functools

import numpy as np

from ...errors import ArgumentError
from ..setup.activation import activate
from .generated_source import graph_to_python
from .mode import (HeldConstants, jax_mode, minibatch_check, refuse_untraceable_slices,
                   require_jax)
from .window_groups import scoring_group

__all__ = ["jax_graph", "JaxSteps", "JaxScore"]


def jax_graph(inputs, outputs):
    """A function graph of ``outputs`` over ``inputs`` (the explicit ones
    first, then the shared variables the outputs read, in the order given),
    rewritten as int8store's JAX mode rewrites a compiled function's graph:
    its inputs are never overwritten."""
    api = activate()
    graph = api.module("graph.fg").FunctionGraph(list(inputs), list(outputs), clone=False)
    graph.attach_feature(api.Supervisor(graph.inputs))
    jax_mode().optimizer.rewrite(graph)
    refuse_untraceable_slices(graph)
    return graph


def index_checks(graph, what):
    """``check(index)`` for each minibatch op of ``graph``, whose index must
    be the graph's first input (``what`` names the function, for the
    message)."""
    from ..ops.minibatch import Minibatch

    checks = []
    for node in graph.apply_nodes:
        if not isinstance(node.op, Minibatch):
            continue
        if node.inputs[1] is not graph.inputs[0]:
            raise ArgumentError(
                f"{node.inputs[0].name or 'data'}: in JAX mode, {what} take each minibatch at "
                "the function's own index (the classic slice data[index * size:(index + 1) * "
                "size], or data[start:start + size] for a window)")
        checks.append(minibatch_check(node))
    return checks


def _held(variables):
    """The arrays the shared ``variables`` hold now."""
    return [variable.container.storage[0] for variable in variables]


class _Reads:
    """The arrays of the shared variables a function reads, as they lie, a
    held constant's on the device (:class:`~.mode.HeldConstants`)."""

    def __init__(self, variables):
        self.variables = list(variables)
        self._held = HeldConstants(self.variables)

    def __call__(self):
        return tuple(self._held.placed(_held(self.variables)))


class JaxSteps:
    """Up to ``steps`` training steps in one call of one XLA loop.

    ``step`` is a function graph (see :func:`jax_graph`) whose inputs are the
    minibatch index, the values the step updates, then the shared variables
    it reads, and whose outputs are the step's cost and the updated values.
    ``params`` are the shared variables updated (their values enter the loop
    transposed where ``flipped`` says so, and leave it in their own shape).

    ``steps_call(first, count)`` makes the steps on minibatches ``first`` to
    ``first + count - 1`` and returns their ``steps`` costs (0 past
    ``count``) as a device array; the parameters hold the updated values. A
    full call (``count == steps``) runs a loop of a fixed trip count, a
    shorter one a loop of ``count`` trips (each compiled once, on first use).
    The parameters' arrays are donated: values borrowed from them before a
    call (``get_value(borrow=True)``) are gone after it.
    """

    def __init__(self, step, params, steps, flipped=None):
        jax = require_jax()
        import jax.numpy as jnp

        self.steps, self.params = int(steps), list(params)
        flipped = list(flipped or [False] * len(self.params))
        n_state = len(self.params)
        self.read = list(step.inputs[1 + n_state:])
        self._reads = _Reads(self.read)
        self._checks = index_checks(step, "many steps a call")
        one_step = graph_to_python(step, "int8store_step")
        cost_dtype = jax.dtypes.canonicalize_dtype(step.outputs[0].type.dtype)

        def turned(values):  # between the parameters' shapes and the loop's
            return tuple(value.T if flip else value for value, flip in zip(values, flipped))

        def int8store_steps(first, count, state, data):  # (its name is XLA's program's)
            def body(k, carry):
                costs, state = carry
                cost, *updated = one_step(first + k, *state, *data)
                # (an update in place, not a scatter: XLA keeps it in the loop's buffer)
                costs = jax.lax.dynamic_update_index_in_dim(costs, cost.astype(cost_dtype), k, 0)
                return costs, tuple(updated)

            costs = jnp.zeros(self.steps, cost_dtype)
            costs, state = jax.lax.fori_loop(0, count, body, (costs, turned(state)))
            return costs, turned(state)

        def int8store_full_steps(first, state, data):  # a loop of a fixed trip count
            return int8store_steps(first, self.steps, state, data)

        self._full = jax.jit(int8store_full_steps, donate_argnums=1)
        self._partial = jax.jit(int8store_steps, donate_argnums=2)

    def _arguments(self, first, count):
        """The jitted function for a call of ``count`` steps, and its arguments."""
        state, data = tuple(_held(self.params)), self._reads()
        if count == self.steps:
            return self._full, (first, state, data)
        return self._partial, (first, count, state, data)

    def __call__(self, first, count=None):
        first = int(first)
        count = self.steps if count is None else int(count)
        if not 1 <= count <= self.steps:
            raise ArgumentError(f"count={count}: a call makes 1 to {self.steps} steps")
        for check in self._checks:
            check(first)
            check(first + count - 1)
        jitted, arguments = self._arguments(first, count)
        costs, updated = jitted(*arguments)
        for variable, value in zip(self.params, updated):
            if value.dtype == np.dtype(variable.dtype):
                variable.container.storage[0] = value
            else:  # (a 64-bit type, which JAX without x64 computed in 32 bits)
                variable.container.value = value  # through the type's filter, as numpy
        return costs

    def lower(self, first=0, count=None, like=None):
        """JAX's lowering of a call (``.compile()`` gives XLA's executable:
        its memory analysis, its text), with the values held now, or with
        ``like(value)`` for each (e.g. a ``jax.ShapeDtypeStruct`` placed on
        a device that JAX can compile for but not run on)."""
        jitted, arguments = self._arguments(int(first), self.steps if count is None else int(count))
        if like is not None:
            arguments = require_jax().tree_util.tree_map(like, arguments)
        return jitted.lower(*arguments)


class JaxScore:
    """Every window of a scoring plan in one call (see
    :mod:`int8store.order.windows`).

    ``window`` is a function graph whose inputs are a window's start, then
    the shared variables it reads, and whose one output is the per-example
    values of the window (e.g. ``neq(y_pred, y)``). ``score(starts,
    weights)`` returns, as a device scalar, the sum of the values whose
    weight is 1 over the windows ``starts`` (int32 for integer or boolean
    values, exact; the values' own float type otherwise), in one loop of a
    fixed trip count: one compilation for every call whose plan has that
    many windows. Each step of the loop takes :attr:`group` windows at once
    (:mod:`.window_groups`: on one accelerator as many as fit, of the
    ``windows`` a split has; else one), the plan padded with windows that
    count nothing. The last :attr:`KEPT` plans are kept on the device.
    """

    KEPT = 4

    def __init__(self, window, windows=1):
        jax = require_jax()
        import jax.numpy as jnp

        self.read = list(window.inputs[1:])
        self._reads = _Reads(self.read)
        self._checks = index_checks(window, "a split scored in one call")
        values_of = graph_to_python(window, "int8store_window")
        dtype = np.dtype(window.outputs[0].type.dtype)
        total_dtype = jnp.int32 if dtype.kind in "biu" else jax.dtypes.canonicalize_dtype(dtype)
        start_dtype = jax.dtypes.canonicalize_dtype(window.inputs[0].type.dtype)

        def group_values(starts, data):  # the values of the windows at ``starts``, at once
            return jax.vmap(lambda start: values_of(start, *data)[0])(starts)

        def int8store_score(starts, weights, data):  # (a 2-D plan: a group a step)
            def body(k, total):
                if starts.ndim == 1:
                    (values,) = values_of(starts[k], *data)
                else:
                    values = group_values(starts[k], data)
                counted = jnp.where(weights[k], values, jnp.zeros((), values.dtype))
                return total + jnp.sum(counted, dtype=total_dtype)

            return jax.lax.fori_loop(0, starts.shape[0], body, jnp.zeros((), total_dtype))

        self._score = jax.jit(int8store_score)
        self._kept = {}  # the plans seen last, on the device
        self._values_of, self._start_dtype, self._windows = values_of, start_dtype, windows

    @functools.cached_property
    def group(self):
        """How many windows a step of the loop takes: decided at the first
        score, when what the window reads lies where it will be scored."""
        return scoring_group(self._values_of, self._start_dtype,
                             self._reads(), self._windows)

    def grouped(self, starts, weights):
        """The plan ``(starts, weights)`` as the loop takes it: a window a
        step, or padded (windows from the first start that count nothing)
        to whole groups of :attr:`group`, a group a step."""
        group = self.group
        if group == 1:
            return starts, weights
        padding = -len(starts) % group
        starts = np.concatenate([starts, np.repeat(starts[:1], padding)])
        weights = np.concatenate([weights, np.zeros((padding,) + weights.shape[1:], bool)])
        return (starts.reshape(-1, group), weights.reshape((-1, group) + weights.shape[1:]))

    def __call__(self, starts, weights):
        """The sum (a device scalar) over the plan ``(starts, weights)``
        (numpy): checked and sent to the device the first time it is seen,
        kept there for the calls after (a split's plan is the same each time
        it is scored, and so are a stream's whole shards')."""
        key = (starts.tobytes(), np.packbits(weights).tobytes(), weights.shape)
        kept = self._kept.pop(key, None)  # (put back last: the most recent)
        if kept is None:
            self._check(starts)
            kept = require_jax().device_put(self.grouped(starts, weights))
        self._kept[key] = kept
        while len(self._kept) > self.KEPT:
            self._kept.pop(next(iter(self._kept)))
        return self._score(*kept, self._reads())

    def _check(self, starts):
        """Raise unless every window from ``starts`` lies in the data."""
        if len(starts):
            for check in self._checks:
                check(int(np.min(starts)))
                check(int(np.max(starts)))

    def wait_for_inputs(self):
        """Wait until what the window reads is computed (the parameters the
        training calls before are updating), so that a timing of the score
        is the score's alone."""
        import jax

        jax.block_until_ready(self._reads())
