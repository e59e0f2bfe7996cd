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
import zipfile
import zlib
from pathlib import Path

import numpy as np

from ..errors import SourceFormatError, located, quoted, shortened
from ..runtime.files import cannot_read, check_regular_file
from ..runtime.limits import check_zip_member
from ..runtime.words import counted
from . import SourceData, Split
from ._files import TAR_ERRORS, check_member_name, checked_tar_members, open_tar_stream
from .image_files import (check_image_file_size, check_resize, decode_image, decoded, in_colour,
                          in_colour_by_header, largest_image_file, parsed_resize,
                          read_image_file)

__all__ = ["read_image_folder", "read_image_archive", "decode_image", "largest_image_file",
           "IMAGE_SUFFIXES"]

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp",
                  ".pgm", ".ppm", ".pbm", ".pnm"}
# Folders nested deeper than this are refused (the layouts need three levels
# below a few wrapping folders).
_MAX_DEPTH = 32
# What zipfile raises for damaged, encrypted or exotic archives.
_ZIP_ERRORS = (zipfile.BadZipFile, OSError, EOFError, zlib.error, NotImplementedError, RuntimeError,
               ValueError)
_SPLIT_FOLDERS = {"train": "train", "training": "train", "valid": "valid",
                  "validation": "valid", "val": "valid", "test": "test", "testing": "test"}
# Files that may hold a whole data set (CIFAR-10's archive in a download folder).
_DATA_SUFFIXES = (".gz", ".tgz", ".tar", ".zip", ".npz", ".h5", ".hdf5")
# How an archive of class folders names its files, for messages.
_LAYOUT = "an archive of class folders names its files CLASS/IMAGE"
class _Tree:
    """Files of a folder or an archive, by relative POSIX path."""

    def __init__(self, label, names, read, in_order=None, separator=":", folders=()):
        self.label = label  # how the container is named in messages
        self.names = names
        self.folders = folders  # the folders it names, images in them or not
        self.read = read  # relative path -> bytes
        self.in_order = in_order  # or: iterate (name, bytes) in storage order
        self.separator = separator

    def where(self, name):
        """How a file is named in messages: folder/CLASS/x.png, archive.zip:CLASS/x.png
        (the name :func:`~int8store.errors.shortened`, as a member's always is)."""
        return f"{self.label}{self.separator}{shortened(name)}"


def _folder_tree(folder):
    # Plain strings, not Path objects: pathlib interns every part of every
    # name, and the interned-string table of a big folder costs memory.
    names, folders = [], []
    pending = [("", 0)]  # (relative folder, depth): a stack, not recursion
    seen = {_folder_identity(folder): ""}  # (a symbolic link back up would loop)
    while pending:
        rel, depth = pending.pop()
        if depth > _MAX_DEPTH:
            raise SourceFormatError(f"{folder}/{rel}: folders nested more than {_MAX_DEPTH} "
                                    "deep; expected CLASS/IMAGE or SPLIT/CLASS/IMAGE")
        try:
            entries = sorted(os.scandir(os.path.join(folder, rel)), key=lambda e: e.name)
        except OSError as error:
            raise SourceFormatError(f"{folder}/{rel}: cannot list ({error.strerror})") from error
        subfolders = []
        for entry in entries:
            name = f"{rel}/{entry.name}" if rel else entry.name
            if entry.is_dir():
                if not entry.name.startswith("."):
                    identity = _folder_identity(os.path.join(folder, name))
                    if identity in seen:
                        link, other = _link_first(folder, name, seen[identity])
                        raise SourceFormatError(
                            f"{link}: leads to {other} again (a symbolic link): its "
                            "images would be read twice, or forever; remove the link")
                    seen[identity] = name
                    subfolders.append((name, depth + 1))
                    folders.append(name)
            else:
                if not entry.is_file():  # (a pipe or a device: opening it could wait for ever)
                    check_regular_file(os.path.join(folder, name))
                names.append(name)
        pending += reversed(subfolders)
    names.sort()

    def read(name):
        path = os.path.join(folder, name)  # a str: Path would intern the name (see above)
        try:
            with open(path, "rb") as f:
                return read_image_file(f, os.fstat(f.fileno()).st_size, path)
        except OSError as error:
            raise cannot_read(path, error) from error

    return _Tree(str(folder), names, read, separator="/", folders=folders)


def _link_first(folder, name, seen):
    """``(link, the other)`` of two names of one folder inside ``folder``:
    the one that is a symbolic link first (the one met second, when the
    first met is the link: ``ant -> cat`` sorts before ``cat``)."""
    paths = [f"{folder}/{name}", f"{folder}/{seen}" if seen else str(folder)]
    if not os.path.islink(paths[0]) and os.path.islink(paths[1]):
        paths.reverse()
    return paths


def _folder_identity(path):
    """``(device, inode)`` of the folder ``path`` names (links followed)."""
    stat = os.stat(path)
    return stat.st_dev, stat.st_ino


def _zip_name(info):
    """A zip member's name: without the UTF-8 flag, zipfile reads it as
    cp437, which makes UTF-8 names (Info-ZIP's ``zip`` sets no flag) other
    text (``Äpfel`` as ``├äpfel``), and class names are labels: bytes that
    are UTF-8 are taken as UTF-8, as ``unzip`` does."""
    if info.flag_bits & 0x800:
        return info.filename
    try:
        return info.filename.encode("cp437").decode("utf-8")
    except UnicodeError:  # (cp437 indeed, or bytes zipfile read otherwise)
        return info.filename


