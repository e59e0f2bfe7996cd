"""Augmentation from the int8 codes, inside the step (SharedDataset.augment):
the definition (int8store.augment.draws) in numpy, JAX and C gives the same
bytes; an augmented minibatch is its plain minibatch augmented, keyed by
(seed, epoch, step, example), resident, shuffled, over several devices and
in many steps a call; what each augmentation does, pixel for pixel;
evaluation untouched; the tutorial's --augment the same in C and JAX modes."""

import importlib.util
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, strategies as st

import convolutional_mlp
import logistic_sgd
from conftest import ROOT
from int8store import (ArgumentError, SharedDataset, function_mode, keep_on_device, place,
                       tensor_library)
from int8store.training import Augmentation, steps_function
from int8store.augment.draws import augment, example_parameters

pytestmark = pytest.mark.floatx_blind

has_jax = importlib.util.find_spec("jax") is not None
needs_jax = pytest.mark.skipif(not has_jax, reason="JAX is not installed in this environment")
MODES = ["c", pytest.param("jax", marks=needs_jax)]
theano = tensor_library()
T = theano.tensor
SPECS = ["translate=2", "translate=2,fill=edge,flip", "translate=3,fill=reflect,flip=alternate",
         "cutout=4", "translate=2,flip,cutout=3"]


def reference(codes, text, grid, seed, epoch, step, fill=-128):
    with np.errstate(over="ignore"):
        return augment(np.asarray(codes), Augmentation.parse(text), grid, seed,
                       np.uint32(epoch & 0xFFFFFFFF), np.uint32(step & 0xFFFFFFFF), fill, np)


def random_codes(batch, grid, seed=0):
    return np.random.default_rng(seed).integers(-128, 128, (batch, int(np.prod(grid))),
                                                dtype=np.int8)


# -- what an augmentation is ------------------------------------------------

def test_the_text_a_command_line_takes():
    assert Augmentation.parse("translate=2,flip,cutout=8") == Augmentation(2, "zero", "random", 8)
    assert not Augmentation.parse("")
    for text, message in [("rotate=3", "not understood"), ("translate=two", "whole number"),
                          ("flip=sometimes", "one of none, random, alternate"),
                          # (flip= was taken as flip: an unfinished flip=alternate?)
                          ("flip=", "'flip=' not understood"),
                          ("translate=1,translate=2", "given twice"), ("cutout=-1", "0 or more"),
                          # a fill with nothing to fill was taken, and did nothing
                          ("fill=edge,flip", "fill=edge fills the border a translation uncovers"),
                          ("translate=0,fill=reflect", "give translate=R too")]:
        with pytest.raises(ArgumentError, match=message):
            Augmentation.parse(text)
    with pytest.raises(ArgumentError, match="by up to 8 pixels leaves nothing of 8x8 images"):
        Augmentation(translate=8).grid((8, 8))
    assert Augmentation(translate=1).describe() == "translate by up to 1 pixel (zero fill)"
    with pytest.raises(ArgumentError, match="larger than the 8x8 images"):
        Augmentation(cutout=9).grid((8, 8, 3))


def test_spaces_around_a_value_a_flip_that_does_nothing_and_one_pixel_images():
    """"translate = 2" was taken and "fill = edge" refused (" edge" is no
    fill); --augment flip=none trained without augmentation, saying
    "augmenting the training minibatches: none", where cutout=0 is refused;
    a translation of 1xN images was told to "use less than 1"."""
    assert Augmentation.parse("translate = 2, fill = edge, flip = alternate") == \
        Augmentation(2, "edge", "alternate")
    with pytest.raises(ArgumentError, match="'flip=none': flip=none does nothing: give flip"):
        Augmentation.parse("flip=none", given="--augment")
    assert not Augmentation.parse("flip=none")  # (the type's own vocabulary, in code)
    # 1xN images: "use less than 1" named translate=0, which --augment refuses
    with pytest.raises(ArgumentError, match="nothing of 1x5 images: leave translate out: images "
                       "one pixel across take none$"):
        Augmentation(translate=1).grid((1, 5))


