"""Data parallelism over several devices: examples per second and int8 bytes
per device for 1, 2, 4 and 8 devices, with the scaling efficiency
(speed-up / devices), for the logistic-regression and LeNet5 tutorials'
models in JAX mode on generated 28x28 data.

Each measurement runs in a fresh process, the device counts interleaved
round by round, the median kept. On the CPU the devices are forced
(``XLA_FLAGS=--xla_force_host_platform_device_count=8``, every process
alike) and share the machine's cores: the table then measures the overhead
of splitting, not a speed-up; on a machine with several GPUs the same
command measures the real thing.

    python bench/data_parallel.py [--rounds 3] [--steps 20] [--examples 12000]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEVICE_COUNTS = (1, 2, 4, 8)
#: model -> global batch size (a multiple of 8; LeNet5's classic 500 is not)
BATCHES = {"logistic regression": 600, "LeNet5": 480}


def child(model, devices, steps, examples):
    """One measurement, in this process: prints a JSON line."""
    sys.path[:0] = [str(HERE.parent / "tutorials"), str(HERE)]
    import jax

    from models import build
    from synthetic import digit_like_images
    from int8store import SharedDataset, keep_on_device, place

    images, labels = digit_like_images(examples, seed=0)
    splits = {name: SharedDataset.from_arrays(images, labels, name=name, dtype="float32")
              for name in ("train", "valid", "test")}
    place([splits["train"]], "jax", devices=devices)
    batch = BATCHES[model]
    params, step = build(model, splits, batch, 0.1, mode="jax", n_out=10)
    keep_on_device(params, [step], devices=devices)
    train = splits["train"]
    batches = train.n_batches(batch)
    for index in range(3):  # compile and warm up
        float(step(index % batches))
    start = time.perf_counter()
    for index in range(steps):
        cost = step(index % batches)
    float(cost)  # waits for the last step
    seconds = time.perf_counter() - start
    shards = train.data.container.storage[0].addressable_shards
    print(json.dumps({"examples_per_s": steps * batch / seconds,
                      "bytes_per_device": shards[0].data.nbytes,
                      "platform": jax.devices()[0].platform, "jax": jax.__version__}))


def measure(model, devices, steps, examples):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    done = subprocess.run([sys.executable, __file__, "--child", model, str(devices),
                           "--steps", str(steps), "--examples", str(examples)],
                          capture_output=True, text=True, env=env, timeout=1200)
    if done.returncode:
        raise SystemExit(f"{model} on {devices} devices failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--examples", type=int, default=12000)
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "DEVICES"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child[0], int(args.child[1]), args.steps, args.examples)
    from int8store.backend import activate

    api = activate()
    results = {(m, n): [] for m in BATCHES for n in DEVICE_COUNTS}
    for _ in range(args.rounds):  # interleaved: drift affects every count alike
        for model in BATCHES:
            for devices in DEVICE_COUNTS:
                results[model, devices].append(measure(model, devices, args.steps, args.examples))
    first = results[next(iter(results))][0]
    print(f"{api.NAME} {api.VERSION}, JAX {first['jax']} ({first['platform']}), "
          f"{os.cpu_count()} cores; {args.examples:,} training images of 28x28, "
          f"median of {args.rounds} interleaved rounds of {args.steps} steps, each in a fresh process")
    print(f"{'model':<20} {'batch':>5} {'devices':>7} {'examples/s':>11} {'speed-up':>8} "
          f"{'efficiency':>10} {'int8 bytes/device':>17}")
    for model, batch in BATCHES.items():
        base = statistics.median(r["examples_per_s"] for r in results[model, 1])
        for devices in DEVICE_COUNTS:
            rate = statistics.median(r["examples_per_s"] for r in results[model, devices])
            print(f"{model:<20} {batch:>5} {devices:>7} {rate:>11,.0f} {rate / base:>8.2f} "
                  f"{rate / base / devices:>10.2f} {results[model, devices][0]['bytes_per_device']:>17,}")


if __name__ == "__main__":
    main()