def _zip_tree(path):
    try:
        archive = zipfile.ZipFile(path)
        listed = [(_zip_name(i), i) for i in archive.infolist()]
        # (not ZipInfo.is_dir: before Python 3.12 it fails on an empty name)
        members = {name: i for name, i in listed if not name.endswith("/")}
        folders = [name[:-1] for name, _ in listed if name.endswith("/")]
    except _ZIP_ERRORS as error:
        raise SourceFormatError(f"{path}: not a readable zip archive ({quoted(error)})") from error
    seen = set()
    for name, info in ((n, i) for n, i in listed if not n.endswith("/")):
        where = located(path, name)
        check_member_name(name, where, _LAYOUT)
        _check_once(name, where, seen)
        if (info.external_attr >> 16) & 0o170000 == 0o120000:
            raise SourceFormatError(f"{where}: is a symbolic link; int8store reads regular "
                                    "files only (store a copy of the image instead)")
        check_zip_member(info, where, Path(path).stat().st_size)
        if _is_decoded(name):
            check_image_file_size(info.file_size, where)

    def read(name):
        where = located(path, name)
        try:
            with archive.open(members[name]) as member:
                return read_image_file(member, members[name].file_size, where)
        except _ZIP_ERRORS as error:
            raise SourceFormatError(f"{where}: damaged in the archive ({quoted(error)})") from error

    return _Tree(str(path), list(members), read, folders=folders)


def _tar_tree(path):
    names, folders, seen = [], [], set()
    try:
        # One pass in stream mode: each member is checked from its header
        # before the archive is read past it (or its bytes unpacked).
        with open_tar_stream(path) as archive:
            for member, where in checked_tar_members(archive, path, _LAYOUT):
                if member.isfile():
                    _check_once(member.name, where, seen)
                    if _is_decoded(member.name):
                        check_image_file_size(member.size, where)
                    names.append(member.name)
                elif member.isdir():
                    folders.append(member.name.rstrip("/"))
    except TAR_ERRORS as error:
        raise SourceFormatError(f"{path}: not a readable tar archive ({quoted(error)})") from error

    def in_order(wanted):
        # One streaming pass in the archive's own order: seeking back in a
        # compressed tar would decompress it again for every file.
        try:
            with open_tar_stream(path) as archive:
                for member in archive:
                    if member.isfile() and member.name in wanted:
                        yield member.name, read_image_file(
                            archive.extractfile(member), member.size,
                            located(path, member.name))
        except TAR_ERRORS as error:
            raise SourceFormatError(f"{path}: damaged tar archive ({quoted(error)})") from error

    return _Tree(str(path), names, None, in_order, folders=folders)


def _check_once(name, where, seen):
    """Refuse a second archive member of the same file (``./a/x.png`` is
    ``a/x.png``): extracting the archive keeps one of them, reading it would
    keep both, and the two would not be the same data set."""
    key = "/".join(part for part in name.split("/") if part not in ("", "."))
    if key in seen:
        raise SourceFormatError(f"{where}: is in the archive twice; extracting it keeps only "
                                "one of the two, so neither is read: repack the archive")
    seen.add(key)


def read_image_folder(folder, resize=None):
    """Splits of a folder of class folders (see the module docstring)."""
    if resize is not None:
        resize = parsed_resize(resize)
        check_resize(resize, folder)
    return _read_tree(_folder_tree(Path(folder)), resize)


def read_image_archive(path, resize=None):
    """Splits of a ``.zip`` or ``.tar(.gz)`` of class folders."""
    if resize is not None:
        resize = parsed_resize(resize)
        check_resize(resize, path)
    tree = _zip_tree(path) if str(path).lower().endswith(".zip") else _tar_tree(path)
    return _read_tree(tree, resize)


def _split_layout_at(files, depth):
    """Whether ``files`` (``(name, parts)``) lie as SPLIT/CLASS/IMAGE from
    folder level ``depth`` (``Train`` a split as ``train`` is)."""
    return all(len(parts) == depth + 3 and parts[depth].lower() in _SPLIT_FOLDERS
               for _, parts in files)


# What an operating system leaves in folders of images, besides hidden files.
_SYSTEM_FILES = {"__MACOSX", "thumbs.db", "ehthumbs.db", "desktop.ini"}
# Documents that come with downloaded sets, skipped with a note (torchvision's
# ImageFolder and Keras skip every file of another suffix, without a word).
_DOCUMENT_SUFFIXES = {".txt", ".md", ".rst", ".csv", ".tsv", ".json", ".yaml", ".yml", ".xml",
                      ".html", ".htm", ".pdf", ".log"}
_DOCUMENT_NAMES = {"readme", "license", "licence", "copying", "notice", "authors", "citation"}


def _is_hidden(parts):
    # "." is not hidden: `tar czf a.tar.gz .` names every member ./CLASS/IMAGE.
    return any((p.startswith(".") and p != ".") or p.lower() in _SYSTEM_FILES for p in parts)


def _is_decoded(name):
    """Whether a file is one :func:`_read_tree` decodes (others are skipped or refused)."""
    return (not _is_hidden(name.split("/"))
            and os.path.splitext(name)[1].lower() in IMAGE_SUFFIXES)


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
    files = [(name, parts) for name, parts in files if not _is_hidden(parts)]
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
                f"{tree.where(name)}: not an image file (expected one of "
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
        notes += (f"one class folder ({classes[0]}): every image has label 0, and a classifier "
                  f"learns nothing from one class; {tree.label} should hold a folder of images "
                  "for each class",)
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
        if len(parts) == level and parts[:len(prefix)] == prefix and not _is_hidden(parts) \
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
        if len(parts) == depth + 1 and parts[:depth] == prefix and not _is_hidden(parts) \
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
