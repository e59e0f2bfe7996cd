"""int8store's JAX mode: :func:`jax_mode`, what ``int8store.function_mode("jax")``
gives (:func:`int8store.backend.function_mode`).

It is the library's JAX mode (PyTensor's or Aesara's) with these additions,
all local to this mode (the library's own ``mode="JAX"`` is left as it ships):

* the classic slice ``data[index * size:(index + 1) * size]`` becomes the
  static-size :class:`~int8store.backend.ops.minibatch.Minibatch` op (JAX
  refuses a slice with a symbolic start), so the classic tutorials'
  ``givens`` run unchanged, and so does any slice of the rows whose stop
  is its start plus a constant (``data[(i + 1) * B:(i + 2) * B]``,
  ``data[i * B + c:(i + 1) * B + c]``: :mod:`~int8store.backend.ops.slice_forms`);
  every minibatch op's length is made part of its type (``static``), as a
  traced program needs it, where the C backend leaves it out, as the
  classic slice's was. Any other slice whose bounds are computed at call
  time is refused when the function is compiled, in one line naming it
  (:func:`refuse_untraceable_slices`), not by JAX's traceback;
* ops are converted with int8store's conversions first (:mod:`.conversions`:
  conv2d, pooling, the softmax ops, corrections of Aesara's own), then the
  library's;
* a held constant (a read-only shared scalar int8store's views round
  with, tagged ``held_constant``) is placed on the device at the first call,
  not copied there with every call as a numpy value would be
  (:class:`HeldConstants`, which int8store's own loops use too);
* every minibatch index is checked on the host before each call: inside a
  jitted function JAX cannot raise, and its dynamic slice would clamp an index
  past the end without a word (an index computed from the inputs, as
  ``i + 1``, is computed on the host for the check: :func:`host_value`).
  Over several devices a minibatch (stride == size) must take real rows on
  every device
  (:meth:`~int8store.order.blocks.Blocks.check_minibatch`:
  ``dataset.n_batches(B)`` of them), and so must any other stride's rows;
  a window (evaluation's, stride 1) may cover padding, which
  :func:`~int8store.training.evaluate_in_chunks` leaves out.
  A function's minibatches are converted for its data's placement: data
  placed again over another device count is refused at the next call;
* on Aesara, a function's program can write the updates of the variables
  :func:`~.device.keep_on_device` names back as ``jax.Array``s
  (:mod:`.updates`), where Aesara's ``Function`` would turn them into numpy;
* on Aesara, a shared variable the function updates that has no static
  shape (a classic tutorial's ``W = shared(numpy.zeros((n_in, n_out)))``)
  is read through the shape of its value at compile time
  (:class:`SharedShapes`): Aesara's JAX conversions compute its shape
  inside the traced program otherwise, where JAX refuses it as an array's
  size (a gradient's ``Alloc``). A later value of another shape is refused
  before the call, naming the variable. Shared inputs the function does not
  update (data swapped for chunks of other sizes) are left as they are.
"""

import threading

import numpy as np

from ...errors import ArgumentError, MissingDependencyError
from ..setup.activation import activate

__all__ = ["jax_mode", "require_jax", "minibatch_check", "is_held_constant", "HeldConstants",
           "SharedShapes", "refuse_untraceable_slices"]

_JAX_MODE = None
_lock = threading.Lock()


def require_jax():
    """The ``jax`` module, or a clear error saying how to install it."""
    try:
        import jax
    except ImportError as error:
        raise MissingDependencyError(
            "JAX mode needs JAX: pip install 'int8store[jax]' (CPU) or "
            "'int8store[cuda13]' / 'int8store[cuda12]' (NVIDIA GPUs)"
        ) from error
    return jax


def is_held_constant(variable):
    """Whether ``variable`` is a held constant: a read-only shared scalar
    int8store's views round with (tagged by ``int8store.dataset.symbolic``),
    which JAX calls place on the device once."""
    return getattr(variable.tag, "held_constant", False)


class HeldConstants:
    """The held constants among a function's input ``variables``: their
    values, passed by position, are put on the device at the first call and
    the device's copies passed from then on (jitted with a numpy value, a
    constant would be copied there at every call). One road for the
    library's JAX functions and int8store's own loops."""

    def __init__(self, variables):
        self.positions = [i for i, v in enumerate(variables) if is_held_constant(v)]
        self._placed = None

    def __bool__(self):
        return bool(self.positions)

    def placed(self, values):
        """``values`` (one per variable) with the held constants' on the device."""
        if not self.positions:
            return values
        if self._placed is None:
            jax = require_jax()
            self._placed = {i: jax.device_put(values[i]) for i in self.positions}
        values = list(values)
        for i in self.positions:
            values[i] = self._placed[i]
        return values