# -- the definition, pixel for pixel ------------------------------------------

def test_a_translation_moves_the_pixels_and_fills_the_border():
    grid, codes = (6, 7, 1), random_codes(40, (6, 7, 1))
    dy, dx, *_ = example_parameters(Augmentation(2), grid, 5, 3, 9, 40, np)
    assert set(dy.tolist()) | set(dx.tolist()) <= set(range(-2, 3)) and len(set(dy.tolist())) > 1
    for fill, pad in [("zero", "constant"), ("edge", "edge"), ("reflect", "reflect")]:
        out = reference(codes, f"translate=2,fill={fill}", grid, 5, 3, 9).reshape(40, 6, 7)
        for b in range(40):
            padded = np.pad(codes[b].reshape(6, 7), 2, mode=pad,
                            **({"constant_values": -128} if pad == "constant" else {}))
            top, left = 2 - dy[b], 2 - dx[b]
            assert (out[b] == padded[top:top + 6, left:left + 7]).all()


def test_a_flip_mirrors_the_columns_of_every_channel():
    grid, codes = (4, 5, 3), random_codes(30, (4, 5, 3))
    _, _, flipped, _, _ = example_parameters(Augmentation(flip="random"), grid, 1, 0, 0, 30, np)
    out = reference(codes, "flip", grid, 1, 0, 0).reshape(30, 4, 5, 3)
    images = codes.reshape(30, 4, 5, 3)
    assert 5 < flipped.sum() < 25
    for b in range(30):
        assert (out[b] == (images[b, :, ::-1] if flipped[b] else images[b])).all()


def test_the_alternating_flip_flips_each_position_every_other_epoch():
    spec, grid = Augmentation(flip="alternate"), (4, 4, 1)
    draws = [example_parameters(spec, grid, 3, epoch, 2, 50, np)[2] for epoch in range(4)]
    assert (draws[0] == draws[2]).all() and (draws[1] == draws[3]).all()
    assert (draws[0] ^ draws[1]).all() and 10 < draws[0].sum() < 40


def test_the_alternating_flip_is_refused_on_a_shuffled_split(tmp_path, capsys):
    """Its draw is by place in the epoch, and a shuffle puts another example
    in each place every epoch: 36 of 64 examples were flipped in exactly one
    of two epochs, as a random flip gives, taken for airbench's (review)."""
    from int8store import SharedDataset, StreamingSplit
    from int8store.streaming.sources import ArrayShards

    split = SharedDataset.from_arrays(np.zeros((16, 4, 4), np.uint8), np.arange(16) % 2,
                                      name="train")
    split.augment("flip=alternate", seed=1)  # (in one order each epoch: each example alternates)
    with pytest.raises(ArgumentError, match=r"^train: flip=alternate flips each place of the "
                                            r"epoch's sequence in every other epoch, and the "
                                            r"shuffle \(seed 3\)"):
        split.shuffle(3).augment("flip=alternate", seed=1)
    split.shuffle(3).augment("flip", seed=1)
    encoding = SharedDataset.from_arrays(np.zeros((16, 16), np.uint8), np.zeros(16)).encoding
    stream = StreamingSplit(ArrayShards(np.zeros((16, 16), np.int8), np.arange(16) % 2), 8,
                            encoding, (4, 4), seed=5)
    with pytest.raises(ArgumentError, match=r"flip=alternate .* \(seed 5\)"):
        stream.augment("flip=alternate", seed=1)
    stream.close()
    import logistic_sgd

    assert logistic_sgd.main(["--dataset", "photos.npz", "--augment", "flip=alternate",
                              "--seed", "2"]) == 2  # (refused before anything is read)
    assert capsys.readouterr().err.startswith("error: --augment: flip=alternate flips each place")


