"""Augmentation inside the step, from the int8 codes: what it costs a
LeNet5 step, and what it holds on the device.

**Step time**: LeNet5 (the tutorial's, 20 and 50 kernels) at batch 500 on
28x28 images, int8 resident, in C and JAX modes, without augmentation and
with each of ``translate=2``, ``flip``, ``cutout=8`` and
``translate=2,cutout=8`` (:meth:`int8store.SharedDataset.augment`): the
median time a step over ``--rounds`` rounds of ``--steps`` steps, every way
alternated round by round in one process, and its ratio to the same mode
without augmentation. A step's time varies by more than the augmentation
costs, so the augmentation is also timed alone (rows "... alone": the op
compiled by itself on a minibatch of the same images, in the same rounds):
its ratio is to the step without augmentation. Run it again with ``OPENBLAS_NUM_THREADS=1`` for the
one-thread rows.

**Bytes on the device** (``--memory``, JAX mode): what the set and its
augmentation hold, measured from the arrays: the int8 set as placed (its
array's ``nbytes``), the augmentation of one minibatch compiled alone (its
output and temporaries, XLA's ``memory_analysis()``), and, for the record,
how XLA's temporaries of the LeNet5 step differ with augmentation and
without (XLA may fit the augmentation in buffers the step has anyway);
against an airbench-style layout of the same
images built as airbench builds it (``airbench94_muon.py``): the set as
float16 normalised by channel, a flipped copy and a reflect-padded copy
(2 pixels each side), their ``nbytes`` summed. Bytes a pixel are per pixel of
the set (28x28, or 32x32x3 for ``--colour``).

    python bench/augment.py [--rounds 5] [--steps 3] [--modes c jax]
    python bench/augment.py --memory [--colour]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tutorials"), str(HERE)]

import numpy as np  # noqa: E402

from models import build_step  # noqa: E402  (sets floatX to float32)
from synthetic import digit_like_images  # noqa: E402

from int8store import SharedDataset, function_mode, keep_on_device, place, tensor_library  # noqa: E402

AUGMENTATIONS = ["none", "translate=2", "flip", "cutout=8", "translate=2,cutout=8"]
BATCH, EXAMPLES, RATE = 500, 10000, 0.1


def _step(images, labels, mode, augmentation):
    """``run(n)``: n LeNet5 steps in ``mode``, each on an augmented minibatch."""
    train = SharedDataset.from_arrays(images, labels, name="train", dtype="float32")
    if mode == "jax":
        place([train], "jax")
    if augmentation != "none":
        train.augment(augmentation, seed=1)
    params, index, cost, updates, givens = build_step("LeNet5", train, BATCH, RATE,
                                                      augment=augmentation != "none")
    step = tensor_library().function([index], cost, updates=updates, givens=givens,
                                     mode=function_mode(mode))
    if mode == "jax":
        keep_on_device(params, [step])
    batches = train.n_batches(BATCH)

    def run(n):
        for i in range(n):
            train.set_epoch(i // batches)
            step(i % batches)
        return params[0].get_value(borrow=True, return_internal_type=True)

    return run, step, train


def _augmentation_only(images, mode, augmentation):
    """``run(n)``: the augmentation of n minibatches of ``images`` alone (the
    op compiled by itself, on the same int8 minibatch as the step's)."""
    from int8store.training import Augmentation
    from int8store.backend.ops.augment import Augment

    T = tensor_library().tensor
    spec = Augmentation.parse(augmentation)
    codes = (images[:BATCH].reshape(BATCH, -1).astype(np.int16) - 128).astype(np.int8)
    if mode == "jax":
        import jax
        import jax.numpy as jnp

        from int8store.augment.draws import augment

        on_device = jax.device_put(codes)
        compiled = jax.jit(lambda c, k: augment(c, spec, spec.grid(images.shape[1:]), 1,
                                                jnp.uint32(0), k, -128, jnp))

        def run(n):
            for i in range(n):
                out = compiled(on_device, jnp.uint32(i))
            return out

        return run
    symbolic, step = T.matrix(dtype="int8"), T.lscalar()
    op = Augment(spec, spec.grid(images.shape[1:]), 1, -128)
    compiled = tensor_library().function([symbolic, step], op(symbolic, step, 0),
                                         mode=function_mode("c"))

    def run(n):
        for i in range(n):
            out = compiled(codes, i)
        return out

    return run


def step_times(modes, rounds, steps):
    images, labels = digit_like_images(EXAMPLES, seed=0)
    ways = {(mode, a): _step(images, labels, mode, a)[0] for mode in modes for a in AUGMENTATIONS}
    ways.update({(mode, a + " alone"): _augmentation_only(images, mode, a)
                 for mode in modes for a in AUGMENTATIONS[1:]})
    for run in ways.values():
        _wait(run(1))  # compile and warm up
    times = {way: [] for way in ways}
    for round_ in range(rounds):
        for way in (list(ways) if round_ % 2 == 0 else list(reversed(ways))):
            start = time.perf_counter()
            _wait(ways[way](steps))
            times[way].append((time.perf_counter() - start) / steps)
    median = {way: statistics.median(t) for way, t in times.items()}
    return [(mode, a, median[(mode, a)], median[(mode, a)] / median[(mode, "none")])
            for mode, a in ways]


def _wait(value):
    if hasattr(value, "block_until_ready"):
        value.block_until_ready()


def device_bytes(colour):
    """``[(layout, bytes, bytes a pixel)]`` for the same images."""
    import jax
    import jax.numpy as jnp

    if colour:
        rng = np.random.default_rng(0)
        images = rng.integers(0, 256, (EXAMPLES, 32, 32, 3), dtype=np.uint8)
        labels = rng.integers(0, 10, EXAMPLES)
    else:
        images, labels = digit_like_images(EXAMPLES, seed=0)
    pixels = images.size
    analysis = {}
    for augmentation in ("none", "translate=2,flip,cutout=8" if colour else "translate=2,cutout=8"):
        _, step, train = _step(images, labels, "jax", augmentation)
        arguments = [np.int64(0)] + [c.storage[0] for c in step.input_storage[1:]]
        step(0)
        analysis[augmentation] = step.maker.linker.jitted.lower(*arguments).compile() \
            .memory_analysis().temp_size_in_bytes
        held = train.data.get_value(borrow=True, return_internal_type=True).nbytes
        used = augmentation
    working = analysis[used] - analysis["none"]
    alone = _augmentation_alone(used, train)
    # airbench: images.half() / 255, normalised by channel mean and std, NCHW;
    # the flipped copy and the reflect-padded copy kept beside it.
    nchw = jnp.asarray(images.reshape(images.shape[:3] + (-1,))).transpose(0, 3, 1, 2)
    norm = nchw.astype(jnp.float16) / 255
    mean = norm.mean(axis=(0, 2, 3), keepdims=True)
    std = norm.std(axis=(0, 2, 3), keepdims=True)
    norm = (norm - mean) / std
    flipped = norm[..., ::-1]
    padded = jnp.pad(norm, ((0, 0), (0, 0), (2, 2), (2, 2)), mode="reflect")
    jax.block_until_ready((norm, flipped, padded))
    airbench = norm.nbytes + flipped.nbytes + padded.nbytes
    return [("int8store: the int8 set, as placed", held, held / pixels),
            (f"int8store: {used} of one minibatch ({BATCH} examples) compiled alone, its "
             "output and temporaries", alone, alone / pixels),
            ("int8store: the set and that minibatch's augmentation", held + alone,
             (held + alone) / pixels),
            (f"(LeNet5's step with {used} against without: XLA's temporaries differ by "
             f"{working:+,} B)", working, working / pixels),
            ("airbench-style: fp16 normalised + flipped + reflect-padded copies",
             airbench, airbench / pixels)]


def _augmentation_alone(augmentation, train):
    """Bytes XLA gives the augmentation of one minibatch compiled alone (its
    output and temporaries)."""
    import jax
    import jax.numpy as jnp

    from int8store.training import Augmentation
    from int8store.augment.draws import augment

    spec = Augmentation.parse(augmentation)
    grid = spec.grid(train.image_shape)
    codes = jnp.zeros((BATCH, train.n_features), jnp.int8)
    compiled = jax.jit(lambda c, e, k: augment(c, spec, grid, 1, e, k, -128, jnp)).lower(
        codes, jnp.uint32(0), jnp.uint32(0)).compile().memory_analysis()
    return compiled.output_size_in_bytes + compiled.temp_size_in_bytes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--modes", nargs="+", default=["c", "jax"], choices=["c", "jax"])
    parser.add_argument("--memory", action="store_true", help="bytes on the device instead")
    parser.add_argument("--colour", action="store_true", help="with --memory: 32x32x3 images")
    args = parser.parse_args(argv)
    if args.memory:
        import jax

        print(f"device: {jax.devices()[0].device_kind}, {EXAMPLES:,} images")
        print("| layout | bytes | bytes a pixel |")
        print("|---|---:|---:|")
        for layout, size, per_pixel in device_bytes(args.colour):
            print(f"| {layout} | {size:,} | {per_pixel:.3f} |")
        return
    print(f"LeNet5, batch {BATCH}, 28x28, int8 resident; medians of {args.rounds} rounds of "
          f"{args.steps} steps")
    print("| mode | augmentation | ms/step | vs none |")
    print("|---|---|---:|---:|")
    for mode, augmentation, seconds, ratio in step_times(args.modes, args.rounds, args.steps):
        print(f"| {mode} | {augmentation} | {seconds * 1e3:.2f} | {ratio:.4f} |")


if __name__ == "__main__":
    main()
