"""A run's own files are input too: hostile and damaged checkpoints and saved
models, and faults while writing them.

Each kind of damage (an archive cut short, a member announcing 10**12
float64 in a few bytes, a parameter of another shape, an array of Python
objects, a damaged description, a missing file) given to ``--resume`` and
to ``--predict`` ends in one line naming the file and exit status 2, no
traceback, and allocates nothing of what the file announces (a run under
an address-space limit smaller than the size announced). A checkpoint is
checked against the run before anything is set: a refused one changes no
parameter. A checkpoint that cannot be written (a file-size limit set once
the run's functions are compiled: EFBIG, as a full disk gives ENOSPC)
leaves the previous one byte for byte and no temporary file, and the run
goes on, saying so at each failure and counting them at the end.
"""

import errno
import io
import json
import math
import os
import re
import subprocess
import sys
import tracemalloc
import warnings
import zipfile

import numpy as np
import pytest

import int8store
import logistic_sgd
from conftest import ROOT
from int8store import ArgumentError, OutputError, SourceFormatError, tensor_library
from int8store.training import RunCheckpoint, RunState, checkpoint_writes, save_checkpoint
from int8store.training import runner
from int8store.runtime.npz import NpzArchive
from int8store.store.atomic import TEMPORARY_SUFFIX

pytestmark = pytest.mark.floatx_blind

theano = tensor_library()
BOUND = 16 << 20  # traced memory allowed for any refusal of a file below


# -- damaged files, made from whole ones -------------------------------------------

def members_of(path):
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def write_members(path, members):
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def npy_bytes(array):
    out = io.BytesIO()
    np.lib.format.write_array(out, np.asarray(array), allow_pickle=True)
    return out.getvalue()


def announcing(data, shape, descr="<f8"):
    """``.npy`` bytes whose header announces ``shape`` of ``descr`` and whose
    data is ``data``'s (a few bytes)."""
    out = io.BytesIO()
    np.lib.format.write_array_header_2_0(out, {"descr": descr, "fortran_order": False,
                                               "shape": shape})
    return out.getvalue() + data[-64:]


def cut_short(path, out):
    out.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
    return out


def replaced(path, out, key, data):
    return write_members(out, {**members_of(path), f"{key}.npy": data})


def name_run_on(path, out):
    """The first member's local header announcing a name of 600 bytes, so
    that zipfile's error quotes 600 bytes of the file."""
    data = bytearray(path.read_bytes())
    data[26:28] = (600).to_bytes(2, "little")
    out.write_bytes(bytes(data))
    return out


def _central_entries(data):
    """``(offset, name)`` of each entry of a zip's central directory."""
    entries, at = [], data.find(b"PK\x01\x02")
    while at >= 0:
        length = int.from_bytes(data[at + 28:at + 30], "little")
        entries.append((at, bytes(data[at + 46:at + 46 + length]).decode()))
        at = data.find(b"PK\x01\x02", at + 46 + length)
    return entries


def suffix_damaged(path, out, key):
    """The directory's name of member ``key`` no longer ends in ``.npy``."""
    data = bytearray(path.read_bytes())
    at = next(offset for offset, name in _central_entries(data) if name == f"{key}.npy")
    data[at + 46 + len(key) + 2] ^= 0x55  # (".npy": the "p", now "%")
    out.write_bytes(bytes(data))
    return out


def entries_swallowed(path, out):
    """The first directory entry's comment length runs over every entry after
    it, which zipfile then does not list."""
    data = bytearray(path.read_bytes())
    (first, _), (second, _) = _central_entries(data)[:2]
    end = data.rfind(b"PK\x05\x06")
    data[first + 32:first + 34] = (end - second).to_bytes(2, "little")
    out.write_bytes(bytes(data))
    return out


