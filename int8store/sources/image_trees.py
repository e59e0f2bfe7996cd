"""Class folders' files as one tree of names, in a folder, a ``.zip`` or a
``.tar(.gz)``: listed (each archive member checked from its header before a
byte of it is unpacked), named in messages, and read.

Which names are images (:data:`IMAGE_SUFFIXES`) and which are the
operating system's or hidden (:func:`is_hidden`) is decided here, where the
listing checks each image's announced size; how the tree is laid out in
classes and splits is :mod:`.images`'.
"""

import os
import zipfile
import zlib
from pathlib import Path

from ..errors import SourceFormatError, located, quoted, shortened
from ..runtime.files import cannot_read, check_regular_file
from ..runtime.limits import check_zip_member
from ._files import (TAR_ERRORS, check_member_name, checked_tar_members, open_tar_stream,
                     unreadable_tar)
from .image_files import check_image_file_size, read_image_file

__all__ = ["IMAGE_SUFFIXES", "Tree", "folder_tree", "zip_tree", "tar_tree", "is_hidden",
           "is_decoded"]

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp",
                  ".pgm", ".ppm", ".pbm", ".pnm"}
# Folders nested deeper than this are refused (the layouts need three levels
# below a few wrapping folders).
_MAX_DEPTH = 32
# What zipfile raises for damaged, encrypted or exotic archives.
_ZIP_ERRORS = (zipfile.BadZipFile, OSError, EOFError, zlib.error, NotImplementedError, RuntimeError,
               ValueError)
# How an archive of class folders names its files, for messages.
_LAYOUT = "an archive of class folders names its files CLASS/IMAGE"


class Tree:
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


def folder_tree(folder):
    """The :class:`Tree` of a folder: its files, sorted, walked without
    following a link back up."""
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

    return Tree(str(folder), names, read, separator="/", folders=folders)


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


def zip_tree(path):
    """The :class:`Tree` of a zip, each member checked from its header."""
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
        if is_decoded(name):
            check_image_file_size(info.file_size, where)

    def read(name):
        where = located(path, name)
        try:
            with archive.open(members[name]) as member:
                return read_image_file(member, members[name].file_size, where)
        except _ZIP_ERRORS as error:
            raise SourceFormatError(f"{where}: damaged in the archive ({quoted(error)})") from error

    return Tree(str(path), list(members), read, folders=folders)


def tar_tree(path):
    """The :class:`Tree` of a tar, read in one pass in its own order (each
    member checked from its header); its files are read in that order only
    (``in_order``)."""
    names, folders, seen = [], [], set()
    try:
        # One pass in stream mode: each member is checked from its header
        # before the archive is read past it (or its bytes unpacked).
        with open_tar_stream(path) as archive:
            for member, where in checked_tar_members(archive, path, _LAYOUT):
                if member.isfile():
                    _check_once(member.name, where, seen)
                    if is_decoded(member.name):
                        check_image_file_size(member.size, where)
                    names.append(member.name)
                elif member.isdir():
                    folders.append(member.name.rstrip("/"))
    except TAR_ERRORS as error:
        raise unreadable_tar(path, error) from error

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

    return Tree(str(path), names, None, in_order, folders=folders)


def _check_once(name, where, seen):
    """Refuse a second archive member of the same file (``./a/x.png`` is
    ``a/x.png``): extracting the archive keeps one of them, reading it would
    keep both, and the two would not be the same data set."""
    key = "/".join(part for part in name.split("/") if part not in ("", "."))
    if key in seen:
        raise SourceFormatError(f"{where}: is in the archive twice; extracting it keeps only "
                                "one of the two, so neither is read: repack the archive")
    seen.add(key)


# What an operating system leaves in folders of images, besides hidden files
# (lower case: a name is compared lowered, so ``__MACOSX`` is ``__macosx`` here).
_SYSTEM_FILES = {"__macosx", "thumbs.db", "ehthumbs.db", "desktop.ini"}


def is_hidden(parts):
    # "." is not hidden: `tar czf a.tar.gz .` names every member ./CLASS/IMAGE.
    return any((p.startswith(".") and p != ".") or p.lower() in _SYSTEM_FILES for p in parts)


def is_decoded(name):
    """Whether a file is one :mod:`.images` decodes (others are skipped or refused)."""
    return (not is_hidden(name.split("/"))
            and os.path.splitext(name)[1].lower() in IMAGE_SUFFIXES)
