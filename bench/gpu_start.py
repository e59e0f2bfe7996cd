"""The start of a run on a GPU: importing JAX, starting its backends, the
first transfer, and whether JAX's memory pool (``XLA_PYTHON_CLIENT_PREALLOCATE``)
or a transfer beside the imports changes it. One way a process:

    python bench/gpu_start.py serial      # a 1-byte transfer, import PyTensor, 39 MB
    python bench/gpu_start.py overlap     # the 1-byte transfer in a thread beside the import
    python bench/gpu_start.py bigfirst    # 39 MB first (what load_data does), then the import

``bash bench/gpu_check.sh 5`` runs each with and without the pool, fresh
processes interleaved, and the logistic tutorial whole both ways.
"""

import sys
import threading
import time


def main(way):
    began = time.perf_counter()
    import jax
    import numpy as np

    imported = time.perf_counter()
    jax.devices()
    started = time.perf_counter()
    images = np.zeros((50000, 784), np.int8)  # MNIST's training images as int8

    def put(array):
        jax.device_put(array).block_until_ready()

    def import_library():
        import pytensor.tensor  # noqa: F401

    parts = [("import jax", imported - began), ("its backends", started - imported)]
    if way == "serial":
        steps = [("1 byte", lambda: put(np.zeros(1, np.int8))), ("import pytensor", import_library),
                 ("39 MB", lambda: put(images))]
    elif way == "bigfirst":
        steps = [("39 MB", lambda: put(images)), ("import pytensor", import_library)]
    elif way == "overlap":
        beside = threading.Thread(target=put, args=(np.zeros(1, np.int8),), daemon=True)
        steps = [("import pytensor beside 1 byte", lambda: (beside.start(), import_library())),
                 ("then waited", beside.join), ("39 MB", lambda: put(images))]
    else:
        sys.exit(f"unknown way {way!r}: serial, overlap or bigfirst")
    for name, step in steps:
        before = time.perf_counter()
        step()
        parts.append((name, time.perf_counter() - before))
    print(f"{way}: " + ", ".join(f"{name} {seconds:.2f}" for name, seconds in parts)
          + f"; total {time.perf_counter() - began:.2f} s")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "serial")
