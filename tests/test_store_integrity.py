"""A store that cannot lie, and outputs that are never half-written.

* every edit of what gives the data its meaning is caught (attributes, split
  list, shapes, swapped groups) and a bit flip anywhere never loads changed
  data nor hangs (bench/bitflips.py, sampled here);
* a conversion interrupted at any moment by SIGINT or SIGTERM leaves either
  no output or a complete, verified one, never a temporary file, and an
  existing output intact;
* a file that appears at the target while converting is never replaced;
  temporary files of killed runs are removed by the next run.
"""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from archives import fake_mnist, rewrite_manifest, write_image_folder, write_mnist_idx_folder
from int8store import OutputExistsError, StoreChecksumError, StoreFormatError, load_splits, open_store
from int8store.store.atomic import TEMPORARY_SUFFIX, remove_stale_temporaries
from int8store.cli import main
from int8store.converter import convert

pytestmark = pytest.mark.graph_free

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "m.h5"
    convert(write_mnist_idx_folder(tmp_path / "idx", fake_mnist(n_train=30)), path)
    return path


def test_reading_rows_outside_a_split_or_into_the_wrong_array_is_refused(store):
    # count_codes('train', -10) counted 10 rows twice in silence; read_rows
    # past the end was an IndexError, and repeated positions left rows unwritten.
    from int8store import ArgumentError

    opened = open_store(store)
    count, row = opened.splits["train"], int(opened.count_codes("train", 0, 1).sum())
    assert opened.count_codes("train", 0, 5).sum() == 5 * row
    for start, stop in ((-10, None), (0, count + 1), (5, 4), (0.5, 2), (True, 3)):
        with pytest.raises(ArgumentError, match=rf"expected integers with 0 <= start <= stop <= {count}"):
            opened.count_codes("train", start, stop)
    with pytest.raises(ArgumentError, match=rf"<= {count}, the split's examples"):
        opened.read_rows("train", count - 2, count + 2, np.empty((4, row), np.int8))
    with pytest.raises(ArgumentError, match="out: expected a C-contiguous int8 array of 3 rows"):
        opened.read_rows("train", 0, 3, None)
    with pytest.raises(ArgumentError, match="out: expected a C-contiguous int8 array of 3 rows"):
        opened.read_rows("train", 0, 3, np.empty((3, row), np.float32))
    with pytest.raises(ArgumentError, match="C-contiguous"):  # (a strided out was left unwritten)
        opened.read_rows("train", 0, 3, np.empty((6, row), np.int8)[::2])
    with pytest.raises(ArgumentError, match="positions: expected a permutation of 0..2"):
        opened.read_rows("train", 0, 3, np.empty((3, row), np.int8), positions=[0, 0, 0])
    out = np.empty((3, row), np.int8)
    opened.read_rows("train", 0, 3, out, positions=[2, 0, 1])
    whole = np.empty((3, row), np.int8)
    opened.read_rows("train", 0, 3, whole)
    assert (out[[2, 0, 1]] == whole).all()


def swap_groups(f):
    f.move("train", "tmp")
    f.move("test", "train")
    f.move("tmp", "test")


def shorter_labels(f):
    del f["test/y"]
    f["test/y"] = np.zeros(3, np.int32)


