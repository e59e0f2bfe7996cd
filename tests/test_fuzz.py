"""Fuzzing every reader: damaged IDX headers, pickles, npz, archives, HDF5 sources,
stores, and a run's own checkpoints and saved models.

Each example converts a generated file and asserts the promise: it either
converts (and the store verifies) or fails with an int8store error in one
short line naming the file, with no output and no temporary file left,
within bounded memory. Stores are held to more: damaged bytes or edited
attributes give an error or the very same data; a checkpoint resumes as
written or is refused with no parameter set. A few hundred examples per
strategy in CI, the same each run; ``pytest --fuzz-long`` runs twenty times
as many, ``--fuzz-random`` draws them at random (hypothesis prints a failing
case).
"""

import gzip
import io
import json
import tarfile
import tracemalloc
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archives import (fake_mnist, fake_mnist_pickle_content, python2_pickle, write_image_folder,
                      write_mnist_idx_folder)
from conftest import one_short_line
from int8store import (ArgumentError, Int8StoreError, SourceFormatError, open_store,
                       tensor_library)
from int8store.converter import convert
from int8store.training import (RunCheckpoint, RunState, load_parameters, run_identity,
                                 save_checkpoint)

pytestmark = pytest.mark.graph_free

# Conversions run with a 16 MiB memory ceiling; traced memory must stay within
# the ceiling plus the conversion's own chunks.
CEILING = 16 << 20
BOUND = 48 << 20


def fuzz(request, strategy, examples):
    """Run the decorated check over ``strategy``, ``examples`` times (x20 with
    --fuzz-long), the same examples each run unless --fuzz-random."""
    count = examples * (20 if request.config.getoption("--fuzz-long") else 1)
    derandomize = not request.config.getoption("--fuzz-random")

    def decorate(check):
        settings(max_examples=count, deadline=None, derandomize=derandomize, database=None,
                 suppress_health_check=list(HealthCheck))(given(strategy)(check))()
    return decorate


def converts_or_refuses(source, folder):
    """Convert ``source`` into a fresh folder: a verified store, or a named error
    and nothing left behind. Returns the store or None."""
    out = folder / "out"
    out.mkdir()
    tracemalloc.start()
    try:
        convert(source, out / "s.h5", chunk_bytes=1 << 16, max_memory=CEILING)
        store = open_store(out / "s.h5")
    except Int8StoreError as refusal:
        store = None
        one_short_line(refusal, source)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < BOUND, peak
    if store is None:
        assert list(out.iterdir()) == []
    return store


def mutated(data, edits, cut):
    data = bytearray(data)
    for position, value in edits:
        if data:
            data[position % len(data)] = value
    return bytes(data[:cut] if cut is not None else data)


EDITS = st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=4)
CUTS = st.none() | st.integers(0, 4000)


@pytest.fixture
def scratch(tmp_path):
    counter = iter(range(1 << 30))
    return lambda: (tmp_path / f"e{next(counter)}").resolve()


def make(folder):
    folder.mkdir(parents=True)
    return folder


# -- IDX headers --------------------------------------------------------------------

IDX_HEADERS = st.tuples(
    st.sampled_from([0x08, 0x09, 0x0B, 0x0C, 0x0D, 0x0E]) | st.integers(0, 255),
    st.lists(st.sampled_from([0, 1, 2, 3, 4, 7, 255, 2 ** 16, 2 ** 31, 2 ** 32 - 1])
             | st.integers(0, 2 ** 32 - 1), max_size=4),
    st.integers(0, 600), st.booleans(), st.booleans())


