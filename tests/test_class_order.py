"""A source sorted by class (a folder of class folders, arrays sorted by
label) converts and loads shuffled, its validation (and test) split drawn
stratified by class, from a seed the store records; the same command
writes the same bytes; sources whose order means something keep it; a
training split still sorted is named when loaded."""

import re

import numpy as np
import pytest
from hypothesis import given, strategies as st

from archives import (fake_mnist, fake_mnist_pickle_content, rewrite_manifest, tar_folder,
                      write_image_folder, write_mnist_idx_folder, write_pickle_gz, zip_folder)
from int8store import ArgumentError, StoreFormatError, load_splits, open_store
from int8store.cli import main
from int8store.converter import convert
from int8store.order.classes import label_runs, stratified_pick
from int8store.plan.arrangement import VALID_STREAM

pytestmark = pytest.mark.floatx_blind

CLASSES = ["ant", "bee", "cat", "dog", "eel", "fox", "gnu"]
# Uneven classes: a proportion is a proportion of each one's own size.
TRAIN_SIZES = [30, 24, 36, 18, 27, 33, 21]
TEST_SIZES = [6, 5, 7, 4, 5, 6, 4]


def class_folders(root, seed=0, side=6):
    """``root/train/CLASS/*.png`` and ``root/test/CLASS/*.png`` of the
    classes above, as a newcomer's images come; returns ``{split: (images,
    labels)}`` in the order int8store reads them (class by class)."""
    rng = np.random.default_rng(seed)
    data = {}
    for split, sizes in (("train", TRAIN_SIZES), ("test", TEST_SIZES)):
        labels = np.repeat(np.arange(len(sizes)), sizes)
        images = rng.integers(0, 256, (len(labels), side, side), dtype=np.uint8)
        images[:, 0, 0] = np.arange(len(labels)) % 256  # (no two alike)
        images[:, 0, 1] = np.arange(len(labels)) // 256
        order = write_image_folder(root / split, images, labels, CLASSES)
        data[split] = (images[order], labels[order])
    return data


def stored(path):
    store = open_store(path)
    return {name: (store.encoding.levels(store.read_split(name)[0]).astype(np.uint8),
                   store.read_split(name)[1]) for name in store.splits}


def examples(images, labels):
    """The examples as a sorted list of (label, image bytes): a multiset."""
    return sorted((int(l), np.asarray(i, np.uint8).tobytes()) for i, l in zip(images, labels))


def assert_in_proportion(part, whole, count):
    """Each class of ``whole`` (labels) holds its share of ``count`` in ``part``, within one."""
    sizes = np.bincount(whole, minlength=len(CLASSES))
    taken = np.bincount(part, minlength=len(CLASSES))
    assert taken.sum() == count
    assert (np.abs(taken - sizes * count / sizes.sum()) < 1).all(), (taken, sizes)
    assert (taken > 0).all() and (sizes - taken > 0).all()  # every class on both sides


# -- a folder of class folders ------------------------------------------------------

def test_a_class_folder_converts_shuffled_every_class_in_train_and_valid_in_proportion(
        tmp_path, capsys):
    data = class_folders(tmp_path / "animals")
    assert label_runs(data["train"][1]).sorted  # as the folders are read
    assert main(["convert", str(tmp_path / "animals"), "-o", str(tmp_path / "a.h5")]) == 0
    out = capsys.readouterr().out
    assert "validation split: 31 of the 189 training examples (a sixth, the default), " \
           "stratified by class, drawn with seed 0" in out
    assert "order: train, valid, test shuffled with seed 0" in out
    got = stored(tmp_path / "a.h5")
    assert list(got) == ["train", "valid", "test"]
    for name in got:  # not sorted by class, nor a run longer than chance gives
        assert not label_runs(got[name][1]).sorted, name
    assert label_runs(got["train"][1]).longest <= 6
    assert_in_proportion(got["valid"][1], data["train"][1], 31)
    # the same examples, every one once
    assert examples(*got["test"]) == examples(*data["test"])
    assert examples(np.concatenate([got["train"][0], got["valid"][0]]),
                    np.concatenate([got["train"][1], got["valid"][1]])) == examples(*data["train"])
    store = open_store(tmp_path / "a.h5")
    assert store.order == {"seed": 0, "shuffled": ["train", "valid", "test"],
                           "valid": "stratified", "test": "source"}
    assert store.manifest["order"] == store.order
    assert store.label_names == CLASSES


