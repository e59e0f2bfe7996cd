"""The bundled logistic-regression and MLP tutorials on digits: they train,
slice before the cast, replace their own checkpoint, predict from it."""

import contextlib
import json
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

import logistic_sgd
import mlp
from conftest import ROOT
from test_dataset import assert_sliced_before_cast


def test_the_tutorial_gets_its_data_from_int8store_only():
    source = (ROOT / "tutorials" / "logistic_sgd.py").read_text()
    assert "from int8store import load_data" in source
    assert "def load_data" not in source and "int8store." + "backend" not in source
    for name in ("logistic_sgd.py", "convolutional_mlp.py"):  # the classic givens, unchanged
        text = (ROOT / "tutorials" / name).read_text()
        assert "x: train_set_x[index * batch_size: (index + 1) * batch_size]" in text


@pytest.mark.parametrize("held", [{}, {"max_device_bytes": 20000}], ids=["whole", "streamed"])
def test_a_run_gives_the_labels_as_load_data_does(held, capsys):
    # as the classic's T.cast(shared_y, 'int32'): y.owner.inputs[0] holds them
    from int8store import training

    for (x, y), split in zip(training.Run(**held).load_data("digits", 20),
                             ("train", "valid", "test")):
        labels = y.owner.inputs[0].get_value(borrow=True)
        assert labels.dtype == np.int32 and labels is y.get_value(borrow=True)
        assert labels.shape[0] == x.dataset.n_examples > 0, split


@pytest.mark.slow
def test_training_learns_and_slices_the_int8_images_before_the_cast(tmp_path):
    result = logistic_sgd.sgd_optimization_mnist(dataset="digits", n_epochs=200,
                                                 model_path=tmp_path / "m.npz")
    assert result["test_score"] < 0.2  # digits are far easier than chance (90 % error)
    assert_sliced_before_cast(result["train_model"].function, result["datasets"][0])
    with np.load(tmp_path / "m.npz") as saved:
        assert saved["W"].shape == (64, 10)


@pytest.mark.parametrize("sizes, named", [
    ((1000, 300, 300), "the validation and test splits (300 examples each)"),
    ((1000, 1, 5), "the validation split (1 example)"),
    ((7, 5000, 5000), "the training split (7 examples)")])
def test_a_batch_cut_to_the_smallest_split_names_it(sizes, named):
    # it said "a split of 1 examples", naming none
    from types import SimpleNamespace
    from int8store.training.runner import _fewest
    assert _fewest([SimpleNamespace(n_examples=n) for n in sizes]) == named


def test_cli_prints_errors_and_bytes_and_replaces_its_checkpoint(tmp_path, capsys):
    model = tmp_path / "model.npz"
    args = ["--dataset", "digits", "--epochs", "5", "--save-model", str(model)]
    assert logistic_sgd.main(args) == 0
    out = capsys.readouterr().out
    assert "best validation error" in out and "test error" in out
    # 1197 training digits of 8x8 pixels: one byte each, against four.
    assert "train      1197  8x8        76,608        306,432          0.25  int8" in out
    assert ("batch size 600 is larger than the validation and test splits (300 examples "
            "each): using 300") in out
    first = model.read_bytes()
    assert logistic_sgd.main(args[:-2] + ["--epochs", "30", "--save-model", str(model)]) == 0
    assert model.read_bytes() != first  # replaced, as the classic tutorial did


