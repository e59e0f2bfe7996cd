"""What a file to be read must be: a regular file, not a pipe, a device or a
socket (opening a FIFO waits for a writer, and ``/dev/zero`` never ends),
and readable; each refusal one error that names the file
(:func:`check_regular_file`; :func:`cannot_read`, a
:class:`~int8store.SourceReadError`, an :class:`OSError` as a permission
denied is). Outputs are checked by
:func:`int8store.store.atomic.check_can_write`, with the same words for a
file's kind (:func:`kind_of_file`). Standard output read by what has gone
(``| head -1``) ends a command quietly (:func:`stdout_closed`,
:func:`end_with_stdout_closed`).
"""

import os
import select
import signal
import stat
import sys

from ..errors import SourceFormatError, SourceReadError, shortened

__all__ = ["check_regular_file", "cannot_read", "kind_of_file", "stdout_closed",
           "end_with_stdout_closed"]


def check_regular_file(path):
    """Refuse ``path`` where it exists and is no regular file (a link is
    followed), naming what it is; before anything opens it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return  # (the reader says so, as it always has)
    except OSError as error:
        raise cannot_read(path, error) from error
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise SourceFormatError(f"{path}: is not a regular file ({kind_of_file(mode)}); "
                                "int8store reads files and folders, not pipes or devices")


def cannot_read(path, error):
    """The error to raise where ``path`` cannot be opened or read
    (``error``: the :class:`OSError`, a permission denied say)."""
    if isinstance(error, FileNotFoundError) and os.path.islink(path):
        # (it said "No such file or directory" of a name that is listed)
        return SourceReadError(f"{path}: cannot read: a symbolic link to "
                               f"{shortened(repr(os.readlink(path)), 240)}, which does not exist")
    return SourceReadError(f"{path}: cannot read ({error.strerror or error})")


def kind_of_file(mode):
    """What a file of ``st_mode`` ``mode`` is, in words ("a FIFO")."""
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def stdout_closed():
    """Whether standard output is a pipe whose reader has gone (a broken
    pipe of anything else is not the command's output ending)."""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poll.poll(0))
    except (OSError, ValueError, AttributeError):  # (no file descriptor, no poll)
        return False


def end_with_stdout_closed():
    """What reads stdout is gone: end quietly, as a closed pipe ends other
    programs, with status 128 + SIGPIPE (141); stdout goes to the null
    device, so that Python's last flush as it exits meets no pipe either."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):  # (no file descriptor: a test's capture)
        pass
    return 128 + getattr(signal, "SIGPIPE", 13)
