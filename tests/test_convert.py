"""int8store convert / info / verify: every format round-trips; bad input is
refused in one line, exit status 2, and nothing is left behind."""

import gzip
import os
import tracemalloc

import h5py
import numpy as np
import pytest

from archives import (fake_mnist, fake_mnist_pickle_content, flip_bit, rewrite_manifest,
                      tar_folder, with_gzip_extra_field, write_idx, write_image_folder,
                      write_mnist_idx_folder, write_pickle_gz, zip_folder)
from int8store import (SourceFormatError, StoreChecksumError, StoreFormatError, load_data,
                       load_splits, open_store, plan_splits)
from int8store.cli import main
from int8store.converter import convert
from int8store.order.classes import stratified_pick
from int8store.plan.arrangement import VALID_STREAM
from int8store.sources import read_source

pytestmark = pytest.mark.floatx_blind


def stored(path):
    """{split: (uint8 pixels, labels)} of a store, decoded with its encoding."""
    store = open_store(path)
    out = {}
    for name in store.splits:
        codes, labels = store.read_split(name)
        out[name] = (store.encoding.levels(codes), labels)
    return out


def with_classic_valid(data):
    """``data`` with the last sixth of train as valid, as the plan makes it
    for a source that keeps its order and has no validation split."""
    if "valid" in data or "train" not in data:
        return data
    images, labels = data["train"]
    keep = len(labels) - len(labels) // 6
    return {"train": (images[:keep], labels[:keep]), "valid": (images[keep:], labels[keep:]),
            **{n: v for n, v in data.items() if n != "train"}}


def as_planned(source, data, keys=None):
    """``data`` (each split's images and labels in the source's order) as the
    planning step arranges ``source``: shuffled if it runs by class, its
    validation split drawn stratified (that rule's own tests:
    test_class_order.py). The readers' round trips stay exact."""
    drawn = plan_splits(read_source(source, keys=keys)).drawn
    return {name: tuple(a if part.rows is None else a[part.rows] for a in data[part.source])
            for name, part in drawn.items()}


def assert_round_trip(path, expected, source=None, keys=None):
    """The store at ``path`` holds ``expected`` (in the source's order), as
    planned from ``source`` (default: a source that keeps its order)."""
    expected = with_classic_valid(expected) if source is None else as_planned(source, expected, keys)
    got = stored(path)
    assert list(got) == list(expected)
    for name, (images, labels) in expected.items():
        np.testing.assert_array_equal(got[name][0], images)
        np.testing.assert_array_equal(got[name][1], labels)


def run_cli(args, capsys):
    status = main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir())


# -- round trips ----------------------------------------------------------------

@pytest.mark.parametrize("gzipped", [True, False])
def test_idx_folder_and_files(tmp_path, gzipped):
    data = fake_mnist(n_train=30, n_test=10, side=6)
    folder = write_mnist_idx_folder(tmp_path / "idx", data, gzipped)
    convert(folder, tmp_path / "folder.h5")
    assert_round_trip(tmp_path / "folder.h5", data)
    convert(sorted(folder.iterdir()), tmp_path / "files.h5")
    assert_round_trip(tmp_path / "files.h5", data)


def test_npz(tmp_path):
    data = fake_mnist(n_train=20, n_test=5)
    np.savez(tmp_path / "a.npz", x_train=data["train"][0], y_train=data["train"][1],
             x_test=data["test"][0], y_test=data["test"][1])
    convert(tmp_path / "a.npz", tmp_path / "a.h5")
    assert_round_trip(tmp_path / "a.h5", data, source=tmp_path / "a.npz")


def test_npz_with_keys_given(tmp_path, capsys):
    data = fake_mnist(n_train=20, n_test=5)
    np.savez(tmp_path / "b.npz", p=data["train"][0], q=data["train"][1], r=data["test"][0],
             s=data["test"][1])
    status, _, err = run_cli(["convert", tmp_path / "b.npz", "-o", tmp_path / "b.h5"], capsys)
    assert status == 2 and "cannot tell which arrays are images and labels" in err
    status, _, _ = run_cli(["convert", tmp_path / "b.npz", "-o", tmp_path / "b.h5",
                            "--keys", "train=p:q", "--keys", "test=r:s"], capsys)
    assert status == 0
    assert_round_trip(tmp_path / "b.h5", data, source=tmp_path / "b.npz",
                      keys={"train": ("p", "q"), "test": ("r", "s")})
    status, _, err = run_cli(["convert", tmp_path / "b.npz", "-o", tmp_path / "c.h5",
                              "--keys", "trian=p:q"], capsys)
    assert (status, err) == (2, f"error: {tmp_path / 'b.npz'}: keys name a split 'trian'; a split "
                                "is one of train, valid, test (did you mean 'train'?)\n")


def test_signed_bytes_are_read_as_levels_with_a_note(tmp_path, capsys):
    """A store's codes copied out without their encoding read as pixels - 128,
    a half below the pixels' values, without a word; now the rule is said."""
    codes = np.arange(-128, 128, dtype=np.int16).astype(np.int8).reshape(16, 4, 4)
    np.savez(tmp_path / "s8.npz", x_train=codes, y_train=np.arange(16) % 2)
    status, out, _ = run_cli(["convert", tmp_path / "s8.npz", "-o", tmp_path / "s8.h5"], capsys)
    assert status == 0 and "note: the images are signed bytes (int8): read as levels " \
        "-128..127, values level / 256 in [-0.5, 0.5)" in out
    assert open_store(tmp_path / "s8.h5").encoding.offset == 0
    np.savez(tmp_path / "u8.npz", x_train=(codes.astype(np.int16) + 128).astype(np.uint8),
             y_train=np.arange(16) % 2)
    status, out, _ = run_cli(["convert", tmp_path / "u8.npz", "-o", tmp_path / "u8.h5"], capsys)
    assert status == 0 and "signed bytes" not in out


def test_a_sixth_that_rounds_to_none_is_not_called_a_sixth(tmp_path, capsys):
    np.savez(tmp_path / "five.npz", x_train=np.zeros((5, 4, 4), np.uint8), y_train=np.arange(5) % 2)
    status, out, _ = run_cli(["convert", tmp_path / "five.npz", "-o", tmp_path / "f.h5"], capsys)
    assert status == 0
    assert "test split: 1 of the 5 training examples (one: a sixth, the default, would be " \
           "none)" in out


