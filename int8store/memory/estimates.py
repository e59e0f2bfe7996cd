"""Will it fit? Bytes of a dataset (int8 against float32), of a model's
training step, the largest batch size for a memory budget, and the device's
memory; also giving the memory of released source arrays back to the system.

A model's memory is read from its graph, by shape inference, without running
it (:mod:`int8store.memory.step_memory`): its parameters, its activations
per example (the "neurons" of the usual rule of thumb), and for a batch size

* the **rule of thumb**, reported as such:
  ``(neurons x batch + parameters) x 2 (data and gradient) x 4 bytes``;
* a **finer estimate** of what the compiled training step holds: its
  arguments (parameters, the int8 minibatch), its outputs (cost, updated
  parameters) and the peak of its temporaries (the minibatch's float copy,
  forward activations kept for the backward pass, gradients, update
  temporaries), in XLA's categories so that ``bench/memory.py`` can set it
  beside XLA's own figure.

    >>> from int8store.memory.estimates import model_memory
    >>> m = model_memory("logistic", 600, (28, 28), 10)
    >>> m.parameters, m.neurons
    (7850, 794)
"""

import math
import numbers
import shutil
import subprocess
from dataclasses import dataclass

import numpy as np

from ..codes.vocabulary import check_mode
from ..errors import ArgumentError, shortened
from ..runtime.allocator import give_back_freed_memory
from ..runtime.limits import parse_size, physical_memory

__all__ = ["memory_table", "give_back_freed_memory", "ModelMemory", "model_memory",
           "rule_of_thumb_bytes", "max_batch_size", "examples_that_fit", "device_memory",
           "host_memory", "split_bytes", "xla_step_memory", "xla_compiles", "accelerator",
           "jax_device"]

#: Bytes of a float32 value: the rule of thumb's 4.
FLOAT32_BYTES = 4
#: The float types a model's memory is estimated in.
FLOAT_TYPES = ("float32", "float64")


