"""Shuffled orders for streamed shards: computed in C in the training process
(backend.permutation_op), in numpy in a reading process (backend.shuffle):
the same permutation, keyed by (seed, epoch) or (seed, epoch, shard)."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from int8store.backend.permutation_op import Permutation, permutation
from int8store.backend.shuffle import permutation as reference
from int8store.backend.shuffle import permuted


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


def test_each_call_returns_a_new_array():
    first = permutation(100, 1, 2, 3)
    kept = first.copy()
    permutation(100, 9, 9, 9)  # the compiled function's next output is not the same memory
    np.testing.assert_array_equal(first, kept)


def test_the_op_without_c_runs_the_reference():
    from int8store.backend import activate

    api = activate()
    n, seed, epoch, index = (api.at.lscalar() for _ in range(4))
    python_only = api.module("compile.mode").Mode(linker="py", optimizer=None)
    run = api.function([n, seed, epoch, index], Permutation()(n, seed, epoch, index),
                       mode=python_only)
    np.testing.assert_array_equal(run(3000, 5, 6, 7), permutation(3000, 5, 6, 7))
    np.testing.assert_array_equal(run(10, 5, 6, -1), permutation(10, 5, 6))


def test_the_op_takes_integer_scalars_only():
    from int8store import ArgumentError
    from int8store.backend import activate

    at = activate().at
    with pytest.raises(ArgumentError, match="integer scalars"):
        Permutation()(at.dvector(), 1, 2, 3)
    with pytest.raises(ArgumentError, match="integer scalars"):
        Permutation()(10, at.dscalar(), 2, 3)