@pytest.mark.parametrize("protocol", [2, 5])  # 5: the arrays' bytes as BYTEARRAY8
def test_mnist_pickle_keeps_its_floats_exactly(tmp_path, protocol):
    content = fake_mnist_pickle_content(width=784)
    convert(write_pickle_gz(tmp_path / "mnist.pkl.gz", content, protocol), tmp_path / "m.h5")
    store = open_store(tmp_path / "m.h5")
    assert store.image_shape == (28, 28) and store.encoding.divisor == 256
    for name, (images, labels) in zip(("train", "valid", "test"), content):
        codes, stored_labels = store.read_split(name)
        decoded = store.encoding.decode(codes, np.float32).reshape(len(codes), -1)
        np.testing.assert_array_equal(decoded.view(np.uint32), images.view(np.uint32))
        np.testing.assert_array_equal(stored_labels, labels)


def digits_images():
    from sklearn.datasets import load_digits
    digits = load_digits()
    return digits.images.astype(np.uint8), digits.target


@pytest.mark.slow
@pytest.mark.graph_free
def test_scikit_learn_digits_as_png_folders_and_zip(tmp_path):
    images, labels = digits_images()
    order = write_image_folder(tmp_path / "digits", images, labels)
    expected = {"train": (images[order], labels[order])}
    convert(tmp_path / "digits", tmp_path / "folder.h5")
    assert_round_trip(tmp_path / "folder.h5", expected, source=tmp_path / "digits")
    assert open_store(tmp_path / "folder.h5").label_names == [str(d) for d in range(10)]
    zip_folder(tmp_path / "digits", tmp_path / "digits.zip", wrap="digits")
    convert(tmp_path / "digits.zip", tmp_path / "zip.h5")
    assert_round_trip(tmp_path / "zip.h5", expected, source=tmp_path / "digits.zip")


def test_colour_images_in_split_folders_and_tar(tmp_path):
    rng = np.random.default_rng(3)
    expected = {}
    for split, n in (("train", 9), ("test", 4)):
        images = rng.integers(0, 256, (n, 5, 7, 3), dtype=np.uint8)
        labels = rng.integers(0, 3, n)
        order = write_image_folder(tmp_path / "set" / split, images, labels, ["cat", "dog", "eel"])
        expected[split] = (images[order], labels[order])
    convert(tmp_path / "set", tmp_path / "folder.h5")
    assert_round_trip(tmp_path / "folder.h5", expected, source=tmp_path / "set")
    store = open_store(tmp_path / "folder.h5")
    assert store.axes == ("example", "row", "column", "channel")
    assert store.label_names == ["cat", "dog", "eel"]
    tar_folder(tmp_path / "set", tmp_path / "set.tar.gz")
    got = stored(tmp_path / "folder.h5")
    tar_folder(tmp_path / "set", tmp_path / "dot.tar.gz", prefix="./")
    convert(tmp_path / "dot.tar.gz", tmp_path / "dot.h5")
    # A gzip header with an extra field (python/cpython#107398: tarfile's
    # stream mode could not read one before 3.12.8 and 3.13.1).
    with_gzip_extra_field(tar_folder(tmp_path / "set", tmp_path / "extra.tar.gz"))
    assert gzip.decompress((tmp_path / "extra.tar.gz").read_bytes()) == \
        gzip.decompress((tmp_path / "set.tar.gz").read_bytes())
    convert(tmp_path / "extra.tar.gz", tmp_path / "extra.h5")
    for name in ("dot.h5", "extra.h5"):  # ./ is not hidden
        for split, (images, labels) in stored(tmp_path / name).items():
            np.testing.assert_array_equal(images, got[split][0])
            np.testing.assert_array_equal(labels, got[split][1])
    # Read in name order, a tar splits as its folder does, whatever its
    # members' order (a trial's tar from plain `tar czf` put 115 of 239
    # images in other splits).
    folder = stored(tmp_path / "folder.h5")
    for seed in (1, 2):
        tar_folder(tmp_path / "set", tmp_path / f"shuffled{seed}.tar.gz", shuffle=seed)
        zip_folder(tmp_path / "set", tmp_path / f"shuffled{seed}.zip", shuffle=seed)
    for name in ("set.tar.gz", "shuffled1.tar.gz", "shuffled2.tar.gz", "shuffled1.zip"):
        convert(tmp_path / name, tmp_path / f"{name}.h5")
        got = stored(tmp_path / f"{name}.h5")
        assert got.keys() == folder.keys() == {"train", "valid", "test"}
        for split, (images, labels) in folder.items():
            np.testing.assert_array_equal(got[split][0], images)
            np.testing.assert_array_equal(got[split][1], labels)


def _save(path, pixels, **options):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.asarray(pixels, dtype=np.uint8)).save(path, **options)