def test_a_cutout_blackens_one_square_and_nothing_else():
    grid, codes = (10, 10, 1), random_codes(20, (10, 10, 1))
    codes[codes == -128] = 0  # black only where the cut-out is
    out = reference(codes, "cutout=4", grid, 2, 0, 0).reshape(20, 10, 10)
    _, _, _, cy, cx = example_parameters(Augmentation(cutout=4), grid, 2, 0, 0, 20, np)
    for b in range(20):
        black = np.argwhere(out[b] == -128)
        rows = range(max(cy[b] - 2, 0), min(cy[b] + 2, 10))
        columns = range(max(cx[b] - 2, 0), min(cx[b] + 2, 10))
        assert len(black) == len(rows) * len(columns)
        assert set(map(tuple, black.tolist())) == {(r, c) for r in rows for c in columns}
        keep = out[b] != -128
        assert (out[b][keep] == codes[b].reshape(10, 10)[keep]).all()


def test_draws_depend_on_the_seed_the_epoch_and_the_step_and_on_nothing_else():
    grid, codes = (8, 8, 1), random_codes(16, (8, 8, 1))
    first = reference(codes, "translate=2,cutout=3", grid, 1, 0, 0)
    assert (reference(codes, "translate=2,cutout=3", grid, 1, 0, 0) == first).all()
    for other in [(2, 0, 0), (1, 1, 0), (1, 0, 1)]:
        assert (reference(codes, "translate=2,cutout=3", grid, *other) != first).any()


@needs_jax
@given(spec=st.sampled_from(SPECS), seed=st.integers(0, 2**32 - 1), epoch=st.integers(0, 2**40),
       step=st.integers(0, 2**40), channels=st.sampled_from([1, 3]))
def test_jax_gives_the_same_bytes_as_numpy(spec, seed, epoch, step, channels):
    import jax.numpy as jnp

    grid = (7, 9, channels)
    codes = random_codes(12, grid, seed % 1000)
    got = augment(jnp.asarray(codes), Augmentation.parse(spec), grid, seed,
                  jnp.asarray(epoch & 0xFFFFFFFF, dtype=jnp.uint32),
                  jnp.asarray(step & 0xFFFFFFFF, dtype=jnp.uint32), -128, jnp)
    assert (np.asarray(got) == reference(codes, spec, grid, seed, epoch, step)).all()


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("grid", [(7, 9, 1), (6, 6, 3)])
def test_the_c_op_gives_the_same_bytes_as_numpy(spec, grid):
    from int8store.backend.ops.augment import Augment

    codes, step, epoch = T.matrix(dtype="int8"), T.lscalar(), T.lscalar()
    compiled = theano.function([codes, step, epoch],
                               Augment(Augmentation.parse(spec), grid, 77, -128)(codes, step, epoch),
                               mode=function_mode("c"))
    data = random_codes(25, grid, 4)
    for e, k in [(0, 0), (3, 11), (2**32 + 5, 2**33 + 9)]:
        assert (compiled(data, k, e) == reference(data, spec, grid, 77, e, k)).all()


def test_the_c_op_takes_only_augmentations_that_fit_its_images():
    """The op checks its grid as :func:`augmented` does: a reflection of a
    translation as long as the image read the C code outside each image."""
    from int8store.backend.ops.augment import Augment

    with pytest.raises(ArgumentError, match="a translation by up to 6 pixels leaves nothing"):
        Augment(Augmentation(translate=6, fill="reflect"), (2, 2, 1), 1, -128)
    with pytest.raises(ArgumentError, match="fill=128"):
        Augment(Augmentation(flip="random"), (2, 2, 1), 1, 128)
    grid = (3, 2, 2)  # the longest translation there is, reflected
    codes, step, epoch = T.matrix(dtype="int8"), T.lscalar(), T.lscalar()
    op = Augment(Augmentation(translate=1, fill="reflect"), grid, 5, -128)
    compiled = theano.function([codes, step, epoch], op(codes, step, epoch), mode=function_mode("c"))
    data = random_codes(40, grid, 2)
    assert (compiled(data, 3, 1) == reference(data, "translate=1,fill=reflect", grid, 5, 1, 3)).all()


