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


def read_digits():
    """The 1,797 digits as uint8 8x8 images (levels 0..16), split 1197/300/300."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = digits.images.astype(np.uint8)
    if not np.array_equal(images, digits.images):
        raise SourceFormatError("scikit-learn's digits: expected integer grey levels 0..16")
    order = np.random.RandomState(_SHUFFLE_SEED).permutation(len(images))
    ends = np.cumsum(DIGITS_SPLIT_SIZES)
    splits = {}
    for name, start, end in zip(("train", "valid", "test"), ends - DIGITS_SPLIT_SIZES, ends):
        chosen = order[start:end]
        splits[name] = Split.from_arrays(name, images[chosen], digits.target[chosen], "digits")
    return SourceData(splits, origin="digits (scikit-learn)", divisor=_LEVELS, keeps_order=True)