EDITS = {
    "encoding_divisor": lambda f: f.attrs.__setitem__("encoding_divisor", 255),
    "encoding_offset": lambda f: f.attrs.__setitem__("encoding_offset", 0),
    "splits": lambda f: f.attrs.__setitem__("splits", ["train", "test"]),
    "image_shape": lambda f: f.attrs.__setitem__("image_shape", np.array([2, 8])),
    "swapped groups": swap_groups,
    "labels of another length": shorter_labels,
    "count": lambda f: f["train"].attrs.__setitem__("count", 7),
    "format_version": lambda f: f.attrs.__setitem__("format_version", 1),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_every_edit_of_the_meaning_is_caught(store, capsys, edit):
    with h5py.File(store, "r+") as f:
        EDITS[edit](f)
    # An edit that changes the file's length is caught by the size, others by the
    # checksum of the HDF5 metadata.
    with pytest.raises(StoreChecksumError, match="(HDF5 metadata .* does not match its checksum"
                                                 "|truncated, extended or damaged)"):
        load_splits(store)
    for command in ("info", "verify"):
        assert main([command, str(store)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(store) in err


def test_a_truncated_or_extended_store_is_named_so(store):
    data = store.read_bytes()
    for damaged in (data[:-100], data + b"\0"):
        store.write_bytes(damaged)
        with pytest.raises(StoreChecksumError, match="truncated, extended or damaged"):
            open_store(store, verify=False)


def test_a_manifest_layout_that_does_not_fit_the_counts_is_refused(store):
    rewrite_manifest(store, lambda m: m["splits"][0].update(count=29))
    with pytest.raises(StoreFormatError, match="layout of split 'train' does not match"):
        open_store(store)


@pytest.mark.parametrize("rows", [0, -3, None, True, "7"])
def test_a_forged_chunk_size_is_refused_by_name(store, rows):
    """A manifest rewritten with its hash recomputed, its chunk size nonsense:
    a clear error naming the file and the split, never a division by zero."""
    rewrite_manifest(store, lambda m: m["splits"][0]["x"].update(chunk_rows=rows))
    with pytest.raises(StoreFormatError, match=rf"{store.name}: the manifest's layout of split "
                                               rf"'train' has {re.escape(repr(rows))} rows a chunk"):
        open_store(store)


def test_labels_beyond_the_class_names_of_a_forged_manifest_are_refused(store, capsys):
    """The manifest's label names were checked to be text, never against the
    labels: info and verify said OK, load_data loaded, preview ended in an
    IndexError (review)."""
    rewrite_manifest(store, lambda m: m.update(label_names=["zero", "one"]))
    said = rf"{store.name}: split 'train' has labels from 0 to \d, but the manifest names 2 " \
           r"classes \(0 to 1\): the store is damaged"
    with pytest.raises(StoreFormatError, match=said):
        load_splits(store)
    for command in (["verify", str(store)], ["preview", str(store), "-o",
                                             str(store.parent / "g.png")]):
        assert main(command) == 2
        assert re.search(said, capsys.readouterr().err)


def test_negative_labels_of_a_forged_store_are_refused_by_every_reader(store, capsys):
    """Labels rewritten with their checksum (a forger's store): load_data
    refused them, but a stream, verify and read_labels took them, and a
    negative label indexes the class probabilities from the end."""
    from int8store import load_streams
    from int8store.store.checksums import chunk_digest
    from int8store.store.manifest import read_manifest

    def forge(manifest):
        entry = manifest["splits"][0]
        offset, nbytes, _ = entry["y"][0]
        labels = np.zeros(nbytes // 4, "<i4")
        labels[1] = -3
        with open(store, "r+b") as f:
            f.seek(offset)
            f.write(labels.tobytes())
        entry["y"][0][2] = chunk_digest("xxh3_128", labels.tobytes())
        entry.pop("blake3_rows")
    assert read_manifest(store)["splits"][0]["name"] == "train"
    rewrite_manifest(store, forge)
    said = rf"{store.name}: split 'train' has labels from -3 to 0: class numbers start at 0"
    for read in (lambda: open_store(store).read_labels("train"), lambda: load_streams(store)):
        with pytest.raises(StoreFormatError, match=said):
            read()
    assert main(["verify", str(store)]) == 2
    assert re.search(said, capsys.readouterr().err)


def test_a_damaged_magic_is_not_read_as_a_plain_hdf5_file(store):
    with open(store, "r+b") as f:
        f.write(b"INT8STORE")
    with pytest.raises(StoreChecksumError, match="manifest is missing or damaged"):
        load_splits(store)


def test_a_damaged_first_line_or_an_empty_file_is_named_so_by_every_command(store, capsys):
    """verify and info called a store with one byte of its first line
    flipped "not an int8store file; convert archives with ...", and an empty
    file was "not a readable HDF5 file (file signature not found)"."""
    with open(store, "r+b") as f:
        f.seek(5)
        f.write(b"X")
    for command in ("verify", "info"):
        assert main([command, str(store)]) == 2
        assert capsys.readouterr().err == (
            f"error: {store}: damaged: its first line is almost an int8store manifest's "
            "(b'int8sXore manifest\\n'); restore a copy or convert its source again\n")
    empty = store.parent / "empty.h5"
    empty.write_bytes(b"")
    for command in (["verify"], ["info"], ["convert", "-o", str(store.parent / "o.h5")]):
        assert main([command[0], str(empty), *command[1:]]) == 2
        assert capsys.readouterr().err.startswith(f"error: {empty}: an empty file (0 bytes)")


def test_a_store_with_its_first_bytes_wiped_is_named_damaged_by_every_command(store, capsys):
    """info and verify said "not an int8store file; convert archives with
    ...": HDF5's signature was looked for at byte 0 only, not after the
    manifest's user block, where a store has it."""
    with open(store, "r+b") as f:
        f.write(bytes(64))
    for command in ("verify", "info"):
        assert main([command, str(store)]) == 2
        assert capsys.readouterr().err == (
            f"error: {store}: an int8store file whose manifest is missing or damaged: the "
            "file is damaged\n")
    with pytest.raises(StoreChecksumError, match="manifest is missing or damaged"):
        load_splits(store)

def test_single_bit_flips_never_change_data_silently_nor_hang():
    """bench/bitflips.py on every 17th metadata byte (all 8 bits) and 200 data bits;
    in the zeros that pad the user block after the manifest (29,792 of the
    42,762 metadata bytes, checked by one test: all zero, or damaged), every
    128th byte and the last: they were 70 % of the flips, each the same check."""
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "bitflips.py"), "--stride", "17",
                          "--padding-stride", "128", "--data-bits", "200", "--limit", "20",
                          "--json"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    for region in ("metadata", "data"):
        counts = result["counts"][region]
        assert counts["changed"] == counts["crash"] == counts["hang"] == 0, result
        assert counts["error"] > 0
    assert sum(result["counts"]["data"].values()) == 200
    padding = result["padding_bytes"]
    assert padding > 20000  # (the store's user block is mostly padding)
    sampled = len(range(0, result["metadata_bytes"] - padding, 17)) \
        + len(set(range(0, padding, 128)) | {padding - 1})
    assert sum(result["counts"]["metadata"].values()) == 8 * sampled


# -- publishing -------------------------------------------------------------------

def test_a_file_that_appears_while_converting_is_never_replaced(tmp_path, monkeypatch, capsys):
    from int8store.store import writer as store_writer

    folder = write_mnist_idx_folder(tmp_path / "idx", fake_mnist())
    out = tmp_path / "m.h5"
    original = store_writer.StoreWriter._write_manifest

    def another_run_finishes_first(self, entries):
        original(self, entries)
        out.write_bytes(b"the other run's store")

    monkeypatch.setattr(store_writer.StoreWriter, "_write_manifest", another_run_finishes_first)
    assert main(["convert", str(folder), "-o", str(out)]) == 2
    assert "appeared while this file was being written" in capsys.readouterr().err
    assert out.read_bytes() == b"the other run's store"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    with pytest.raises(OutputExistsError):
        convert(folder, out)
    monkeypatch.undo()
    convert(folder, out, force=True)
    assert open_store(out).splits == {"train": 10, "valid": 2, "test": 6}


def test_an_output_that_is_no_regular_file_is_never_replaced_even_with_force(tmp_path, capsys):
    # Publishing renames a file over the name: over /dev/null (as root) or a
    # FIFO it replaced the device itself. A FIFO stands in for a device here.
    folder = write_mnist_idx_folder(tmp_path / "idx", fake_mnist())
    fifo = tmp_path / "pipe.h5"
    os.mkfifo(fifo)
    for force in ([], ["--force"]):
        assert main(["convert", str(folder), "-o", str(fifo), *force]) == 2
        assert f"{fifo}: is not a regular file (a FIFO)" in capsys.readouterr().err
        assert fifo.is_fifo()
    grid = tmp_path / "pipe.png"  # (preview names its grid .png)
    os.mkfifo(grid)
    assert main(["preview", str(folder), "-o", str(grid), "--force"]) == 2
    assert "is not a regular file (a FIFO)" in capsys.readouterr().err
    assert fifo.is_fifo() and grid.is_fifo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx", "pipe.h5", "pipe.png"]


def test_an_output_through_a_link_is_refused_up_front_or_written_where_it_points(tmp_path, capsys):
    from int8store.store import writer as store_writer

    folder = write_mnist_idx_folder(tmp_path / "idx", fake_mnist())
    dangling = tmp_path / "dangling.h5"
    dangling.symlink_to(tmp_path / "elsewhere" / "m.h5")
    # Refused before any reading (it ended in "appeared while this file was
    # being written" after the whole conversion).
    writes = []
    original = store_writer.StoreWriter.__init__
    store_writer.StoreWriter.__init__ = lambda *a, **k: writes.append(1) or original(*a, **k)
    try:
        assert main(["convert", str(folder), "-o", str(dangling)]) == 2
    finally:
        store_writer.StoreWriter.__init__ = original
    err = capsys.readouterr().err
    assert f"{dangling}: already exists (a link to {tmp_path / 'elsewhere' / 'm.h5'})" in err
    assert writes == [] and not (tmp_path / "elsewhere").exists()
    # With --force the file the link names is written, and the link kept.
    assert main(["convert", str(folder), "-o", str(dangling), "--force"]) == 0
    assert dangling.is_symlink() and (tmp_path / "elsewhere" / "m.h5").is_file()
    assert open_store(dangling).splits == {"train": 10, "valid": 2, "test": 6}
    # A path under a file names the problem.
    assert main(["convert", str(folder), "-o", str(tmp_path / "elsewhere" / "m.h5" / "x.h5")]) == 2
    assert "cannot write here (Not a directory)" in capsys.readouterr().err


def test_temporaries_of_dead_runs_are_removed_and_live_ones_kept(tmp_path):
    from int8store.runtime.temporaries import _host

    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout.strip()
    out = tmp_path / "m.h5"
    dead = tmp_path / f".m.h5.{_host()}.{finished}.abc{TEMPORARY_SUFFIX}"
    live = tmp_path / f".m.h5.{_host()}.{os.getpid()}.def{TEMPORARY_SUFFIX}"
    elsewhere = tmp_path / f".m.h5.otherhost.{finished}.ghi{TEMPORARY_SUFFIX}"
    for path in (dead, live, elsewhere):
        path.write_bytes(b"partial")
    convert(write_mnist_idx_folder(tmp_path / "idx", fake_mnist()), out)
    assert not dead.exists() and live.exists() and elsewhere.exists()
    assert remove_stale_temporaries(out) == []


# -- interrupts -------------------------------------------------------------------

CONVERT = "import sys; from int8store.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.parametrize("pid", ["99999999999999999999", "\u00b2", "\u0663\u0663"])
def test_a_file_whose_pid_is_no_pid_is_left_and_stops_nothing(tmp_path, pid):
    # (os.kill's OverflowError stopped every write to the target; '²' passed
    # isdigit() and int() refused it; Arabic-Indic digits were read as a pid)
    from int8store.runtime.temporaries import _host

    odd = tmp_path / f".out.h5.{_host()}.{pid}.abcdefgh{TEMPORARY_SUFFIX}"
    odd.touch()
    assert remove_stale_temporaries(tmp_path / "out.h5") == []
    assert odd.exists()


@pytest.mark.slow
def test_interrupting_a_conversion_at_any_moment_never_leaves_half_a_file(tmp_path):
    rng = np.random.default_rng(0)
    folder = tmp_path / "imgs"
    write_image_folder(folder, rng.integers(0, 256, (4800, 28, 28), dtype=np.uint8),
                       rng.integers(0, 10, 4800))
    out = tmp_path / "out" / "m.h5"
    out.parent.mkdir()
    command = [sys.executable, "-c", CONVERT, "convert", str(folder), "-o", str(out), "--force"]
    durations = []
    for _ in range(2):  # (the shorter: on a machine busy a moment, one was twice as long,
        start = time.perf_counter()  # and 14 of 24 signals came after the end)
        subprocess.run(command, check=True, capture_output=True)
        durations.append(time.perf_counter() - start)
    duration = min(durations)
    previous = out.read_bytes()
    outcomes = {"interrupted": 0, "finished": 0}
    # Twelve moments spread over the whole run (imports, reading and writing,
    # publishing, after the end), the two signals taking turns: each signal
    # still lands in every phase, at six moments of its own.
    moments = np.linspace(0.1, 1.1, 12)
    for signum, fractions in ((signal.SIGINT, moments[0::2]), (signal.SIGTERM, moments[1::2])):
        for fraction in fractions:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            time.sleep(duration * fraction)
            process.send_signal(signum)
            _, err = process.communicate(timeout=120)
            leftovers = sorted(p.name for p in out.parent.iterdir())
            assert leftovers == ["m.h5"], (leftovers, err)  # no temporary file, ever
            if process.returncode != 0 and out.read_bytes() == previous:
                outcomes["interrupted"] += 1  # the earlier output is intact
            else:  # finished, or the signal came after publishing: complete and verified
                assert open_store(out).splits["train"] == 4800 - 800 - 666  # (test, valid cut)
                previous = out.read_bytes()
                outcomes["finished"] += 1
            if process.returncode == 128 + signum:
                assert err.count(b"\n") == 1, err  # int8store's one line, no traceback
    assert outcomes["interrupted"] >= 6, outcomes  # (half of them, as before)


def test_an_interrupt_just_after_the_temporary_file_is_made_leaves_no_file(tmp_path,
                                                                            monkeypatch):
    # CI once found a conversion interrupted by SIGTERM that said "nothing
    # was written" and left .m.h5.HOST.PID.RANDOM.int8store-tmp beside m.h5:
    # the signal came between the file's making and the block that removes it.
    import tempfile

    from int8store.runtime import temporaries
    from int8store.runtime.interrupts import Interrupted, interrupts_remembered
    from int8store.store import atomic

    made = tempfile.mkstemp

    def mkstemp_then_signal(*args, **kwargs):
        made_file = made(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # (the handler runs at the next bytecode)
            pass
        return made_file

    monkeypatch.setattr(temporaries.tempfile, "mkstemp", mkstemp_then_signal)
    with pytest.raises(Interrupted), interrupts_remembered():
        with atomic.atomic_output(tmp_path / "m.h5") as temporary:
            temporary.write_bytes(b"half")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("during", ["writeback", "close"])
def test_a_second_interrupt_during_the_cleanup_leaves_no_temporary_file(tmp_path, monkeypatch,
                                                                        during):
    # Ctrl-C pressed twice: the second came while the first's cleanup joined
    # the writeback thread or closed the HDF5 file, and the temporary file
    # (the whole store's bytes so far) was left beside the target.
    from int8store import quantize
    from int8store.runtime.interrupts import Interrupted, interrupts_remembered
    from int8store.store import writer as store_writer

    def again():
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # (the handler runs at the next bytecode)
            pass

    if during == "writeback":
        close = store_writer._Writeback.close
        monkeypatch.setattr(store_writer._Writeback, "close",
                            lambda self, check=True: (again(), close(self, check)))
    else:
        close = h5py.File.close
        monkeypatch.setattr(h5py.File, "close", lambda self: (again(), close(self)))
    codes, encoding = quantize(np.zeros((10, 4, 4), np.uint8))
    with pytest.raises(Interrupted), interrupts_remembered():
        with store_writer.StoreWriter(tmp_path / "m.h5", encoding, (4, 4),
                                      {"train": np.zeros(10, int)}) as writer:
            writer.append("train", codes[:5])
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                pass
    assert list(tmp_path.iterdir()) == []


def test_an_interrupt_after_publishing_says_the_file_was_written(tmp_path, capsys, monkeypatch):
    # A link named as the output: the file it names was published, complete,
    # and the command said "nothing was written".
    from int8store import cli
    from int8store.store import atomic

    def interrupted(folder):
        raise KeyboardInterrupt("interrupted by SIGINT")

    monkeypatch.setattr(atomic, "_sync_folder", interrupted)
    (tmp_path / "real.h5").write_bytes(b"old")
    (tmp_path / "link.h5").symlink_to("real.h5")
    source = write_mnist_idx_folder(tmp_path / "idx", fake_mnist(n_train=30))
    for output in ("plain.h5", "link.h5"):
        capsys.readouterr()
        assert cli.main(["convert", str(source), "-o", str(tmp_path / output), "--force"]) == 130
        assert "had already been written, complete" in capsys.readouterr().err
    assert open_store(tmp_path / "real.h5").splits == open_store(tmp_path / "plain.h5").splits


def test_an_output_ending_in_a_slash_is_refused_as_a_folder(tmp_path, capsys):
    source = write_mnist_idx_folder(tmp_path / "idx", fake_mnist(n_train=30))
    assert main(["convert", str(source), "-o", f"{tmp_path / 'out'}{os.sep}"]) == 2
    assert "names a folder" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_verify_stops_every_thread_at_the_first_damaged_chunk(tmp_path, monkeypatch):
    # Its threads went on to the end of the split (Ctrl-C too waited for them).
    from int8store import quantize
    from int8store.store import chunk_reading
    from int8store.store.writer import StoreWriter

    codes, encoding = quantize(np.zeros((12, 1024, 1024), np.uint8))  # a chunk an image
    store = tmp_path / "m.h5"
    with StoreWriter(store, encoding, (1024, 1024), {"train": np.zeros(12, int)}) as writer:
        writer.append("train", codes)

    read = chunk_reading.ChunkReader.read_range
    reads = []
    found = threading.Event()

    def counted(self, f, offset, views, digest, what):
        reads.append(what)
        if "chunk 1 " in what:  # (the second thread's first chunk)
            found.set()
            raise chunk_reading.damaged_error(self.path, what)
        found.wait(timeout=30)  # (the first thread's chunk read after the damage is found)
        return read(self, f, offset, views, digest, what)

    opened = open_store(store, verify=False)
    monkeypatch.setattr(chunk_reading.ChunkReader, "read_range", counted)
    with pytest.raises(StoreChecksumError, match="chunk 1 "):
        opened.verify(workers=2)
    # (not the first thread's 6 chunks: the caller waits for the threads in
    # order, and the damage in the second stopped the first only once it ended;
    # the first thread reads chunk 0, or stops before it if it starts late)
    assert "split 'train' chunk 1 (examples 1 to 1)" in reads and set(reads) <= {
        "split 'train' chunk 0 (examples 0 to 0)", "split 'train' chunk 1 (examples 1 to 1)"}, reads


def test_an_interrupt_python_swallows_is_remembered_and_not_reported(capsys):
    """Ctrl-C landing in a __del__ or weakref callback (h5py has some) is
    swallowed by Python, which prints "Exception ignored in ..." and goes on:
    it must still end the write, and say so in one line only."""
    import signal

    from int8store.runtime.interrupts import Interrupted, _handler, interrupts_remembered

    class Finalized:
        def __del__(self):
            _handler(signal.SIGINT, None)  # what the signal does, inside a finalizer

    with pytest.raises(Interrupted):
        with interrupts_remembered():
            Finalized()  # created and collected: the interrupt is swallowed here
            progress = "went on"
    assert progress == "went on"
    assert capsys.readouterr().err == ""


def test_an_interrupt_c_code_prints_and_swallows_is_remembered_and_not_reported(capfd):
    """Ctrl-C during the import of one of numpy's extension modules: its
    ``import_array()`` prints the interrupt with ``PyErr_Print()`` and raises
    an ImportError instead (a traceback CI once caught in the conversion
    interrupted at any moment). ``PyRun_SimpleString`` swallows and prints
    the same way, with the signal really sent."""
    import ctypes
    import signal

    from int8store.runtime.interrupts import Interrupted, interrupts_remembered

    with pytest.raises(Interrupted) as raised:
        with interrupts_remembered():
            failed = ctypes.pythonapi.PyRun_SimpleString(
                b"import os, signal; os.kill(os.getpid(), signal.SIGINT); "
                b"[None for _ in range(10 ** 6)]")  # the handler runs in the loop at the latest
            progress = "went on"
    assert failed == -1 and progress == "went on"
    assert raised.value.signal == signal.SIGINT
    assert capfd.readouterr().err == ""


def test_signals_in_a_deferred_block_are_handled_when_it_ends(ctrl_c_raises):
    import signal

    from int8store.runtime.interrupts import interrupts_deferred, stop_requested, stop_requests

    steps = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            signal.raise_signal(signal.SIGINT)
            steps.append("after the signal")
    assert steps == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with stop_requests():  # a handler of int8store's own, deferred the same way
        with interrupts_deferred():
            signal.raise_signal(signal.SIGTERM)
            assert stop_requested() is None
        assert stop_requested() == signal.SIGTERM


@pytest.mark.parametrize("block", ["interrupts_deferred", "interrupts_remembered",
                                   "stop_requests", "interrupts_ignored"])
def test_a_signal_while_a_blocks_handlers_are_set_leaves_none_of_them(ctrl_c_raises, monkeypatch,
                                                                       block):
    """SIGTERM landing once SIGINT's handler is set, before its own is: the
    block never began, and its SIGINT handler stayed for good (deferred: every
    later Ctrl-C swallowed)."""
    import signal

    from int8store.runtime import interrupts

    class Terminated(Exception):
        pass

    def terminated(signum, frame):
        raise Terminated

    real = signal.signal
    previous_term = real(signal.SIGTERM, terminated)

    def racy(signum, handler):
        before = real(signum, handler)
        if signum == signal.SIGINT:
            signal.raise_signal(signal.SIGTERM)
        return before

    try:
        monkeypatch.setattr(signal, "signal", racy)
        with pytest.raises((Terminated, KeyboardInterrupt)):
            with getattr(interrupts, block)():
                pass
        monkeypatch.undo()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGTERM) is terminated
        assert not interrupts._received and interrupts._armed == [True]
    finally:
        real(signal.SIGTERM, previous_term)


@pytest.mark.parametrize("umask, published", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_store_is_published_with_the_mode_new_files_get(tmp_path, umask, published, monkeypatch):
    """Private (0600) while it is written, then 0666 & ~umask: a store written
    for a team on a shared machine can be read by the team."""
    from int8store.store import writer as store_writer

    seen = []
    original = store_writer.StoreWriter._write_manifest

    def watching(self, entries):
        seen.append(os.stat(self._temporary).st_mode & 0o777)
        return original(self, entries)

    monkeypatch.setattr(store_writer.StoreWriter, "_write_manifest", watching)
    old = os.umask(umask)
    try:
        out = tmp_path / "m.h5"
        convert(write_mnist_idx_folder(tmp_path / "idx", fake_mnist(n_train=30)), out)
    finally:
        os.umask(old)
    assert seen == [0o600]
    assert out.stat().st_mode & 0o777 == published


def test_a_disk_error_met_while_writing_is_not_published(tmp_path, monkeypatch):
    """The writeback thread's flush is the first to hear of a full disk (Linux
    reports a writeback error once): the thread keeps the error, and the
    conversion fails with it, naming the file, and publishes nothing."""
    import errno
    import time

    from int8store import OutputError
    from int8store.store import writer as store_writer

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fdatasync", full)
    scratch = tmp_path / "scratch"
    scratch.write_bytes(b"x")
    writeback = store_writer._Writeback(scratch, step=1)
    writeback.wrote(1)
    deadline = time.monotonic() + 10
    while writeback._error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(OSError, match="No space left on device"):
        writeback.close()

    original = store_writer._Writeback.__init__

    def failed_already(self, *args, **kwargs):  # as if a flush had met ENOSPC
        original(self, *args, **kwargs)
        self._error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(store_writer._Writeback, "__init__", failed_already)
    out = tmp_path / "out" / "m.h5"
    with pytest.raises(OutputError, match=r"m.h5: cannot write the store \(No space left on device\)"):
        convert(write_mnist_idx_folder(tmp_path / "idx", fake_mnist(n_train=30)), out)
    assert not out.parent.exists()  # (nothing in it, and the folder made for it is gone too)