# -- in the graph: an augmented minibatch is its plain minibatch, augmented ---

def digits_split(normalize="none", n=200):
    from sklearn.datasets import load_digits

    digits = load_digits()
    return SharedDataset.from_arrays((digits.images[:n] * 16).astype(np.uint8), digits.target[:n],
                                     name="train", dtype="float32", normalize=normalize)


def minibatch_pairs(split, view, mode, batch, epochs):
    """[(epoch, step, plain codes, augmented codes)]: the split's minibatch
    and the augmented view's classic slice."""
    index = T.lscalar()
    both = theano.function([index], [split.minibatch(index, batch)[0],
                                     view[index * batch:(index + 1) * batch]],
                           mode=function_mode(mode))
    found = []
    for epoch in epochs:
        for step, at, _ in split.minibatches(epoch, batch):
            plain, augmented = both(at)
            found.append((epoch, step, np.asarray(plain).astype(np.int8),
                          np.asarray(augmented).astype(np.int8)))
    return found


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shuffled", [False, True])
def test_augmented_minibatches_are_the_plain_ones_augmented(mode, shuffled):
    split = digits_split()
    if mode == "jax":
        place([split], "jax")
    if shuffled:
        split = split.shuffle(9)
    view = split.augment("translate=2,cutout=3", seed=21)
    pairs = minibatch_pairs(split, view, mode, 20, [0, 1, 5])
    assert len(pairs) == 30
    for epoch, step, plain, augmented in pairs:
        assert (augmented == reference(plain, "translate=2,cutout=3", (8, 8, 1), 21, epoch,
                                       step)).all()
    assert not (pairs[0][3] == pairs[10][3]).all()  # epoch 1's draws are new


def digits_stream(mode, seed=None, shard_size=70):
    from sklearn.datasets import load_digits

    from int8store import StreamingSplit, quantize
    from int8store.streaming.sources import ArrayShards

    digits = load_digits()
    codes, encoding = quantize((digits.images[:200] * 16).astype(np.uint8))
    return StreamingSplit(ArrayShards(codes, digits.target[:200]), shard_size, encoding, (8, 8),
                          normalize="none", dtype="float32", mode=mode, seed=seed)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", [None, 3])
def test_streamed_minibatches_are_augmented_by_their_number_in_the_epoch(mode, seed):
    found = {}
    for how in ("plain", "augmented"):
        stream = digits_stream(mode, seed)
        view = stream.augment("translate=2,flip,cutout=3", seed=6) if how == "augmented" \
            else stream.x
        index = T.lscalar()
        f = theano.function([index], view[index * 20:(index + 1) * 20], mode=function_mode(mode))
        found[how] = [(epoch, number, np.asarray(f(i)).astype(np.int8))
                      for epoch in (0, 1) for number, i, _ in stream.minibatches(epoch, 20)]
        stream.close()
    # shards of 70, 70 and 60: 3 + 3 + 3 minibatches an epoch
    assert [n for _, n, _ in found["plain"]] == list(range(9)) * 2
    for (epoch, number, plain), (_, _, augmented) in zip(found["plain"], found["augmented"]):
        assert (augmented == reference(plain, "translate=2,flip,cutout=3", (8, 8, 1), 6, epoch,
                                       number)).all()


@needs_jax
def test_c_and_jax_modes_give_the_same_augmented_minibatches():
    found = {}
    for mode in ("c", "jax"):
        split = digits_split()
        if mode == "jax":
            place([split], "jax")
        view = split.augment("translate=3,fill=reflect,cutout=4", seed=2)
        found[mode] = [a for *_, a in minibatch_pairs(split, view, mode, 25, [0, 3])]
    assert all((c == j).all() for c, j in zip(found["c"], found["jax"]))


