"""Downloads that are verified before they land: mirrors in order, size and
checksum checked, written atomically (a temporary file renamed into place)."""

import hashlib
import http.client
import os
import socket
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from ..errors import DownloadError

__all__ = ["RemoteFile", "download", "verify_file", "file_digest", "DEFAULT_TIMEOUT"]

#: Seconds to wait for a connection or for the next block of data.
DEFAULT_TIMEOUT = 5.0
_BLOCK = 1 << 16


@dataclass(frozen=True)
class RemoteFile:
    """A file we know by name, size and digest (``algorithm`` is a hashlib name)."""

    name: str
    size: int
    digest: str
    algorithm: str = "sha256"


def file_digest(path, algorithm="sha256"):
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_file(path, remote):
    """None if ``path`` has ``remote``'s size and digest, else what is wrong."""
    size = Path(path).stat().st_size
    if size != remote.size:
        return f"{size:,} bytes, expected {remote.size:,}"
    actual = file_digest(path, remote.algorithm)
    if actual != remote.digest:
        return f"{remote.algorithm} {actual}, expected {remote.digest}"
    return None


def download(remote, mirrors, folder, timeout=DEFAULT_TIMEOUT):
    """Fetch ``remote`` into ``folder`` from the first mirror that serves it intact.

    Returns the path written. Nothing is left in ``folder`` if every mirror
    fails; the error lists what each mirror did.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    failures = []
    for mirror in mirrors:
        url = mirror.rstrip("/") + "/" + remote.name
        try:
            return _fetch(url, remote, folder, timeout)
        except (OSError, http.client.HTTPException, _Rejected) as error:
            failures.append(f"{url}: {_reason(error)}")
    raise DownloadError(f"could not download {remote.name}: " + "; ".join(failures or ["no mirrors"]))


class _Rejected(Exception):
    """The transfer completed but the file is not the one expected."""


def _fetch(url, remote, folder, timeout):
    target = folder / remote.name
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{remote.name}.", suffix=".part")
    try:
        digest = hashlib.new(remote.algorithm)
        received = 0
        with os.fdopen(handle, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as response, \
                tqdm(total=remote.size, unit="B", unit_scale=True, desc=remote.name,
                     disable=None, leave=False) as progress:
            for block in iter(lambda: response.read(_BLOCK), b""):
                out.write(block)
                digest.update(block)
                received += len(block)
                progress.update(len(block))
                if received > remote.size:
                    raise _Rejected(f"more than the expected {remote.size:,} bytes")
        if received != remote.size:
            raise _Rejected(f"received {received:,} bytes, expected {remote.size:,}")
        if digest.hexdigest() != remote.digest:
            raise _Rejected(f"{remote.algorithm} {digest.hexdigest()}, expected {remote.digest}")
        os.replace(temporary, target)
        return target
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _reason(error):
    if isinstance(error, urllib.error.HTTPError):
        return f"HTTP {error.code} {error.reason}"
    if isinstance(error, urllib.error.URLError):
        return str(error.reason)
    if isinstance(error, http.client.IncompleteRead):
        return f"transfer cut short after {len(error.partial):,} more bytes"
    if isinstance(error, (socket.timeout, TimeoutError)):
        return "timed out"
    return str(error) or type(error).__name__
