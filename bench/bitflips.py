"""Single-bit flips of a small store: does any flip change the data silently, or hang?

Writes a small store (uint8 images with class names), then, for every bit of
its metadata (the manifest's user block and HDF5's own metadata: every byte
outside the data chunks and label ranges) and for a sample of bits of its
data, flips that bit in a copy and does what ``load_data``, ``info`` and
``verify`` do: read and plan the splits, decode every split, describe the
store, verify it. Each trial ends in one of:

* ``error``: a named int8store error (the promise for damage that matters);
* ``same``: everything read equals the original (a flip in bytes that carry
  no meaning, which the reader may ignore);
* ``changed``: data, labels, shape, names or the description differ without
  an error — the failure this format exists to prevent;
* ``crash``: any other exception (a traceback instead of a message);
* ``hang``: no answer within the time limit.

Trials run in worker processes with a time limit each, so a hang is counted,
not suffered.

    python bench/bitflips.py                 # every metadata bit, 4096 data bits
    python bench/bitflips.py --data-bits 0 --stride 7 --json   # quicker, machine-readable
"""

import argparse
import concurrent.futures as futures
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

OUTCOMES = ("error", "same", "changed", "crash", "hang")


def write_small_store(folder):
    """A store with 3 splits of 4x4 grey images, class names, and its contents."""
    from int8store.codes.survey import quantize
    from int8store.store.writer import StoreWriter

    rng = np.random.default_rng(7)
    counts = {"train": 40, "valid": 8, "test": 12}
    images = {n: rng.integers(0, 256, (c, 4, 4), dtype=np.uint8) for n, c in counts.items()}
    labels = {n: rng.integers(0, 3, c) for n, c in counts.items()}
    path = Path(folder) / "small.h5"
    encoding = quantize(np.zeros(1, np.uint8))[1]
    with StoreWriter(path, encoding, (4, 4), labels, label_names=["cat", "dog", "eel"],
                     source="bitflips", command_line="bench/bitflips.py") as writer:
        for name in counts:
            writer.append(name, quantize(images[name])[0])
    return path


def observe(path):
    """What load_data, info and verify see of the store at ``path``."""
    from int8store.cli import describe
    from int8store.plan.splits import plan_splits
    from int8store.sources import read_source
    from int8store.store.reader import open_store

    plan = plan_splits(read_source(str(path)))
    seen = {"names": plan.label_names, "shape": plan.image_shape, "splits": list(plan.splits)}
    for name in plan.splits:
        seen[name] = (plan.encoding.decode(plan.codes(name), np.float64).tolist(),
                      plan.labels(name).tolist())
    seen["info"] = describe(path).split("\n", 1)[1]  # below the line naming the path
    open_store(path).verify()
    return seen


def trial(args):
    """Flip bit ``bit`` of byte ``offset`` of ``original`` in a scratch copy and observe."""
    original, offset, bit, expected, scratch = args
    from int8store.errors import Int8StoreError

    data = bytearray(original)
    data[offset] ^= 1 << bit
    path = Path(scratch) / f"flip-{os.getpid()}.h5"
    path.write_bytes(data)
    try:
        seen = observe(path)
    except Int8StoreError:
        return "error"
    except Exception as error:  # noqa: BLE001 - counted and reported, not hidden
        return f"crash: {type(error).__name__}: {error}"
    return "same" if json.dumps(seen, default=str) == expected else "changed"


def metadata_offsets(path):
    """Byte offsets outside the data ranges the manifest lists."""
    from int8store.store.manifest import data_ranges, read_manifest

    manifest = read_manifest(path)
    inside = np.zeros(manifest["file_size"], dtype=bool)
    for offset, size in data_ranges(manifest, path):
        inside[offset:offset + size] = True
    return np.flatnonzero(~inside), np.flatnonzero(inside)


def padding_offsets(path):
    """Byte offsets of the zeros between the manifest's text and the end of
    the user block (the reader checks them all alike: zero, or damaged)."""
    from int8store.store.manifest import read_manifest

    block = read_manifest(path)["userblock_size"]
    with open(path, "rb") as f:
        text = len(f.read(block).rstrip(b"\0"))
    return np.arange(text, block)


