"""One road from a source to its final splits, for load_data and convert alike;
where a bare file name is looked for; the MNIST cache accepting a repackaged
copy of the classic file by its arrays."""

import gzip
import importlib.util
import pickle
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from archives import fake_mnist, python2_pickle, write_mnist_idx_folder
from int8store import (ArgumentError, DatasetNotFoundError, EncodingError, SourceFormatError,
                       convert, load_splits, open_store, plan_splits)
from int8store.cli import main
from int8store.sources import read_source
from int8store.store.writer import StoreWriter
from int8store.sources import mnist as mnist_cache


def store_pixels(path, split):
    store = open_store(path)
    codes, labels = store.read_split(split)
    return store.encoding.levels(codes).reshape(len(codes), -1), labels


def loaded_pixels(splits, split):
    ds = splits[split]
    return ds.encoding.levels(ds.data.get_value(borrow=True)), ds.y.get_value(borrow=True)


@pytest.mark.parametrize("options", [{}, {"valid_size": 7}, {"valid_size": 0.25},
                                     {"valid_size": 5, "valid_seed": 3}, {"valid_seed": 11}])
def test_load_data_and_convert_choose_the_same_validation_examples(tmp_path, options):
    folder = write_mnist_idx_folder(tmp_path / "idx", fake_mnist(n_train=30, n_test=6, side=5))
    out = tmp_path / "s.h5"
    convert(folder, out, **options)
    loaded = load_splits(folder, **options)
    for split in ("train", "valid", "test"):
        for from_store, from_load in zip(store_pixels(out, split), loaded_pixels(loaded, split)):
            np.testing.assert_array_equal(from_store, from_load)
    # and loading the store gives those splits again, as they are
    again = load_splits(out)
    for split in ("train", "valid", "test"):
        np.testing.assert_array_equal(loaded_pixels(again, split)[0], loaded_pixels(loaded, split)[0])


def test_the_default_validation_split_is_the_last_sixth_of_train(tmp_path):
    data = fake_mnist(n_train=36, n_test=6)
    plan = plan_splits(read_source(write_mnist_idx_folder(tmp_path / "idx", data)))
    assert list(plan.splits) == ["train", "valid", "test"]
    np.testing.assert_array_equal(plan.splits["valid"].labels, data["train"][1][30:])
    np.testing.assert_array_equal(plan.splits["train"].labels, data["train"][1][:30])


def test_a_few_training_examples_still_give_a_validation_example_or_a_clear_refusal(tmp_path):
    # Fewer than six training examples made an empty validation split: convert
    # wrote it without a word, and load_data then failed in numpy's reshape.
    for n_train, counts in ((5, [4, 1, 2]), (2, [1, 1, 2])):
        data = fake_mnist(n_train=n_train, n_test=2, side=3)
        folder = write_mnist_idx_folder(tmp_path / f"idx{n_train}", data)
        convert(folder, tmp_path / f"s{n_train}.h5")
        assert list(open_store(tmp_path / f"s{n_train}.h5").splits.values()) == counts
        assert [len(s.y.get_value()) for s in load_splits(folder).values()] == counts
    folder = write_mnist_idx_folder(tmp_path / "idx1", fake_mnist(n_train=1, n_test=2, side=3))
    for call in (lambda: load_splits(folder), lambda: convert(folder, tmp_path / "s1.h5")):
        with pytest.raises(SourceFormatError, match="1 training example: too few to draw a "
                                                    "validation split from; at least 2"):
            call()
    assert not (tmp_path / "s1.h5").exists()