#: Each kind of damage: how it is made from a whole file (source, out, the key
#: of its first parameter), and what the error line says.
DAMAGE = {
    "cut short": (lambda src, out, key: cut_short(src, out),
                  "not a readable .npz archive (File is not a zip file)"),
    "10**12 float64": (lambda src, out, key: replaced(
        src, out, key, announcing(members_of(src)[f"{key}.npy"], (10 ** 12,))),
        "announces shape (1000000000000,) of float64 (8,000,000,000,000 bytes)"),
    "another shape": (lambda src, out, key: replaced(src, out, key,
                                                     npy_bytes(np.zeros((3, 3), np.int8))),
                      "parameter 0 W: {held} (3, 3) int8, model (64, 10) {floatX}"),
    "Python objects": (lambda src, out, key: replaced(
        src, out, key, npy_bytes(np.array([1, "a"], dtype=object))),
        "holds Python objects"),
    "missing": (lambda src, out, key: out, "no such"),
    "a header's name run on": (lambda src, out, key: name_run_on(src, out),
                               "not a readable .npy member (File name in directory "),
    "a member's name damaged": (suffix_damaged, "members that are not arrays: {key}.n%y): "
                                "damaged, or not this model's"),
    "entries swallowed": (lambda src, out, key: entries_swallowed(src, out),
                          "its zip directory announces {members} members and lists 1: it is "
                          "damaged"),
}


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """A whole run checkpoint and saved model of the logistic tutorial on digits."""
    folder = tmp_path_factory.mktemp("whole")
    logistic_sgd.sgd_optimization_mnist(dataset="digits", n_epochs=2, batch_size=20,
                                        model_path=folder / "model.npz",
                                        checkpoint=folder / "run.npz")
    return folder / "run.npz", folder / "model.npz"


def one_line(status, err, path):
    assert status == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and f"{path}" in err, err
    assert len(err) - len(str(path)) < 400, err  # (a file's bytes quoted shortened)
    return err


RESUME = ["--dataset", "digits", "--epochs", "2", "--batch-size", "20", "--save-model", ""]


@pytest.mark.parametrize("damage", list(DAMAGE) + ["description damaged"])
def test_a_damaged_checkpoint_is_one_line_to_resume(tmp_path, capsys, whole, damage):
    run, _ = whole
    path = tmp_path / "damaged.npz"
    if damage == "description damaged":
        replaced(run, path, "int8store_run",
                 npy_bytes(np.frombuffer(b'{"format": 1, "ident', np.uint8)))
        expected = "its description is damaged"
    else:
        make, expected = DAMAGE[damage]
        make(run, path, "param_0")
    status = logistic_sgd.main(RESUME + ["--resume", str(path)])
    err = one_line(status, capsys.readouterr().err, path)
    assert expected.format(held="checkpoint", floatX=theano.config.floatX, key="param_0",
                           members=len(members_of(run))) in err


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_saved_model_is_one_line_to_predict(tmp_path, capsys, whole, damage):
    _, model = whole
    path = tmp_path / "damaged.npz"
    make, expected = DAMAGE[damage]
    make(model, path, "W")
    status = logistic_sgd.main(["--dataset", "digits", "--predict", "--save-model", str(path)])
    err = one_line(status, capsys.readouterr().err, path)
    assert expected.format(held="saved", floatX=theano.config.floatX, key="W",
                           members=len(members_of(model))) in err


def test_a_run_checkpoint_given_to_predict_is_named_as_one(capsys, whole):
    """It was read as a model of other parameters ("holds no W, the model's
    parameter 0 W (its arrays: param_0, ...): not this model's"), as a best
    model given to --resume is named as one."""
    run, _ = whole
    status = logistic_sgd.main(["--dataset", "digits", "--predict", "--save-model", str(run)])
    err = one_line(status, capsys.readouterr().err, run)
    assert err == (f"error: {run}: not a saved model (a run's checkpoint: --checkpoint writes "
                   "those; --save-model writes the best model's parameters, which --predict "
                   "reads)\n")
    with pytest.raises(ArgumentError, match="not a saved model"):
        int8store.training.load_parameters(run, model())
    # ...unless its arrays are named: the API read them so before, and still does
    params = model()
    int8store.training.load_parameters(run, params, keys=["param_0", "param_1"])
    with np.load(run) as saved:
        assert all((p.get_value() == saved[f"param_{i}"]).all() for i, p in enumerate(params))


@pytest.mark.parametrize("command, given", [("resume", "cut short"), ("resume", "a best model"),
                                            ("predict", "cut short"),
                                            ("predict", "a run checkpoint")])
