"""int8store's JAX mode and the slices of a split's rows users write besides
the classic one: those that are a minibatch or a fixed-length window of the
rows (``data[(i + 1) * B:(i + 2) * B]``, ``data[i * B + c:(i + 1) * B + c]``)
become the minibatch op, with the C backend's values and the minibatch
index checks; any other slice whose bounds are computed at call time is
refused when the function is compiled, in one line, not by JAX's traceback
("Array slice indices must have static start/stop/step") at the call.
Resident here, over four devices in a process of their own."""

import warnings

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from int8store import (ArgumentError, MinibatchIndexError, SharedDataset,  # noqa: E402
                       function_mode, place)
from int8store.backend import activate  # noqa: E402
from test_sharding import sharded_run  # noqa: E402

api = activate()
lib, at, shared = api.lib, api.at, api.shared
i, j = at.lscalar("i"), at.iscalar("j")

TAKEN = {  # form: (slice, (i, j) to call it at)
    "minibatch i + 1": (lambda d: d[(i + 1) * 5:(i + 2) * 5], [(0, 0), (2, 0)]),
    "a window at an offset": (lambda d: d[i * 5 + 3:(i + 1) * 5 + 3], [(0, 0), (2, 0)]),
    "the start written out": (lambda d: d[5 * i + 5:5 * i + 10], [(1, 0)]),
    "of an expression": (lambda d: d[(i // 2) * 4:(i // 2 + 1) * 4], [(3, 0), (9, 0)]),
    "of two inputs": (lambda d: d[2 * i + j:2 * i + j + 3], [(1, 1), (4, 3)]),
    "counted down": (lambda d: d[10 - 5 * i:15 - 5 * i], [(0, 0), (2, 0)]),
    "columns by constants": (lambda d: d[(i + 1) * 5:(i + 2) * 5, 1:3], [(1, 0)]),
    "a column at call time": (lambda d: d[(i + 1) * 5:(i + 2) * 5, j], [(1, 2)]),
}


def rows(mode):
    return place(shared(np.arange(80, dtype=np.int8).reshape(20, 4), name="rows"), mode)


def compiled(make, mode, data=None):
    data = rows(mode) if data is None else data
    return lib.function([i, j], make(data) * 1, mode=function_mode(mode),
                        on_unused_input="ignore")


@pytest.mark.parametrize("form", TAKEN)
def test_a_minibatch_or_window_of_the_rows_is_taken_with_the_c_backends_values(form):
    make, calls = TAKEN[form]
    taken = compiled(make, "jax")
    assert "Minibatch" in {type(n.op).__name__ for n in taken.maker.fgraph.toposort()}
    c = compiled(make, "c")
    for args in calls:
        np.testing.assert_array_equal(np.asarray(taken(*args)), c(*args))


def test_past_the_end_they_are_refused_as_the_minibatches_are():
    """The C backend's plain slice gives fewer rows (or none) there; JAX
    would clamp the start and repeat rows: the index checks refuse it."""
    step = compiled(TAKEN["minibatch i + 1"][0], "jax")
    with pytest.raises(MinibatchIndexError, match=r"^rows: minibatch index 4 is outside 0\.\.3"):
        step(3, 0)
    window = compiled(TAKEN["a window at an offset"][0], "jax")
    with pytest.raises(MinibatchIndexError,
                       match=r"^rows: a window of 5 rows from row 18 does not fit in 20 rows"):
        window(3, 0)
    down = compiled(TAKEN["counted down"][0], "jax")
    with pytest.raises(MinibatchIndexError, match="minibatch index -1 is outside"):
        down(3, 0)


def test_an_index_computed_from_a_counter_the_function_updates_is_read_before_the_call():
    """Aesara computes the update ``c + 1`` and the index ``c + 1`` once, in
    place: the host's check must not write over the counter (it moved by two
    a call, and the minibatches with it)."""
    data = rows("jax")
    counter = shared(np.asarray(0, dtype="int64"), name="c")
    step = lib.function([], data[(counter + 1) * 5:(counter + 2) * 5] * 1,
                        updates=[(counter, counter + 1)], mode=function_mode("jax"))
    for minibatch in (1, 2, 3):
        np.testing.assert_array_equal(step(), np.arange(80).reshape(20, 4)[minibatch * 5:][:5])
        assert int(counter.get_value()) == minibatch
    with pytest.raises(MinibatchIndexError, match="minibatch index 4 is outside 0..3"):
        step()
    assert int(counter.get_value()) == 3


def test_an_index_widened_before_its_arithmetic_is_computed_as_wide():
    """The C backend computes ``cast(b, "int64") * 5 + 5`` of an int8 ``b``
    in int64; the minibatch index read from it (``b + 1``) must be too: in
    int8 it wrapped past 127, and JAX's ``index * 5`` took row 0 for row 155."""
    b = at.scalar("b", dtype="int8")
    wide = at.cast(b, "int64")
    seen = {}
    for mode in ("c", "jax"):
        data = place(shared(np.arange(700, dtype=np.int32), name="long"), mode)
        f = lib.function([b], [data[(wide + 1) * 5:(wide + 2) * 5],
                               data[wide * 4 + 2:wide * 4 + 4]], mode=function_mode(mode))
        with warnings.catch_warnings():  # (JAX's own, on the int64 it computes in 32 bits)
            warnings.simplefilter("ignore", UserWarning)
            seen[mode] = [np.asarray(v) for index in (30, 127) for v in f(index)]
    assert seen["c"][0].tolist() == list(range(155, 160))
    for c, taken in zip(seen["c"], seen["jax"]):
        np.testing.assert_array_equal(taken, c)


def test_a_refusal_names_the_slice_left_not_one_a_later_rewrite_folded():
    """``data[i * 0:3]`` is read as computed at call time by the first
    rewrite, then folded to ``data[0:3]``; ``data[i:]`` is what is refused."""
    data = rows("jax")
    for outputs in ([data[i:], data[i * 0:3]], [data[i * 0:3], data[i:]]):
        with pytest.raises(ArgumentError, match=r"^rows\[i:\]: JAX mode cannot take this slice"):
            lib.function([i], outputs, mode=function_mode("jax"))


@pytest.mark.parametrize("written, why", [
    (lambda d: d[i * 5:(i + 1) * 5:2], "rows[i * 5:(i + 1) * 5:2]: JAX mode cannot take this "
                                       "slice, with a step"),
    (lambda d: d[:, i:i + 3], "rows[:, i:i + 3]: JAX mode cannot take this slice, with a slice "
                              "along axis 1 computed at call time"),
    (lambda d: d[i:], "rows[i:]: JAX mode cannot take this slice, with a length that is not a "
                      "positive constant"),
    (lambda d: d[i:j], "rows[i:j]: JAX mode cannot take this slice, with a length"),
])
def test_any_other_slice_computed_at_call_time_is_refused_in_a_line_when_compiled(written, why):
    with pytest.raises(ArgumentError) as refused:
        compiled(written, "jax")
    message = str(refused.value)
    assert message.startswith(why) and "\n" not in message
    assert "data[e * B:(e + 1) * B]" in message and "data[s:s + n]" in message
    compiled(written, "c")(1, 3)  # (the C backend's plain slice)


def test_a_float_view_of_a_split_takes_the_forms_too():
    images = (np.arange(30 * 4) % 251).astype(np.uint8).reshape(30, 4)
    seen = {}
    for mode in ("c", "jax"):
        split = place(SharedDataset.from_arrays(images, np.arange(30) % 10, name="train",
                                                dtype="float32"), mode)
        f = lib.function([i], [split.x[(i + 1) * 6:(i + 2) * 6], split.y[i * 6 + 2:i * 6 + 8]],
                         mode=function_mode(mode))
        seen[mode] = [np.asarray(v) for v in f(2)]
    for c, taken in zip(seen["c"], seen["jax"]):
        np.testing.assert_array_equal(taken, c)


def test_of_a_shuffled_split_only_its_minibatch_and_window_are_taken():
    """Its classic slice is minibatch i of the epoch's order; minibatch
    ``i + 1`` written otherwise would be the C backend's rows in the split's
    order: refused, saying which forms it takes."""
    split = place(SharedDataset.from_arrays(np.zeros((30, 4), np.uint8), np.arange(30),
                                            name="train"), "jax").shuffle(3)
    with pytest.raises(ArgumentError, match=r"^train_y\[\(i \+ 1\) \* 6:\(i \+ 2\) \* 6\]: of a "
                       r"shuffled split's rows, JAX mode takes the minibatch"):
        lib.function([i], split.y[(i + 1) * 6:(i + 2) * 6], mode=function_mode("jax"))
    lib.function([i], split.y[i * 6:(i + 1) * 6], mode=function_mode("jax"))(1)


SHARDED = """import json
import numpy as np
import int8store
from int8store import SharedDataset
lib = int8store.tensor_library(); T = lib.tensor
split = SharedDataset.from_arrays(np.zeros((22, 4), np.uint8), np.arange(22), name="train")
int8store.place([split], "jax", devices=4)
i = T.lscalar("i")
seen = {}
for name, make, calls in (("(i+1)*4", lambda y: y[(i + 1) * 4:(i + 2) * 4], [0, 3, 4]),
                          ("(i+1)*8", lambda y: y[(i + 1) * 8:(i + 2) * 8], [0, 1]),
                          ("i*8+4", lambda y: y[i * 8 + 4:(i + 1) * 8 + 4], [1, 2]),
                          ("i*5+3", lambda y: y[i * 5 + 3:(i + 1) * 5 + 3], [0]),
                          ("i+1:i+5", lambda y: y[i + 1:i + 5], [0])):
    try:
        f = lib.function([i], make(split.y), mode=int8store.function_mode("jax"))
    except int8store.ArgumentError as error:
        seen[name] = str(error)
        continue
    seen[name] = []
    for index in calls:
        try:
            seen[name].append(np.asarray(f(index)).tolist())
        except int8store.MinibatchIndexError as error:
            seen[name].append(str(error))
print(json.dumps(seen))
"""


@pytest.mark.devices
def test_over_four_devices_each_device_takes_its_rows_or_the_form_is_refused():
    """22 examples, 24 rows held: a form whose start is a multiple of 4 and
    whose length is too takes the C backend's rows (each device its own, in
    the order the classic minibatch takes them), never padding; a window at
    another offset would be read as each device's rows: refused."""
    seen = sharded_run(SHARDED)
    assert seen["(i+1)*4"][:2] == [[4, 5, 6, 7], [16, 17, 18, 19]]
    assert seen["(i+1)*4"][2].startswith("train_y: minibatch index 5 is outside 0..4")
    assert sorted(seen["(i+1)*8"][0]) == list(range(8, 16))
    assert seen["(i+1)*8"][1].startswith("train_y: minibatch index 2 is outside 0..1")
    assert sorted(seen["i*8+4"][0]) == list(range(12, 20))
    assert seen["i*8+4"][1].startswith(  # rows 20..27: past the 22 real ones
        "train_y: a window of 8 rows from row 20 does not fit in 22 rows")
    for refused in ("i*5+3", "i+1:i+5"):
        assert isinstance(seen[refused], str) and "over 4 devices JAX mode takes a slice of the " \
            "rows whose start is a multiple of 4" in seen[refused], seen[refused]
