"""Time per training step with the images held as int8 against float32, for the
logistic-regression (batch 600) and LeNet5 (batch 500) tutorials on generated
28x28 data; both storages measured alternately in one run.

Targets on CPU: int8/float32 <= 1.05 for logistic regression, <= 1.03 for LeNet5.

Each round times a few steps of one storage, then of the other (the order
alternating between rounds); the ratio reported is the median over rounds of
int8 time / float32 time, which cancels the machine's slow drifts. Each BLAS
thread setting runs in a process of its own (OpenBLAS reads it at start).

    python bench/step_overhead.py [--rounds 15] [--steps 10] [--threads default 1]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy

HERE = Path(__file__).resolve().parent


def measure(rounds, steps, examples, mode="c"):
    """{model: (float32 s/step, int8 s/step, median ratio)} in this process."""
    sys.path.insert(0, str(HERE))
    from models import MODELS, build
    from synthetic import digit_like_images

    from int8store import SharedDataset
    images, labels = digit_like_images(examples, seed=0)
    results = {}
    for model, (batch_size, rate) in MODELS.items():
        n_batches = examples // batch_size
        train = {}
        for storage in ("float32", "int8"):
            held = "float" if storage == "float32" else storage
            splits = {name: SharedDataset.from_arrays(images, labels, storage=held, name=name)
                      for name in ("train", "valid", "test")}
            if mode == "jax":
                from int8store import place
                place(list(splits.values()), "jax")
            train[storage] = build(model, splits, batch_size, rate, mode=mode)[1]
            for step in range(3):  # warm up
                cost = train[storage](step % n_batches)
            float(numpy.asarray(cost))  # (JAX: done before another's timing starts)
        times = {"float32": [], "int8": []}
        for round_ in range(rounds):
            for storage in (("float32", "int8") if round_ % 2 == 0 else ("int8", "float32")):
                start = time.perf_counter()
                for step in range(steps):
                    cost = train[storage](step % n_batches)
                float(numpy.asarray(cost))  # JAX dispatches asynchronously: wait for the last step
                times[storage].append((time.perf_counter() - start) / steps)
        ratios = [i / f for i, f in zip(times["int8"], times["float32"])]
        results[model] = (statistics.median(times["float32"]), statistics.median(times["int8"]),
                          statistics.median(ratios))
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=10, help="steps per storage per round")
    parser.add_argument("--examples", type=int, default=6000)
    parser.add_argument("--threads", nargs="+", default=["default", "1"],
                        help="BLAS thread settings to measure ('default' leaves it to OpenBLAS)")
    parser.add_argument("--mode", default="c", choices=["c", "jax"],
                        help="int8store's mode: the library's C backend, or JAX")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        results = measure(args.rounds, args.steps, args.examples, args.mode)
        from int8store.backend import activate
        print(json.dumps({"backend": activate().describe(), "results": results}))
        return
    sys.path.insert(0, str(HERE))
    from blas_threads import blas_environment
    from models import MODELS

    rows = []
    for threads in args.threads:
        env = blas_environment(threads)
        command = [sys.executable, __file__, "--worker", "--rounds", str(args.rounds),
                   "--steps", str(args.steps), "--examples", str(args.examples), "--mode", args.mode]
        output = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
        report = json.loads(output.splitlines()[-1])
        backend = report["backend"]
        for model, (float32, int8, ratio) in report["results"].items():
            rows.append((model, MODELS[model][0], threads, float32, int8, ratio))
    print(f"CPU, {backend}, mode {args.mode!r}, {os.cpu_count()} cores; medians of "
          f"{args.rounds} alternating rounds of {args.steps} steps per storage")
    print(f"{'model':20} {'batch':>5} {'BLAS threads':>12} {'float32 ms/step':>16} "
          f"{'int8 ms/step':>13} {'int8/float32':>13}")
    for model, batch, threads, float32, int8, ratio in rows:
        print(f"{model:20} {batch:>5} {threads:>12} {1000 * float32:>16.3f} {1000 * int8:>13.3f} "
              f"{ratio:>13.3f}")


if __name__ == "__main__":
    main()
