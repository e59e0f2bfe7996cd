"""``int8store preview``: a PNG grid of sample images, one row per class, to
see whether a conversion came out right (orientation, classes, contrast).

The images are taken where training takes them: a store's int8 codes as
stored (checked against their checksums), any other source's through the
planning step ``load_data`` uses (the same validation split, the same
encoding). Their first ``count`` examples of each class, in split order,
fill that class's row.

What a pixel shows: for integer pixels held as ``level = code + 128`` (8-bit
images: the level is the source's pixel), the level scaled to 0..255 by the
source's own full scale, ``level * 255 / min(divisor, 255)``: 8-bit images
show their exact bytes, and the digits' 0..16 fill the range. Other data
(float values, a lossy codebook, signed levels) is stretched linearly from
the smallest to the largest value shown, and :func:`preview` says so.

With an augmentation (``augment`` and ``augmented=SEED``), each image is
drawn as training sees it augmented: the cells, taken row by row, are the
examples of one minibatch of ``epoch`` under that seed, augmented by the
same arithmetic the step runs (:mod:`int8store.augment.draws`).

Images with a channel axis (channels last) are drawn in colour (an RGB PNG)
when they have three channels (red, green, blue: CIFAR-10, colour image
files) and in grey when they have one; other channel counts are refused.
"""

import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import ArgumentError, SourceFormatError, shortened
from .order.position import check_epoch
from .order.shuffle import check_seed
from .runtime.words import counted, listed

__all__ = ["preview", "Preview", "display_bytes"]

#: Grey of the gaps between cells and of an empty cell.
BACKGROUND = 96
_GAP = 1  # pixels between cells
_MIN_CELL = 32  # cells are scaled up (by an integer factor) to at least this


@dataclass
class Preview:
    """What :func:`preview` wrote: ``path``, the ``split``, ``classes`` (one
    row each, in label order, named in a column ``margin`` pixels wide),
    ``count`` cells per row, the images' ``shape``, the ``scale`` they were
    enlarged by, how pixels were shown (``shown``), and the classes of the
    dataset that the split has no example of (``lacking``: their rows are empty)
    and those it has fewer than ``count`` of (``fewer``: ``{class: images}``)."""

    path: str
    split: str
    classes: list
    count: int
    shape: tuple
    scale: int
    shown: str
    margin: int
    lacking: list = field(default_factory=list)
    fewer: dict = field(default_factory=dict)

    def cell(self, row, column):
        """Top-left pixel (y, x) of the cell of class ``row``, image ``column``."""
        top, left = cell_origin(row, column, self.shape, self.scale)
        return top, left + self.margin

    def describe(self):
        rows, cols = self.shape[:2]
        def named(classes):  # (a store's names, escaped and shortened: see cli.describe)
            return listed(shortened(str(name), 60) for name in classes)
        lacks = (f"; split {self.split!r} lacks {len(self.lacking)} of the {len(self.classes)} "
                 f"classes: {named(self.lacking)} (empty rows)" if self.lacking else "")
        if self.fewer:
            lacks += (f"; {len(self.fewer)} class{'es have' if len(self.fewer) > 1 else ' has'} "
                      f"fewer than {self.count:,}: "
                      + listed(f"{named([name])} ({held})" for name, held in self.fewer.items()))
        up_to = "up to " if self.fewer or self.lacking else ""
        return (f"{self.path}: {counted(len(self.classes), 'class')} x {up_to}"
                f"{counted(self.count, 'image')} of split {self.split!r} ({rows}x{cols}, shown "
                f"{self.scale}x), one row per class ({named(self.classes)}); {self.shown}{lacks}")


def display_bytes(codes, encoding):
    """The 0..255 bytes that show ``codes`` (see the module docstring), and
    a few words on how they were obtained."""
    if not encoding.is_codebook and encoding.offset == 128:
        full = min(encoding.divisor, 255)
        levels = encoding.levels(codes).astype(np.float64)
        shown = np.clip(np.rint(levels * (255 / full)), 0, 255).astype(np.uint8)
        how = ("pixels as stored" if full == 255 else f"levels 0..{full} scaled to 0..255")
        return shown, how
    values = encoding.decode(codes, np.float64)
    low, high = (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)
    span = high - low or 1.0
    shown = np.clip(np.rint((values - low) * (255 / span)), 0, 255).astype(np.uint8)
    return shown, f"values stretched from [{low:g}, {high:g}] to 0..255"


