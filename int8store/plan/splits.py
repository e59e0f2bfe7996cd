"""One step from what a reader found to the final splits: the one place where
the examples of each split and their order are settled (a source sorted by
class shuffled, the validation and test splits cut: :mod:`.arrangement`),
the encoding picked and the image shape settled. ``load_data`` and
``int8store convert`` both go through it::

    sources/  ->  plan_splits()  ->  store (convert)  |  shared dataset (load_data)

A store's splits pass through as they are: already int8 codes, with their
encoding, in their order.
"""

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..codes.encoding import Encoding, encode
from ..codes.survey import float_candidates, survey_encoding
from ..codes.vocabulary import check_flag
from ..errors import ArgumentError, EncodingError, SourceFormatError, shortened
from ..codes.labels import as_int32_labels
from ..runtime.limits import max_memory
from ..sources import SourceData, Split
from .arrangement import VALID_SHARE, arrange, check_examples, validation_count
from .rows import drawn_chunks

__all__ = ["Plan", "plan_splits", "validation_count", "DEFAULT_CHUNK_BYTES", "VALID_SHARE"]

#: Image bytes read and encoded at a time when streaming.
DEFAULT_CHUNK_BYTES = 16 << 20
#: A chunk takes at most this share of the memory ceiling: beside it are its
#: codes, the encoding's temporaries and the writer's buffers.
CEILING_SHARE = 8


