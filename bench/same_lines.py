"""The same lines, however the data is held and however the run is stopped:
the LeNet5 tutorial in JAX mode (on a GPU when JAX sees one), each run a
fresh process,

* held whole (the reference);
* streamed, in shards of ``--max-device-bytes``;
* SIGKILLed once it has printed ``--kill-after`` validation lines (2 or
  more), then resumed from its checkpoint (``--resume``), the one written
  after the validation line before;

and whether each printed the held-whole run's error lines and ended with
its parameters bit for bit (the checkpoints' ``param_*`` arrays). On a CPU
the promises hold by construction; on a GPU they rest on deterministic GPU
ops (the tutorials' default there): give ``--no-deterministic`` after
``--`` to see them without. Exit status 1 when a promise is broken.

    python bench/same_lines.py [--dataset mnist.pkl.gz] [--epochs 20]
        [--max-device-bytes 16777216] [--kill-after 5] [-- TUTORIAL OPTIONS]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

LENET5 = Path(__file__).resolve().parent.parent / "tutorials" / "convolutional_mlp.py"


def tutorial(arguments, checkpoint, kill_after=None, limit=3600):
    """The error lines a run prints and its seconds; with ``kill_after``,
    SIGKILLed once it has printed that many validation lines. A run still
    going after ``limit`` seconds is killed and reported."""
    command = [sys.executable, str(LENET5), "--mode", "jax", "--save-model", "",
               "--checkpoint", str(checkpoint)] + arguments
    started = time.perf_counter()
    expired = threading.Event()
    # stderr to a file, not a pipe read at the end: a long log (XLA's, on a
    # GPU) cannot fill the pipe and stall the run.
    with tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
        watchdog = threading.Timer(limit, lambda: (expired.set(), process.kill()))
        watchdog.start()
        try:
            lines, validations = [], 0
            for line in process.stdout:
                if "error" in line:
                    lines.append(line.rstrip("\n"))
                    validations += "validation error" in line
                if kill_after is not None and validations == kill_after:
                    process.kill()
                    break
            lines += [line.rstrip("\n") for line in process.stdout if "error" in line]
            process.wait()
        finally:
            watchdog.cancel()
            process.stdout.close()
        stderr.seek(0)
        errors = stderr.read()
    if expired.is_set():
        sys.exit(f"{' '.join(command)}: still running after {limit} s, killed:\n{errors}")
    if kill_after is None and process.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{errors}")
    return lines, time.perf_counter() - started


def parameters(path):
    with np.load(path, allow_pickle=False) as held:
        return [held[name] for name in sorted(held.files) if name.startswith("param_")]


def same_bits(a, b):
    return len(a) == len(b) and all(x.dtype == y.dtype and x.tobytes() == y.tobytes()
                                    for x, y in zip(a, b))


def runs(args, folder):
    """The four runs, their checkpoints in ``folder``: the table's rows, and
    the lines each printed."""
    common = ["--dataset", args.dataset, "--epochs", str(args.epochs)] + args.extra
    whole, whole_s = tutorial(common, folder / "whole.npz")
    if sum("validation error" in line for line in whole) <= args.kill_after:
        sys.exit(f"--kill-after {args.kill_after}: the run prints fewer validation lines; "
                 "give more --epochs")
    streamed, streamed_s = tutorial(common + ["--max-device-bytes", str(args.max_device_bytes)],
                                    folder / "streamed.npz")
    killed, killed_s = tutorial(common, folder / "run.npz", kill_after=args.kill_after)
    resumed, resumed_s = tutorial(common + ["--resume", str(folder / "run.npz")],
                                  folder / "run.npz")
    before = len(whole) - len(resumed)  # the lines printed before the checkpoint resumed from
    reference = parameters(folder / "whole.npz")
    rows = [("held whole", True, True, whole_s),
            (f"streamed, shards of {args.max_device_bytes:,} bytes", streamed == whole,
             same_bits(parameters(folder / "streamed.npz"), reference), streamed_s),
            (f"killed after validation {args.kill_after}, then resumed",
             0 < before <= len(killed) and killed[:before] + resumed == whole,
             same_bits(parameters(folder / "run.npz"), reference), killed_s + resumed_s)]
    return rows, {"held whole": whole, "streamed": streamed, "resumed": resumed}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="mnist.pkl.gz")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--max-device-bytes", type=int, default=16 * 2**20)
    parser.add_argument("--kill-after", type=int, default=5,
                        help="validation lines printed before the kill")
    parser.add_argument("extra", nargs="*", help="after --: more options for the tutorial")
    args = parser.parse_args(argv)
    if args.kill_after < 2:  # (with 1 the resumed run found no checkpoint and "failed")
        parser.error(f"--kill-after {args.kill_after}: give 2 or more: the run is killed as it "
                     "prints that validation line, before its checkpoint is written, and "
                     "resumes from the one written after the line before")
    with tempfile.TemporaryDirectory(prefix="int8store-same-lines-") as folder:
        rows, printed = runs(args, Path(folder))
    import jax

    from int8store.backend import activate

    device = jax.devices()[0]
    print(f"LeNet5, JAX mode, {args.epochs} epochs of {args.dataset} "
          f"{' '.join(args.extra)}".rstrip()
          + f"; {device.platform} ({device.device_kind}); {activate().describe()}")
    print("| run | the held-whole lines | its parameters, bit for bit | seconds |")
    print("|---|---|---|---:|")
    for name, lines, bits, seconds in rows:
        print(f"| {name} | {'same' if lines else 'DIFFERENT'} | "
              f"{'same' if bits else 'DIFFERENT'} | {seconds:.1f} |")
    for name in ("streamed", "resumed"):
        for line in printed[name]:
            if line not in printed["held whole"]:
                print(f"{name}: {line}   (not printed held whole)")
                break
    return 0 if all(lines and bits for _, lines, bits, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