def test_fuzz_idx_headers(request, scratch):
    @fuzz(request, IDX_HEADERS, 300)
    def check(case):
        type_code, dims, payload, gzipped, fuzz_labels = case
        folder = make(scratch())
        source = write_mnist_idx_folder(folder / "idx", fake_mnist(), gzipped=False)
        header = bytes([0, 0, type_code, len(dims)]) + b"".join(d.to_bytes(4, "big") for d in dims)
        data = header + bytes(range(256)) * (payload // 256) + bytes(payload % 256)
        name = "train-labels-idx1-ubyte" if fuzz_labels else "train-images-idx3-ubyte"
        (source / name).write_bytes(gzip.compress(data) if gzipped else data)
        converts_or_refuses(source, folder)


# -- pickles --------------------------------------------------------------------------

PICKLE = python2_pickle(fake_mnist_pickle_content(n=(6, 3, 3), width=4))


def test_fuzz_python2_pickles(request, scratch):
    @fuzz(request, st.tuples(EDITS, CUTS, st.booleans()), 300)
    def check(case):
        edits, cut, gzipped = case
        folder = make(scratch())
        path = folder / ("mnist.pkl.gz" if gzipped else "mnist.pkl")
        data = mutated(PICKLE, edits, cut)
        path.write_bytes(gzip.compress(data) if gzipped else data)
        converts_or_refuses(path, folder)


# -- npz and archives -------------------------------------------------------------------

def npz_bytes():
    buffer = io.BytesIO()
    images = np.arange(6 * 9, dtype=np.uint8).reshape(6, 3, 3)
    np.savez(buffer, x_train=images, y_train=np.arange(6) % 3, x_test=images[:2],
             y_test=np.zeros(2, np.uint8))
    return buffer.getvalue()


NPZ = npz_bytes()


def test_fuzz_npz(request, scratch):
    @fuzz(request, st.tuples(EDITS, CUTS), 300)
    def check(case):
        folder = make(scratch())
        path = folder / "d.npz"
        path.write_bytes(mutated(NPZ, *case))
        converts_or_refuses(path, folder)


def archive_bytes(kind, root):
    buffer = io.BytesIO()
    if kind == "zip":
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(root.rglob("*.png")):
                archive.write(path, path.relative_to(root).as_posix())
    else:
        with tarfile.open(fileobj=buffer, mode="w:gz" if kind == "tar.gz" else "w") as archive:
            for path in sorted(root.rglob("*.png")):
                archive.add(path, path.relative_to(root).as_posix())
    return buffer.getvalue()


@pytest.mark.parametrize("kind", ["zip", "tar", "tar.gz"])
def test_fuzz_image_archives(request, scratch, tmp_path, kind):
    root = tmp_path / "imgs"
    write_image_folder(root, np.arange(6 * 16, dtype=np.uint8).reshape(6, 4, 4), [0, 1, 0, 1, 0, 1],
                       ["cat", "dog"])
    original = archive_bytes(kind, root)

    @fuzz(request, st.tuples(EDITS, CUTS), 150)
    def check(case):
        folder = make(scratch())
        path = folder / f"a.{kind}"
        path.write_bytes(mutated(original, *case))
        converts_or_refuses(path, folder)


# -- HDF5 sources: parsed in a child process (int8store.sources.hdf5_process) ---------------

def hdf5_source_bytes(path):
    with h5py.File(path, "w") as f:
        f.create_dataset("x_train", data=np.arange(8 * 9, dtype=np.uint8).reshape(8, 3, 3),
                         chunks=(4, 3, 3), compression="gzip")
        f["y_train"] = np.arange(8) % 3
        f.create_dataset("x_test", data=np.arange(2 * 9, dtype=np.uint8).reshape(2, 3, 3))
        f["y_test"] = np.arange(2) % 3
        f["extra/notes"] = np.arange(4.0)
    return path.read_bytes()


def test_fuzz_hdf5_sources(request, scratch, tmp_path):
    """Bit flips anywhere in a plain HDF5 file (superblock, object headers,
    B-trees, heaps, chunks): converted or refused, never a hang or a crash."""
    original = hdf5_source_bytes(tmp_path / "source.h5")
    flips = st.lists(st.tuples(st.integers(0, len(original) - 1), st.integers(0, 7)),
                     min_size=1, max_size=3)

    @fuzz(request, flips, 30)  # each example starts a process: fewer than the others
    def check(case):
        data = bytearray(original)
        for position, bit in case:
            data[position] ^= 1 << bit
        folder = make(scratch())
        path = folder / "d.h5"
        path.write_bytes(bytes(data))
        converts_or_refuses(path, folder)


# -- stores: an error, or the very same data ----------------------------------------------

@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("store")
    path = folder / "s.h5"
    convert(write_mnist_idx_folder(folder / "idx", fake_mnist(n_train=20, side=5)), path)
    return path


def contents(path):
    store = open_store(path)
    return (store.encoding.describe(), store.image_shape, store.label_names,
            {name: [a.tolist() for a in store.read_split(name)] for name in store.splits})


def test_fuzz_store_bytes(request, scratch, small_store):
    original, expected = small_store.read_bytes(), contents(small_store)
    flips = st.lists(st.tuples(st.integers(0, len(original) - 1), st.integers(0, 7)),
                     min_size=1, max_size=3)

    @fuzz(request, flips, 300)
    def check(case):
        data = bytearray(original)
        for position, bit in case:
            data[position] ^= 1 << bit
        path = make(scratch()) / "s.h5"
        path.write_bytes(bytes(data))
        try:
            seen = contents(path)
        except Int8StoreError as refusal:
            one_short_line(refusal, path)
            return
        assert seen == expected  # never other data without an error


ATTRIBUTE_VALUES = st.one_of(st.integers(-3, 300), st.floats(allow_nan=False),
                             # (no surrogates: h5py cannot write one, so no store holds one)
                             st.text(st.characters(blacklist_characters="\x00",
                                                   blacklist_categories=("Cs",)), max_size=8),
                             st.lists(st.integers(0, 9), max_size=3).map(np.array))


def test_fuzz_store_attribute_edits(request, scratch, small_store):
    with h5py.File(small_store, "r") as f:
        places = [("/", key) for key in f.attrs] + [
            (name, key) for name in ("train", "valid", "test") for key in f[name].attrs]
    expected = contents(small_store)
    original = small_store.read_bytes()

    @fuzz(request, st.tuples(st.sampled_from(places), ATTRIBUTE_VALUES), 150)
    def check(case):
        (group, key), value = case
        path = make(scratch()) / "s.h5"
        path.write_bytes(original)
        with h5py.File(path, "r+") as f:
            f[group].attrs[key] = value
        try:
            seen = contents(path)
        except Int8StoreError as refusal:
            one_short_line(refusal, path)
            return
        assert seen == expected


# -- a run's own files: checkpoints and saved models ------------------------------------

def checkpoint_model():
    theano = tensor_library()
    floatx = theano.config.floatX
    return [theano.shared(np.arange(12, dtype=floatx).reshape(4, 3), name="W"),
            theano.shared(np.arange(3, dtype=floatx), name="b")]


CHECKPOINT_LOOP = {"patience": 5000, "best_validation_loss": 0.05, "best_iter": 40,
                   "test_score": 0.06, "test_count": 300, "finished": False}


def checkpoint_run(params, path):
    identity = run_identity("fuzz", [], params, 20, seed=1)
    return RunCheckpoint(path, params, identity, loop=list(CHECKPOINT_LOOP), batches=59)


def values_of(params):
    return [p.get_value().tolist() for p in params]


def read_or_refused(read, path, params):
    """``read(path, params)``'s result, or None for a one-line int8store error
    naming the file that set no parameter; within bounded memory either way."""
    before = values_of(params)
    tracemalloc.start()
    try:
        return read(path, params)
    except (SourceFormatError, ArgumentError) as refusal:
        assert str(refusal).startswith(f"{path}:")
        one_short_line(refusal, path)
        assert values_of(params) == before
        return None
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < BOUND, peak


def resumed(path, params):
    return checkpoint_run(params, None).resume(path)


@pytest.fixture(scope="module")
def written_run(tmp_path_factory):
    """A run checkpoint (epoch 3, minibatch 7, with a best model) and a saved model."""
    folder = tmp_path_factory.mktemp("run")
    params = checkpoint_model()
    best = [p.get_value() + 1 for p in params]
    run = checkpoint_run(params, folder / "run").save(RunState(3, 7, CHECKPOINT_LOOP, best))
    model = save_checkpoint(folder / "model", W=best[0], b=best[1])
    return Path(run), Path(model)


@pytest.mark.parametrize("reader", ["resume", "predict"])
def test_fuzz_run_files_bytes(request, scratch, written_run, reader):
    """Damaged bytes of a checkpoint (--resume) or a saved model (--predict):
    refused in one line, nothing set, or read as written."""
    source = written_run[0] if reader == "resume" else written_run[1]
    original = source.read_bytes()
    best = [(p.get_value() + 1).tolist() for p in checkpoint_model()]

    @fuzz(request, st.tuples(EDITS, CUTS), 300)
    def check(case):
        path = make(scratch()) / "f.npz"
        path.write_bytes(mutated(original, *case))
        params = checkpoint_model()
        read = read_or_refused(resumed if reader == "resume" else load_parameters, path, params)
        if read is None:
            return
        assert values_of(params) == (values_of(checkpoint_model()) if reader == "resume"
                                     else best)
        if reader == "resume":
            assert (read.epoch, read.step, read.loop) == (3, 7, CHECKPOINT_LOOP)
            assert [value.tolist() for value in read.best] == best


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.floats() | st.text(max_size=6)
    | st.integers() | st.integers(-10 ** 400, 10 ** 400) | st.sampled_from([0, 1, 3, 7, 59, 60]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                  max_size=4),
    max_leaves=20)
