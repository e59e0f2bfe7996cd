"""What an augmentation is: :class:`Augmentation`, parsed from the text a
command line takes (``"translate=2,flip,cutout=8"``) and checked against
the images it is for."""

import os
import re
from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError
from ..runtime.words import counted

__all__ = ["Augmentation", "FILLS", "FLIPS", "fill_code", "refuse_flipped_digits", "names_digits",
           "refuse_alternating_shuffled"]

#: What a translation brings in at the border: the code of a black pixel,
#: the nearest edge pixel, or the pixels mirrored about the edge (not
#: repeating it, as numpy's and PyTorch's "reflect").
FILLS = ("zero", "edge", "reflect")
#: ``"random"``: each example flipped left-right with probability 1/2, drawn
#: anew each epoch; ``"alternate"``: airbench's flip, each position flipped
#: in every other epoch (a random half in even epochs, the other half in odd
#: ones): each example where the epochs keep one order, so not with a
#: shuffle (:func:`refuse_alternating_shuffled`).
FLIPS = ("none", "random", "alternate")


@dataclass(frozen=True)
class Augmentation:
    """Random translation by up to ``translate`` pixels each way (rows and
    columns drawn apart, ``fill`` at the border), a left-right ``flip``, and
    a ``cutout`` square of that side set to black, in that order, on each
    example of a training minibatch (see :mod:`int8store.augment.draws`).

    Examples
    --------
    >>> Augmentation.parse("translate=2,flip,cutout=8")
    Augmentation(translate=2, fill='zero', flip='random', cutout=8)
    >>> Augmentation.parse("translate=4,fill=reflect,flip=alternate").describe()
    'translate by up to 4 pixels (reflect fill), alternating flip'
    """

    translate: int = 0
    fill: str = "zero"
    flip: str = "none"
    cutout: int = 0

    def __post_init__(self):
        for name in ("translate", "cutout"):
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value or value < 0:
                raise ArgumentError(f"augmentation {name} must be a whole number of pixels (0 or "
                                    f"more), got {value!r}")
            object.__setattr__(self, name, int(value))
        if self.fill not in FILLS:
            raise ArgumentError(f"augmentation fill must be one of {', '.join(FILLS)}, got "
                                f"{self.fill!r}")
        if self.flip not in FLIPS:
            raise ArgumentError(f"augmentation flip must be one of {', '.join(FLIPS)}, got "
                                f"{self.flip!r}")
        if self.fill != "zero" and not self.translate:  # (it was taken, and did nothing)
            raise ArgumentError(f"augmentation fill={self.fill} fills the border a translation "
                                "uncovers: give translate=R too, or leave fill out")

    @classmethod
    def parse(cls, text, recorded=False, given=None):
        """From comma-separated items: ``translate=R``, ``fill=zero|edge|reflect``,
        ``flip`` (random) or ``flip=random|alternate``, ``cutout=S``.
        ``recorded``: text a checkpoint recorded, where a fill with no
        translation (taken before 0.3.2, and never used) reads as none.
        ``given``: the option the text was given to (``--augment``), where
        an item that does nothing (``cutout=0``, ``flip=none``, an empty one,
        none at all) is refused: it was taken, and the run trained without
        augmentation."""
        fields = {}
        items = [part.strip() for part in str(text).split(",")]
        if given and not any(items):
            raise ArgumentError(f"{given} {text!r} names no augmentation: give comma-separated "
                                "translate=R, fill=zero|edge|reflect, flip[=random|alternate], "
                                "cutout=S, or leave it out")
        for item in items:
            if not item:
                if given:
                    raise ArgumentError(f"{given} {text!r}: an empty item between commas")
                continue
            name, equals, value = item.partition("=")
            name, value = name.strip(), value.strip()  # ("fill = edge", as "translate = 2")
            if name == "flip" and not equals:  # (a bare flip; flip= is refused as translate= is)
                value = "random"
            if name not in ("translate", "fill", "flip", "cutout") or not value:
                raise ArgumentError(
                    f"augmentation {item!r} not understood: give comma-separated "
                    "translate=R, fill=zero|edge|reflect, flip[=random|alternate], cutout=S "
                    "(for example translate=2,flip,cutout=8)")
            if name in fields:
                raise ArgumentError(f"augmentation {name} given twice in {text!r}")
            if given and name == "flip" and value == "none":
                raise ArgumentError(f"{given} {text!r}: flip=none does nothing: give flip (or "
                                    "flip=alternate), or leave it out")
            if name in ("translate", "cutout"):
                try:
                    value = int(value)
                except ValueError:
                    raise ArgumentError(f"augmentation {item!r}: {name} takes a whole number "
                                        "of pixels") from None
                if given and value == 0:
                    raise ArgumentError(f"{given} {text!r}: {name}=0 does nothing: give 1 pixel "
                                        "or more, or leave it out")
            fields[name] = value
        if recorded and not fields.get("translate"):
            fields.pop("fill", None)
        return cls(**fields)

    def __bool__(self):
        """False when it changes nothing."""
        return bool(self.translate or self.flip != "none" or self.cutout)

    def describe(self):
        parts = []
        if self.translate:
            shift = counted(self.translate, "pixel")
            parts.append(f"translate by up to {shift} ({self.fill} fill)")
        if self.flip != "none":
            parts.append(f"{'random' if self.flip == 'random' else 'alternating'} flip")
        if self.cutout:
            parts.append(f"cut-out of {self.cutout}x{self.cutout}")
        return ", ".join(parts) or "none"

    def grid(self, image_shape, name="data"):
        """``(rows, columns, channels)`` of images of ``image_shape``
        (``(rows, cols)`` or channels-last ``(rows, cols, channels)``),
        once this augmentation is checked to fit them."""
        shape = tuple(int(n) for n in image_shape)
        if len(shape) not in (2, 3) or min(shape) < 1:
            raise ArgumentError(f"{name}: augmentation needs images of shape (rows, cols) or "
                                f"(rows, cols, channels), got {shape}")
        rows, columns = shape[:2]
        channels = shape[2] if len(shape) == 3 else 1
        if self.translate >= min(rows, columns):
            shift = counted(self.translate, "pixel")
            use = (f"use less than {min(rows, columns)}" if min(rows, columns) > 1 else
                   "leave translate out: images one pixel across take none")  # (not "less than 1")
            raise ArgumentError(f"{name}: a translation by up to {shift} leaves "
                                f"nothing of {rows}x{columns} images: {use}")
        if self.cutout > min(rows, columns):
            raise ArgumentError(f"{name}: a cut-out of {self.cutout}x{self.cutout} is larger "
                                f"than the {rows}x{columns} images")
        return rows, columns, channels