def test_evaluation_reads_the_split_as_it_is():
    split = digits_split()
    view = split.augment("translate=2", seed=1)
    index = T.lscalar()
    plain = theano.function([index], split.x[index:index + 10])(0)
    assert (np.asarray(plain) == split.rows()[:10]).all()
    with pytest.raises(ArgumentError, match="gives whole minibatches"):
        view[index:index + 10]
    many = split.n_examples + 1  # (a slice longer than the split: refused by name)
    with pytest.raises(ArgumentError, match=f"fewer than one minibatch of {many}, and an "
                       "augmented view gives whole minibatches"):
        view[index * many:(index + 1) * many]
    with pytest.raises(ArgumentError, match="float copy"):
        SharedDataset.from_arrays(np.zeros((4, 8, 8), np.uint8), [0] * 4,
                                  storage="float").augment("translate=1", 1)
    with pytest.raises(ArgumentError, match="augment=True needs an augmentation"):
        digits_split().minibatch(index, 10, augment=True)


@pytest.mark.parametrize("mode", MODES)
def test_many_steps_a_call_train_on_the_same_augmented_minibatches(mode):
    results = []
    for k in (1, 5):
        split = digits_split(normalize="unit")
        if mode == "jax":
            place([split], "jax")
        view = split.augment("translate=2,cutout=3", seed=4)
        index, x, y = T.lscalar(), T.matrix("x", dtype="float32"), T.ivector("y")
        model = logistic_sgd.LogisticRegression(input=x, n_in=64, n_out=10)
        cost = model.negative_log_likelihood(y)
        w = model.W
        updates = [(p, p - np.float32(0.1) * g) for p, g in zip(model.params,
                                                                 T.grad(cost, model.params))]
        givens = {x: view[index * 20:(index + 1) * 20], y: split.y[index * 20:(index + 1) * 20]}
        train = steps_function([index], cost, updates, givens, steps=k, mode=mode)
        if mode == "jax":
            keep_on_device(model.params, [train.function])
        for epoch in range(2):
            calls = list(split.minibatches(epoch, 20))
            for first in range(0, len(calls), k):
                train(calls[first][1], min(k, len(calls) - first))
        results.append(np.array(w.get_value()))
    tolerance = 0 if mode == "c" else 1e-6
    assert np.allclose(results[0], results[1], rtol=0, atol=tolerance)


@pytest.mark.devices
@needs_jax
def test_over_four_devices_minibatches_are_augmented_as_on_one(tmp_path):
    script = tmp_path / "four.py"
    script.write_text(f"""
import json, sys
import numpy as np
sys.path[:0] = [{str(ROOT / 'tests')!r}, {str(ROOT / 'tutorials')!r}]
from test_augment import digits_split, minibatch_pairs, reference
from int8store import place
found = [[], []]
for shuffled in (False, True):
    for devices, pairs in zip((1, 4), found):
        split = digits_split()
        place([split], "jax", devices=devices)
        split = split.shuffle(9) if shuffled else split
        view = split.augment("translate=2,flip,cutout=3", seed=8)
        pairs += minibatch_pairs(split, view, "jax", 20, [0, 2])
# Over 4 devices row d * 5 + j of a minibatch is device d's j-th: example j * 4 + d.
rows = np.arange(20)
places = (rows % 5) * 4 + rows // 5
ok = []
for (e, s, one_plain, one), (_, _, plain, augmented) in zip(*found):
    in_place, augmented_in_place = np.empty_like(plain), np.empty_like(augmented)
    in_place[places], augmented_in_place[places] = plain, augmented
    ok.append(bool((in_place == one_plain).all() and (augmented_in_place == one).all()
                   and (one == reference(one_plain, "translate=2,flip,cutout=3", (8, 8, 1), 8,
                                         e, s)).all()))
print(json.dumps(ok))
""")
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                         cwd=ROOT / "tests", timeout=600)
    assert run.returncode == 0, run.stderr
    ok = json.loads(run.stdout.splitlines()[-1])
    assert len(ok) == 40 and all(ok)


