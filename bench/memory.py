"""Bytes the images take in memory, int8 against float32, measured on the
shared variables themselves.

    python bench/memory.py --dataset digits
    python bench/memory.py --dataset path/to/mnist.pkl.gz
"""

import argparse

from int8store import load_splits


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="digits", help="anything load_data takes")
    args = parser.parse_args(argv)
    held = {storage: load_splits(args.dataset, storage=storage, dtype="float32") for storage in ("int8", "float")}
    print(f"dataset: {args.dataset}")
    print(f"{'split':6} {'examples':>9} {'int8 bytes':>14} {'float32 bytes':>15} {'ratio':>6}")
    for name, ds in held["int8"].items():
        int8 = ds.data.get_value(borrow=True).nbytes
        float32 = held["float"][name].data.get_value(borrow=True).nbytes
        print(f"{name:6} {ds.n_examples:>9,} {int8:>14,} {float32:>15,} {int8 / float32:>6.3f}")


if __name__ == "__main__":
    main()
