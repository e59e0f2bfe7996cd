"""The classic LeNet5 tutorial, its own loader against the drop-in: the
DeepLearningTutorials' ``convolutional_mlp.py`` as it is (``original``) and
with ``logistic_sgd.py``'s ``def load_data`` replaced by the one line
``from int8store import load_data`` (``drop-in``), each run in a fresh
process, the two alternated (ABBA...), timed per epoch.

Nothing of the tutorials is copied here: ``--code`` names your checkout's
``code/`` folder. The bench copies ``logistic_sgd.py``, ``mlp.py`` and
``convolutional_mlp.py`` twice into a temporary folder, makes the one-line
change in one copy, ends both with ``evaluate_lenet5(n_epochs=N)``
(``--epochs``), puts the classic ``mnist.pkl.gz`` (``--mnist``) in ``data/``
beside them, where both loaders look (``../data/mnist.pkl.gz``), and runs
each copy from its own folder under ``--python``, with ``floatX`` from
``--floatx`` and, with ``--blas-threads N``, ``OPENBLAS_NUM_THREADS=N``. A
``theano`` package there, the same for both, names Aesara's modules as an
Aesara user aliases them (``T.nnet.sigmoid``, gone from Aesara 2.9, is
``aesara.tensor.sigmoid``) and corrects Aesara 2.9.4's ``CorrMM`` (without
which the original stops at its first convolution). The originals import
``six``: install it in ``--python``'s environment (``pip install six``).

Per run: the process's seconds from start to exit; the training loop's (the
tutorial's own "ran for X.XXm", to 0.6 s; compiling comes before it), and
that over the epochs run; the process's CPU seconds in user and system
mode (page faults count in the latter); its peak resident memory; the best
validation and test errors. Then the medians of each way and drop-in /
original, and whether every run printed the same error lines and the same
other lines on stderr (warnings). Aesara's compilation cache is shared: a
way's first run may compile (whole process), its later ones not.

    python bench/classic_dropin.py --code PATH/TO/DeepLearningTutorials/code
        --mnist mnist.pkl.gz [--python PATH] [--epochs 1] [--rounds 2]
        [--floatx float64] [--blas-threads N]
"""

import argparse
import difflib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FILES = ("logistic_sgd.py", "mlp.py", "convolutional_mlp.py")
WAYS = ("original", "drop-in")
#: ``def load_data(dataset):`` up to the next top-level statement.
LOAD_DATA = re.compile(r"^def load_data\(dataset\):\n.*?(?=^\S)", re.M | re.S)
FINAL_CALL = re.compile(r"(^if __name__ == ['\"]__main__['\"]:\s*\n\s+evaluate_lenet5\()\)", re.M)
#: The Aesara user's ``theano``: Aesara's modules under Theano's names.
THEANO_ALIAS = '''import sys

import aesara
import aesara.tensor
import aesara.tensor.nnet
import aesara.tensor.signal.pool
import aesara.sandbox.rng_mrg

if not hasattr(aesara.sandbox.rng_mrg, "MRG_RandomStreams"):  # (dA.py, SdA.py, rbm.py, DBN.py)
    aesara.sandbox.rng_mrg.MRG_RandomStreams = aesara.sandbox.rng_mrg.MRG_RandomStream
if not hasattr(aesara.tensor.nnet, "sigmoid"):
    aesara.tensor.nnet.sigmoid = aesara.tensor.sigmoid
for name, module in list(sys.modules.items()):
    if name == "aesara" or name.startswith("aesara."):
        sys.modules["theano" + name[len("aesara"):]] = module

# Aesara 2.9.4's CPU conv2d does not compile (its CorrMM): corrected for both
# ways, as int8store corrects it on its first graph (the original stopped).
from int8store.backend.setup.fixes import apply_all

apply_all()
'''
#: Lines of the tutorial's output that carry its errors.
ERROR_LINE = re.compile(r"error|Best validation")


def edited(path, pattern, replacement, what):
    text, count = pattern.subn(replacement, path.read_text())
    if count != 1:
        raise SystemExit(f"{path}: expected {what} once, found it {count} times; "
                         "is --code the DeepLearningTutorials' code/ folder?")
    path.write_text(text)


def prepare(code, mnist, epochs, folder):
    """``{way: folder}``: the two copies, ``data/`` and ``alias/theano`` under ``folder``."""
    (folder / "data").mkdir()
    shutil.copyfile(mnist, folder / "data" / "mnist.pkl.gz")
    (folder / "alias" / "theano").mkdir(parents=True)
    (folder / "alias" / "theano" / "__init__.py").write_text(THEANO_ALIAS)
    copies = {}
    for way in WAYS:
        copies[way] = folder / way.replace("-", "")
        copies[way].mkdir()
        for name in FILES:
            if not (Path(code) / name).is_file():
                raise SystemExit(f"--code {code}: no {name} there; expected the "
                                 "DeepLearningTutorials' code/ folder")
            shutil.copyfile(Path(code) / name, copies[way] / name)
        edited(copies[way] / "convolutional_mlp.py", FINAL_CALL, rf"\g<1>n_epochs={epochs})",
               "the final call `evaluate_lenet5()` under `if __name__ == '__main__':`")
    edited(copies["drop-in"] / "logistic_sgd.py", LOAD_DATA,
           "from int8store import load_data\n\n\n", "`def load_data(dataset):`")
    return copies