def test_keep_order_keeps_the_folder_order_and_still_cuts_in_proportion(tmp_path, capsys):
    data = class_folders(tmp_path / "animals")
    assert main(["convert", str(tmp_path / "animals"), "-o", str(tmp_path / "k.h5"),
                 "--keep-order"]) == 0
    assert "order: the source's own" in capsys.readouterr().out
    got = stored(tmp_path / "k.h5")
    assert label_runs(got["train"][1]).runs == len(CLASSES)  # sorted, as asked
    np.testing.assert_array_equal(got["test"][1], data["test"][1])
    np.testing.assert_array_equal(got["test"][0], data["test"][0])
    chosen = stratified_pick(data["train"][1], 31, seed=0, stream=VALID_STREAM)
    np.testing.assert_array_equal(got["valid"][0], data["train"][0][chosen])
    np.testing.assert_array_equal(got["train"][0], data["train"][0][~chosen])
    assert open_store(tmp_path / "k.h5").order == {"seed": 0, "shuffled": [],
                                                    "valid": "stratified", "test": "source"}


def test_the_same_command_writes_the_same_bytes_and_another_seed_another_order(
        tmp_path, monkeypatch):
    """With $SOURCE_DATE_EPOCH set (the time recorded), byte for byte: run
    in two folders, the same command line writes out/s.h5 in each."""
    class_folders(tmp_path / "animals")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    for run, seed in (("one", []), ("two", []), ("seeded", ["--seed", "5"])):
        (tmp_path / run).mkdir()
        monkeypatch.chdir(tmp_path / run)
        assert main(["convert", str(tmp_path / "animals"), "-o", "out/s.h5"] + seed) == 0
    one, two = (tmp_path / "one" / "out" / "s.h5"), (tmp_path / "two" / "out" / "s.h5")
    assert one.read_bytes() == two.read_bytes()
    assert open_store(one).provenance["created"] == "2023-11-14T22:13:20+00:00"
    seeded = tmp_path / "seeded" / "out" / "s.h5"
    assert open_store(seeded).order["seed"] == 5
    assert not np.array_equal(stored(one)["train"][1], stored(seeded)["train"][1])
    assert not label_runs(stored(seeded)["train"][1]).sorted


def test_the_same_conversion_gives_the_same_file_through_a_spill_file_too(tmp_path, monkeypatch):
    class_folders(tmp_path / "animals")
    tar_folder(tmp_path / "animals", tmp_path / "animals.tar")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    for name in ("a", "b"):
        convert(tmp_path / "animals.tar", tmp_path / name / "s.h5", chunk_bytes=500,
                command_line="int8store convert animals.tar -o s.h5")
    assert (tmp_path / "a" / "s.h5").read_bytes() == (tmp_path / "b" / "s.h5").read_bytes()


def test_source_date_epoch_that_is_not_a_time_is_refused(tmp_path, monkeypatch, capsys):
    class_folders(tmp_path / "animals")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    assert main(["convert", str(tmp_path / "animals"), "-o", str(tmp_path / "a.h5")]) == 2
    assert "SOURCE_DATE_EPOCH='yesterday': expected" in capsys.readouterr().err
    assert not (tmp_path / "a.h5").exists()


@pytest.mark.parametrize("kind", ["zip", "tar.gz"])
def test_an_archive_of_class_folders_gives_the_folders_store(tmp_path, kind):
    """A zip is read by index, a tar (read in its own order only) through a
    spill file: the same examples in the same order as the folder."""
    class_folders(tmp_path / "animals")
    convert(tmp_path / "animals", tmp_path / "folder.h5")
    archive = (zip_folder(tmp_path / "animals", tmp_path / "a.zip") if kind == "zip"
               else tar_folder(tmp_path / "animals", tmp_path / "a.tar.gz"))
    convert(archive, tmp_path / "archive.h5", chunk_bytes=200)  # many chunks
    folder, packed = stored(tmp_path / "folder.h5"), stored(tmp_path / "archive.h5")
    for split in folder:
        for i in (0, 1):
            np.testing.assert_array_equal(folder[split][i], packed[split][i])
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no spill left


