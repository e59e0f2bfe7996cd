"""Conversion speed: `int8store convert` on a 70,000 x 28 x 28 IDX set against
the time to merely decompress and read the same files, measured alternately
in one run (target: conversion <= 1.5 x the read time), with the standard
library's gzip as a second reference. Each conversion writes a new store
(the previous one is removed before the clock starts: replacing a file
costs the kernel the old file's pages, which is not converting).

    python bench/convert.py [--repeats 3] [--keep DIR]
"""

import argparse
import gzip
import shutil
import struct
import tempfile
import time
from pathlib import Path

import numpy as np

from int8store import convert
from synthetic import digit_like_images

SPLITS = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", 60000),
          "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", 10000)}


def write_idx_gz(path, array):
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(gzip.compress(header + array.tobytes(), compresslevel=6))


def make_source(folder):
    for seed, (images_name, labels_name, count) in enumerate(SPLITS.values()):
        images, labels = digit_like_images(count, seed)
        write_idx_gz(folder / images_name, images)
        write_idx_gz(folder / labels_name, labels)
    return sorted(folder.iterdir())


def read_only(files, opener=None):
    """Decompress every file (with ISA-L's gzip, as int8store does, unless
    another ``opener`` is given) and view its data as an array: the floor for
    any converter."""
    from isal import igzip

    for path in files:
        with (opener or igzip.open)(path, "rb") as f:
            data = f.read()
        ndim = data[3]
        np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)


def timed(function):
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="write the set and the store here and keep them")
    args = parser.parse_args(argv)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="int8store-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        files = make_source(folder)
        output = folder / "converted.h5"
        reads, stdlib_reads, converts = [], [], []
        for _ in range(args.repeats):  # alternate, so drift affects all alike
            reads.append(timed(lambda: read_only(files)))
            stdlib_reads.append(timed(lambda: read_only(files, gzip.open)))
            output.unlink(missing_ok=True)  # a new output, as a first conversion writes
            converts.append(timed(lambda: convert(files, output, command_line="bench")))
        source_bytes = sum(p.stat().st_size for p in files)
        print(f"source: 70,000 images of 28x28 in 4 gzipped IDX files, {source_bytes:,} bytes; "
              f"store: {output.stat().st_size:,} bytes")
        print(f"best of {args.repeats} runs, alternating:")
        print(f"{'step':42} {'seconds':>8} {'ratio':>6}")
        print(f"{'decompress (ISA-L) and read the IDX files':42} {min(reads):8.3f} {1:6.2f}")
        print(f"{'decompress (stdlib gzip) and read them':42} {min(stdlib_reads):8.3f} "
              f"{min(stdlib_reads) / min(reads):6.2f}")
        print(f"{'int8store convert (IDX -> checked store)':42} {min(converts):8.3f} "
              f"{min(converts) / min(reads):6.2f}")
    finally:
        if not args.keep:
            shutil.rmtree(folder)


if __name__ == "__main__":
    main()