# -- the tutorial -----------------------------------------------------------

def lenet_lines(mode, augment, capsys, **streaming):
    result = convolutional_mlp.evaluate_lenet5(
        dataset="digits", n_epochs=2, batch_size=50, nkerns=[4, 6], mode=mode,
        augment=augment, **streaming)
    lines = [line for line in capsys.readouterr().out.splitlines() if "error" in line]
    return lines, result


@needs_jax
@pytest.mark.parametrize("streaming", [{}, {"max_device_bytes": 40000, "seed": 2}],
                         ids=["resident", "streamed"])
def test_the_tutorial_augments_alike_in_c_and_jax_modes(capsys, streaming):
    c_lines, c_result = lenet_lines("c", "translate=1,cutout=2", capsys, **streaming)
    jax_lines, jax_result = lenet_lines("jax", "translate=1,cutout=2", capsys, **streaming)
    plain_lines, _ = lenet_lines("c", None, capsys, **streaming)
    assert len(c_lines) >= 3 and c_lines == jax_lines and c_lines != plain_lines
    for c, j in zip(c_result["params"], jax_result["params"]):
        assert np.allclose(c, j, rtol=1e-4, atol=1e-5)


def test_the_tutorial_and_the_preview_refuse_to_flip_digits(tmp_path):
    with pytest.raises(ArgumentError, match="a mirrored digit is another shape"):
        convolutional_mlp.evaluate_lenet5(dataset="digits", n_epochs=1, augment="translate=1,flip")
    from int8store.preview import preview  # (it drew mirrored digits, "as the tutorials take it")

    with pytest.raises(ArgumentError, match="a mirrored digit is another shape"):
        preview("digits", tmp_path / "grid.png", augment="flip", augmented=1)
    # ... and a store of digits, named otherwise, by the source its manifest records
    from int8store import convert

    store = convert("digits", tmp_path / "d.h5")
    said = rf"--augment flip on {re.escape(str(store))} \(converted from digits \(scikit-learn\)\)"
    with pytest.raises(ArgumentError, match=said):
        preview(store, tmp_path / "grid.png", augment="flip", augmented=1)
    with pytest.raises(ArgumentError, match=said):
        convolutional_mlp.evaluate_lenet5(dataset=str(store), n_epochs=1, augment="flip")


def test_a_stores_source_is_read_only_when_a_flip_is_asked():
    from int8store.augment.spec import refuse_flipped_digits

    def unread(dataset):
        raise AssertionError(f"read the source of {dataset}")

    refuse_flipped_digits(Augmentation.parse("translate=1"), "cats.h5", unread)
    with pytest.raises(ArgumentError, match=r"converted from mnist\.pkl\.gz"):
        refuse_flipped_digits(Augmentation.parse("flip"), "cats.h5", lambda _: "mnist.pkl.gz")
    refuse_flipped_digits(Augmentation.parse("flip"), "cats.h5", lambda _: "cats/")


def test_an_augmentation_that_does_not_fit_the_images_names_the_file(tmp_path, capsys):
    # it named the split only ("train: augmentation needs images ..."), after
    # a line saying the minibatches were being augmented
    flat = tmp_path / "flat.npz"
    images, labels = np.zeros((60, 64), np.uint8), np.arange(60) % 3
    np.savez(flat, x_train=images, y_train=labels, x_test=images[:12], y_test=labels[:12])
    argv = ["--dataset", str(flat), "--augment", "translate=1", "--epochs", "1", "--save-model", ""]
    assert logistic_sgd.main(argv) == 2
    out, err = capsys.readouterr()
    assert err == (f"error: {flat} (train): augmentation needs images of shape (rows, cols) or "
                   "(rows, cols, channels), got (64,)\n")
    assert "augmenting" not in out