def fill_code(encoding):
    """The code of a black pixel (value 0) under ``encoding``: what the
    zero fill and the cut-out write (for a codebook, the code of the value
    nearest 0)."""
    if encoding.is_codebook:
        return int(np.argmin(np.abs(np.asarray(encoding.codebook, dtype=np.float64)))) - 128
    return int(np.clip(-encoding.offset, -128, 127))


def refuse_flipped_digits(augmentation, dataset, source_of=None):
    """Refuse a flip of ``dataset``'s images where its name, or that of the
    source a store of it was converted from, says digits: a mirrored digit
    is another shape. ``source_of(dataset)`` gives that source (a store's
    manifest records it; None for no store), read only when a flip is asked
    (:func:`int8store.sources.locate.recorded_source`, which this layer
    cannot import). The tutorials and the preview ask alike."""
    if augmentation.flip == "none":
        return
    source = None if source_of is None else source_of(dataset)
    if names_digits(dataset) or (source is not None and names_digits(source)):
        converted = f" (converted from {source})" if source is not None else ""
        raise ArgumentError(
            f"--augment flip on {dataset}{converted}: a mirrored digit is another shape (a "
            "mirrored 2 is no digit, and some 3s read as Es): leave flip out for digits")


def refuse_alternating_shuffled(augmentation, seed, what):
    """Refuse ``flip=alternate`` on ``what``, a split shuffled by ``seed``
    (None: in one order each epoch). The flip is drawn by place in the
    epoch's sequence (no op knows which example fills a place), and a
    shuffle puts another example in each place every epoch: the examples
    would be flipped at random, taken for airbench's alternation.
    ``augmentation``: an :class:`Augmentation` or its text."""
    if not isinstance(augmentation, Augmentation):
        augmentation = Augmentation.parse(augmentation)
    if augmentation.flip == "alternate" and seed is not None:
        raise ArgumentError(
            f"{what}: flip=alternate flips each place of the epoch's sequence in every other "
            f"epoch, and the shuffle (seed {seed}) puts another example there each epoch, so "
            "the examples would be flipped at random: use flip (random) with a shuffle, or "
            "flip=alternate without one")


def names_digits(dataset):
    """Whether ``dataset``'s name says digits: a word of it is ``mnist``,
    ``digit`` or ``digits`` (``digital_photos`` is none, and Fashion-MNIST's
    clothes may be mirrored)."""
    words = set(re.split(r"[^a-z0-9]+", os.path.basename(str(dataset)).lower()))
    return bool(words & {"mnist", "digit", "digits"}) and "fashion" not in words
