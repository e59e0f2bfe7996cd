"""Loading mnist.pkl.gz: ``int8store.load_data`` against the classic
tutorials' loader (its few lines are copied below), time and memory, each run
in a fresh process with the graph library imported first (as the tutorials
do: Aesara, the classic tutorials' users' library, where it is installed,
else PyTensor), under floatX float32 and float64, the two loaders
interleaved.

Per run: seconds in the loader; the process's peak resident memory (what
the machine must have); the memory the loaded data holds afterwards
(resident memory after loading minus before, garbage collected). Targets:
time <= 1.2 x the classic; peak <= the classic's under float32 and below it
under float64; held <= the classic's minus 3/4 of the images' bytes.

    python bench/load.py --dataset path/to/mnist.pkl.gz [--repeats 3]
"""

import argparse
import importlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

LOADERS = ("classic", "int8store")
#: The graph library the classic loader's shared variables are made with.
LIBRARY = "aesara" if importlib.util.find_spec("aesara") else "pytensor"


def classic_load_data(dataset):
    """The classic tutorials' load_data, less its download (the file is given)."""
    import gzip
    import pickle

    import numpy

    aesara = importlib.import_module(LIBRARY)
    T = importlib.import_module(LIBRARY + ".tensor")

    with gzip.open(dataset, "rb") as f:
        try:
            train_set, valid_set, test_set = pickle.load(f, encoding="latin1")
        except TypeError:
            train_set, valid_set, test_set = pickle.load(f)

    def shared_dataset(data_xy, borrow=True):
        data_x, data_y = data_xy
        shared_x = aesara.shared(numpy.asarray(data_x, dtype=aesara.config.floatX), borrow=borrow)
        shared_y = aesara.shared(numpy.asarray(data_y, dtype=aesara.config.floatX), borrow=borrow)
        return shared_x, T.cast(shared_y, "int32")

    test_set_x, test_set_y = shared_dataset(test_set)
    valid_set_x, valid_set_y = shared_dataset(valid_set)
    train_set_x, train_set_y = shared_dataset(train_set)
    return [(train_set_x, train_set_y), (valid_set_x, valid_set_y), (test_set_x, test_set_y)]


def _resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def worker(loader, dataset):
    """One measurement in this (fresh) process; prints it as JSON."""
    import gc
    import resource
    import time

    importlib.import_module(LIBRARY)  # (imported first, as the tutorials do)
    import numpy  # noqa: F401

    if loader == "int8store":
        from int8store import load_data
    else:
        load_data = classic_load_data
    gc.collect()
    before = _resident_bytes()
    start = time.perf_counter()
    datasets = load_data(dataset)
    seconds = time.perf_counter() - start
    gc.collect()
    held = _resident_bytes() - before  # while `datasets` is alive
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    del datasets
    print(json.dumps({"seconds": seconds, "peak": peak, "held": held}))


def measure(loader, dataset, floatx):
    flags = LIBRARY.upper() + "_FLAGS"
    env = {k: v for k, v in os.environ.items() if k != flags}
    env[flags] = f"floatX={floatx}"
    done = subprocess.run([sys.executable, __file__, "--worker", loader, "--dataset", str(dataset)],
                          env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"the {loader} loader's process failed (status {done.returncode}):\n"
                 f"{done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def image_bytes(dataset):
    """Bytes of the images as float32: what the classic holds under floatX=float32."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from int8store import load_data

    return sum(4 * x.dataset.int8_nbytes for x, _ in load_data(dataset))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True, help="path to mnist.pkl.gz")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", choices=LOADERS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.dataset)
        return
    float32_images = image_bytes(args.dataset)
    print(f"{args.dataset}: {Path(args.dataset).stat().st_size:,} bytes, images "
          f"{float32_images:,} bytes as float32; {LIBRARY}; medians of {args.repeats} fresh processes "
          "per cell, the loaders interleaved; OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'default')}")
    header = (f"{'floatX':8} {'loader':10} {'seconds':>8} {'x classic':>9} {'peak MB':>8} "
              f"{'x classic':>9} {'held MB':>8} {'target held MB':>14}")
    print(header)
    for floatx in ("float32", "float64"):
        runs = {loader: [] for loader in LOADERS}
        for repeat in range(args.repeats):
            for loader in (LOADERS if repeat % 2 == 0 else LOADERS[::-1]):
                runs[loader].append(measure(loader, args.dataset, floatx))
        median = {loader: {key: statistics.median(r[key] for r in runs[loader])
                           for key in ("seconds", "peak", "held")} for loader in LOADERS}
        classic = median["classic"]
        target_held = classic["held"] - 0.75 * float32_images * (2 if floatx == "float64" else 1)
        for loader in LOADERS:
            m = median[loader]
            print(f"{floatx:8} {loader:10} {m['seconds']:8.3f} {m['seconds'] / classic['seconds']:9.2f} "
                  f"{m['peak'] / 1e6:8.1f} {m['peak'] / classic['peak']:9.2f} {m['held'] / 1e6:8.1f} "
                  f"{'' if loader == 'classic' else format(target_held / 1e6, '.1f'):>14}")


if __name__ == "__main__":
    main()
