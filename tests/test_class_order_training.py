"""The newcomer's trial, small: a folder of class folders converted with the
defaults trains the logistic tutorial as well as a copy of the same images
shuffled beforehand (within the spread of seeds), on the C backend and in
JAX mode; kept in its order (``--keep-order``), it trains far worse, and
loading it says so."""

import subprocess
import sys

import numpy as np
import pytest

import logistic_sgd
from archives import write_image_folder
from int8store.converter import convert

pytestmark = pytest.mark.floatx_blind

SEEDS = (0, 1, 2)
needs_jax = pytest.mark.skipif(
    subprocess.run([sys.executable, "-c", "import jax"], capture_output=True).returncode != 0,
    reason="JAX is not installed in this environment")


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """``{"sorted": [a store of the folders, converted with each seed], "shuffled":
    [the same images shuffled beforehand, an .npz converted, one per seed],
    "kept": a store of the folders in their order}``: the digits (x15: 8-bit
    grey levels 0..240) as train/CLASS/*.png and test/CLASS/*.png."""
    from sklearn.datasets import load_digits

    root = tmp_path_factory.mktemp("digit-folders")
    digits = load_digits()
    images, labels = (digits.images * 15).astype(np.uint8), digits.target
    order = np.random.default_rng(0).permutation(len(labels))
    test, train = order[:300], order[300:]
    for split, rows in (("train", train), ("test", test)):
        write_image_folder(root / "folders" / split, images[rows], labels[rows])
    made = {"sorted": [convert(root / "folders", root / f"sorted{seed}.h5", valid_seed=seed)
                       for seed in SEEDS],
            "kept": convert(root / "folders", root / "kept.h5", keep_order=True),
            "shuffled": []}
    for seed in SEEDS:
        rng = np.random.default_rng(100 + seed)
        here, there = rng.permutation(train), rng.permutation(test)
        np.savez(root / f"shuffled{seed}.npz", x_train=images[here], y_train=labels[here],
                 x_test=images[there], y_test=labels[there])
        made["shuffled"].append(convert(root / f"shuffled{seed}.npz", root / f"shuffled{seed}.h5",
                                        valid_seed=seed))
    return made


def test_error(store, mode):
    """The logistic tutorial's test error on ``store``: 5 epochs, minibatches of 20."""
    result = logistic_sgd.sgd_optimization_mnist(dataset=str(store), n_epochs=5, batch_size=20,
                                                 model_path=None, mode=mode)
    return result["test_score"]


test_error.__test__ = False  # (a helper, not a test)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["c", pytest.param("jax", marks=needs_jax)])
def test_a_class_folder_trains_as_well_as_a_shuffled_copy_of_it(stores, mode, capsys):
    from_folders = np.array([test_error(store, mode) for store in stores["sorted"]])
    from_shuffled = np.array([test_error(store, mode) for store in stores["shuffled"]])
    spread = max(np.ptp(from_folders), np.ptp(from_shuffled), 1 / 300)  # (one test example)
    assert abs(from_folders.mean() - from_shuffled.mean()) <= spread, (from_folders, from_shuffled)
    assert from_shuffled.max() < 0.15  # (the digits are easy: about 7 %)
    assert "sorted by class" not in capsys.readouterr().err
    # In the folders' order, each minibatch is one class: far worse, and said.
    kept = test_error(stores["kept"], mode)
    assert kept > from_shuffled.max() + 5 * spread, (kept, from_shuffled)
    err = capsys.readouterr().err
    assert f"split 'train' of {stores['kept']} is sorted by class" in err
    assert "convert the source again without keep_order" in err  # (a store keeps its order)
