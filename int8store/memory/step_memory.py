"""What a compiled step holds in memory, read from its graph without running it.

Shapes come from the library's shape inference (each variable's static shape, else
its :class:`ShapeFeature` expression, evaluated by a function of constants
only). Then the compiled graph is walked in an execution order, with garbage
collection on: each node's outputs are allocated when it runs (an output
that is a view of an input, or that overwrites it in place, shares the
input's buffer), and a buffer is released after the last node that reads
it, unless it is an input or an output of the step. The order is the C
backend's (``"cvm"``: the virtual machine of Aesara and PyTensor computes
each output in turn, depth first from what it needs, :func:`vm_order`), or
the graph's topological one (``"topological"``), which comes closer to what
XLA holds, since XLA schedules a program for memory itself: for LeNet5 at
a batch of 500, the CVM's order held 15 MiB more than the topological one,
and so did the C backend.

The result has XLA's categories (``memory_analysis()`` of a compiled JAX
function), so the two can be set side by side: the arguments (parameters,
minibatch), the outputs (cost, updated parameters), and the peak of the
temporaries alive at once (forward activations kept for the backward pass,
gradients, update temporaries, the minibatch's float copy).
"""

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["StepMemory", "step_memory", "static_shapes", "static_sizes", "vm_order"]


@dataclass(frozen=True)
class StepMemory:
    """Bytes a step holds: ``arguments + outputs + temporaries + scratch``
    (``scratch``: buffers that ops keep from call to call, as int8store's own
    convolutions on PyTensor's C backend do; none in XLA's figure)."""

    arguments: int
    outputs: int
    temporaries: int
    scratch: int = 0
    #: Temporaries alive at each step of the execution order, and the steps' op types.
    profile: tuple = field(default=(), repr=False, compare=False)
    ops: tuple = field(default=(), repr=False, compare=False)

    @property
    def total(self):
        return self.arguments + self.outputs + self.temporaries + self.scratch


def static_sizes(fgraph, variables):
    """``{variable: bytes}`` for tensor ``variables`` of ``fgraph`` (shapes from
    static types, else from the graph's shape inference)."""
    return {variable: _nbytes(variable, shape)
            for variable, shape in static_shapes(fgraph, variables).items()}


def _nbytes(variable, shape):
    return 0 if shape is None else math.prod(shape) * np.dtype(variable.type.dtype).itemsize


def static_shapes(fgraph, variables):
    """``{variable: shape}`` for ``variables`` of ``fgraph``: static types, else
    the graph's shape inference, evaluated from constants; ``None`` for what
    is not a tensor (slices, random states, None)."""
    from ..backend import activate

    api = activate()
    ShapeFeature = api.module("tensor.rewriting.shape").ShapeFeature
    graph_basic = api.module("graph.basic")

    if not hasattr(fgraph, "shape_feature"):
        fgraph.attach_feature(ShapeFeature())
    feature = fgraph.shape_feature
    if isinstance(getattr(type(feature), "shape_of", None), property):
        shape_of = feature.shape_tuple  # PyTensor 3.3+, where shape_of is a deprecated proxy
    else:  # Aesara, earlier PyTensors (there, shape_tuple gives Shape_i nodes, not the inferred shapes)
        shape_of = feature.shape_of.__getitem__
    shapes, pending = {}, []
    for variable in variables:
        if not hasattr(variable.type, "ndim"):
            shapes[variable] = None
            continue
        static = getattr(variable.type, "shape", None)
        if static is not None and None not in static:
            shapes[variable] = tuple(static)
        else:
            pending.append((variable, shape_of(variable)))
    if pending:
        flat = [dim for _, shape in pending for dim in shape]
        inputs = [v for v in graph_basic.graph_inputs(flat)
                  if v.owner is None and not isinstance(v, graph_basic.Constant)]
        if inputs:
            names = ", ".join(str(v) for v in inputs[:5])
            raise ValueError(f"shapes depend on {names}: give every input a static shape")
        values = api.function([], flat, mode="FAST_COMPILE", on_unused_input="ignore")() \
            if flat else []
        position = 0
        for variable, shape in pending:
            shapes[variable] = tuple(int(d) for d in values[position:position + len(shape)])
            position += len(shape)
    return shapes


