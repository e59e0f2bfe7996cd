"""Throughput of training on a split streamed from a store on disk, against
the split resident on the device.

The tutorials' two models (logistic regression, batch 600; LeNet5, batch
500; floatX=float32, the C backend) run epochs over a generated 28x28
training split written to a real store, three ways, alternated round by
round in one run:

(a) resident: the whole split in the int8 shared variable;
(b) streamed shuffled with prefetch: each shard lent from the mapped store
    (the kernel reads the next two ahead), its chunks checked in place when
    it is needed, and each minibatch's rows gathered by the shard's order
    and decoded in the training step itself;
(c) the same without prefetch;
(b'), (c') with an artificially slow producer (a fixed delay per shard, 60 %
    of the time the step takes to train on a shard): shards read, checked
    and shuffled into buffers by the reading process two shards ahead (b'),
    or each when it is needed (c');
(h) shuffled as (b'), with the store as the producer: how int8store
    streamed shuffled shards before they were lent;
(d), (e) streamed in the split's own order (as the tutorials stream), with
    and without prefetch: each shard lent from the mapped store, its chunks
    checked in place when it is needed (with prefetch, the kernel reads the
    next two shards ahead, and the split, four shards, stays mapped whole:
    checked once; without, each shard's pages are given back after use and
    its chunks checked again each epoch);
(f) as (d), the pages given back and the chunks checked each epoch, as for
    a split larger than the stream may hold;
(g) the same order, copied by the reading process two shards ahead, as
    int8store streamed it before shards were lent.

Examples per second are medians over the
rounds; a round runs each way for about a quarter of a second (one epoch of
LeNet5, some 25 of logistic regression). Target: (b) at
least 90 % of (a) whenever producing a shard takes less time than training
on it. A second table runs the same with OPENBLAS_NUM_THREADS=1. First, the
producer's own rate (one thread reading, checking and shuffling every shard
of the store from the page cache, in the parent process, which trains
nothing: no BLAS threads spin on the other core), verify()'s, and a plain
memory copy's, one after the other: the physical limit.

With ``--big-store PATH`` (a store larger than memory should be:
bench/big_store.py writes one of 1.3 million images, 1 GB), each model
instead trains from it, streamed by load_streams under ``--max-memory`` (256 MiB),
in a fresh process: examples/s and peak resident memory.

    python bench/streaming.py [--examples 12000] [--shard 3000] [--rounds 3]
        [--big-store PATH [--max-memory 256MiB] [--big-shards 20]]
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tutorials"), str(HERE)]

from blas_threads import blas_environment  # noqa: E402 (bench/ on the path first)
from scratch import scratch_folder  # noqa: E402

BATCHES = {"logistic regression": 600, "LeNet5": 500}


def write_store(folder, examples):
    from synthetic import digit_like_images

    from int8store.codes.survey import quantize
    from int8store.store.writer import StoreWriter

    images, labels = digit_like_images(examples, seed=0)
    path = Path(folder) / "train.h5"
    codes, encoding = quantize(images)
    with StoreWriter(path, encoding, (28, 28), {"train": labels}, source="bench/streaming.py") as w:
        w.append("train", codes)
    return path


def producer_rate(path, shard, repeats=3):
    """The producer alone, in one thread: every shard of the split read from
    the store, checked and shuffled into a shard buffer, as a worker does,
    and every shard lent in order, checked in the mapped file; best of
    ``repeats`` passes. Beside them, what verify() does (read and check
    every byte) and a plain memory copy of 256 MiB (no cache helps), the
    physical limit of anything that writes the bytes once."""
    import numpy as np
    from convert import timed

    from int8store.store.reader import open_store
    from int8store.streaming.sources import StoreShards

    source = StoreShards(path, "train")
    n = source.n_examples
    out = np.empty((shard, 28 * 28), np.int8)
    rng = np.random.default_rng(0)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for first in range(0, n, shard):
            count = min(shard, n - first)
            source.read(first, first + count, out[:count], rng.permutation(count))
        best = min(best, time.perf_counter() - start)
    lent = float("inf")
    for _ in range(repeats):
        start, mark = time.perf_counter(), object()  # a new pass: every chunk checked again
        for first in range(0, n, shard):
            source.lend(first, min(first + shard, n), mark)
        lent = min(lent, time.perf_counter() - start)
    store = open_store(path, verify=False)
    verify = min(timed(store.verify) for _ in range(repeats))
    a = np.ones(256 << 20, np.uint8)
    b = np.empty_like(a)
    copy = min(timed(lambda: np.copyto(b, a)) for _ in range(repeats))
    return {"producer": n * 28 * 28 / best / 1e9, "seconds_per_shard": best * shard / n,
            "lent": n * 28 * 28 / lent / 1e9, "lent_per_shard": lent * shard / n,
            "verify": store.nbytes / verify / 1e9, "copy": a.nbytes / copy / 1e9}


def measure(model, examples, shard, rounds):
    from models import build  # sets floatX to float32

    from int8store import SharedDataset
    from int8store.store.reader import open_store
    from int8store.streaming.sources import StoreShards
    from int8store.streaming.split import StreamingSplit

    batch = BATCHES[model]
    folder = scratch_folder("int8store-streaming-")
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
    alone = producer_rate(path, shard)
    read_time = alone["seconds_per_shard"]
    delay = 0.6 * per_shard

    streams = {}
    for producer, slow, seed, reader in (("store", 0.0, 0, "views"), ("slow", delay, 0, "copies"),
                                         ("shuffled, copied", 0.0, 0, "process"),
                                         ("in order", 0.0, None, "views"),
                                         ("in order, each epoch", 0.0, None, "views"),
                                         ("in order, copied", 0.0, None, "process")):
        for prefetch in (2, 0) if producer in ("store", "slow", "in order") else (2,):
            # copies: by the process reading ahead; without prefetch, in the caller's thread
            how = ("process" if prefetch else "threads") if reader == "copies" else reader
            split = StreamingSplit(StoreShards(path, "train", delay=slow), shard, store.encoding,
                                   (28, 28), seed=seed, workers=2, prefetch=prefetch, dtype="float32",
                                   reader=how)
            if producer == "in order, each epoch":
                split._reader.release_pages = True  # as a split larger than the stream holds: (f)
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
            for _, index, _ in split.minibatches(epoch, batch):
                train(index)
                done += batch
            return done
        return run

    ways = [("resident", "-", resident_epoch)] + [
        (f"streamed shuffled, lent, gathered in the step, {'prefetch 2 ahead' if p else 'no prefetch'}",
         "store", streamed_epoch(("store", p))) for p in (2, 0)] + [
        (f"streamed shuffled, copied by the {'process, prefetch 2 ahead' if p else 'caller'}",
         "slow", streamed_epoch(("slow", p))) for p in (2, 0)] + [
        ("streamed shuffled, copied by the process, prefetch 2 ahead", "shuffled, copied",
         streamed_epoch(("shuffled, copied", 2)))] + [
        (f"streamed in order, lent, {'prefetch 2 ahead' if p else 'no prefetch'}", "in order",
         streamed_epoch(("in order", p))) for p in (2, 0)] + [
        ("streamed in order, lent, prefetch 2 ahead, pages given back, checked each epoch",
         "in order, each epoch", streamed_epoch(("in order, each epoch", 2)))] + [
        ("streamed in order, copied by the process, prefetch 2 ahead", "in order, copied",
         streamed_epoch(("in order, copied", 2)))]
    # A round runs each way for about a quarter of a second (logistic
    # regression's epochs take 10 ms: one epoch alone is mostly noise).
    epochs = max(1, round(0.25 / (per_shard * examples / shard)))
    rates = {(name, producer): [] for name, producer, _ in ways}
    for round_ in range(rounds):
        for name, producer, run in ways:  # alternated: each round runs every way
            start, done = time.perf_counter(), 0
            for epoch in range(round_ * epochs, (round_ + 1) * epochs):
                done += run(epoch)
            rates[(name, producer)].append(done / (time.perf_counter() - start))
    for split, _ in streams.values():
        split.close()
    return {"model": model, "rates": {f"{k[0]}|{k[1]}": statistics.median(v) for k, v in rates.items()},
            "per_shard": per_shard, "read": read_time, "lent": alone["lent_per_shard"], "delay": delay,
            "epochs": epochs}


def big_store(model, path, max_memory, max_shards):
    """Train ``model`` on a store larger than ``max_memory``, streamed by
    load_streams under that ceiling (shuffled, prefetch 2 ahead): examples/s
    over at most ``max_shards`` shards, and the process's peak resident memory."""
    import resource

    from models import build

    from int8store import load_streams

    batch = BATCHES[model]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    train = load_streams(path, batch_size=batch, seed=0, max_memory=max_memory)[0]
    _, step = build(model, {"train": train.dataset}, batch, 0.1, n_out=1 + int(train.labels.max()))
    done, start = 0, time.perf_counter()
    for shard in train.epoch(0, progress=False):
        for index in range(shard.count // batch):
            step(index)
            done += batch
        if shard.number + 1 >= max_shards:
            break
    seconds = time.perf_counter() - start
    train.close()
    return {"model": model, "rate": done / seconds, "examples": done, "shard": train.shard_size,
            "store": Path(path).stat().st_size, "before": before,
            "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def table(results, threads):
    print("| model | OPENBLAS_NUM_THREADS | way | producer | examples/s | vs resident |")
    print("|---|---|---|---|---:|---:|")
    for result in results:
        base = result["rates"]["resident|-"]
        for key, rate in result["rates"].items():
            name, producer = key.split("|")
            producer = {"-": "-", "store": "the store", "in order": "the store",
                        "shuffled, copied": "the store",
                        "in order, copied": "the store", "in order, each epoch": "the store",
                        "slow": f"the store + {result['delay'] * 1e3:.0f} ms"}[producer]
            print(f"| {result['model']} | {threads} | {name} | {producer} | {rate:,.0f} "
                  f"| {rate / base:.2f} |")
    for result in results:
        print(f"{result['model']}, OPENBLAS_NUM_THREADS={threads}: {result['epochs']} epochs "
              "of each way a round; training on a shard takes "
              f"{result['per_shard'] * 1e3:.1f} ms, reading, checking and shuffling one from "
              f"the store {result['read'] * 1e3:.1f} ms, lending one in order (checked in the "
              f"mapped file) {result['lent'] * 1e3:.2f} ms")



def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=12000)
    parser.add_argument("--shard", type=int, default=3000, help="examples per shard")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=list(BATCHES), choices=list(BATCHES))
    parser.add_argument("--big-store", metavar="PATH",
                        help="also train from this store (bench/big_store.py writes one of "
                             "1 GB) under --max-memory, each model in a fresh process")
    parser.add_argument("--max-memory", default="256MiB")
    parser.add_argument("--big-shards", type=int, default=20,
                        help="shards trained on from the big store (default %(default)s)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    import json

    if args.child:
        if args.big_store:
            print(json.dumps(big_store(args.models[0], args.big_store, args.max_memory,
                                       args.big_shards)))
        else:
            print(json.dumps([measure(m, args.examples, args.shard, args.rounds)
                              for m in args.models]))
        return
    if args.big_store:
        print("| model | store (bytes) | --max-memory | shard (examples) | examples/s "
              "| peak RSS (MB) | RSS before loading (MB) |")
        print("|---|---:|---|---:|---:|---:|---:|")
        for model in args.models:
            child = subprocess.run([sys.executable, __file__, "--child", "--big-store",
                                    args.big_store, "--max-memory", args.max_memory,
                                    "--big-shards", str(args.big_shards), "--models", model],
                                   capture_output=True, text=True, check=True)
            r = json.loads(child.stdout.strip().splitlines()[-1])
            print(f"| {model} | {r['store']:,} | {args.max_memory} | {r['shard']:,} "
                  f"| {r['rate']:,.0f} | {r['peak'] / 1e6:,.0f} | {r['before'] / 1e6:,.0f} |")
        return
    print(f"{args.examples:,} generated 28x28 images in a store on disk, shards of "
          f"{args.shard:,}; medians of {args.rounds} alternated rounds")
    # The producer alone, in this process (which trains nothing: no BLAS
    # threads spinning on the other core), beside a memory copy.
    gb = producer_rate(write_store(scratch_folder("int8store-streaming-"), args.examples),
                       args.shard)
    print(f"producer, one thread, from the page cache: {gb['producer']:.2f} GB/s read, checked "
          f"and shuffled ({gb['seconds_per_shard'] * 1e3:.2f} ms a shard); {gb['lent']:.2f} GB/s "
          f"lent in order, checked in the mapped file ({gb['lent_per_shard'] * 1e3:.2f} ms a "
          f"shard); verify() "
          f"{gb['verify']:.2f} GB/s; a memory copy of 256 MiB {gb['copy']:.2f} GB/s "
          "(the same process, one after the other)")
    for threads in ("default", "1"):  # each in a fresh process
        env = blas_environment(threads)
        child = subprocess.run([sys.executable, __file__, "--child", "--examples", str(args.examples),
                                "--shard", str(args.shard), "--rounds", str(args.rounds),
                                "--models", *args.models],
                               env=env, capture_output=True, text=True, check=True)
        table(json.loads(child.stdout.strip().splitlines()[-1]), threads)


if __name__ == "__main__":
    main()