def test_a_file_that_is_not_what_it_should_be_is_refused_before_the_data_is_read(
        tmp_path, capsys, monkeypatch, whole, command, given):
    """On Aesara with a fresh compile cache, LeNet5's --resume of a file cut
    short said so after 46 s of building the model and training."""
    run, model = whole
    source = run if (command == "resume") == (given == "cut short") else model
    path = cut_short(source, tmp_path / "cut.npz") if given == "cut short" else source

    def not_reached(*args, **kwargs):
        raise AssertionError("the data was read before the file was refused")

    monkeypatch.setattr(runner.Run, "load_data", not_reached)
    monkeypatch.setattr(logistic_sgd, "load_data", not_reached)
    status = logistic_sgd.main(RESUME + ["--resume", str(path)] if command == "resume" else
                               ["--dataset", "digits", "--predict", "--save-model", str(path)])
    out, err = capsys.readouterr()
    one_line(status, err, path)
    assert out == "" and {"cut short": "not a readable .npz archive",
                          "a best model": "not a run checkpoint",
                          "a run checkpoint": "not a saved model"}[given] in err, err


def test_a_file_named_without_npz_is_said_once_where_it_goes_and_is_read_from_there(
        tmp_path, capsys):
    """--save-model mymodel.h5 wrote mymodel.h5.npz without a word, and
    --predict --save-model cifar.h5 answered "cifar.h5.npz: no such saved
    model", naming a file never typed."""
    model, run = tmp_path / "mymodel.h5", tmp_path / "myrun"
    assert logistic_sgd.main(["--dataset", "digits", "--epochs", "1", "--batch-size", "20",
                              "--save-model", str(model), "--checkpoint", str(run)]) == 0
    out = capsys.readouterr().out
    assert out.count(f"{model}.npz") == 1 and out.count(f"{run}.npz") == 1, out
    assert f"... the best model is written to {model}.npz (--save-model {model}: .npz added, " \
           "as numpy.savez adds it)\n" in out
    assert f"... the run's checkpoint is written to {run}.npz (--checkpoint {run}: .npz added" \
        in out
    assert not model.exists() and not run.exists()
    assert logistic_sgd.main(["--dataset", "digits", "--predict", "--save-model", str(model)]) == 0
    assert f"... the saved model is read from {model}.npz (--save-model {model}: " in \
        capsys.readouterr().out
    assert logistic_sgd.main(RESUME + ["--resume", str(run)]) == 0
    assert f"... resumed from {run}.npz: epoch 1" in capsys.readouterr().out
    # a name ending in .npz is the file, and nothing is said of it
    assert logistic_sgd.main(["--dataset", "digits", "--epochs", "1", "--batch-size", "20",
                              "--save-model", str(tmp_path / "m.npz")]) == 0
    assert ".npz added" not in capsys.readouterr().out and (tmp_path / "m.npz").is_file()
    # a model not there is named as typed, and as the file looked for
    other = tmp_path / "cifar.h5"
    predict = ["--dataset", "digits", "--predict", "--save-model", str(other)]
    assert logistic_sgd.main(predict) == 2
    assert capsys.readouterr().err == (
        f"error: --save-model {other} ({other}.npz): no such saved model; expected the .npz "
        "file a run's --save-model wrote, or a run without --predict to write one\n")
    other.write_bytes(b"\x89HDF\r\n\x1a\n")  # (the dataset, say)
    assert logistic_sgd.main(predict) == 2
    assert capsys.readouterr().err == (
        f"error: --save-model {other}: not a saved model: a run's --save-model writes .npz "
        f"files (this one would be {other}.npz)\n")


