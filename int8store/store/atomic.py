"""Atomic output files: written beside the target under a temporary name and
published only when complete, so a failure or an interrupt leaves nothing
behind and an existing file is never replaced by half of one.

* Publishing without ``force`` hard-links the finished file to the target,
  which fails if the target exists: a file that appeared meanwhile (another
  conversion to the same path) is never replaced. With ``force`` the file
  is renamed over the target, atomically.
* Temporary files are named ``.TARGET.HOST.PID.RANDOM.int8store-tmp``; the
  next run on the same target removes those of processes that no longer
  exist on this host (a run killed by SIGKILL or a power cut cannot clean up).
* Nothing is published once an interrupt was received (see
  :mod:`int8store.runtime.interrupts`), even one swallowed on its way up (Python
  drops exceptions raised in weakref callbacks and ``__del__``).
"""

import errno
import os
import stat
from contextlib import contextmanager
from pathlib import Path

from ..errors import ArgumentError, OutputError, OutputExistsError
from ..runtime.files import kind_of_file
from ..runtime.interrupts import interrupts_deferred, raise_if_interrupted
from ..runtime.temporaries import new_temporary, remove_stale_temporaries as remove_stale

__all__ = ["atomic_output", "new_file_mode", "check_can_write", "check_not_a_source",
           "remove_stale_temporaries", "was_published", "TEMPORARY_SUFFIX"]

TEMPORARY_SUFFIX = ".int8store-tmp"
_published = set()  # targets published by this process (an interrupt may come just after)


def was_published(path):
    """Whether this process published ``path`` (complete) with :func:`atomic_output`."""
    return os.path.abspath(path) in _published


def check_not_a_source(path, sources, verb, made, trees=(), named=None):
    """Refuse to write ``path`` where it is the file of one of ``sources``
    (one, or a list), or inside one of ``trees`` (the folders among them
    read as trees of class folders, where every file not hidden must be an
    image), ``--force`` or not: ``made`` (the grid, the store) would replace
    the data it is made from (``verb``: what is done to it), or become part
    of it. ``named``: how the refusal names ``path`` (the option that gave
    it), ``path`` itself by default."""
    for source in sources if isinstance(sources, (list, tuple)) else [sources]:
        source = Path(str(source))
        if source.is_file() and Path(path).is_file() and os.path.samefile(source, path):
            raise ArgumentError(f"{path}: is the source it would {verb}; {made} would replace "
                                "it (--force too): name another file")
    for tree in trees:
        folder = os.path.realpath(tree)
        written = os.path.join(os.path.realpath(Path(path).parent), Path(path).name)
        if os.path.commonpath([folder, written]) != folder:
            continue
        inside = Path(os.path.relpath(written, folder)).parts
        if not any(part.startswith(".") or part == "__MACOSX" for part in inside):
            raise ArgumentError(f"{named or path}: is inside {tree}, the tree of class folders "
                                f"it would {verb}; {made} would become part of it: write it "
                                "outside that folder")


def check_can_write(path, force=False):
    """The file that writing ``path`` makes or replaces: ``path`` itself, or
    the file a symbolic link there names (the link stays a link, as
    ``open(path, "w")`` would leave it). Raises :class:`OutputExistsError`
    if that exists (a link naming nothing yet counts) and ``force`` is
    false, :class:`OutputError` if it is a folder, or anything but a regular
    file even with ``force`` (a device such as /dev/null, a FIFO, a socket:
    publishing renames a file over the name, which would replace the device
    itself)."""
    text = os.fspath(path)
    if text.endswith(os.sep) or (os.altsep and text.endswith(os.altsep)):
        # (Path() drops the slash: "out/" wrote a file named "out")
        raise OutputError(f"{text}: names a folder (it ends in {text[-1]!r}); give the path "
                          "of the file to write in it")
    path = Path(path)
    linked = path.is_symlink()
    target = Path(os.path.realpath(path)) if linked else path
    try:
        kind = target.stat().st_mode
    except FileNotFoundError:
        kind = None
    except OSError as error:  # a link loop, a folder on the way that is a file, ...
        raise OutputError(f"{path}: cannot write here ({error.strerror or error})") from error
    if kind is not None and stat.S_ISDIR(kind):
        raise OutputError(f"{path}: is a folder; give the path of the file to write")
    if kind is not None and not stat.S_ISREG(kind):
        raise OutputError(f"{path}: is not a regular file ({kind_of_file(kind)}); "
                          "give the path of a file to write, even with --force")
    if (kind is not None or linked) and not force:
        raise OutputExistsError(f"{path}: already exists"
                                f"{f' (a link to {target})' if target != path else ''}; "
                                "pass --force (in Python, force=True) to replace it")
    return target


