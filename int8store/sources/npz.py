"""``.npz`` archives: image and label arrays per split, found by their key names."""

import re
import zipfile

import numpy as np

from ..errors import SourceFormatError
from . import SourceData, as_images

__all__ = ["read_npz", "split_keys"]

_IMAGE_WORDS = {"x", "images", "image", "inputs", "data", "features"}
_LABEL_WORDS = {"y", "labels", "label", "targets", "target"}
_SPLIT_WORDS = {"train": "train", "training": "train", "valid": "valid",
                "validation": "valid", "val": "valid", "test": "test", "testing": "test"}
_SPLIT_ORDER = ("train", "valid", "test")


def split_keys(keys):
    """``{split: (image key, label key)}`` from key names such as ``x_train`` /
    ``y_train`` or ``train_images`` / ``train_labels``."""
    found = {}
    for key in keys:
        words = [w for w in re.split(r"[_\-.\s]+", key.lower()) if w]
        if len(words) != 2:
            continue
        role = next((r for r, vocab in (("images", _IMAGE_WORDS), ("labels", _LABEL_WORDS))
                     if vocab & set(words)), None)
        split = next((_SPLIT_WORDS[w] for w in words if w in _SPLIT_WORDS), None)
        if role and split:
            found.setdefault(split, {})[role] = key
    return {s: (found[s].get("images"), found[s].get("labels"))
            for s in _SPLIT_ORDER if s in found}


def read_npz(path):
    """Splits of an ``.npz`` (keys like ``x_train, y_train, x_test, y_test``)."""
    try:
        archive = np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
        raise SourceFormatError(f"{path}: not a readable .npz archive ({error})") from error
    with archive:
        keys = split_keys(archive.files)
        expected = ("expected pairs of image/label arrays named like x_train/y_train, "
                    "x_test/y_test (optionally x_valid/y_valid) or train_images/train_labels")
        if "train" not in keys or "test" not in keys:
            raise SourceFormatError(
                f"{path}: holds arrays {sorted(archive.files)}; {expected}, "
                "with at least a train and a test split"
            )
        splits = {}
        for split, (image_key, label_key) in keys.items():
            if image_key is None or label_key is None:
                raise SourceFormatError(
                    f"{path}: split {split!r} has {'labels' if image_key is None else 'images'} "
                    f"but no {'images' if image_key is None else 'labels'}; {expected}"
                )
            try:
                images, labels = archive[image_key], archive[label_key]
            except (ValueError, zipfile.BadZipFile, OSError, EOFError) as error:
                raise SourceFormatError(f"{path}: cannot read {image_key!r}/{label_key!r} ({error})") from error
            images = as_images(images, path, f"{image_key!r}")
            if np.asarray(labels).ndim != 1:
                raise SourceFormatError(f"{path}: {label_key!r} must be 1-D, got {labels.shape}")
            splits[split] = (images, labels)
    return SourceData(splits, origin=str(path)).check_counts()
