"""Does augmentation help where it should? LeNet5 (``tutorials/convolutional_mlp.py``)
trained on 1,000 MNIST training images, with and without ``--augment``,
the same number of epochs, for several draws of the 1,000.

For each seed s, the 1,000 training images are drawn from MNIST's 50,000 by
s (the validation split is MNIST's 10,000, the test split its 10,000), written
to an ``.npz`` in a temporary folder, and the tutorial runs on it twice, in
separate processes: without augmentation, and with ``--augment AUG
--augment-seed s``. The table gives the tutorial's test error of the best
model (the one with the lowest validation error) of each run, then the mean
and the spread (smallest and largest) of each column and of the differences.

    python bench/augment_helps.py [--mnist PATH] [--seeds 0 1 2 3 4] [--epochs 30]
        [--augment translate=2] [--mode jax]

``--mnist``: the classic ``mnist.pkl.gz`` (default: where ``load_data``
finds it: here, ``../data/``, int8store's cache, else downloaded).
"""

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TUTORIAL = HERE.parent / "tutorials" / "convolutional_mlp.py"
TRAINING = 1000


def mnist_pixels(path):
    """``{split: (uint8 images (N, 28, 28), labels)}`` of the classic file."""
    from int8store import load_splits

    found = {}
    for name, split in load_splits(path).items():
        pixels = split.encoding.levels(split.rows()).astype(np.uint8)
        found[name] = (pixels.reshape((-1,) + tuple(split.image_shape)), split.labels)
    return found


def subset_file(splits, seed, folder):
    """An .npz of 1,000 training images drawn by ``seed``, and the whole
    validation and test splits."""
    images, labels = splits["train"]
    pick = np.sort(np.random.default_rng(seed).choice(len(labels), TRAINING, replace=False))
    path = Path(folder) / f"mnist-{TRAINING}-seed{seed}.npz"
    np.savez(path, x_train=images[pick], y_train=labels[pick],
             x_valid=splits["valid"][0], y_valid=splits["valid"][1],
             x_test=splits["test"][0], y_test=splits["test"][1])
    return path


def test_error(dataset, epochs, mode, augment=None, seed=None):
    command = [sys.executable, str(TUTORIAL), "--dataset", str(dataset), "--epochs", str(epochs),
               "--batch-size", "50", "--mode", mode]
    if augment:
        command += ["--augment", augment, "--augment-seed", str(seed)]
    run = subprocess.run(command, capture_output=True, text=True, check=True)
    return float(re.search(r"^test error +([0-9.]+) %", run.stdout, re.M).group(1))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mnist", default="mnist.pkl.gz")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--augment", default="translate=2")
    parser.add_argument("--mode", default="jax", choices=["c", "jax"])
    args = parser.parse_args(argv)
    splits = mnist_pixels(args.mnist)
    rows = []
    print(f"LeNet5 on {TRAINING:,} MNIST training images, {args.epochs} epochs, batch 50, "
          f"{args.mode} mode: test error of the best model, %")
    print(f"| seed | without | --augment {args.augment} | difference |")
    print("|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for seed in args.seeds:
            dataset = subset_file(splits, seed, folder)
            plain = test_error(dataset, args.epochs, args.mode)
            augmented = test_error(dataset, args.epochs, args.mode, args.augment, seed)
            rows.append((plain, augmented, augmented - plain))
            print(f"| {seed} | {plain:.2f} | {augmented:.2f} | {augmented - plain:+.2f} |",
                  flush=True)
    columns = list(zip(*rows))
    print("| mean (min to max) | " + " | ".join(
        f"{statistics.mean(c):+.2f} ({min(c):+.2f} to {max(c):+.2f})" if i == 2 else
        f"{statistics.mean(c):.2f} ({min(c):.2f} to {max(c):.2f})"
        for i, c in enumerate(columns)) + " |")


if __name__ == "__main__":
    main()
