"""What the Python API makes of the inputs a user may hand it directly: a
clear refusal naming the argument (never a traceback from numpy or
pathlib), or the values as numpy has them."""

import re

import numpy as np
import pytest

from int8store import (ArgumentError, SharedDataset, StoreFormatError, load_splits, open_store,
                       quantize, tensor_library)
from int8store.training import evaluate_in_chunks, load_parameters, save_checkpoint


def test_boolean_images_are_the_values_0_and_1_everywhere(tmp_path):
    # (quantize took True as level 1, 1/256 under "unit"; an .npz of them was refused)
    from int8store import convert

    images = (np.arange(12 * 6).reshape(12, 2, 3) % 3 == 0)
    codes, encoding = quantize(images)
    assert (encoding.decode(codes, np.float64) == images).all()
    split = SharedDataset.from_arrays(images, np.arange(12) % 2, dtype="float32")
    assert (split.x.get_value() == images.reshape(12, -1)).all()
    np.savez(tmp_path / "bool.npz", x_train=images, y_train=np.arange(12) % 2,
             x_test=images[:4], y_test=np.arange(4) % 2)
    convert(tmp_path / "bool.npz", tmp_path / "bool.h5", keep_order=True)
    import gzip
    import pickle

    flat, labels = images.reshape(12, -1), (np.arange(12) % 2).astype(np.int64)
    with gzip.open(tmp_path / "bool.pkl.gz", "wb") as classic:  # (as_images refused it)
        pickle.dump(((flat, labels), (flat[:4], labels[:4]), (flat[:4], labels[:4])), classic,
                    protocol=2)
    assert (load_splits(tmp_path / "bool.pkl.gz")["test"].x.get_value() == flat[:4]).all()
    for source in ("bool.npz", "bool.h5"):
        held = load_splits(tmp_path / source, keep_order=True)
        assert set(np.unique(held["train"].x.get_value())) == {0.0, 1.0}
        assert (held["test"].x.get_value() == images[:4].reshape(4, -1)).all()


def test_a_split_of_no_examples_is_refused_by_name():
    with pytest.raises(ArgumentError, match=r"train: no examples \(codes of shape \(0, 4\)\)"):
        SharedDataset.from_arrays(np.zeros((0, 4), np.uint8), [], name="train")


def test_a_missing_store_is_a_file_not_found_and_a_folder_is_named_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="no_such.h5: no such store"):
        open_store(tmp_path / "no_such.h5")
    with pytest.raises(StoreFormatError, match=r"a folder, not an int8store file; "
                                               r"convert a folder"):
        open_store(tmp_path)


@pytest.mark.parametrize("dataset", [None, 42, b"mnist.pkl.gz", ""])
def test_a_dataset_that_names_nothing_is_refused(dataset):
    # (None was a TypeError from pathlib; "" read the working folder as class folders)
    with pytest.raises(ArgumentError, match=r"dataset=.*: expected 'digits', 'mnist', 'cifar10', "
                                            "or the path of a file or folder"):
        load_splits(dataset)


def test_an_array_given_as_the_dataset_is_named_by_its_shape_not_its_repr():
    # (the message was numpy's repr of the array: for MNIST's images, 15 lines)
    from int8store import load_data

    with pytest.raises(ArgumentError) as refused:
        load_data(np.zeros((50_000, 784), np.float32))
    message = str(refused.value)
    assert "\n" not in message and len(message) < 300, message
    assert message.startswith("dataset: an array of shape (50000, 784) and dtype float32")
    assert "shared_dataset((images, labels))" in message


def test_evaluate_in_chunks_refuses_a_count_that_is_no_integer():
    with pytest.raises(ArgumentError, match=r"n_examples=7.0: expected a count of examples"):
        evaluate_in_chunks(lambda start: np.zeros(3), 7.0, 3)
    assert evaluate_in_chunks(lambda start: np.ones(3), 7, 3) == (1.0, 7)


def test_parameters_without_names_are_asked_for_keys(tmp_path):
    path = save_checkpoint(tmp_path / "model", w=np.arange(3.0))
    unnamed = tensor_library().shared(np.zeros(3))
    with pytest.raises(ArgumentError, match=r"parameter 0 of the model has no name to find its "
                                            r"array by: name it .* or give keys="):
        load_parameters(path, [unnamed])
    load_parameters(path, [unnamed], keys=["w"])
    assert (unnamed.get_value() == np.arange(3.0)).all()


