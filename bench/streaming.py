"""Throughput of training on a split streamed from a store on disk, against
the split resident on the device.

Logistic regression (the tutorial's class, batch 600, floatX=float32) runs
epochs over a generated 28x28 training split written to a real store, three
ways, alternated round by round in one run:

(a) resident: the whole split in the int8 shared variable;
(b) streamed with prefetch: shards read from the store, checked and shuffled
    by two worker threads, two shards ahead;
(c) streamed without prefetch: each shard read when it is needed.

Each is run with the store as the producer, and with an artificially slow
producer (a fixed delay per shard, 60 % of the time the step takes to train
on a shard). Examples per second are medians over the rounds. Target: (b) at
least 90 % of (a) whenever producing a shard takes less time than training
on it. A second table runs the same with OPENBLAS_NUM_THREADS=1.

    python bench/streaming.py [--examples 60000] [--shard 6000] [--rounds 5]
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

BATCH = 600


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


def trainer(x, y):
    """A compiled SGD step of logistic regression on minibatch ``index`` of ``x``, ``y``."""
    import aesara
    import aesara.tensor as T
    from logistic_sgd import LogisticRegression

    index, xs, ys = T.lscalar(), T.matrix("x"), T.ivector("y")
    model = LogisticRegression(input=xs, n_in=784, n_out=10)
    cost = model.negative_log_likelihood(ys)
    updates = [(p, p - 0.13 * T.grad(cost, p)) for p in model.params]
    return aesara.function([index], cost, updates=updates,
                           givens={xs: x[index * BATCH:(index + 1) * BATCH],
                                   ys: y[index * BATCH:(index + 1) * BATCH]})


def measure(examples, shard, rounds):
    from int8store.backend import activate

    activate()
    import aesara
    aesara.config.floatX = "float32"

    from int8store import SharedDataset
    from int8store.store import open_store
    from int8store.streaming import StoreShards, StreamingSplit

    folder = tempfile.mkdtemp(prefix="int8store-streaming-")
    path = write_store(folder, examples)
    store = open_store(path)
    codes, labels = store.read_split("train")
    resident = SharedDataset(codes, labels, store.encoding, image_shape=(28, 28), name="train",
                             dtype="float32")
    train_resident = trainer(resident.x, resident.y)
    batches = len(labels) // BATCH

    # Time to train on one shard, and the slow producer's delay (60 % of it).
    start = time.perf_counter()
    for i in range(batches):
        train_resident(i)
    per_shard = (time.perf_counter() - start) / batches * (shard // BATCH)
    read = StoreShards(path, "train")
    start = time.perf_counter()
    read.read(0, shard)
    read_time = time.perf_counter() - start
    delay = 0.6 * per_shard

    streams = {}
    for producer, slow in (("store", 0.0), ("slow", delay)):
        for prefetch in (2, 0):
            split = StreamingSplit(StoreShards(path, "train", delay=slow), shard, store.encoding,
                                   (28, 28), seed=0, workers=2, prefetch=prefetch, dtype="float32")
            streams[(producer, prefetch)] = (split, trainer(split.x, split.y))

    def resident_epoch(epoch):
        for i in range(batches):
            train_resident(i)
        return batches * BATCH

    def streamed_epoch(key):
        split, train = streams[key]

        def run(epoch):
            done = 0
            for _, index in split.minibatches(epoch, BATCH, progress=False):
                train(index)
                done += BATCH
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
    return {"rates": {f"{k[0]}|{k[1]}": statistics.median(v) for k, v in rates.items()},
            "per_shard": per_shard, "read": read_time, "delay": delay}


def table(result, threads):
    base = result["rates"]["resident|-"]
    print(f"OPENBLAS_NUM_THREADS={threads}: training on a shard takes {result['per_shard'] * 1e3:.1f} ms, "
          f"reading and checking one from the store {result['read'] * 1e3:.1f} ms; the slow "
          f"producer adds {result['delay'] * 1e3:.1f} ms a shard")
    print("| way | producer | examples/s | vs resident |")
    print("|---|---|---:|---:|")
    for key, rate in result["rates"].items():
        name, producer = key.split("|")
        producer = {"-": "-", "store": "the store", "slow": "the store + delay"}[producer]
        print(f"| {name} | {producer} | {rate:,.0f} | {rate / base:.2f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=60000)
    parser.add_argument("--shard", type=int, default=6000, help="examples per shard")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    result = measure(args.examples, args.shard, args.rounds)
    if args.child:
        import json
        print(json.dumps(result))
        return
    print(f"{args.examples:,} generated 28x28 images in a store on disk, shards of {args.shard:,}, "
          f"batch {BATCH}; medians of {args.rounds} alternated epochs")
    table(result, os.environ.get("OPENBLAS_NUM_THREADS", "default"))
    import json
    child = subprocess.run([sys.executable, __file__, "--child", "--examples", str(args.examples),
                            "--shard", str(args.shard), "--rounds", str(args.rounds)],
                           env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
                           capture_output=True, text=True, check=True)
    table(json.loads(child.stdout.strip().splitlines()[-1]), 1)


if __name__ == "__main__":
    main()