def test_gifs_of_a_few_greys_stay_grey_and_a_colour_set_takes_them_in_colour(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(5)
    greys = rng.choice([0, 40, 200, 255], size=(3, 6, 5))  # Pillow reads such a GIF as mode P
    colour = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
    for index, image in enumerate(greys):
        _save(tmp_path / "grey" / "a" / f"{index}.gif", image)
    _save(tmp_path / "grey" / "b" / "plain.png", greys[0])  # an L image beside them
    assert Image.open(tmp_path / "grey" / "a" / "0.gif").mode == "P"
    images = read_source(tmp_path / "grey").splits["train"].images()
    assert images.shape == (4, 6, 5)  # grey: a third of colour's bytes
    np.testing.assert_array_equal(images, np.concatenate([greys, greys[:1]]))
    # In a set with colour images, palette greys are colour, wherever they come in it.
    for first in ("a", "z"):
        _save(tmp_path / first / first / "grey.gif", greys[0])
        _save(tmp_path / first / "m" / "colour.png", colour)
        images = read_source(tmp_path / first).splits["train"].images()
        grey_at = 0 if first == "a" else 1
        np.testing.assert_array_equal(images[grey_at], np.repeat(greys[0][..., None], 3, -1))
        np.testing.assert_array_equal(images[1 - grey_at], colour)
    # A GIF of all 256 greys, which Pillow reads as grey (L), is a palette's too;
    # and a tar of such a set reads the same.
    ramp = np.arange(256, dtype=np.uint8).reshape(16, 16)
    _save(tmp_path / "ramp" / "a" / "ramp.gif", ramp)
    _save(tmp_path / "ramp" / "b" / "few.gif", greys[0][:4, :4].repeat(4, 0).repeat(4, 1))
    _save(tmp_path / "ramp" / "c" / "colour.png", np.zeros((16, 16, 3), np.uint8) + [9, 99, 199])
    assert Image.open(tmp_path / "ramp" / "a" / "ramp.gif").mode == "L"
    tar_folder(tmp_path / "ramp", tmp_path / "ramp.tar.gz")
    for source in (tmp_path / "ramp", tmp_path / "ramp.tar.gz"):
        images = read_source(source).splits["train"].images()
        assert images.shape == (3, 16, 16, 3)
        np.testing.assert_array_equal(images[0], np.repeat(ramp[..., None], 3, -1))
    # A true grey image (L, 1-bit), first or after colour ones, is colour in
    # such a set too (torchvision's ImageFolder and Keras read it so), in a
    # folder and in a tar; a CMYK JPEG is colour as Pillow converts it.
    _save(tmp_path / "mixed" / "a" / "0.gif", greys[0])
    _save(tmp_path / "mixed" / "b" / "grey.png", greys[0])
    _save(tmp_path / "mixed" / "c" / "colour.png", colour)
    for folder in ("d", "e"):
        (tmp_path / "mixed" / folder).mkdir()
    Image.fromarray(greys[0] > 0).save(tmp_path / "mixed" / "d" / "1-bit.png")
    Image.fromarray(colour).convert("CMYK").save(tmp_path / "mixed" / "e" / "cmyk.jpg")
    tar_folder(tmp_path / "mixed", tmp_path / "mixed.tar")
    for source in (tmp_path / "mixed", tmp_path / "mixed.tar"):
        images = read_source(source).splits["train"].images()
        assert images.shape == (5, 6, 5, 3)
        for at, grey in ((0, greys[0]), (1, greys[0]), (3, np.where(greys[0] > 0, 255, 0))):
            np.testing.assert_array_equal(images[at], np.repeat(grey[..., None], 3, -1))
        np.testing.assert_array_equal(images[2], colour)
        cmyk = Image.open(tmp_path / "mixed" / "e" / "cmyk.jpg")
        assert cmyk.mode == "CMYK" and Image.open(tmp_path / "mixed" / "d" / "1-bit.png").mode == "1"
        np.testing.assert_array_equal(images[4], np.asarray(cmyk.convert("RGB")))
    # Said (a set of grey images with one colour one takes three times the bytes)
    # by convert and by the loading; a colour set is not (its first image is colour).
    note = (f"{tmp_path / 'mixed'}/a/0.gif is grey but {tmp_path / 'mixed'}/c/colour.png is "
            "colour: every image is held in colour (3 bytes a pixel), the grey ones' grey in "
            "each channel")
    assert read_source(tmp_path / "mixed").notes == (note,)
    assert read_source(tmp_path / "z").notes == ()
    said = []
    load_splits(tmp_path / "mixed", report=said.append, valid_size=1, test_size=1)
    assert said.count(f"int8store: {note}") == 1
    convert(tmp_path / "mixed", tmp_path / "mixed.h5", report=said.append, valid_size=1,
            test_size=1)
    assert said.count(f"note: {note}") == 1
    # A palette's transparent pixels are refused, grey or not.
    _save(tmp_path / "clear" / "a" / "0.gif", greys[0], transparency=40)
    with pytest.raises(SourceFormatError, match="has transparent pixels"):
        read_source(tmp_path / "clear")
    # So are a grey or colour PNG's, which its tRNS chunk names by value (they
    # were kept, opaque); one naming a value no pixel has is read.
    for mode, pixels, clear, unused in (("L", greys[0].astype(np.uint8), 40, 41),
                                        ("RGB", colour, tuple(map(int, colour[0, 0])), (1, 2, 3))):
        png = tmp_path / f"trns-{mode}" / "a" / "0.png"
        png.parent.mkdir(parents=True)
        Image.fromarray(pixels, mode).save(png, transparency=clear)
        with pytest.raises(SourceFormatError, match=rf"0\.png: has transparent pixels \(mode {mode}\)"):
            read_source(png.parent.parent)
        Image.fromarray(pixels, mode).save(png, transparency=unused)
        np.testing.assert_array_equal(read_source(png.parent.parent).splits["train"].images()[0],
                                      pixels)


def test_many_classes_in_no_training_example_fit_a_line(tmp_path, capsys):
    """Labels drawn from 0..99,999 left 1,700 classes out of training, and
    the note listing every one took 12,938 characters."""
    labels = np.arange(60) * 7
    np.savez(tmp_path / "sparse.npz", x_train=np.zeros((60, 4, 4), np.uint8), y_train=labels)
    assert main(["convert", str(tmp_path / "sparse.npz"), "-o", str(tmp_path / "s.h5")]) == 0
    note = next(line for line in capsys.readouterr().out.splitlines()
                if line.startswith("note: classes in no training example"))
    assert note.endswith(" more") and len(note) < 300, note
    missing = int(note.split(", and ")[1].split()[0]) + 10
    assert missing == len(set(labels.tolist()) - set(np.unique(
        open_store(tmp_path / "s.h5").read_labels("train")).tolist()))


def test_a_class_in_no_training_example_is_said(tmp_path, capsys):
    images = np.zeros((9, 4, 4), np.uint8)
    write_image_folder(tmp_path / "set" / "train", images[:6], [0, 1] * 3, ["a", "b", "c"])
    write_image_folder(tmp_path / "set" / "test", images[6:], [0, 1, 2], ["a", "b", "c"])
    assert main(["convert", str(tmp_path / "set"), "-o", str(tmp_path / "s.h5")]) == 0
    out = capsys.readouterr().out
    assert "note: classes in no training example, which the model never sees: c (test)" in out
    assert main(["convert", "digits", "-o", str(tmp_path / "d.h5")]) == 0
    assert "note:" not in capsys.readouterr().out


def test_class_names_in_notes_are_escaped_as_info_shows_them(tmp_path, capsys):
    """A folder named with a terminal's escape sequence (or a store's class
    from elsewhere): info showed it as \\x1b, the notes on a class in no
    training example and on one class folder sent the sequence itself."""
    odd = "red\x1b[31m\nX"
    images = np.zeros((9, 4, 4), np.uint8)
    write_image_folder(tmp_path / "set" / "train", images[:6], [0, 1] * 3, ["a", "b", odd])
    write_image_folder(tmp_path / "set" / "test", images[6:], [0, 1, 2], ["a", "b", odd])
    write_image_folder(tmp_path / "one", images[:4], [0] * 4, [odd])
    for source in ("set", "one"):
        assert main(["convert", str(tmp_path / source), "-o", str(tmp_path / f"{source}.h5")]) == 0
        out = capsys.readouterr().out
        note = next(line for line in out.splitlines() if line.startswith("note: "))
        assert "red\\x1b[31m\\nX" in note and note.isprintable(), note


def test_class_names_in_a_zip_without_its_utf8_flag_are_read_as_utf8(tmp_path):
    """Info-ZIP's zip flags no name UTF-8: zipfile read them as cp437, so the
    classes were other names, numbered in another order (Über first)."""
    import zipfile

    from archives import without_utf8_flags

    rng = np.random.default_rng(8)
    images, labels = rng.integers(0, 256, (6, 4, 4), dtype=np.uint8), np.arange(6) % 3
    write_image_folder(tmp_path / "fruit", images, labels, ["Äpfel", "Öl", "Über"])
    path = without_utf8_flags(zip_folder(tmp_path / "fruit", tmp_path / "fruit.zip"))
    with zipfile.ZipFile(path) as archive:
        assert archive.infolist()[0].filename.startswith("├äpfel")  # (as zipfile reads it)
    folder, zipped = (read_source(p, keys=None) for p in (tmp_path / "fruit", path))
    assert zipped.label_names == folder.label_names == ["Äpfel", "Öl", "Über"]
    np.testing.assert_array_equal(zipped.splits["train"].images(), folder.splits["train"].images())
    np.testing.assert_array_equal(zipped.splits["train"].labels, folder.splits["train"].labels)


def test_generic_hdf5_and_a_store_as_source(tmp_path):
    data = fake_mnist(n_train=15, n_test=5)
    with h5py.File(tmp_path / "plain.h5", "w") as f:
        for split, (images, labels) in data.items():
            f[f"{split}/images"] = images
            f[f"{split}/labels"] = labels
    convert(tmp_path / "plain.h5", tmp_path / "a.h5")
    assert_round_trip(tmp_path / "a.h5", data, source=tmp_path / "plain.h5")
    convert(tmp_path / "a.h5", tmp_path / "b.h5")  # a store converts to an equal store
    assert_round_trip(tmp_path / "b.h5", data, source=tmp_path / "plain.h5")


def test_valid_split_carved_by_seeded_shuffle(tmp_path):
    data = fake_mnist(n_train=40, n_test=5)
    folder = write_mnist_idx_folder(tmp_path / "idx", data)
    convert(folder, tmp_path / "a.h5", valid_size=10, valid_seed=7)
    convert(folder, tmp_path / "b.h5", valid_size=0.25, valid_seed=7)
    a, b = stored(tmp_path / "a.h5"), stored(tmp_path / "b.h5")
    assert [len(a[n][1]) for n in ("train", "valid", "test")] == [30, 10, 5]
    for name in a:
        np.testing.assert_array_equal(a[name][0], b[name][0])
    # a seed draws the validation split stratified by class (IDX keeps its order)
    chosen = stratified_pick(data["train"][1], 10, seed=7, stream=VALID_STREAM)
    np.testing.assert_array_equal(a["valid"][0], data["train"][0][chosen])
    np.testing.assert_array_equal(a["train"][1], data["train"][1][~chosen])
    convert(folder, tmp_path / "c.h5", valid_size=10, valid_seed=8)
    assert not np.array_equal(stored(tmp_path / "c.h5")["valid"][0], a["valid"][0])


def test_store_feeds_load_data(tmp_path):
    data = fake_mnist(n_train=24, n_test=6, side=4)
    convert(write_mnist_idx_folder(tmp_path / "idx", data), tmp_path / "s.h5", valid_size=6)
    splits = load_splits(tmp_path / "s.h5", normalize="dataset")
    assert [splits[n].n_examples for n in ("train", "valid", "test")] == [18, 6, 6]
    assert splits["train"].image_shape == (4, 4)
    codes = splits["test"].data.get_value(borrow=True)
    np.testing.assert_array_equal(codes.astype(np.int16) + 128, data["test"][0].reshape(6, -1))
    store = open_store(tmp_path / "s.h5")
    assert splits["train"].dataset_mean == pytest.approx(store.code_means["train"] + 128)
    (train_x, train_y), _, _ = load_data(tmp_path / "s.h5")
    assert train_y.get_value(borrow=True).shape[0] == 18


@pytest.mark.parametrize("name", ["store.npz", "store"])
def test_a_store_of_any_name_is_read_as_a_store(tmp_path, name):
    # (held whole it was read by its extension: "not a readable .npz
    # archive", "unknown kind of file"; streamed it was read)
    # (convert names it .h5; a user may rename it)
    data = fake_mnist(n_train=24, n_test=6, side=4)
    convert(write_mnist_idx_folder(tmp_path / "idx", data), tmp_path / "store.h5", valid_size=6)
    (tmp_path / "store.h5").rename(tmp_path / name)
    splits = load_splits(tmp_path / name)
    assert [splits[n].n_examples for n in ("train", "valid", "test")] == [18, 6, 6]
    codes = splits["test"].data.get_value(borrow=True)
    np.testing.assert_array_equal(codes.astype(np.int16) + 128, data["test"][0].reshape(6, -1))


def test_provenance_and_info(tmp_path, capsys):
    folder = write_mnist_idx_folder(tmp_path / "idx", fake_mnist())
    status, out, _ = run_cli(["convert", folder, "-o", tmp_path / "m.h5", "--valid-size", "2"],
                             capsys)
    assert status == 0
    with h5py.File(tmp_path / "m.h5") as f:
        assert f.attrs["format"] == "int8store" and f.attrs["format_version"] == 3
        assert f.attrs["command_line"].startswith("int8store convert ")
        assert f.attrs["source"] == str(folder) and f.attrs["created"].endswith("+00:00")
        assert f["train/x"].chunks[0] >= 1 and f["train/x"].dtype == np.int8
        assert f["train/y"].dtype == np.int32
    status, out, _ = run_cli(["info", tmp_path / "m.h5"], capsys)
    assert status == 0
    assert "encoding:     level / 256, level = code + 128" in out
    assert "train        10         160            640" in out
    status, out, _ = run_cli(["verify", tmp_path / "m.h5"], capsys)
    assert status == 0 and "OK: the manifest, the HDF5 metadata and all 6 datasets" in out


def test_a_path_whose_bytes_are_not_utf8_is_recorded_escaped(tmp_path):
    """A source or output named in Latin-1 (a file from an old archive or a
    Windows share) reached h5py as a lone surrogate: a UnicodeEncodeError
    traceback, and no store."""
    source = os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9.npz")
    np.savez(source, x_train=np.zeros((12, 4, 4), np.uint8), y_train=np.arange(12) % 2)
    out = os.fsdecode(os.fsencode(tmp_path) + b"/s\xff.h5")
    convert(source, out, command_line=f"int8store convert {source} -o {out}")
    store = open_store(out)
    assert store.provenance["source"].endswith("/caf\\xe9.npz")
    assert store.provenance["command_line"].endswith("/s\\xff.h5")
    # (a store from elsewhere whose manifest names a class so, converted again)
    rewrite_manifest(out, lambda m: m.update(label_names=["a\udcff", "b"]))
    convert(out, tmp_path / "again.h5")
    assert open_store(tmp_path / "again.h5").label_names == ["a\\xff", "b"]


# -- bad input ------------------------------------------------------------------

def assert_refused(capsys, args, *fragments, output):
    status, _, err = run_cli(args, capsys)
    assert status == 2
    assert err.startswith("error: ") and err.count("\n") == 1
    for fragment in fragments:
        assert str(fragment) in err
    assert leftovers(output.parent) == sorted(
        p.name for p in output.parent.iterdir() if not p.name.startswith(".") and p != output)
    assert not output.exists()


def test_truncated_idx(tmp_path, capsys):
    folder = write_mnist_idx_folder(tmp_path / "idx", fake_mnist())
    path = folder / "train-images-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes())[:-7]))
    out = tmp_path / "out" / "m.h5"
    out.parent.mkdir()
    assert_refused(capsys, ["convert", folder, "-o", out], path, "is truncated", output=out)
    assert leftovers(out.parent) == []


def test_wrong_magic(tmp_path, capsys):
    folder = write_mnist_idx_folder(tmp_path / "idx", fake_mnist())
    path = folder / "t10k-labels-idx1-ubyte.gz"
    path.write_bytes(gzip.compress(b"\x00\x00\x07\x01" + gzip.decompress(path.read_bytes())[4:]))
    out = tmp_path / "out" / "m.h5"
    out.parent.mkdir()
    assert_refused(capsys, ["convert", folder, "-o", out], path, "magic number 00000701", output=out)
    assert leftovers(out.parent) == []


def test_mixed_sizes_need_resize(tmp_path, capsys):
    from PIL import Image
    root = tmp_path / "imgs"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(root / "a" / "1.png")
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(root / "a" / "3.png")
    Image.fromarray(np.full((10, 6), 200, np.uint8)).save(root / "b" / "2.png")
    out = tmp_path / "m.h5"
    assert_refused(capsys, ["convert", root, "-o", out], root / "b" / "2.png",
                   "is 10x6 but", "--resize", output=out)
    status, _, _ = run_cli(["convert", root, "-o", out, "--resize", "4x5"], capsys)
    assert status == 0
    got = np.concatenate([stored(out)[split][0] for split in ("train", "valid", "test")])
    assert got.shape == (3, 4, 5)
    assert sorted(np.unique(image).tolist() for image in got) == [[0], [0], [200]]


def test_an_option_the_source_has_no_use_for_is_refused_not_ignored(tmp_path, capsys):
    # Each was accepted and did nothing: the images stayed 6x6, the keys unread.
    npz = tmp_path / "a.npz"
    np.savez(npz, x_train=np.zeros((12, 6, 6), np.uint8), y_train=np.arange(12) % 2,
             x_test=np.zeros((2, 6, 6), np.uint8), y_test=np.arange(2))
    folder = tmp_path / "imgs"
    write_image_folder(folder, np.zeros((12, 3, 3), np.uint8), np.arange(12) % 2)
    out = tmp_path / "out" / "s.h5"
    out.parent.mkdir()
    assert_refused(capsys, ["convert", npz, "-o", out, "--resize", "3x3"],
                   f"{npz}: resize (--resize) is for image files", "and this is an .npz",
                   output=out)
    assert_refused(capsys, ["convert", folder, "-o", out, "--keys", "train=a:b"],
                   f"{folder}: keys (--keys) is for the arrays of an .npz",
                   "this is a folder of class folders", output=out)
    store = tmp_path / "store.h5"
    assert run_cli(["convert", folder, "-o", store], capsys)[0] == 0
    grid = tmp_path / "out" / "g.png"
    for command in (["convert", store, "-o", out], ["preview", store, "-o", grid]):
        assert_refused(capsys, command + ["--keys", "train=a:b"],
                       "this is an int8store store, whose splits are its own", output=out)
        assert_refused(capsys, command + ["--resize", "2x2"], f"{store}: resize (--resize)",
                       output=out)
    # Several sources are IDX files; another kind among them is named as such.
    idx = write_mnist_idx_folder(tmp_path / "idx", fake_mnist())
    for sources, named in (([folder, npz], folder), ([*sorted(idx.iterdir())[:2], npz], npz)):
        assert_refused(capsys, ["convert", *sources, "-o", out], f"{named}: several sources are "
                       "read as the IDX files of one data set", output=out)


def test_non_image_file_in_a_class_folder(tmp_path, capsys):
    root = tmp_path / "imgs"
    write_image_folder(root, np.zeros((2, 3, 3), np.uint8), [0, 1])
    (root / "1" / "photo.heic").write_bytes(b"\x00")  # (maybe an image, in a format not read)
    (root / "1" / ".DS_Store").write_bytes(b"\x00")  # hidden files are skipped,
    (root / "0" / "Thumbs.db").write_bytes(b"\xd0\xcf")  # and what Windows leaves
    (root / "desktop.ini").write_text("[.ShellClassInfo]")
    out = tmp_path / "m.h5"
    assert_refused(capsys, ["convert", root, "-o", out], root / "1" / "photo.heic",
                   "not an image file", output=out)
    (root / "1" / "photo.heic").unlink()
    assert read_source(root).splits["train"].images().shape == (2, 3, 3)
    assert read_source(root).notes == ()
    (tmp_path / "downloads").mkdir()  # (a data set's archive, in a folder given for it)
    (tmp_path / "downloads" / "cifar-10-python.tar.gz").write_bytes(b"")
    assert_refused(capsys, ["convert", tmp_path / "downloads", "-o", out], "must hold only images "
                   "(a data set int8store reads itself? give it the file: "
                   f"{tmp_path / 'downloads' / 'cifar-10-python.tar.gz'})", output=out)


def test_cifar100s_archive_is_said_to_be_that(tmp_path, capsys):
    # it was refused as class folders holding a non-image file, and no more
    import io
    import tarfile

    path = tmp_path / "cifar-100-python.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for name in ("meta", "test", "train"):
            member = tarfile.TarInfo(f"cifar-100-python/{name}")
            member.size = 4
            archive.addfile(member, io.BytesIO(b"\x80\x02N."))
    assert_refused(capsys, ["convert", path, "-o", tmp_path / "c.h5"],
                   f"{path}:cifar-100-python/meta: not an image file",
                   "(CIFAR-100's archive? int8store reads CIFAR-10's only: save CIFAR-100's "
                   "images and labels in an .npz as x_train, y_train, x_test, y_test)",
                   output=tmp_path / "c.h5")


def test_documents_beside_the_images_are_skipped_with_a_note(tmp_path, capsys):
    # a downloaded set's README, LICENSE or labels.csv refused the whole set
    root = tmp_path / "imgs"
    write_image_folder(root, np.arange(12 * 3 * 3, dtype=np.uint8).reshape(12, 3, 3), [0, 1] * 6)
    images = read_source(root).splits["train"].images()
    for name in ("README.md", "LICENSE", "labels.csv", "1/notes.txt", "0/about.JSON"):
        (root / name).write_text("not an image")
    source = read_source(root)
    assert np.array_equal(source.splits["train"].images(), images)
    assert source.notes == (f"skipped 5 documents beside the images (no image is read from "
                            f"them): {root / '0' / 'about.JSON'}, {root / '1' / 'notes.txt'}, "
                            f"{root / 'LICENSE'} and 2 more",)
    assert main(["convert", str(root), "-o", str(tmp_path / "m.h5")]) == 0
    assert "note: skipped 5 documents beside the images" in capsys.readouterr().out
    for name in ("README.md", "LICENSE", "labels.csv", "1/notes.txt", "0/about.JSON"):
        (root / name).unlink()
    (root / "0").rename(tmp_path / "0")
    (root / "1").rename(tmp_path / "1")
    (root / "README").write_text("only a document")
    with pytest.raises(SourceFormatError, match="holds no images"):
        read_source(root)


def test_a_set_of_one_class_folder_converts_with_a_note(tmp_path, capsys):
    # (it converted and trained to 0 % error without a word: a folder of
    # images given where a folder of class folders was meant)
    root = tmp_path / "imgs"
    write_image_folder(root, np.zeros((6, 3, 3), np.uint8), [0] * 6, ["cat"])
    assert main(["convert", str(root), "-o", str(tmp_path / "m.h5")]) == 0
    assert (f"note: one class folder (cat): every image has label 0, and a classifier learns "
            f"nothing from one class; {root} should hold a folder of images for each class") \
        in capsys.readouterr().out
    write_image_folder(root, np.zeros((2, 3, 3), np.uint8), [0, 1], ["cat", "dog"])
    assert read_source(root).notes == ()


def test_an_empty_image_file_is_named_empty(tmp_path, capsys):
    root = tmp_path / "imgs"
    write_image_folder(root, np.zeros((2, 3, 3), np.uint8), [0, 1])
    (root / "1" / "empty.png").write_bytes(b"")
    assert_refused(capsys, ["convert", root, "-o", tmp_path / "m.h5"], root / "1" / "empty.png",
                   "cannot read this image: the file is empty (0 bytes)", output=tmp_path / "m.h5")


def _png16(rows, cols, channels):
    """A PNG of 16 bits a channel (Pillow writes no 16-bit colour)."""
    import struct
    import zlib

    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    colour_type = {1: 0, 3: 2}[channels]
    header = struct.pack(">IIBBBBB", cols, rows, 16, colour_type, 0, 0, 0)
    row = b"\x00" + b"\x12\x34" * cols * channels
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(row * rows)) + chunk(b"IEND", b""))


