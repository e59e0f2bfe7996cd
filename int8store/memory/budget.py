"""``int8store budget``: will a dataset and a model fit a device, held as int8
or as float32, and with what batch size? (The numbers come from
:mod:`int8store.memory.estimates`.)"""

import math

import numpy as np

from ..codes.labels import class_count
from ..codes.vocabulary import check_mode
from ..errors import ArgumentError
from ..runtime.limits import describe_bytes, parse_size
from ..runtime.words import counted
from ..order.batch_size import fitted_batch_size
from .estimates import (accelerator, examples_that_fit, jax_device, max_batch_size, model_memory,
                        device_memory, host_memory, split_bytes, step_estimator, xla_compiles,
                        xla_step_memory)
from .models import MODELS, lenet5_geometry

__all__ = ["dataset_summary", "budget_report"]

_MODES = {"jax": "in JAX mode", "c": "on the C backend"}
_DEFAULTS = {"jax": ", as the tutorials train on an accelerator (--mode c: on the CPU, in "
                   "floatX; --dtype to plan another)",
             "c": ", floatX, as the tutorials train on the C backend (--dtype to plan another)"}


def dataset_summary(dataset):
    """``(counts, image_shape, n_classes, by_image_files)`` of a dataset, as
    ``load_data`` plans it: ``counts`` is ``{split: examples}``;
    ``by_image_files``, whether the shape is the first image file's (the
    others' are checked when read: the images are not decoded here)."""
    from ..plan.splits import plan_splits
    from ..sources import read_source

    source = read_source(dataset)
    by_image_files = source.by_class
    plan = plan_splits(source)
    counts = {name: split.count for name, split in plan.splits.items()}
    n_classes = class_count([plan.labels(name) for name in plan.splits if counts[name]], dataset)
    return counts, tuple(plan.image_shape), n_classes, by_image_files


