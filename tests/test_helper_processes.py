"""Helper processes (the HDF5 parser, the shard reader): started isolated from
the caller's folder, held to the limits they inherit, and a helper that cannot
start said to be that, not a damaged file."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from archives import fake_mnist, write_mnist_idx_folder
from int8store import HelperStartError, SourceFormatError
from int8store.cli import main
from int8store.runtime import processes
from int8store.sources.hdf5_process import Hdf5Process

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parent.parent


def plain_hdf5(path, n=40):
    """An HDF5 source that is not a store: uint8 images and their labels."""
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        f["x_train"] = rng.integers(0, 256, (n, 5, 5), dtype=np.uint8)
        f["y_train"] = np.arange(n) % 10
        f["x_test"] = rng.integers(0, 256, (10, 5, 5), dtype=np.uint8)
        f["y_test"] = np.arange(10) % 10
    return path


def hostile_folder(folder, names=("numpy", "h5py")):
    """A folder whose ``numpy.py`` and ``h5py.py`` leave a marker when imported."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / f"{name}.py").write_text(
            f"open(__file__ + '.imported', 'w').close()\n"
            f"raise ImportError('the working folder\\'s {name}.py was imported')\n")
    return folder


def imported(folder):
    return sorted(p.name for p in folder.glob("*.imported"))


@pytest.mark.graph_free
def test_the_helpers_path_is_the_parents_without_the_working_directory(tmp_path):
    other = tmp_path / "lib"
    path = ["", ".", str(tmp_path), f"{tmp_path}/", "lib", str(other), "/usr/lib/python3"]
    assert processes.helper_path(path, cwd=tmp_path) == [str(other), "/usr/lib/python3"]


