"""The LeNet5 tutorial: compiles on the CPU, trains on digits, int8 = float32."""

import numpy as np
import pytest

import convolutional_mlp
from test_dataset import assert_sliced_before_cast


def test_geometry_is_the_classic_one_on_28x28_and_smaller_on_8x8():
    assert convolutional_mlp.lenet5_geometry((28, 28)) == (1, [((5, 5), (12, 12)), ((5, 5), (4, 4))])
    assert convolutional_mlp.lenet5_geometry((8, 8)) == (1, [((3, 3), (3, 3)), ((2, 2), (1, 1))])
    assert convolutional_mlp.lenet5_geometry((16, 12, 3))[0] == 3


@pytest.mark.slow
def test_int8_and_float32_storage_train_identically(tmp_path):
    runs = {storage: convolutional_mlp.evaluate_lenet5(dataset="digits", n_epochs=3,
                                                       storage=storage)
            for storage in ("int8", "float32")}
    int8, float32 = runs["int8"], runs["float32"]
    assert int8["best_validation_loss"] == float32["best_validation_loss"]
    assert int8["test_score"] == float32["test_score"]
    assert int8["best_iter"] == float32["best_iter"]
    assert len(int8["params"]) == 8
    for a, b in zip(int8["params"], float32["params"]):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)
    assert_sliced_before_cast(int8["train_model"], int8["splits"]["train"])


@pytest.mark.slow
def test_cli_on_digits_for_two_epochs(tmp_path, capsys):
    model = tmp_path / "lenet.npz"
    assert convolutional_mlp.main(["--dataset", "digits", "--epochs", "2",
                                   "--save-model", str(model)]) == 0
    out = capsys.readouterr().out
    assert "training @ iter =  0" in out and "Optimization complete." in out
    assert "best validation error" in out and "test error" in out and "best iteration" in out
    assert "training images held as int8: 76,608 bytes (as float32: 306,432 bytes)" in out
    with np.load(model) as saved:
        assert sorted(saved.files) == [f"param{i}" for i in range(8)]