def test_digits_are_told_by_the_words_of_the_name_not_a_part_of_one():
    from int8store.augment.spec import names_digits

    # "split_digital_photos" was refused, as "digit" is part of it
    said = {name: names_digits(name) for name in (
        "digits", "mnist", "../data/mnist.pkl.gz", "emnist-digits.npz", "MNIST_store.h5",
        "split_digital_photos", "fashion-mnist.npz", "cifar10", "/data/digitalis/flowers.zip")}
    assert [name for name, digits in said.items() if digits] == [
        "digits", "mnist", "../data/mnist.pkl.gz", "emnist-digits.npz", "MNIST_store.h5"]


def test_the_preview_draws_the_images_as_training_augments_them(tmp_path):
    from PIL import Image

    from int8store.preview import _samples, display_bytes, preview

    shown = preview("digits", tmp_path / "grid.png", count=2, augment="translate=2,cutout=3",
                    augmented=5, epoch=1)
    assert "augmented (translate by up to 2 pixels" in shown.describe()
    codes, labels, encoding, shape, _ = _samples("digits", "train", 2, None, None)
    # as one minibatch of the grid's cells row by row (the digits' first
    # images interleave their classes: read in the split's order, cell (0, 0)
    # was drawn as the minibatch's row 0 only by chance)
    grid_order = np.argsort(labels, kind="stable")
    assert (grid_order != np.arange(len(labels))).any()
    codes, labels = codes[grid_order], labels[grid_order]
    want, _ = display_bytes(reference(codes.reshape(len(codes), -1), "translate=2,cutout=3",
                                      (8, 8, 1), 5, 1, 0, fill=-128), encoding)
    grid = np.asarray(Image.open(tmp_path / "grid.png"))
    filled = {}
    for image, label in zip(want, labels):  # cells fill each class's row in order
        column = filled.get(int(label), 0)
        filled[int(label)] = column + 1
        top, left = shown.cell(int(label), column)
        cell = grid[top:top + 8 * shown.scale:shown.scale, left:left + 8 * shown.scale:shown.scale]
        assert (cell == image.reshape(8, 8)).all()
    with pytest.raises(ArgumentError, match="needs both the augmentation"):
        preview("digits", tmp_path / "other.png", augmented=5)
    # seeds and epochs beyond 32 bits were taken modulo 2**32 (-1 drew seed
    # 2**32 - 1's images; epoch -1 was a traceback)
    for bad, said in ((dict(augmented=-1), r"augmented=-1 \(--augmented\): expected an integer"),
                      (dict(augmented=1 << 32), "expected an integer from 0 to 4294967295"),
                      (dict(augmented=1, epoch=-1), r"--epoch: epoch -1: expected a whole number"),
                      (dict(augmented=1, epoch=1 << 32), "expected a whole number from 0 to")):
        with pytest.raises(ArgumentError, match=said):
            preview("digits", tmp_path / "other.png", augment="translate=1", **bad)
    assert not (tmp_path / "other.png").exists()


def test_the_preview_refuses_an_augmentation_that_does_nothing_as_the_tutorials_do(tmp_path):
    """--augment '' (or cutout=0) with --augmented drew the images as stored,
    "augmented (none)", where the help says the augmentation is taken as
    the tutorials take it, and they refuse it."""
    from int8store.preview import preview

    for text, said in (("", "--augment '' names no augmentation"),
                       ("cutout=0", "--augment 'cutout=0': cutout=0 does nothing")):
        with pytest.raises(ArgumentError, match=said):
            preview("digits", tmp_path / "grid.png", augment=text, augmented=1)
    assert not (tmp_path / "grid.png").exists()
