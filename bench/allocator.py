"""glibc's allocator as int8store leaves it after loading, against as glibc
keeps it: a bundled tutorial run whole, each way a fresh process, the two
alternated (ABBA...).

"kept" is int8store's default (:func:`int8store.runtime.allocator.keep_large_blocks`:
the mmap threshold at 32 MiB, the trim threshold at 1 GiB); "glibc's" runs
with ``MALLOC_TOP_PAD_=131072``, glibc's own value, a variable by which a
user tunes the allocator and at which int8store leaves it alone. Per run:
the whole process's seconds, its system seconds (page faults count there),
its peak resident memory (``/usr/bin/time``-like, from ``wait4``).

    python bench/allocator.py --dataset mnist.pkl.gz [--tutorial convolutional_mlp.py]
        [--epochs 1] [--rounds 2] [--floatx float32]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
WAYS = {"kept": {}, "glibc's": {"MALLOC_TOP_PAD_": "131072"}}


def run(way, args):
    env = dict(os.environ, **WAYS[way])
    env[f"{_stack().upper()}_FLAGS"] = f"floatX={args.floatx}"
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, str(HERE / "tutorials" / args.tutorial),
                                "--dataset", args.dataset, "--epochs", str(args.epochs)],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if status:
        raise SystemExit(f"{args.tutorial} ({way}) failed:\n{output[-2000:]}")
    errors = [line for line in output.splitlines() if "error" in line]
    return {"seconds": seconds, "system": usage.ru_stime, "peak": usage.ru_maxrss * 1024,
            "errors": errors}


def _stack():
    sys.path.insert(0, str(HERE))
    from int8store.backend import activate

    return activate().NAME


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--tutorial", default="convolutional_mlp.py",
                        choices=("logistic_sgd.py", "mlp.py", "convolutional_mlp.py"))
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--floatx", choices=("float32", "float64"), default="float32")
    args = parser.parse_args(argv)
    args.dataset = str(Path(args.dataset).resolve()) if Path(args.dataset).exists() \
        else args.dataset
    runs = {way: [] for way in WAYS}
    for round_ in range(args.rounds):
        for way in (list(WAYS) if round_ % 2 == 0 else list(WAYS)[::-1]):
            runs[way].append(run(way, args))
    print(f"{args.tutorial}, {args.epochs} epoch(s), floatX {args.floatx}, {_stack()}; "
          f"medians of {args.rounds} fresh processes, alternated; OPENBLAS_NUM_THREADS="
          + os.environ.get("OPENBLAS_NUM_THREADS", "default"))
    print("| allocator | whole process, s | system, s | peak RSS, MB | each run, s |")
    print("|---|---:|---:|---:|---|")
    for way, results in runs.items():
        seconds, system, peak = (statistics.median(r[key] for r in results)
                                 for key in ("seconds", "system", "peak"))
        print(f"| {way} | {seconds:.1f} | {system:.2f} | {peak / 1e6:.0f} | "
              + ", ".join(f"{r['seconds']:.1f}" for r in results) + " |")
    same = all(r["errors"] == runs["kept"][0]["errors"] for rs in runs.values() for r in rs)
    print(f"the same error lines in every run: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
