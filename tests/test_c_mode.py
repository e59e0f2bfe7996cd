"""int8store's C mode on PyTensor runs softmax in C: PyTensor before 3.3.1
keeps its symbolic softmax and log-softmax whole, run from Python with their
graphs compiled by Numba on the first call (most of a small tutorial's first
run), and int8store inlines them before fusion; PyTensor's own modes stay as
shipped."""

import numpy as np
import pytest

from int8store.backend import activate, function_mode
from int8store.backend.setup.c_mode import symbolic_ops_kept_whole

pytestmark = pytest.mark.pytensor


def _classifier_graph(api):
    """The classic tutorials' softmax classifier: its probabilities, the mean
    negative log-likelihood (a log of a softmax, which fast_run makes a
    log-softmax) and its gradient."""
    T = api.at
    x, y = T.matrix("x", dtype="float64"), T.ivector("y")
    p_y_given_x = api.softmax(x, axis=-1)
    nll = -T.mean(T.log(p_y_given_x)[T.arange(y.shape[0]), y])
    return [x, y], [p_y_given_x, nll, api.module("gradient").grad(nll, x)]


def _graph_ops(function):
    graph_op = activate().module("compile.builders").OpFromGraph
    return [node.op for node in function.maker.fgraph.apply_nodes if isinstance(node.op, graph_op)]


def test_softmax_compiles_into_the_c_graph_with_the_same_values():
    api = activate()
    inputs, outputs = _classifier_graph(api)
    classify = api.function(inputs, outputs, mode=function_mode("c"))
    assert _graph_ops(classify) == []

    x = np.random.default_rng(0).normal(scale=4.0, size=(6, 10))
    y = np.array([0, 3, 9, 1, 1, 7], dtype=np.int32)
    p, nll, gradient = classify(x, y)
    shifted = np.exp(x - x.max(axis=1, keepdims=True))
    expected = shifted / shifted.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(p, expected, rtol=1e-12)
    np.testing.assert_allclose(nll, -np.mean(np.log(expected[np.arange(6), y])), rtol=1e-12)
    np.testing.assert_allclose(gradient, (expected - np.eye(10)[y]) / 6, rtol=1e-10, atol=1e-15)


def test_pytensors_own_c_mode_is_left_as_shipped():
    api = activate()
    kept_whole = symbolic_ops_kept_whole(api)
    if not kept_whole:
        pytest.skip(f"PyTensor {api.VERSION} inlines its softmax at fusion itself")
    function_mode("c")  # int8store's mode made first: it must not change PyTensor's
    inputs, outputs = _classifier_graph(api)
    shipped = api.module("compile.mode").Mode(linker="cvm", optimizer="fast_run")
    ops = _graph_ops(api.function(inputs, outputs, mode=shipped))
    assert ops and {type(op) for op in ops} <= set(kept_whole)