@pytest.mark.graph_free
def test_a_helper_runs_this_copy_of_int8store_and_the_parents_numpy(tmp_path):
    """From a copy of the package that was never installed, started in a
    folder holding a numpy.py and an h5py.py: the helper imports the copy's
    int8store, and the numpy and h5py the parent imported."""
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "int8store", checkout / "int8store",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (checkout / "int8store" / "_probe.py").write_text(  # exists in the copy only
        "import json, sys, h5py, numpy, int8store\n"
        "print(json.dumps([int8store.__file__, numpy.__file__, h5py.__file__, sys.path]))\n")
    folder = hostile_folder(tmp_path / "downloads")
    parent = ("import json, os, sys, h5py, numpy, int8store\n"
              "from int8store.runtime import processes\n"
              "os.chdir(sys.argv[1])\n"
              "child = processes.start('int8store._probe', [])\n"
              "out, _ = child.communicate(timeout=60)\n"
              "print(json.dumps([int8store.__file__, numpy.__file__, h5py.__file__]))\n"
              "print(out.decode())\n")
    # The parent runs the copy (PYTHONPATH), the child must too: even where an
    # installed int8store is imported at start-up (the Aesara stack's BLAS hook).
    done = subprocess.run([sys.executable, "-c", parent, str(folder)], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(checkout)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    parents, childs = map(json.loads, done.stdout.splitlines()[:2])
    assert Path(parents[0]).parent == Path(childs[0]).parent == checkout / "int8store"
    assert childs[1:3] == parents[1:3]
    assert str(folder) not in childs[3] and "" not in childs[3]
    assert imported(folder) == []


@pytest.mark.graph_free
def test_the_hdf5_process_does_not_import_the_working_folders_modules(tmp_path, monkeypatch,
                                                                      capsys):
    source = plain_hdf5(tmp_path / "plain.h5")
    folder = hostile_folder(tmp_path / "downloads")
    monkeypatch.chdir(folder)
    assert main(["convert", str(source), "-o", str(tmp_path / "out.h5")]) == 0, \
        capsys.readouterr().err
    assert imported(folder) == []
    assert (tmp_path / "out.h5").is_file()


def test_the_shard_reader_does_not_import_the_working_folders_modules(tmp_path, monkeypatch):
    from int8store.converter import convert
    from int8store.store.reader import open_store
    from int8store.streaming.sources import StoreShards
    from int8store.streaming.split import StreamingSplit

    if not hasattr(os, "memfd_create"):
        pytest.skip("a reading process needs Linux's memfd_create")
    store = tmp_path / "s.h5"
    convert(write_mnist_idx_folder(tmp_path / "idx", fake_mnist(n_train=300, side=5)), store)
    folder = hostile_folder(tmp_path / "downloads")
    monkeypatch.chdir(folder)
    opened = open_store(store)
    split = StreamingSplit(StoreShards(store, "train"), 100, opened.encoding, (5, 5),
                           prefetch=1, reader="process")
    try:
        assert sum(shard.count for shard in split.epoch(0)) == len(opened.read_labels("train"))
    finally:
        split.close()
    assert imported(folder) == []


# -- limits inherited, and a helper that cannot start ---------------------------------------

def run_limited(argv, cwd, address_space):
    """``argv`` in a process whose address space is limited by ``ulimit -v``
    (a shell's, rather than a preexec_fn: this process may have JAX's threads)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    shell = ["bash", "-c", f'ulimit -v {address_space // 1024} && exec "$@"', "limited"]
    return subprocess.run(shell + list(argv), cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=240)


@pytest.mark.graph_free
def test_convert_of_an_hdf5_source_works_under_ulimit_v(tmp_path):
    """``(ulimit -v 3145728; int8store convert plain.h5 -o out.h5)``: the
    HDF5 child may not raise its limit above the one it inherited."""
    plain_hdf5(tmp_path / "plain.h5")
    done = run_limited([sys.executable, "-m", "int8store.cli", "convert", "plain.h5", "-o",
                        "out.h5"], tmp_path, 3145728 << 10)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.h5").is_file() and done.stderr == ""


@pytest.mark.graph_free
def test_the_hdf5_child_holds_itself_to_the_lower_of_its_ceiling_and_the_inherited_limit(
        tmp_path):
    probe = ("import json, resource, sys\n"
             "from int8store.runtime.limits import limit_address_space\n"
             "print(json.dumps([limit_address_space(int(a)) for a in sys.argv[1:]]\n"
             "                 + [resource.getrlimit(resource.RLIMIT_AS)]))\n")
    inherited = 3 << 30
    done = run_limited([sys.executable, "-c", probe, str(4 << 30), str(2 << 30)], tmp_path,
                       inherited)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[inherited, True], [2 << 30, False], [2 << 30, 2 << 30]]


@pytest.mark.graph_free
def test_the_root_attributes_reader_is_held_to_its_address_space(tmp_path, monkeypatch):
    """info, verify and manifest read a plain HDF5 file's root attributes in
    a child held, as the HDF5 source's is, to an address space: a size that
    damaged metadata announces fails there. Too small a one fails it here."""
    from int8store.store import plain_hdf5 as reader

    source = plain_hdf5(tmp_path / "plain.h5")
    with h5py.File(source, "a") as f:
        f.attrs["format"] = "not ours"
    assert reader.root_attributes(source) == ({"format": "not ours", "format_version": None}, None)
    monkeypatch.setattr(reader, "ADDRESS_SPACE", 40 << 20)  # (numpy alone needs more)
    attributes, problem = reader.root_attributes(source)
    assert attributes is None and problem


@pytest.mark.graph_free
def test_the_root_attributes_reader_ends_with_its_caller_interrupted(tmp_path, monkeypatch):
    """Ctrl-C while the child read (here it waits on a FIFO, as on a file that
    hangs the HDF5 library) left it running for good: in a session of its
    own, it got no Ctrl-C, and it reads no input to end on."""
    from int8store.store import plain_hdf5 as reader

    started = []
    start = processes.start
    monkeypatch.setattr(processes, "start", lambda *a, **k: started.append(start(*a, **k))
                        or started[-1])

    communicate = subprocess.Popen.communicate

    def interrupted(self, timeout=None):  # (the first wait: Ctrl-C pressed)
        monkeypatch.setattr(subprocess.Popen, "communicate", communicate)
        raise KeyboardInterrupt

    fifo = tmp_path / "hangs.h5"
    os.mkfifo(fifo)
    monkeypatch.setattr(subprocess.Popen, "communicate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        reader.root_attributes(fifo)
    assert started and started[0].returncode is not None  # (ended, and waited for)

BROKEN_H5PY = {
    "raises": ("raise ImportError('no HDF5 library here')", r"could not start: ImportError: "
                                                             r"no HDF5 library here \(the Python"),
    "exits": ("import os, sys; sys.stderr.write('cannot map the library\\n'); os._exit(3)",
              r"could not start: cannot map the library \(the Python"),
    "hangs": ("import time; time.sleep(60)", r"could not start: it did not say it was ready "
                                             r"within 2 s"),
}


@pytest.mark.graph_free
@pytest.mark.parametrize("how", sorted(BROKEN_H5PY))
def test_an_hdf5_child_that_cannot_start_is_said_to_be_that(tmp_path, monkeypatch, how):
    """A child that fails before it serves (an exception, an exit, no sign of
    life in time) is an error saying so with its own reason, in one line; not
    a damaged file. Here the child's h5py is broken: a folder on the parent's
    path (the parent imported its h5py earlier) holds an h5py.py that fails."""
    source = plain_hdf5(tmp_path / "plain.h5")
    code, message = BROKEN_H5PY[how]
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "h5py.py").write_text(code + "\n")
    monkeypatch.syspath_prepend(str(tmp_path / "broken"))
    with pytest.raises(HelperStartError, match=message) as error:
        Hdf5Process(source, time_limit=2)
    assert str(error.value).startswith(f"{source}: the process reading this HDF5 file could not "
                                       "start: ")
    assert "\n" not in str(error.value) and "damaged" not in str(error.value)
    assert not isinstance(error.value, SourceFormatError)


@pytest.mark.graph_free
def test_an_hdf5_child_that_dies_after_starting_is_still_about_the_file(tmp_path):
    source = plain_hdf5(tmp_path / "plain.h5")
    process = Hdf5Process(source)
    process._process.kill()
    with pytest.raises(SourceFormatError, match=r"plain\.h5: the HDF5 library crashed \(signal "
                                                r"SIGKILL\) while reading this file"):
        process.describe()
