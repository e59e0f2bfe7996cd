"""MNIST-like generated data for the benchmarks (no download needed)."""

import numpy as np


def digit_like_images(count, seed):
    """``count`` 28x28 uint8 images and labels: scikit-learn's 8x8 digits
    upscaled to 24x24, shifted within the frame, with a little noise, so that
    they compress and train about as MNIST does."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(digits.images), count)
    big = np.kron(digits.images[pick], np.ones((1, 3, 3))) * 15.9  # (count, 24, 24)
    images = np.zeros((count, 28, 28), dtype=np.float64)
    shifts = rng.integers(0, 5, (count, 2))
    for (dy, dx) in {tuple(s) for s in shifts}:
        mask = (shifts[:, 0] == dy) & (shifts[:, 1] == dx)
        images[mask, dy:dy + 24, dx:dx + 24] = big[mask]
    noise = rng.integers(0, 12, images.shape) * (images > 0)
    return np.clip(images + noise, 0, 255).astype(np.uint8), digits.target[pick].astype(np.uint8)
