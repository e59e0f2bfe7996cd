"""load_data over every format, and a clear error for every kind of bad input."""

import gzip
import io
import pickle

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from archives import (fake_mnist, fake_mnist_pickle_content, idx_bytes, python2_pickle,
                      write_mnist_idx_folder, write_pickle_gz)
from int8store import (DatasetNotFoundError, EncodingError, SourceFormatError,
                       UnsafePickleError, load_data, load_splits)
from int8store.backend import activate

lib = activate().lib
from int8store.sources import read_source
from int8store.sources.digits import DIGITS_SPLIT_SIZES
from int8store.sources.idx import parse_idx, read_idx


def values(view):
    return lib.function([], view)()


def stored_pixels(ds):
    return ds.encoding.levels(ds.data.get_value(borrow=True))


# -- IDX ------------------------------------------------------------------

idx_arrays = st.one_of(
    hnp.arrays(st.sampled_from([np.uint8, np.int8, np.dtype(">i2"), np.dtype(">i4")]),
               hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=5)),
    hnp.arrays(st.sampled_from([np.dtype(">f4"), np.dtype(">f8")]),
               hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
               elements=st.floats(-1e3, 1e3, width=32)),
)


@given(idx_arrays)
def test_idx_parser_round_trips(array):
    parsed = parse_idx(idx_bytes(array))
    assert parsed.shape == array.shape
    np.testing.assert_array_equal(parsed, array)


@given(st.binary(max_size=64))
def test_idx_parser_never_crashes_on_garbage(data):
    try:
        parse_idx(data, "garbage.idx")
    except SourceFormatError as error:
        assert "garbage.idx" in str(error)


def test_idx_wrong_magic_names_the_file(tmp_path):
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(b"\x12\x34\x08\x03" + bytes(20))
    with pytest.raises(SourceFormatError, match=f"{path}: not an IDX file: magic number 12340803"):
        read_idx(path)


@pytest.mark.parametrize("change,problem", [(-5, "is truncated"), (3, "has trailing bytes")])
def test_idx_size_that_disagrees_with_its_header(tmp_path, change, problem):
    data = idx_bytes(np.zeros((4, 3, 3), np.uint8))
    data = data[:change] if change < 0 else data + bytes(change)
    path = tmp_path / "t10k-images-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(data))
    with pytest.raises(SourceFormatError, match=r"shape \(4, 3, 3\) \(36 bytes of data\)") as error:
        read_idx(path)
    assert str(path) in str(error.value) and problem in str(error.value)


