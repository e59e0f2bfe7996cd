"""scikit-learn's bundled 8x8 digits: the offline dataset for demos and tests."""

import numpy as np

from ..errors import SourceFormatError
from . import SourceData, Split

__all__ = ["read_digits", "DIGITS_SPLIT_SIZES"]

#: Examples in train, valid and test (1,797 in all), after a fixed shuffle.
DIGITS_SPLIT_SIZES = (1197, 300, 300)
_SHUFFLE_SEED = 1234
# The digits' pixels are grey levels 0..16.
_LEVELS = 16


def _bundled_digits():
    """scikit-learn's ``digits.csv.gz`` read as ``load_digits`` reads it,
    without importing ``sklearn.datasets``: that import (scipy.stats and
    more) took about 2 s of CPU, a third of a short tutorial run's start.
    ``(images, labels)``, or None where the file is not where scikit-learn
    has always kept it (then ``load_digits`` reads it)."""
    import gzip
    import importlib.util
    import os

    spec = importlib.util.find_spec("sklearn")  # (finds the package without importing it)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(folder, "datasets", "data", "digits.csv.gz")
        if os.path.isfile(path):
            with gzip.open(path, "rt") as table:
                data = np.loadtxt(table, delimiter=",")
            return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int)
    return None


def read_digits():
    """The 1,797 digits as uint8 8x8 images (levels 0..16), split 1197/300/300."""
    bundled = _bundled_digits()
    if bundled is None:
        from sklearn.datasets import load_digits

        digits = load_digits()
        bundled = digits.images, digits.target
    pixels, target = bundled
    images = pixels.astype(np.uint8)
    if images.shape != (1797, 8, 8) or not np.array_equal(images, pixels):
        raise SourceFormatError("scikit-learn's digits: expected 1,797 8x8 images of integer "
                                f"grey levels 0..16 (found values of shape {pixels.shape})")
    order = np.random.RandomState(_SHUFFLE_SEED).permutation(len(images))
    ends = np.cumsum(DIGITS_SPLIT_SIZES)
    splits = {}
    for name, start, end in zip(("train", "valid", "test"), ends - DIGITS_SPLIT_SIZES, ends):
        chosen = order[start:end]
        splits[name] = Split.from_arrays(name, images[chosen], target[chosen], "digits")
    return SourceData(splits, origin="digits (scikit-learn)", divisor=_LEVELS, keeps_order=True)
