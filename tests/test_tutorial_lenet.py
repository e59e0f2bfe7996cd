"""The LeNet5 tutorial: compiles on the CPU, trains on digits, slices before the cast."""

import numpy as np
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


def test_geometry_takes_every_image_of_five_pixels_a_side_or_more():
    for rows in range(5, 41):
        for cols in (5, 6, 7, rows):
            convolutional_mlp.lenet5_geometry((rows, cols))


@pytest.mark.parametrize("shape, size", [((4, 4), "images of 4x4 pixels"),
                                         ((4, 9), "images of 4x9 pixels"),
                                         ((64,), "images of 64 values, not rows and columns")],
                         ids=["4x4", "4x9", "flat"])
def test_images_too_small_for_lenet5_are_refused_in_a_line(tmp_path, capsys, shape, size):
    rng = np.random.RandomState(0)
    split = lambda n: rng.randint(0, 256, (n,) + shape).astype(np.uint8)
    np.savez(tmp_path / "small.npz", x_train=split(60), y_train=rng.randint(0, 3, 60),
             x_test=split(20), y_test=rng.randint(0, 3, 20))
    status = convolutional_mlp.main(["--dataset", str(tmp_path / "small.npz"), "--epochs", "1",
                                     "--batch-size", "10"])
    assert status == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'small.npz'}: {size}; LeNet5's two convolution and 2x2 pooling "
        "layers take images of 5x5 pixels or more: use larger images, or a model of any size "
        "(logistic_sgd.py, mlp.py)\n")