def test_cli_reports_a_bad_dataset_in_one_line(tmp_path, capsys):
    assert logistic_sgd.main(["--dataset", str(tmp_path / "missing.npz"),
                              "--save-model", str(tmp_path / "m.npz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "missing.npz: no such file or folder" in err
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.parametrize("tutorial", [logistic_sgd, mlp])
def test_a_mistyped_option_is_one_line_naming_the_mistake(tutorial, capsys):
    # argparse printed its 12 lines of usage, and a typo was "unrecognized" only
    for argv, said in ((["--augmnt", "flip"], "--augmnt is not an option of "),
                       (["--devices", "two"], "argument --devices: expected a number of devices")):
        with pytest.raises(SystemExit) as exit:
            tutorial.main(argv)
        err = capsys.readouterr().err
        assert exit.value.code == 2 and err.startswith(f"error: {said}") and err.count("\n") == 1
        assert err.endswith(" --help lists the options\n")
        assert ("(did you mean --augment?)" in err) == (argv[0] == "--augmnt")


def test_labels_that_are_identifiers_not_class_numbers_are_refused_in_one_line(tmp_path, capsys):
    # Labels 0, 1,000,000, ... made a model of 29,000,001 outputs, which died
    # allocating 7 GiB with numpy's traceback; convert and budget said nothing.
    from int8store.cli import main

    images = np.zeros((30, 4, 4), np.uint8)
    np.savez(tmp_path / "ids.npz", x_train=images, y_train=np.arange(30) * 1_000_000,
             x_test=images[:6], y_test=np.arange(6) * 1_000_000)
    said = ("labels run to 29,000,000, and only 30 distinct values occur: a classifier takes "
            "labels as class numbers 0..K-1, one output each, so this one would have "
            "29,000,001 outputs; renumber the classes 0..29 first")
    assert main(["convert", str(tmp_path / "ids.npz"), "-o", str(tmp_path / "ids.h5")]) == 0
    assert f"note: {tmp_path / 'ids.npz'}: {said} (the tutorials refuse it" in capsys.readouterr().out
    for command in (["budget", "--dataset", str(tmp_path / "ids.h5"), "--model", "logistic"],):
        assert main(command) == 2
        assert capsys.readouterr().err == f"error: {tmp_path / 'ids.h5'}: {said}\n"
    assert logistic_sgd.main(["--dataset", str(tmp_path / "ids.h5"), "--epochs", "1"]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'ids.h5'}: {said}\n"
    # class numbers used sparsely are still class numbers: a subset of 10,000
    # classes (every third), or a few of many
    from int8store.codes.labels import class_count
    assert class_count([np.arange(0, 10_000, 3), np.array([2])], "d") == 10_000
    assert class_count([np.array([0, 9, 1000])], "d") == 1001


def test_predict_uses_the_saved_model(tmp_path, capsys):
    model = tmp_path / "model.npz"
    assert logistic_sgd.main(["--dataset", "digits", "--epochs", "20", "--save-model", str(model)]) == 0
    predicted = logistic_sgd.predict(model, "digits", count=10)
    from int8store import load_data
    test_x = load_data("digits")[2][0]
    with np.load(model) as saved:
        expected = np.argmax(test_x.get_value()[:10] @ saved["W"] + saved["b"], axis=1)
    np.testing.assert_array_equal(predicted, expected)
    assert "Predicted values for the first 10 examples in test set:" in capsys.readouterr().out
    # asked for more than the test split holds: all of them, and said so
    assert len(logistic_sgd.predict(model, "digits", count=10_000)) == len(test_x.get_value())
    assert (f"Predicted values for the first {len(test_x.get_value())} examples in test set:"
            in capsys.readouterr().out)


def test_predict_says_the_class_names_the_numbers_stand_for(tmp_path, capsys):
    """Class folders 2, 10 and 7 are numbered in name order (10, 2, 7), and
    --predict printed the numbers only: a 0 was folder 10 (user trial)."""
    from archives import write_image_folder
    from int8store.cli import main

    rng = np.random.default_rng(0)
    labels = np.arange(60) % 3
    images = (rng.integers(0, 60, (60, 6, 6)) + 90 * labels[:, None, None]).astype(np.uint8)
    write_image_folder(tmp_path / "numbered", images, labels, class_names=["10", "2", "7"])
    assert main(["convert", str(tmp_path / "numbered"), "-o", str(tmp_path / "n.h5")]) == 0
    model = str(tmp_path / "model.npz")
    for dataset in ("numbered", "n.h5"):  # the folders, and the store of them
        path = str(tmp_path / dataset)
        assert logistic_sgd.main(["--dataset", path, "--epochs", "5", "--save-model", model]) == 0
        capsys.readouterr()
        predicted = logistic_sgd.predict(model, path, count=6)
        names = capsys.readouterr().out.splitlines()[-1]
        assert names == "as class names: %s" % [["10", "2", "7"][p] for p in predicted]
    assert logistic_sgd.main(["--dataset", "digits", "--epochs", "1", "--save-model", model]) == 0
    capsys.readouterr()
    logistic_sgd.predict(model, "digits", count=3)
    assert "class names" not in capsys.readouterr().out  # (digits' classes are their numbers)


SHAPES = ["blue_triangle", "red_circle", "yellow_square"]


def _write_shapes(root):
    """Class folders SHAPES of 60 images of 6x6 pixels, a brightness a class;
    returns the images and their labels."""
    from archives import write_image_folder

    rng = np.random.default_rng(0)
    labels = np.arange(60) % 3
    images = (rng.integers(0, 60, (60, 6, 6)) + 90 * labels[:, None, None]).astype(np.uint8)
    write_image_folder(root, images, labels, class_names=SHAPES)
    return images, labels


def _description(model):
    with np.load(model) as saved:
        return json.loads(saved["int8store_model"].tobytes())


@pytest.mark.parametrize("tutorial, options", [
    ("logistic_sgd", []), ("mlp", ["--hidden", "4"]), ("convolutional_mlp", ["--nkerns", "2", "2"])])
def test_every_tutorial_s_saved_model_records_its_class_names(tmp_path, capsys, tutorial, options):
    import importlib

    _write_shapes(tmp_path / "shapes")
    model = tmp_path / "m.npz"
    assert importlib.import_module(tutorial).main(
        ["--dataset", str(tmp_path / "shapes"), "--epochs", "1", "--batch-size", "8",
         "--save-model", str(model)] + options) == 0
    assert _description(model) == {"normalize": "unit", "program": tutorial,
                                   "class_names": SHAPES}


def test_predict_prints_the_models_class_names_and_refuses_data_named_otherwise(
        tmp_path, capsys):
    """A model trained on class folders, one of them then renamed
    (blue_triangle to triangle: the sorted order shifted): --predict printed
    the model's red_circle as 'triangle' without a word (user trial)."""
    from int8store.cli import main as int8store_main

    shapes = tmp_path / "shapes"
    images, labels = _write_shapes(shapes)
    model = str(tmp_path / "model.npz")
    assert logistic_sgd.main(["--dataset", str(shapes), "--epochs", "5", "--save-model", model]) == 0
    assert int8store_main(["convert", str(shapes), "-o", str(tmp_path / "shapes.h5")]) == 0
    np.savez(tmp_path / "arrays.npz", x_train=images, y_train=labels, x_test=images[:6],
             y_test=labels[:6])
    capsys.readouterr()
    # The data named as the model's classes (its folders, their store), or not
    # named (arrays): the numbers and the model's names for them.
    for dataset in ("shapes", "shapes.h5", "arrays.npz"):
        predicted = logistic_sgd.predict(model, str(tmp_path / dataset), count=6)
        assert capsys.readouterr().out.splitlines()[-1] == \
            "as class names: %s" % [SHAPES[p] for p in predicted]
    predict = ["--predict", "--save-model", model, "--dataset", str(shapes)]
    assert logistic_sgd.main(predict) == 0
    assert "as class names: ['" in capsys.readouterr().out
    # Named otherwise (a folder renamed, or gone): refused in one line naming both.
    (shapes / "blue_triangle").rename(shapes / "triangle")
    assert logistic_sgd.main(predict) == 2
    out, err = capsys.readouterr()
    assert "Predicted" not in out and err.splitlines()[-1] == (
        f"error: {model}: a model of the classes ['blue_triangle', 'red_circle', "
        f"'yellow_square'], and {shapes} names its classes ['red_circle', 'triangle', "
        "'yellow_square'] (class 0: 'blue_triangle' in the model, 'red_circle' in the data): "
        "its label numbers would not stand for the model's classes; give data whose classes are "
        "named as the model's (class folders under the names they had in training)"), err
    shutil.rmtree(shapes / "triangle")
    assert logistic_sgd.main(predict) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith(
        f"error: {model}: a model of the classes ['blue_triangle', 'red_circle', "
        f"'yellow_square'], and {shapes} names its classes ['red_circle', 'yellow_square'] "
        "(3 classes in the model, 2 in the data)")
    # A model saved without the names (by int8store before them, or a user's
    # own code) prints the data's, as it did.
    with np.load(model) as saved:
        arrays = {"W": saved["W"][:, :2], "b": saved["b"][:2]}
    for description in ({}, {"normalize": "unit", "program": "logistic_sgd"}):
        np.savez(model, **arrays, **({"int8store_model": np.frombuffer(
            json.dumps(description).encode(), np.uint8)} if description else {}))
        predicted = logistic_sgd.predict(model, str(shapes), count=6)
        assert capsys.readouterr().out.splitlines()[-1] == \
            "as class names: %s" % [["red_circle", "yellow_square"][p] for p in predicted]
    # A damaged record of the names is refused by name.
    description = {"normalize": "unit", "program": "logistic_sgd", "class_names": "red_circle"}
    np.savez(model, **arrays, int8store_model=np.frombuffer(json.dumps(description).encode(),
                                                            np.uint8))
    assert logistic_sgd.main(predict) == 2
    assert capsys.readouterr().err == (f"error: {model}: its description's class_names are not "
                                       "a list of names: damaged\n")


def test_predict_sees_the_images_as_the_model_was_trained_on_them(tmp_path, capsys):
    # --predict read them as --normalize unit whatever the option said.
    model = tmp_path / "model.npz"
    options = ["--dataset", "digits", "--save-model", str(model), "--normalize", "none"]
    assert logistic_sgd.main(options + ["--epochs", "3", "--learning-rate", "0.001"]) == 0
    assert logistic_sgd.main(options + ["--predict"]) == 0
    printed = capsys.readouterr().out.split("test set:")[-1]
    from int8store import load_data
    test_x = load_data("digits", normalize="none")[2][0]
    with np.load(model) as saved:
        expected = np.argmax(test_x.get_value()[:10] @ saved["W"] + saved["b"], axis=1)
    assert " ".join(printed.split()) == "[" + " ".join(map(str, expected)) + "]"
    # The model records its normalization: read otherwise, --predict refuses
    # (it predicted other labels without a word: a trial).
    with np.load(model) as saved:
        assert json.loads(saved["int8store_model"].tobytes()) == {"normalize": "none", "program": "logistic_sgd"}
        arrays = {"W": saved["W"], "b": saved["b"]}
    assert logistic_sgd.main(["--dataset", "digits", "--save-model", str(model), "--predict"]) == 2
    assert capsys.readouterr().err == (
        f"error: {model}: a model trained on images normalized 'none', read here as 'unit' "
        "(--normalize), which would predict other labels: give --normalize none\n")
    # A model saved without the record (before it, or by a user's own code)
    # predicts as it did; a damaged record is refused by name.
    np.savez(model, **arrays)
    assert logistic_sgd.main(options + ["--predict"]) == 0
    assert " ".join(capsys.readouterr().out.split("test set:")[-1].split()) \
        == "[" + " ".join(map(str, expected)) + "]"
    np.savez(model, **arrays, int8store_model=np.frombuffer(b"{not json", np.uint8))
    assert logistic_sgd.main(options + ["--predict"]) == 2
    assert capsys.readouterr().err == f"error: {model}: its description is damaged\n"


@pytest.mark.slow
def test_mlp_tutorial_trains_on_digits():
    result = mlp.test_mlp(dataset="digits", n_epochs=3, batch_size=20, n_hidden=50)
    assert result["test_score"] < 0.5


def test_the_tutorial_runs_as_a_script_from_another_folder(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "tutorials" / "logistic_sgd.py"),
                           "--dataset", "digits", "--epochs", "2"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "best validation error" in done.stdout and (tmp_path / "best_model.npz").exists()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_tutorial_says_so_and_keeps_its_checkpoint(tmp_path, signum):
    """Ctrl-C (or SIGTERM) once training has begun: it stops after the
    minibatch, reports the best model so far as such, keeps the checkpoint
    and exits with 128 + the signal."""
    run = subprocess.Popen([sys.executable, "-u", str(ROOT / "tutorials" / "logistic_sgd.py"),
                            "--dataset", "digits", "--epochs", "100000", "--batch-size", "20"],
                           cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in run.stdout:  # wait until an epoch or two has been validated
        lines.append(line)
        if line.startswith("epoch 2,"):
            break
    run.send_signal(signum)
    out, err = run.communicate(timeout=300)
    out = "".join(lines) + out
    assert run.returncode == 128 + signum, err
    assert f"{signal.Signals(signum).name} received: stopping after the updates under way" in err
    assert "Interrupted at epoch " in out and "Optimization complete" not in out
    assert "interrupted: the figures below are the best model so far" in out
    assert "best validation error" in out  # the summary is still printed
    with np.load(tmp_path / "best_model.npz") as saved:  # whole, loadable
        assert saved["W"].shape == (64, 10)
    assert [p.name for p in tmp_path.iterdir()] == ["best_model.npz"]  # no temporary left


@pytest.mark.parametrize("tutorial", ["logistic_sgd", "mlp", "convolutional_mlp"])
def test_a_tutorial_stopped_before_its_first_validation_says_it_has_no_model_yet(
        tutorial, capsys, monkeypatch, tmp_path):
    from int8store.training import runner

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(runner, "stop_requested", lambda: True)  # (asked during minibatch 1)
    __import__(tutorial).main(["--dataset", "digits", "--epochs", "5", "--batch-size", "100"])
    out = capsys.readouterr().out
    assert "Interrupted at epoch 1: no validation was run yet, so there is no best model" in out
    assert "\ninterrupted before the first validation: there is no best model or test error to " \
           "report\nepochs                 1\n" in out
    assert "inf" not in out and "Best validation score" not in out
    assert not [line for line in out.splitlines()
                if line.startswith(("epoch ", "best validation error", "test error"))]


def test_a_second_interrupt_as_the_run_ends_stops_at_once_in_one_line(capsys, monkeypatch):
    """The second Ctrl-C came as the run was wrapping up (a traceback, exit
    status 1), or once it was over, during its summary."""
    import os

    from int8store.runtime.interrupts import arm_stop_requests
    from int8store.store import checkpoint
    from int8store.training import command

    def a_run_stopped_then_interrupted_as_it_ends():
        arm_stop_requests()  # (its training loop began)
        os.kill(os.getpid(), signal.SIGINT)  # the first: stop after the minibatch
        return {"ended": True}

    class Writes:  # the second, as the run's failed writes are said
        def summary(self):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs at the next bytecode
                pass

    monkeypatch.setattr(command, "checkpoint_writes", lambda: contextlib.nullcontext(Writes()))
    assert command.run_reporting_errors(a_run_stopped_then_interrupted_as_it_ends) == (None, 130)
    assert capsys.readouterr().err.endswith("(again to stop at once)\n"
                                            "interrupted by SIGINT: stopped at once\n")
    monkeypatch.setattr(command, "checkpoint_writes", checkpoint.checkpoint_writes)

    def summary(result, timings):
        raise KeyboardInterrupt  # Ctrl-C's own effect, once the run is over

    monkeypatch.setattr(command, "print_summary", summary)
    monkeypatch.setattr(command, "_set_up_and", lambda train, args, **kwargs: {"ended": True})
    args = type("Args", (), {"coordinator": None, "timings": False, "save_model": None,
                             "checkpoint": None})()
    monkeypatch.setattr(command, "check_options", lambda args, program: None)
    assert command.run_command(None, args) == 130
    assert capsys.readouterr().err == "interrupted: stopped at once\n"


def test_a_model_too_large_for_memory_is_one_line(capsys):
    """``--hidden 1000000000``: numpy's traceback ("Unable to allocate 477.
    GiB") ended the tutorial (helper 62); raised here, not allocated."""
    from int8store.training import command

    def building():
        raise MemoryError("Unable to allocate 477. GiB")

    assert command.run_reporting_errors(building) == (None, 2)
    assert capsys.readouterr().err == (
        "error: out of memory: the model or its minibatches do not fit; choose a smaller model "
        "(--hidden, --nkerns) or --batch-size (python -m int8store budget plans the "
        "tutorials' own sizes)\n")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_before_the_training_loop_stops_at_once(capsys, signum):
    """Before the loop there is no model to keep: one Ctrl-C (or SIGTERM)
    during the loading or a download stops the tutorial (it was ignored
    until a download of minutes ended, with a line about the best model)."""
    import os

    from int8store.training import command

    def loading():
        os.kill(os.getpid(), signum)
        for _ in range(1000):  # the handler runs at the next bytecode
            pass
        return {"ended": True}

    before = signal.getsignal(signum)
    assert command.run_reporting_errors(loading) == (None, 128 + signum)
    err = capsys.readouterr().err
    assert err == f"interrupted by {signal.Signals(signum).name}: stopped at once\n"
    assert signal.getsignal(signum) is before  # the handler it had is back


def test_a_second_interrupt_stops_at_once():
    import os

    from int8store.training import stop_requested, stop_requests
    from int8store.runtime.interrupts import Interrupted

    with stop_requests() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop_requested() == signal.SIGINT  # the first only asks
        with pytest.raises(Interrupted):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs at the next bytecode
                pass
    assert stop.exit_status == 130 and stop_requested() is None
    with stop_requests() as stop:  # a new block starts afresh
        pass
    assert stop.exit_status == 0


def test_progress_condenses_the_epoch_lines_and_keeps_the_result(tmp_path, capsys):
    args = ["--dataset", "digits", "--epochs", "50", "--save-model", str(tmp_path / "m.npz")]
    assert logistic_sgd.main(args) == 0
    every_line = capsys.readouterr().out
    assert logistic_sgd.main(args + ["--progress"]) == 0
    condensed = capsys.readouterr().out
    epochs = [line for line in condensed.splitlines() if line.startswith("epoch ")]
    assert [line.split(",")[0] for line in epochs] == [
        "epoch 1", "epoch 5", "epoch 10", "epoch 15", "epoch 20", "epoch 25", "epoch 30",
        "epoch 35", "epoch 40", "epoch 45", "epoch 50"]  # a tenth, in a pipe
    assert all(line in every_line for line in epochs)  # the classic lines, fewer
    tail = lambda out: out[out.index("Optimization complete"):].splitlines()
    assert tail(condensed)[0] == tail(every_line)[0]  # the same result


def test_progress_in_a_pipe_shows_where_a_run_stopped_early():
    import io

    from int8store.training import EpochLines

    log = io.StringIO()
    lines = EpochLines(100, progress=True, file=log)
    for epoch in range(1, 38):  # early stopping ends it at epoch 37
        lines(epoch, f"epoch {epoch}, validation error 1.0 %")
        if epoch in (20, 37):
            lines(epoch, f"     epoch {epoch}, test error of best model 2.0 %")
    lines.close()
    lines.close()  # (once)
    shown = [line.split(",")[0].strip() for line in log.getvalue().splitlines()]
    assert shown == ["epoch 1", "epoch 10", "epoch 20", "epoch 20", "epoch 30", "epoch 37",
                     "epoch 37"]


def test_progress_on_a_terminal_is_one_bar():
    import io

    from int8store.training import EpochLines

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen = Terminal()
    lines = EpochLines(30, progress=True, file=screen)
    for epoch in range(1, 31):
        lines(epoch, f"epoch {epoch}, validation error 1.0 %")
    lines.close()
    shown = screen.getvalue()
    assert shown.count("\n") == 0 and shown.count("\r") >= 30  # one line, redrawn in place
    assert "30/30" in shown and "epoch 30, validation error 1.0 %" in shown
    assert shown.endswith("\r") and not shown.rstrip("\r").split("\r")[-1].strip()  # cleared