def test_truncated_gzip_names_the_file(tmp_path):
    path = tmp_path / "train-images-idx3-ubyte.gz"
    full = gzip.compress(idx_bytes(np.arange(600, dtype=np.uint8).reshape(6, 10, 10)))
    path.write_bytes(full[: len(full) // 2])
    with pytest.raises(SourceFormatError, match="truncated") as error:
        read_idx(path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize("gzipped", [True, False])
def test_idx_folder_loads_with_the_classic_validation_split(tmp_path, gzipped):
    data = fake_mnist(n_train=12, n_test=6)
    folder = write_mnist_idx_folder(tmp_path / "mnist", data, gzipped)
    splits = load_splits(folder)
    train_images, train_labels = data["train"]
    # A sixth of train becomes valid, from the end: 60,000 -> 50,000 + 10,000 for MNIST.
    assert [splits[n].n_examples for n in ("train", "valid", "test")] == [10, 2, 6]
    np.testing.assert_array_equal(stored_pixels(splits["train"]), train_images[:10].reshape(10, -1))
    np.testing.assert_array_equal(stored_pixels(splits["valid"]), train_images[10:].reshape(2, -1))
    np.testing.assert_array_equal(splits["valid"].y.get_value(), train_labels[10:])
    np.testing.assert_array_equal(values(splits["test"].x), data["test"][0].reshape(6, -1) / 256)
    assert splits["train"].image_shape == (4, 4)


def test_idx_folder_with_a_file_beside_its_gz_reads_them_only_if_they_agree(tmp_path):
    """``gunzip -k`` leaves both: the same data reads as one; different data
    (a second download of one file) would pair one's images with another's
    labels, so it is refused, naming both."""
    data = fake_mnist(n_train=12, n_test=6)
    folder = write_mnist_idx_folder(tmp_path / "mnist", data, gzipped=True)
    name = "train-images-idx3-ubyte"
    (folder / name).write_bytes(gzip.decompress((folder / (name + ".gz")).read_bytes()))
    splits = load_splits(folder)
    np.testing.assert_array_equal(stored_pixels(splits["train"]), data["train"][0][:10].reshape(10, -1))
    other = data["train"][0].copy()
    other[-1, -1, -1] ^= 1
    (folder / name).write_bytes(idx_bytes(other))
    with pytest.raises(SourceFormatError) as error:
        read_source(folder)
    assert str(error.value) == (f"{folder}: holds both {name} and {name}.gz, and they do not "
                                "hold the same data: move the one that is not to be read out "
                                "of the folder")


def test_idx_folder_with_missing_files(tmp_path):
    folder = write_mnist_idx_folder(tmp_path / "mnist", fake_mnist())
    (folder / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DatasetNotFoundError, match="missing MNIST IDX files: t10k-labels-idx1-ubyte"):
        load_data(folder)


def test_idx_image_and_label_counts_that_disagree(tmp_path):
    data = fake_mnist()
    data["test"] = (data["test"][0], data["test"][1][:-1])
    folder = write_mnist_idx_folder(tmp_path / "mnist", data)
    with pytest.raises(SourceFormatError, match="holds 6 images but .* holds 5 labels") as error:
        load_data(folder)
    assert "t10k-images-idx3-ubyte.gz" in str(error.value)


# -- mnist.pkl.gz -----------------------------------------------------------

def assert_same_as_pickle(splits, content):
    for name, (images, labels) in zip(("train", "valid", "test"), content):
        converted = values(splits[name].x)
        assert converted.dtype == lib.config.floatX
        converted = converted.astype(np.float32)  # float64 views hold the same values
        np.testing.assert_array_equal(converted.view(np.uint32), images.view(np.uint32))
        np.testing.assert_array_equal(splits[name].y.get_value(), labels)


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_mnist_pickle_is_reproduced_bit_for_bit(tmp_path, protocol):
    content = fake_mnist_pickle_content()
    path = write_pickle_gz(tmp_path / "mnist.pkl.gz", content, protocol)
    splits = load_splits(path)
    assert splits["train"].data.get_value(borrow=True).dtype == np.int8
    assert_same_as_pickle(splits, content)


def test_python2_pickle_is_read_as_latin1(tmp_path):
    content = fake_mnist_pickle_content(width=784)
    path = tmp_path / "mnist.pkl.gz"
    path.write_bytes(gzip.compress(python2_pickle(content)))
    splits = load_splits(path)
    assert_same_as_pickle(splits, content)
    assert splits["train"].image_shape == (28, 28)


@pytest.mark.parametrize("streamed", [1 << 20, 16])
def test_the_classic_pickle_is_read_straight_into_its_arrays(tmp_path, monkeypatch, streamed):
    from int8store.sources import py2pickle
    from int8store.sources.pickled import read_mnist_pickle, restricted_load

    from int8store.codes import precoded

    monkeypatch.setattr(py2pickle, "_STREAMED", streamed)  # 16: every array's data streams
    monkeypatch.setattr(precoded, "BLOCK_BYTES", 7)  # reads that split every value
    content = fake_mnist_pickle_content(n=(9, 4, 5), width=12)
    raw = python2_pickle(content)
    with io.BytesIO(raw) as f:
        reference = restricted_load(f)
    with io.BytesIO(raw) as f:
        fast = py2pickle.read_arrays(f, "test", len(raw), compressed=False)
    for (x, y), (fx, fy) in zip(reference, fast):
        if streamed == 16:  # the k/256 floats were read as their codes
            assert isinstance(fx, precoded.Precoded) and fx.encoding.divisor == 256
            fx = fx.decoded()
        assert fx.dtype == x.dtype and fy.dtype == y.dtype
        np.testing.assert_array_equal(fx, x)
        np.testing.assert_array_equal(fy, y)
    path = tmp_path / "mnist.pkl.gz"
    path.write_bytes(gzip.compress(raw)[:-30])
    with pytest.raises(SourceFormatError, match="truncated") as error:
        read_mnist_pickle(path)
    assert str(path) in str(error.value)


def test_other_pickles_fall_back_on_the_restricted_unpickler(monkeypatch):
    from int8store.sources import py2pickle

    for protocol in (2, 4):  # Python 3 writes other opcodes and globals
        with io.BytesIO(pickle.dumps(fake_mnist_pickle_content(), protocol=protocol)) as f:
            with pytest.raises(py2pickle.Unsupported):
                py2pickle.read_arrays(f, "test", 1 << 20, compressed=False)


class _RunsACommand:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os
        return (os.system, (f"touch {self.marker}",))


def test_pickle_with_a_forbidden_global_is_refused_and_not_run(tmp_path):
    marker = tmp_path / "pwned"
    content = fake_mnist_pickle_content()
    evil = (content[0], content[1], (content[2][0], _RunsACommand(marker)))
    path = write_pickle_gz(tmp_path / "mnist.pkl.gz", evil)
    with pytest.raises(UnsafePickleError, match=r"asks for posix\.system, which is not allowed: "
                                                r"only numpy arrays, dtypes, tuples and lists") as error:
        load_data(path)
    assert str(path) in str(error.value)
    assert not marker.exists()


def test_pickle_of_object_arrays_is_refused(tmp_path):
    path = tmp_path / "mnist.pkl"
    path.write_bytes(pickle.dumps(np.array([1, "a"], dtype=object), protocol=2))
    with pytest.raises(SourceFormatError, match="Python objects"):
        load_data(path)


@pytest.mark.parametrize("protocol", [2, 4])
def test_a_pickle_with_an_empty_split_is_named_so_not_called_unsafe(tmp_path, protocol):
    # Python 3 writes an empty array's data into a protocol-2 pickle as
    # bytes(), which the restricted unpickler refused as an unsafe global.
    train, _, test = fake_mnist_pickle_content()
    empty = (train[0][:0], train[1][:0])
    path = write_pickle_gz(tmp_path / "mnist.pkl.gz", (train, empty, test), protocol)
    with pytest.raises(SourceFormatError, match="split 'valid' holds no examples"):
        load_data(path)
    sneaky = tmp_path / "bytes.pkl"  # bytes(5) is refused still: only bytes() is empty
    sneaky.write_bytes(b"\x80\x02c__builtin__\nbytes\nK\x05\x85R.")
    with pytest.raises(SourceFormatError, match=r"bytes\(\) is allowed only without arguments"):
        load_data(sneaky)


def test_truncated_pickle_gz(tmp_path):
    path = write_pickle_gz(tmp_path / "mnist.pkl.gz", fake_mnist_pickle_content())
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])
    with pytest.raises(SourceFormatError, match="truncated") as error:
        load_data(path)
    assert str(path) in str(error.value)


def test_pickle_with_the_wrong_structure(tmp_path):
    path = write_pickle_gz(tmp_path / "mnist.pkl.gz", (np.zeros((2, 2)), np.zeros(2)))
    with pytest.raises(SourceFormatError, match="three \\(images, labels\\) pairs"):
        load_data(path)


def test_pickle_counts_that_disagree(tmp_path):
    content = list(fake_mnist_pickle_content())
    content[1] = (content[1][0], content[1][1][:-1])
    path = write_pickle_gz(tmp_path / "mnist.pkl.gz", tuple(content))
    with pytest.raises(SourceFormatError, match="split 'valid' has 4 images but 3 labels") as error:
        load_data(path)
    assert str(path) in str(error.value)


# -- npz ------------------------------------------------------------------

def test_npz_keras_style_keys(tmp_path):
    data = fake_mnist()
    path = tmp_path / "mnist.npz"
    np.savez(path, x_train=data["train"][0], y_train=data["train"][1],
             x_test=data["test"][0], y_test=data["test"][1])
    splits = load_splits(path, valid_size=3)
    assert [splits[n].n_examples for n in ("train", "valid", "test")] == [9, 3, 6]
    np.testing.assert_array_equal(stored_pixels(splits["test"]), data["test"][0].reshape(6, -1))


def test_npz_with_a_validation_split_and_other_names(tmp_path):
    rng = np.random.default_rng(1)
    arrays = {f"{split}_{role}": (rng.integers(0, 256, (n, 3, 3), dtype=np.uint8) if role == "images"
                                  else rng.integers(0, 5, n))
              for split, n in (("train", 7), ("validation", 2), ("test", 3))
              for role in ("images", "labels")}
    path = tmp_path / "set.npz"
    np.savez(path, **arrays)
    splits = load_splits(path)
    np.testing.assert_array_equal(stored_pixels(splits["valid"]),
                                  arrays["validation_images"].reshape(2, -1))


def test_npz_keys_guessed_from_shapes_or_refused_when_ambiguous(tmp_path):
    one_pair = tmp_path / "pair.npz"
    np.savez(one_pair, a=np.zeros((3, 2, 2), np.uint8), b=np.arange(3))
    source = read_source(one_pair)
    assert list(source.splits) == ["train"] and source.splits["train"].count == 3
    # one pair: a test and a validation split are cut from it (it was refused)
    assert [len(y.get_value(borrow=True)) for _, y in load_data(one_pair)] == [1, 1, 1]
    ambiguous = tmp_path / "odd.npz"
    np.savez(ambiguous, a=np.zeros((2, 2)), b=np.zeros(2), c=np.zeros((2, 3)))
    with pytest.raises(SourceFormatError, match=r"several image/label pairs .* it holds a \(2, 2\), "
                                                r"b \(2,\), c \(2, 3\); .*--keys train=IMAGES:LABELS") as error:
        load_data(ambiguous)
    assert str(ambiguous) in str(error.value)
    given = read_source(ambiguous, keys={"train": ("c", "b")})
    assert given.splits["train"].image_shape == (3,)


def test_float_data_that_int8_cannot_hold_exactly(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "noise.npz"
    np.savez(path, x_train=rng.normal(size=(40, 10)), y_train=np.zeros(40, int),
             x_test=rng.normal(size=(5, 10)), y_test=np.zeros(5, int))
    with pytest.raises(EncodingError, match="450 distinct values") as error:
        load_data(path)
    assert str(path) in str(error.value)


def test_labels_that_do_not_fit_int32(tmp_path):
    path = tmp_path / "big-labels.npz"
    np.savez(path, x_train=np.zeros((6, 2, 2), np.uint8), y_train=np.array([0, 1, 2**40, 3, 4, 5]),
             x_test=np.zeros((2, 2, 2), np.uint8), y_test=np.zeros(2, int))
    with pytest.raises(EncodingError, match=r"\(train\) labels: range from 0 to 1099511627776, which does not fit int32") as error:
        load_data(path)
    assert str(path) in str(error.value)


def test_npz_counts_that_disagree(tmp_path):
    path = tmp_path / "short.npz"
    np.savez(path, x_train=np.zeros((6, 2, 2), np.uint8), y_train=np.zeros(5, int),
             x_test=np.zeros((2, 2, 2), np.uint8), y_test=np.zeros(2, int))
    with pytest.raises(SourceFormatError, match="split 'train' has 6 images but 5 labels"):
        load_data(path)


# -- digits and paths ---------------------------------------------------------

def test_digits_split_three_ways_deterministically():
    first, second = load_splits("digits"), load_splits("digits")
    assert tuple(first[n].n_examples for n in ("train", "valid", "test")) == DIGITS_SPLIT_SIZES
    for name in first:
        np.testing.assert_array_equal(first[name].data.get_value(), second[name].data.get_value())
    assert first["train"].encoding.divisor == 16 and first["train"].image_shape == (8, 8)
    train = values(first["train"].x)
    assert train.min() == 0.0 and train.max() == 1.0
    from sklearn.datasets import load_digits
    digits = load_digits()
    all_labels = np.concatenate([first[n].y.get_value() for n in ("train", "valid", "test")])
    np.testing.assert_array_equal(np.sort(all_labels), np.sort(digits.target))


def test_the_digits_are_read_as_scikit_learn_reads_them():
    # (read from scikit-learn's own file, without importing sklearn.datasets:
    # that import cost about 2 s of CPU at every start of a tutorial on digits)
    from sklearn.datasets import load_digits

    from int8store.sources.digits import _bundled_digits

    images, labels = _bundled_digits()
    digits = load_digits()
    np.testing.assert_array_equal(images, digits.images)
    np.testing.assert_array_equal(labels, digits.target)


def test_unknown_path_and_kind(tmp_path, monkeypatch):
    with pytest.raises(DatasetNotFoundError, match="no such file or folder. Expected"):
        load_data(tmp_path / "nothing.npz")
    monkeypatch.chdir(tmp_path)  # (a mistyped name is offered the one it is near)
    for typed, meant in (("mnsit", "mnist"), ("Digit", "digits"), ("cifar-10", "cifar10")):
        with pytest.raises(DatasetNotFoundError, match=f"^{typed}( or .*)?: no such file or folder "
                           f"\\(did you mean '{meant}'\\?\\). Expected 'digits'"):
            load_data(typed)
    with pytest.raises(DatasetNotFoundError, match="^elsewhere( or .*)?: no such file or folder. "
                       "Expected"):
        load_data("elsewhere")
    odd = tmp_path / "data.csv"
    odd.write_text("1,2\n")
    with pytest.raises(SourceFormatError, match="unknown kind of file"):
        load_data(odd)


def test_reading_the_classic_pickle_holds_its_images_once_and_loading_keeps_only_codes(tmp_path):
    import tracemalloc

    from int8store.sources.pickled import read_mnist_pickle

    rng = np.random.default_rng(0)
    content = tuple(((rng.integers(0, 256, (n, 784)) / 256).astype(np.float32),
                     rng.integers(0, 10, n).astype(np.int64)) for n in (4800, 1200, 1200))
    path = tmp_path / "mnist.pkl.gz"
    path.write_bytes(gzip.compress(python2_pickle(content), compresslevel=1))
    images = sum(x.nbytes for x, _ in content)
    del content
    from int8store.backend import activate
    activate()  # Aesara's set-up is not the data's
    tracemalloc.start()
    source = read_mnist_pickle(path)
    peak = tracemalloc.get_traced_memory()[1]
    del source
    tracemalloc.reset_peak()
    splits = load_splits(path)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    # Python's unpickler holds each array's bytes twice while reading it (2x);
    # here the images once, plus a decompression block or two.
    assert peak < 1.5 * images, (peak, images)
    # After loading: the int8 codes (a quarter of the float32 bytes) and little else.
    codes = sum(ds.nbytes for ds in splits.values())
    assert codes * 4 == images and held < codes + images // 8, (held, codes)


def test_channels_first_images_are_refused_with_the_move_that_fixes_them(tmp_path):
    # (N, 3, 6, 6) was stored as 3 rows of 6 pixels of 6 channels, without a word.
    images = np.arange(12 * 3 * 6 * 6, dtype=np.uint8).reshape(12, 3, 6, 6)
    path = tmp_path / "nchw.npz"
    np.savez(path, x_train=images, y_train=np.arange(12) % 2)
    with pytest.raises(SourceFormatError, match=r"train images have shape \(12, 3, 6, 6\), "
                                                r"channels first .*moveaxis\(images, 1, -1\)"):
        read_source(str(path))
    np.savez(path, x_train=np.moveaxis(images, 1, -1), y_train=np.arange(12) % 2)
    assert read_source(str(path)).splits["train"].image_shape == (6, 6, 3)
    np.savez(path, x_train=images[:, :, :4, :3], y_train=np.arange(12) % 2)  # 3x4 colour: kept
    assert read_source(str(path)).splits["train"].image_shape == (3, 4, 3)


@settings(max_examples=60, deadline=None)
@given(levels=st.lists(st.integers(0, 255), min_size=1, max_size=40),
       divisors=st.lists(st.sampled_from([256, 255, 0]), min_size=1, max_size=4),
       dtype=st.sampled_from(["float32", "float64"]), block_bytes=st.sampled_from([8, 24, 1 << 20]))
def test_floats_encoded_as_read_are_the_codes_of_the_whole_array(levels, divisors, dtype,
                                                                 block_bytes):
    """read_encoded gives, block by block, what encoding the whole array
    under the first candidate that holds it gives (the planning step's
    choice), or the floats themselves where none holds them: here runs of
    k/256, k/255 (0: a value neither holds) values, in any order."""
    from int8store.codes import precoded
    from int8store.codes.encoding import encode
    from int8store.codes.survey import float_candidates
    from int8store.errors import EncodingError

    runs = [np.array(levels, dtype) / d if d else np.array(levels, dtype) / 256 + 1e-3
            for d in divisors]
    values = np.concatenate(runs).astype(dtype).reshape(-1, 1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(precoded, "BLOCK_BYTES", block_bytes)
        read = precoded.read_encoded(io.BytesIO(values.tobytes()).readinto, values.shape,
                                     dtype, "test")
    expected = None
    for candidate in float_candidates(None, [dtype]):
        try:
            expected = candidate, encode(values, candidate)
            break
        except EncodingError:
            continue
    if expected is None:
        assert isinstance(read, np.ndarray) and read.dtype == dtype
        np.testing.assert_array_equal(read, values)
    else:
        assert isinstance(read, precoded.Precoded)
        assert read.codes_under(expected[0]) is not None
        np.testing.assert_array_equal(read.codes, expected[1])
        np.testing.assert_array_equal(read.decoded(), values)
    with pytest.raises(EOFError, match="test: the file is truncated"):
        precoded.read_encoded(io.BytesIO(values.tobytes()[:-1]).readinto, values.shape, dtype,
                              "test")


def test_codes_read_under_one_candidate_are_made_again_under_the_next(monkeypatch):
    """Zeros fit k/256 and k/255; a later 1.0 only k/255: the codes so far
    are made again under it. A later 0.3 fits none: the floats come back."""
    from int8store.codes import precoded

    monkeypatch.setattr(precoded, "BLOCK_BYTES", 8)
    zeros_then_255ths = np.r_[np.zeros(5), np.array([255, 128, 3]) / 255].astype(np.float32)
    read = precoded.read_encoded(io.BytesIO(zeros_then_255ths.tobytes()).readinto, (8,),
                                 np.float32, "test")
    assert isinstance(read, precoded.Precoded) and read.encoding.divisor == 255
    np.testing.assert_array_equal(read.decoded(), zeros_then_255ths)
    then_none = np.r_[zeros_then_255ths, 0.3].astype(np.float32)
    read = precoded.read_encoded(io.BytesIO(then_none.tobytes()).readinto, (9,), np.float32,
                                 "test")
    assert isinstance(read, np.ndarray)
    np.testing.assert_array_equal(read, then_none)


@pytest.mark.parametrize("text", [b"hello world\n", b"cat dog\n", b"1,2,3\n"])
@pytest.mark.parametrize("gzipped", [False, True])
def test_a_text_file_named_as_a_pickle_is_said_to_be_text(tmp_path, text, gzipped):
    # (it was "not a valid pickle of numpy arrays (KeyError 101)", or "the
    # pickle asks for at dog.": the text read as opcodes)
    path = tmp_path / ("notes.pkl.gz" if gzipped else "notes.pkl")
    path.write_bytes(gzip.compress(text) if gzipped else text)
    start = text.decode().strip()
    with pytest.raises(SourceFormatError, match=f"^{path}: holds text, not a pickle \\(it starts "
                       f"'{start}'\\): expected the pickled \\(images, labels\\) pairs"):
        read_source(path)