@pytest.mark.parametrize("channels", [1, 3])
def test_a_png_of_16_bits_a_channel_is_refused(tmp_path, capsys, channels):
    # (Pillow read 16-bit colour as 8-bit colour, its low bytes dropped, silently)
    from PIL import Image

    root = tmp_path / "imgs"
    write_image_folder(root, np.zeros((2, 3, 3), np.uint8), [0, 1])
    (root / "1" / "deep.png").write_bytes(_png16(3, 3, channels))
    assert Image.open(root / "1" / "deep.png").size == (3, 3)  # (a PNG Pillow reads)
    assert_refused(capsys, ["convert", root, "-o", tmp_path / "m.h5"], root / "1" / "deep.png",
                   "a PNG of 16 bits a channel; int8store stores 8-bit pixels",
                   output=tmp_path / "m.h5")


def test_unreadable_png(tmp_path, capsys):
    root = tmp_path / "imgs"
    write_image_folder(root, np.zeros((3, 3, 3), np.uint8), [0, 1, 1])
    broken = sorted((root / "1").iterdir())[-1]
    broken.write_bytes(broken.read_bytes()[:30])
    out = tmp_path / "m.h5"
    assert_refused(capsys, ["convert", root, "-o", out], broken, "cannot read this image: a "
                   "damaged or truncated PNG file", output=out)