def test_an_empty_split_is_refused_by_name_from_a_source_or_an_old_store(tmp_path):
    path = tmp_path / "empty_test.npz"
    np.savez(path, x_train=np.zeros((12, 2, 2), np.uint8), y_train=np.arange(12) % 2,
             x_test=np.zeros((0, 2, 2), np.uint8), y_test=np.zeros(0, np.int64))
    for call in (lambda: load_splits(path), lambda: convert(path, tmp_path / "out.h5")):
        with pytest.raises(SourceFormatError, match=f"{path}: split 'test' holds no examples; "
                                                    "every split needs at least one"):
            call()
    assert not (tmp_path / "out.h5").exists()
    # A store an earlier release wrote with an empty validation split (as from
    # five training examples), read in every way load_data can hold it.
    plan = plan_splits(read_source(write_mnist_idx_folder(
        tmp_path / "idx", fake_mnist(n_train=12, n_test=2, side=3))))
    store = tmp_path / "old.h5"
    codes = {name: plan.codes(name).reshape(-1, *plan.image_shape) for name in ("train", "test")}
    labels = {"train": plan.labels("train"), "valid": np.zeros(0, np.int32),
              "test": plan.labels("test")}
    with StoreWriter(store, plan.encoding, plan.image_shape, labels) as writer:
        for name in ("train", "valid", "test"):
            writer.append(name, codes.get(name, np.zeros((0, *plan.image_shape), np.int8)))
    assert open_store(store).splits["valid"] == 0
    ways = [{}] + ([{"max_device_bytes": 64, "mode": "jax"}] if importlib.util.find_spec("jax")
                   else [])
    for options in ways:
        with pytest.raises(SourceFormatError, match="split 'valid' holds no examples"):
            load_splits(store, **options)


def test_float16_k_over_255_is_kept_by_codebook_through_load_data(tmp_path):
    values = (np.arange(256) / 255).astype(np.float16).reshape(4, 8, 8)
    path = tmp_path / "half.npz"
    np.savez(path, x_train=np.concatenate([values] * 6), y_train=np.arange(24) % 2,
             x_test=values, y_test=np.arange(4) % 2)
    test_x = load_splits(path, dtype="float32")["test"].x
    np.testing.assert_array_equal(test_x.get_value(), values.reshape(4, -1).astype(np.float32))


def test_validation_options_are_refused_for_a_source_that_has_a_validation_split(tmp_path):
    path = tmp_path / "three.npz"
    arrays = {f"x_{s}": np.zeros((4, 2, 2), np.uint8) for s in ("train", "valid", "test")}
    arrays.update({f"y_{s}": np.zeros(4, np.int64) for s in ("train", "valid", "test")})
    np.savez(path, **arrays)
    for options in ({"valid_size": 2}, {"valid_seed": 1}):
        with pytest.raises(ArgumentError, match="already has a validation split"):
            load_splits(path, **options)
        with pytest.raises(ArgumentError, match="already has a validation split"):
            convert(path, tmp_path / "out.h5", **options)
    assert not (tmp_path / "out.h5").exists()


def scan_like(path, seed=0):
    """Floats with far more than 256 distinct values: not storable exactly."""
    rng = np.random.default_rng(seed)
    np.savez(path, x_train=rng.normal(size=(24, 3, 3)), y_train=np.arange(24) % 2,
             x_test=rng.normal(size=(6, 3, 3)), y_test=np.arange(6) % 2)
    return path