def remove_stale_temporaries(path):
    """Remove temporary files left for ``path`` by processes of this host that
    are gone; returns their paths."""
    return remove_stale(path, TEMPORARY_SUFFIX)


@contextmanager
def atomic_output(path, force=False, report=None):
    """Yield a temporary path beside ``path``; publish it as ``path`` on success.

    A missing folder for ``path`` is created, and ``report`` (if given) told
    so in a line.

    On any exception (KeyboardInterrupt included), or if an interrupt was
    received while the block ran, the temporary file is removed and ``path``
    is left as it was.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "out.txt"
    >>> with atomic_output(target) as tmp:
    ...     _ = tmp.write_text("done")
    >>> target.read_text()
    'done'
    """
    given, path = path, check_can_write(path, force)
    temporary, made, published = None, [], False
    try:
        # An interrupt between the file's making and the name's keeping left
        # the file behind (CI, an interrupted conversion): held back until
        # the name is kept, then handled here, where the file is removed.
        with interrupts_deferred():
            temporary = _new_temporary(path, report, made)
        yield temporary
        raise_if_interrupted()
        # Private while written (mkstemp's 0600); published with the mode any
        # new file of the user gets, so that others can read what the umask lets them.
        os.chmod(temporary, new_file_mode())
        # (an interrupt held back until the name is published and known so:
        # then "had already been written", never "nothing was written")
        with interrupts_deferred():
            _publish(temporary, path, force)
            published = True
            _published.update({os.path.abspath(given), os.path.abspath(path)})
        _sync_folder(path.parent)  # the new name survives a power cut too
    finally:
        # (a second interrupt waits for the temporary file's removal)
        with interrupts_deferred():
            _remove(temporary, None if published else made)


def _remove(temporary, made):
    """Remove ``temporary`` (if any), and the folders in ``made`` (None once published)."""
    try:
        if temporary is not None:
            temporary.unlink()
    except FileNotFoundError:
        pass
    for folder in made or ():  # (a failed write leaves no folder it made either)
        try:
            folder.rmdir()
        except OSError:  # (something else was put there meanwhile)
            break


def _new_temporary(path, report, made):
    """A new empty temporary file beside ``path``, its folder made if
    missing (the folders made, deepest first, added to ``made``)."""
    try:
        created = not path.parent.is_dir()
        if created:
            missing = [path.parent] + [p for p in path.parent.parents if not p.exists()]
            path.parent.mkdir(parents=True, exist_ok=True)
            made.extend(missing)
        remove_stale_temporaries(path)
        handle, temporary = new_temporary(path, TEMPORARY_SUFFIX)
    except OSError as error:
        raise OutputError(f"{path}: cannot write here ({error.strerror or error})") from error
    os.close(handle)
    if created and report is not None:  # (out of the try: a report that fails is not the path's fault)
        report(f"created the folder {path.parent} for {path.name}")
    return Path(temporary)


def new_file_mode():
    """``0o666 & ~umask``: the mode ``open()`` gives a new file. The umask is
    read from /proc where the system has it, since setting it to read it
    (the portable way) would race with other threads creating files."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def _sync_folder(folder):
    """fsync a folder, making the names made in it durable (best effort:
    some systems cannot open or sync a folder)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def _publish(temporary, path, force):
    try:
        if force:
            os.replace(temporary, path)
            return
        try:
            os.link(temporary, path)
        except FileExistsError:
            raise OutputExistsError(
                f"{path}: appeared while this file was being written (another run?); "
                "it was left as it is: pass --force (in Python, force=True) to replace it") from None
        except OSError as error:
            if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            # A file system without hard links: check, then rename (not atomic).
            check_can_write(path)
            os.rename(temporary, path)
    except OSError as error:
        if isinstance(error, OutputExistsError):
            raise
        raise OutputError(f"{path}: cannot publish the finished file ({error.strerror or error})") from error
