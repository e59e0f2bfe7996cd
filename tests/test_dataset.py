"""SharedDataset / shared_dataset: storage, sizes, and where the cast happens."""

import numpy as np
import pytest

from int8store import STORAGES, ArgumentError, SharedDataset, shared_dataset
from int8store.backend import activate
from int8store.backend.ops.minibatch import Minibatch

lib, at = activate().lib, activate().at
Subtensor = activate().module("tensor.subtensor").Subtensor


def images_k256(n=12, width=6, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, width)).astype(np.float32) / np.float32(256)


def test_shared_dataset_returns_a_float_view_and_int32_labels():
    images = images_k256()
    x, y = shared_dataset((images, np.arange(12) % 3), dtype="float32")
    assert x.dtype == "float32"
    assert y.get_value(borrow=True).dtype == np.int32
    assert y.get_value(borrow=True).shape[0] == 12
    assert x.dataset.data.get_value(borrow=True).dtype == np.int8
    np.testing.assert_array_equal(lib.function([], x)(), images)


def test_labels_set_anew_are_the_splits_labels_and_must_be_one_an_example():
    """y.set_value changed the shared variable only: the split's labels,
    its digest (recorded in checkpoints) and its class count kept the old
    ones (review)."""
    x, y = shared_dataset((images_k256(), np.arange(12) % 3), dtype="float32")
    before = x.dataset.digest()
    y.set_value(np.full(12, 5.0))  # (integral floats, as archives give them)
    assert y.get_value().tolist() == [5] * 12 and y.get_value().dtype == np.int32
    assert x.dataset.labels.tolist() == [5] * 12 and x.dataset.digest() != before
    with pytest.raises(ArgumentError, match="3 labels for 12 examples"):
        y.set_value([1, 2, 3])
    with pytest.raises(ValueError, match="labels must be integers"):
        y.set_value(np.full(12, 0.5))
    assert x.dataset.labels.tolist() == [5] * 12


def test_int8_images_take_exactly_a_quarter_of_float32():
    images = images_k256(50, 28 * 28)
    int8 = SharedDataset.from_arrays(images, np.zeros(50), storage="int8", dtype="float32")
    float32 = SharedDataset.from_arrays(images, np.zeros(50), storage="float", dtype="float32")
    assert int8.nbytes == int8.int8_nbytes == 50 * 784
    assert float32.nbytes == float32.float32_nbytes == 4 * int8.nbytes
    assert int8.data.get_value(borrow=True).nbytes * 4 == float32.data.get_value(borrow=True).nbytes


@pytest.mark.parametrize("normalize", ["unit", "batch", "dataset", "none"])
def test_both_storages_give_identical_minibatches(normalize):
    images = images_k256(20, 5)
    index = at.lscalar()
    results = []
    for storage in STORAGES:
        ds = SharedDataset.from_arrays(images, np.arange(20), normalize=normalize, storage=storage,
                                       dtype="float32")
        batch_x, batch_y = ds.minibatch(index, 6)
        results.append(lib.function([index], [batch_x, batch_y])(2))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], np.arange(12, 18))


def test_batch_normalization_uses_the_minibatch_mean():
    levels = np.arange(40, dtype=np.uint8).reshape(8, 5) * 6
    ds = SharedDataset.from_arrays(levels, np.zeros(8), normalize="batch")
    index = at.lscalar()
    batch = lib.function([index], ds.minibatch(index, 4)[0])(1)
    rows = levels[4:8].astype(np.float64)
    np.testing.assert_allclose(batch, (rows - rows.mean()) / 128, atol=1e-6)


def test_slicing_the_view_like_the_classic_tutorial():
    images = images_k256()
    x, y = shared_dataset((images, np.zeros(12)))
    index = at.lscalar()
    f = lib.function([index], x[index * 5:(index + 1) * 5])
    np.testing.assert_array_equal(f(1), images[5:10])
    assert x.dtype == lib.config.floatX  # as the classic shared variable


def compiled_clients(function, variable):
    """The nodes of a compiled function's graph that read ``variable``."""
    fgraph = function.maker.fgraph
    stored = [v for v in fgraph.inputs if getattr(v, "name", None) == variable.name]
    assert len(stored) == 1, "the stored images are not an input of the compiled graph"
    return [node for node, _ in fgraph.clients[stored[0]] if node != "output"]


def assert_sliced_before_cast(function, dataset):
    """Every use of the int8 images is a slice that stays int8: no cast of the whole set."""
    clients = compiled_clients(function, dataset.data)
    assert clients, "the compiled function does not read the images"
    for node in clients:
        assert isinstance(node.op, (Subtensor, Minibatch)), f"{node} reads the whole int8 set"
        assert node.outputs[0].dtype == "int8"


@pytest.mark.parametrize("normalize", ["unit", "batch", "dataset"])
def test_compiled_training_step_slices_the_int8_images_before_any_cast(normalize):
    ds = SharedDataset.from_arrays(images_k256(30, 8), np.arange(30) % 2, normalize=normalize)
    index = at.lscalar()
    batch_x, batch_y = ds.minibatch(index, 10)
    w = lib.shared(np.zeros((8, 2), lib.config.floatX), name="w")
    cost = -at.mean(at.log(at.special.softmax(batch_x.dot(w), axis=-1))[at.arange(10), batch_y])
    train = lib.function([index], cost, updates=[(w, w - 0.1 * at.grad(cost, w))])
    train(1)
    assert_sliced_before_cast(train, ds)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("normalize", ["unit", "batch", "dataset", "none"])
