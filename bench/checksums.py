"""The chunk checksum's speed: SHA-256 (store format 2), BLAKE3 and XXH3
(format 3 uses XXH3-128) over 1 MiB chunks, one thread, best of several
passes over 64 MiB; beside a plain memory copy of the same bytes, and
whether each hasher lets another thread run meanwhile (it releases the GIL).

    python bench/checksums.py        (BLAKE3 needs 'pip install blake3')
"""

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


def rate(function, repeats=5):
    """GB/s of ``function`` over DATA, a chunk at a time; best of ``repeats``."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for i in range(0, DATA.nbytes, CHUNK):
            function(DATA[i:i + CHUNK])
        best = min(best, time.perf_counter() - start)
    return DATA.nbytes / best / 1e9


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


def main():
    out = np.empty_like(DATA)
    print("| checksum | GB/s, 1 MiB chunks, one thread | Python thread's speed meanwhile |")
    print("|---|---:|---:|")
    for name, function in hashers().items():
        print(f"| {name} | {rate(function):.2f} | {other_thread_speed(function):.2f} |")
    from convert import timed  # (bench/convert.py's)

    copy = min(timed(lambda: np.copyto(out, DATA)) for _ in range(5))
    print(f"| (a memory copy of the 64 MiB, np.copyto) | {DATA.nbytes / copy / 1e9:.2f} | - |")


if __name__ == "__main__":
    main()
