"""PyTensor against Aesara: the time of a training step (int8 images,
floatX=float32, the C backend) of the tutorials' two models, each library in
its own environment, interleaved: every round runs one fresh process per
library (the order alternating between rounds), each timing its steps as
bench/step_overhead.py does. The ratio reported is the median over rounds of
PyTensor's time over Aesara's. Target (issue 17): PyTensor's LeNet5 step at
most 1.3 x Aesara's.

    python bench/backends.py [--pytensor .venv-pytensor/bin/python]
        [--aesara .venv-aesara/bin/python] [--rounds 5] [--threads default 1]
"""

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path

from blas_threads import blas_environment

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def step_times(python, backend, threads, steps):
    """``(backend description, {model: int8 seconds a step})`` from one fresh process."""
    env = blas_environment(threads, INT8STORE_BACKEND=backend)
    output = subprocess.run([python, str(HERE / "step_overhead.py"), "--worker", "--rounds", "3",
                             "--steps", str(steps)], env=env, check=True, capture_output=True,
                            text=True).stdout
    report = json.loads(output.splitlines()[-1])
    return report["backend"], {model: int8 for model, (_, int8, _) in report["results"].items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pytensor", default=str(ROOT / ".venv-pytensor/bin/python"))
    parser.add_argument("--aesara", default=str(ROOT / ".venv-aesara/bin/python"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", nargs="+", default=["default", "1"])
    args = parser.parse_args(argv)
    pythons = {"pytensor": args.pytensor, "aesara": args.aesara}
    print("| model | BLAS threads | PyTensor ms/step | Aesara ms/step | PyTensor/Aesara |")
    print("|---|---|---:|---:|---:|")
    described = {}
    for threads in args.threads:
        times = {"pytensor": [], "aesara": []}
        for round_ in range(args.rounds):
            order = ("pytensor", "aesara") if round_ % 2 == 0 else ("aesara", "pytensor")
            for backend in order:
                described[backend], result = step_times(pythons[backend], backend, threads,
                                                        args.steps)
                times[backend].append(result)
        for model in times["pytensor"][0]:
            pytensor = [r[model] for r in times["pytensor"]]
            aesara = [r[model] for r in times["aesara"]]
            ratio = statistics.median(p / a for p, a in zip(pytensor, aesara))
            print(f"| {model} | {threads} | {1000 * statistics.median(pytensor):.2f} "
                  f"| {1000 * statistics.median(aesara):.2f} | {ratio:.2f} |")
    print(f"medians of {args.rounds} rounds, each a fresh process per library, alternating; "
          f"{os.cpu_count()} cores")
    for backend, description in described.items():
        print(f"{backend}: {description}")


if __name__ == "__main__":
    main()
