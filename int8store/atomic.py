"""Atomic output files: written beside the target under a temporary name and
renamed into place only when complete, so a failure leaves nothing behind."""

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .errors import OutputExistsError

__all__ = ["atomic_output", "check_can_write"]


def check_can_write(path, force=False):
    """Raise :class:`OutputExistsError` if ``path`` exists and ``force`` is false."""
    path = Path(path)
    if path.exists() and not force:
        raise OutputExistsError(f"{path}: already exists; pass --force (force=True) to replace it")
    return path


@contextmanager
def atomic_output(path, force=False):
    """Yield a temporary path beside ``path``; rename it to ``path`` on success.

    On any exception (KeyboardInterrupt included) the temporary file is
    removed and ``path`` is left as it was.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "out.txt"
    >>> with atomic_output(target) as tmp:
    ...     _ = tmp.write_text("done")
    >>> target.read_text()
    'done'
    """
    path = check_can_write(path, force)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    temporary = Path(temporary)
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        if temporary.exists():
            temporary.unlink()