def test_load_data_on_the_folder_gives_the_stores_splits(tmp_path, capsys):
    """One road: loading the folder itself arranges it as convert does."""
    class_folders(tmp_path / "animals")
    convert(tmp_path / "animals", tmp_path / "a.h5")
    loaded = load_splits(tmp_path / "animals")
    for name, (images, labels) in stored(tmp_path / "a.h5").items():
        ds = loaded[name]
        np.testing.assert_array_equal(ds.encoding.levels(ds.data.get_value(borrow=True)),
                                      images.reshape(len(images), -1))
        np.testing.assert_array_equal(ds.y.get_value(borrow=True), labels)
    assert "sorted by class" not in capsys.readouterr().err


def test_a_split_sorted_by_class_is_named_once_when_loaded_for_training(tmp_path, capsys):
    class_folders(tmp_path / "animals")
    convert(tmp_path / "animals", tmp_path / "kept.h5", keep_order=True)
    capsys.readouterr()
    load_splits(tmp_path / "kept.h5")
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"int8store: split 'train' of {tmp_path / 'kept.h5'} is sorted by "
                          "class (7 runs of one class, up to 30 examples long")
    assert "without keep_order (--keep-order)" in err and "(seed=, --seed)" in err
    load_splits(tmp_path / "animals", keep_order=True)  # the folder itself, in its order
    assert "split 'train' of" in capsys.readouterr().err
    load_splits(tmp_path / "animals")
    assert capsys.readouterr().err == ""


# -- arrays ---------------------------------------------------------------------

def sorted_arrays(n_per_class=(20, 16, 24), side=3, seed=0):
    labels = np.repeat(np.arange(len(n_per_class)), n_per_class)
    images = np.random.default_rng(seed).integers(0, 256, (len(labels), side, side), dtype=np.uint8)
    images[:, 0, 0] = np.arange(len(labels))
    return images, labels


def test_npz_arrays_sorted_by_label_are_shuffled_and_shuffled_ones_kept(tmp_path):
    images, labels = sorted_arrays()
    np.savez(tmp_path / "sorted.npz", x_train=images, y_train=labels,
             x_test=images[::2], y_test=labels[::2])
    convert(tmp_path / "sorted.npz", tmp_path / "s.h5", chunk_bytes=20)  # through a spill file
    got = stored(tmp_path / "s.h5")
    assert open_store(tmp_path / "s.h5").order["shuffled"] == ["train", "valid", "test"]
    assert not label_runs(got["train"][1]).sorted
    assert examples(np.concatenate([got["train"][0], got["valid"][0]]),
                    np.concatenate([got["train"][1], got["valid"][1]])) == examples(images, labels)
    # the same, loaded (its arrays read whole, then taken by index)
    loaded = load_splits(tmp_path / "sorted.npz")
    for name in got:
        np.testing.assert_array_equal(loaded[name].y.get_value(borrow=True), got[name][1])
    # arrays in no order by class are kept in theirs
    mixed = np.random.default_rng(1).permutation(len(labels))
    np.savez(tmp_path / "mixed.npz", x_train=images[mixed], y_train=labels[mixed],
             x_test=images[:5], y_test=labels[:5])
    convert(tmp_path / "mixed.npz", tmp_path / "m.h5")
    store = open_store(tmp_path / "m.h5")
    assert store.order["shuffled"] == []
    train, valid = store.read_labels("train"), store.read_labels("valid")
    chosen = stratified_pick(labels[mixed], 10, seed=0, stream=VALID_STREAM)
    np.testing.assert_array_equal(valid, labels[mixed][chosen])
    np.testing.assert_array_equal(train, labels[mixed][~chosen])


