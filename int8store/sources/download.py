"""Downloads that are verified before they land: mirrors in order, size and
checksum checked, written atomically (a temporary file renamed into place);
and the cache folder the named datasets (``"mnist"``, ``"cifar10"``) are
kept in, filled by :func:`fetch_into`."""

import functools
import hashlib
import http.client
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from ..errors import (DatasetNotFoundError, DownloadError, OutputError, SourceFormatError,
                      path_argument, shortened)
from ..runtime.interrupts import interrupts_deferred
from ..runtime.temporaries import new_temporary, remove_stale_temporaries
from ..store.atomic import new_file_mode

__all__ = ["RemoteFile", "download", "verify_file", "file_digest", "DEFAULT_TIMEOUT",
           "dataset_folder", "configured_mirrors", "fetch_into", "check_cached"]

#: Seconds to wait for a connection or for the next bytes of data.
DEFAULT_TIMEOUT = 5.0
_BLOCK = 1 << 16
#: A server that sends fewer bytes than this in as many seconds is given up
#: on: the timeout is each read's, and one byte every few seconds would
#: never end (a 1 KiB/s link takes a day for CIFAR-10).
SLOWEST = (_BLOCK, 60.0)
# Set to 1 to never touch the network (fail at once when nothing is cached);
# empty, 0, false, no or off leave it on.
_OFFLINE_VARIABLE = "INT8STORE_OFFLINE"
_ONLINE_VALUES = ("", "0", "false", "no", "off")


@dataclass(frozen=True)
class RemoteFile:
    """A file we know by name, size and digest (``algorithm`` is a hashlib name)."""

    name: str
    size: int
    digest: str
    algorithm: str = "sha256"


def file_digest(path, algorithm="sha256"):
    digest = hashlib.new(algorithm, usedforsecurity=False)  # (FIPS Pythons refuse md5 else)
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
    fails, nor the folders made for it; the error lists what each mirror did.
    A folder that cannot be written is :class:`~int8store.OutputError`,
    raised at once: no mirror would do better.
    """
    folder = Path(folder)
    made = [f for f in (folder, *folder.parents) if not f.exists()]  # (deepest first)
    with _cache_writes(folder):
        folder.mkdir(parents=True, exist_ok=True)
    target = folder / remote.name
    if os.path.lexists(target) and not target.is_file():
        raise OutputError(f"{target}: not a file, where the download is to be kept: remove it "
                          "or name another cache folder ($INT8STORE_DATA)")
    failures = []
    try:
        for mirror in mirrors:
            url = mirror.rstrip("/") + "/" + remote.name
            try:
                urllib.request.Request(url)  # (a URL it cannot parse: "http://[::1:8765/")
            except ValueError as error:
                failures.append(f"{url}: not a URL ({shortened(str(error))})")
                continue
            try:
                return _fetch(url, remote, target, timeout)
            except OutputError:
                raise
            except (OSError, http.client.HTTPException, _Rejected) as error:
                failures.append(f"{url}: {shortened(_reason(error))}")  # (the server's words)
    except BaseException:  # (a cache folder that cannot be written, Ctrl-C)
        _remove_empty(made)
        raise
    _remove_empty(made)
    raise DownloadError(f"could not download {remote.name}: " + "; ".join(failures or ["no mirrors"]))


def _remove_empty(made):
    """Remove the folders ``made`` (deepest first) while they are empty (a
    first run offline left ~/.cache/int8store/mnist/, empty)."""
    for empty in made:
        try:
            empty.rmdir()
        except OSError:  # (no longer empty: another run wrote there)
            break


@contextmanager
def _cache_writes(folder):
    """A failure to write in the cache ``folder`` (read-only, full, a file
    where a folder should be) as :class:`~int8store.OutputError` naming it,
    and not as a mirror's failure."""
    try:
        yield
    except OutputError:
        raise
    except OSError as error:
        reason = error.strerror or str(error)
        where = f": {error.filename}" if error.filename and str(error.filename) != str(folder) \
            else ""
        raise OutputError(f"{folder}: the cache folder cannot be written ({reason}{where}): give "
                          "it room and write access, or name another one ($INT8STORE_DATA)") from error


def dataset_folder(dataset, cache_dir=None):
    """Where the named ``dataset`` is cached: ``cache_dir``, ``$INT8STORE_DATA``,
    or ``~/.cache/int8store``, each with ``dataset/`` appended."""
    if cache_dir is not None:
        path_argument(cache_dir, "cache_dir")
    root = cache_dir or os.environ.get("INT8STORE_DATA") or Path.home() / ".cache" / "int8store"
    return Path(root).expanduser() / dataset


def configured_mirrors(variable, defaults):
    """The comma-separated URLs of ``$variable`` if set (a local mirror, a
    proxy), else ``defaults``."""
    configured = os.environ.get(variable, "")
    return tuple(m.strip() for m in configured.split(",") if m.strip()) or tuple(defaults)


