"""Who pays for reading a streamed shard when training keeps every core busy.

bench/streaming.py finds logistic regression streamed at well under 90 % of
resident with OpenBLAS's default threads on a 2-core machine, and at 90 % or
more with one BLAS thread. This bench takes the question apart, on the same
generated store (12,000 28x28 images, shards of 3,000, shuffled, batch 600,
floatX=float32, the C backend), each way's epochs alternated in one process:

- resident: the whole split in the int8 shared variable (the reference);
- process: shards read ahead by the reading process, as shipped;
- process, SCHED_IDLE / nice 19: the same, the reader's scheduling lowered
  by this bench (the library leaves it alone);
- serial: no prefetch, each shard read in the trainer when it is needed.

Each table runs in a fresh process under one BLAS setting: the defaults;
``OPENBLAS_THREAD_TIMEOUT=4`` (OpenBLAS's idle threads go to sleep at once
instead of spinning for 2**28 cycles, about a tenth of a second, after each
call); ``OPENBLAS_NUM_THREADS=1``. After the table, what reading one shard
costs in each of those processes, read after read and right after training on a shard
(the steps evict the store's pages and the buffers from the caches).

    python bench/reader_contention.py [--rounds 21]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tutorials"), str(HERE)]

SETTINGS = {"default": {}, "OPENBLAS_THREAD_TIMEOUT=4": {"OPENBLAS_THREAD_TIMEOUT": "4"},
            "OPENBLAS_NUM_THREADS=1": {"OPENBLAS_NUM_THREADS": "1"}}
WAYS = ("resident", "process", "process, SCHED_IDLE", "process, nice 19", "serial")
EXAMPLES, SHARD, BATCH = 12000, 3000, 600


def measure(rounds):
    import numpy as np
    from models import build
    from streaming import write_store

    from int8store import SharedDataset
    from int8store.store.reader import open_store
    from int8store.streaming.split import StoreShards, StreamingSplit, shuffle_positions

    path = write_store(tempfile.mkdtemp(prefix="int8store-contention-"), EXAMPLES)
    store = open_store(path)
    codes, labels = store.read_split("train")
    resident = SharedDataset(codes, labels, store.encoding, image_shape=(28, 28), name="train",
                             dtype="float32")
    _, train_resident = build("logistic regression", {"train": resident}, BATCH, 0.13)
    batches = EXAMPLES // BATCH

    def resident_epoch(epoch):
        for i in range(batches):
            train_resident(i)

    runs, splits = {"resident": resident_epoch}, []
    for way in WAYS[1:]:
        split = StreamingSplit(StoreShards(path, "train"), SHARD, store.encoding, (28, 28), seed=0,
                               prefetch=0 if way == "serial" else 2, dtype="float32")
        _, train = build("logistic regression", {"train": split.dataset, "all": resident}, BATCH, 0.13)

        def streamed_epoch(epoch, split=split, train=train):
            for _, i in split.minibatches(epoch, BATCH, progress=False):
                train(i)
        if way != "serial":
            streamed_epoch(0)  # starts the reader, which stays for the next epochs
            pid = split._pool.process._process.pid  # (no public handle: a bench's probe)
            if way.endswith("SCHED_IDLE"):
                os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
            elif way.endswith("nice 19"):
                os.setpriority(os.PRIO_PROCESS, pid, 19)
        runs[way] = streamed_epoch
        splits.append(split)
    rates = {way: [] for way in runs}
    for epoch in range(1, rounds + 1):  # alternated: each round runs every way once
        for way, run in runs.items():
            start = time.perf_counter()
            run(epoch)
            rates[way].append(batches * BATCH / (time.perf_counter() - start))
    for split in splits:
        split.close()

    # What one shard costs to read, check and shuffle here: read after read,
    # and each read right after the steps that train on a shard.
    source = StoreShards(path, "train")
    out = np.empty((SHARD, 28 * 28), np.int8)
    costs = {"read after read": [], "between steps": []}
    for where, times in costs.items():
        for r in range(40):
            if where == "between steps":
                for i in range(SHARD // BATCH):
                    train_resident(i)
            start = time.perf_counter()
            source.read(0, SHARD, out, shuffle_positions(0, r, 0, SHARD))
            times.append(time.perf_counter() - start)
    return {"rates": {way: statistics.median(v) for way, v in rates.items()},
            "read": {where: statistics.median(v) for where, v in costs.items()}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.rounds)))
        return
    print(f"logistic regression, {EXAMPLES:,} generated 28x28 images in a store, shards of "
          f"{SHARD:,}, batch {BATCH}; medians of {args.rounds} alternated epochs")
    print("| BLAS setting | " + " | ".join(WAYS) + " |")
    print("|---|" + "---:|" * len(WAYS))
    notes = []
    for setting, extra in SETTINGS.items():  # each in a fresh process
        child = subprocess.run([sys.executable, __file__, "--child", "--rounds", str(args.rounds)],
                               env={**os.environ, **extra}, capture_output=True, text=True,
                               check=True)
        result = json.loads(child.stdout.strip().splitlines()[-1])
        base = result["rates"]["resident"]
        cells = [f"{base:,.0f} ex/s"] + [f"{result['rates'][w] / base:.2f}" for w in WAYS[1:]]
        print(f"| {setting} | " + " | ".join(cells) + " |")
        notes.append(f"{setting}: reading a shard takes {result['read']['read after read'] * 1e3:.2f} ms "
                     f"read after read, {result['read']['between steps'] * 1e3:.2f} ms right after "
                     "training on a shard")
    print("\n".join(notes))


if __name__ == "__main__":
    main()