def rows_per_chunk(chunk_bytes, image_nbytes):
    """Examples in a chunk of ``chunk_bytes`` image bytes, or fewer where
    the memory ceiling (``--max-memory``) is under eight chunks: every
    source is read a chunk at a time and each chunk is held to the ceiling,
    so a fixed 16 MiB refused every file under ``--max-memory 8MiB``."""
    return max(1, min(chunk_bytes, max_memory() // CEILING_SHARE) // max(1, image_nbytes))


@dataclass
class Plan:
    """The final splits of a source, their encoding and image shape.

    Attributes
    ----------
    splits : dict
        ``{name: Split}`` in order: train, valid, test, then the source's
        others; each gives its ``count``, ``labels``, image shape and dtype
        (its images are read through :meth:`codes` or :meth:`code_chunks`).
    encoding : Encoding
    image_shape : tuple
        Shape of one image.
    origin : str
        Where the data came from, for messages.
    label_names : list of str, optional
    encoded : bool
        Whether the splits already hold int8 codes (a store).
    sources : dict
        ``{name: Split}``: the source's own splits, which the final ones are
        drawn from (``drawn``: ``{final split: Drawn}``, see :mod:`.arrangement`).
    order : dict
        How the examples were ordered and cut, as a store's manifest records
        it (:class:`.arrangement.Arrangement`).
    validation, test : str
        How the validation and test splits were made, in words.
    notes : tuple of str
        The source's notes (:class:`~int8store.sources.SourceData`).
    """

    splits: dict
    encoding: Encoding
    image_shape: tuple
    origin: str
    label_names: Optional[list] = None
    encoded: bool = False
    sources: dict = field(default_factory=dict)
    drawn: dict = field(default_factory=dict)
    order: dict = field(default_factory=dict)
    validation: str = ""
    test: str = ""
    notes: tuple = ()
    done: dict = field(default_factory=dict)  # a source split's codes, made while choosing the encoding
    _held: dict = field(default_factory=dict)  # a source split's codes, until each split drawn from it took its own

    def name_of(self, split):
        return f"{self.origin} ({split})"

    def rows(self, split, chunk_bytes=DEFAULT_CHUNK_BYTES):
        """Examples per chunk of ``chunk_bytes`` image bytes."""
        return rows_per_chunk(chunk_bytes, self.splits[split].image_nbytes)

    def labels(self, split):
        """The split's labels as int32, checked."""
        return as_int32_labels(self.splits[split].labels, name=f"{self.name_of(split)} labels")

    def code_chunks(self, chunk_bytes=DEFAULT_CHUNK_BYTES, spill_dir=None):
        """``(split, codes)`` for every split, the codes shaped ``(n,) +
        image_shape``, a chunk at a time, each split's in order. Splits
        drawn from one source split in its order (a validation split cut
        from train) come out of one pass over it; a shuffled one is read by
        index, or through a spill file in ``spill_dir`` (:mod:`.rows`)."""
        sources, coded = dict(self.sources), set(self.done)
        for name in coded:  # encoded while the encoding was chosen
            split = sources[name]
            sources[name] = Split.from_arrays(name, self.done.pop(name), split.labels, split.origin)

        def encoded(images, source):
            codes = images if (self.encoded or source in coded) else encode(
                images, self.encoding, name=f"{self.name_of(source)} images")
            return codes.reshape((len(codes),) + self.image_shape)

        return drawn_chunks(sources, self.drawn,
                            lambda s: rows_per_chunk(chunk_bytes, s.image_nbytes), encoded,
                            spill_dir)

    def codes(self, split):
        """All the split's codes in one array, flat ``(N, features)``; a
        source split's images are released once every split drawn from it
        has its codes."""
        part = self.drawn[split]
        name = part.source
        if name not in self._held:
            source = self.sources[name]
            if name in self.done:
                codes = self.done.pop(name)
            else:
                made = not source.in_memory  # (images() makes the array: ours to overwrite)
                images = source.images()
                codes = images if self.encoded else encode(
                    images, self.encoding, name=f"{self.name_of(name)} images", overwrite=made)
                del images  # (not held while the splits' rows are taken below)
            source.release()
            self._held[name] = [codes.reshape(len(codes), -1),
                                sum(p.source == name for p in self.drawn.values())]
        held = self._held[name]
        held[1] -= 1
        codes = held[0][_as_slice(part.rows)]
        if not held[1]:
            del self._held[name]
        return codes


def plan_splits(source, valid_size=None, valid_seed=None, lossy=False,
                chunk_bytes=DEFAULT_CHUNK_BYTES, keep_order=False, test_size=None):
    """The :class:`Plan` for a source a reader returned.

    Parameters
    ----------
    source : SourceData
    valid_size : int or float, optional
        For a source without a validation split: how many training examples
        (or which fraction, strictly between 0 and 1) become one. Default: a
        sixth.
    valid_seed : int, optional
        The seed of the planning step's draws (default 0): the shuffle of a
        split sorted by class, and the stratified cuts. A source whose order
        is kept (IDX, mnist.pkl.gz, CIFAR-10, the digits) gives the last
        examples of train as its validation split, as the classic
        mnist.pkl.gz, unless a seed is given.
    lossy : bool
        Quantize data int8 cannot hold exactly to 256 levels (the encoding
        reports the largest error) instead of refusing it.
    chunk_bytes : int
        Image bytes surveyed at a time.
    keep_order : bool
        Keep the source's order even where its labels run by class.
    test_size : int or float, optional
        For a source without a test split: how many training examples (or
        which fraction) become one (default a sixth), a stratified draw,
        before the validation split is cut from the rest.

    The rules: :mod:`int8store.plan.arrangement`.
    """
    if not isinstance(source, SourceData):
        raise ArgumentError(f"source={shortened(repr(source))}: expected what a reader gives "
                            "(int8store.sources.read_source(path)), not a path or a name")
    lossy, keep_order = check_flag("lossy", lossy), check_flag("keep_order", keep_order)
    for name, split in source.splits.items():  # (checked before they are counted by class)
        split.labels = as_int32_labels(split.labels, name=f"{source.origin} ({name}) labels")
    arrangement = arrange(source, valid_size, valid_seed, test_size, keep_order)
    splits = {}
    for name, part in arrangement.drawn.items():
        split = source.splits[part.source]
        splits[name] = split if part.rows is None and part.source == name else Split(
            name, part.labels(source.splits), split.image_shape, split.dtype, None, split.origin)
    check_examples(source.origin, {name: split.count for name, split in splits.items()})
    image_shape = _common_image_shape(splits, source)
    plan = Plan(splits, source.encoding, image_shape, source.origin, source.label_names,
                encoded=source.encoding is not None, sources=dict(source.splits),
                drawn=arrangement.drawn, order=arrangement.order,
                validation=arrangement.validation, test=arrangement.test, notes=source.notes)
    if plan.encoding is None:
        plan.encoding = _choose_encoding(plan, source.divisor, lossy, chunk_bytes)
        if plan.encoding.offset == 0 and not plan.encoding.is_codebook and all(
                split.dtype == np.int8 for split in plan.sources.values()):
            plan.notes = plan.notes + (_SIGNED_BYTES,)
    return plan


#: Signed bytes are levels as they are, where pixels (uint8) are shifted: said,
#: since an int8store store's codes taken out without their encoding look so.
_SIGNED_BYTES = ("the images are signed bytes (int8): read as levels -128..127, values "
                 "level / 256 in [-0.5, 0.5); codes taken out of an int8store store "
                 "(pixel - 128) are pixels only with their store: convert the store itself")


def _encode_releasing(plan, encoding):
    """``{name: codes}`` of every source split (all in memory) under
    ``encoding``, the smallest split first, each split's floats released as
    soon as it is encoded: the floats and the codes of every split are never
    all held at once (MNIST's 220 MB of floats and 55 MB of codes); a split
    read as codes under ``encoding`` gives them as they are. Where a
    split does not fit, the splits already encoded get their floats back,
    decoded from their codes (exact: each code was checked to give its value
    back), and the :class:`EncodingError` is raised for the next candidate."""
    done = {}
    try:
        for name, split in sorted(plan.sources.items(), key=lambda item: item[1].count):
            codes = split.codes_under(encoding)  # (read as these codes: no floats made)
            done[name] = codes if codes is not None else encode(
                split.images(), encoding, name=f"{plan.name_of(name)} images")
            split.release()
    except EncodingError:
        for name, codes in done.items():
            plan.sources[name].hold(encoding.decode(codes, plan.sources[name].dtype))
        raise
    return {name: done[name] for name in plan.sources}


def _as_slice(rows):
    """``rows`` as a slice where they are a run of consecutive examples (the
    classic cut, the last ones: views, not copies), else as they are."""
    if rows is None:
        return slice(None)
    if len(rows) and rows[-1] - rows[0] == len(rows) - 1 and (np.diff(rows) == 1).all():
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows


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
    splits = plan.sources.values()
    if all(s.dtype == np.uint8 for s in splits):
        return Encoding(128, divisor or 256)
    if all(s.in_memory and np.issubdtype(s.dtype, np.floating) for s in splits):
        for encoding in float_candidates(divisor, [s.dtype for s in splits]):
            try:
                plan.done = _encode_releasing(plan, encoding)
                return encoding
            except EncodingError:
                plan.done = {}

    def chunks():
        for name, split in plan.sources.items():
            for chunk in split.chunks(rows_per_chunk(chunk_bytes, split.image_nbytes)):
                yield f"{plan.name_of(name)} images", chunk

    return survey_encoding(chunks, divisor=divisor, lossy=lossy)