class SharedShapes:
    """The shapes a function's shared inputs were compiled for (by position;
    see the module docstring), checked before each call (on Aesara, by its
    program: :class:`~.updates.DeviceUpdates`)."""

    def __init__(self, fgraph):
        specified = getattr(fgraph, "int8store_shared_shapes", {})
        positions = {v: i for i, v in enumerate(fgraph.inputs)}
        self.expected = [(positions[v], shape, v.name or f"input {positions[v]}")
                         for v, shape in specified.items() if v in positions]

    def __bool__(self):
        return bool(self.expected)

    def check(self, values):
        for position, shape, name in self.expected:
            held = tuple(getattr(values[position], "shape", ()))
            if held != shape:
                raise ArgumentError(f"{name}: the function was compiled in JAX mode for its value "
                                    f"of shape {shape}; it now holds one of shape {held}: JAX "
                                    "mode on Aesara compiles for the shapes of the variables a "
                                    "function updates, so compile the function again after "
                                    "giving one another shape")


def specify_shared_shapes(fgraph):
    """Read each shared input of ``fgraph`` that the function updates (a
    parameter) and that has no static shape through a ``SpecifyShape`` of its
    value's shape (recorded on the graph for :class:`SharedShapes`). Other
    shared inputs (data a user swaps for a chunk of another size) are left
    as they are: JAX compiles again for a new shape."""
    api = activate()
    SharedVariable = api.module("compile.sharedvalue").SharedVariable
    specify_shape = api.module("tensor.shape").specify_shape
    updated = {fgraph.inputs[i] for i in (getattr(fgraph, "update_mapping", None) or {}).values()}
    specified = {}
    for variable in list(fgraph.inputs):
        static = getattr(variable.type, "shape", None)
        if not isinstance(variable, SharedVariable) or variable not in updated \
                or static is None or None not in static:
            continue
        clients = [(node, i) for node, i in fgraph.clients[variable] if node != "output"]
        shape = tuple(int(n) for n in getattr(variable.get_value(borrow=True), "shape", ()))
        if not clients or len(shape) != len(static):
            continue
        read = specify_shape(variable, shape)
        for node, i in clients:
            fgraph.change_node_input(node, i, read, reason="int8store_shared_shapes")
        specified[variable] = shape
    fgraph.int8store_shared_shapes = specified
    return specified


def jax_mode():
    """int8store's JAX mode (made once), for ``function(..., mode=...)``."""
    global _JAX_MODE
    if _JAX_MODE is None:
        require_jax()
        with _lock:
            if _JAX_MODE is None:
                _JAX_MODE = _make_jax_mode()
    return _JAX_MODE


