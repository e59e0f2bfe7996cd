"""Resuming mid-epoch reads nothing before the resume point, on a store
larger than a gigabyte: which of an epoch's shards a stream reads when a
run resumed from its checkpoint starts at minibatch ``--step``, against the
same epoch read from its start, and how long each takes to give its first
minibatch.

The store is :mod:`big_store`'s (1.3 million generated 28x28 training
images, 1.04 GB; made in a temporary folder unless ``--store`` names one).
The training split is streamed shuffled (``--seed``) in shards of
``--max-device-bytes``; the stream's source counts the rows it is asked
to read or lend.

    python bench/resume_reads.py [--store PATH] [--step 1000] [--epoch 3] [--seed 1]
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from big_store import write_store  # noqa: E402

BATCH = 600


def first_minibatch(store, epoch, step, seed, max_device_bytes):
    """``(seconds to the first minibatch, the shards read, the epoch's visit
    order, where the start lies)`` of a stream started at ``step``."""
    from int8store import StreamingSplit
    from int8store.streaming.split import fitting_shard_size
    from int8store.streaming.sources import StoreShards

    source = StoreShards(store, "train")
    starts = []
    for method in ("lend", "read"):
        original = getattr(source, method)

        def counted(start, stop, *rest, original=original):
            starts.append(start)
            return original(start, stop, *rest)

        setattr(source, method, counted)
    row_bytes = int(source.row_shape[0] * source.row_shape[1])
    size = fitting_shard_size(max_device_bytes, row_bytes, BATCH)
    stream = StreamingSplit(source, size, source.store.encoding, (28, 28), seed=seed, prefetch=0,
                            reader="threads", workers=1)
    try:
        began = time.perf_counter()
        number = next(iter(stream.minibatches(epoch, BATCH, start=step))).number
        seconds = time.perf_counter() - began
        assert number == step
        where = stream.layout.start_of(epoch, BATCH, step)
        read = sorted({start // size for start in starts})
        return seconds, read, stream.shard_order(epoch), where
    finally:
        stream.close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store")
    parser.add_argument("--examples", type=int, default=1_300_000)
    parser.add_argument("--step", type=int, default=1000)
    parser.add_argument("--epoch", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-device-bytes", type=int, default=16 << 20)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        store = args.store or write_store(Path(folder) / "big.h5", args.examples)
        size = Path(store).stat().st_size
        print(f"store: {size / 1e9:.2f} GB; training split streamed shuffled (seed "
              f"{args.seed}), batch {BATCH}, shards of at most {args.max_device_bytes:,} bytes")
        print("| start | seconds to its first minibatch | shards read before it | shards read |")
        print("|---|---:|---:|---|")
        first_minibatch(store, args.epoch + 1, 0, args.seed, args.max_device_bytes)  # warm-up
        for step in (0, args.step):
            seconds, read, order, (place, _, index) = first_minibatch(
                store, args.epoch, step, args.seed, args.max_device_bytes)
            before = set(order[:place])
            print(f"| epoch {args.epoch}, minibatch {step} (shard {place + 1} of {len(order)} "
                  f"in the epoch's order, its minibatch {index}) | {seconds:.3f} | "
                  f"{len(before & set(read))} | {read} |")


if __name__ == "__main__":
    main()