@pytest.mark.parametrize("damage", ["garbage", "cut short"])
def test_a_damaged_image_is_named_with_what_to_do(tmp_path, capsys, damage):
    """Garbage under a .png name was "not one of the formats int8store
    decodes", as if a format were missing; a JPEG cut short said Pillow's
    words only (user trial): each now says the file may be damaged, and to
    export it again or remove it."""
    from PIL import Image

    root = tmp_path / "imgs"
    write_image_folder(root, np.zeros((3, 8, 8), np.uint8), [0, 1, 1])
    broken = root / "1" / "broken.jpg"
    if damage == "garbage":
        broken = root / "1" / "broken.png"
        broken.write_bytes(bytes(range(256)) * 4)
    else:
        Image.fromarray(np.arange(64 * 64 * 3, dtype=np.uint8).reshape(64, 64, 3)).save(broken)
        broken.write_bytes(broken.read_bytes()[:-200])
    out = tmp_path / "m.h5"
    assert_refused(capsys, ["convert", root, "-o", out], broken, "cannot read this image",
                   "export it again or remove it", output=out)


def test_image_and_label_counts_that_disagree(tmp_path, capsys):
    folder = tmp_path / "idx"
    folder.mkdir()
    write_idx(folder / "train-images-idx3-ubyte", np.zeros((5, 2, 2), np.uint8))
    write_idx(folder / "train-labels-idx1-ubyte", np.zeros(4, np.uint8))
    out = tmp_path / "m.h5"
    assert_refused(capsys, ["convert", *folder.iterdir(), "-o", out],
                   "holds 5 images but", "holds 4 labels", output=out)