def preview(dataset, output, split="train", count=8, scale=None, force=False, keys=None,
            resize=None, max_memory=None, augment=None, augmented=None, epoch=0, report=None,
            lossy=False, valid_size=None, valid_seed=None, keep_order=False, test_size=None):
    """Write a PNG grid of ``count`` images of each class of ``split`` of
    ``dataset`` (anything ``load_data`` takes, a store included) to
    ``output``; returns a :class:`Preview`. ``scale``: the integer factor
    images are enlarged by (default: to at least 32 pixels). ``augment``
    (an :class:`~int8store.training.Augmentation` or its text) with ``augmented``
    (its seed): the images augmented as minibatch 0 of ``epoch`` would be.
    ``report``: told, in a line, of an output folder that was created.
    ``lossy``: data int8 cannot hold exactly shown quantized, as ``convert
    --lossy`` would store it (a store shows as stored). ``valid_size``,
    ``valid_seed``, ``keep_order``, ``test_size``: the splits planned as
    ``convert`` and ``load_data`` plan them with these (a store's are its own)."""
    from .runtime.limits import memory_ceiling
    from .sources import class_folder_trees, files_read
    from .store.atomic import atomic_output, check_not_a_source

    if not (isinstance(count, numbers.Integral) and count >= 1):
        raise ArgumentError(f"count={count!r} (--count): expected a positive number of images "
                            "per class")
    if scale is not None and not (isinstance(scale, numbers.Integral) and scale >= 1):
        raise ArgumentError(f"scale={scale!r} (--scale): expected a positive integer")
    if (augment is None) != (augmented is None):
        raise ArgumentError("an augmented preview needs both the augmentation (augment, "
                            "--augment LIST) and its seed (augmented, --augmented SEED)")
    if epoch != 0 and augmented is None:
        raise ArgumentError(f"epoch={epoch!r} (--epoch) chooses the epoch of an augmented "
                            "preview: give --augment and --augmented SEED too")
    if augmented is not None:  # (each was taken to 32 bits: -1 drew seed 2**32 - 1's images)
        augmented = check_seed(augmented, "--augmented", "augmented")
        epoch = check_epoch(epoch, "--epoch")
    check_not_a_source(output, files_read(dataset), "show", "the grid",
                       class_folder_trees(dataset))
    if Path(output).suffix.lower() not in ("", ".png"):  # (g.txt, g.jpg: a PNG all the same)
        raise ArgumentError(f"{output}: the grid is written as PNG (lossless: each pixel as "
                            "stored); name it .png")
    with memory_ceiling(max_memory):
        codes, labels, encoding, shape, names, n_classes = _sampled(
            dataset, split, count, keys, resize, lossy,
            dict(valid_size=valid_size, valid_seed=valid_seed, keep_order=keep_order,
                 test_size=test_size))
    drawn = _drawn_shape(dataset, shape)
    how_augmented = ""
    if augment is not None:
        # The cells row by row, each class's in the split's order, as one
        # minibatch: the order the grid is read in, and filled in (_grid).
        order = np.argsort(labels, kind="stable")
        codes, labels = codes[order], labels[order]
        codes, how_augmented = _augmented(codes, augment, augmented, epoch, encoding, shape,
                                          dataset)
    classes = list(names) if names else list(range(n_classes))
    held = np.bincount(labels, minlength=len(classes))  # (images drawn of each class)
    lacking = [name for label, name in enumerate(classes) if not held[label]]
    fewer = {name: int(held[label]) for label, name in enumerate(classes)
             if 0 < held[label] < count}
    shown, how = display_bytes(codes, encoding)
    scale = scale or max(1, math.ceil(_MIN_CELL / max(shape[:2])))
    columns = max(1, min(count, int(held.max(initial=0))))  # (the cells there are images for)
    _check_grid(len(classes), columns, drawn, scale, max_memory)
    image, margin = _named_rows(_grid(shown, labels, len(classes), columns, drawn, scale),
                                classes, shape, scale)
    with atomic_output(output, force=force, report=report) as temporary:
        image.save(temporary, format="PNG")
    return Preview(str(output), split, classes, count, tuple(shape), scale, how + how_augmented,
                   margin, lacking, fewer)


