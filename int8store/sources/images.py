"""Image files in class folders: a folder, or a ``.zip`` / ``.tar(.gz)`` of one.

Layouts (after descending into a single wrapping folder):

* ``CLASS/IMAGE`` — one split, ``train``;
* ``SPLIT/CLASS/IMAGE`` with ``SPLIT`` in train/valid/validation/val/test (any case).

Labels number the class folders in sorted name order; the names are kept as
label names. The examples are in name order (split, class, file) whatever
holds them, a tar's members in another order too: a folder, its zip and its
tar are one source. Images are decoded by Pillow: a set of grey images (a palette
of greys included: a GIF has no grey mode) stays one channel (``rows x
cols``); a set with a colour image keeps three (``rows x cols x 3``), its
grey images the grey in each channel, as torchvision's ``ImageFolder`` and
Keras read them. All images must share a size unless a resize is asked for.
Hidden files (``.DS_Store``) and the thumbnail caches and settings Windows
leaves in folders (``Thumbs.db``, ``desktop.ini``) are skipped; so are
documents that come with downloaded sets (``README.md``, ``labels.csv``,
``LICENSE``: no image can hide in them), with a note naming them. Any other
non-image file is an error (it may be an image in a format not read here),
as is an unreadable image, a class folder without an image (the classes
after it would be numbered otherwise) and a file an archive holds twice.

An image file is read only if its length (which a zip or tar member announces
before its bytes) is within :func:`largest_image_file` and the memory ceiling,
and never past that length: a member of a few compressed megabytes that
unpacks to gigabytes is refused before a byte of it is unpacked.
"""

import contextlib
import math
import os
import tempfile
from pathlib import Path

import numpy as np

from ..errors import SourceFormatError, shortened
from ..runtime.words import counted
from . import SourceData, Split
from .image_files import (check_resize, decode_image, decoded, in_colour, in_colour_by_header,
                          largest_image_file, parsed_resize)
from .image_trees import IMAGE_SUFFIXES, folder_tree, is_hidden, tar_tree, zip_tree

__all__ = ["read_image_folder", "read_image_archive", "decode_image", "largest_image_file",
           "IMAGE_SUFFIXES"]

_SPLIT_FOLDERS = {"train": "train", "training": "train", "valid": "valid",
                  "validation": "valid", "val": "valid", "test": "test", "testing": "test"}
# Files that may hold a whole data set (CIFAR-10's archive in a download folder).
_DATA_SUFFIXES = (".gz", ".tgz", ".tar", ".zip", ".npz", ".h5", ".hdf5")


def read_image_folder(folder, resize=None):
    """Splits of a folder of class folders (see the module docstring)."""
    if resize is not None:
        resize = parsed_resize(resize)
        check_resize(resize, folder)
    return _read_tree(folder_tree(Path(folder)), resize)


def read_image_archive(path, resize=None):
    """Splits of a ``.zip`` or ``.tar(.gz)`` of class folders."""
    if resize is not None:
        resize = parsed_resize(resize)
        check_resize(resize, path)
    tree = zip_tree(path) if str(path).lower().endswith(".zip") else tar_tree(path)
    return _read_tree(tree, resize)


def _split_layout_at(files, depth):
    """Whether ``files`` (``(name, parts)``) lie as SPLIT/CLASS/IMAGE from
    folder level ``depth`` (``Train`` a split as ``train`` is)."""
    return all(len(parts) == depth + 3 and parts[depth].lower() in _SPLIT_FOLDERS
               for _, parts in files)


# Documents that come with downloaded sets, skipped with a note (torchvision's
# ImageFolder and Keras skip every file of another suffix, without a word).
_DOCUMENT_SUFFIXES = {".txt", ".md", ".rst", ".csv", ".tsv", ".json", ".yaml", ".yml", ".xml",
                      ".html", ".htm", ".pdf", ".log"}
_DOCUMENT_NAMES = {"readme", "license", "licence", "copying", "notice", "authors", "citation"}


def _is_document(name):
    stem, suffix = os.path.splitext(os.path.basename(name).lower())
    return suffix in _DOCUMENT_SUFFIXES or (not suffix and stem in _DOCUMENT_NAMES)


def _documents_note(tree, documents):
    shown = ", ".join(tree.where(name) for name in documents[:3])
    more = f" and {len(documents) - 3:,} more" if len(documents) > 3 else ""
    return (f"skipped {counted(len(documents), 'document')} beside the images (no image is "
            f"read from them): {shown}{more}")


