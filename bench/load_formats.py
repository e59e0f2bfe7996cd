"""Loading each kind of source: the peak memory ``load_data`` takes above
what it finally holds, and its time, on either stack.

From ``mnist.pkl.gz`` the bench writes the same images as an ``.npz`` of
uint8 (60,000 training images, its 50,000 and the 10,000 of validation, and
10,000 test), as gzipped IDX files, and as an int8store store, then loads each
in a fresh process that has imported the tensor library and int8store's
graph modules first (what a tutorial has done by then). Per run: the peak
resident memory above the process's before loading (``VmHWM`` against
``/proc/self/statm``), over the bytes the splits hold (int8 codes and int32
labels), and the seconds in ``load_data``. ``--before CHECKOUT`` runs the same
loads with another checkout of int8store, the two interleaved, to compare a
change with what it changed.

    python bench/load_formats.py --dataset mnist.pkl.gz [--mode c|jax] [--repeats 3]
        [--before /path/to/other/checkout]
"""

import argparse
import gzip
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def write_inputs(dataset, folder):
    """``{kind: path}``: the pickle itself, an .npz, IDX files and a store."""
    sys.path.insert(0, str(HERE))
    from int8store import load_splits

    splits = load_splits(dataset)
    pixels = {name: (split.decoded() * 256).round().astype("uint8").reshape(-1, 28, 28)
              for name, split in splits.items()}
    labels = {name: split.labels.astype("uint8") for name, split in splits.items()}
    import numpy as np

    train = np.concatenate([pixels["train"], pixels["valid"]])
    train_labels = np.concatenate([labels["train"], labels["valid"]])
    npz = folder / "mnist_uint8.npz"
    np.savez(npz, x_train=train, y_train=train_labels, x_test=pixels["test"],
             y_test=labels["test"])
    idx = folder / "idx"
    idx.mkdir()
    for prefix, images, classes in (("train", train, train_labels),
                                    ("t10k", pixels["test"], labels["test"])):
        with gzip.open(idx / f"{prefix}-images-idx3-ubyte.gz", "wb", compresslevel=1) as f:
            f.write(struct.pack(">IIII", 0x803, *images.shape) + images.tobytes())
        with gzip.open(idx / f"{prefix}-labels-idx1-ubyte.gz", "wb", compresslevel=1) as f:
            f.write(struct.pack(">II", 0x801, len(classes)) + classes.tobytes())
    store = folder / "mnist.h5"
    subprocess.run([sys.executable, "-m", "int8store", "convert", str(dataset), "-o", str(store)],
                   check=True, capture_output=True, cwd=HERE)
    return {"mnist.pkl.gz": Path(dataset), "npz uint8": npz, "IDX (gz)": idx, "store": store}


def _resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_resident_bytes():
    """The process's peak resident memory (``VmHWM``: ``ru_maxrss`` would
    keep the parent's, which is carried across ``exec``)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def worker(path, mode):
    """One load in this fresh process; prints it as JSON."""
    import gc
    import time

    import int8store
    from int8store import load_data
    from int8store.backend import activate

    activate()
    import int8store.dataset.shared  # noqa: F401  (the graph modules, as by a tutorial's start)

    if mode == "jax":
        import jax

        jax.devices()
    gc.collect()
    before = _resident_bytes()
    start = time.perf_counter()
    data = load_data(path, mode=mode)
    seconds = time.perf_counter() - start
    peak = _peak_resident_bytes() - before
    held = sum(x.dataset.int8_nbytes + y.get_value(borrow=True).nbytes for x, y in data)
    print(json.dumps({"seconds": seconds, "peak": peak, "held": held,
                      "int8store": str(Path(int8store.__file__).parent.parent)}))


def measure(checkout, path, mode):
    env = dict(os.environ, PYTHONPATH=str(checkout))
    done = subprocess.run([sys.executable, __file__, "--worker", str(path), "--mode", mode],
                          env=env, capture_output=True, text=True, check=True, cwd=checkout)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(result["int8store"]) != Path(checkout):
        raise SystemExit(f"{checkout}: the worker imported int8store from {result['int8store']}")
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", help="path to mnist.pkl.gz")
    parser.add_argument("--mode", choices=("c", "jax"), default="c")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--before", metavar="CHECKOUT", help="another checkout of int8store")
    parser.add_argument("--worker", metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.mode)
        return
    if not args.dataset:
        parser.error("--dataset mnist.pkl.gz is needed")
    trees = {"int8store": HERE}
    if args.before:
        trees = {"before": Path(args.before).resolve(), **trees}
    print(f"mode {args.mode}; medians of {args.repeats} fresh processes per cell"
          + (", the checkouts interleaved" if args.before else "") + "; OPENBLAS_NUM_THREADS="
          + os.environ.get("OPENBLAS_NUM_THREADS", "default"))
    print("| source | checkout | peak above the start, MB | held MB | peak / held | seconds |")
    print("|---|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for kind, path in write_inputs(Path(args.dataset).resolve(), Path(folder)).items():
            runs = {tree: [] for tree in trees}
            for repeat in range(args.repeats):
                for tree in (list(trees) if repeat % 2 == 0 else list(trees)[::-1]):
                    runs[tree].append(measure(trees[tree], path, args.mode))
            for tree, results in runs.items():
                peak, held, seconds = (statistics.median(r[key] for r in results)
                                       for key in ("peak", "held", "seconds"))
                print(f"| {kind} | {tree} | {peak / 1e6:.1f} | {held / 1e6:.1f} | "
                      f"{peak / held:.2f} | {seconds:.3f} |")


if __name__ == "__main__":
    main()