def test_get_value_gives_what_the_view_computes(dtype, normalize):
    images = images_k256()
    x, _ = shared_dataset((images, np.zeros(12)), normalize=normalize, dtype=dtype)
    for borrow in (False, True):
        value = x.get_value(borrow=borrow)
        assert value.dtype == dtype and value.shape == (12, 6)
        np.testing.assert_allclose(value, lib.function([], x)(), rtol=1e-6, atol=1e-6)
    if normalize == "unit":  # the very values the classic shared variable held
        np.testing.assert_array_equal(x.get_value(), images.astype(dtype))
        assert x.get_value(borrow=True).shape[0] == 12  # the classic batch count


def test_counts_must_match_and_batch_sizes_must_be_positive():
    with pytest.raises(ArgumentError, match="12 images but 11 labels"):
        SharedDataset.from_arrays(images_k256(), np.zeros(11), name="train")
    ds = SharedDataset.from_arrays(images_k256(), np.zeros(12))
    assert ds.n_batches(5) == 2
    with pytest.raises(ArgumentError, match="positive integer"):
        ds.n_batches(0)
    with pytest.raises(ArgumentError, match="storage="):
        SharedDataset.from_arrays(images_k256(), np.zeros(12), storage="float16")
    assert STORAGES == ("int8", "float")


def test_a_split_smaller_than_a_minibatch_says_so_shuffled_too():
    """Shuffled, the refusal named what the caller never gives (a stride,
    the minibatches per epoch) instead of the split's rows (review)."""
    split = SharedDataset.from_arrays(np.zeros((5, 4), np.uint8), np.arange(5), name="valid")
    for held in (split, split.shuffle(1)):
        with pytest.raises(ArgumentError, match="valid_y: 5 rows cannot fill a minibatch of 10"):
            held.minibatch(at.lscalar(), 10)


def test_a_refused_walk_leaves_the_augmentations_epoch_as_it_was():
    split = SharedDataset.from_arrays(np.zeros((40, 4, 4), np.uint8), np.arange(40))
    split.augment("translate=1", seed=7)
    assert len(list(split.minibatches(2, 10))) == 4
    for start in (99, None, float("nan"), float("inf"), "1"):
        with pytest.raises(ArgumentError, match=f"cannot start at minibatch {start!r}"):
            split.minibatches(9, 10, start=start)
    assert int(split._epoch.get_value()) == 2  # (the epoch still being trained)


def test_image_shape_is_kept_while_the_images_are_stored_flat():
    ds = SharedDataset.from_arrays(np.zeros((3, 4, 5), np.uint8), np.zeros(3))
    assert ds.image_shape == (4, 5)
    assert ds.data.get_value(borrow=True).shape == (3, 20)


def test_the_inspection_catches_a_cast_of_the_whole_set():
    # Converting everything and slicing afterwards (batch mean over the whole
    # set) is the mistake the inspection exists to catch.
    from int8store import dequantize

    ds = SharedDataset.from_arrays(images_k256(30, 8), np.zeros(30), normalize="batch")
    index = at.lscalar()
    whole = dequantize(ds.data, ds.encoding, "batch")
    f = lib.function([index], whole[index * 10:(index + 1) * 10])
    with pytest.raises(AssertionError, match="reads the whole int8 set"):
        assert_sliced_before_cast(f, ds)


def test_c_mode_needs_no_jax_and_jax_mode_says_how_to_get_it(monkeypatch):
    import sys

    from int8store import MissingDependencyError, function_mode, place
    monkeypatch.setitem(sys.modules, "jax", None)  # as if JAX were not installed
    ds = SharedDataset.from_arrays(images_k256(), np.zeros(12))
    place(ds, "c")
    assert isinstance(ds.data.get_value(borrow=True), np.ndarray)
    with pytest.raises(MissingDependencyError, match=r"pip install 'int8store\[jax\]'"):
        place(ds, "jax")
    monkeypatch.setattr("int8store.backend.jax.mode._JAX_MODE", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'int8store\[jax\]'"):
        function_mode("jax")


def test_load_data_refuses_a_bad_option_before_reading_anything(tmp_path):
    from int8store import load_data

    missing = tmp_path / "never-read.npz"  # would raise DatasetNotFoundError if it were read
    for options, message in (({"normalize": "z-score"}, "normalize='z-score' is not one of unit"),
                             ({"storage": "float16"}, "storage='float16' is not one of int8, float"),
                             ({"mode": "cuda"}, "mode='cuda' is not one of c, jax")):
        with pytest.raises(ArgumentError, match=message):
            load_data(missing, **options)


def test_a_floatx_the_views_cannot_follow_is_named_as_floatx(monkeypatch):
    """floatX=float16 was refused as "dtype=None", an argument the user
    never gave (user trial)."""
    monkeypatch.setattr(lib.config, "floatX", "float16")
    with pytest.raises(ArgumentError, match=r"^floatX=float16 \((pytensor|aesara)'s, which the "
                                            r"float views follow without dtype=\): int8store's "
                                            r"float views are float32 or float64$"):
        shared_dataset((images_k256(), np.arange(12) % 3))
    with pytest.raises(ArgumentError, match=r"^dtype='float16': "):
        shared_dataset((images_k256(), np.arange(12) % 3), dtype="float16")


def test_an_index_check_on_rows_fewer_than_a_minibatch_says_so():
    # (where the graph does not know the rows: "is outside 0..-1" was said)
    from int8store import MinibatchIndexError
    from int8store.backend.ops.minibatch import check_index

    with pytest.raises(MinibatchIndexError, match=r"^shard_x: its 5 rows cannot fill a minibatch "
                                                  r"of 8: use a batch size of 5 or less$"):
        check_index(0, 8, 5, "shard_x")