def run(folder, python, env):
    """One fresh process of the tutorial in ``folder``: its figures, or SystemExit."""
    with open(folder / "stdout", "w") as out, open(folder / "stderr", "w") as err:
        began = time.perf_counter()
        child = subprocess.Popen([python, "convolutional_mlp.py"], cwd=folder, env=env,
                                 stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own peak memory
        seconds = time.perf_counter() - began
    child.returncode = os.waitstatus_to_exitcode(status)
    out, err = (folder / "stdout").read_text(), (folder / "stderr").read_text()
    if child.returncode:
        raise SystemExit(f"{folder.name}: convolutional_mlp.py exited with status "
                         f"{child.returncode}:\n{err[-3000:]}")
    minutes = re.search(r"ran for ([\d.]+)m", err)
    best = re.search(r"Best validation score of ([\d.]+) %.*test performance ([\d.]+) %", out)
    epochs = [int(n) for n in re.findall(r"^epoch (\d+), minibatch", out, re.M)]
    training = 60 * float(minutes.group(1)) if minutes else None
    return {"whole": seconds, "training": training,
            "per epoch": training / max(epochs) if training and epochs else None,
            "user": usage.ru_utime, "sys": usage.ru_stime,
            "peak MB": usage.ru_maxrss / 1024,  # Linux: KiB
            "valid": float(best.group(1)) if best else None,
            "test": float(best.group(2)) if best else None,
            "error lines": [line for line in out.splitlines() if ERROR_LINE.search(line)],
            "other stderr": [line.replace(str(folder), "COPY") for line in err.splitlines()
                             if line.strip() and "ran for" not in line]}


def _same(runs, key):
    """Prints whether every run's ``key`` lines equal original round 1's, or how they differ."""
    first = runs["original"][0][key]
    differing = [(way, round_) for way in WAYS for round_, done in enumerate(runs[way], 1)
                 if done[key] != first]
    print(f"{key}: " + (f"the same {len(first)} lines in every run" if not differing else
                        f"differ from original round 1's in {differing}"))
    for way, round_ in differing[:1]:
        print("\n".join(difflib.unified_diff(first, runs[way][round_ - 1][key],
                                             "original 1", f"{way} {round_}", lineterm="")))


def _format(value, spec):
    return "" if value is None else format(value, spec)


def median(runs, key):
    values = [run[key] for run in runs if run[key] is not None]
    return statistics.median(values) if values else None


COLUMNS = (("whole", ".1f"), ("training", ".1f"), ("per epoch", ".1f"), ("user", ".1f"),
           ("sys", ".1f"), ("peak MB", ".0f"), ("valid", ".2f"), ("test", ".2f"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", required=True,
                        help="the DeepLearningTutorials' code/ folder (left untouched)")
    parser.add_argument("--mnist", required=True, help="the classic mnist.pkl.gz")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter that runs the tutorial (default: this one)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--floatx", choices=("float64", "float32"), default="float64")
    parser.add_argument("--blas-threads", type=int,
                        help="OPENBLAS_NUM_THREADS for the runs (default: as it is here)")
    args = parser.parse_args(argv)
    if os.sep in args.python:  # (run from the copies' folders: a path made absolute,
        args.python = os.path.abspath(args.python)  # its venv's link kept, not resolved)
    runs = {way: [] for way in WAYS}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="int8store-classic-dropin-") as scratch:
        copies = prepare(args.code, args.mnist, args.epochs, Path(scratch))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                   filter(None, [str(Path(scratch) / "alias"), os.environ.get("PYTHONPATH")])),
               "AESARA_FLAGS": ",".join(filter(None, [os.environ.get("AESARA_FLAGS"),
                                                      f"floatX={args.floatx}"]))}
        if args.blas_threads is not None:
            env["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
        for round_ in range(args.rounds):
            for way in (WAYS if round_ % 2 == 0 else WAYS[::-1]):
                done = run(copies[way], args.python, env)
                runs[way].append(done)
                print(f"({way}, round {round_ + 1}: {done['whole']:.1f} s whole, "
                      f"{_format(done['training'], '.1f')} s training)", file=sys.stderr,
                      flush=True)
    print(f"LeNet5 (convolutional_mlp.py), {args.epochs} epoch(s), floatX={args.floatx}, "
          f"OPENBLAS_NUM_THREADS={env.get('OPENBLAS_NUM_THREADS', 'unset')}, {args.python}; "
          f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after, {os.cpu_count()} CPUs")
    print("| way | round | whole process, s | training, s | per epoch, s | CPU user, s "
          "| CPU sys, s | peak RSS, MB | best valid, % | test, % |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for way in WAYS:
        for round_, done in enumerate(runs[way], 1):
            print(f"| {way} | {round_} | " +
                  " | ".join(_format(done[key], spec) for key, spec in COLUMNS) + " |")
    medians = {way: {key: median(runs[way], key) for key, _ in COLUMNS} for way in WAYS}
    for way in WAYS:
        print(f"| {way} | median | " + " | ".join(
            _format(medians[way][key], spec) for key, spec in COLUMNS) + " |")
    ratios = [medians["drop-in"][key] / medians["original"][key]
              if medians["original"][key] and medians["drop-in"][key] is not None else None
              for key, _ in COLUMNS[:6]]
    print("| drop-in / original | median | " + " | ".join(_format(r, ".2f") for r in ratios) +
          " | | |")
    _same(runs, "error lines")
    _same(runs, "other stderr")  # warnings: the same, or the lines that differ


if __name__ == "__main__":
    main()