def test_preview_takes_numpy_integers(tmp_path):
    from int8store.preview import preview

    shown = preview("digits", tmp_path / "grid.png", count=np.int64(2), scale=np.int32(1))
    assert shown.count == 2 and (tmp_path / "grid.png").exists()


def test_the_float_view_takes_get_values_arguments_and_refuses_set_value():
    split = SharedDataset.from_arrays(np.arange(24, dtype=np.uint8).reshape(6, 4),
                                      np.arange(6) % 2, name="train", dtype="float32")
    held = split.x.get_value(borrow=True, return_internal_type=True)  # (a TypeError)
    assert (held == np.arange(24).reshape(6, 4) / np.float32(256)).all()
    with pytest.raises(ArgumentError, match=r"train: x is a float view of int8 codes, not a "
                                            r"shared variable: its values cannot be set"):
        split.x.set_value(held)  # (an AttributeError)


def test_a_data_set_name_that_is_also_a_folder_here_is_refused_as_ambiguous(tmp_path,
                                                                           monkeypatch):
    # ('digits' read scikit-learn's digits beside a user's ./digits folder of images)
    from archives import write_image_folder

    monkeypatch.chdir(tmp_path)
    write_image_folder(tmp_path / "digits", np.zeros((6, 3, 3), np.uint8), [0, 1] * 3)
    with pytest.raises(ArgumentError, match=r"'digits' names int8store's own digits data set, "
                                            r"and ./digits exists here too: give ./digits"):
        load_splits("digits")
    assert load_splits("./digits")["train"].image_shape == (3, 3)
    monkeypatch.setenv("INT8STORE_DATA", str(tmp_path))  # the cache's own folder is no clash
    (tmp_path / "mnist").mkdir()
    from int8store.sources import _check_not_shadowing
    _check_not_shadowing("mnist", None)


def test_plan_splits_refuses_a_path_in_its_own_words():
    from int8store import plan_splits

    with pytest.raises(ArgumentError, match=r"source='digits16': expected what a reader gives"):
        plan_splits("digits16")  # (an AttributeError: 'str' object has no attribute 'splits')


