"""Training from a store larger than memory should be: the tutorials on a
generated store of more than 1 GB, streamed from the file with
``--max-device-bytes 16777216``, against the same run with the store loaded
whole, each under ``/usr/bin/time -v`` in a fresh process.

Prints, per tutorial: peak resident memory of the streamed run, of the
loaded run, and of the baseline (the same run on a store of 600 images a
split: the process itself, its libraries and model, and no data to speak of); the seconds
each took; and whether their error lines are identical (the same order and
batches: no seed).

    python bench/big_store.py [--examples 1300000] [--keep DIR]
        [--tutorials logistic lenet5] [--lenet5-kernels 4 8] [--mode c|jax]
        [--max-memory SIZE]

``--max-memory SIZE`` streams under that memory ceiling (shards of an eighth
of it) instead of in shards of 16 MiB; ``--mode jax`` runs the tutorials in
JAX mode, where on a CPU the device's copies of the shards are host memory
too, and the baseline row also gives the process that only imports JAX and
int8store and places one array.
"""

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TUTORIALS = HERE.parent / "tutorials"
sys.path.insert(0, str(HERE))

from scratch import scratch_folder  # noqa: E402 (bench/ on the path first)

SHARD_BYTES = 16 << 20
EVALUATION = 10_000  # validation and test examples


def write_store(path, train, evaluation=EVALUATION, seed=0):
    """A store of ``train`` generated 28x28 training images, and ``evaluation``
    each for validation and test (generated 100,000 at a time; the generator holds
    them all before writing, the store's reader never does)."""
    from synthetic import digit_like_images

    from int8store import quantize
    from int8store.store.writer import StoreWriter

    counts = {"train": train, "valid": evaluation, "test": evaluation}
    codes, labels, encoding = {}, {}, None
    for i, (name, n) in enumerate(counts.items()):
        parts = [digit_like_images(min(100_000, n - start), seed=(seed, i, start))
                 for start in range(0, n, 100_000)]
        labels[name] = np.concatenate([p[1] for p in parts])
        codes[name] = []
        for images, _ in parts:
            part, encoding = quantize(images)  # uint8: code = pixel - 128, the same for all
            codes[name].append(part)
    with StoreWriter(path, encoding, (28, 28), labels, source="bench/big_store.py",
                     force=True) as writer:
        for name, parts in codes.items():
            while parts:
                writer.append(name, parts.pop(0))
    return path


def run(tutorial, dataset, extra):
    """``(peak RSS bytes, seconds, error lines)`` of one tutorial run."""
    script = {"logistic": "logistic_sgd.py", "lenet5": "convolutional_mlp.py"}[tutorial]
    command = ["/usr/bin/time", "-v", sys.executable, str(TUTORIALS / script), "--dataset",
               str(dataset), "--epochs", "1", "--save-model", ""] + extra
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1)) * 1024
    errors = [line for line in done.stdout.splitlines() if "error" in line]
    return peak, seconds, errors


def imports_only():
    """Peak RSS bytes of a process that imports JAX and int8store, sets up
    the library and places one array: what JAX mode costs before any data."""
    script = ("import jax, jax.numpy as jnp, int8store\n"
              "from int8store.backend import activate\n"
              "activate()\njnp.zeros(3).block_until_ready()")
    done = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-c", script],
                          capture_output=True, text=True, check=True)
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1)) * 1024


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1_300_000, help="training images")
    parser.add_argument("--keep", type=Path, help="write the stores here and keep them")
    parser.add_argument("--tutorials", nargs="+", default=["logistic", "lenet5"],
                        choices=["logistic", "lenet5"])
    parser.add_argument("--lenet5-kernels", nargs=2, type=int, default=[4, 8], metavar="N",
                        help="LeNet5's kernels per layer (the tutorial's --nkerns; default "
                             "%(default)s, fewer than its 20 50, so that an epoch of 1.3 "
                             "million images takes minutes on two cores)")
    parser.add_argument("--mode", choices=["c", "jax"], default="c", help="the tutorials' --mode")
    parser.add_argument("--max-memory", metavar="SIZE",
                        help="stream under this ceiling instead of in shards of 16 MiB")
    args = parser.parse_args(argv)
    folder = args.keep or Path(scratch_folder("int8store-big-"))
    folder.mkdir(parents=True, exist_ok=True)
    big, small = folder / "big.h5", folder / "small.h5"
    for path, n, evaluation in ((big, args.examples, EVALUATION), (small, 600, 600)):
        if not path.exists():
            write_store(path, n, evaluation)
    print(f"store: {big.stat().st_size:,} bytes ({args.examples:,} training images of 28x28, "
          f"{EVALUATION:,} each for validation and test); baseline store: "
          f"{small.stat().st_size:,} bytes; one epoch each, "
          + (f"streamed under --max-memory {args.max_memory}" if args.max_memory
             else f"shards of {SHARD_BYTES:,} bytes") + f", --mode {args.mode}")
    if args.mode == "jax":
        print(f"importing JAX and int8store, one array placed: {imports_only() / 1e6:,.0f} MB "
              "peak RSS")
    print("| tutorial | run | peak RSS (MB) | over baseline (MB) | seconds | errors |")
    print("|---|---|---:|---:|---:|---|")
    for tutorial in args.tutorials:
        extra = ["--nkerns", *map(str, args.lenet5_kernels)] if tutorial == "lenet5" else []
        extra += ["--mode", args.mode]
        streamed = (["--max-memory", args.max_memory] if args.max_memory
                    else ["--max-device-bytes", str(SHARD_BYTES)])
        baseline = run(tutorial, small, extra + streamed)
        results = {"streamed from the file": run(tutorial, big, extra + streamed),
                   "loaded whole": run(tutorial, big, extra)}
        same = results["streamed from the file"][2] == results["loaded whole"][2]
        name = tutorial + (f" (--nkerns {' '.join(map(str, args.lenet5_kernels))})"
                           if tutorial == "lenet5" else "")
        print(f"| {name} | baseline: 600 images a split | {baseline[0] / 1e6:,.0f} | - "
              f"| {baseline[1]:.0f} | - |")
        for label, (peak, seconds, errors) in results.items():
            print(f"| {name} | {label} | {peak / 1e6:,.0f} | {(peak - baseline[0]) / 1e6:+,.0f} "
                  f"| {seconds:.0f} | {'identical' if same else 'DIFFERENT'}: "
                  f"{errors[-1] if errors else '-'} |")


if __name__ == "__main__":
    main()