def vm_order(fgraph):
    """The nodes of ``fgraph`` in the order the CVM runs them (its
    ``lazy_rec_eval``): for each output in turn, depth first, a node after
    the nodes its ordering constraints name (in-place ops' prerequisites,
    taken by the index the VM gives their outputs) and then its inputs', in
    order."""
    topological = fgraph.toposort()
    index = {}
    for node in topological:
        for variable in node.inputs + node.outputs:
            index.setdefault(variable, len(index))
    prerequisites = {node: sorted({v for p in before for v in p.outputs}, key=index.__getitem__)
                     for node, before in fgraph.orderings().items()}
    done, order = set(), []
    for output in fgraph.outputs:
        stack = [(output, False)]  # (variable, its owner's needs pushed)
        while stack:
            variable, expanded = stack.pop()
            node = variable.owner
            if node is None or node in done:
                continue
            if expanded:
                done.add(node)
                order.append(node)
                continue
            stack.append((variable, True))
            needs = prerequisites.get(node, []) + list(node.inputs)
            stack.extend((v, False) for v in reversed(needs) if v.owner not in done)
    return order


#: The execution orders :func:`step_memory` walks.
SCHEDULES = ("cvm", "topological")


def step_memory(function, schedule="cvm", scratch=False):
    """The :class:`StepMemory` of a compiled function (C or JAX mode),
    from its rewritten graph, walked in the ``schedule`` order (see the
    module docstring); every input needs a static shape. With ``scratch``,
    the buffers its ops keep between calls (those that say, by a
    ``scratch_bytes`` method), each the largest any node takes of it."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule={schedule!r}: expected one of {', '.join(SCHEDULES)}")
    # A copy: shape inference attaches a feature that the function's own graph
    # should not carry.
    fgraph, _ = function.maker.fgraph.clone_get_equiv()
    order = vm_order(fgraph) if schedule == "cvm" else fgraph.toposort()
    shapes = static_shapes(fgraph, fgraph.variables)
    sizes = {variable: _nbytes(variable, shape) for variable, shape in shapes.items()}
    buffer_of = {variable: variable for variable in fgraph.inputs}
    for node in order:
        shared = {}
        for mapping in (getattr(node.op, "view_map", None) or {},
                        getattr(node.op, "destroy_map", None) or {}):
            for out, ins in mapping.items():
                shared[out] = node.inputs[ins[0]]
        for position, output in enumerate(node.outputs):
            source = shared.get(position)
            buffer_of[output] = buffer_of.get(source, source) if source is not None else output
    inputs = set(fgraph.inputs)
    kept = {buffer_of.get(v, v) for v in fgraph.outputs}
    last_read = {}
    for step, node in enumerate(order):
        for variable in node.inputs:
            last_read[buffer_of.get(variable, variable)] = step
    live, profile = 0, []
    for step, node in enumerate(order):
        for output in node.outputs:
            if buffer_of[output] is output and output not in kept:
                live += sizes.get(output, 0)
        profile.append(live)
        for variable in {buffer_of.get(v, v) for v in node.inputs}:
            if last_read.get(variable) == step and variable not in inputs and variable not in kept:
                live -= sizes.get(variable, 0)
    arguments = sum(sizes.get(v, 0) for v in fgraph.inputs)
    outputs = sum(sizes.get(v, 0) for v in kept if v not in inputs)
    return StepMemory(arguments, outputs, max(profile, default=0),
                      _kept_scratch(order, shapes) if scratch else 0, tuple(profile),
                      tuple(type(node.op).__name__ for node in order))


def _kept_scratch(nodes, shapes):
    """Bytes of the scratch buffers ``nodes`` keep between calls: a buffer
    named alike is one buffer, as large as the largest node takes it."""
    largest = {}
    for node in nodes:
        asked = getattr(node.op, "scratch_bytes", None)
        if asked is None:
            continue
        taken = asked(node, [shapes[v] for v in node.inputs], [shapes[v] for v in node.outputs])
        for name, nbytes in taken.items():
            largest[name] = max(largest.get(name, 0), nbytes)
    return sum(largest.values())