@pytest.mark.parametrize("command", ["resume", "predict"])
def test_a_member_announcing_more_than_the_address_space_is_refused_unallocated(
        tmp_path, whole, command):
    """3 GiB announced in a few bytes, read by a process that cannot map 2 GiB."""
    run, model = whole
    key, source = ("param_0", run) if command == "resume" else ("W", model)
    path = replaced(source, tmp_path / "forged.npz", key,
                    announcing(members_of(source)[f"{key}.npy"], (3 << 27,)))
    arguments = (["--resume", str(path)] + RESUME if command == "resume"
                 else ["--dataset", "digits", "--predict", "--save-model", str(path)])
    # The limit set by the child itself before it becomes the tutorial (a
    # preexec_fn would fork this process, whose JAX threads make that unsafe).
    limited = ("import os, resource, sys; limit = 2 << 30; "
               "resource.setrlimit(resource.RLIMIT_AS, (limit, limit)); "
               "os.execv(sys.executable, [sys.executable] + sys.argv[1:])")
    done = subprocess.run([sys.executable, "-c", limited,
                           str(ROOT / "tutorials" / "logistic_sgd.py")] + arguments,
                          capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    one_line(done.returncode, done.stderr, path)
    assert "(3,221,225,472 bytes) but the member holds" in done.stderr


# -- the checkpoint against the run, before anything is set ------------------------

def model():
    floatx = theano.config.floatX
    return [theano.shared(np.arange(640, dtype=floatx).reshape(64, 10), name="W"),
            theano.shared(np.arange(10, dtype=floatx), name="b")]


LOOP = ("patience", "best_validation_loss", "test_score", "test_count", "finished")


def run_of(params, path=None):
    identity = int8store.training.run_identity("demo", [], params, 20, seed=1)
    return RunCheckpoint(path, params, identity, loop=LOOP, batches=59)


@pytest.fixture
def written(tmp_path):
    """A run checkpoint of :func:`model` at epoch 3, minibatch 7, with a best model."""
    params = model()
    state = RunState(3, 7, {"patience": 5000, "best_validation_loss": 0.05, "test_score": 0.06,
                            "test_count": 300, "finished": False},
                     [p.get_value() + 1 for p in params])
    return run_of(params, tmp_path / "run").save(state)


def edited(path, out, **changes):
    """The checkpoint at ``path`` with its description's fields changed."""
    members = members_of(path)
    description = json.loads(np.lib.format.read_array(
        io.BytesIO(members["int8store_run.npy"])).tobytes())
    for key, value in changes.items():
        target, _, inner = key.partition("__")
        if inner:
            description[target][inner] = value
        else:
            description[target] = value
    text = json.dumps(description, allow_nan=True).encode()
    return replaced(path, out, "int8store_run", npy_bytes(np.frombuffer(text, np.uint8)))


FORGED = {
    "an epoch of text": ({"epoch": "3"}, "its description's epoch is '3', expected an integer"),
    "epoch 0": ({"epoch": 0}, "its data position is at epoch 0, expected 1 to 2147483647"),
    "epoch 10**30": ({"epoch": 10 ** 30}, "its data position is at epoch 1000000000000000000000000"),
    "a minibatch past the epoch": ({"step": 60}, "its data position, minibatch 60 of epoch 3, is "
                                                 "outside the data: an epoch of the training split "
                                                 "has 59 minibatches at batch size 20"),
    "a negative minibatch": ({"step": -1}, "minibatch -1 of epoch 3, is outside the data"),
    "a negative patience": ({"loop__patience": -5}, "its early-stopping state's patience is -5, "
                                                    "expected a number from 0 to"),
    "a patience of true": ({"loop__patience": True}, "patience is True, expected a number"),
    "a test count of 2.5": ({"loop__test_count": 2.5}, "test_count is 2.5, expected an integer"),
    "a NaN validation error": ({"loop__best_validation_loss": math.nan},
                               "best_validation_loss is nan, expected a number from 0 to 1 or "
                               "infinity"),
    "a test error of 3": ({"loop__test_score": 3.0}, "test_score is 3.0, expected a number from 0 "
                                                     "to 1"),
    "finished as text": ({"loop__finished": "no"}, "finished is 'no', expected true or false"),
    "a number missing": ({"loop": {"patience": 1, "finished": False}},
                         "its early-stopping state holds 'patience', 'finished', expected"),
    "one best parameter": ({"best": 1}, "holds 1 best-model parameters; a model of 2 has 2"),
    "a list": ({"loop": [1, 2]}, "its description's loop is [1, 2], expected an object"),
    "data of numbers": ({"identity__data": [1, 2]}, "the data differs"),
    "a model of numbers": ({"identity__model": 7}, "the model differs (parameters 7 then"),
    "another format": ({"format": 2}, "a run checkpoint of format 2; this int8store reads format 1"),
    "a patience of 401 digits": ({"loop__patience": 10 ** 400},
                                 "patience is 100000000000000000...0000000000000000000, expected "
                                 "a number from 0 to"),
    "a validation error of 401 digits": ({"loop__best_validation_loss": 10 ** 400},
                                         "best_validation_loss is 100000000000000000..."),
    "an augmentation of 10**5 numbers": ({"identity__augmentation": list(range(10 ** 5))},
                                         "the augmentation (--augment) differs ([0, 1, 2, 3, 4, "
                                         "5, ...] then, not given now)"),
}


@pytest.mark.parametrize("case", list(FORGED))
def test_a_forged_description_is_refused_and_changes_nothing(tmp_path, written, case):
    changes, message = FORGED[case]
    path = edited(written, tmp_path / "forged.npz", **changes)
    params = model()
    before = [p.get_value().copy() for p in params]
    with pytest.raises((SourceFormatError, ArgumentError)) as refusal:
        run_of(params).resume(path)
    assert str(refusal.value).startswith(f"{path}: ") and message in str(refusal.value)
    for param, value in zip(params, before):
        assert (param.get_value() == value).all()


@pytest.mark.parametrize("case", ["another shape", "another dtype", "a best parameter",
                                  "missing", "an extra array", "a description of floats",
                                  "a 10 MB description", "nested too deep"])
def test_arrays_that_do_not_fit_the_model_are_refused_and_change_nothing(tmp_path, written, case):
    floatx = theano.config.floatX
    other = "float32" if floatx == "float64" else "float64"
    members = members_of(written)
    message = {
        "another shape": "parameter 0 W: checkpoint (3, 3) int8, model (64, 10) " + floatx,
        "another dtype": f"parameter 1 b: checkpoint (10,) {other}, model (10,) {floatx}",
        "a best parameter": f"best-model parameter 1 b: checkpoint (11,) {floatx}, model (10,)",
        "missing": "holds no param_1, the model's parameter 1 b (its arrays: ",
        "an extra array": "holds param_2, which no checkpoint of this model holds",
        "a description of floats": "its description is (3,) float64, expected at most 1,048,576 "
                                   "bytes of JSON (uint8)",
        "a 10 MB description": "its description is (100000000,) uint8, expected at most",
        "nested too deep": "its description is damaged",
    }[case]
    if case == "another shape":
        members["param_0.npy"] = npy_bytes(np.zeros((3, 3), np.int8))
    elif case == "another dtype":
        members["param_1.npy"] = npy_bytes(np.zeros(10, other))
    elif case == "a best parameter":
        members["best_1.npy"] = npy_bytes(np.zeros(11, floatx))
    elif case == "missing":
        del members["param_1.npy"]
    elif case == "an extra array":
        members["param_2.npy"] = npy_bytes(np.zeros(1))
    elif case == "a description of floats":
        members["int8store_run.npy"] = npy_bytes(np.zeros(3))
    elif case == "a 10 MB description":  # (announced in a deflated member of 100 KB)
        members["int8store_run.npy"] = npy_bytes(np.zeros(100_000_000, np.uint8))
    else:
        members["int8store_run.npy"] = npy_bytes(np.frombuffer(b"[" * 100_000, np.uint8))
    path = tmp_path / "forged.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    params = model()
    tracemalloc.start()
    try:
        with pytest.raises((SourceFormatError, ArgumentError)) as refusal:
            run_of(params).resume(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(refusal.value).startswith(f"{path}: ") and message in str(refusal.value), \
        str(refusal.value)
    assert peak < BOUND, peak
    assert (params[0].get_value() == np.arange(640).reshape(64, 10)).all()
    assert (params[1].get_value() == np.arange(10)).all()


def test_a_whole_checkpoint_still_resumes_every_value(written):
    params = [theano.shared(np.zeros_like(p.get_value()), name=p.name) for p in model()]
    state = run_of(params).resume(written)
    assert (state.epoch, state.step, state.loop["test_count"]) == (3, 7, 300)
    assert (params[0].get_value() == np.arange(640).reshape(64, 10)).all()
    assert (state.best[1] == np.arange(10) + 1).all() and state.best[1].flags.writeable


def test_a_saved_model_is_cast_to_the_model_and_checked_before_it_is_set(tmp_path):
    floatx = theano.config.floatX
    params = model()
    path = save_checkpoint(tmp_path / "model", W=np.ones((64, 10), np.float64),
                           b=np.ones(10, np.float32))
    int8store.training.load_parameters(path, params)
    assert params[0].get_value().dtype == floatx and (params[1].get_value() == 1).all()
    save_checkpoint(tmp_path / "model", W=np.zeros((64, 10)), b=np.zeros(10, np.int64))
    with pytest.raises(ArgumentError, match=f"parameter 1 b: saved \\(10,\\) int64, model "
                                            f"\\(10,\\) {floatx}"):
        int8store.training.load_parameters(path, params)
    assert (params[0].get_value() == 1).all()  # W was not set either
    with pytest.raises(ArgumentError, match="no such saved model"):
        int8store.training.load_parameters(tmp_path / "gone.npz", params)


# -- the bounded .npz reader -------------------------------------------------------

@pytest.mark.graph_free
def test_the_reader_checks_every_header_and_reads_whole_members_only_when_asked(tmp_path):
    path = tmp_path / "a.npz"
    fortran = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    np.savez(path, f=fortran, rows=np.arange(20, dtype=np.int16).reshape(10, 2))
    archive = NpzArchive(path)
    assert archive.keys() == ["f", "rows"] and archive["f"].describe() == "(3, 4) float64"
    assert (archive["f"].read() == fortran).all() and archive["f"].read().flags.writeable
    chunks = list(archive["rows"].chunks(4))
    assert [len(c) for c in chunks] == [4, 4, 2] and (np.concatenate(chunks)[:, 1] ==
                                                     np.arange(1, 20, 2)).all()
    members = members_of(path)
    for name, forged, message in [
        ("twice", None, "holds two members named rows.npy"),
        ("negative", announcing(members["rows.npy"], (-4, -10), "<i2"), "a negative length"),
        ("crc", "flipped", "Bad CRC-32"),
        ("pickle", b"\x80\x04K\x01.", "not a readable .npy member"),
    ]:
        out = tmp_path / f"{name}.npz"
        if forged is None:
            with warnings.catch_warnings(), zipfile.ZipFile(out, "w") as archive:
                warnings.simplefilter("ignore")  # (zipfile's "Duplicate name")
                archive.writestr("rows.npy", members["rows.npy"])
                archive.writestr("rows.npy", members["rows.npy"])
        elif forged == "flipped":  # the last byte of the array's data, in the archive
            data = bytearray(path.read_bytes())
            data[data.index(members["rows.npy"]) + len(members["rows.npy"]) - 1] ^= 1
            out.write_bytes(bytes(data))
        else:
            write_members(out, {**members, "rows.npy": forged})
        with pytest.raises(SourceFormatError, match=message) as refusal:
            NpzArchive(out)["rows"].read()
        assert str(refusal.value).startswith(str(out))


# -- faults while writing ----------------------------------------------------------

#: The logistic tutorial, its third run checkpoint written under a file-size
#: limit smaller than any checkpoint (set only then: the functions are
#: compiled, and a limit set before would stop the compiler's cache too),
#: SIGXFSZ ignored so that write() fails with EFBIG; the files as they were
#: just before are kept beside them as *.before.
FILE_SIZE_LIMITED = """
import resource, shutil, signal, sys
sys.path.insert(0, sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
import int8store, logistic_sgd
save, calls = int8store.training.RunCheckpoint.save, [0]
def limited(self, state):
    calls[0] += 1
    if calls[0] == 3:
        shutil.copy("run.npz", "run.before")
        shutil.copy("model.npz", "model.before")
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))
    return save(self, state)
int8store.training.RunCheckpoint.save = limited
sys.exit(logistic_sgd.main(sys.argv[2:]))
"""


def test_a_checkpoint_that_cannot_be_written_leaves_the_last_one_and_the_run_goes_on(tmp_path):
    run = subprocess.run([sys.executable, "-c", FILE_SIZE_LIMITED, str(ROOT / "tutorials"),
                          "--dataset", "digits", "--epochs", "6", "--batch-size", "20",
                          "--save-model", "model.npz", "--checkpoint", "run.npz"],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "Optimization complete" in run.stdout and "epochs                 6" in run.stdout
    for name in ("run", "model"):  # byte for byte the last written before the limit
        assert (tmp_path / f"{name}.npz").read_bytes() == (tmp_path / f"{name}.before").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.before", "model.npz",
                                                          "run.before", "run.npz"]
    lines = [line for line in run.stderr.splitlines() if line.startswith("warning: ")]
    failed = [line for line in lines if ": not written (" in line]
    assert "Traceback" not in run.stderr
    # epochs 3 to 6 failed, said once (a run of 100 epochs said it 100 times)
    assert sum(line.startswith("warning: run.npz: ") for line in failed) == 1
    assert all(line.endswith("(File too large); the previous file, if any, is left as it was; "
                             "the run goes on (not said again while this file fails so)")
               for line in failed)
    # the last line counts them: the model too, when it improved after epoch 2
    improved = any(line.startswith("warning: model.npz: ") for line in failed)
    summary = re.fullmatch(r"warning: (\d+) of the run's (\d+) file writes failed \(File too "
                           r"large\): "
                           r"run\.npz(, model\.npz)? hold(s?) the last written", lines[-1])
    assert summary and int(summary[1]) >= 4 + improved and bool(summary[3]) == improved
    assert int(summary[2]) >= int(summary[1]) + 2, lines[-1]  # (epochs 1 and 2 wrote both)
    # the checkpoint kept resumes: the run goes on from epoch 2
    resumed = logistic_sgd.sgd_optimization_mnist(
        dataset="digits", n_epochs=6, batch_size=20, model_path=None,
        resume=tmp_path / "run.npz")
    assert resumed["epochs"] == 6


@pytest.mark.graph_free
@pytest.mark.parametrize("fault", [errno.ENOSPC, errno.EROFS, errno.EFBIG])
def test_a_failed_write_is_one_line_and_leaves_the_previous_file(tmp_path, monkeypatch, fault):
    path = save_checkpoint(tmp_path / "m", W=np.zeros(3))
    before = (tmp_path / "m.npz").read_bytes()
    if fault == errno.EROFS:  # the folder read-only: no temporary file can be made
        def refuse(*args, **kwargs):
            raise OSError(fault, os.strerror(fault))
        monkeypatch.setattr("tempfile.mkstemp", refuse)
    else:  # the disk full, or the file too large, as an array is written
        def refuse(file, *args, **kwargs):
            file.write(b"\x93NUMPY a start")
            raise OSError(fault, os.strerror(fault))
        monkeypatch.setattr(np.lib.format, "write_array", refuse)
    with pytest.raises(OutputError) as refusal:
        save_checkpoint(path, W=np.ones(3))
    assert str(refusal.value) == (f"{path}: not written ({os.strerror(fault)}); the previous "
                                  "file, if any, is left as it was")
    said = []
    with checkpoint_writes(report=said.append) as writes:
        assert save_checkpoint(path, W=np.ones(3)) is None
        assert save_checkpoint(path, W=np.ones(3)) is None
    assert said == [f"warning: {refusal.value}; the run goes on (not said again while this file "
                    "fails so)"]
    assert writes.summary() == (f"warning: 2 of the run's 2 file writes failed "
                                f"({os.strerror(fault)}): {path} was not written in this run")
    assert (tmp_path / "m.npz").read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(TEMPORARY_SUFFIX)]
    monkeypatch.undo()
    with checkpoint_writes(report=said.append) as writes:  # a disk with room again
        assert save_checkpoint(path, W=np.ones(3)) == path
    assert writes.summary() is None and len(said) == 1


@pytest.mark.graph_free
def test_a_folder_where_the_checkpoint_goes_is_said_as_such(tmp_path):
    # It said "not written (an error of the system)": the refusal had no strerror.
    (tmp_path / "m.npz").mkdir()
    with pytest.raises(OutputError, match=r"m\.npz: not written \(is a folder; give the path "):
        save_checkpoint(tmp_path / "m", W=np.zeros(3))


@pytest.mark.graph_free
def test_a_path_failing_again_after_a_write_there_is_said_again():
    from int8store.store.checkpoint import CheckpointWrites

    said = []
    writes = CheckpointWrites(said.append)
    for outcome in ("full", "full", "written", "full", "other", "other"):
        if outcome == "written":
            writes.succeeded("run.npz")
        else:
            reason = "No space left on device" if outcome == "full" else "Read-only file system"
            writes.failed("run.npz", reason, f"run.npz: not written ({reason})")
    assert [line.split("(")[1].split(")")[0] for line in said] == [
        "No space left on device", "No space left on device", "Read-only file system"]
    assert writes.summary() == ("warning: 5 of the run's 6 file writes failed (No space left on "
                                "device, Read-only file system): run.npz holds the last written")
