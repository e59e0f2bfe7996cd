"""Step time and device bytes in JAX mode, for the logistic-regression (batch
600) and LeNet5 (batch 500) tutorials on generated 28x28 data, three ways:

(a) host-fed: each step's float32 minibatch is set from host memory (the
    ``feed_dict`` way) and copied to the device by the call;
(b) float32 resident: the float32 images placed on the device once;
(c) int8 resident: the int8 images placed on the device once, each minibatch
    widened to float32 on the device.

All three keep the parameters on the device; (c) is also timed with the library's
default parameter handling (updates copied back to numpy after each call).
Everything is measured alternately in one run, on JAX's default device (a GPU
when JAX sees one). Targets: (c) <= 1.05 x (b); on a GPU (c) <= 0.5 x (a) for
logistic regression; device bytes of (c) exactly a quarter of (b).

    python bench/device_resident.py [--rounds 9] [--steps 10] [--examples 12000]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tutorials"), str(HERE)]

import numpy as np  # noqa: E402

from synthetic import digit_like_images  # noqa: E402

from int8store import SharedDataset, keep_on_device, place  # noqa: E402
from models import MODELS, build as build_model  # noqa: E402
WAYS = ("host-fed float32", "resident float32", "resident int8",
        "resident int8, params to host")


def build(model, splits, batch_size, rate, keep_params=True):
    params, train = build_model(model, splits, batch_size, rate, mode="jax")
    if keep_params:
        keep_on_device(params, [train])
    return train


def resident(images, labels, storage):
    return {name: place(SharedDataset.from_arrays(images, labels, storage=storage, name=name), "jax")
            for name in ("train", "valid", "test")}


def host_fed(images, labels, batch_size):
    """Splits one minibatch long, held in host memory, refilled before each step."""
    splits = {name: SharedDataset.from_arrays(images[:batch_size], labels[:batch_size],
                                              storage="float", name=name)
              for name in ("train", "valid", "test")}
    pixels = (images.reshape(len(images), -1).astype(np.float32) / np.float32(256))
    labels32 = labels.astype(np.int32)
    train = splits["train"]

    def feed(index):
        rows = slice(index * batch_size, (index + 1) * batch_size)
        train.data.set_value(pixels[rows], borrow=True)
        train.y.set_value(labels32[rows], borrow=True)

    return splits, feed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--examples", type=int, default=12000)
    args = parser.parse_args(argv)
    import jax

    device = jax.devices()[0]
    images, labels = digit_like_images(args.examples, seed=0)
    rows = []
    for model, (batch_size, rate) in MODELS.items():
        n_batches = args.examples // batch_size
        fed_splits, feed = host_fed(images, labels, batch_size)
        steps, device_bytes = {}, {}
        fed_train = build(model, fed_splits, batch_size, rate)
        steps[WAYS[0]] = lambda i, f=fed_train: (feed(i % n_batches), f(0))
        device_bytes[WAYS[0]] = 0
        for way, storage, keep in ((WAYS[1], "float", True), (WAYS[2], "int8", True),
                                   (WAYS[3], "int8", False)):
            splits = resident(images, labels, storage)
            train = build(model, splits, batch_size, rate, keep_params=keep)
            steps[way] = lambda i, f=train: f(i % n_batches)
            device_bytes[way] = splits["train"].nbytes
        for step in steps.values():  # compile and warm up, each done before the next
            for i in range(3):
                jax.block_until_ready(step(i))
        times = {way: [] for way in steps}
        for round_ in range(args.rounds):
            order = list(steps) if round_ % 2 == 0 else list(reversed(steps))
            for way in order:  # (each way's last step waited for: the next starts idle)
                start = time.perf_counter()
                for i in range(args.steps):
                    out = steps[way](i)
                jax.block_until_ready(out)
                times[way].append((time.perf_counter() - start) / args.steps)
        median = {way: statistics.median(t) for way, t in times.items()}
        for way in steps:
            rows.append((model, batch_size, way, median[way], median[way] / median[WAYS[1]],
                         median[way] / median[WAYS[0]], device_bytes[way]))
    from int8store.backend import activate
    print(f"{activate().describe()} on {device.platform}: {device.device_kind}; "
          f"{args.examples} training images of 28x28; medians of {args.rounds} alternating "
          f"rounds of {args.steps} steps")
    print(f"{'model':20} {'batch':>5}  {'way':34} {'ms/step':>9} {'vs resident f32':>15} "
          f"{'vs host-fed':>11} {'image bytes on device':>21}")
    for model, batch, way, seconds, vs_resident, vs_fed, nbytes in rows:
        print(f"{model:20} {batch:>5}  {way:34} {1000 * seconds:>9.3f} {vs_resident:>15.3f} "
              f"{vs_fed:>11.3f} {nbytes:>21,}")


if __name__ == "__main__":
    main()
