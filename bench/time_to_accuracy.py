"""Time to accuracy: the LeNet5 and logistic-regression tutorials run to the
end, each way in a fresh process, timed from the process's start to its
exit, beside what a user writes by hand (``bench/anchors.py``).

Ways, for each model (``--models``):

* ``int8store jax``: the bundled tutorial as a newcomer runs it,
  ``python tutorials/MODEL.py --dataset D --mode jax`` (no other flag;
  ``--timings`` for its figures), with an empty compilation cache, then
  ``int8store jax, warm cache`` the same command again (the cache the first
  left);
* ``int8store c``: the tutorial on the C backend (``--c-backend``, on a CPU);
* ``before: int8store ...``: the same tutorials from another checkout of
  int8store (``--before CHECKOUT``), to compare a change with what it changed;
* ``plain jax.jit``, ``plain lax.scan``: plain JAX, float32 images
  resident, one call a step (a split scored in one call), or one call an
  epoch;
* ``torch resident``, ``torch DataLoader``: PyTorch, when ``import torch``
  works in ``--torch-python`` (default: this Python).

The data: ``--mnist PATH``, the classic ``mnist.pkl.gz`` (the tutorials read
it as it is; the anchors read its pixels from a prepared uint8 ``.npz``, a
few hundred milliseconds less of loading), else 70,000 generated MNIST-like
28x28 images (50,000 / 10,000 / 10,000). ``--epochs N`` caps every way's
epochs (the tutorials': LeNet5 200, logistic 1000, with early stopping);
``--rounds R`` runs every way R times, alternating their order.

It prints, a row a way: the whole process's seconds, the training loop's
(scoring included), the scoring's (int8store; in brackets the first score
of each split's, in which JAX mode traces its program and compiles or
loads it: the rest is what scoring costs a run), XLA's compilations and
loads from the cache (int8store, JAX mode), the best validation and test
errors, the epochs, and each whole-process time as a ratio to plain
``jax.jit``'s in the same run; then the device. Each run's figures go to
stderr as it ends, so a bench cut short still shows those it finished.

    python bench/time_to_accuracy.py [--mnist mnist.pkl.gz] [--models lenet5 logistic]
        [--epochs N] [--rounds 1] [--c-backend] [--torch-python PATH] [--before CHECKOUT]
        [--skip WAY ...]
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TUTORIALS = {"lenet5": HERE.parent / "tutorials" / "convolutional_mlp.py",
             "logistic": HERE.parent / "tutorials" / "logistic_sgd.py"}
ANCHORS = HERE / "anchors.py"
ANCHOR_WAYS = {"plain jax.jit": "jax-jit", "plain lax.scan": "jax-scan",
               "torch resident": "torch-resident", "torch DataLoader": "torch-dataloader"}


def prepared_data(mnist, folder):
    """``(dataset for the tutorials, .npz for the anchors)``: the classic
    file and its pixels, or generated images written once as an ``.npz``
    that both read."""
    from int8store import load_splits

    if mnist is None:
        sys.path.insert(0, str(HERE))
        from synthetic import digit_like_images

        images, labels = digit_like_images(70000, seed=1)
        mnist = Path(folder) / "mnist-shaped.npz"
        np.savez(mnist, x_train=images[:50000], y_train=labels[:50000],
                 x_valid=images[50000:60000], y_valid=labels[50000:60000],
                 x_test=images[60000:], y_test=labels[60000:])
    arrays = {}
    for name, split in load_splits(str(mnist)).items():
        arrays[f"x_{name}"] = split.encoding.levels(split.rows()).astype(np.uint8)
        arrays[f"y_{name}"] = split.labels
        table = split.encoding.table(np.float32)  # the tutorial's value of each level
    anchors = Path(folder) / "anchors.npz"
    np.savez(anchors, table=table, **arrays)
    return str(mnist), str(anchors)


def timed(command, env):
    """``(seconds from start to exit, stdout, stderr)`` of a fresh process."""
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - began
    if done.returncode:
        raise SystemExit(f"{' '.join(map(str, command))} failed:\n{done.stderr[-3000:]}")
    return seconds, done.stdout, done.stderr


#: Runs a tutorial of another checkout of int8store (``--before``): its
#: package first, not this environment's editable install of this one.
OTHER_CHECKOUT = ("import runpy, sys; checkout, tutorial = sys.argv[1:3]; "
                  "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f)]; "
                  "sys.path[:0] = [checkout, checkout + '/tutorials']; sys.argv[:] = sys.argv[2:]; "
                  "runpy.run_path(tutorial, run_name='__main__')")


def _says_timings(checkout):
    """Whether the tutorials of ``checkout`` take --timings (older ones do not)."""
    options = [checkout / "int8store" / "training" / "options.py",
               checkout / "tutorials" / "logistic_sgd.py"]
    return any(path.exists() and "--timings" in path.read_text() for path in options)


def tutorial_run(model, dataset, mode, epochs, env, checkout=None):
    tutorial = TUTORIALS[model] if checkout is None else \
        Path(checkout) / "tutorials" / TUTORIALS[model].name
    command = [sys.executable, str(tutorial)] if checkout is None else \
        [sys.executable, "-c", OTHER_CHECKOUT, str(checkout), str(tutorial)]
    command += ["--dataset", dataset, "--mode", mode]
    if _says_timings(tutorial.parent.parent):
        command += ["--timings"]
    if model == "logistic":
        command += ["--save-model", ""]
    if epochs:
        command += ["--epochs", str(epochs)]
    seconds, out, err = timed(command, env)

    def number(pattern, default=None, text=out):
        found = re.search(pattern, text)
        return float(found.group(1)) if found else default

    # (a tutorial without --timings says only how long its loop ran, on stderr)
    loop = number(r"training loop ([\d.]+) s", number(r"ran for ([\d.]+)s", text=err))
    minutes = number(r"ran for ([\d.]+)m", text=err)
    return {"whole": seconds, "loop": loop if minutes is None else 60 * minutes,
            "scoring": number(r"scoring the splits ([\d.]+) s"),
            "first scores": number(r"\(([\d.]+) s the first score"),
            "compiled": number(r"(\d+) XLA programs? compiled"),
            "loaded": number(r"(\d+) loaded from the cache"),
            "valid": number(r"best validation error\s+([\d.]+) %"),
            "test": number(r"test error\s+([\d.]+) %"),
            "epochs": number(r"epochs\s+(\d+)"),
            "device": (re.search(r"\.\.\. (JAX on [^;]+; \w+)", out)
                       or [None, "C backend" if mode == "c" else "JAX (not said by this version)"])[1]}


def anchor_run(way, model, data, epochs, python, env):
    command = [python, str(ANCHORS), ANCHOR_WAYS[way], model, data]
    if epochs:
        command += ["--epochs", str(epochs)]
    seconds, out, _ = timed(command, env)
    record = json.loads(out.strip().splitlines()[-1])
    return {"whole": seconds, "loop": record["loop_seconds"], "valid": record["valid"],
            "test": record["test"], "epochs": record["epochs"], "device": record["device"]}


def torch_imports(python):
    return subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0


def measure(models, dataset, anchors, epochs, rounds, c_backend, torch_python, before, cache,
            skip=()):
    env = {**os.environ, "XDG_CACHE_HOME": cache}  # the tutorials' compilation cache
    cold, warm = "int8store jax", "int8store jax, warm cache"
    ways = [cold, warm, "plain jax.jit", "plain lax.scan"]
    if c_backend:
        ways.insert(2, "int8store c")
    if before:
        ways[2:2] = ["before: int8store jax"] + (["before: int8store c"] if c_backend else [])
    if torch_imports(torch_python):
        ways += ["torch resident", "torch DataLoader"]
    else:
        print(f"(the PyTorch ways are left out: {torch_python} cannot import torch; "
              "--torch-python names one that can)", file=sys.stderr)
    ways = [way for way in ways if way not in skip]
    results = {}
    for model in models:
        runs = {way: [] for way in ways}

        def record(way, run):
            runs[way].append(run)
            _progress(model, way, run)

        for round_ in range(rounds):
            for way in (ways if round_ % 2 == 0 else ways[::-1]):
                if way == warm:
                    continue  # run right after the cold run, on the cache it left
                if way == cold:
                    shutil.rmtree(os.path.join(cache, "int8store"), ignore_errors=True)
                    record(cold, tutorial_run(model, dataset, "jax", epochs, env))
                    if warm in runs:
                        record(warm, tutorial_run(model, dataset, "jax", epochs, env))
                elif way.startswith("before: "):
                    # (with the cache the cold run left, it was a warm run against a cold one)
                    shutil.rmtree(os.path.join(cache, "int8store"), ignore_errors=True)
                    record(way, tutorial_run(model, dataset, way.split()[-1], epochs, env,
                                             before))
                elif way == "int8store c":
                    record(way, tutorial_run(model, dataset, "c", epochs, env))
                else:
                    python = torch_python if way.startswith("torch") else sys.executable
                    record(way, anchor_run(way, model, anchors, epochs, python, env))
        results[model] = runs
    return results


def _progress(model, way, run):
    """A line on stderr as each run ends: what a run cut short (as on a lent
    GPU's time limit) still shows."""
    print(f"({model}, {way}: {run['whole']:.1f} s whole, "
          f"{_format(run['loop'], '.1f')} s loop, "
          f"{_format(run['valid'], '.2f')} / {_format(run['test'], '.2f')} %)",
          file=sys.stderr, flush=True)


def _format(value, spec):
    return "" if value is None else format(value, spec)


def median(runs, key):
    values = [run[key] for run in runs if run.get(key) is not None]
    return statistics.median(values) if values else None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mnist", help="the classic mnist.pkl.gz (default: generated images)")
    parser.add_argument("--models", nargs="+", choices=list(TUTORIALS),
                        default=list(TUTORIALS))
    parser.add_argument("--epochs", type=int, help="at most this many epochs, every way")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--c-backend", action="store_true",
                        help="also the tutorials on the C backend")
    parser.add_argument("--torch-python", default=sys.executable,
                        help="the Python that runs the PyTorch ways (skipped if it has no torch)")
    parser.add_argument("--skip", nargs="+", default=[], metavar="WAY",
                        help="ways to leave out, e.g. 'plain lax.scan' (on a CPU, XLA runs "
                             "LeNet5 inside a loop 8-9 times slower: jax-ml/jax#12868)")
    parser.add_argument("--before", metavar="CHECKOUT",
                        help="also the int8store rows of another checkout of int8store (e.g. "
                             "'git worktree add /tmp/before COMMIT'): before and after a change")
    args = parser.parse_args(argv)
    # The data and the compilation cache go when the runs are done; the runs stay.
    with tempfile.TemporaryDirectory(prefix="int8store-time-to-accuracy-") as scratch:
        dataset, anchors = prepared_data(args.mnist, scratch)
        results = measure(args.models, dataset, anchors, args.epochs, args.rounds,
                          args.c_backend, args.torch_python, args.before,
                          os.path.join(scratch, "cache"), args.skip)
    handle, raw = tempfile.mkstemp(prefix="int8store-time-to-accuracy-", suffix=".json")
    with os.fdopen(handle, "w") as file:
        json.dump(results, file, indent=1)
    print(f"(every run: {raw})")
    from int8store.backend import activate

    print(f"{activate().describe()}; data: {args.mnist or 'generated MNIST-shaped images'}; "
          f"epochs: {args.epochs or 'the tutorials'}; medians of {args.rounds} round(s)")
    print("| model | way | whole process, s | training loop, s | scoring (first scores), s "
          "| XLA compiled / loaded | best valid / test error, % | epochs | whole vs plain "
          "jax.jit |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    devices = set()
    for model, runs in results.items():
        plain = median(runs.get("plain jax.jit", []), "whole")
        for way, done in runs.items():
            if not done:
                continue
            devices.add(f"{way.split(':')[0].split()[0]}: {done[0]['device']}")
            whole, loop, scoring, first = (median(done, k) for k in
                                           ("whole", "loop", "scoring", "first scores"))
            compiled, loaded = median(done, "compiled"), median(done, "loaded")
            xla = f"{compiled:.0f} / {loaded:.0f}" if compiled is not None else ""
            scored = _format(scoring, '.2f') + (f" ({first:.2f})" if first is not None else "")
            print(f"| {model} | {way} | {whole:.1f} | {_format(loop, '.1f')} | {scored} | {xla} | "
                  f"{_format(median(done, 'valid'), '.2f')} / "
                  f"{_format(median(done, 'test'), '.2f')} | "
                  f"{_format(median(done, 'epochs'), '.0f')} | "
                  f"{_format(plain and whole / plain, '.2f')} |")
    for device in sorted(devices):
        print(f"- {device}")


if __name__ == "__main__":
    main()
