"""The chunk checksum's speed: SHA-256 (store format 2), BLAKE3 and XXH3
(format 3 uses XXH3-128) over 1 MiB chunks, one thread, the best of
``--rounds`` passes over 64 MiB, the hashers interleaved (each round passes
each of them once, in turn, so that a busy moment of the machine falls on
all); beside a plain memory copy of the same bytes, and whether each hasher
lets another thread run meanwhile (it releases the GIL).

    python bench/checksums.py [--rounds 5]   (BLAKE3 needs 'pip install blake3')
"""

import argparse
import hashlib
import threading
import time

import numpy as np

CHUNK = 1 << 20
DATA = np.random.default_rng(0).integers(0, 256, 64 << 20, dtype=np.uint8)


def hashers():
    import xxhash

    found = {"SHA-256 (format 2)": lambda c: hashlib.sha256(c).digest(),
             "XXH3-128 (format 3)": xxhash.xxh3_128_digest,
             "XXH3-64": xxhash.xxh3_64_digest}
    try:
        import blake3
        found["BLAKE3, one thread"] = lambda c: blake3.blake3(c).digest()
    except ImportError:
        pass
    return found


def one_pass(function):
    """Seconds ``function`` takes over DATA, a chunk at a time."""
    start = time.perf_counter()
    for i in range(0, DATA.nbytes, CHUNK):
        function(DATA[i:i + CHUNK])
    return time.perf_counter() - start


def rates(functions, rounds):
    """GB/s of each of ``functions`` (a dict) over DATA: the best of
    ``rounds`` passes, the functions taking turns within each round."""
    best = dict.fromkeys(functions, float("inf"))
    for _ in range(rounds):
        for name, function in functions.items():
            best[name] = min(best[name], one_pass(function))
    return {name: DATA.nbytes / seconds / 1e9 for name, seconds in best.items()}


def other_thread_speed(function):
    """How fast a pure-Python loop runs while ``function`` hashes DATA in
    another thread, against alone (1.0: the hasher does not hold the GIL)."""
    def spin(seconds):
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            count += 1
        return count

    alone = spin(0.3)
    done = threading.Event()

    def hash_for_a_while():
        while not done.is_set():
            for i in range(0, DATA.nbytes, CHUNK):
                function(DATA[i:i + CHUNK])
    worker = threading.Thread(target=hash_for_a_while)
    worker.start()
    meanwhile = spin(0.3)
    done.set()
    worker.join()
    return meanwhile / alone


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5,
                        help="passes of each hasher, interleaved; the best is kept")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: give 1 or more")
    out = np.empty_like(DATA)
    functions = dict(hashers())
    copy_name = "(a memory copy of the 64 MiB, np.copyto)"
    functions[copy_name] = lambda chunk: np.copyto(out[:len(chunk)], chunk)
    measured = rates(functions, args.rounds)
    print("| checksum | GB/s, 1 MiB chunks, one thread | Python thread's speed meanwhile |")
    print("|---|---:|---:|")
    for name, function in functions.items():
        meanwhile = "-" if name == copy_name else f"{other_thread_speed(function):.2f}"
        print(f"| {name} | {measured[name]:.2f} | {meanwhile} |")


if __name__ == "__main__":
    main()