def _read_tree(tree, resize):
    files = [(name, name.split("/")) for name in tree.names]
    files = [(name, parts) for name, parts in files if not is_hidden(parts)]
    documents = [name for name, _ in files if _is_document(name)]
    files = [(name, parts) for name, parts in files if not _is_document(name)]
    if not files:
        raise SourceFormatError(f"{tree.label}: holds no images")
    for name, parts in files:  # (first: a README beside the class folders upsets the layout)
        if os.path.splitext(name)[1].lower() not in IMAGE_SUFFIXES:
            where = "the tree of class folders" if len(parts) == 1 else "class folders"
            data = (f" (a data set int8store reads itself? give it the file: {tree.where(name)})"
                    if name.lower().endswith(_DATA_SUFFIXES) else "")
            if "cifar-100-python" in parts:  # (CIFAR-10's archive is read, not CIFAR-100's)
                data = (" (CIFAR-100's archive? int8store reads CIFAR-10's only: save CIFAR-100's "
                        "images and labels in an .npz as x_train, y_train, x_test, y_test)")
            raise SourceFormatError(
                f"{tree.where(name)}: not an image file by its name (expected one of "
                f"{', '.join(sorted(IMAGE_SUFFIXES))}); {where} must hold only images{data}"
            )
    # Descend into one folder that wraps everything (e.g. digits/ inside
    # digits.zip), but not a split's folder over class folders: test/CLASS/
    # IMAGE alone is a test split (it was read as train).
    depth = 0
    while len({parts[depth] for _, parts in files}) == 1 \
            and all(len(parts) > depth + 2 for _, parts in files) \
            and not _split_layout_at(files, depth):
        depth += 1
    split_layout = _split_layout_at(files, depth)
    entries = []  # (split, class name, file name)
    for name, parts in files:
        rest = parts[depth:]
        if split_layout:
            entries.append((_SPLIT_FOLDERS[rest[0].lower()], rest[1], name))
        elif len(rest) == 2:
            entries.append(("train", rest[0], name))
        else:
            _refuse_beside_splits(tree, files, depth)
            raise SourceFormatError(
                f"{tree.where(name)}: not in a class folder; expected CLASS/IMAGE "
                "or SPLIT/CLASS/IMAGE (SPLIT: train, valid, test)"
            )
    classes = sorted({c for _, c, _ in entries})
    _check_no_empty_class(tree, files[0][1][:depth], split_layout, set(classes))
    if split_layout:
        _check_no_empty_split(tree, files, depth)
    for name in classes:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise SourceFormatError(
                f"{tree.where(name)}: the class folder's name is not valid UTF-8, and class "
                "names are stored as text; rename the folder") from None
    label_of = {c: i for i, c in enumerate(classes)}
    # Name order whatever holds the images: a tar's own order is the one
    # `tar` took from a file system's listing, and a folder, its zip and its
    # tar split alike only if the order is the names' (the order is a pure
    # function of the seed and the source).
    entries.sort(key=lambda e: (e[0], e[1], e[2]))
    first = entries[0][2]
    reference = decoded(_read_one(tree, first), tree.where(first), resize)
    notes = (_documents_note(tree, documents),) if documents else ()
    if len(classes) == 1:  # (a folder of images given for a folder of class folders?)
        notes += (f"one class folder ({shortened(classes[0], 60)}): every image has label 0, "
                  f"and a classifier learns nothing from one class; {tree.label} should hold a "
                  "folder of images for each class",)
    if reference.ndim == 2:  # (the set is grey only if all its images are)
        in_colour_first = _first_in_colour(tree, [n for _, _, n in entries[1:]])
        if in_colour_first is not None:
            notes += (f"{tree.where(first)} is grey but {tree.where(in_colour_first)} is "
                      "colour: every image is held in colour (3 bytes a pixel), the grey ones' "
                      "grey in each channel",)
            reference = in_colour(reference)  # (``first`` stays: the size to name)
    splits = {}
    for split in ("train", "valid", "test"):
        chosen = [(c, n) for s, c, n in entries if s == split]
        if chosen:
            names = [n for _, n in chosen]
            read_chunks, read_rows = _readers(tree, names, reference.shape, first, resize)
            splits[split] = Split(
                split, np.array([label_of[c] for c, _ in chosen], dtype=np.int32),
                reference.shape, np.uint8, read_chunks, tree.label, read_rows)
    return SourceData(splits, origin=tree.label, label_names=classes, by_class=True, notes=notes)


def _tar_in_name_order(tree, names, pixels, shape):
    """A tar's images ``names``, decoded, in that order: the archive read
    once in its own order (seeking back would decompress it again for each
    image), each image put in its place in a temporary file that the page
    cache holds while it can (the split's pixels, 1 byte each)."""
    place = {name: index for index, name in enumerate(names)}
    try:
        spill = tempfile.TemporaryFile(prefix=".int8store-tar-")
        spill.truncate(len(names) * math.prod(shape))
    except OSError as error:
        raise SourceFormatError(
            f"{tree.label}: could not make a temporary file for its images in name order "
            f"({tempfile.gettempdir()}: {error.strerror or error}); give TMPDIR a folder with "
            "room, or extract the archive and give its folder") from error
    with spill:
        held = np.memmap(spill, dtype=np.uint8, mode="r+", shape=(len(names),) + shape)
        found = 0
        with contextlib.closing(tree.in_order(set(place))) as items:
            for name, data in items:
                held[place[name]] = pixels(name, data)
                found += 1
        if found != len(names):  # (changed since its listing was read)
            raise SourceFormatError(f"{tree.label}: holds {found} of the {len(names)} images "
                                    "its listing named; was it changed while read?")
        yield from held
        del held


