"""JAX mode on the CPU: data placed once, the minibatch op, and the tutorials
reaching the same results as with the C backend."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import convolutional_mlp  # noqa: E402
import logistic_sgd  # noqa: E402
from int8store import SharedDataset, function_mode, keep_on_device, load_splits  # noqa: E402
from int8store.backend import aesara, at, shared  # noqa: E402
from int8store.minibatch import MinibatchIndexError, minibatch  # noqa: E402


def test_images_stay_on_the_device_as_the_same_array_across_steps():
    splits = load_splits("digits", mode="jax")
    train = splits["train"]
    images, labels = train.data.get_value(borrow=True), train.y.get_value(borrow=True)
    assert isinstance(images, jax.Array) and images.dtype == np.int8
    assert images.devices() == {jax.devices()[0]}
    classifier, train_model, _, _ = logistic_sgd.build_model(splits, 300, 0.13, mode="jax")
    for step in range(6):
        train_model(step % 3)
    assert train.data.get_value(borrow=True) is images  # never re-uploaded
    assert train.y.get_value(borrow=True) is labels
    assert train.nbytes * 4 == train.float32_nbytes


def test_parameters_kept_on_the_device_stay_there():
    splits = load_splits("digits", mode="jax")
    classifier, train_model, validate, test = logistic_sgd.build_model(splits, 300, 0.13, mode="jax")
    keep_on_device(classifier.params, [train_model, validate, test])
    for step in range(3):
        train_model(step)
    assert isinstance(classifier.W.get_value(borrow=True), jax.Array)
    assert np.abs(np.asarray(classifier.W.get_value())).sum() > 0


def test_the_same_dataset_moves_between_backends():
    ds = SharedDataset.from_arrays(np.arange(24, dtype=np.uint8).reshape(6, 4), np.arange(6),
                                   mode="jax")
    assert ds.device != "host"
    ds.place("c")
    assert isinstance(ds.data.get_value(borrow=True), np.ndarray) and ds.device == "host"
    index = at.lscalar()
    batch = aesara.function([index], ds.minibatch(index, 2)[0])(2)
    np.testing.assert_array_equal(batch, np.arange(16, 24).reshape(2, 4) / 256)


@pytest.mark.parametrize("mode", ["c", "jax"])
def test_minibatch_rows_and_out_of_range_index(mode):
    data = shared(np.arange(30, dtype=np.int8).reshape(10, 3), name="rows")
    if mode == "jax":
        from int8store.device import to_device
        to_device(data)
    index = at.lscalar()
    f = aesara.function([index], minibatch(data, index, 3) * 1, mode=function_mode(mode))
    np.testing.assert_array_equal(f(0), np.arange(9).reshape(3, 3))
    np.testing.assert_array_equal(f(2), np.arange(18, 27).reshape(3, 3))  # the last whole one
    for bad in (3, -1):
        with pytest.raises(MinibatchIndexError, match=rf"rows: minibatch index {bad} is outside 0\.\.2"):
            f(bad)


def test_aesaras_plain_jax_mode_is_refused_for_minibatches():
    data = shared(np.zeros((4, 2), np.int8), name="d")
    index = at.lscalar()
    with pytest.raises(NotImplementedError, match="int8store's JAX mode"):
        aesara.function([index], minibatch(data, index, 2) * 1, mode="JAX")


@pytest.mark.slow
def test_logistic_tutorial_in_jax_mode_matches_c_mode(tmp_path):
    runs = {mode: logistic_sgd.sgd_optimization_mnist(dataset="digits", n_epochs=60, mode=mode,
                                                      model_path=tmp_path / f"{mode}.npz")
            for mode in ("c", "jax")}
    assert runs["jax"]["best_validation_loss"] == runs["c"]["best_validation_loss"]
    assert runs["jax"]["test_score"] == runs["c"]["test_score"]
    for name in ("W", "b"):
        np.testing.assert_allclose(runs["jax"]["params"][name], runs["c"]["params"][name],
                                   rtol=0, atol=1e-4)


@pytest.mark.slow
def test_lenet5_tutorial_in_jax_mode_matches_c_mode():
    runs = {mode: convolutional_mlp.evaluate_lenet5(dataset="digits", n_epochs=12, mode=mode)
            for mode in ("c", "jax")}
    assert runs["jax"]["best_validation_loss"] == runs["c"]["best_validation_loss"]
    assert runs["jax"]["test_score"] == runs["c"]["test_score"]
    assert runs["jax"]["best_iter"] == runs["c"]["best_iter"]
    for jax_param, c_param in zip(runs["jax"]["params"], runs["c"]["params"]):
        np.testing.assert_allclose(jax_param, c_param, rtol=0, atol=1e-4)