def test_existing_output_needs_force(tmp_path, capsys):
    folder = write_mnist_idx_folder(tmp_path / "idx", fake_mnist())
    out = tmp_path / "m.h5"
    out.write_bytes(b"precious")
    status, _, err = run_cli(["convert", folder, "-o", out], capsys)
    assert status == 2 and f"{out}: already exists; pass --force" in err
    assert out.read_bytes() == b"precious"
    assert run_cli(["convert", folder, "-o", out, "--force"], capsys)[0] == 0
    assert open_store(out).splits == {"train": 10, "valid": 2, "test": 6}


def test_one_flipped_byte_is_caught_by_verify_and_load(tmp_path, capsys):
    folder = write_mnist_idx_folder(tmp_path / "idx", fake_mnist())
    out = tmp_path / "m.h5"
    convert(folder, out)
    with h5py.File(out, "r") as f:
        offset = f["test/x"].id.get_chunk_info(0).byte_offset
    flip_bit(out, offset + 3, 0)
    status, _, err = run_cli(["verify", out], capsys)
    assert status == 2 and "split 'test' chunk 0 (examples 0 to 5) does not match its checksum" in err
    with pytest.raises(StoreChecksumError, match="split 'test' chunk 0") as error:
        load_data(out)
    assert str(out) in str(error.value)
    open_store(out, verify=False)  # opening checks the metadata only


