"""Downloads against a server the test starts on 127.0.0.1: nothing leaves the machine."""

import errno
import gzip
import hashlib
import io
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from archives import IDX_NAMES, fake_mnist, idx_bytes
from int8store import (DatasetNotFoundError, DownloadError, OutputError, SourceFormatError,
                       load_data, load_splits)
from int8store.sources import download as downloads
from int8store.sources.download import RemoteFile, download
from int8store.sources.mnist import MNIST_IDX_FILES, read_mnist

pytestmark = pytest.mark.floatx_blind


class _Handler(BaseHTTPRequestHandler):
    # path -> (body, how): how is "ok", "truncate", "refuse" (503, body the reason),
    # "trickle" (a byte every 50 ms), "trickle head" (its headers so) or
    # "redirect" (302, body the Location)
    routes = {}

    def do_GET(self):
        if self.path not in self.routes:
            self.send_error(404)
            return
        body, how = self.routes[self.path]
        if how == "refuse":
            self.send_response(503, body.decode("latin1"))
            self.end_headers()
            return
        if how == "redirect":
            self.send_response(302)
            self.send_header("Location", body.decode("latin1"))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if how == "trickle head":
            try:
                self.wfile.write(b"HTTP/1.0 200 OK\r\n")
                for _ in range(200):  # (10 s of a header that never ends)
                    self.wfile.write(b"X")
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:  # (the client gave up)
                pass
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if how == "trickle":
            try:
                for byte in body:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:  # (the client gave up)
                pass
            return
        self.wfile.write(body if how == "ok" else body[: len(body) // 2])
        self.wfile.flush()
        if how == "truncate":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    """A local HTTP server; ``server.serve(path, body, how)`` adds a route."""
    routes = {}
    handler = type("Handler", (_Handler,), {"routes": routes})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.serve = lambda path, body, how="ok": routes.__setitem__(path, (body, how))
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def remote_for(name, body):
    return RemoteFile(name, len(body), hashlib.sha256(body).hexdigest())


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_good_file_is_verified_and_written(server, tmp_path):
    body = b"int8store" * 1000
    server.serve("/data/file.bin", body)
    path = download(remote_for("file.bin", body), [server.url + "data/"], tmp_path)
    assert path.read_bytes() == body
    assert leftovers(tmp_path) == ["file.bin"]


def test_wrong_checksum_leaves_nothing(server, tmp_path):
    body = b"a" * 5000
    server.serve("/file.bin", b"b" * 5000)
    with pytest.raises(DownloadError, match=f"sha256 {hashlib.sha256(b'b' * 5000).hexdigest()}, expected"):
        download(remote_for("file.bin", body), [server.url], tmp_path)
    assert leftovers(tmp_path) == []


def test_truncated_transfer_leaves_nothing(server, tmp_path):
    body = bytes(range(256)) * 400
    server.serve("/file.bin", body, how="truncate")
    with pytest.raises(DownloadError, match="could not download file.bin") as error:
        download(remote_for("file.bin", body), [server.url], tmp_path)
    assert str(error.value).endswith(f"file.bin: the transfer ended after {len(body) // 2:,} "
                                     f"bytes, expected {len(body):,}"), str(error.value)
    assert leftovers(tmp_path) == []


def test_an_interrupted_download_leaves_no_folder_it_made(server, tmp_path, monkeypatch):
    # (it removed them when every mirror failed, not on Ctrl-C: user trial)
    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(downloads, "_fetch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        download(remote_for("file.bin", b"x"), [server.url], tmp_path / "cache" / "mnist")
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("value", ["0", "false", "No", " off ", ""])
def test_the_offline_switch_set_to_a_no_leaves_the_network_on(server, tmp_path, monkeypatch,
                                                             value):
    # (any value but "" or "0" meant offline: INT8STORE_OFFLINE=false too, user trial)
    body = b"payload" * 10
    server.serve("/file.bin", body)
    monkeypatch.setenv("INT8STORE_OFFLINE", value)
    folder = downloads.fetch_into(tmp_path, [remote_for("file.bin", body)], [server.url], 5,
                                  "the data", "")
    assert (folder / "file.bin").read_bytes() == body


def test_mirrors_are_tried_in_order(server, tmp_path):
    body = b"payload" * 10
    server.serve("/second/file.bin", body)
    path = download(remote_for("file.bin", body),
                    [server.url + "first/", server.url + "second/"], tmp_path)
    assert path.read_bytes() == body


def test_every_mirror_failing_lists_them_all(server, tmp_path):
    with pytest.raises(DownloadError) as error:
        download(RemoteFile("file.bin", 3, "0" * 64), [server.url + "a/", server.url + "b/"], tmp_path)
    assert str(error.value).count("HTTP 404") == 2


def test_a_url_urllib_cannot_parse_is_that_mirrors_failure_in_the_line(server, tmp_path):
    body = b"payload" * 10
    server.serve("/file.bin", body)
    mirrors = ["http://[::1:8765/", "no-scheme/", server.url]
    assert download(remote_for("file.bin", body), mirrors, tmp_path).read_bytes() == body
    with pytest.raises(DownloadError, match=r"http://\[::1:8765/file.bin: not a URL \(Invalid "
                                            r"IPv6 URL\); no-scheme/file.bin: not a URL"):
        download(remote_for("file.bin", body), mirrors[:2], tmp_path / "other")


def test_a_redirect_to_a_url_urllib_cannot_parse_is_that_mirrors_failure(server, tmp_path):
    # (urllib's ValueError left download() as a traceback, the next mirror untried)
    body = b"payload" * 10
    server.serve("/good/file.bin", body)
    server.serve("/bad/file.bin", b"http://[::1:8765/file.bin", how="redirect")
    mirrors = [server.url + "bad/", server.url + "good/"]
    assert download(remote_for("file.bin", body), mirrors, tmp_path).read_bytes() == body
    with pytest.raises(DownloadError, match=r"bad/file.bin: redirected to a URL that cannot be "
                                            r"read \(Invalid IPv6 URL\)$"):
        download(remote_for("file.bin", body), mirrors[:1], tmp_path / "other")
    assert leftovers(tmp_path) == ["file.bin"]


def test_a_download_is_published_with_the_mode_of_a_new_file(server, tmp_path):
    # (mkstemp's 0600 was published as it was: a cache folder shared with
    # others held files only the user who downloaded them could read)
    import stat

    body = b"payload" * 10
    server.serve("/file.bin", body)
    umask = os.umask(0o022)
    try:
        path = download(remote_for("file.bin", body), [server.url], tmp_path)
    finally:
        os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_download_killed_mid_way_leaves_a_part_the_next_one_removes(server, tmp_path):
    """(SIGKILL cannot clean up: the next download of the file removes what a
    process gone left, never what a live one is writing.)"""
    import os
    import subprocess
    import sys

    from int8store.runtime.temporaries import new_temporary

    killed = subprocess.run(  # (made as a download makes it, then the process killed)
        [sys.executable, "-c", "import os, signal, sys; from int8store.runtime.temporaries "
         "import new_temporary; print(new_temporary(sys.argv[1], '.part')[1], flush=True); "
         "os.kill(os.getpid(), signal.SIGKILL)", str(tmp_path / "file.bin")],
        capture_output=True, text=True)
    assert killed.returncode == -9
    stale = Path(killed.stdout.strip())
    handle, live = new_temporary(tmp_path / "file.bin", ".part")  # (this process's: alive)
    os.close(handle)
    host = socket.gethostname().replace(".", "_")  # (another user's: cannot be removed)
    theirs = tmp_path / f".file.bin.{host}.4000000.ghi789.part"
    theirs.mkdir()
    assert stale.parent == tmp_path and stale.exists()
    body = b"payload" * 10
    server.serve("/file.bin", body)
    download(remote_for("file.bin", body), [server.url], tmp_path)
    assert leftovers(tmp_path) == sorted([Path(live).name, theirs.name, "file.bin"])


def test_a_server_s_own_words_are_quoted_short_and_harmless(server, tmp_path):
    """A status line is the server's to write: 20,000 characters of it, or a
    terminal's escape sequence, reach the error line shortened and escaped."""
    server.serve("/a/file.bin", b"Busy \x1b[2J" + b"x" * 20000, how="refuse")
    with pytest.raises(DownloadError) as error:
        download(RemoteFile("file.bin", 3, "0" * 64), [server.url + "a/"], tmp_path)
    message = str(error.value)
    assert "HTTP 503 Busy \\x1b[2J" in message and "\x1b" not in message, message
    assert len(message) < 400, message
    assert leftovers(tmp_path) == []


def serve_fake_mnist(server):
    """Serve small MNIST-shaped IDX files; return their RemoteFile entries."""
    data = fake_mnist(n_train=18, n_test=6)
    files = []
    for split, names in IDX_NAMES.items():
        for name, array in zip(names, data[split]):
            body = gzip.compress(idx_bytes(array))
            server.serve(f"/mnist/{name}.gz", body)
            files.append(remote_for(name + ".gz", body))
    return data, tuple(files)


def test_mnist_is_downloaded_into_the_cache_then_read_from_it(server, tmp_path):
    data, files = serve_fake_mnist(server)
    source = read_mnist(tmp_path, mirrors=[server.url + "mnist/"], files=files)
    np.testing.assert_array_equal(source.splits["train"].images(), data["train"][0])
    assert leftovers(tmp_path / "mnist") == sorted(f.name for f in files)
    server.shutdown()  # from now on only the cache can answer
    again = read_mnist(tmp_path, mirrors=[server.url + "mnist/"], files=files)
    np.testing.assert_array_equal(again.splits["test"].labels, data["test"][1])


def test_a_damaged_cached_file_is_reported(server, tmp_path):
    _, files = serve_fake_mnist(server)
    read_mnist(tmp_path, mirrors=[server.url + "mnist/"], files=files)
    damaged = tmp_path / "mnist" / files[0].name
    content = bytearray(damaged.read_bytes())
    content[len(content) // 2] ^= 0xFF
    damaged.write_bytes(bytes(content))
    with pytest.raises(SourceFormatError, match="delete it to download it again") as error:
        read_mnist(tmp_path, mirrors=[server.url + "mnist/"], files=files)
    assert str(damaged) in str(error.value)


def test_a_cached_mnist_pickle_that_is_no_pickle_says_to_delete_it(tmp_path):
    (tmp_path / "mnist").mkdir()
    with gzip.open(tmp_path / "mnist" / "mnist.pkl.gz", "wb") as damaged:
        damaged.write(b"hello\n")
    with pytest.raises(SourceFormatError) as error:  # (it said "(101)", and no more)
        read_mnist(tmp_path, mirrors=[])
    assert str(error.value) == (f"{tmp_path / 'mnist' / 'mnist.pkl.gz'}: holds text, not a "
                                "pickle (it starts 'hello'): expected the pickled (images, "
                                "labels) pairs of train, valid and test, as mnist.pkl.gz holds "
                                "them; delete it to download MNIST again")
    # (bytes that are no text still say the unpickler's error)
    with gzip.open(tmp_path / "mnist" / "mnist.pkl.gz", "wb") as damaged:
        damaged.write(b"\x80\x02h\x07.")
    with pytest.raises(SourceFormatError, match=r"not a valid pickle of numpy arrays \(KeyError "
                       r"7\); delete it to download MNIST again"):
        read_mnist(tmp_path, mirrors=[])


def test_a_cached_mnist_pickle_beyond_the_memory_ceiling_is_not_told_to_be_deleted(tmp_path):
    import pickle

    from archives import fake_mnist_pickle_content
    from int8store.runtime.limits import memory_ceiling

    (tmp_path / "mnist").mkdir()
    with gzip.open(tmp_path / "mnist" / "mnist.pkl.gz", "wb", compresslevel=1) as cached:
        pickle.dump(fake_mnist_pickle_content(n=(1000, 10, 10), width=784), cached)
    with memory_ceiling("1MiB"), pytest.raises(SourceFormatError) as error:
        read_mnist(tmp_path, mirrors=[])
    assert "ceiling" in str(error.value) and "delete it" not in str(error.value)


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assert_says_what_to_put_where(message, folder):
    assert f"MNIST is not in the cache folder {folder}" in message
    for remote in MNIST_IDX_FILES:
        assert remote.name in message
    assert "mnist.pkl.gz" in message and "INT8STORE_DATA" in message


@pytest.mark.timeout(60)
def test_mnist_offline_with_an_empty_cache_fails_fast(tmp_path, monkeypatch):
    monkeypatch.setenv("INT8STORE_DATA", str(tmp_path))
    monkeypatch.setenv("INT8STORE_MNIST_MIRRORS", f"http://127.0.0.1:{closed_port()}/")
    with pytest.raises(DatasetNotFoundError) as error:
        load_data("mnist")
    assert_says_what_to_put_where(str(error.value), tmp_path / "mnist")
    assert "Connection refused" in str(error.value)
    assert leftovers(tmp_path / "mnist") == []
    # nor the folders made for it (a first run offline left ~/.cache/int8store/mnist/)
    with pytest.raises(DatasetNotFoundError):
        load_data("mnist", cache_dir=tmp_path / "fresh" / "cache")
    assert not (tmp_path / "fresh").exists()


@pytest.mark.timeout(60)
def test_a_missing_path_to_mnist_is_named_before_the_cache(tmp_path, monkeypatch):
    # "../data/mnist.pkl.gz" missing: the message spoke of the cache only
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INT8STORE_OFFLINE", "1")
    with pytest.raises(DatasetNotFoundError) as error:
        load_data("../data/mnist.pkl.gz", cache_dir=tmp_path)
    assert str(error.value).startswith("../data/mnist.pkl.gz: no such file, so the cache was "
                                       f"tried: MNIST is not in the cache folder {tmp_path / 'mnist'}")


@pytest.mark.timeout(60)
def test_the_offline_switch_does_not_touch_the_network(tmp_path, monkeypatch):
    monkeypatch.setenv("INT8STORE_OFFLINE", "1")
    with pytest.raises(DatasetNotFoundError, match="INT8STORE_OFFLINE is set") as error:
        load_data("mnist", cache_dir=tmp_path)
    assert_says_what_to_put_where(str(error.value), tmp_path / "mnist")


@pytest.mark.timeout(60)
def test_a_silent_server_times_out_instead_of_hanging(tmp_path):
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/"
        with pytest.raises(DatasetNotFoundError, match="timed out"):
            read_mnist(tmp_path, mirrors=[url], timeout=0.5)


@pytest.mark.timeout(60)
def test_a_server_that_trickles_is_given_up_on(server, tmp_path, monkeypatch):
    """Each read has its timeout, and a byte every few seconds resets it: a
    mirror that trickled would never end (user trial); now one that sends
    fewer than SLOWEST's bytes in its seconds is given up on, the next
    mirror tried, and nothing is left."""
    body = b"x" * 1000
    server.serve("/slow/file.bin", body, "trickle")
    server.serve("/file.bin", body)
    monkeypatch.setattr(downloads, "SLOWEST", (500, 0.5))
    start = time.monotonic()
    with pytest.raises(DownloadError, match=r"slow/file.bin: too slow: under 500 bytes in 0.5 s$"):
        download(remote_for("file.bin", body), [server.url + "slow/"], tmp_path)
    assert time.monotonic() - start < 10
    assert leftovers(tmp_path) == []
    path = download(remote_for("file.bin", body), [server.url + "slow/", server.url], tmp_path)
    assert path.read_bytes() == body


@pytest.mark.timeout(60)
def test_a_server_that_trickles_its_headers_is_given_up_on(server, tmp_path, monkeypatch):
    """The body was paced, not the response's head: a header byte every few
    seconds kept the download waiting for days (helper 57)."""
    body = b"x" * 1000
    server.serve("/slow/file.bin", body, "trickle head")
    monkeypatch.setattr(downloads, "SLOWEST", (500, 0.5))
    start = time.monotonic()
    with pytest.raises(DownloadError, match=r"slow/file.bin: too slow: no whole response head "
                                            r"in 0.5 s$"):
        download(remote_for("file.bin", body), [server.url + "slow/"], tmp_path)
    assert time.monotonic() - start < 5
    assert leftovers(tmp_path) == []

def test_a_cache_folder_that_cannot_be_written_is_named_not_blamed_on_the_mirrors(
        server, tmp_path, monkeypatch):
    """A local failure (a folder that cannot be made, a folder where the file
    goes, a full disk) was "could not download ...", each mirror's failure,
    after each mirror had sent the whole file (user trial)."""
    body = b"int8store" * 1000
    server.serve("/file.bin", body)
    requests, fetch = [], downloads._fetch

    def fetch_counted(url, *rest):
        requests.append(url)
        return fetch(url, *rest)

    monkeypatch.setattr(downloads, "_fetch", fetch_counted)
    afile = tmp_path / "afile"
    afile.write_bytes(b"")
    with pytest.raises(OutputError, match=f"^{afile}/mnist: the cache folder cannot be written "
                                          r"\(Not a directory.*\): give it room and write "
                                          r"access, or name another one \(\$INT8STORE_DATA\)$"):
        download(remote_for("file.bin", body), [server.url, server.url], afile / "mnist")
    (tmp_path / "cache" / "file.bin").mkdir(parents=True)
    with pytest.raises(OutputError, match="file.bin: not a file, where the download is to be "
                                          "kept: remove it"):
        download(remote_for("file.bin", body), [server.url, server.url], tmp_path / "cache")
    full = tmp_path / "full"

    class FullDisk(io.BufferedWriter):
        def write(self, block):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(downloads.os, "fdopen", lambda handle, mode: FullDisk(io.FileIO(handle,
                                                                                         "wb")))
    with pytest.raises(OutputError, match="full: the cache folder cannot be written "
                                          r"\(No space left on device\)"):
        download(remote_for("file.bin", body), [server.url, server.url], full)
    monkeypatch.undo()
    assert requests == [server.url + "file.bin"]  # (the second mirror was not tried)
    assert not full.exists()  # (made for the download, removed with it)


def test_classic_default_argument_uses_the_cache(server, tmp_path, monkeypatch):
    # The classic tutorials call load_data('mnist.pkl.gz'); with no such file
    # here, the cache (and its download) stands in, as it did in the classic.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INT8STORE_OFFLINE", "1")
    with pytest.raises(DatasetNotFoundError, match="MNIST is not in the cache folder"):
        load_splits("mnist.pkl.gz", cache_dir=tmp_path)