def run(data_bits=4096, stride=1, limit=10.0, workers=None, seed=0, padding_stride=None):
    # (a hung worker, killed, may still hold its file: removal is best effort)
    with tempfile.TemporaryDirectory(prefix="bitflips-", ignore_cleanup_errors=True) as scratch:
        return _flips(scratch, data_bits, stride, limit, workers, seed, padding_stride or stride)


def _flips(scratch, data_bits, stride, limit, workers, seed, padding_stride):
    path = write_small_store(scratch)
    original = path.read_bytes()
    expected = json.dumps(observe(path), default=str)
    meta, data = metadata_offsets(path)
    padding = padding_offsets(path)
    if padding_stride != stride and len(padding):
        # the padding sparser, its last byte too; every other metadata byte at ``stride``
        sampled = np.concatenate([meta[~np.isin(meta, padding)][::stride],
                                  np.union1d(padding[::padding_stride], padding[-1:])])
    else:
        sampled = meta[::stride]
    rng = np.random.default_rng(seed)
    jobs = [(int(o), b) for o in sampled for b in range(8)]
    sampled = rng.choice(len(data) * 8, size=min(data_bits, len(data) * 8), replace=False)
    jobs += [(int(data[s // 8]), int(s % 8)) for s in sampled]
    counts = {"metadata": dict.fromkeys(OUTCOMES, 0), "data": dict.fromkeys(OUTCOMES, 0)}
    examples = []
    start = time.perf_counter()
    workers = workers or max(1, min(4, os.cpu_count() or 1))
    pending = list(jobs)
    while pending:
        pool = futures.ProcessPoolExecutor(workers)
        submitted = [(job, pool.submit(trial, (original, job[0], job[1], expected, scratch)))
                     for job in pending]
        pending = []
        hung = False
        for index, (job, future) in enumerate(submitted):
            region = "data" if job[0] in set_of(data) else "metadata"
            try:
                outcome = future.result(timeout=None if hung else limit)
            except futures.TimeoutError:
                outcome, hung = "hang", True
                # The pool is stuck: rerun what was not answered in a fresh one.
                pending = [j for j, f in submitted[index + 1:]]
                break
            kind = outcome.split(":")[0]
            counts[region][kind] += 1
            if kind in ("changed", "crash") and len(examples) < 10:
                examples.append((job, outcome))
        if hung:
            counts[region]["hang"] += 1
            for process in pool._processes.values():
                process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
    return {"store_bytes": len(original), "metadata_bytes": int(len(meta)),
            "padding_bytes": int(len(padding)), "data_bytes": int(len(data)), "stride": stride,
            "padding_stride": padding_stride, "trials": len(jobs),
            "seconds": round(time.perf_counter() - start, 1), "counts": counts,
            "examples": examples}


_SETS = {}


def set_of(array):
    key = id(array)
    if key not in _SETS:
        _SETS[key] = set(int(v) for v in array)
    return _SETS[key]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-bits", type=int, default=4096, help="data bits sampled")
    parser.add_argument("--stride", type=int, default=1,
                        help="flip the bits of every STRIDE-th metadata byte (1: all)")
    parser.add_argument("--padding-stride", type=int, default=None,
                        help="in the zeros that pad the user block after the manifest, every "
                             "PADDING_STRIDE-th byte and the last (default: STRIDE)")
    parser.add_argument("--limit", type=float, default=10.0, help="seconds before a trial is a hang")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    result = run(args.data_bits, args.stride, args.limit, padding_stride=args.padding_stride)
    if args.json:
        print(json.dumps(result))
        return 0
    which = "every byte" if args.stride == 1 else f"every {args.stride}th byte"
    print(f"store of {result['store_bytes']:,} bytes: {result['metadata_bytes']:,} bytes of "
          f"metadata ({which}, all 8 bits), {result['data_bytes']:,} of data "
          f"({args.data_bits} bits sampled); {result['trials']:,} flips in {result['seconds']} s")
    print(f"| region | flips | {' | '.join(OUTCOMES)} |")
    print("|---|---:|" + "---:|" * len(OUTCOMES))
    for region, row in result["counts"].items():
        print(f"| {region} | {sum(row.values()):,} | " + " | ".join(f"{row[o]:,}" for o in OUTCOMES) + " |")
    for job, outcome in result["examples"]:
        print(f"  byte {job[0]} bit {job[1]}: {outcome}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
