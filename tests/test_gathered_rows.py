"""Rows taken by index and decoded in one pass (GatherRows): exactly the
values the plain graph gives (the codes gathered, then dequantized) for every
encoding, normalization and dtype, on the C backend and in ``perform``; an
index outside the data is an error; and a shuffled split streamed from lent
shards, its rows gathered in the step, trains on the minibatches that copying
each shard in its shuffled order gives."""

import numpy as np
import pytest

from int8store import ArgumentError, MinibatchIndexError, SharedDataset, function_mode, quantize
from int8store.backend import activate
from int8store.backend.ops.gather import GatherRows, decode_recipe
from int8store.streaming.sources import ArrayShards
from int8store.streaming.split import StreamingSplit

api = activate()
PIXELS = np.random.default_rng(0).integers(0, 256, (40, 6), dtype=np.uint8)
ENCODINGS = {  # name: (values, quantize's options)
    "uint8 pixels": (PIXELS, {}),
    "int8 levels": ((PIXELS.astype(np.int16) - 128).astype(np.int8), {}),
    "k/256 in float32": ((PIXELS / 256).astype(np.float32), {}),  # mnist.pkl.gz's
    "k/256 in float64": (PIXELS / 256, {}),
    "k/255 in float32": ((PIXELS / 255).astype(np.float32), {}),  # no exact recipe
    "a codebook": (np.sqrt(PIXELS.astype(np.float32)), {"lossy": True}),  # no recipe either
}


def py_mode():
    """Every op by its ``perform`` (numpy)."""
    return api.module("compile.mode").Mode(linker="py", optimizer="fast_run")


def compiled(outputs, index, mode):
    return api.function([index], outputs, mode=mode)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("normalize", ["unit", "none", "batch", "dataset"])
@pytest.mark.parametrize("encoding_name", list(ENCODINGS))
def test_rows_decoded_in_one_pass_are_the_plain_graphs_values(encoding_name, normalize, dtype):
    values, options = ENCODINGS[encoding_name]
    codes, encoding = quantize(values, **options)
    labels = np.arange(40) % 7
    ordered = SharedDataset(codes, labels, encoding, normalize=normalize, dtype=dtype, ordered=True)
    order = np.random.default_rng(1).permutation(40).astype(np.int32)
    ordered.order.set_value(order)
    # The reference: the codes gathered in numpy, then the plain graph in the
    # same mode, for rows whose count the graph does not know, as it knows
    # neither a slice's nor a minibatch's ("batch" divides its sum by the
    # length at run time, as the classic's slice did, not by a constant).
    plain = SharedDataset(codes, labels, encoding, normalize=normalize, dtype=dtype,
                          dataset_mean=ordered.dataset_mean)
    sliced = api.at.matrix(dtype="int8")
    index = api.at.lscalar("index")
    recipe = decode_recipe(encoding, normalize, ordered.dataset_mean, dtype)
    assert (recipe is None) == (encoding_name == "a codebook" or normalize == "batch"
                                or (encoding_name, normalize) == ("k/255 in float32", "unit"))
    for mode in (function_mode("c"), py_mode()):
        reference = api.function([sliced], plain._float_view(sliced), mode=mode)
        step = compiled([*ordered.minibatch(index, 10), ordered.x[index * 10:(index + 1) * 10]],
                        index, mode)
        gathers = [n.op for n in step.maker.fgraph.apply_nodes if isinstance(n.op, GatherRows)]
        assert gathers and all(op.dtype == (dtype if recipe else None) for op in gathers)
        for i in range(4):
            x, y, by_slice = step(i)
            rows = codes[order[i * 10:(i + 1) * 10]]
            expected = reference(rows)
            assert x.dtype == expected.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(x, expected)
            np.testing.assert_array_equal(by_slice, expected)
            np.testing.assert_array_equal(y, labels[i * 10:(i + 1) * 10])  # labels as they lie
    np.testing.assert_array_equal(ordered.rows(), codes[order])
    if normalize != "batch":  # (centred on the whole split's mean, summed in another order)
        np.testing.assert_array_equal(ordered.x.get_value(), plain.x.get_value()[order])


@pytest.mark.parametrize("linker", ["c", "py"])
def test_a_row_outside_the_data_is_an_error_that_names_it(linker):
    codes, _ = quantize(PIXELS[:6])
    data = api.shared(codes, name="shard_x")
    rows = api.at.ivector("rows")
    mode = function_mode("c") if linker == "c" else py_mode()
    take = api.function([rows], GatherRows("float32", 128.0, 0.0, 1 / 256)(data, rows), mode=mode)
    np.testing.assert_array_equal(take(np.array([5, 0], np.int32)), (PIXELS[[5, 0]] / 256))
    for bad in (6, -1):
        with pytest.raises(MinibatchIndexError, match=rf"shard_x: row {bad} is outside 0\.\.5 \(6 rows\)"):
            take(np.array([0, bad], np.int32))