def _augmented(codes, augment, seed, epoch, encoding, shape, dataset):
    """The codes augmented as one minibatch of ``epoch`` under ``seed``."""
    from .augment.draws import augment as augmented_codes
    from .augment.spec import Augmentation, fill_code, refuse_flipped_digits
    from .sources.locate import recorded_source

    spec = augment if isinstance(augment, Augmentation) else \
        Augmentation.parse(augment, given="--augment")  # (as the tutorials take it)
    refuse_flipped_digits(spec, dataset, recorded_source)
    grid = spec.grid(shape, str(dataset))
    with np.errstate(over="ignore"):
        flat = augmented_codes(codes.reshape(len(codes), -1), spec, grid, int(seed),
                               np.uint32(epoch), np.uint32(0), fill_code(encoding), np)
    return (flat.reshape(codes.shape),
            f"; augmented ({spec.describe()}) as minibatch 0 of epoch {epoch}, seed {seed}")


def _drawn_shape(dataset, shape):
    """How images of ``shape`` are drawn: ``(rows, cols)`` in grey, or
    ``(rows, cols, 3)`` in colour."""
    if len(shape) == 1:
        raise SourceFormatError(
            f"{dataset}: its images are flat vectors of {shape[0]} values with no known "
            "rows and columns; a preview needs images")
    if len(shape) == 3 and shape[2] == 1:
        return tuple(shape[:2])
    if len(shape) == 2 or (len(shape) == 3 and shape[2] == 3):
        return tuple(shape)
    raise SourceFormatError(
        f"{dataset}: its images are {'x'.join(map(str, shape))}; a preview draws grey images "
        "(rows x cols, or one channel) or colour ones (three channels, last: red, green, blue)")


def cell_origin(row, column, shape, scale):
    """Top-left pixel of the cell of class ``row``, image ``column``."""
    rows, cols = shape[:2]
    return _GAP + row * (rows * scale + _GAP), _GAP + column * (cols * scale + _GAP)


def _check_grid(n_classes, columns, shape, scale, max_memory):
    """Refuse a grid Pillow would not open again without a warning (beyond
    its decompression-bomb limit) or that would not fit under the memory
    ceiling (the grid, and its copy with the names' margin)."""
    from PIL import Image

    from .runtime.limits import check_memory, memory_ceiling

    rows, cols = shape[:2]
    height, width = _grid_size(n_classes, columns, shape, scale)
    pixels = height * width
    if Image.MAX_IMAGE_PIXELS and pixels > Image.MAX_IMAGE_PIXELS:
        raise ArgumentError(
            f"a grid of {n_classes} rows of {columns} images of {rows}x{cols} shown {scale}x "
            f"would be {width}x{height} pixels, more than Pillow opens again ("
            f"{Image.MAX_IMAGE_PIXELS:,}): ask for fewer images (--count) or a smaller --scale")
    with memory_ceiling(max_memory):
        check_memory(2 * pixels * math.prod(shape[2:]), f"a grid of {width}x{height} pixels",
                     "preview")


def _grid_size(n_classes, count, shape, scale):
    """(height, width) of a grid of ``n_classes`` rows of ``count`` cells."""
    rows, cols = shape[:2]
    return _GAP + n_classes * (rows * scale + _GAP), _GAP + count * (cols * scale + _GAP)


def _grid(shown, labels, n_classes, count, shape, scale):
    rows, cols = shape[:2]
    size = _grid_size(n_classes, count, shape, scale)
    grid = np.full(size + tuple(shape[2:]), BACKGROUND, dtype=np.uint8)
    filled = [0] * n_classes
    for image, label in zip(shown, labels):
        top, left = cell_origin(int(label), filled[label], shape, scale)
        big = np.repeat(np.repeat(image.reshape(shape), scale, axis=0), scale, axis=1)
        grid[top:top + rows * scale, left:left + cols * scale] = big
        filled[label] += 1
    return grid


