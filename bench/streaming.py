"""Throughput of training on a split streamed from a store on disk, against
the split resident on the device.

The tutorials' two models (logistic regression, batch 600; LeNet5, batch
500; floatX=float32, the C backend) run epochs over a generated 28x28
training split written to a real store, three ways, alternated round by
round in one run:

(a) resident: the whole split in the int8 shared variable;
(b) streamed with prefetch: shards read from the store, checked and shuffled
    by two worker threads, two shards ahead;
(c) streamed without prefetch: each shard read when it is needed.

Each is run with the store as the producer, and with an artificially slow
producer (a fixed delay per shard, 60 % of the time the step takes to train
on a shard). Examples per second are medians over the rounds. Target: (b) at
least 90 % of (a) whenever producing a shard takes less time than training
on it. A second table runs the same with OPENBLAS_NUM_THREADS=1.

    python bench/streaming.py [--examples 12000] [--shard 3000] [--rounds 3]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tutorials"), str(HERE)]

BATCHES = {"logistic regression": 600, "LeNet5": 500}


def write_store(folder, examples):
    from synthetic import digit_like_images

    from int8store.encoding import quantize
    from int8store.store_writer import StoreWriter

    images, labels = digit_like_images(examples, seed=0)
    path = Path(folder) / "train.h5"
    codes, encoding = quantize(images)
    with StoreWriter(path, encoding, (28, 28), {"train": labels}, source="bench/streaming.py") as w:
        w.append("train", codes)
    return path


def measure(model, examples, shard, rounds):
    from models import build  # sets floatX to float32

    from int8store import SharedDataset
    from int8store.store import open_store
    from int8store.streaming import StoreShards, StreamingSplit

    batch = BATCHES[model]
    folder = tempfile.mkdtemp(prefix="int8store-streaming-")
    path = write_store(folder, examples)
    store = open_store(path)
    codes, labels = store.read_split("train")
    resident = SharedDataset(codes, labels, store.encoding, image_shape=(28, 28), name="train",
                             dtype="float32")
    _, train_resident = build(model, {"train": resident}, batch, 0.1)
    batches = len(labels) // batch

    # Time to train on one shard, to read and check one, and the slow
    # producer's delay (60 % of the training time).
    train_resident(0)
    start = time.perf_counter()
    for i in range(batches):
        train_resident(i)
    per_shard = (time.perf_counter() - start) / batches * (shard // batch)
    start = time.perf_counter()
    StoreShards(path, "train").read(0, shard)
    read_time = time.perf_counter() - start
    delay = 0.6 * per_shard

    streams = {}
    for producer, slow in (("store", 0.0), ("slow", delay)):
        for prefetch in (2, 0):
            split = StreamingSplit(StoreShards(path, "train", delay=slow), shard, store.encoding,
                                   (28, 28), seed=0, workers=2, prefetch=prefetch, dtype="float32")
            # (the resident split too, so that the model's classes are counted)
            _, train = build(model, {"train": split.dataset, "all": resident}, batch, 0.1)
            streams[(producer, prefetch)] = (split, train)

    def resident_epoch(epoch):
        for i in range(batches):
            train_resident(i)
        return batches * batch

    def streamed_epoch(key):
        split, train = streams[key]

        def run(epoch):
            done = 0
            for _, index in split.minibatches(epoch, batch, progress=False):
                train(index)
                done += batch
            return done
        return run

    ways = [("resident", "-", resident_epoch)] + [
        (f"streamed, {'prefetch 2 ahead' if p else 'no prefetch'}", producer, streamed_epoch((producer, p)))
        for producer in ("store", "slow") for p in (2, 0)]
    rates = {(name, producer): [] for name, producer, _ in ways}
    for epoch in range(rounds):
        for name, producer, run in ways:  # alternated: each round runs every way once
            start = time.perf_counter()
            done = run(epoch)
            rates[(name, producer)].append(done / (time.perf_counter() - start))
    return {"model": model, "rates": {f"{k[0]}|{k[1]}": statistics.median(v) for k, v in rates.items()},
            "per_shard": per_shard, "read": read_time, "delay": delay}


def table(results, threads):
    print("| model | OPENBLAS_NUM_THREADS | way | producer | examples/s | vs resident |")
    print("|---|---|---|---|---:|---:|")
    for result in results:
        base = result["rates"]["resident|-"]
        for key, rate in result["rates"].items():
            name, producer = key.split("|")
            producer = {"-": "-", "store": "the store",
                        "slow": f"the store + {result['delay'] * 1e3:.0f} ms"}[producer]
            print(f"| {result['model']} | {threads} | {name} | {producer} | {rate:,.0f} "
                  f"| {rate / base:.2f} |")
    for result in results:
        print(f"{result['model']}, OPENBLAS_NUM_THREADS={threads}: training on a shard takes "
              f"{result['per_shard'] * 1e3:.1f} ms, reading and checking one from the store "
              f"{result['read'] * 1e3:.1f} ms")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=12000)
    parser.add_argument("--shard", type=int, default=3000, help="examples per shard")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=list(BATCHES), choices=list(BATCHES))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    import json

    if args.child:
        print(json.dumps([measure(m, args.examples, args.shard, args.rounds) for m in args.models]))
        return
    print(f"{args.examples:,} generated 28x28 images in a store on disk, shards of "
          f"{args.shard:,}; medians of {args.rounds} alternated epochs")
    for threads in ("default", "1"):  # each in a fresh process
        env = dict(os.environ)
        if threads == "1":
            env["OPENBLAS_NUM_THREADS"] = "1"
        child = subprocess.run([sys.executable, __file__, "--child", "--examples", str(args.examples),
                                "--shard", str(args.shard), "--rounds", str(args.rounds),
                                "--models", *args.models],
                               env=env, capture_output=True, text=True, check=True)
        table(json.loads(child.stdout.strip().splitlines()[-1]), threads)


if __name__ == "__main__":
    main()