def test_test_size_cuts_a_test_split_from_one_pair_of_arrays(tmp_path, capsys):
    images, labels = sorted_arrays((30, 42, 24))
    np.savez(tmp_path / "one.npz", images=images, labels=labels)
    # By default a sixth (a newcomer met "no test split", and the tutorials
    # have no --test-size), stratified, and the validation split from the rest
    default = load_splits(tmp_path / "one.npz")
    assert [default[n].n_examples for n in ("train", "valid", "test")] == [67, 13, 16]
    assert (np.bincount(default["test"].labels, minlength=3) == [5, 7, 4]).all()
    assert main(["convert", str(tmp_path / "one.npz"), "-o", str(tmp_path / "d.h5")]) == 0
    said = capsys.readouterr().out.splitlines()
    # (in the order the splits are cut: the validation's line names the test split)
    assert said[0] == ("test split: 16 of the 96 training examples (a sixth, the default), "
                       "stratified by class, drawn with seed 0")
    assert said[1].startswith("validation split: 13 of the 80 training examples left by the "
                              "test split")
    assert main(["convert", str(tmp_path / "one.npz"), "-o", str(tmp_path / "t.h5"),
                 "--test-size", "0.25"]) == 0
    assert "12 of the 72 training examples left by the test split" in capsys.readouterr().out
    got = stored(tmp_path / "t.h5")
    assert [len(got[n][1]) for n in ("train", "valid", "test")] == [60, 12, 24]
    sizes = np.bincount(labels)
    test = np.bincount(got["test"][1], minlength=3)
    assert (np.abs(test - sizes * 24 / 96) < 1).all() and (test > 0).all()
    assert examples(*[np.concatenate([got[n][i] for n in got]) for i in (0, 1)]) \
        == examples(images, labels)
    assert open_store(tmp_path / "t.h5").order["test"] == "stratified"
    splits = load_splits(tmp_path / "one.npz", test_size=0.25)  # load_data takes it too
    for name in got:
        np.testing.assert_array_equal(splits[name].y.get_value(borrow=True), got[name][1])
    with pytest.raises(ArgumentError, match="already has a test split"):
        load_splits(tmp_path / "t.h5", test_size=5)
    with pytest.raises(ArgumentError, match=r"test_size=96 \(--test-size\): expected an integer count in 1\.\.95"):
        convert(tmp_path / "one.npz", tmp_path / "u.h5", test_size=96)


# -- sources whose order means something ------------------------------------------

def test_idx_and_the_classic_pickle_keep_their_order_even_sorted(tmp_path):
    data = fake_mnist(n_train=120, n_test=12)
    by_class = np.argsort(data["train"][1], kind="stable")
    data["train"] = (data["train"][0][by_class], data["train"][1][by_class])
    assert label_runs(data["train"][1]).sorted
    convert(write_mnist_idx_folder(tmp_path / "idx", data), tmp_path / "idx.h5")
    got = stored(tmp_path / "idx.h5")
    np.testing.assert_array_equal(got["train"][1], data["train"][1][:100])  # the last sixth: valid
    np.testing.assert_array_equal(got["valid"][1], data["train"][1][100:])
    assert open_store(tmp_path / "idx.h5").order == {"seed": None, "shuffled": [],
                                                      "valid": "last", "test": "source"}
    content = fake_mnist_pickle_content(width=16)
    content = tuple((x[np.argsort(y, kind="stable")], np.sort(y)) for x, y in content)
    convert(write_pickle_gz(tmp_path / "mnist.pkl.gz", content), tmp_path / "p.h5")
    for name, (_, labels) in zip(("train", "valid", "test"), content):
        np.testing.assert_array_equal(open_store(tmp_path / "p.h5").read_labels(name), labels)


def test_the_digits_keep_their_order():
    from int8store.sources import read_source

    source = read_source("digits")
    loaded = load_splits("digits")
    for name, split in source.splits.items():
        np.testing.assert_array_equal(loaded[name].y.get_value(borrow=True), split.labels)


