"""``int8store preview``: a PNG grid, one row per class, whose pixels are the
images training reads."""

import numpy as np
import pytest
from PIL import Image

from archives import (cifar10_members, fake_cifar10, write_cifar10_archive, write_image_folder,
                      zip_folder)
from int8store import open_store
from int8store.cli import main
from int8store.preview import BACKGROUND, preview

pytestmark = pytest.mark.graph_free


def cells(path, result):
    """The grid's cells as arrays, per class row, enlarged pixels taken back."""
    grid = np.asarray(Image.open(path))
    rows, cols = result.shape[:2]
    out = []
    for row in range(len(result.classes)):
        line = []
        for column in range(result.count):
            top, left = result.cell(row, column)
            cell = grid[top:top + rows * result.scale, left:left + cols * result.scale]
            small = cell[::result.scale, ::result.scale]
            # every enlarged pixel is a block of one value
            assert np.array_equal(np.repeat(np.repeat(small, result.scale, 0), result.scale, 1), cell)
            line.append(small)
        out.append(line)
    return grid, out


def first_of_each_class(images, labels, count):
    picked = {}
    for image, label in zip(images, labels):
        picked.setdefault(int(label), [])
        if len(picked[int(label)]) < count:
            picked[int(label)].append(image)
    return picked


def test_preview_of_a_converted_image_archive_shows_its_exact_pixels(tmp_path, capsys):
    rng = np.random.default_rng(5)
    images = rng.integers(0, 256, (30, 6, 9), dtype=np.uint8)  # not square: orientation shows
    labels = np.arange(30) % 3
    order = write_image_folder(tmp_path / "imgs", images, labels, ["cat", "dog", "eel"])
    archive = zip_folder(tmp_path / "imgs", tmp_path / "pets.zip")
    store = tmp_path / "pets.h5"
    assert main(["convert", str(archive), "-o", str(store)]) == 0
    train = open_store(store).read_split("train")
    for source, out in ((store, tmp_path / "store.png"), (archive, tmp_path / "zip.png")):
        assert main(["preview", str(source), "-o", str(out), "--count", "4"]) == 0
        said = capsys.readouterr().out
        assert "3 classes x 4 images of split 'train'" in said and "pixels as stored" in said
        result = preview(source, tmp_path / "again.png", count=4, force=True)
        grid, shown = cells(out, result)
        assert result.classes == ["cat", "dog", "eel"] and result.scale == 4
        assert grid.shape == (1 + 3 * (6 * 4 + 1), result.margin + 1 + 4 * (9 * 4 + 1))
        expected = first_of_each_class(train[0].astype(np.int16) + 128, train[1], 4)
        for label, row in enumerate(shown):
            assert len(expected[label]) == 4
            for cell, image in zip(row, expected[label]):
                np.testing.assert_array_equal(cell, image)  # the stored bytes, not a rendering
        # and those are the source's own pixels, each shown in its class's row
        source_pixels = {images[i].tobytes(): labels[i] for i in order}
        for label, row in enumerate(shown):
            assert all(source_pixels[cell.astype(np.uint8).tobytes()] == label for cell in row)


def test_preview_of_the_digits_scales_their_17_levels(tmp_path):
    store = tmp_path / "digits.h5"
    assert main(["convert", "digits", "-o", str(store)]) == 0
    codes, labels = open_store(store).read_split("valid")
    for source in ("digits", store):
        out = tmp_path / "digits.png"
        result = preview(source, out, split="valid", count=5, force=True)
        assert result.classes == list(range(10)) and "levels 0..16 scaled to 0..255" in result.shown
        grid, shown = cells(out, result)
        assert grid.shape == (1 + 10 * (8 * 4 + 1), result.margin + 1 + 5 * (8 * 4 + 1))
        expected = first_of_each_class(codes.reshape(-1, 8, 8), labels, 5)
        for label, row in enumerate(shown):
            for cell, image in zip(row, expected[label]):
                levels = image.astype(np.int16) + 128
                assert levels.max() <= 16
                np.testing.assert_array_equal(cell, np.rint(levels * 255 / 16))


def test_the_line_that_describes_a_grid_of_many_classes_fits_a_screen(tmp_path, capsys):
    """300 class folders of an image or two: the line named every class three
    times (its rows, those the split lacks, those with fewer images), 8,515
    characters."""
    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(300), [2 if c % 3 == 0 else 1 for c in range(300)])
    write_image_folder(tmp_path / "imgs", rng.integers(0, 256, (len(labels), 2, 2), np.uint8),
                       labels, [f"class_{c:04d}" for c in range(300)])
    assert main(["preview", str(tmp_path / "imgs"), "-o", str(tmp_path / "g.png")]) == 0
    said = capsys.readouterr().out
    assert said.count("\n") == 1 and len(said) < 800, (len(said), said[:200])
    assert "one row per class (class_0000, class_0001," in said and ", and 290 more)" in said