def test_convert_lossy_quantizes_and_reports_the_largest_error(tmp_path, capsys):
    source = scan_like(tmp_path / "scan.npz")
    status = main(["convert", str(source), "-o", str(tmp_path / "exact.h5")])
    err = capsys.readouterr().err
    assert status == 2 and "cannot be stored losslessly" in err and "--lossy" in err
    assert "270 distinct values" in err
    assert not (tmp_path / "exact.h5").exists()
    assert main(["convert", str(source), "-o", str(tmp_path / "lossy.h5"), "--lossy"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"codebook of 256 values, \S+ to \S+, lossy \(max error", out)
    store = open_store(tmp_path / "lossy.h5")
    with np.load(source) as arrays:
        values = np.concatenate([arrays["x_train"].ravel(), arrays["x_test"].ravel()])
    step = (values.max() - values.min()) / 255  # 256 levels over the range of every split
    assert 0 < store.encoding.max_error <= step / 2 + 1e-12
    # load_data takes the same option, and chooses the same encoding
    splits = load_splits(source, lossy=True)
    np.testing.assert_array_equal(splits["train"].encoding.codebook, store.encoding.codebook)
    with pytest.raises(EncodingError, match="lossy=True"):
        load_splits(source)


# -- where a bare file name is looked for ------------------------------------------

def classic_pickle(path, offset=0):
    data = fake_mnist(n_train=12, n_test=6, side=4, seed=offset)
    content = tuple(((images.reshape(len(images), -1) / 256).astype(np.float32), labels.astype(np.int64))
                    for images, labels in (data["train"], data["train"], data["test"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(python2_pickle(content)))
    return content


def test_a_bare_name_is_looked_for_in_the_working_folder_then_in_data_beside_the_caller(
        tmp_path, monkeypatch):
    caller = tmp_path / "code" / "tutorial.py"
    beside = classic_pickle(tmp_path / "data" / "mnist.pkl.gz", offset=1)
    monkeypatch.chdir(tmp_path)
    source = read_source("mnist.pkl.gz", caller=caller)
    assert source.origin == str(tmp_path / "data" / "mnist.pkl.gz")
    np.testing.assert_array_equal(source.splits["test"].labels, beside[2][1])
    here = classic_pickle(tmp_path / "mnist.pkl.gz", offset=2)  # the classic took this first
    source = read_source("mnist.pkl.gz", caller=caller)
    assert source.origin == "mnist.pkl.gz"
    np.testing.assert_array_equal(source.splits["test"].labels, here[2][1])


def test_a_bare_name_is_looked_for_beside_logistic_sgd_as_the_classic_did(tmp_path, monkeypatch):
    # The classic load_data looked beside its own file, logistic_sgd.py: a
    # script elsewhere (or a notebook) importing it read the tutorials' data.
    import types

    classic = types.ModuleType("logistic_sgd")
    classic.__file__ = str(tmp_path / "code" / "logistic_sgd.py")
    monkeypatch.setitem(sys.modules, "logistic_sgd", classic)
    beside = classic_pickle(tmp_path / "data" / "mnist.pkl.gz", offset=1)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    source = read_source("mnist.pkl.gz", caller=tmp_path / "a" / "b" / "script.py")
    assert source.origin == str(tmp_path / "data" / "mnist.pkl.gz")
    np.testing.assert_array_equal(source.splits["test"].labels, beside[2][1])


def test_a_bare_name_is_looked_for_beside_a_linked_tutorial_not_its_target(tmp_path,
                                                                            monkeypatch):
    (tmp_path / "repo" / "code").mkdir(parents=True)
    (tmp_path / "repo" / "code" / "dA.py").write_text("")
    (tmp_path / "workspace" / "code").mkdir(parents=True)
    (tmp_path / "workspace" / "code" / "dA.py").symlink_to(tmp_path / "repo" / "code" / "dA.py")
    beside = classic_pickle(tmp_path / "workspace" / "data" / "scans.pkl.gz", offset=1)
    monkeypatch.delitem(sys.modules, "logistic_sgd", raising=False)
    monkeypatch.chdir(tmp_path)
    source = read_source("scans.pkl.gz", caller=tmp_path / "workspace" / "code" / "dA.py")
    assert source.origin == str(tmp_path / "workspace" / "data" / "scans.pkl.gz")
    np.testing.assert_array_equal(source.splits["test"].labels, beside[2][1])


def test_a_tutorial_run_from_below_its_folder_finds_data_beside_it(tmp_path, monkeypatch):
    """python ../tutorial.py from code/sub: Python names the file
    code/sub/../tutorial.py, and the classic's dirname/../data is data/."""
    (tmp_path / "code" / "sub").mkdir(parents=True)
    beside = classic_pickle(tmp_path / "data" / "mnist.pkl.gz", offset=1)
    monkeypatch.delitem(sys.modules, "logistic_sgd", raising=False)
    monkeypatch.chdir(tmp_path / "code" / "sub")
    for caller in (tmp_path / "code" / "sub" / ".." / "tutorial.py", Path("../tutorial.py")):
        source = read_source("mnist.pkl.gz", caller=caller)
        assert source.origin == str(tmp_path / "data" / "mnist.pkl.gz")
        np.testing.assert_array_equal(source.splits["test"].labels, beside[2][1])


def test_a_missing_file_names_every_place_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "logistic_sgd", raising=False)
    with pytest.raises(DatasetNotFoundError) as error:
        read_source("scans.npz", caller=tmp_path / "code" / "tutorial.py")
    assert f"scans.npz or {tmp_path / 'data' / 'scans.npz'}: no such file" in str(error.value)


def test_a_missing_mnist_pickle_falls_back_to_the_cache_offline(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INT8STORE_OFFLINE", "1")
    with pytest.raises(DatasetNotFoundError, match="MNIST is not in the cache folder"):
        read_source("mnist.pkl.gz", cache_dir=tmp_path / "cache", caller=tmp_path / "x.py")


# -- the cache accepts the classic arrays in other pickle bytes ------------------------

def digests(content):
    return {name: (mnist_cache._digest(x, "<f4"), mnist_cache._digest(y, "<i8"))
            for name, (x, y) in zip(("train", "valid", "test"), content)}


def test_a_repackaged_copy_of_the_classic_arrays_is_accepted_by_content(tmp_path, monkeypatch):
    folder = tmp_path / "cache" / "mnist"
    content = classic_pickle(folder / "mnist.pkl.gz")
    monkeypatch.setattr(mnist_cache, "MNIST_PICKLE_ARRAYS", digests(content))
    # the same arrays, pickled by Python 3 (other bytes, another md5)
    with gzip.open(folder / "mnist.pkl.gz", "wb") as f:
        pickle.dump(content, f, protocol=4)
    source = mnist_cache.read_mnist(tmp_path / "cache")
    np.testing.assert_array_equal(source.splits["train"].images(), content[0][0])
    # other arrays are refused, with what to do
    other = classic_pickle(folder / "mnist.pkl.gz", offset=5)
    assert not np.array_equal(other[0][0], content[0][0])
    with pytest.raises(SourceFormatError, match="split 'train' differs.*delete it to download"):
        mnist_cache.read_mnist(tmp_path / "cache")


def test_devices_and_streaming_together_are_refused_naming_both_options(tmp_path):
    store = convert(write_mnist_idx_folder(tmp_path / "idx", fake_mnist()), tmp_path / "s.h5")
    # (it said "devices= and streaming", naming neither option a tutorial takes)
    with pytest.raises(ArgumentError, match=r"devices=2 \(--devices\) and streaming, asked by "
                                            r"max_device_bytes \(--max-device-bytes\), together"):
        load_splits(store, mode="jax", devices=2, max_device_bytes=4096)
    with pytest.raises(ArgumentError, match=r"devices=2 \(--devices\) and streaming, asked by "
                                            r"residency='streamed', together"):
        load_splits(store, mode="jax", devices=2, residency="streamed")


def test_a_float_copy_and_streaming_together_are_refused_saying_why_it_streams(tmp_path):
    """storage="float" streamed int8 codes without a word (review)."""
    store = convert(write_mnist_idx_folder(tmp_path / "idx", fake_mnist()), tmp_path / "s.h5")
    with pytest.raises(ArgumentError, match=r"storage='float' and streaming, asked by "
                                            r"max_device_bytes \(--max-device-bytes\), together"):
        load_splits(store, storage="float", max_device_bytes=4096)
    with pytest.raises(ArgumentError, match=r"storage='float' and streaming, as the store is "
                                            r"larger than max_memory \(300 bytes\), together"):
        load_splits(store, storage="float", max_memory=300)  # (the store: 360 bytes)
    assert load_splits(store, storage="float")["train"].storage == "float"  # (held whole)


def test_float_splits_released_as_encoded_get_their_floats_back_for_the_next_candidate():
    # The smallest splits (all zeros: k/256 and k/255 alike) are encoded under
    # 256 and released before train (k/255, not k/256) refuses 256: they are
    # decoded back, and all three encoded under 255, as before.
    from int8store.sources import SourceData, Split

    rng = np.random.default_rng(0)
    train = (rng.integers(0, 256, size=(40, 6)).astype(np.float32) / np.float32(255))
    zeros = np.zeros((5, 6), np.float32)
    labels = lambda n: np.arange(n) % 3  # noqa: E731
    arrays = {"train": train, "valid": zeros.copy(), "test": zeros.copy()}
    source = SourceData({name: Split.from_arrays(name, images, labels(len(images)), "mem")
                         for name, images in arrays.items()}, origin="mem", keeps_order=True)
    plan = plan_splits(source)
    assert plan.encoding.divisor == 255
    for name, images in arrays.items():
        codes = plan.codes(name)
        assert (plan.encoding.decode(codes, np.float32) == images).all()


def test_uint8_images_read_from_a_file_are_encoded_in_place():
    from int8store.codes.encoding import Encoding, encode

    pixels = np.arange(256, dtype=np.uint8)
    kept = pixels.copy()
    assert (encode(kept, Encoding(128, 256)) == (pixels.astype(np.int16) - 128)).all()
    assert (kept == pixels).all()  # not the caller's array, unless it gives it up
    codes = encode(kept, Encoding(128, 256), overwrite=True)
    assert np.shares_memory(codes, kept) and (codes == pixels.astype(np.int16) - 128).all()