def test_a_seed_for_a_source_with_its_own_validation_split_and_nothing_to_draw_is_refused(tmp_path):
    class_folders(tmp_path / "animals")
    rng = np.random.default_rng(0)
    write_image_folder(tmp_path / "animals" / "valid", rng.integers(0, 256, (14, 6, 6), np.uint8),
                       np.arange(14) % 7, CLASSES)
    # every split of class folders is shuffled (they are read class by class,
    # valid's two examples a class too): the seed is taken
    assert open_store(convert(tmp_path / "animals", tmp_path / "a.h5", valid_seed=3)).order == \
        {"seed": 3, "shuffled": ["train", "valid", "test"], "valid": "source", "test": "source"}
    with pytest.raises(ArgumentError, match="already has a validation split"):
        convert(tmp_path / "animals", tmp_path / "b.h5", valid_seed=3, keep_order=True)


# -- the manifest's order ---------------------------------------------------------

def test_a_store_without_the_order_field_loads_and_a_malformed_one_is_refused(tmp_path):
    class_folders(tmp_path / "animals")
    path = convert(tmp_path / "animals", tmp_path / "a.h5")
    rewrite_manifest(path, lambda m: m.pop("order"))  # a store written before the field
    assert open_store(path).order is None
    assert load_splits(path)["train"].n_examples == 158
    for bad, said in (([0], "where an object belongs"),
                      ({"seed": -1, "shuffled": []}, "as its seed"),
                      ({"seed": 0, "shuffled": ["train", "extra"]}, "as the splits shuffled"),
                      ({"seed": None, "shuffled": ["train"]}, "without the seed"),
                      ({"seed": 0, "shuffled": [], "valid": "random"}, "how split 'valid' was made")):
        rewrite_manifest(path, lambda m: m.update(order=bad))
        with pytest.raises(StoreFormatError, match=said):
            open_store(path)


def test_info_says_how_the_examples_were_ordered(tmp_path, capsys):
    class_folders(tmp_path / "animals")
    convert(tmp_path / "animals", tmp_path / "a.h5")
    assert main(["info", str(tmp_path / "a.h5")]) == 0
    assert ("\norder:        train, valid, test shuffled with seed 0 (the source ran by class; "
            "--keep-order keeps its order)\nsplits:       valid: drawn from train stratified by "
            "class, seed 0; test: the source's own\n") in capsys.readouterr().out


# -- preview ----------------------------------------------------------------------

def test_preview_names_the_classes_a_split_lacks(tmp_path, capsys):
    class_folders(tmp_path / "animals")
    rng = np.random.default_rng(0)
    write_image_folder(tmp_path / "animals" / "valid", rng.integers(0, 256, (10, 6, 6), np.uint8),
                       np.arange(10) % 5, CLASSES)  # no fox, no gnu
    convert(tmp_path / "animals", tmp_path / "a.h5")
    for source in (tmp_path / "a.h5", tmp_path / "animals"):
        assert main(["preview", str(source), "-o", str(tmp_path / "v.png"), "--split", "valid",
                     "--force"]) == 0
        assert "split 'valid' lacks 2 of the 7 classes: fox, gnu (empty rows)" in \
            capsys.readouterr().out
    assert main(["preview", str(tmp_path / "a.h5"), "-o", str(tmp_path / "t.png")]) == 0
    assert "lacks" not in capsys.readouterr().out


# -- the arithmetic ---------------------------------------------------------------


@given(st.lists(st.integers(0, 5), min_size=1, max_size=300), st.integers(0, 2**32 - 1),
       st.data())
def test_a_stratified_pick_takes_each_class_in_proportion_within_one(labels, seed, data):
    labels = np.array(labels)
    count = data.draw(st.integers(0, len(labels)))
    chosen = stratified_pick(labels, count, seed, stream=7)
    assert chosen.dtype == bool and chosen.sum() == count
    sizes = np.bincount(labels, minlength=6)
    taken = np.bincount(labels[chosen], minlength=6)
    assert (np.abs(taken - sizes * count / len(labels)) < 1).all()
    np.testing.assert_array_equal(chosen, stratified_pick(labels, count, seed, stream=7))


@given(st.integers(0, 3000), st.integers(0, 2**32 - 1))
def test_a_drawn_order_is_a_permutation_fixed_by_its_seed(n, seed):
    from int8store.order.classes import drawn_order
    order = drawn_order(n, seed, stream=3)
    np.testing.assert_array_equal(np.sort(order), np.arange(n))
    np.testing.assert_array_equal(order, drawn_order(n, seed, stream=3))