def test_a_class_with_fewer_images_leaves_its_cells_empty(tmp_path):
    images = np.full((7, 4, 4), 200, np.uint8)  # (a test and a validation image cut from "many")
    write_image_folder(tmp_path / "imgs", images, [0, 0, 0, 0, 0, 0, 1], ["many", "one"])
    result = preview(tmp_path / "imgs", tmp_path / "g.png", count=3)
    _, shown = cells(tmp_path / "g.png", result)
    assert [int(cell.min()) for cell in shown[1]] == [200, BACKGROUND, BACKGROUND]
    # ...and says so, not "2 classes x 3 images"
    assert result.fewer == {"one": 1}
    assert "2 classes x up to 3 images" in result.describe()
    assert "; 1 class has fewer than 3: one (1)" in result.describe()


def test_preview_refuses_what_it_cannot_show_in_one_line(tmp_path, capsys):
    out = tmp_path / "g.png"
    out.write_bytes(b"mine")
    assert main(["preview", "digits", "-o", str(out)]) == 2
    assert "exists" in capsys.readouterr().err and out.read_bytes() == b"mine"
    np.savez(tmp_path / "flat.npz", x_train=np.zeros((4, 10), np.uint8), y_train=np.zeros(4, np.uint8))
    assert main(["preview", str(tmp_path / "flat.npz"), "-o", str(tmp_path / "f.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "flat vectors" in err
    # Options that would do nothing, or a name the PNG would belie.
    assert main(["preview", "digits", "-o", str(tmp_path / "e.png"), "--epoch", "3"]) == 2
    assert "--epoch) chooses the epoch of an augmented preview" in capsys.readouterr().err
    for name in ("g.jpg", "g.txt"):  # (g.txt was written, a PNG: user trial)
        assert main(["preview", "digits", "-o", str(tmp_path / name)]) == 2
        assert f"{name}: the grid is written as PNG" in capsys.readouterr().err
        assert not (tmp_path / name).exists()
    # A grid Pillow would not open again (8.2 gigapixels took 16 GB to write), or
    # one over the memory ceiling.
    assert main(["preview", "digits", "-o", str(tmp_path / "big.png"), "--scale", "1000"]) == 2
    err = capsys.readouterr().err
    assert "would be 64009x80011 pixels, more than Pillow opens again" in err
    assert main(["preview", "digits", "-o", str(tmp_path / "big.png"), "--scale", "40",
                 "--max-memory", "10MiB"]) == 2
    assert "a grid of 2569x3211 pixels needs 15.7 MiB in memory" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flat.npz", "g.png"]


def test_preview_never_writes_over_the_source_it_shows(tmp_path, capsys):
    assert main(["convert", "digits", "-o", str(tmp_path / "d.h5")]) == 0
    before = (tmp_path / "d.h5").read_bytes()
    capsys.readouterr()
    assert main(["preview", str(tmp_path / "d.h5"), "-o", str(tmp_path / "d.h5"), "--force"]) == 2
    assert "d.h5: is the source it would show" in capsys.readouterr().err
    assert (tmp_path / "d.h5").read_bytes() == before


def test_preview_takes_the_lossy_option_its_refusal_names(tmp_path, capsys):
    values = np.random.default_rng(2).random((20, 6, 6)).astype(np.float32)
    np.savez(tmp_path / "f.npz", x_train=values, y_train=np.arange(20) % 2)
    assert main(["preview", str(tmp_path / "f.npz"), "-o", str(tmp_path / "f.png")]) == 2
    assert "(command line: --lossy)" in capsys.readouterr().err
    assert main(["preview", str(tmp_path / "f.npz"), "-o", str(tmp_path / "f.png"), "--lossy"]) == 0
    assert "2 classes x up to 8 images" in capsys.readouterr().out


def test_the_grid_is_as_wide_as_the_images_there_are(tmp_path):
    result = preview("digits", tmp_path / "g.png", count=100_000)  # (at most 133 of a class)
    with Image.open(tmp_path / "g.png") as grid:
        assert grid.size[0] < 133 * (8 * 4 + 4) + 200  # (not 100,000 cells wide)
    assert "10 classes x up to 100,000 images" in result.describe()


def test_a_colour_store_is_drawn_in_colour_with_its_exact_pixels(tmp_path, capsys):
    archive = write_cifar10_archive(tmp_path / "cifar-10-python.tar.gz",
                                    cifar10_members(fake_cifar10(sizes=(6, 6, 6, 6, 6, 5))))
    store = tmp_path / "cifar.h5"
    assert main(["convert", str(archive), "-o", str(store)]) == 0
    codes, labels = open_store(store).read_split("train")
    for source in (store, archive):
        out = tmp_path / "colour.png"
        result = preview(source, out, count=2, force=True)
        assert Image.open(out).mode == "RGB" and result.shape == (32, 32, 3) and result.scale == 1
        assert result.classes[:2] == ["airplane", "automobile"]
        grid, shown = cells(out, result)
        assert grid.shape == (1 + 10 * 33, result.margin + 1 + 2 * 33, 3)
        expected = first_of_each_class(codes.astype(np.int16) + 128, labels, 2)
        for label, row in enumerate(shown):
            for column, cell in enumerate(row):
                if column < len(expected.get(label, [])):
                    np.testing.assert_array_equal(cell, expected[label][column])  # R, G, B as stored
                else:
                    assert (cell == BACKGROUND).all()


def test_one_channel_is_drawn_grey_and_other_channel_counts_are_refused(tmp_path, capsys):
    rng = np.random.default_rng(1)
    for channels in (1, 2, 4):
        images = rng.integers(0, 256, (6, 5, 4, channels), dtype=np.uint8)
        np.savez(tmp_path / f"c{channels}.npz", x_train=images, y_train=np.arange(6) % 2)
    result = preview(tmp_path / "c1.npz", tmp_path / "c1.png", count=3)
    assert Image.open(tmp_path / "c1.png").mode == "L"
    _, shown = cells(tmp_path / "c1.png", result)
    np.testing.assert_array_equal(shown[1][0], images_of(tmp_path / "c1.npz")[1, :, :, 0])
    for channels in (2, 4):
        out = tmp_path / f"c{channels}.png"
        assert main(["preview", str(tmp_path / f"c{channels}.npz"), "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"5x4x{channels}" in err and "three channels" in err
        assert not out.exists()


def images_of(npz):
    with np.load(npz) as f:
        return f["x_train"]


def test_a_preview_of_a_source_shows_the_split_convert_gives_with_the_same_options(tmp_path,
                                                                                 capsys):
    """A tree of class folders (sorted by class: shuffled, cut stratified by
    the seed): its preview with convert's planning options is the preview of
    the store converted with them, pixel for pixel."""
    rng = np.random.default_rng(5)
    folder = tmp_path / "tree"
    write_image_folder(folder, rng.integers(0, 256, (60, 6, 5), dtype=np.uint8), np.arange(60) % 3)
    options = ["--seed", "3", "--valid-size", "0.25", "--test-size", "12"]
    assert main(["convert", str(folder), "-o", str(tmp_path / "s.h5")] + options) == 0
    for split in ("train", "valid", "test"):
        shown = {}
        for name, source, extra in (("store", tmp_path / "s.h5", []),
                                    ("source", folder, options),
                                    ("default", folder, [])):
            out = tmp_path / f"{split}-{name}.png"
            assert main(["preview", str(source), "-o", str(out), "--split", split,
                         "--count", "3"] + extra) == 0
            shown[name] = np.asarray(Image.open(out))
        np.testing.assert_array_equal(shown["source"], shown["store"])
        assert not np.array_equal(shown["default"], shown["store"])  # (the options took effect)
    capsys.readouterr()
    assert main(["preview", str(tmp_path / "s.h5"), "-o", str(tmp_path / "x.png"),
                 "--valid-size", "5", "--seed", "2"]) == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 's.h5'}: a store keeps the splits and the order it was converted "
        "with; --valid-size, --seed plan those of the sources convert reads: leave them out\n")
    assert main(["preview", str(tmp_path / "s.h5"), "-o", str(tmp_path / "x.png"),
                 "--keep-order"]) == 2
    assert capsys.readouterr().err.endswith(
        "--keep-order plans those of the sources convert reads: leave it out\n")


def test_a_class_named_with_a_newline_or_at_length_is_drawn_on_one_line(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (4, 8, 8), dtype=np.uint8)
    names = ["two\nlines", "x" * 250]
    write_image_folder(tmp_path / "tree", images, [0, 1, 0, 1], names)
    result = preview(tmp_path / "tree", tmp_path / "g.png")
    assert sorted(result.classes) == sorted(names)
    assert result.margin < 450  # (the long name shortened, as describe() names it)
    assert Image.open(tmp_path / "g.png").size[1] > 0