def budget_report(dataset, model, batch_size=None, device_bytes=None, margin=0.1, devices=1,
                  dtype=None, mode="jax"):
    """The text ``int8store budget`` prints, the model's floats of ``dtype``
    (by default the tutorials': float32 in JAX mode, as on an accelerator;
    floatX on the C backend), its step as ``mode`` runs it ("jax", or "c":
    the C backend on the CPU, one device). ``devices``: a count, or "all"
    that JAX sees. With ``devices`` > 1, the answer
    is per device: each split in blocks of ``ceil(examples / devices)`` rows,
    one per device (as ``int8store.place(..., devices=N)`` lays them), the
    parameters on each, and ``batch_size`` the global minibatch, a
    ``batch_size / devices`` part on each device."""
    if model not in MODELS:
        raise ArgumentError(f"model={model!r}: expected one of {', '.join(MODELS)}")
    counts, image_shape, n_classes, by_image_files = dataset_summary(dataset)
    if model == "lenet5":
        lenet5_geometry(image_shape, source=dataset)  # (images it cannot take, refused by name)
    mode = check_mode(mode)
    if devices == "all":  # (as the tutorials take it: every device JAX sees; C runs on one)
        from ..backend.jax.mode import require_jax

        devices = 1 if mode == "c" else require_jax().device_count()
    devices = int(devices)
    if devices < 1:
        raise ArgumentError(f"devices={devices}: expected 1 or more")
    if devices > 1 and mode == "c":  # (as the tutorials refuse it)
        raise ArgumentError(f"--devices {devices} needs --mode jax: the C backend runs on one "
                            "CPU")
    chosen = dtype
    if not 0 <= margin < 1:
        raise ArgumentError(f"margin={margin!r}: expected a fraction in [0, 1) (--margin)")
    if batch_size is not None and (int(batch_size) != batch_size or batch_size < 1):
        raise ArgumentError(f"batch_size={batch_size!r}: expected a positive integer "
                            "(--batch-size)")
    held = {name: -(-n // devices) for name, n in counts.items()}  # rows a device holds
    # The batch the tutorials take (a cut of the batch asked said in a line below).
    smallest_name, smallest = min(counts.items(), key=lambda item: item[1])
    smallest_split = counted(smallest, f"{smallest_name} example")  # ("1 train example")
    if smallest < devices:
        raise ArgumentError(f"{dataset}: the {smallest_split} "
                            f"{'are' if smallest != 1 else 'is'} too few for a batch over "
                            f"{devices} devices (--devices {devices}): each needs one; use "
                            f"--devices {smallest}{' or fewer' if smallest > 1 else ''}")
    asked, requested = batch_size, batch_size or MODELS[model]
    taken = fitted_batch_size(requested, smallest, devices)
    batch_size = taken.size
    part = batch_size // devices
    if device_bytes is None:
        budget, where = device_memory() if mode == "jax" else host_memory()
        if budget is None and mode == "jax" and jax_device() is not None:
            # JAX on the CPU: the device's memory is this machine's.
            budget, _ = host_memory()
            where = where if budget is None else ("this machine's memory, where JAX runs here; "
                                                  "--device-memory to plan for a GPU")
        if budget is None:
            raise ArgumentError(f"{where}")
    else:
        budget, where = parse_size(device_bytes, "--device-memory"), "given"
    why = ""
    if dtype is None:  # (the float type the tutorials' run takes where this plan is for)
        dtype, why = _float_type(mode, on_this_cpu=device_bytes is None and accelerator() is None)
    usable = int(budget * (1 - margin))
    memory = model_memory(model, part, image_shape, n_classes, dtype, mode)
    step = memory.step
    estimate = step_estimator(model, image_shape, n_classes, dtype, mode)
    device = accelerator() if mode == "jax" else None
    # XLA's own figure wherever JAX mode would compile the step: on a GPU it
    # counts the workspaces a graph cannot show; on the CPU, the layout copies
    # of LeNet5's convolutions (the estimate is 0.87-0.96 of it there).
    compiled_for = jax_device() if mode == "jax" else None
    xla_device = compiled_for if compiled_for is not None and xla_compiles(dtype) else None
    if xla_device is not None:  # the device's own figure: the table's
        step = xla_step_memory(model, part, image_shape, n_classes, dtype)
        scale = step.total / memory.step.total
        estimate = _scaled(estimate, scale)
    total = sum(held.values())
    shape = "x".join(map(str, image_shape))
    each = "" if devices == 1 else " per device"
    lines = [
        f"dataset:  {dataset}: " + ", ".join(f"{n:,} {name}" for name, n in counts.items())
        + f" images of {shape}"
        + (" (the first image's size: convert and load_data check every image's)"
           if by_image_files else "") + f", {counted(n_classes, 'class')}",
        f"device:   {describe_bytes(budget)} ({where}); planning for {describe_bytes(usable)}, "
        f"keeping {margin:.0%} free",
        f"model:    {model}, {memory.parameters:,} parameters "
        f"({describe_bytes(memory.parameter_bytes)}), {memory.neurons:,} activations per "
        "example (the input included)",
        f"step:     {dtype} {_MODES[mode]}" + ("" if chosen else why),
    ]
    if requested > batch_size:
        if taken.largest is None:
            why, over = f"not a multiple of the {devices} devices", ""
        else:
            why = f"more than the {smallest_split}"
            over = "" if taken.devices is None else f", a multiple of the {devices} devices"
        whose = "" if asked is not None else " (the tutorial's batch size)"
        lines.append(f"batch:    {requested:,}{whose} is {why}: the tutorials take batches of "
                     f"{batch_size:,}{over}, planned here")
    if devices > 1:
        lines.append(
            f"devices:  {devices}, each holding 1/{devices} of every split: "
            + ", ".join(f"{n:,} {name}" for name, n in held.items())
            + f" examples (padding included); a minibatch of {batch_size} is {part} on each; "
            "the figures below are per device")
    lines += [
        f"batch {part}{each}: rule of thumb (neurons x batch + parameters) x 2 x "
        f"{np.dtype(dtype).itemsize} bytes = "
        f"{describe_bytes(memory.rule_of_thumb)}; finer estimate of the compiled step "
        f"{describe_bytes(memory.step.total)} (arguments "
        f"{describe_bytes(memory.step.arguments)}, outputs "
        f"{describe_bytes(memory.step.outputs)}, temporaries "
        f"{describe_bytes(memory.step.temporaries)}"
        + (f", scratch its convolutions keep between calls {describe_bytes(memory.step.scratch)}"
           if memory.step.scratch else "") + ")",
    ]
    if xla_device is not None:
        lines.append(
            f"XLA's own figure for the step compiled for the {xla_device.device_kind}: "
            f"{describe_bytes(step.total)} ({scale:.2f}x the estimate"
            + (", its workspaces included" if device is not None else "")
            + "), used below, and the estimate scaled by it at other batch sizes")
    if mode == "jax" and (device is None or xla_device is None):
        from ..backend import activate

        x64 = (f"with floatX=float64 ({activate().NAME.upper()}_FLAGS=floatX=float64), which "
               "turns JAX's 64-bit mode on")
        where = (f"{x64}, and it asks XLA for float64" if device is not None else
                 f"where the GPU is, {x64}, and it asks XLA for it"
                 if compiled_for is not None and not xla_compiles(dtype) else
                 "where the GPU is, and it asks XLA for it")
        measured = (" (LeNet5's step took 1.9-2.0x the finer estimate on an H200)"
                    if model == "lenet5" else "")  # (its convolutions'; not measured for others)
        lines.append("on a GPU the step also holds workspaces a graph cannot show"
                     f"{measured}: run budget {where}")
    lines.append("")
    rows = [("storage", f"data{each} (all splits)", f"model at batch {part}", "fits",
             f"largest batch{each} beside the data", f"examples that fit{each} beside the model")]
    cap = max(1, smallest // devices)  # (the largest batch the tutorials take, a device's part)
    capped = False
    classic = "float64" if np.dtype(dtype) == np.float64 else "float32"  # (floatX's)
    for kind in ("int8", classic):
        data = split_bytes(total, image_shape, classic)[kind]
        room = usable - data
        largest = max_batch_size(estimate, room, margin=0, limit=cap) if room > 0 else 0
        capped |= largest == cap
        beside = examples_that_fit(usable, image_shape, reserved=step.total, classic=classic)[kind]
        rows.append((kind, describe_bytes(data), describe_bytes(step.total),
                     "yes" if data + step.total <= usable else "no",
                     f"{largest:,}" + ("*" if largest == cap else ""), f"{beside:,}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
              for r in rows]
    if capped:
        lines.append(f"* all of the smallest split ({smallest_split}"
                     + (f", {cap:,} a device" if devices > 1 else "")
                     + "): the tutorials take no larger batch, and a larger one may fit")
    if devices == 1 and split_bytes(total, image_shape)["int8"] + step.total > usable:
        lines.append(_streamed(usable, step.total, estimate, len(counts), image_shape,
                               batch_size))
    return "\n".join(lines)


def _float_type(mode, on_this_cpu):
    """``(dtype, why)``: the float type a tutorial's run takes (see
    :func:`int8store.backend.jax.run_setup.set_up_run`): floatX on the C
    backend, where the user named it, and in JAX mode on this machine's CPU;
    float32 on an accelerator."""
    from ..backend import activate

    floatx = activate().lib.config.floatX
    if mode == "c":
        return floatx, _DEFAULTS["c"]
    from ..backend.jax.run_setup import user_named_float_type

    named = user_named_float_type()
    if named is not None:
        return floatx, f", floatX as named in {named}, which the tutorials follow"
    if on_this_cpu:
        return floatx, (", floatX, as the tutorials train in JAX mode on this machine's CPU "
                        "(--device-memory to plan for an accelerator, in float32; --dtype to "
                        "plan another)")
    return "float32", _DEFAULTS["jax"]


def _streamed(usable, step_bytes, estimate, n_splits, image_shape, batch_size):
    """The line for a set that does not fit whole: the ``--max-device-bytes``
    that streams it beside the step, at ``batch_size`` or else at the
    largest batch that leaves room for a shard of one batch. A stream holds
    one shard of each split on the device, and while it swaps one in, the
    shard it replaces too: ``n_splits + 1`` shards."""
    from ..order.shard_size import LABEL_BYTES, shard_size_for

    shards = n_splits + 1
    row_bytes = math.prod(image_shape)
    shard_bytes = max(0, usable - step_bytes) // shards
    examples = shard_size_for(shard_bytes, row_bytes, batch_size)
    smaller = ""
    if examples < 1:
        planned, batch_size = batch_size, max_batch_size(
            lambda b: estimate(b) + shards * b * (row_bytes + LABEL_BYTES), usable, margin=0,
            limit=batch_size)
        if batch_size < 1 and estimate(1) > usable:  # (not the data: the model)
            return (f"streamed: none: the step alone, at a batch of 1, takes "
                    f"{describe_bytes(estimate(1))}, more than the "
                    f"{describe_bytes(usable)} planned for: a larger device or a smaller model")
        if batch_size < 1:
            return ("streamed: not even one example of each split fits beside the step: "
                    "a larger device")
        shard_bytes = max(0, usable - estimate(batch_size)) // shards
        examples = shard_size_for(shard_bytes, row_bytes, batch_size)
        smaller = (f" with --batch-size {batch_size:,} (beside the step at {planned:,}, no "
                   "shard of a whole batch fits)")
    return (f"streamed: the int8 data does not fit whole; --max-device-bytes "
            f"{describe_bytes(shard_bytes)} ({shard_bytes}){smaller} streams each split in "
            f"shards of {counted(examples, 'example')} beside the step (a shard of each of the "
            f"{n_splits} splits on the device, and one more while a shard is swapped in)")


def _scaled(estimate, scale):
    """``estimate`` times ``scale`` (rounded up), its ``guess`` scaled too."""
    def scaled(batch_size):
        return math.ceil(estimate(batch_size) * scale)

    scaled.guess = lambda usable: estimate.guess(usable / scale)
    return scaled