def test_the_public_names_examples_run_as_a_user_would_paste_them(tmp_path, monkeypatch):
    """Each example in the docstring of a name in ``int8store.__all__`` runs
    with only ``from int8store import *`` done first, as a user would paste
    it (the doctests of the modules run with the module's own names)."""
    import doctest

    import int8store

    monkeypatch.chdir(tmp_path)  # (examples that write files write here)
    finder, runner = doctest.DocTestFinder(recurse=False), doctest.DocTestRunner(
        optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    ran = []
    for name in int8store.__all__:
        public = getattr(int8store, name)
        for test in finder.find(public, name, globs={}):
            if not test.examples:
                continue
            exec("from int8store import *", test.globs)
            result = runner.run(test, out=lambda text: None)
            assert result.failed == 0, f"{name}'s example failed as pasted"
            ran.append(name)
    assert {"load_data", "StreamingSplit", "quantize"} <= set(ran)


def test_images_far_from_pixel_scale_are_said_once_and_pixels_are_not(tmp_path, capsys):
    # (uint16 levels and floats 0..255 were kept as given and trained at chance, silently)
    from int8store import convert

    rng = np.random.default_rng(0)
    levels = rng.integers(0, 256, (30, 4, 4))
    labels = np.arange(30) % 3
    for name, images in (("u16", levels * 257), ("f255", levels.astype(np.float32)),
                         ("u8", levels.astype(np.uint8)), ("unit", levels / 255)):
        np.savez(tmp_path / f"{name}.npz", x_train=images, y_train=labels)
        # (only "unit" keeps a codebook's values; the others scale them to about [-1, 1])
        for normalize, storage in (("unit", "int8"), ("unit", "float"), ("standard", "int8"),
                                   ("none", "int8")):
            load_splits(tmp_path / f"{name}.npz", normalize=normalize, storage=storage)
            err = capsys.readouterr().err
            said = name in ("u16", "f255") and normalize == "unit"
            assert ("not pixels in [0, 1)" in err) == said, (name, normalize, storage, err)
            if said:  # (the training split's values: the others' are cut from it)
                scale = 257 if name == "u16" else 1
                low, high = (int(v) // scale for v in
                             re.search(rf"{name}\.npz hold values (\d+) to (\d+),", err).groups())
                assert err.count("\n") == 1 and low <= 10 and 245 <= high <= levels.max()
    lines = []  # streamed, and from a store: said once, to the report
    for dataset in (tmp_path / "u16.npz", convert(tmp_path / "u16.npz", tmp_path / "u16.h5")):
        for residency in ("whole", "streamed"):
            load_splits(dataset, report=lines.append, residency=residency, batch_size=2)
            assert sum("not pixels in [0, 1)" in line for line in lines) == 1, lines
            lines.clear()
    # Standardized pixels (each z-scored) reach 40 where a pixel is rarely inked,
    # but their mean and deviation are standardized ones: not said.
    from sklearn.datasets import load_digits

    digits = load_digits().data
    scored = (digits - digits.mean(0)) / np.where(digits.std(0) > 0, digits.std(0), 1)
    assert np.abs(scored).max() > 16
    np.savez(tmp_path / "scored.npz", x_train=scored, y_train=load_digits().target)
    load_splits(tmp_path / "scored.npz", lossy=True)
    assert "not pixels" not in capsys.readouterr().err
    load_splits("digits")
    assert "not pixels" not in capsys.readouterr().err


def test_arguments_of_the_wrong_kind_are_one_error_each(tmp_path):
    # Each was a raw TypeError, AttributeError or numpy's ValueError (user trial).
    from int8store import SharedDataset, load_data, memory_table, model_memory
    from int8store.training import save_checkpoint

    arrays = (np.zeros((3, 4), np.uint8), np.zeros(3, np.int64))
    with pytest.raises(ArgumentError, match=r"a list or tuple names IDX files, and this one "
                                            r"holds ndarray: .*shared_dataset\(\(images, labels\)\)"):
        load_data(arrays)
    with pytest.raises(ArgumentError, match=r"memory_table: \[1, 2\] to tabulate"):
        memory_table([1, 2])
    with pytest.raises(ArgumentError, match="image_shape='x': expected a shape"):
        model_memory("logistic", 10, "x")
    with pytest.raises(ArgumentError, match="n_classes=0: expected 1 or more"):
        model_memory("logistic", 10, (8, 8), n_classes=0)
    assert model_memory("logistic", 10, 784).parameter_bytes == \
        model_memory("logistic", 10, (784,)).parameter_bytes
    with pytest.raises(ArgumentError, match="encoding=None: expected an int8store.Encoding"):
        SharedDataset(np.zeros((3, 4), np.int8), np.zeros(3, np.int32), None)
    with pytest.raises(ArgumentError, match="W is an array of Python objects"):
        save_checkpoint(tmp_path / "m", W=np.array([object()]))
    assert not list(tmp_path.iterdir())


def test_memory_table_of_nothing_and_a_codebooks_repr_and_a_resize_as_text(tmp_path):
    from int8store import convert, memory_table, open_store

    with pytest.raises(ArgumentError, match="memory_table: no splits"):
        memory_table({})
    # (a codebook's repr printed its 256 values; info named no range)
    encoding = quantize(np.array([0.3, 0.7, 1000.0]))[1]
    assert repr(encoding) == ("Encoding(offset=128, divisor=256, codebook=<codebook of 256 values, "
                              "0.3 to 1000>, max_error=0.0, precision=None)")
    assert repr(quantize(np.zeros(3, np.uint8))[1]) == \
        "Encoding(offset=128, divisor=256, max_error=0.0, precision=None)"
    # The API takes --resize's text too (it unpacked "16x16" into a ValueError).
    from archives import write_image_folder

    write_image_folder(tmp_path / "set", np.zeros((12, 4, 6), np.uint8), np.arange(12) % 2)
    convert(tmp_path / "set", tmp_path / "s.h5", resize="2x3")
    assert open_store(tmp_path / "s.h5").image_shape == (2, 3)
    for wrong in ("2x", "0x3", (2.5, 3), "axb", 7):
        with pytest.raises(ArgumentError, match=r"resize .* \(--resize\): expected ROWSxCOLS"):
            convert(tmp_path / "set", tmp_path / "t.h5", resize=wrong)


def test_paths_placements_and_encodings_of_the_wrong_kind_are_refused_by_name(tmp_path):
    # Each was pathlib's TypeError, or an AttributeError ("'dict' object has
    # no attribute 'blocks'", "'NoneType' object has no attribute
    # 'is_codebook'"), or "Length of <Vector> cannot be determined" (user trial).
    from int8store import Store, convert, dequantize, keep_on_device, load_data, place

    for call, name in ((lambda: open_store(None), "path"), (lambda: Store(3), "path"),
                       (lambda: convert("digits", None), "output"),
                       (lambda: load_data("mnist", cache_dir=5), "cache_dir")):
        with pytest.raises(ArgumentError, match=rf"^{name}=(None|3|5): expected a path"):
            call()
    splits = load_splits("digits")
    assert place(splits, "c") is splits  # (load_splits' dict, as load_data's list)
    for wrong in (None, "digits", np.zeros(3)):
        with pytest.raises(ArgumentError, match=r"^place: .*: expected a split \(SharedDataset\)"):
            place(wrong, "c")
    W = tensor_library().shared(np.zeros(3), name="W")
    for wrong in (None, W, [np.zeros(3)]):
        with pytest.raises(ArgumentError, match=r"^keep_on_device: variables=.*: expected a list "
                                                r"of shared variables"):
            keep_on_device(wrong)
    codes = splits["train"].data
    for wrong in (None, "unit"):
        with pytest.raises(ArgumentError, match=rf"^dequantize: encoding={wrong!r}: expected an "
                                                r"int8store.Encoding"):
            dequantize(codes, wrong)


def test_a_chunk_size_is_a_size(tmp_path):
    # (0 and -5 were taken as one row a chunk, "1MiB" was a TypeError)
    from int8store import convert

    for wrong in (0, -5, "none"):
        with pytest.raises(ArgumentError, match=rf"^chunk_bytes={wrong!r}: expected a"):
            convert("digits", tmp_path / "d.h5", chunk_bytes=wrong)
    convert("digits", tmp_path / "d.h5", chunk_bytes="1KiB")
    assert open_store(tmp_path / "d.h5").splits == open_store(convert(
        "digits", tmp_path / "e.h5")).splits


def test_place_on_the_c_backend_refuses_several_devices():
    # (devices=4, "all" or -3 were ignored: the data went to the one CPU, while
    # load_data(mode="c", devices=4) refuses them)
    from int8store import place

    splits = load_splits("digits")
    for wrong in (4, "all", -3):
        with pytest.raises(ArgumentError, match=rf"^place: devices={wrong!r} with mode='c': the "
                                                r"C backend runs on one CPU"):
            place(splits, "c", devices=wrong)
    assert place(splits, "c", devices=1) is splits
    assert splits["train"].blocks is None


@pytest.mark.parametrize("value", ["no", "False", None, 2, [], 0.5])
def test_a_flag_that_is_not_true_or_false_is_refused_before_anything_is_read(tmp_path, value):
    # (lossy="no" was true: data int8 cannot hold quantized without a word;
    # keep_order="no" kept a class-sorted source's order, verify="no" verified)
    from int8store import convert, load_data

    images = np.linspace(0, 1, 300 * 4).reshape(300, 4)  # 1,200 levels: no exact encoding
    np.savez(tmp_path / "fine.npz", x_train=images, y_train=np.arange(300) % 3)
    calls = {"lossy": lambda: quantize(images, lossy=value),
             "load_data lossy": lambda: load_data(tmp_path / "fine.npz", lossy=value),
             "keep_order": lambda: load_data(tmp_path / "fine.npz", keep_order=value),
             "force": lambda: convert(tmp_path / "fine.npz", tmp_path / "s.h5", force=value),
             "convert lossy": lambda: convert(tmp_path / "fine.npz", tmp_path / "t.h5",
                                              lossy=value),
             "verify": lambda: open_store(tmp_path / "none.h5", verify=value)}
    for name, call in calls.items():
        option = name.split()[-1]
        with pytest.raises(ArgumentError, match=rf"^{option}={re.escape(repr(value))}: "
                                                r"expected True or False$"):
            call()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fine.npz"]


def test_numpys_booleans_and_0_or_1_are_flags():
    images = np.linspace(0, 1, 1200)
    for value in (np.True_, 1):
        assert quantize(images, lossy=value)[1].max_error > 0
    for value in (np.False_, 0):
        with pytest.raises(Exception, match="1200 distinct values|lossy"):
            quantize(images, lossy=value)
