"""The kernels a training step launches on a GPU, counted on a machine
without one: int8store's step (K = 1, and a step of its K-step loop) beside
the same step in plain JAX (``jax.jit``, and a step of ``lax.scan``), for
the cases of ``bench/steps_per_call.py``.

A small model's step on a GPU is bound by its launches (a few microseconds a
kernel, inside a loop as outside), so the kernels a step launches are the
part of its time a CPU can see: XLA compiles each program for a GPU this
process does not have (JAX's deviceless ahead-of-time compilation: JAX's
CUDA plugin installed, a description of the device, no autotuning), and the
compiled program's thunks are counted: for a one-step call its whole
program, for a loop the loop's body (whether XLA knows the loop's trip
count is shown: a loop that does not know it asks the host after each
trip). int8store builds its functions in the GPU's forms
(:func:`int8store.backend.jax.target.compiling_for`), not XLA:CPU's.
The time itself is ``bench/steps_per_call.py``'s, on a GPU.

Kernels, not time: a cuDNN convolution and a fused ``tanh`` count one each.
XLA's deterministic GPU ops cannot be compiled this way (they need the
device's own GEMM configurations).

    pip install "jax[cuda13]==$(python -c 'import jaxlib; print(jaxlib.__version__)')"
    python bench/gpu_kernels.py [--cases logistic-10 ... lenet5-500] [--steps 100]
        [--forms gpu|cpu] [--target-config FILE]

The default device is an H100 SXM (its description below); ``--target-config``
names a file of XLA's ``GpuTargetConfigProto`` in text for another.
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # (JAX runs here on the CPU; it compiles for the GPU)
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tutorials"), str(HERE)]

import numpy as np  # noqa: E402

import steps_per_call  # noqa: E402  (its models: importing it sets floatX to float32)
from hlo_kernels import KINDS, step_kernels  # noqa: E402
from models import build_step  # noqa: E402
from synthetic import digit_like_images  # noqa: E402

from int8store import SharedDataset, place  # noqa: E402
from int8store.backend.jax.target import compiling_for  # noqa: E402
from int8store.training import steps_function  # noqa: E402

#: An NVIDIA H100 SXM 80GB, as XLA describes a GPU it compiles for (CUDA 13, cuDNN 9).
H100 = """
gpu_device_info {
  threads_per_block_limit: 1024  threads_per_warp: 32
  shared_memory_per_block: 49152  shared_memory_per_core: 233472
  shared_memory_per_block_optin: 232448
  threads_per_core_limit: 2048  core_count: 132  fpus_per_core: 128
  block_dim_limit_x: 2147483647  block_dim_limit_y: 65535  block_dim_limit_z: 65535
  memory_bandwidth: 3352320000000  l2_cache_size: 52428800  clock_rate_ghz: 1.98
  device_memory_size: 84929347584
  cuda_compute_capability { major: 9 }
  registers_per_core_limit: 65536  registers_per_block_limit: 65536
}
platform_name: "CUDA"
dnn_version_info { major: 9 minor: 8 }
runtime_version { major: 13 minor: 0 }
device_description_str: "NVIDIA H100 80GB HBM3"
"""


def gpu_sharding(target_config):
    """A sharding on one compile-only GPU described by ``target_config``."""
    import jax
    from jax.experimental import topologies

    try:
        topology = topologies.get_topology_desc(platform="cuda", target_config=target_config,
                                                topology="1x1x1")
    except Exception as error:  # (no CUDA plugin: JAX says it in its own words)
        raise SystemExit(
            f"gpu_kernels.py: JAX cannot compile for a CUDA GPU here ({error}). Install its "
            "CUDA plugin: pip install \"jax[cuda13]==<your jaxlib version>\"") from None
    mesh = topologies.make_mesh(topology, (1,), ("gpu",))
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())


def shaped_on(sharding):
    """``like(value)``: the value's shape and JAX's dtype of it, on ``sharding``."""
    import jax
    import jax.numpy as jnp

    def like(value):
        value = jnp.asarray(value) if not hasattr(value, "dtype") else value
        return jax.ShapeDtypeStruct(np.shape(value), value.dtype, sharding=sharding)

    return like


# -- the programs --------------------------------------------------------------------------

def programs(case, steps, like, images, labels, forms="gpu"):
    """``{way: (compiled program, seconds to compile)}`` of the case's
    four ways, each compiled for the GPU (int8store's functions built in
    ``forms``: the GPU's, or XLA:CPU's)."""
    model, batch = steps_per_call.CASES[case]
    rate = steps_per_call.RATES[model]
    train = SharedDataset.from_arrays(images, labels, name="train", dtype="float32")
    place([train], "jax")
    _, index, cost, updates, givens = build_step(model, train, batch, rate)
    lowered = {}
    with compiling_for(forms):
        for k in (1, steps):
            call = steps_function([index], cost, updates, givens, steps=k, mode="jax").function
            lowered[("int8store", k)] = call.lower(like=like)
    codes, ys = steps_per_call._plain_data(images, labels)
    plain, step, scan = steps_per_call._plain(model, codes, ys, batch, rate, steps)
    arguments = [like(p) for p in plain], like(codes), like(ys), like(np.int32(0))
    lowered[("plain jax.jit", 1)] = step.lower(*arguments)
    lowered[("plain lax.scan", steps)] = scan.lower(*arguments)
    compiled = {}
    for way, lowering in lowered.items():
        start = time.perf_counter()
        compiled[way] = lowering.compile(), time.perf_counter() - start
    return compiled


def measure(cases, steps, sharding, forms="gpu"):
    like = shaped_on(sharding)
    images, labels = digit_like_images(steps_per_call.EXAMPLES, seed=0)
    rows = []
    for case in cases:
        model, batch = steps_per_call.CASES[case]
        counted = {}
        for way, (compiled, seconds) in programs(case, steps, like, images, labels, forms).items():
            counted[way] = step_kernels(compiled.as_text()) + (seconds,)
        for (how, k), (kinds, trips, seconds) in counted.items():
            plain = counted[("plain jax.jit", 1) if k == 1 else ("plain lax.scan", steps)][0]
            total = sum(kinds.values())
            rows.append((model, batch, how, k, total, kinds, trips, total / sum(plain.values()),
                         seconds))
    return rows


def table(rows):
    head = ("| model | batch | way | steps a call | kernels a step | "
            + " | ".join(KINDS) + " | loop's trip count | vs plain JAX | compile s |")
    lines = [head, "|" + "---|" * 3 + "---:|" * (len(KINDS) + 5)]
    for model, batch, how, k, total, kinds, trips, ratio, seconds in rows:
        counts = " | ".join(str(kinds.get(kind, 0)) for kind in KINDS)
        trip = "-" if k == 1 else (str(trips) if trips else "unknown")
        lines.append(f"| {model} | {batch} | {how} | {k} | {total} | {counts} | {trip} | "
                     f"{ratio:.2f} | {seconds:.1f} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", choices=list(steps_per_call.CASES),
                        default=list(steps_per_call.CASES),
                        help="model-batch pairs (default: all)")
    parser.add_argument("--steps", type=int, default=100,
                        help="steps a call of the loops (default: 100)")
    parser.add_argument("--forms", choices=["gpu", "cpu"], default="gpu",
                        help="int8store's functions built in the GPU's forms (default) or "
                             "XLA:CPU's, to see what those would cost on the GPU")
    parser.add_argument("--target-config", type=Path,
                        help="the GPU, as XLA's GpuTargetConfigProto in text (default: an H100)")
    args = parser.parse_args(argv)
    target = args.target_config.read_text() if args.target_config else H100
    sharding = gpu_sharding(target)
    import jax
    import jaxlib

    gpu = f"the GPU of {args.target_config}" if args.target_config else "an H100"
    print(f"Compiled for {gpu} on this CPU (jax {jax.__version__}, jaxlib {jaxlib.__version__}); "
          f"no autotuning; int8store in the {args.forms.upper()}'s forms.")
    print(table(measure(args.cases, args.steps, sharding, args.forms)))


if __name__ == "__main__":
    main()
