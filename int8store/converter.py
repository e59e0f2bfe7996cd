"""Converting an archive into an int8store file, in bounded memory.

The source is read a chunk of images at a time (see :mod:`int8store.sources`),
encoded and appended to the store, hashing as it goes; the output appears
only once complete.
"""

import numpy as np
from tqdm import tqdm

from .encoding import Encoding, EncodingSurvey, encode
from .errors import ArgumentError, SourceFormatError
from .labels import as_int32_labels
from .sources import read_source, validation_count
from .store import StoreWriter

__all__ = ["convert", "DEFAULT_CHUNK_BYTES"]

#: Image bytes read and encoded at a time.
DEFAULT_CHUNK_BYTES = 16 << 20


def convert(sources, output, valid=None, seed=0, resize=None, keys=None, force=False,
            command_line=None, chunk_bytes=DEFAULT_CHUNK_BYTES):
    """Convert ``sources`` into the int8store file ``output``.

    Parameters
    ----------
    sources : path or list of paths
        Anything :func:`~int8store.sources.read_source` reads: IDX files or a
        folder of them, ``.npz``, ``mnist.pkl.gz``, a folder / ``.zip`` /
        ``.tar(.gz)`` of class folders of images, an HDF5 file.
    output : path
        The ``.h5`` file to write; an existing one is replaced only with ``force``.
    valid : int or float, optional
        Carve a validation split of this many training examples (or this
        fraction of them), chosen by a shuffle seeded with ``seed``.
    resize : (rows, cols), optional
        Resize image files to this size.
    keys : dict, optional
        ``{split: (images key, labels key)}`` for ``.npz`` and HDF5 sources.
    command_line : str, optional
        Recorded in the file (default: this process's command line).
    chunk_bytes : int
        Image bytes processed at a time: the memory the conversion needs.

    Returns
    -------
    Path of the written file.
    """
    source = read_source(sources, resize=resize, keys=keys)
    splits = _carve_validation(source.splits, valid, seed, source.origin)
    image_shape = _common_image_shape(splits, source)
    rows = {name: max(1, chunk_bytes // max(1, s.image_nbytes)) for name, s in splits.items()}
    encoding = source.encoding or _survey(splits, source, rows)
    labels = {name: as_int32_labels(s.labels, name=f"{source.origin} ({name}) labels")
              for name, s in splits.items()}
    total = sum(s.count for s in splits.values())
    with StoreWriter(output, encoding, image_shape, label_names=source.label_names,
                     source=source.origin, command_line=command_line, force=force) as writer, \
            tqdm(total=total, unit="img", desc="converting", disable=None, leave=False) as bar:
        for name, split in splits.items():
            out = writer.add_split(name, labels[name])
            for chunk in split.chunks(rows[name]):
                codes = chunk if source.encoding else encode(
                    chunk, encoding, name=f"{source.origin} ({name}) images")
                out.append(codes.reshape((len(codes),) + image_shape))
                bar.update(len(codes))
    return writer.path


def _survey(splits, source, rows):
    """One encoding for every split: immediate for 8-bit pixels, else one pass."""
    if all(s.dtype == np.uint8 for s in splits.values()):
        return Encoding(128, source.divisor or 256)
    survey = EncodingSurvey(source.divisor)
    for name, split in splits.items():
        for chunk in tqdm(split.chunks(rows[name]), desc=f"surveying {name}", unit="chunk",
                          disable=None, leave=False):
            survey.add(chunk, f"{source.origin} ({name}) images")
    return survey.encoding()


def _carve_validation(splits, valid, seed, origin):
    splits = dict(splits)
    if valid is None:
        return splits
    if "train" not in splits:
        raise ArgumentError(f"{origin}: has no train split to carve a validation split from")
    if "valid" in splits:
        raise ArgumentError(f"{origin}: already has a validation split; leave out --valid")
    train = splits["train"]
    count = validation_count(valid, train.count, what="valid")
    chosen = np.zeros(train.count, dtype=bool)
    chosen[np.random.default_rng(seed).permutation(train.count)[:count]] = True
    carved = {"train": train.take("train", ~chosen), "valid": train.take("valid", chosen)}
    return {**carved, **{n: s for n, s in splits.items() if n != "train"}}


def _common_image_shape(splits, source):
    shapes = {name: s.image_shape for name, s in splits.items()}
    if len(set(shapes.values())) != 1:
        raise SourceFormatError(
            f"{source.origin}: the splits' images differ in shape "
            f"({', '.join(f'{n}: {s}' for n, s in shapes.items())})"
        )
    shape = next(iter(shapes.values()))
    if source.image_shape and int(np.prod(source.image_shape)) == int(np.prod(shape)):
        return tuple(source.image_shape)  # flat vectors of known images (mnist.pkl.gz)
    return shape