@given(st.lists(st.integers(0, 3), max_size=200))
def test_label_runs_counts_the_runs(labels):
    runs = label_runs(labels)
    expected_runs = sum(1 for i in range(len(labels)) if i == 0 or labels[i] != labels[i - 1])
    assert runs.runs == expected_runs and runs.examples == len(labels)
    if labels:
        sizes = np.bincount(labels)
        assert runs.expected == pytest.approx(1 + (len(labels) ** 2 - (sizes ** 2).sum()) / len(labels))


def test_sorted_means_far_fewer_runs_than_chance():
    assert label_runs(np.repeat(np.arange(10), 50)).sorted  # class folders
    assert label_runs(np.tile(np.repeat(np.arange(10), 50), 2)).sorted  # two sorted files, joined
    shuffled = np.random.default_rng(0).permutation(np.repeat(np.arange(10), 50))
    assert not label_runs(shuffled).sorted
    assert not label_runs(np.zeros(100, int)).sorted  # one class: nothing to mix
    assert not label_runs(np.arange(200) % 2).sorted


def test_a_seed_outside_32_bits_is_refused_naming_the_range(tmp_path, capsys):
    class_folders(tmp_path / "animals")
    for seed in ("-1", str(1 << 32)):
        assert main(["convert", str(tmp_path / "animals"), "-o", str(tmp_path / "a.h5"),
                     "--seed", seed]) == 2
        assert capsys.readouterr().err == (f"error: seed={seed} (--seed): expected an integer "
                                           "from 0 to 4294967295\n")
    assert not (tmp_path / "a.h5").exists()


@pytest.mark.parametrize("seed", [-1, 1.5])
def test_a_validation_seed_is_refused_by_its_own_name(seed, tmp_path):
    """load_data(valid_seed=-1) said "seed=-1", a keyword not given (user trial)."""
    from int8store import convert, load_data, load_splits

    said = rf"^valid_seed={re.escape(repr(seed))}: expected an integer from 0 to 4294967295$"
    for load in (load_data, load_splits):
        with pytest.raises(ArgumentError, match=said):
            load("digits", valid_seed=seed)
    with pytest.raises(ArgumentError, match=said):
        convert("digits", tmp_path / "d.h5", valid_seed=seed)
    assert not (tmp_path / "d.h5").exists()


@pytest.mark.parametrize("seed", [1.5, "1", -1, 1 << 32, True])
def test_a_training_seed_that_would_alias_another_is_refused(seed):
    # (1.5 and "1" shuffled as 1 held whole and failed streamed with a
    # TypeError; -1 and 2**32 + 1 took the orders of 2**32 - 1 and 1)
    from int8store import SharedDataset, load_splits, load_streams

    pattern = rf"seed={re.escape(repr(seed))}: expected an integer from 0 to 4294967295"
    with pytest.raises(ArgumentError, match=pattern):
        load_splits("digits", seed=seed)
    with pytest.raises(ArgumentError, match=pattern):
        load_streams("digits", max_device_bytes=20000, seed=seed)
    split = SharedDataset.from_arrays(np.zeros((8, 4, 4), np.uint8), np.arange(8), name="train")
    with pytest.raises(ArgumentError, match=pattern):
        split.shuffle(seed)
    with pytest.raises(ArgumentError, match=pattern.replace(":", r" \(--augment-seed\):", 1)):
        split.augment("translate=1", seed)


def test_a_few_images_in_class_folders_are_shuffled_too(tmp_path):
    # Two classes of six images left the runs of their labels no sign of
    # the order they were read in: the store kept them class by class.
    write_image_folder(tmp_path / "few", np.arange(12 * 9, dtype=np.uint8).reshape(12, 3, 3),
                       np.arange(12) // 6, ["a", "b"])
    store = open_store(convert(tmp_path / "few", tmp_path / "few.h5", valid_size=2))
    assert store.order["shuffled"] == ["train", "valid", "test"]
    assert label_runs(store.read_labels("train")).runs > 2