#: Where in a description a value may be replaced: a field, or a field's field.
DESCRIPTION_PLACES = st.sampled_from(
    ["format", "epoch", "step", "best", "loop", "identity", "extra"]
    + [f"loop.{name}" for name in CHECKPOINT_LOOP] + ["loop.other"]
    + [f"identity.{name}" for name in ("program", "data", "model", "batch_size", "seed",
                                       "augmentation", "augment_seed")])


def test_fuzz_run_checkpoint_descriptions(request, scratch, written_run):
    """A checkpoint's description with fields replaced by any JSON value (huge
    integers, NaN, nested lists, missing fields): resumed as it says, or
    refused in one short line that names the file, nothing set."""
    with np.load(written_run[0]) as archive:
        members = {name: archive[name] for name in archive.files}
    description = json.loads(members.pop("int8store_run").tobytes())
    edits = st.lists(st.tuples(DESCRIPTION_PLACES, JSON_VALUES | st.just(...)), min_size=1,
                     max_size=3)

    @fuzz(request, edits, 300)
    def check(case):
        forged = json.loads(json.dumps(description))
        for place, value in case:
            target, _, inner = place.partition(".")
            holder, key = (forged.get(target), inner) if inner else (forged, target)
            if not isinstance(holder, dict):
                continue
            if value is ...:
                holder.pop(key, None)
            else:
                holder[key] = value
        text = json.dumps(forged, allow_nan=True).encode()
        path = save_checkpoint(make(scratch()) / "run", **members,
                               int8store_run=np.frombuffer(text, np.uint8))
        state = read_or_refused(resumed, path, checkpoint_model())
        if state is not None:
            assert (state.epoch, state.step, state.loop) == (
                forged["epoch"], forged["step"], forged["loop"])