def _refuse_beside_splits(tree, files, depth):
    """Where split folders lie beside another folder, name that folder: the
    layout is then none of the two, and the first image deeper than a class
    folder, blamed otherwise, is in its place."""
    tops = {"/".join(parts[:depth + 1]) for _, parts in files if len(parts) > depth + 1}
    splits = sorted(t for t in tops if t.rsplit("/", 1)[-1].lower() in _SPLIT_FOLDERS)
    others = sorted(tops - set(splits))
    if splits and others:
        raise SourceFormatError(
            f"{tree.where(others[0])}: a folder beside the split folders "
            f"({', '.join(t.rsplit('/', 1)[-1] for t in splits)}) that is not one (train, "
            "valid, test, ...): move it into one of them, or out")


def _check_no_empty_class(tree, prefix, split_layout, classes):
    """Refuse a class folder without an image: labels number the class
    folders, so leaving it out would give the classes after it other labels
    than their folders' places (torchvision's ImageFolder refuses it too)."""
    level = len(prefix) + (2 if split_layout else 1)
    for folder in sorted(tree.folders):
        parts = folder.split("/")
        if len(parts) == level and parts[:len(prefix)] == prefix and not is_hidden(parts) \
                and (not split_layout or parts[len(prefix)].lower() in _SPLIT_FOLDERS) \
                and parts[-1] not in classes:
            raise SourceFormatError(
                f"{tree.where(folder)}: a class folder with no image; labels number the class "
                "folders in name order, so the classes after it would be numbered otherwise: "
                "add its images or remove it")


def _check_no_empty_split(tree, files, depth):
    """Refuse a split folder without an image (an empty valid/ beside
    train/ and test/): taken as no split at all, one would be cut from train
    without a word."""
    prefix = files[0][1][:depth]
    holding = {parts[depth] for _, parts in files}
    for folder in sorted(tree.folders):
        parts = folder.split("/")
        if len(parts) == depth + 1 and parts[:depth] == prefix and not is_hidden(parts) \
                and parts[-1].lower() in _SPLIT_FOLDERS and parts[-1] not in holding:
            raise SourceFormatError(
                f"{tree.where(folder)}: a split folder with no image: add its class folders, "
                "or remove it (a split the source lacks is cut from train)")


def _read_one(tree, name):
    if tree.read is not None:
        return tree.read(name)
    return next(tree.in_order({name}))[1]


def _first_in_colour(tree, names):
    """The first of the images ``names`` in colour (a GIF of greys is not),
    or None: when the first image is grey, the set is grey only if all are,
    which takes reading their headers (a tar once more) before their pixels
    are kept."""
    items = ((n, tree.read(n)) for n in names) if tree.read else tree.in_order(set(names))
    with contextlib.closing(items):
        for name, data in items:
            colour = in_colour_by_header(data)
            if colour or (colour is None and decoded(data, tree.where(name)).ndim == 3):
                return name
    return None


def _readers(tree, names, shape, first, resize):
    """``read_chunks(rows)``, the images in order; and ``read_rows(indices)``,
    those images in any order, for a folder or a zip (None for a tar, read
    in its own order only)."""
    def pixels(name, data):
        image = decode_image(data, tree.where(name), resize, colour=len(shape) == 3)
        if image.shape != shape:
            if len(image.shape) != len(shape):  # (a header that said grey, pixels in colour)
                raise SourceFormatError(
                    f"{tree.where(name)}: is {_describe(image.shape)} but {tree.where(first)} "
                    f"is {_describe(shape)}; all images must share a size and colour")
            raise SourceFormatError(
                f"{tree.where(name)}: is {_size(image.shape)} but {tree.where(first)} is "
                f"{_size(shape)}; all images must share a size"
                + ("" if resize else " (--resize HxW resizes every image: int8store convert and "
                   "preview take it, and load_data reads the store convert makes)"))
        return image

    def in_name_order():
        if tree.read is not None:
            return (pixels(name, tree.read(name)) for name in names)
        wanted = set(names)
        if [name for name in tree.names if name in wanted] == names:  # (tar --sort=name)
            return (pixels(name, data) for name, data in tree.in_order(wanted))
        return _tar_in_name_order(tree, names, pixels, shape)

    def read_chunks(rows):
        chunk = np.empty((rows,) + shape, dtype=np.uint8)
        filled = 0
        for image in in_name_order():
            chunk[filled] = image
            filled += 1
            if filled == rows:
                yield chunk.copy()
                filled = 0
        if filled:
            yield chunk[:filled].copy()

    def read_rows(indices):
        out = np.empty((len(indices),) + shape, dtype=np.uint8)
        for row, index in enumerate(indices.tolist()):
            out[row] = pixels(names[index], tree.read(names[index]))
        return out

    return read_chunks, read_rows if tree.read is not None else None


def _describe(shape):
    return f"{_size(shape)} colour" if len(shape) == 3 else f"{_size(shape)} grey"


def _size(shape):
    return f"{shape[0]}x{shape[1]}"
