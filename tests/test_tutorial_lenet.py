"""The LeNet5 tutorial: compiles on the CPU, trains on digits, slices before the cast."""

import pytest

import convolutional_mlp
from test_dataset import assert_sliced_before_cast


def test_geometry_is_the_classic_one_on_28x28_and_smaller_on_8x8():
    assert convolutional_mlp.lenet5_geometry((28, 28)) == (1, [((5, 5), (12, 12)), ((5, 5), (4, 4))])
    assert convolutional_mlp.lenet5_geometry((8, 8)) == (1, [((3, 3), (3, 3)), ((2, 2), (1, 1))])
    assert convolutional_mlp.lenet5_geometry((16, 12, 3))[0] == 3


@pytest.mark.slow
def test_lenet5_learns_on_digits_and_slices_before_the_cast(tmp_path):
    # A larger step than the tutorial's 0.1 learns in a quarter of the epochs
    # (and of the suite's time): 5.7 % test error after 15.
    result = convolutional_mlp.evaluate_lenet5(dataset="digits", n_epochs=15, batch_size=100,
                                               learning_rate=0.3, model_path=tmp_path / "lenet.npz")
    assert result["test_score"] < 0.2  # chance is 90 %
    assert len(result["params"]) == 8
    assert_sliced_before_cast(result["train_model"].function, result["datasets"][0])
    assert (tmp_path / "lenet.npz").exists()


@pytest.mark.slow
def test_cli_on_digits_for_two_epochs(capsys):
    assert convolutional_mlp.main(["--dataset", "digits", "--epochs", "2"]) == 0
    out = capsys.readouterr().out
    assert "training @ iter =  0" in out and "Optimization complete." in out
    assert "best validation error" in out and "test error" in out and "best iteration" in out
    assert "train      1197  8x8        76,608        306,432          0.25  int8" in out