def _make_jax_mode():
    api = activate()
    compile_mode = api.module("compile.mode")
    JAX, Mode, optdb = compile_mode.JAX, compile_mode.Mode, compile_mode.optdb
    Constant = api.module("graph.basic").Constant
    rewriting = api.module("graph.rewriting.basic")
    GraphRewriter, in2out, node_rewriter = (rewriting.GraphRewriter, rewriting.in2out,
                                            rewriting.node_rewriter)
    JAXLinker = api.module("link.jax.linker").JAXLinker
    Subtensor = api.module("tensor.subtensor").Subtensor

    from ..ops.minibatch import Minibatch, minibatch_of_slice
    from ..ops.slice_forms import minibatch_of_window, refusal
    from .generated_source import graph_to_python
    from .sharding import sharded_layout
    from .updates import DeviceUpdates

    class CheckedJAXLinker(JAXLinker):
        """Aesara's JAX linker with int8store's conversions, a host-side
        check of minibatch indices and, on Aesara, a program that can keep
        updates on the device (:class:`~.updates.DeviceUpdates`)."""

        def fgraph_convert(self, fgraph, input_storage, storage_map, **kwargs):
            refuse_untraceable_slices(fgraph)
            self._index_checks = [_index_check(fgraph, node) for node in fgraph.apply_nodes
                                  if isinstance(node.op, Minibatch)]
            # What JAXLinker.fgraph_convert does, with int8store's conversions
            # (Aesara's for every other op).
            return graph_to_python(fgraph, "jax_funcified_fgraph",
                                   input_storage=input_storage, storage_map=storage_map,
                                   **kwargs)

        def make_all(self, *args, **kwargs):
            program, inputs, outputs, *rest = super().make_all(*args, **kwargs)
            if api.NAME == "aesara":  # (PyTensor stores updates as they are: .updates)
                shapes = SharedShapes(self.fgraph)
                program = DeviceUpdates(program, inputs, outputs,
                                        self.fgraph.update_mapping or {},
                                        check_inputs=shapes.check if shapes else None)
            return (program, inputs, outputs, *rest)

        def jit_compile(self, fn):
            jitted = super().jit_compile(fn)
            self.jitted = jitted  # for jitted.lower(...): XLA's memory analysis
            checks = [c for c in self._index_checks if c is not None]
            held = HeldConstants(self.fgraph.inputs)
            if not checks and not held:
                return jitted

            def checked(*args):
                for check in checks:
                    check(args)
                return jitted(*held.placed(args))

            return checked

        def __reduce__(self):
            # A pickled function holds its linker: this class is local, and what
            # compiling made (the checks, the jitted program) is made again
            # when the unpickled function is linked.
            made = ("_index_checks", "jitted")
            return _linker_of_state, ({k: v for k, v in self.__dict__.items() if k not in made},)

    class JAXMode(Mode):
        """The mode, pickled as what it is: int8store's JAX mode (whose
        parts are made here, unpicklable), :func:`jax_mode` when unpickled
        (a clone with other rewrites is pickled as the library pickles it)."""

        def __reduce__(self):
            return (jax_mode, ()) if self is _JAX_MODE else super().__reduce__()

    def _index_check(fgraph, node):
        """``check(args)`` of a minibatch node's index, or None for a constant one."""
        index, check = node.inputs[1], minibatch_check(node)
        if isinstance(index, Constant):
            check(index.data)
            return None
        if index in fgraph.inputs:
            position = fgraph.inputs.index(index)
            return lambda args: check(args[position])
        layout = sharded_layout(node.inputs[0])
        if layout is not None and node.op.stride == 1:
            raise ArgumentError(
                f"{node.inputs[0].name or 'data'}: over {layout[1]} devices, the start of a "
                "window data[s:s + n] must be an input of the function (it counts each "
                "device's rows, as int8store.training.evaluate_in_chunks gives them)")
        value = host_value(fgraph, index)
        return lambda args: check(value(args))

    @node_rewriter([Subtensor])
    def classic_slices_to_minibatches(fgraph, node):
        replacement = minibatch_of_slice(node)
        if replacement is None:
            layout = sharded_layout(node.inputs[0])
            replacement = minibatch_of_window(node, 1 if layout is None else layout[1])
        return [replacement] if replacement is not None else None

    @node_rewriter([Minibatch])
    def static_minibatches(fgraph, node):
        if node.op.static or node.op.short is not None:
            return None
        return [node.op.with_static_length()(*node.inputs)]

    class MinibatchesFirst(GraphRewriter):
        """The slice rewrite on its own, then the library's JAX rewrites (the
        ``query`` on its rewrite database). Run as one sequence, the library's
        would attach their shape tracker first, which keeps the slices'
        symbolic lengths (JAX cannot trace them) after the slices are gone."""

        def __init__(self, first, query):
            super().__init__()
            self.first, self.query, self.rest = first, query, optdb.query(query)
            self.lengths = in2out(static_minibatches, name="int8store_static_minibatches")

        def add_requirements(self, fgraph):
            pass  # each part adds its own, in turn

        def apply(self, fgraph):
            self.first.rewrite(fgraph)
            # Said as written, in case a slice JAX cannot take is left at the end.
            fgraph.int8store_refused_slices = [
                (node, node.inputs[0], message) for node in fgraph.toposort()
                if (message := refusal(node)) is not None]
            self.lengths.rewrite(fgraph)
            if api.NAME == "aesara":  # (PyTensor's JAX rewrites keep shapes static)
                specify_shared_shapes(fgraph)
            return self.rest.rewrite(fgraph)

        # What a mode asks of its optimizer's query (PyTensor's rewrites of
        # inner graphs ask the mode for ``excluding``).
        def including(self, *tags):
            return MinibatchesFirst(self.first, self.query.including(*tags))

        def excluding(self, *tags):
            return MinibatchesFirst(self.first, self.query.excluding(*tags))

        def requiring(self, *tags):
            return MinibatchesFirst(self.first, self.query.requiring(*tags))

        def print_summary(self, stream=None, level=0, depth=-1):
            for part in (self.first, self.rest):
                part.print_summary(stream, level, depth)

    if api.NAME == "aesara":
        # Keep conv2d abstract (int8store converts the abstract ops to JAX): leave
        # out the rewrites to CPU convolutions and the check that none remain.
        query = JAX.provided_optimizer.excluding("conv_opts", "AbstractConvCheck")
    else:
        # What PyTensor's Mode adds for its JAX linker when given a query (a
        # rewriter, as here, is taken as it is).
        query = JAX.provided_optimizer.including(*JAXLinker.required_rewrites) \
            .excluding(*JAXLinker.incompatible_rewrites)
    # (failure_callback=None: a slice refused is said, not logged and passed over)
    first = in2out(classic_slices_to_minibatches, name="int8store_minibatches",
                   failure_callback=None)
    return JAXMode(linker=CheckedJAXLinker(), optimizer=MinibatchesFirst(first, query))