def memory_table(splits):
    """A printable table of image bytes per split, as int8 and as float32.

    ``splits`` maps split names to :class:`~int8store.SharedDataset` objects,
    or is what :func:`~int8store.load_data` (or :func:`~int8store.load_streams`)
    returns. A streamed split counts all its examples, and says in how many
    shards it goes to the device.

    Examples
    --------
    >>> from int8store import load_data
    >>> print(memory_table(load_data("digits")))  # doctest: +ELLIPSIS
    split  examples  image  int8 bytes  float32 bytes  int8/float32  held as
    train      1197  8x8        76,608        306,432          0.25  int8
    ...
    """
    given = splits
    if isinstance(splits, (list, tuple)):  # load_data's [(x, y)] or a list of splits
        from ..codes.vocabulary import SPLITS
        splits = {name: split[0].dataset if isinstance(split, tuple) else split
                  for name, split in zip(SPLITS, splits)}
    if not splits or not isinstance(splits, dict) \
            or not all(hasattr(split, "describe_holding") for split in splits.values()):
        raise ArgumentError(f"memory_table: {'no splits' if not splits else shortened(repr(given))}"
                            " to tabulate; expected load_data's result, or a dict of split names "
                            "to splits")
    rows = [("split", "examples", "image", "int8 bytes", "float32 bytes", "int8/float32",
             "held as")]
    totals = [0, 0, 0]
    for name, split in splits.items():
        n = split.n_examples
        int8 = n * math.prod(split.image_shape)
        float32 = FLOAT32_BYTES * int8
        rows.append((name, f"{n}", "x".join(map(str, split.image_shape)), f"{int8:,}",
                     f"{float32:,}", f"{int8 / float32:.2f}", split.describe_holding()))
        totals = [totals[0] + n, totals[1] + int8, totals[2] + float32]
    rows.append(("total", f"{totals[0]}", "", f"{totals[1]:,}", f"{totals[2]:,}",
                 f"{totals[1] / totals[2]:.2f}", ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    right = {1, 3, 4, 5}
    return "\n".join(
        "  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                  for i, (cell, w) in enumerate(zip(row, widths))).rstrip()
        for row in rows
    )


def split_bytes(n_examples, image_shape, classic="float32"):
    """``{"int8": bytes, classic: bytes}`` of a split's images and int32
    labels, held as int8 and as the classic held them (floatX)."""
    pixels = n_examples * math.prod(image_shape)
    return {"int8": pixels + 4 * n_examples,
            classic: np.dtype(classic).itemsize * pixels + 4 * n_examples}


def rule_of_thumb_bytes(neurons, parameters, batch_size, itemsize=FLOAT32_BYTES):
    """``(neurons x batch + parameters) x 2 x itemsize``: values and their
    gradients, for every activation of the batch and every parameter.

    >>> rule_of_thumb_bytes(15_262_696, 138_357_544, 8)  # VGG16, batch 8
    2083672896
    """
    return (neurons * batch_size + parameters) * 2 * itemsize


@dataclass(frozen=True)
class ModelMemory:
    """A model's memory at one batch size (see the module docstring).

    Attributes
    ----------
    model, batch_size
    parameters : int
        Count of parameter values; ``parameter_bytes`` their bytes.
    neurons : int
        Activation values per example, the input included.
    rule_of_thumb : int
        Bytes by the rule of thumb.
    step : StepMemory
        The finer estimate: ``step.arguments``, ``step.outputs``,
        ``step.temporaries``, ``step.total`` bytes.
    """

    model: str
    batch_size: int
    parameters: int
    parameter_bytes: int
    neurons: int
    rule_of_thumb: int
    step: object

    @property
    def estimate(self):
        """Bytes of the finer estimate."""
        return self.step.total


def graph_counts(layers, params):
    """``(neurons per example, parameter count, parameter bytes)`` of symbolic
    ``layers`` (batch first, static shapes; the input included) and ``params``.
    Nothing is compiled or run but shape arithmetic."""
    from ..backend import activate
    from .step_memory import static_sizes

    FunctionGraph = activate().module("graph.fg").FunctionGraph

    fgraph = FunctionGraph(outputs=list(layers), clone=False)
    sizes = static_sizes(fgraph, layers)
    batch = layers[0].type.shape[0]
    neurons = sum(sizes[v] // _itemsize(v) for v in layers) // batch
    count = sum(math.prod(p.type.shape) for p in params)
    return neurons, count, sum(math.prod(p.type.shape) * _itemsize(p) for p in params)


def _itemsize(variable):
    return np.dtype(variable.type.dtype).itemsize


_ESTIMATES = {}
_XLA_FIGURES = {}  # (the device and JAX's 64-bit mode in the key)


def model_memory(model, batch_size, image_shape, n_classes=10, dtype="float32", mode="jax"):
    """The :class:`ModelMemory` of ``model`` ("logistic", "mlp" or
    "lenet5", the tutorials' models) training on ``image_shape`` images in
    batches of ``batch_size``, in ``dtype`` (float32, as the tutorials train on an
    accelerator, or float64, floatX's default on the CPU), as ``mode`` runs
    it: ``"jax"`` (XLA, which schedules for memory: the graph's own order)
    or ``"c"`` (the C backend's virtual machine, whose order holds more); nothing
    is run (a few tenths of a second of compiling without C code)."""
    from .models import MODELS

    if model not in MODELS:
        raise ArgumentError(f"model={model!r}: expected one of {', '.join(MODELS)}")
    if int(batch_size) != batch_size or batch_size < 1:
        raise ArgumentError(f"batch_size={batch_size!r}: expected a positive integer")
    if dtype not in FLOAT_TYPES:
        raise ArgumentError(f"dtype={dtype!r}: expected one of {', '.join(FLOAT_TYPES)}")
    mode = check_mode(mode)
    if isinstance(image_shape, numbers.Integral):
        image_shape = (image_shape,)  # (flat rows of so many values)
    if not (isinstance(image_shape, (tuple, list)) and image_shape
            and all(isinstance(n, numbers.Integral) and n >= 1 for n in image_shape)):
        raise ArgumentError(f"image_shape={image_shape!r}: expected a shape such as (28, 28), "
                            "(32, 32, 3) or (784,)")
    if isinstance(n_classes, bool) or not isinstance(n_classes, numbers.Integral) or n_classes < 1:
        raise ArgumentError(f"n_classes={n_classes!r}: expected 1 or more classes")
    key = (model, int(batch_size), tuple(image_shape), int(n_classes), dtype, mode)
    if key not in _ESTIMATES:
        from ..backend import activate, c_mode
        api = activate()

        from .reference_models import build_step
        from .step_memory import step_memory

        graph = build_step(model, int(batch_size), tuple(image_shape), int(n_classes), dtype)
        neurons, count, nbytes = graph_counts(graph.layers, graph.params)
        # The C backend's rewrites, without generating C code: the same graph.
        compiled = api.function(graph.inputs, graph.outputs, mode=c_mode(api, linker="py"))
        _ESTIMATES[key] = ModelMemory(model, int(batch_size), count, nbytes, neurons,
                                      rule_of_thumb_bytes(neurons, count, int(batch_size),
                                                          np.dtype(dtype).itemsize),
                                      step_memory(compiled, "cvm" if mode == "c" else
                                                  "topological", scratch=mode == "c"))
    return _ESTIMATES[key]


def xla_step_memory(model, batch_size, image_shape, n_classes=10, dtype="float32"):
    """XLA's own figure for :func:`model_memory`'s step (``mode="jax"``),
    compiled by int8store's JAX mode for JAX's default device, as a
    :class:`~int8store.memory.step_memory.StepMemory` (``memory_analysis()``:
    arguments, outputs less what aliases an argument, temporaries). On a
    GPU it counts what a graph cannot show: the workspaces cuDNN and cuBLAS
    get for the algorithms XLA's autotuner picks there (LeNet5's step on
    an H200 at batches of 500 and 2000: 1.9-2.0 times the graph's
    estimate). Compiled, never run: nothing is allocated on the device."""
    from ..backend import activate, function_mode
    from ..backend.jax.mode import require_jax
    from .reference_models import build_step
    from .step_memory import StepMemory

    jax = require_jax()
    model_memory(model, batch_size, image_shape, n_classes, dtype)  # (the arguments checked)
    if not xla_compiles(dtype):
        flags = f"{activate().NAME.upper()}_FLAGS"
        raise ArgumentError(
            f"dtype={dtype!r}: XLA compiles float64 only with JAX's 64-bit mode on, which "
            f"{activate().NAME}'s JAX mode turns on where floatX is float64 "
            f"({flags}=floatX=float64) and off elsewhere; here it would compile float32")
    key = (model, int(batch_size), tuple(image_shape), int(n_classes), dtype,
           str(jax.devices()[0]), bool(jax.config.jax_enable_x64))
    if key not in _XLA_FIGURES:  # (a compilation each: a second or more)
        graph = build_step(model, int(batch_size), tuple(image_shape), int(n_classes), dtype)
        step = activate().function(graph.inputs, graph.outputs, mode=function_mode("jax"))
        shapes = [jax.ShapeDtypeStruct(v.type.shape, v.type.dtype) for v in graph.inputs]
        analysis = step.maker.linker.jitted.lower(*shapes).compile().memory_analysis()
        _XLA_FIGURES[key] = StepMemory(analysis.argument_size_in_bytes,
                                       analysis.output_size_in_bytes
                                       - analysis.alias_size_in_bytes,
                                       analysis.temp_size_in_bytes)
    return _XLA_FIGURES[key]


def xla_compiles(dtype):
    """Whether XLA compiles a step in ``dtype``: float64 only where JAX's
    64-bit mode is on once the library's JAX dispatch is imported (its
    import sets the mode from floatX, whatever ``JAX_ENABLE_X64`` said)."""
    from ..backend import activate
    from ..backend.jax.mode import require_jax

    jax = require_jax()
    activate().module("link.jax.dispatch")  # (as a run in JAX mode imports it)
    return dtype == "float32" or bool(jax.config.jax_enable_x64)


def jax_device():
    """JAX's default device (an accelerator, or the CPU), or None where JAX
    is not installed or fails to start."""
    try:
        import jax
        return jax.devices()[0]
    except Exception:  # noqa: BLE001 - no JAX, a plugin failing: no device to ask
        return None


def accelerator():
    """JAX's default device when it is an accelerator (a GPU, a TPU), else
    None (JAX on the CPU, or no JAX)."""
    device = jax_device()
    return device if device is not None and device.platform != "cpu" else None


def max_batch_size(estimate, budget, margin=0.1, limit=1 << 20):
    """The largest batch size whose ``estimate(batch_size)`` (bytes) fits
    ``budget`` bytes less a safety ``margin`` (a fraction); 0 if none does.

    ``estimate`` grows with the batch size, e.g. :func:`step_estimator`'s.
    The answer fits, and the next size up does not (or is ``limit``).

    >>> max_batch_size(lambda b: 1000 + 10 * b, budget=2000, margin=0)
    100
    >>> max_batch_size(lambda b: 1000 + 10 * b, budget="2kB", margin=0)
    100
    """
    if isinstance(margin, bool) or not isinstance(margin, numbers.Real) or not 0 <= margin < 1:
        raise ArgumentError(f"margin={margin!r}: expected a fraction in [0, 1)")
    if isinstance(budget, str):
        budget = parse_size(budget, "budget")
    elif isinstance(budget, bool) or not isinstance(budget, numbers.Real) \
            or not math.isfinite(budget):
        raise ArgumentError(f"budget={budget!r}: expected bytes (a number, or text such as "
                            "'1GiB')")
    usable = budget * (1 - margin)
    first = estimate(1)
    if isinstance(first, bool) or not isinstance(first, numbers.Real) or math.isnan(first):
        raise ArgumentError(f"estimate(1) gave {first!r}: expected bytes (a number)")
    smallest = 1
    if not first <= usable:
        # A batch of one is a graph of its own (a static size of 1 broadcasts:
        # the MLP's weight gradient is an outer product, not a GEMM updating
        # in place) and may hold more than a batch of two does.
        if limit < 2 or not estimate(2) <= usable:
            return 0
        smallest = 2
    guess = getattr(estimate, "guess", None)
    start = guess(usable) if guess is not None else None
    if start:  # secant steps from next to the answer: each probe may compile a graph
        found = _secant(estimate, usable, max(smallest, min(limit, start)), limit, smallest)
        if found is not None:
            return found
    low, high = smallest, smallest + 1
    while high <= limit and estimate(high) <= usable:  # find a size that does not fit
        low, high = high, high + 2 * (high - low)
    if high > limit:
        return limit if estimate(limit) <= usable else _bisect(estimate, usable, low, limit)
    return _bisect(estimate, usable, low, high)


def step_estimator(model, image_shape, n_classes=10, dtype="float32", mode="jax"):
    """``estimate(batch_size)``: bytes of :func:`model_memory`'s finer
    estimate, with a ``guess(bytes)`` of the largest batch that fits, from
    two sizes: every buffer's size is linear in the batch size, so each step's
    temporaries are too, and their peak is the largest of those lines (the
    scratch the C backend's convolutions keep, bounded by their chunks, is
    taken as it is at the larger size)."""
    def estimate(batch_size):
        return model_memory(model, batch_size, image_shape, n_classes, dtype, mode).estimate

    def guess(usable):
        small, large = (model_memory(model, b, image_shape, n_classes, dtype, mode).step
                        for b in (16, 32))
        if small.ops != large.ops:
            return None
        fixed_small = small.arguments + small.outputs + large.scratch
        fixed_slope = (large.arguments + large.outputs + large.scratch - fixed_small) / 16
        best = None
        for low, high in zip(small.profile, large.profile):
            slope = fixed_slope + (high - low) / 16
            base = fixed_small + low - 16 * slope
            if slope > 0:
                fit = int((usable - base) // slope)
                best = fit if best is None else min(best, fit)
        return max(1, best) if best is not None else None

    estimate.guess = guess
    return estimate


def _secant(estimate, usable, size, limit, smallest=1, steps=8):
    """The answer of :func:`max_batch_size` reached by secant steps from
    ``size`` (``smallest`` or more), or None if they do not settle."""
    previous = None
    for _ in range(steps):
        value = estimate(size)
        if value <= usable and (size >= limit or estimate(size + 1) > usable):
            return size
        if value > usable and size > smallest and estimate(size - 1) <= usable:
            return size - 1
        slope = ((value - previous[1]) / (size - previous[0])
                 if previous and size != previous[0] and value != previous[1] else value / size)
        previous = (size, value)
        step = int((usable - value) // slope) if slope > 0 else 0
        size = max(smallest, min(limit, size + (step or (1 if value <= usable else -1))))
    return None


def _bisect(estimate, usable, low, high):
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if estimate(middle) <= usable else (low, middle)
    return low


def examples_that_fit(budget, image_shape, reserved=0, classic="float32"):
    """``{"int8": n, classic: n}``: how many examples (images and labels) fit
    in ``budget`` bytes (or text such as ``"1GiB"``, as :func:`max_batch_size`
    takes) beside ``reserved`` ones (the model's).

    >>> examples_that_fit("1MiB", (28, 28))
    {'int8': 1330, 'float32': 333}
    """
    if isinstance(budget, str):
        budget = parse_size(budget, "budget")
    free = max(0, budget - reserved)
    one = split_bytes(1, image_shape, classic)
    return {kind: free // size for kind, size in one.items()}


def host_memory():
    """``(bytes, where)`` of this machine's physical memory, where the C
    backend's step runs; ``(None, why)`` where the system does not say."""
    physical = physical_memory()
    if physical is None:
        return None, "the system does not say its memory: give --device-memory"
    return physical, "this machine's memory, where the C backend runs"


def device_memory():
    """``(bytes, where)`` of the accelerator's memory when it can be asked:
    JAX's ``memory_stats()`` of its default device (if JAX is installed and
    sees an accelerator), else ``nvidia-smi``; ``(None, why)`` otherwise."""
    device = accelerator()
    try:
        stats = device.memory_stats() if device is not None else None
        if stats and stats.get("bytes_limit"):
            return int(stats["bytes_limit"]), f"JAX {device.device_kind} memory_stats()"
    except Exception:  # noqa: BLE001 - a plugin failing to say: ask elsewhere
        pass
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=10, check=True).stdout
            return int(out.split()[0]) * (1 << 20), "nvidia-smi (first GPU)"
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            pass
    return None, ("no accelerator found (JAX on the CPU, no nvidia-smi): give --device-memory, "
                  "or --mode c to plan for this machine's CPU")
