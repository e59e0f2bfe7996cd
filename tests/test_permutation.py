"""Shuffled orders for streamed shards: computed in C in the training process
on the C backend (backend.ops.permutation), in numpy elsewhere (order.shuffle):
the same permutation, keyed by (seed, epoch) or (seed, epoch, shard)."""

import re

import numpy as np
import pytest
from hypothesis import given, strategies as st

from int8store.backend.ops.permutation import Permutation, shuffled
from int8store.order.shuffle import permutation as reference
from int8store.order.shuffle import permuted, permuted_in_classes


def permutation(n, seed, epoch, index=None):
    """``[0, n)`` shuffled in C: the order :func:`shuffled` puts ``n`` values in."""
    return shuffled(np.arange(n, dtype=np.int32), seed, epoch, index)[0]


# Sizes about the powers of two and four, where the domain's bits change.
SIZES = [1, 2, 3, 4, 5, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1023, 1024, 1025, 3000, 4097]


@pytest.mark.parametrize("n", SIZES)
def test_c_gives_the_reference_order_and_every_item_once(n):
    for seed, epoch, index in ((0, 0, None), (42, 3, 0), (7, 0, 5), (2**40 + 5, -1, 2**33)):
        order = permutation(n, seed, epoch, index)
        assert order.dtype == np.int32 and order.shape == (n,)
        np.testing.assert_array_equal(order, reference(n, seed, epoch, index))
        assert sorted(order.tolist()) == list(range(n))


@given(n=st.integers(1, 5000), seed=st.integers(0, 2**32 - 1), epoch=st.integers(0, 2**32 - 1),
       index=st.none() | st.integers(0, 2**32 - 1))
def test_c_and_numpy_agree_for_any_key(n, seed, epoch, index):
    np.testing.assert_array_equal(permutation(n, seed, epoch, index), reference(n, seed, epoch, index))


def test_without_an_index_it_is_the_split_shuffle_and_each_shard_has_its_own():
    # (seed, epoch): the positions' shuffle of SharedDataset.shuffle, all at once
    np.testing.assert_array_equal(reference(1000, 7, 4), permuted(np.arange(1000), 1000, 7, 4))
    shards = [permutation(500, 7, 4, index) for index in range(4)]
    assert all(not np.array_equal(a, b) for i, a in enumerate(shards) for b in shards[i + 1:])
    assert not np.array_equal(shards[0], permutation(500, 7, 5, 0))  # a new one each epoch
    # what a seeded stream's examples are is part of what a run means: pinned
    np.testing.assert_array_equal(permutation(10, 42, 0, index=3), [7, 0, 5, 8, 3, 4, 1, 9, 2, 6])


def test_values_come_in_the_order_and_each_call_returns_new_arrays():
    labels = np.arange(1000, 1100, dtype=np.int32)
    order, in_order = shuffled(labels[::-1], 1, 2, 3)  # any stride
    np.testing.assert_array_equal(order, permutation(100, 1, 2, 3))
    np.testing.assert_array_equal(in_order, labels[::-1][order])
    kept = order.copy(), in_order.copy()
    shuffled(labels, 9, 9, 9)  # the compiled function's next outputs are not the same memory
    np.testing.assert_array_equal(order, kept[0])
    np.testing.assert_array_equal(in_order, kept[1])


def test_the_op_without_c_runs_the_reference():
    from int8store.backend import activate

    api = activate()
    values, seed, epoch, index = api.at.ivector(), api.at.lscalar(), api.at.lscalar(), api.at.lscalar()
    python_only = api.module("compile.mode").Mode(linker="py", optimizer=None)
    run = api.function([values, seed, epoch, index], Permutation()(values, seed, epoch, index),
                       mode=python_only)
    labels = np.arange(3000, dtype=np.int32) * 7
    for index in (7, -1):
        order, in_order = run(labels, 5, 6, index)
        np.testing.assert_array_equal(order, permutation(3000, 5, 6, None if index < 0 else index))
        np.testing.assert_array_equal(in_order, labels[order])


def test_the_op_shuffles_an_int32_vector_by_integer_scalars():
    from int8store import ArgumentError
    from int8store.backend import activate

    at = activate().at
    for wrong in ((at.dvector(), 1, 2, 3), (at.imatrix(), 1, 2, 3), (at.ivector(), at.dscalar(), 2, 3),
                  (at.ivector(), 1, 2, at.lvector())):
        with pytest.raises(ArgumentError, match="int32 vector by integer scalars"):
            Permutation()(*wrong)
    with pytest.raises(ArgumentError, match="shape \\(2, 2\\)"):
        shuffled(np.zeros((2, 2), np.int32), 1, 2)


def test_the_c_source_is_written_from_the_python_definition():
    """Every constant of the C code is one of order.shuffle's, formatted
    there: none is copied by hand."""
    from int8store.backend.ops import permutation as op
    from int8store.order import shuffle

    source = Permutation().c_support_code() + op._c_keys() + op._c_rounds()
    expected = {shuffle.GOLDEN} | {m for _, m in shuffle.MIX_STEPS if m is not None} \
        | {shuffle.round_offset(r) for r in range(shuffle.ROUNDS)}
    assert {int(c, 16) for c in re.findall(r"0x([0-9A-F]{8})u", source)} == expected
    assert [int(s) for s in re.findall(r"x \^= x >> (\d+);", source)] == \
        [shift for shift, _ in shuffle.MIX_STEPS]
    assert op._c_rounds().count("int8store_mix") == shuffle.ROUNDS
    assert f"+ {shuffle.EPOCH_SALT}u" in source and f"+ {shuffle.INDEX_SALT}u" in source


def test_a_shuffled_minibatch_orders_its_epoch_once(monkeypatch):
    """The held-whole shuffled minibatch made its rows' order in Python at
    every call, images and labels each: 1.7 ms a step, 16 times the digits'
    logistic step (user trial). Its epoch's order is made once now, and its
    minibatches are the order's, in turn."""
    import int8store.order.shuffle as shuffle
    from int8store import SharedDataset, tensor_library
    from int8store.backend.ops import minibatch

    theano = tensor_library()
    made = []
    original = shuffle.permuted_in_classes
    monkeypatch.setattr(shuffle, "permuted_in_classes",
                        lambda *args, **kwargs: made.append(args) or original(*args, **kwargs))
    minibatch._epoch_order.cache_clear()
    split = SharedDataset.from_arrays(np.arange(40 * 4, dtype=np.uint8).reshape(40, 4),
                                      np.arange(40), name="train").shuffle(9)
    index = theano.tensor.lscalar()
    labels = theano.function([index], split.y[index * 8:(index + 1) * 8], mode="FAST_COMPILE")
    taken = [labels(i) for i in range(10)]  # two epochs of five minibatches
    assert len(made) == 2
    for epoch in range(2):
        np.testing.assert_array_equal(np.concatenate(taken[epoch * 5:(epoch + 1) * 5]),
                                      original(np.arange(40), 40, 9, epoch))


def test_no_position_takes_no_row_within_classes_too():
    # (numpy's "zero-size array to reduction operation maximum", review)
    assert permuted(np.arange(0), np.zeros(0, np.int64), seed=1, epoch=0).tolist() == []
    assert permuted_in_classes(np.arange(0), 5, seed=1, epoch=0).tolist() == []