def fetch_into(folder, files, mirrors, timeout, dataset, what_to_do):
    """Make sure ``folder`` holds ``files`` (:class:`RemoteFile`), each verified;
    download the missing ones from ``mirrors`` in order, unless
    ``$INT8STORE_OFFLINE`` is set. Raises :class:`DatasetNotFoundError` saying
    why ``dataset`` could not be had, then ``what_to_do``."""
    folder = Path(folder)
    missing = []
    for remote in files:
        path = folder / remote.name
        if path.is_file():
            check_cached(path, remote)
        else:
            missing.append(remote)
    if not missing:
        return folder
    offline = os.environ.get(_OFFLINE_VARIABLE, "").strip().lower() not in _ONLINE_VALUES
    failures = ["the network is off ($INT8STORE_OFFLINE is set)"] if offline else []
    for remote in [] if offline else missing:
        try:
            download(remote, mirrors, folder, timeout)
        except DownloadError as error:
            failures.append(str(error))
            break  # The other files would fail the same way: do not wait on them.
    if failures:
        raise DatasetNotFoundError(
            f"{dataset} is not in the cache folder {folder} and could not be downloaded "
            f"({'; '.join(failures)}). {what_to_do}")
    return folder


def check_cached(path, remote):
    """Raise :class:`SourceFormatError` naming ``path`` unless it is ``remote``."""
    problem = verify_file(path, remote)
    if problem:
        raise SourceFormatError(
            f"{path}: does not match the known {remote.name} ({problem}); "
            "the file is damaged or a different version: delete it to download it again"
        )


_PART = ".part"  # (a download under way)


class _Rejected(Exception):
    """The transfer completed but the file is not the one expected."""


def _fetch(url, remote, target, timeout):
    folder = target.parent
    temporary = None
    try:
        with _cache_writes(folder):
            remove_stale_temporaries(target, _PART)  # (a run killed mid-download left one)
            with interrupts_deferred():  # (a Ctrl-C just after the file is made removes it too)
                handle, temporary = new_temporary(target, _PART)
        digest = hashlib.new(remote.algorithm, usedforsecurity=False)
        received = 0
        with os.fdopen(handle, "wb") as out, _open(url, timeout) as response, \
                tqdm(total=remote.size, unit="B", unit_scale=True, desc=remote.name,
                     disable=None, leave=False) as progress:
            read = getattr(response, "read1", response.read)  # (what has come, not a whole block)
            for block in _paced(iter(lambda: read(_BLOCK), b"")):
                with _cache_writes(folder):
                    out.write(block)
                digest.update(block)
                received += len(block)
                progress.update(len(block))
                if received > remote.size:
                    raise _Rejected(f"more than the expected {remote.size:,} bytes")
            with _cache_writes(folder):
                out.flush()
        if received != remote.size:
            raise _Rejected(f"the transfer ended after {received:,} bytes, expected "
                            f"{remote.size:,}")
        if digest.hexdigest() != remote.digest:
            raise _Rejected(f"{remote.algorithm} {digest.hexdigest()}, expected {remote.digest}")
        with _cache_writes(folder):
            # (mkstemp's 0600 while written; published as any new file of the
            # user is, 0666 & ~umask: a shared cache folder's users read it)
            os.chmod(temporary, new_file_mode())
            os.replace(temporary, target)
        return target
    finally:
        if temporary is not None and os.path.exists(temporary):
            os.unlink(temporary)


def _open(url, timeout):
    """The response to ``url``; a redirect to a URL urllib cannot parse
    (``Location: http://[::1:80/``: a ValueError) is that mirror's failure."""
    try:
        return _opener().open(url, timeout=timeout)
    except ValueError as error:
        raise _Rejected(f"redirected to a URL that cannot be read ({error})") from error


@functools.cache
def _head_within(connection_class):
    """``connection_class`` whose response head (status line and headers)
    must come within :data:`SLOWEST`'s seconds: the timeout is each read's,
    so a server sending a header byte every few seconds held the download
    for days (the body is paced by :func:`_paced`)."""

    class Connection(connection_class):
        def getresponse(self):
            late = threading.Event()
            watch = threading.Timer(SLOWEST[1], self._give_up, (late,))
            watch.daemon = True
            watch.start()
            too_slow = f"too slow: no whole response head in {SLOWEST[1]:g} s"
            try:
                response = super().getresponse()
            except (OSError, http.client.HTTPException) as error:
                if late.is_set():
                    raise _Rejected(too_slow) from error
                raise
            finally:
                watch.cancel()
            if late.is_set():  # (a head cut short can read as a whole one)
                response.close()
                raise _Rejected(too_slow)
            return response

        def _give_up(self, late):
            late.set()
            try:
                self.sock.shutdown(socket.SHUT_RDWR)  # (the blocked read returns)
            except (AttributeError, OSError):  # (closed meanwhile)
                pass

    return Connection


class _HeadPaced:
    """A urllib handler whose connections pace their response head too."""

    def do_open(self, http_class, request, **arguments):
        return super().do_open(_head_within(http_class), request, **arguments)


class _HTTPHandler(_HeadPaced, urllib.request.HTTPHandler):
    pass


class _HTTPSHandler(_HeadPaced, urllib.request.HTTPSHandler):
    pass


@functools.cache
def _opener():
    """urllib's opener (proxies, redirects), its connections' heads paced."""
    return urllib.request.build_opener(_HTTPHandler, _HTTPSHandler)


def _paced(blocks):
    """``blocks`` as they come, given up on (:class:`_Rejected`) when fewer
    than :data:`SLOWEST` bytes come in its seconds."""
    least, seconds = SLOWEST
    since, count = time.monotonic(), 0
    for block in blocks:
        count += len(block)
        if count >= least:
            since, count = time.monotonic(), 0
        elif time.monotonic() - since > seconds:
            raise _Rejected(f"too slow: under {least:,} bytes in {seconds:g} s")
        yield block


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