def refuse_untraceable_slices(fgraph):
    """Raise :class:`~int8store.ArgumentError` if a slice JAX cannot trace
    (a bound computed at call time, of a form no minibatch op takes) is left
    in ``fgraph``, rewritten as int8store's JAX mode rewrites: said as the
    user wrote it where the mode's first rewrite saw it."""
    from ..ops.slice_forms import refusal

    written = getattr(fgraph, "int8store_refused_slices", [])
    for node in fgraph.toposort():
        message = refusal(node)
        if message is None:
            continue
        # As the first rewrite saw this node; else as it saw a slice that a
        # later rewrite replaced (this one's source), one of the same data first.
        seen = [said for first, _, said in written if first is node]
        replaced = [(data, said) for first, data, said in written
                    if first not in fgraph.apply_nodes]
        same = [said for data, said in replaced if data is node.inputs[0]]
        raise ArgumentError((seen or same or [said for _, said in replaced] or [message])[0])


def host_value(fgraph, variable):
    """``value(args)``: the integer scalar ``variable`` of ``fgraph``, computed
    on the host from the values of the graph's inputs (``args``, by
    position) by each op's ``perform``, as the library's Python linker
    would (a minibatch index such as ``i + 1``, checked before JAX runs)."""
    api = activate()
    basic = api.module("graph.basic")
    nodes = api.io_toposort(api.graph_inputs([variable]), [variable])  # (computing variable)
    for node in nodes:
        node.op.prepare_node(node, None, None, "py")
    read = {v: fgraph.inputs.index(v) for node in nodes for v in node.inputs
            if v.owner is None and not isinstance(v, basic.Constant)}
    if variable.owner is None:
        read[variable] = fgraph.inputs.index(variable)

    def value(args):
        values = {v: np.asarray(args[position]) for v, position in read.items()}
        for node in nodes:
            inputs = [values[v] if v in values else v.data for v in node.inputs]
            for destroyed in getattr(node.op, "destroy_map", {}).values():
                # (an op working in place, as an update's c + 1 shared with the
                # index can be, writes over a copy of its own)
                inputs[destroyed[0]] = np.array(inputs[destroyed[0]])
            outputs = [[None] for _ in node.outputs]
            node.op.perform(node, inputs, outputs)
            values.update(zip(node.outputs, (storage[0] for storage in outputs)))
        return values[variable]

    return value


def _linker_of_state(state):
    """A linker of int8store's JAX mode holding ``state`` (unpickled)."""
    linker = object.__new__(type(jax_mode().linker))
    linker.__dict__.update(state)
    return linker


def minibatch_check(node):
    """``check(index)`` for a minibatch node (:class:`~int8store.backend.ops.minibatch.Minibatch`):
    raises unless the rows of minibatch ``index`` lie in the data (JAX would clamp them)."""
    from ..ops.minibatch import check_index, shuffled_epoch_and_index
    from .conversions import sharded_steps
    from .sharding import placed_blocks, sharded_layout

    data = node.inputs[0]
    rows = data.type.shape[0]
    name = data.name or "data"
    if rows is None:
        raise ArgumentError(
            f"{name}: in JAX mode minibatches need data of a static length "
            "(int8store's shared datasets have one)"
        )
    size, stride, batches = node.op.size, node.op.stride, node.op.batches
    layout = sharded_layout(data)
    blocks = placed_blocks(data)
    if layout is not None and stride == size and blocks is not None \
            and blocks.devices == layout[1]:
        def check_rows(index):  # a minibatch: real rows on every device
            blocks.check_minibatch(index, size, name)
    elif layout is not None and stride > 1 and blocks is not None \
            and blocks.devices == layout[1]:
        sharded_steps(node.op, layout[1])  # (refused unless every device takes its part)

        def check_rows(index):  # rows [index * stride, + size): real rows, as on one device
            check_index(index, size, blocks.n_examples, name, stride, node.op.short)
    else:
        if layout is not None:  # checked in one block: each device slices its own
            devices = layout[1]
            (size, stride), rows = sharded_steps(node.op, devices), rows // devices

        def check_rows(index):
            check_index(index, size, rows, name, stride, node.op.short)

    compiled_over = _device_count(blocks)

    def check(index):  # (a shuffled split's index also counts its epochs)
        now = _device_count(placed_blocks(data))
        if now != compiled_over:  # (its minibatches were written for the other layout)
            raise ArgumentError(
                f"{name}: placed over {now} device{'s' if now > 1 else ''} since this function "
                f"was compiled for {compiled_over}, whose minibatches take other rows there: "
                "compile the function again after placing its data (int8store.place)")
        check_rows(index if batches is None else shuffled_epoch_and_index(index, batches, name)[1])

    return check


def _device_count(blocks):
    return 1 if blocks is None else blocks.devices
