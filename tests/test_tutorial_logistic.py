"""The logistic-regression tutorial on digits: int8 against float32, and its CLI."""

import numpy as np
import pytest

import logistic_sgd
from test_dataset import assert_sliced_before_cast


def run(tmp_path, storage, normalize="unit", **kwargs):
    return logistic_sgd.sgd_optimization_mnist(
        dataset="digits", storage=storage, normalize=normalize,
        model_path=tmp_path / f"{storage}-{normalize}.npz", **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("normalize", ["unit", "batch"])
def test_int8_and_float32_storage_train_identically(tmp_path, normalize):
    int8, float32 = run(tmp_path, "int8", normalize), run(tmp_path, "float32", normalize)
    assert int8["best_validation_loss"] == float32["best_validation_loss"]
    assert int8["test_score"] == float32["test_score"]
    assert int8["epochs"] == float32["epochs"]
    for name in ("W", "b"):
        np.testing.assert_allclose(int8["params"][name], float32["params"][name], rtol=0, atol=1e-6)
    # It learned something: digits are far easier than chance (90% error).
    assert int8["test_score"] < 0.2
    saved = np.load(tmp_path / f"int8-{normalize}.npz")
    assert saved["W"].shape == (64, 10)


def test_training_slices_the_int8_images_before_the_cast(tmp_path):
    result = run(tmp_path, "int8", n_epochs=1)
    assert_sliced_before_cast(result["train_model"], result["splits"]["train"])


def test_cli_prints_errors_and_bytes_and_refuses_to_overwrite(tmp_path, capsys):
    model = tmp_path / "model.npz"
    args = ["--dataset", "digits", "--epochs", "5", "--save-model", str(model)]
    assert logistic_sgd.main(args) == 0
    out = capsys.readouterr().out
    assert "best validation error" in out and "test error" in out
    # 1197 training digits of 8x8 pixels: one byte each, against four.
    assert "training images held as int8: 76,608 bytes (as float32: 306,432 bytes)" in out
    assert "batch size 600 is larger than the 300 examples" in out
    before = model.read_bytes()
    assert logistic_sgd.main(args) == 2
    assert "already exists; pass --force" in capsys.readouterr().err
    assert model.read_bytes() == before
    assert logistic_sgd.main(args + ["--force", "--storage", "float32"]) == 0
    assert "training images held as float32: 306,432 bytes (as int8: 76,608 bytes)" in capsys.readouterr().out


def test_cli_reports_a_bad_dataset_in_one_line(tmp_path, capsys):
    assert logistic_sgd.main(["--dataset", str(tmp_path / "missing.npz"),
                              "--save-model", str(tmp_path / "m.npz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "missing.npz: no such file or folder" in err
    assert not (tmp_path / "m.npz").exists()


def test_predict_uses_the_saved_model(tmp_path, capsys):
    model = tmp_path / "model.npz"
    assert logistic_sgd.main(["--dataset", "digits", "--epochs", "20", "--save-model", str(model)]) == 0
    predicted = logistic_sgd.predict(model, "digits", count=10)
    from int8store import load_splits
    test = load_splits("digits")["test"]
    images = test.encoding.decode(test.data.get_value()[:10])
    with np.load(model) as saved:
        expected = np.argmax(images @ saved["W"] + saved["b"], axis=1)
    np.testing.assert_array_equal(predicted, expected)
    assert "Predicted values for the first 10 examples in test set:" in capsys.readouterr().out
