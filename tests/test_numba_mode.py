"""int8store's ops in PyTensor's default mode, Numba: they compile without
PyTensor's "Numba will use object mode" warning, give what the C backend
gives, and a program that never compiles with Numba never imports it."""

import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

from int8store import MinibatchIndexError, SharedDataset, function_mode, quantize
from int8store.backend import activate

pytestmark = pytest.mark.pytensor


def test_minibatches_compile_in_numba_quietly_and_match_the_c_backend():
    pytest.importorskip("numba")
    api = activate()
    codes, encoding = quantize(np.arange(50 * 6, dtype=np.uint8).reshape(50, 6))
    plain = SharedDataset(codes, np.arange(50) % 3, encoding, name="plain")
    shuffled = SharedDataset(codes, np.arange(50) % 3, encoding, name="shuffled").shuffle(7)
    index = api.at.lscalar("index")
    outputs = [*plain.minibatch(index, 10), *shuffled.minibatch(index, 10)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PyTensor's object-mode warning included
        in_numba = api.function([index], outputs)
    assert type(in_numba.maker.linker).__name__ == "NumbaLinker"
    in_c = api.function([index], outputs, mode=function_mode("c"))
    for i in range(5):  # the first epoch (the shuffled split's order differs from the stored one)
        for got, expected in zip(in_numba(i), in_c(i)):
            np.testing.assert_array_equal(got, expected)
    assert not np.array_equal(in_c(0)[0], in_c(0)[2])
    # The C backend's refusal, the index and the rows named (Numba raises
    # constant messages: it said "minibatch index outside the data", user trial)
    plain_in_numba = api.function([index], plain.minibatch(index, 10))
    plain_in_c = api.function([index], plain.minibatch(index, 10), mode=function_mode("c"))
    for outside in (5, -1):
        with pytest.raises(MinibatchIndexError) as in_c_refused:
            plain_in_c(outside)
        with pytest.raises(MinibatchIndexError) as in_numba_refused:
            plain_in_numba(outside)
        for refused in (in_c_refused, in_numba_refused):  # (x's or y's: which runs first)
            said = str(refused.value).splitlines()[0]
            assert re.fullmatch(f"plain_[xy]: minibatch index {outside} is outside 0..4 "
                                r"\(50 rows in minibatches of 10\)", said), said


def test_a_program_that_compiles_in_c_never_imports_numba():
    code = (
        "import sys, numpy as np\n"
        "from int8store import SharedDataset, quantize, function_mode\n"
        "from int8store.backend import activate\n"
        "codes, enc = quantize(np.zeros((20, 4), np.uint8))\n"
        "data = SharedDataset(codes, np.zeros(20), enc)\n"
        "api = activate()\n"
        "i = api.at.lscalar()\n"
        "f = api.function([i], data.minibatch(i, 5)[0].sum(), mode=function_mode('c'))\n"
        "f(1)\n"
        "print('numba' in sys.modules)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"


def test_an_op_run_in_object_mode_carries_nothing_of_the_graph_above_it():
    """Numba pickles what its object mode calls into the compiled code; with
    the graph's own node that was the whole graph, the shared data set
    included: a LeNet5 over MNIST held a copy of it in every conv2d and
    pooling op (15 GB over the classic's floats, 4 GB at int8; user trial).
    The node handed on is detached, and the op still gives the C backend's."""
    pytest.importorskip("numba")
    import pickle

    from int8store.backend.ops.numba import detached
    from int8store.nnet import pool_2d

    api = activate()
    data = api.shared(np.random.default_rng(0).random((2000, 784)).astype("float32"))  # 6 MB
    index = api.at.lscalar("index")
    pooled = pool_2d(data[index * 50:(index + 1) * 50].reshape((50, 1, 28, 28)), ds=(2, 2),
                     ignore_border=True)
    node = pooled.owner
    assert len(pickle.dumps(node)) > 6_000_000  # (what was pickled before)
    alone = detached(node)
    assert len(pickle.dumps(alone)) < 20_000
    assert alone.op == node.op and [v.type for v in alone.inputs] == [v.type for v in node.inputs]
    assert all(v.owner is None for v in alone.inputs)
    in_numba = api.function([index], pooled)
    assert type(in_numba.maker.linker).__name__ == "NumbaLinker"
    in_c = api.function([index], pooled, mode=function_mode("c"))
    np.testing.assert_array_equal(in_numba(3), in_c(3))
