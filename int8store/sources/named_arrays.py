"""Finding the image and label arrays of each split in a container of named
arrays (an ``.npz`` archive, an HDF5 file): by keys given, by names such as
``x_train``/``y_train``, or, for a single pair, by their shapes; and
:func:`as_images`, the check that an array found holds images."""

import re

import numpy as np

from ..codes.vocabulary import SPLITS
from ..errors import SourceFormatError
from ..runtime.words import nearest

__all__ = ["choose_keys", "as_images", "KEYS_HELP"]

_IMAGE_WORDS = {"x", "images", "image", "inputs", "data", "features", "img", "imgs"}
_LABEL_WORDS = {"y", "labels", "label", "targets", "target"}
_SPLIT_WORDS = {"train": "train", "training": "train", "valid": "valid",
                "validation": "valid", "val": "valid", "test": "test", "testing": "test"}
_SPLIT_ORDER = ("train", "valid", "test")

KEYS_HELP = ("name the arrays like x_train/y_train and x_test/y_test (optionally "
             "x_valid/y_valid), train_images/train_labels, or train/x and train/y; "
             "or give them: keys={'train': ('IMAGES', 'LABELS')} "
             "(command line: --keys train=IMAGES:LABELS)")


def split_keys(keys):
    """``{split: (image key, label key)}`` from key names such as ``x_train`` /
    ``y_train``, ``train_images`` / ``train_labels`` or ``train/x`` / ``train/y``."""
    found = {}
    for key in keys:
        words = [w for w in re.split(r"[_\-.\s/]+", key.lower()) if w]
        if len(words) != 2:
            continue
        role = next((r for r, vocab in (("images", _IMAGE_WORDS), ("labels", _LABEL_WORDS))
                     if vocab & set(words)), None)
        split = next((_SPLIT_WORDS[w] for w in words if w in _SPLIT_WORDS), None)
        if role and split:
            found.setdefault(split, {})[role] = key
    return {s: (found[s].get("images"), found[s].get("labels"))
            for s in _SPLIT_ORDER if s in found}


def choose_keys(shapes, origin, keys=None):
    """``{split: (images key, labels key)}`` for arrays with the given ``shapes``
    (``{key: shape}``); raises with the arrays listed when it cannot tell."""
    listing = ", ".join(f"{k} {tuple(v)}" for k, v in shapes.items()) or "no arrays"
    if keys:
        for split in keys:
            if split not in SPLITS:
                guess = nearest(split, SPLITS)
                raise SourceFormatError(
                    f"{origin}: keys name a split {split!r}; a split is one of "
                    f"{', '.join(SPLITS)}{f' (did you mean {guess!r}?)' if guess else ''}")
        missing = [k for pair in keys.values() for k in pair if k not in shapes]
        if missing:
            raise SourceFormatError(f"{origin}: no array named {', '.join(missing)}; it holds {listing}")
        return dict(keys)
    named = split_keys(shapes)
    if named:
        for split, (images, labels) in named.items():
            if images is None or labels is None:
                raise SourceFormatError(
                    f"{origin}: split {split!r} has {'labels' if images is None else 'images'} "
                    f"but no {'images' if images is None else 'labels'}; it holds {listing}; "
                    f"{KEYS_HELP}"
                )
        return named
    images = [k for k, shape in shapes.items() if len(shape) >= 2]
    labels = [k for k, shape in shapes.items() if len(shape) == 1]
    pairs = [(i, l) for i in images for l in labels if shapes[i][0] == shapes[l][0]]
    if len(pairs) == 1:
        return {"train": pairs[0]}
    reason = ("several image/label pairs have matching lengths" if pairs
              else "no image array (N, ...) matches a label array (N,) in length")
    raise SourceFormatError(
        f"{origin}: cannot tell which arrays are images and labels ({reason}); "
        f"it holds {listing}; {KEYS_HELP}"
    )


def as_images(array, origin, what="images"):
    """``array`` checked to be numeric with shape (N, ...); arrays with a shape
    and a dtype (h5py datasets) are not read."""
    if not (hasattr(array, "shape") and hasattr(array, "dtype")):
        array = np.asarray(array)
    if len(array.shape) < 2:
        raise SourceFormatError(f"{origin}: {what} must have shape (N, ...), got {array.shape}")
    if array.dtype.kind not in "biuf":  # (booleans: the values 0 and 1; numpy counts
        # timedelta64 as an integer, which is no pixel)
        raise SourceFormatError(f"{origin}: {what} have dtype {array.dtype}, expected numbers")
    return array