def _named_rows(grid, classes, shape, scale):
    """The grid as a Pillow image, each row's class named in a column at its
    left (Pillow's default font); returns the image and the column's width."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default()
    # (on one line, escaped and shortened as describe() names them: Pillow
    # cannot measure a name with a newline, and a long one widened the grid)
    names = [shortened(str(name), 60) for name in classes]
    probe = ImageDraw.Draw(Image.new("L", (1, 1)))
    margin = 2 * _GAP + 4 + max((math.ceil(probe.textlength(n, font=font)) for n in names), default=0)
    grid_image = Image.fromarray(grid)
    image = Image.new(grid_image.mode, (grid_image.width + margin, grid_image.height),
                      BACKGROUND if grid_image.mode == "L" else (BACKGROUND,) * 3)
    image.paste(grid_image, (margin, 0))
    draw, white = ImageDraw.Draw(image), 255 if image.mode == "L" else (255, 255, 255)
    for row, name in enumerate(names):
        top, _ = cell_origin(row, 0, shape, scale)
        draw.text((2, top + max(0, (shape[0] * scale - 11) // 2)), name, fill=white, font=font)
    return image, margin


def _first_of_each_class(labels, count):
    """Indices of the first ``count`` examples of each label, in order."""
    taken, chosen = {}, []
    for index, label in enumerate(labels.tolist()):
        if taken.get(label, 0) < count:
            taken[label] = taken.get(label, 0) + 1
            chosen.append(index)
    return np.asarray(chosen, dtype=np.int64)


def _samples(dataset, split, count, keys, resize):
    """(codes, labels, encoding, image shape, class names) of the chosen examples."""
    return _sampled(dataset, split, count, keys, resize)[:5]


def _sampled(dataset, split, count, keys, resize, lossy=False, planning=None):
    """(codes, labels, encoding, image shape, class names, class count) of
    the chosen examples; the classes counted over every split, which
    ``planning`` (plan_splits's options) plans for a source that is not a
    store."""
    planning = planning or {}
    from .sources.locate import caller_file
    from .store.reader import is_store, open_store

    path = str(dataset)
    if is_store(path):  # read only the rows shown, checked as training reads them
        from .sources import check_source_options

        check_source_options(path, "store", resize=resize, keys=keys)
        given = [f"--{name.replace('_', '-')}" if name != "valid_seed" else "--seed"
                 for name in ("valid_size", "test_size", "valid_seed", "keep_order")
                 if planning.get(name) not in (None, False)]
        if given:
            raise ArgumentError(f"{path}: a store keeps the splits and the order it was "
                                f"converted with; {', '.join(given)} "
                                f"{'plans' if len(given) == 1 else 'plan'} those of the sources "
                                "convert reads: leave "
                                f"{'it' if len(given) == 1 else 'them'} out")
        store = open_store(path)
        if split not in store.splits:
            raise ArgumentError(f"{path}: has no split {split!r}; it has "
                                f"{', '.join(store.splits)}")
        every = {name: store.read_labels(name) for name in store.splits}
        labels = every[split]
        chosen = _first_of_each_class(labels, count)
        codes = np.empty((len(chosen),) + tuple(store.image_shape), np.int8)
        for row, index in enumerate(chosen):
            store.read_rows(split, int(index), int(index) + 1, codes[row:row + 1])
        return (codes, labels[chosen], store.encoding, tuple(store.image_shape), store.label_names,
                _class_count(every.values()))
    from .plan.splits import plan_splits
    from .sources import read_source

    plan = plan_splits(read_source(dataset, resize=resize, keys=keys, caller=caller_file()),
                       lossy=lossy, **planning)
    if split not in plan.splits:
        raise ArgumentError(f"{plan.origin}: has no split {split!r}; it has "
                            f"{', '.join(plan.splits)}")
    labels = np.asarray(plan.labels(split))
    chosen = _first_of_each_class(labels, count)
    codes = plan.codes(split)[chosen]
    shape = tuple(plan.image_shape)
    return (codes.reshape((len(chosen),) + shape), labels[chosen], plan.encoding, shape,
            plan.label_names, _class_count(s.labels for s in plan.splits.values()))


def _class_count(label_arrays):
    """1 + the largest label of any split (0 without labels)."""
    return max((int(np.max(a)) + 1 for a in label_arrays if len(a)), default=0)
