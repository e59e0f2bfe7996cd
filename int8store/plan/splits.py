"""One step from what a reader found to the final splits: the one place where
the validation split is chosen, the encoding picked and the image shape
settled. ``load_data`` and ``int8store convert`` both go through it::

    sources/  ->  plan_splits()  ->  store (convert)  |  shared dataset (load_data)

A store's splits pass through as they are: already int8 codes, with their
encoding.
"""

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..codes.encoding import Encoding, encode, float_candidates, survey_encoding
from ..errors import ArgumentError, EncodingError, SourceFormatError
from ..codes.labels import as_int32_labels

__all__ = ["Plan", "plan_splits", "validation_count", "DEFAULT_CHUNK_BYTES", "VALID_SHARE"]

#: Image bytes read and encoded at a time when streaming.
DEFAULT_CHUNK_BYTES = 16 << 20

#: Without a validation split, this share of train becomes one, taken from
#: its end: MNIST's 60,000 training images split 50,000/10,000 as in the
#: classic mnist.pkl.gz.
VALID_SHARE = 6


@dataclass
class Plan:
    """The final splits of a source, their encoding and image shape.

    Attributes
    ----------
    splits : dict
        ``{name: Split}`` in order: train, valid, then the source's others.
    encoding : Encoding
    image_shape : tuple
        Shape of one image.
    origin : str
        Where the data came from, for messages.
    label_names : list of str, optional
    encoded : bool
        Whether the splits already hold int8 codes (a store).
    """

    splits: dict
    encoding: Encoding
    image_shape: tuple
    origin: str
    label_names: Optional[list] = None
    encoded: bool = False
    done: dict = field(default_factory=dict)  # codes already made while choosing the encoding
    carved: Optional[tuple] = None  # (the source's train Split, mask of its validation examples)
    validation: str = ""  # how the validation split was made, in words

    def name_of(self, split):
        return f"{self.origin} ({split})"

    def rows(self, split, chunk_bytes=DEFAULT_CHUNK_BYTES):
        """Examples per chunk of ``chunk_bytes`` image bytes."""
        return max(1, chunk_bytes // max(1, self.splits[split].image_nbytes))

    def labels(self, split):
        """The split's labels as int32, checked."""
        return as_int32_labels(self.splits[split].labels, name=f"{self.name_of(split)} labels")

    def code_chunks(self, chunk_bytes=DEFAULT_CHUNK_BYTES):
        """``(split, codes)`` for every split, the codes shaped ``(n,) +
        image_shape``, a chunk at a time, each split's in order. A carved
        validation split comes out of the same pass over the source's train
        as train itself: the source is read once."""
        for name, split in self.splits.items():
            rows = self.rows(name, chunk_bytes)
            if name in self.done:  # encoded while the encoding was chosen
                codes = self.done.pop(name)
                for start in range(0, len(codes), rows):
                    yield name, codes[start:start + rows].reshape((-1,) + self.image_shape)
            elif self.carved is None or name not in ("train", "valid"):
                for chunk in split.chunks(rows):
                    yield name, self._encoded(chunk, name)
            elif name == "train":
                source, chosen = self.carved
                start = 0
                for chunk in source.chunks(max(1, chunk_bytes // max(1, source.image_nbytes))):
                    picked = chosen[start:start + len(chunk)]
                    start += len(chunk)
                    codes = self._encoded(chunk, "train")
                    # (the last examples, by default: most chunks go whole to one split)
                    some, every = picked.any(), picked.all()
                    if not every:
                        yield "train", codes[~picked] if some else codes
                    if some:
                        yield "valid", codes if every else codes[picked]

    def _encoded(self, chunk, split):
        codes = chunk if self.encoded else encode(
            chunk, self.encoding, name=f"{self.name_of(split)} images")
        return codes.reshape((len(codes),) + self.image_shape)

    def codes(self, split):
        """All the split's codes in one array, flat ``(N, features)``; the
        source's images of that split are released once encoded."""
        source = self.splits[split]
        if split in self.done:
            codes = self.done.pop(split)
        else:
            images = source.images()
            codes = images if self.encoded else encode(
                images, self.encoding, name=f"{self.name_of(split)} images")
        source.release()
        return codes.reshape(len(codes), -1)


def plan_splits(source, valid_size=None, valid_seed=None, lossy=False,
                chunk_bytes=DEFAULT_CHUNK_BYTES):
    """The :class:`Plan` for a source a reader returned.

    Parameters
    ----------
    source : SourceData
    valid_size : int or float, optional
        For a source without a validation split: how many training examples
        (or which fraction, strictly between 0 and 1) become one. Default: a
        sixth.
    valid_seed : int, optional
        Choose those examples by a shuffle with this seed; by default they
        are the last ones of train, as in the classic mnist.pkl.gz.
    lossy : bool
        Quantize data int8 cannot hold exactly to 256 levels (the encoding
        reports the largest error) instead of refusing it.
    chunk_bytes : int
        Image bytes surveyed at a time.
    """
    splits, carved, validation = _with_validation_split(source.splits, valid_size, valid_seed,
                                                        source.origin)
    image_shape = _common_image_shape(splits, source)
    plan = Plan(splits, source.encoding, image_shape, source.origin, source.label_names,
                encoded=source.encoding is not None, carved=carved, validation=validation)
    if plan.encoding is None:
        plan.encoding = _choose_encoding(plan, source.divisor, lossy, chunk_bytes)
    return plan


def validation_count(size, n_train, what="valid_size"):
    """How many of ``n_train`` training examples a validation split of ``size``
    takes: an integer count in 1..n_train-1, or a fraction strictly between 0
    and 1 (a float: ``1.0`` is refused rather than read as one example)."""
    if isinstance(size, (float, np.floating)):
        if 0 < size < 1:
            count = int(round(size * n_train))
            if 0 < count < n_train:
                return count
    elif isinstance(size, (int, np.integer)) and not isinstance(size, bool) and 0 < size < n_train:
        return int(size)
    raise ArgumentError(
        f"{what}={size!r}: expected an integer count in 1..{n_train - 1} (of the {n_train} "
        "training examples) or a fraction strictly between 0 and 1 that leaves both "
        "splits non-empty"
    )


def _with_validation_split(splits, valid_size, valid_seed, origin):
    splits = dict(splits)
    if "train" not in splits:
        raise SourceFormatError(f"{origin}: has splits {', '.join(splits)}; a train split is needed")
    if "valid" in splits:
        if valid_size is not None or valid_seed is not None:
            raise ArgumentError(
                f"{origin}: already has a validation split; valid_size and valid_seed "
                "(--valid-size, --valid-seed) apply only to sources without one"
            )
        return {name: splits[name] for name in _ordered(splits)}, None, "the source's own"
    train = splits["train"]
    count = (train.count // VALID_SHARE if valid_size is None
             else validation_count(valid_size, train.count))
    # (fewer than six training examples: the default validation split is empty)
    chosen = np.zeros(train.count, dtype=bool)
    if valid_seed is None:
        chosen[train.count - count:] = True
    else:
        chosen[np.random.default_rng(valid_seed).permutation(train.count)[:count]] = True
    splits["train"], splits["valid"] = train.take("train", ~chosen), train.take("valid", chosen)
    # A streamed train is read once for both (Plan.code_chunks); one in memory
    # was just split into two arrays, and its own can go.
    carved = None if train.in_memory else (train, chosen)
    if valid_size is None:
        asked = "a sixth, the default"
    elif isinstance(valid_size, (float, np.floating)):
        asked = f"valid_size={valid_size!r}, read as a fraction"
    else:
        asked = f"valid_size={valid_size!r}, read as a count"
    picked = f"picked by a shuffle seeded with {valid_seed}" if valid_seed is not None else "the last ones"
    validation = f"{count} of the {train.count} training examples ({asked}), {picked}"
    return {name: splits[name] for name in _ordered(splits)}, carved, validation


def _ordered(splits):
    from ..codes.vocabulary import SPLITS
    return [n for n in SPLITS if n in splits] + [n for n in splits if n not in SPLITS]


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


def _choose_encoding(plan, divisor, lossy, chunk_bytes):
    """One encoding for every split: at once for 8-bit pixels; for float
    arrays in memory, by encoding them with each affine candidate in turn
    (one pass that checks and encodes, the codes kept); else a survey."""
    splits = plan.splits.values()
    if all(s.dtype == np.uint8 for s in splits):
        return Encoding(128, divisor or 256)
    if all(s.in_memory and np.issubdtype(s.dtype, np.floating) for s in splits):
        for encoding in float_candidates(divisor, [s.dtype for s in splits]):
            try:
                plan.done = {name: encode(split.images(), encoding,
                                          name=f"{plan.name_of(name)} images")
                             for name, split in plan.splits.items()}
                return encoding
            except EncodingError:
                plan.done = {}

    def chunks():
        for name, split in plan.splits.items():
            for chunk in split.chunks(plan.rows(name, chunk_bytes)):
                yield f"{plan.name_of(name)} images", chunk

    return survey_encoding(chunks, divisor=divisor, lossy=lossy)
