"""Who pays for reading a streamed shard when training keeps every core busy.

bench/streaming.py found logistic regression streamed shuffled at well under
90 % of resident with OpenBLAS's default threads on a 2-core machine when
shards were copied (read, checked and shuffled into buffers), and at 90 % or
more with one BLAS thread; shards are lent since, and copied only in JAX
mode or when asked (``reader="process"``, ``"threads"``). This bench takes
the copying readers apart, on the same generated store (12,000 28x28
images, shards of 3,000, shuffled, batch 600, floatX=float32, the C
backend), each way's epochs alternated in one process:

- resident: the whole split in the int8 shared variable (the reference);
- process: shards copied ahead by the reading process (``reader="process"``);
- process, SCHED_IDLE / nice 19: the same, the reader's scheduling lowered
  by this bench (the library leaves it alone);
- serial: no prefetch, each shard copied in the trainer when it is needed
  (``reader="threads"``, ``prefetch=0``).

A second table weighs **the shuffle in the graph** with copied shards, as
first weighed before lent shards were built (they gather in the step with
int8store's GatherRows op: bench/streaming.py). The reader copies and checks
a shard's rows in the split's order (no shuffling pass), and each step
gathers its minibatch by the shard's order vector (``x[order[i*B:(i+1)*B]]``,
the graph's own advanced index; the shards are still visited in a shuffled
order). Its ways:
resident, gathered by an order vector (what the gather costs a step);
shards ready in memory (nothing to read: the ceiling of any reader);
serial (read in the trainer); process (read two ahead by the library's
reading process).

Each table runs in a fresh process under one BLAS setting: the defaults;
``OPENBLAS_THREAD_TIMEOUT=4`` (OpenBLAS's idle threads go to sleep at once
instead of spinning for 2**28 cycles, about a tenth of a second, after each
call); ``OPENBLAS_NUM_THREADS=1``. After the table, what reading one shard
costs in each of those processes, read after read and right after training on a shard
(the steps evict the store's pages and the buffers from the caches), and
read after read with its rows left in the split's order.

    python bench/reader_contention.py [--rounds 21]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tutorials"), str(HERE)]

from blas_threads import blas_environment  # noqa: E402 (bench/ on the path first)
from scratch import scratch_folder  # noqa: E402

SETTINGS = {"default": {}, "OPENBLAS_THREAD_TIMEOUT=4": {"OPENBLAS_THREAD_TIMEOUT": "4"},
            "OPENBLAS_NUM_THREADS=1": {"threads": "1"}}
WAYS = ("resident", "process", "process, SCHED_IDLE", "process, nice 19", "serial")
GRAPH_WAYS = ("resident, gathered", "shards ready", "serial, rows in order",
              "process, rows in order")
EXAMPLES, SHARD, BATCH = 12000, 3000, 600


def measure(rounds):
    import numpy as np
    from models import build
    from streaming import write_store

    from int8store import SharedDataset
    from int8store.store.reader import open_store
    from int8store.order.shuffle import permutation
    from int8store.streaming.sources import StoreShards, inverse
    from int8store.streaming.split import StreamingSplit

    path = write_store(scratch_folder("int8store-contention-"), EXAMPLES)
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
                               prefetch=0 if way == "serial" else 2, dtype="float32",
                               reader="threads" if way == "serial" else "process")
        _, train = build("logistic regression", {"train": split.dataset, "all": resident}, BATCH, 0.13)

        def streamed_epoch(epoch, split=split, train=train):
            for _, i, _ in split.minibatches(epoch, BATCH):
                train(i)
        if way != "serial":
            streamed_epoch(0)  # starts the reader, which stays for the next epochs
            pid = split._reader._process._process.pid  # (no public handle: a bench's probe)
            if way.endswith("SCHED_IDLE"):
                os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
            elif way.endswith("nice 19"):
                os.setpriority(os.PRIO_PROCESS, pid, 19)
        runs[way] = streamed_epoch
        splits.append(split)
    graph_ways, graph_close = _graph_shuffle_ways(store, path, codes, labels)
    runs.update(graph_ways)
    rates = {way: [] for way in runs}
    for epoch in range(1, rounds + 1):  # alternated: each round runs every way once
        for way, run in runs.items():
            start = time.perf_counter()
            run(epoch)
            rates[way].append(batches * BATCH / (time.perf_counter() - start))
    for split in splits:
        split.close()
    graph_close()

    # What one shard costs to read, check and shuffle here: read after read,
    # and each read right after the steps that train on a shard.
    source = StoreShards(path, "train")
    out = np.empty((SHARD, 28 * 28), np.int8)
    costs = {"read after read": [], "between steps": [], "in order": []}
    for where, times in costs.items():
        for r in range(40):
            if where == "between steps":
                for i in range(SHARD // BATCH):
                    train_resident(i)
            positions = None if where == "in order" else inverse(permutation(SHARD, 0, r, 0))
            start = time.perf_counter()
            source.read(0, SHARD, out, positions)
            times.append(time.perf_counter() - start)
    return {"rates": {way: statistics.median(v) for way, v in rates.items()},
            "read": {where: statistics.median(v) for where, v in costs.items()}}


class _Gathered:
    """A split for models.build whose minibatch ``index`` is its rows
    ``order[index*B:(index+1)*B]`` (that slice taken by int8store's
    static-size minibatch op): gathered in the graph, then widened."""

    def __init__(self, dataset, order):
        self.dataset, self.order, self.y = dataset, order, dataset.y
        self.n_features, self.image_shape = dataset.n_features, dataset.image_shape

    def minibatch(self, index, size, augment=False):  # (never augmented)
        from int8store import dequantize
        from int8store.nnet import minibatch

        rows = minibatch(self.order, index, size)
        data = self.dataset.data
        features = data.reshape((data.shape[0], self.n_features))
        return dequantize(features[rows], self.dataset.encoding, dtype="float32"), self.y[rows]


def _gathering_step(dataset, order):
    """The logistic SGD step on the rows of ``dataset`` that ``order`` gathers."""
    from models import build

    # (ten classes: a shard's labels are zeros until its first shard is loaded)
    return build("logistic regression", {"train": _Gathered(dataset, order)}, BATCH, 0.13,
                 n_out=10)[1]


def _graph_shuffle_ways(store, path, codes, labels):
    """The ways of the second table (see the module docstring), and a
    function that ends their reading process."""
    import numpy as np

    from int8store import SharedDataset
    from int8store.backend import tensor_library
    from int8store.backend.ops.permutation import shuffled
    from int8store.streaming.buffers import BufferPool
    from int8store.streaming.shard_process import ShardProcess
    from int8store.streaming.sources import StoreShards

    shared = tensor_library().shared
    n_shards, row = EXAMPLES // SHARD, 28 * 28
    resident = SharedDataset(codes, labels, store.encoding, image_shape=(28, 28), name="train",
                             dtype="float32")
    resident_order = shared(np.arange(EXAMPLES, dtype=np.int64))
    train_resident = _gathering_step(resident, resident_order)
    shard = SharedDataset(np.zeros((SHARD, row), np.int8), np.zeros(SHARD, np.int32),
                          store.encoding, image_shape=(28, 28), name="shard", dtype="float32")
    order = shared(np.arange(SHARD, dtype=np.int64))
    train = _gathering_step(shard, order)
    flat, labels = codes.reshape(EXAMPLES, row), np.asarray(labels, np.int32)
    ready = [np.ascontiguousarray(flat[k * SHARD:(k + 1) * SHARD]) for k in range(n_shards)]
    source = StoreShards(path, "train")
    pool = BufferPool("train", 4, SHARD, row, shared=True)  # two in flight, one in use, one spare
    reader = ShardProcess(store, "train", False, 0.0, pool, SHARD, row)
    # The reading process's jobs run on across epochs, as the library's do:
    # (epoch, shard) in each epoch's shuffled order, two ahead.
    def visits(epoch):
        return np.random.default_rng((0, epoch)).permutation(n_shards)

    jobs = ((e, k) for e in range(1, 1 << 30) for k in visits(e))
    asked = []

    def ask():
        epoch, k = next(jobs)
        buffer = len(asked) % len(pool.buffers)
        reader.submit(buffer, epoch, k, k * SHARD, (k + 1) * SHARD)
        asked.append((epoch, k, buffer))

    def train_on(epoch, k, rows):
        shard.data.set_value(rows, borrow=True)
        shard.y.set_value(labels[k * SHARD:(k + 1) * SHARD], borrow=True)
        # the shard's order as the C-mode trainer draws it (in C)
        order.set_value(shuffled(np.arange(SHARD, dtype=np.int32), 0, epoch, k)[0], borrow=True)
        for i in range(SHARD // BATCH):
            train(i)

    def resident_gathered(epoch):
        permutation = np.random.default_rng((0, epoch)).permutation(EXAMPLES)
        resident_order.set_value(permutation, borrow=True)
        for i in range(EXAMPLES // BATCH):
            train_resident(i)

    def shards_ready(epoch):
        for k in visits(epoch):
            train_on(epoch, k, ready[k])

    serial_buffers = [np.empty((SHARD, row), np.int8) for _ in range(2)]

    def serial(epoch):
        for n, k in enumerate(visits(epoch)):
            rows = serial_buffers[n % 2]
            source.read(k * SHARD, (k + 1) * SHARD, rows)
            train_on(epoch, k, rows)

    def process(epoch):
        while len(asked) < 2:
            ask()
        for _ in range(n_shards):
            done = asked[-2]  # the oldest job asked
            reader.wait_reply()
            reader.take(done[2], done[1])
            ask()
            if done[0] != epoch:
                raise RuntimeError(f"the reader's jobs ran out of step: {done} in epoch {epoch}")
            train_on(epoch, done[1], pool.buffers[done[2]].codes)

    ways = {GRAPH_WAYS[0]: resident_gathered, GRAPH_WAYS[1]: shards_ready, GRAPH_WAYS[2]: serial,
            GRAPH_WAYS[3]: process}
    return ways, reader.end


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
    notes, graph_rows = [], []
    for setting, extra in SETTINGS.items():  # each in a fresh process
        child = subprocess.run([sys.executable, __file__, "--child", "--rounds", str(args.rounds)],
                               env=blas_environment(**extra), capture_output=True, text=True,
                               check=True)
        result = json.loads(child.stdout.strip().splitlines()[-1])
        rates = result["rates"]
        base = rates["resident"]
        cells = [f"{base:,.0f} ex/s"] + [f"{rates[w] / base:.2f}" for w in WAYS[1:]]
        print(f"| {setting} | " + " | ".join(cells) + " |")
        graph_rows.append(f"| {setting} | " + " | ".join(f"{rates[w] / base:.2f}" for w in GRAPH_WAYS)
                          + " |")
        notes.append(f"{setting}: reading a shard takes {result['read']['read after read'] * 1e3:.2f} ms "
                     f"read after read, {result['read']['between steps'] * 1e3:.2f} ms right after "
                     f"training on a shard; {result['read']['in order'] * 1e3:.2f} ms read after read "
                     "with its rows in the split's order (no shuffling pass)")
    print("\n".join(notes))
    print("\nthe shuffle in the graph, copied shards, against the same resident rate:")
    print("| BLAS setting | " + " | ".join(GRAPH_WAYS) + " |")
    print("|---|" + "---:|" * len(GRAPH_WAYS))
    print("\n".join(graph_rows))

if __name__ == "__main__":
    main()
