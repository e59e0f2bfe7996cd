"""Many training steps in one op: :class:`MultiStep`.

The op holds one training step as a graph of its own (a function graph whose
inputs are the minibatch index, the values the step updates, then the shared
variables it reads; whose outputs are the step's cost and the updated
values), and makes ``count`` of them in a row, from minibatch ``first``, each
step starting from the values the one before left: up to ``steps`` updates
for one call of the compiled function (:func:`int8store.training.steps_function`
builds it from a classic tutorial's cost, updates and ``givens``).

Its ``perform`` runs the step's compiled function ``count`` times: the same
arithmetic as ``count`` calls, no faster (a call of the C backend costs
little). In JAX mode :func:`int8store.training.steps_function` builds no such op: its
loop is int8store's own XLA function, called directly
(:class:`int8store.backend.jax.direct.JaxSteps`).
"""

import numpy as np

from ...errors import ArgumentError
from ..setup.activation import activate

_api = activate()
at = _api.at

__all__ = ["MultiStep"]


class MultiStep(_api.module("graph.op").Op):
    """Up to ``steps`` consecutive updates made by the graph ``step`` (see the
    module docstring), which has ``n_state`` updated values after its index.

    Inputs: ``first`` and ``count`` (integer scalars), the updated values,
    then the shared variables the step reads (the very variables: where they
    are held stays known). Outputs: the ``steps`` costs (0 past ``count``),
    then the updated values after the last step. ``mode`` compiles the step
    for :meth:`perform`. Each op is its own: two are never merged."""

    def __init__(self, step, steps, n_state, mode=None):
        if int(steps) != steps or steps < 1:
            raise ArgumentError(f"steps={steps!r}: expected a positive number of steps a call")
        self.step, self.steps, self.n_state, self.mode = step, int(steps), int(n_state), mode
        self._function = None

    @property
    def index(self):
        """The step graph's minibatch index (its first input)."""
        return self.step.inputs[0]

    def make_node(self, first, count, *values):
        first, count = at.as_tensor_variable(first), at.as_tensor_variable(count)
        for name, value in (("first", first), ("count", count)):
            if value.ndim or not value.dtype.startswith(("int", "uint")):
                raise ArgumentError(f"{name} must be an integer scalar, got {value.type}")
        expected = self.step.inputs[1:]
        if len(values) != len(expected) or any(v.type != e.type for v, e in zip(values, expected)):
            raise ArgumentError("a MultiStep takes the values of its step's inputs after the index, "
                                f"of types {[str(e.type) for e in expected]}")
        costs = at.TensorType(self.step.outputs[0].type.dtype, shape=(self.steps,))()
        updated = [value.type() for value in values[:self.n_state]]
        return _api.module("graph.basic").Apply(self, [first, count, *values], [costs, *updated])

    def perform(self, node, inputs, outputs):
        first, count, *values = inputs
        first, count = int(first), int(count)
        if not 1 <= count <= self.steps:
            raise ArgumentError(f"count={count}: a call makes 1 to {self.steps} steps")
        if self._function is None:  # the step alone (it reads its shared variables itself)
            self._function = _api.function(list(self.step.inputs[:1 + self.n_state]),
                                           self.step.outputs, mode=self.mode,
                                           on_unused_input="ignore")
        state = values[:self.n_state]
        costs = np.zeros(self.steps, dtype=node.outputs[0].dtype)
        for k in range(count):
            costs[k], *state = self._function(first + k, *state)
        outputs[0][0] = costs
        for output, value in zip(outputs[1:], state):
            output[0] = value

    def infer_shape(self, *node_and_shapes):
        # Aesara passes (fgraph, node, shapes); PyTensor (node, shapes).
        shapes = node_and_shapes[-1]
        return [(at.constant(self.steps, dtype="int64"),)] + list(shapes[2:2 + self.n_state])

    def __str__(self):
        return f"MultiStep{{{self.steps}}}"
