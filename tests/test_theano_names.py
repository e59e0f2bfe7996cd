"""Theano's old names of pool_2d's arguments (ds, st, padding), as the
original convolutional_mlp.py passes them, on both libraries: through
int8store.nnet.pool_2d (Aesara's own pool_2d, or int8store's ops on PyTensor)."""

import warnings

import numpy as np
import pytest

import int8store
from int8store import ArgumentError, function_mode
from int8store.backend import activate, pool_2d


@pytest.fixture(scope="module")
def api():
    return activate()


def pooled(api, **arguments):
    """``pool_2d(x, **arguments)`` compiled (C backend) and run on a batch of images."""
    x = api.at.tensor4("x", dtype="float64")
    run = api.function([x], pool_2d(x, **arguments), mode=function_mode("c"))
    images = np.random.default_rng(0).standard_normal((2, 3, 7, 6))
    return run(images), images


def test_ds_is_ws(api):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Aesara's own pool_2d warns about ds: not through int8store
        old, images = pooled(api, ds=(2, 2), ignore_border=True)
    new, _ = pooled(api, ws=(2, 2), ignore_border=True)
    np.testing.assert_array_equal(old, new)
    expected = images[..., :6, :6].reshape(2, 3, 3, 2, 3, 2).max(axis=(3, 5))
    np.testing.assert_array_equal(new, expected)


def test_st_and_padding_are_stride_and_pad(api):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        old, _ = pooled(api, ds=(3, 3), st=(2, 2), padding=(1, 1), ignore_border=True)
    new, _ = pooled(api, ws=(3, 3), stride=(2, 2), pad=(1, 1), ignore_border=True)
    np.testing.assert_array_equal(old, new)
    assert old.shape == (2, 3, 4, 3)


def test_the_classic_call_and_the_public_name(api):
    """``pool_2d(input=..., ds=poolsize, ignore_border=True)``, as the
    original LeNet5 tutorial calls it, through int8store.nnet.pool_2d."""
    assert int8store.nnet.pool_2d is pool_2d
    x = api.at.tensor4("x", dtype="float64")
    assert int8store.nnet.pool_2d(input=x, ds=(2, 2), ignore_border=True).ndim == 4


@pytest.mark.parametrize("arguments, message", [
    ({"ws": (2, 2), "ds": (2, 2)}, "ds is Theano's name for ws; give one of them"),
    ({"ws": (2, 2), "stride": (1, 1), "st": (1, 1)}, "st is Theano's name for stride"),
    ({"ws": (3, 3), "pad": (1, 1), "padding": (1, 1)}, "padding is Theano's name for pad"),
    ({}, r"needs the window size: ws \(or Theano's ds\)"),
])
def test_a_name_and_its_old_name_together_are_refused(api, arguments, message):
    x = api.at.tensor4("x", dtype="float64")
    with pytest.raises(ArgumentError, match=message):
        pool_2d(x, ignore_border=True, **arguments)