def test_a_label_name_edited_with_h5py_is_caught_on_opening(tmp_path):
    root = tmp_path / "imgs"
    write_image_folder(root, np.zeros((4, 3, 3), np.uint8), [0, 1, 0, 1], ["cat", "dog"])
    out = tmp_path / "m.h5"
    convert(root, out)
    with h5py.File(out, "r+") as f:
        f["label_names"][1] = "doe"
    with pytest.raises(StoreChecksumError, match="HDF5 metadata .* does not match its checksum"):
        load_splits(out)


def test_a_newer_format_is_refused_naming_the_release_that_reads_it(tmp_path, capsys):
    out = tmp_path / "m.h5"
    convert(write_mnist_idx_folder(tmp_path / "idx", fake_mnist()), out)
    rewrite_manifest(out, lambda m: m.update(format_version=4, requires_int8store="0.4.0",
                                             writer="int8store 0.4.0"))
    with pytest.raises(StoreFormatError, match=r"format version 4 is newer .* install int8store >= 0.4.0"):
        open_store(out)
    status, _, err = run_cli(["info", out], capsys)
    assert status == 2 and "int8store >= 0.4.0" in err


def test_a_newer_format_says_its_writer_escaped_and_short(tmp_path, capsys):
    """The release a newer store names reached the terminal as it was written
    (a store may come from elsewhere): its escape sequences ran, 80
    characters of each field or a newline in it were the line."""
    out = tmp_path / "m.h5"
    convert(write_mnist_idx_folder(tmp_path / "idx", fake_mnist()), out)
    rewrite_manifest(out, lambda m: m.update(format_version=4, writer="int8store\n9.0\x1b[2J",
                                             requires_int8store="9.0\x1b]0;owned\x07" * 40))
    status, _, err = run_cli(["info", out], capsys)
    assert status == 2 and err.count("\n") == 1 and err[:-1].isprintable(), err
    assert "written by int8store\\n9.0\\x1b[2J: install int8store >= 9.0\\x1b]0;owned" in err
    assert len(err) < 400, err


def test_not_a_store(tmp_path, capsys):
    (tmp_path / "x.h5").write_bytes(b"not hdf5 at all")
    status, _, err = run_cli(["verify", tmp_path / "x.h5"], capsys)
    assert status == 2 and "not an int8store file" in err


def test_interrupted_conversion_leaves_nothing(tmp_path, capsys, monkeypatch):
    from int8store.sources import Split
    folder = write_mnist_idx_folder(tmp_path / "idx", fake_mnist(n_train=50))
    original = Split.chunks

    def interrupted(self, rows):
        for i, chunk in enumerate(original(self, 5)):
            if i == 3:
                raise KeyboardInterrupt
            yield chunk

    monkeypatch.setattr(Split, "chunks", interrupted)
    out = tmp_path / "out" / "m.h5"
    out.parent.mkdir()
    status, _, err = run_cli(["convert", folder, "-o", out], capsys)
    assert status == 130 and "nothing was written" in err
    assert leftovers(out.parent) == []
    # over a store with --force: the store is kept, and said to be
    out.write_bytes(b"a store")
    status, _, err = run_cli(["convert", folder, "-o", out, "--force"], capsys)
    assert status == 130 and f"nothing was written; {out} is as it was" in err
    assert out.read_bytes() == b"a store" and leftovers(out.parent) == [out.name]


def test_an_interrupted_verify_says_nothing_of_writing(tmp_path, capsys, monkeypatch):
    # It said "interrupted by SIGINT: nothing was written": verify writes nothing.
    from int8store.store import reader

    store = convert(write_mnist_idx_folder(tmp_path / "idx", fake_mnist(n_train=50)),
                    tmp_path / "s.h5")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt("interrupted by SIGINT")

    monkeypatch.setattr(reader.Store, "verify", interrupted)
    status, _, err = run_cli(["verify", store], capsys)
    assert (status, err) == (130, "interrupted by SIGINT\n")

