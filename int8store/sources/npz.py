"""``.npz`` archives: image and label arrays per split (see :mod:`.named_arrays`).

Read by int8store's one ``.npz`` reader (:mod:`int8store.runtime.npz`): only
each member's ``.npy`` header is read up front, checked against the member's
stored size. Labels are then read whole, images streamed a chunk of rows at
a time (a Fortran-order array, whose rows are not contiguous, is read whole
within the memory ceiling).
"""

from ..errors import SourceFormatError
from ..runtime.npz import NpzArchive
from ..store.checkpoint import MODEL_DESCRIPTION, RUN_DESCRIPTION
from . import SourceData, Split
from .named_arrays import as_images, choose_keys

__all__ = ["read_npz"]


def read_npz(path, keys=None):
    """Splits of an ``.npz`` (keys like ``x_train, y_train, x_test, y_test``)."""
    members = NpzArchive(path).members
    if RUN_DESCRIPTION in members and keys is None:  # (its arrays listed as data helped no one)
        raise SourceFormatError(f"{path}: a run's checkpoint (a tutorial's --checkpoint writes "
                                "them), not a data set: give it to --resume, and the data to "
                                "--dataset")
    if MODEL_DESCRIPTION in members and keys is None:  # (as a run's checkpoint: its W and b listed)
        raise SourceFormatError(f"{path}: a tutorial's saved model (its --save-model writes "
                                "them), not a data set: give it to --predict --save-model, and "
                                "the data to --dataset")
    chosen = choose_keys({key: m.shape for key, m in members.items()}, path, keys)
    splits = {}
    for split, (image_key, label_key) in chosen.items():
        images, labels = members[image_key], members[label_key].read()
        if labels.ndim != 1:
            raise SourceFormatError(f"{path}: {label_key!r} must be 1-D, got {labels.shape}")
        as_images(images, path, f"{image_key!r} images")  # (its header's shape and dtype)
        if images.shape[0] != len(labels):
            raise SourceFormatError(
                f"{path}: split {split!r} has {images.shape[0]} images but {len(labels)} labels; "
                "every image needs exactly one label")
        splits[split] = Split(split, labels, images.shape[1:], images.dtype,
                              lambda rows, m=images: m.chunks(rows), str(path))
    return SourceData(splits, origin=str(path))