def test_the_c_error_names_each_variable_as_it_is_named():
    """The data's name is an argument of the C error, never its format (a
    '%s' in it read a pointer that was not there: a crash), and a module
    compiled for one name is not reused for another (it named the first)."""
    for name in ("100%s of it", 'a "quoted\\ name'):
        data = api.shared(np.zeros((3, 2), np.int8), name=name)
        rows = api.at.ivector("rows")
        take = api.function([rows], GatherRows()(data, rows), mode=function_mode("c"))
        with pytest.raises(MinibatchIndexError) as raised:
            take(np.array([7], np.int32))
        assert str(raised.value).splitlines()[0] == f"{name}: row 7 is outside 0..2 (3 rows)"


@pytest.mark.parametrize("linker", ["c", "py"])
def test_wide_row_indices_are_checked_as_they_are(linker):
    """int64 rows are not cast to int32: row 2**32 + 1 is outside, not row 1."""
    data = api.shared(np.arange(15, dtype=np.int8).reshape(5, 3), name="wide_x")
    rows = api.at.lvector("rows")
    mode = function_mode("c") if linker == "c" else py_mode()
    take = api.function([rows], GatherRows()(data, rows), mode=mode)
    np.testing.assert_array_equal(take(np.array([4, 0])), [[12, 13, 14], [0, 1, 2]])
    with pytest.raises(MinibatchIndexError, match=r"wide_x: row 4294967297 is outside 0\.\.4"):
        take(np.array([0, 2**32 + 1]))


def test_a_recipe_whose_product_would_round_is_refused():
    with pytest.raises(ArgumentError, match="scale=0.1: a recipe's scale is a power of two"):
        GatherRows("float32", 0.0, 0.0, 0.1)


def test_each_call_returns_its_own_rows():
    """The op reuses its output array from call to call: what a compiled
    function returned must not change under the caller."""
    codes, encoding = quantize(PIXELS)
    ordered = SharedDataset(codes, np.zeros(40), encoding, dtype="float32", ordered=True)
    index = api.at.lscalar("index")
    step = api.function([index], ordered.minibatch(index, 10)[0], mode=function_mode("c"))
    first = step(0)
    kept = first.copy()
    step(1)
    np.testing.assert_array_equal(first, kept)


@pytest.mark.pytensor
def test_rows_gathered_in_numba_mode_quietly():
    pytest.importorskip("numba")
    import warnings

    codes, encoding = quantize(PIXELS)
    ordered = SharedDataset(codes, np.zeros(40), encoding, dtype="float32", ordered=True)
    ordered.order.set_value(np.arange(40, dtype=np.int32)[::-1].copy())
    index = api.at.lscalar("index")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PyTensor's object-mode warning included
        step = api.function([index], ordered.minibatch(index, 10)[0])
    assert type(step.maker.linker).__name__ == "NumbaLinker"
    np.testing.assert_array_equal(step(0), (PIXELS[::-1][:10] / 256).astype(np.float32))


def test_rows_gathered_in_jax_mode():
    pytest.importorskip("jax")
    codes, _ = quantize(PIXELS)
    data, rows = api.at.matrix(dtype="int8"), api.at.ivector("rows")
    outputs = [GatherRows("float32", 128.0, 0.0, 1 / 256)(data, rows), GatherRows()(data, rows)]
    take = api.function([data, rows], outputs, mode=function_mode("jax"))
    picked = np.array([3, 1, 39], np.int32)
    decoded, raw = take(codes, picked)
    np.testing.assert_array_equal(decoded, (PIXELS[picked] / 256).astype(np.float32))
    np.testing.assert_array_equal(raw, codes[picked])


def shuffled_stream(reader, n=50, shard_size=8, **kwargs):
    codes, encoding = quantize(PIXELS[np.arange(n) % 40] // 2 + np.arange(n)[:, None] % 128)
    return StreamingSplit(ArrayShards(codes, np.arange(n)), shard_size, encoding, (6,), seed=7,
                          reader=reader, dtype="float32", **kwargs)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_shuffled_shards_lent_and_gathered_in_the_step_train_on_the_copied_minibatches(prefetch):
    lent, copied = shuffled_stream("views", prefetch=prefetch), shuffled_stream("threads")
    assert (lent.reader, lent.dataset.order is not None, copied.dataset.order) == ("views", True, None)
    index = api.at.lscalar("index")

    def steps(split):
        batch = split.x[index * 4:(index + 1) * 4], split.y[index * 4:(index + 1) * 4]
        return api.function([index], [*batch, *split.dataset.minibatch(index, 4)],
                            mode=function_mode("c"))

    seen = {}
    for split in (lent, copied):
        step, seen[split.reader] = steps(split), []
        for epoch in (0, 1, 4):
            for shard in split.epoch(epoch, progress=False):
                # 50 examples in shards of 8: the last (2 examples) is copied, padded
                seen[split.reader].append((shard.index, split.dataset.rows()[:shard.count].copy()))
                for i in range(shard.count // 4):
                    seen[split.reader].append([value.copy() for value in step(i)])
        split.close()
    assert len(seen["views"]) == len(seen["threads"]) == 3 * (7 + 12)
    for got, expected in zip(seen["views"], seen["threads"]):
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a, b)


def test_shuffled_shards_are_lent_only_on_the_c_backend():
    with pytest.raises(ArgumentError, match=r"shuffled \(a seed\) only on the C backend"):
        shuffled_stream("views", mode="jax")