# -- memory ---------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.graph_free
def test_converting_an_image_folder_takes_bounded_memory(tmp_path):
    """Peak traced memory stays under a bound fixed in advance while the folder
    holds several times that bound in pixels, and does not grow with it.

    The bound: the conversion's chunks (1 MiB of images, their codes) and the
    store's one-chunk buffer (1 MiB) for each split being written (train and
    the validation and test examples carved from it), with room for the
    interpreter."""
    bound = 8 << 20
    rng = np.random.default_rng(0)
    # Warm up: the first conversion imports Pillow's plugins, h5py, ...
    write_image_folder(tmp_path / "warm", np.zeros((3, 4, 4), np.uint8), [0, 1, 1])
    convert(tmp_path / "warm", tmp_path / "warm.h5")
    peaks = {}
    for count in (1000, 3000):
        root = tmp_path / f"imgs{count}"
        write_image_folder(root, rng.integers(0, 256, (count, 96, 96), dtype=np.uint8),
                           rng.integers(0, 4, count))
        tracemalloc.start()
        convert(root, tmp_path / f"{count}.h5", chunk_bytes=1 << 20)
        peaks[count] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert 3000 * 96 * 96 > 3 * bound  # the big folder is far larger than the bound
    assert peaks[3000] < bound, peaks
    # What grows is the file list and labels: well under a kilobyte an image.
    assert peaks[3000] - peaks[1000] < 2000 * 1024, peaks


def write_source(kind, folder, images, labels):
    """``images`` (uint8) and ``labels`` as a source of the given kind."""
    half = len(images) // 2
    if kind == "idx.gz":
        return write_mnist_idx_folder(folder, {"train": (images[:half], labels[:half]),
                                               "test": (images[half:], labels[half:])})
    folder.mkdir()
    if kind == "npz":
        np.savez(folder / "d.npz", x_train=images[:half], y_train=labels[:half],
                 x_test=images[half:], y_test=labels[half:])
        return folder / "d.npz"
    if kind == "hdf5":
        with h5py.File(folder / "d.h5", "w") as f:
            f.create_dataset("x_train", data=images[:half], chunks=(64,) + images.shape[1:])
            f["y_train"], f["x_test"], f["y_test"] = labels[:half], images[half:], labels[half:]
        return folder / "d.h5"
    if kind == "store":
        convert(write_source("npz", folder / "npz", images, labels), folder / "s.h5")
        return folder / "s.h5"
    write_image_folder(folder / "imgs", images, labels % 4)
    if kind == "zip":
        return zip_folder(folder / "imgs", folder / "d.zip")
    return tar_folder(folder / "imgs", folder / "d.tar.gz")


@pytest.mark.slow
@pytest.mark.graph_free
@pytest.mark.parametrize("kind", ["idx.gz", "npz", "hdf5", "store", "zip", "tar.gz"])
def test_conversion_memory_is_bounded_by_the_chunk_size_for_every_format(tmp_path, kind):
    """Peak traced memory converting 24 MB of images with 1 MiB chunks stays
    under 8 MiB: a few chunks (pixels, codes, the store's buffers) and the
    reader's own state. (A pickle holds whole arrays, and is read whole: it is
    bounded by --max-memory instead.)"""
    rng = np.random.default_rng(1)
    count = 1500 if kind in ("zip", "tar.gz") else 2400
    images = rng.integers(0, 256, (count, 100, 100), dtype=np.uint8)
    source = write_source(kind, tmp_path / "src", images, rng.integers(0, 10, count, dtype=np.uint8))
    del images
    # A memory ceiling below the whole source does not refuse it (an .npz
    # member was held to it whole, though read a chunk at a time); this first
    # conversion also does the imports and fills the caches the traced one uses.
    convert(source, tmp_path / "capped.h5", chunk_bytes=1 << 20, max_memory="8MiB")
    tracemalloc.start()
    convert(source, tmp_path / "out.h5", chunk_bytes=1 << 20)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert count * 100 * 100 > 14 << 20
    assert peak < 8 << 20, peak
    assert sum(open_store(tmp_path / "out.h5").splits.values()) == count
    assert open_store(tmp_path / "capped.h5").splits == open_store(tmp_path / "out.h5").splits
    # nor with the default chunks, 16 MiB, which now shrink to an eighth of it
    # (every format refused a chunk of 16 MiB beyond the ceiling)
    convert(source, tmp_path / "default.h5", max_memory="8MiB")
    assert open_store(tmp_path / "default.h5").splits == open_store(tmp_path / "out.h5").splits


def test_a_validation_size_that_does_not_fit_is_refused(tmp_path):
    from int8store import ArgumentError
    folder = write_mnist_idx_folder(tmp_path / "idx", fake_mnist(n_train=12))
    for bad in (12, 1.5, 1.0, 0, 0.0):
        with pytest.raises(ArgumentError, match=rf"valid_size={bad} \(--valid-size\): expected an "
                                                r"integer count in 1\.\.11 \(of the 12"):
            convert(folder, tmp_path / "a.h5", valid_size=bad)
        with pytest.raises(ArgumentError, match=rf"valid_size={bad} \(--valid-size\): expected"):
            load_splits(folder, valid_size=bad)
    assert not (tmp_path / "a.h5").exists()


def test_what_macos_leaves_in_a_zip_is_skipped(tmp_path, capsys):
    # Finder's "Compress" adds __MACOSX/CLASS/._IMAGE (AppleDouble) beside the
    # class folders; it was taken for a class folder "with no image" and refused.
    root = tmp_path / "imgs"
    write_image_folder(root, np.zeros((4, 3, 3), np.uint8), [0, 1, 0, 1])
    for name in ("0", "1"):
        (root / "__MACOSX" / name).mkdir(parents=True)
        (root / "__MACOSX" / name / "._00000.png").write_bytes(b"\x00\x05\x16\x07")
    for source in (root, zip_folder(root, tmp_path / "imgs.zip"),
                   tar_folder(root, tmp_path / "imgs.tar.gz")):
        read = read_source(source)
        assert read.splits["train"].images().shape == (4, 3, 3)
        assert list(read.label_names) == ["0", "1"]
        out = tmp_path / f"{source.name}.h5"
        assert run_cli(["convert", source, "-o", out], capsys)[0] == 0
