"""Many minibatch updates in one call: take the host out of the training loop.

With the images resident on the device, what is left for the host to do in a
training loop is to call the compiled step once a minibatch, and in JAX mode
that call costs more than the step itself for the tutorials' models (the
library's JAX linker: its thunks, the conversion of outputs, the write-back
of updates). :func:`steps_function` compiles, from the cost, updates and
``givens`` a classic tutorial gives ``function([index], ...)``, one function
that makes up to ``steps`` consecutive updates a call: the minibatch index is
the only input, the data stays where it was placed, and the model is not
written again. In JAX mode the steps run in one XLA loop that int8store
calls directly, not through the library's ``Function``
(:class:`~int8store.backend.jax.direct.JaxSteps`: ``lax.fori_loop``, of a
fixed trip count when the call is full, each minibatch sliced and widened
inside it, the parameters donated; on a CPU, weight matrices of short rows
carried transposed, :func:`carried_transposed`); the C backend's calls cost
little, and there the steps are made one by one
(:class:`~int8store.backend.ops.multistep.MultiStep`), the same arithmetic as
a call each (``bench/steps_per_call.py`` measures both).

:func:`minibatch_calls` groups an epoch's minibatches into such calls: runs
of consecutive minibatches, within one shard of a streamed split, each
ending where the loop must look at the model (a validation, the end of its
patience), so that what it sees there is what one call a minibatch would
have given: the same error lines, whatever the number of steps a call.
"""

import numpy as np

from ..backend import activate, function_mode
from ..codes.vocabulary import check_mode
from ..errors import ArgumentError

__all__ = ["steps_function", "TrainingSteps", "minibatch_calls", "default_steps",
           "ACCELERATOR_STEPS"]

#: Updates a call by default in JAX mode where many pay (:func:`default_steps`):
#: on an H200, K = 100 took 0.16 to 0.19 of K = 1's time a step for the
#: logistic regression (batch 10 to 600) and 0.41 to 0.63 for LeNet5 (batch
#: 100, 500), and K = 10 less (``bench/steps_per_call.py``, docs/benchmarks.md).
ACCELERATOR_STEPS = 100


def default_steps(mode, devices=1):
    """The updates a call int8store's tutorials make by default in ``mode``
    when the training split lies on ``devices`` devices: 1 on the C backend,
    whose calls cost little (K = 10 took 0.94 to 1.03 the time of K = 1 a
    step for the logistic regression here); :data:`ACCELERATOR_STEPS` in JAX
    mode (on an H200, K = 100 took 0.16 to 0.63 of K = 1's time a step for
    the logistic regression and LeNet5; on this CPU 0.19 to 0.93 for the
    logistic regression, the MLP and LeNet5), but 1 over several CPU devices,
    where loops are not measured (older XLA:CPU runtimes stopped them on busy
    cores).

    >>> default_steps("c")
    1
    """
    if check_mode(mode) == "c":
        return 1
    import jax

    if devices > 1 and jax.default_backend() == "cpu":
        return 1
    return ACCELERATOR_STEPS


#: The longest rows (bytes) of a parameter matrix that int8store's JAX-mode
#: loop carries transposed on a CPU (:func:`carried_transposed`).
SHORT_ROWS = 128


def carried_transposed(variable):
    """Whether the loop of :func:`steps_function` in JAX mode carries the
    parameter ``variable`` transposed: on XLA:CPU, a matrix of more rows
    than columns whose rows are at most :data:`SHORT_ROWS` bytes (the
    logistic regression's 784 x 10 weights). XLA:CPU's products write a
    result a row at a time, and the gradient of such a matrix, ``x.T @
    delta``, has rows shorter than a vector register or two: carried as
    10 x 784, the gradient is ``delta.T @ x`` with rows of 784, and the
    logistic step at batch 10 takes 0.46 of its time (6 against 13 us,
    ``bench/steps_per_call.py``); from rows of 64 float32 on, no gain. The
    parameter is transposed once on the way into a call and once out: its
    values are the user's, in the user's shape."""
    from ..backend.jax.target import target_platform

    value = variable.get_value(borrow=True, return_internal_type=True)
    shape, itemsize = getattr(value, "shape", ()), np.dtype(variable.dtype).itemsize
    return (target_platform() == "cpu" and len(shape) == 2 and shape[0] > shape[1]
            and shape[1] * itemsize <= SHORT_ROWS)


class TrainingSteps:
    """What :func:`steps_function` returns: ``train_steps(first, count)``
    updates on minibatches ``first`` to ``first + count - 1`` (``count``
    from 1 to :attr:`steps`, by default all) and returns their costs;
    :attr:`function` is what is called: the library's compiled function on
    the C backend, int8store's own XLA loop in JAX mode
    (:class:`~int8store.backend.jax.direct.JaxSteps`, called directly).

    In JAX mode the costs are a device array, brought to the host only if
    read; a full call returns all :attr:`steps` of them as they are."""

    def __init__(self, call, steps, function=None):
        self._call, self.steps, self.function = call, steps, function

    def __call__(self, first, count=None):
        count = self.steps if count is None else int(count)
        costs = self._call(first, count)
        return costs if count == self.steps else costs[:count]

    def __repr__(self):
        return f"TrainingSteps(up to {self.steps} minibatch updates a call)"


def steps_function(inputs, cost, updates, givens=None, steps=10, mode="c"):
    """A compiled function that makes up to ``steps`` minibatch updates in
    one call, built from what a classic tutorial gives ``function``.

    Parameters
    ----------
    inputs : list of one integer scalar
        ``[index]``: the minibatch index that ``cost``, ``updates`` and
        ``givens`` use.
    cost : scalar variable
        The step's cost, its output.
    updates : list of (shared variable, new value), or a dict
        The step's updates: the parameters it trains.
    givens : dict, optional
        As for ``function``: the classic slices of the stored splits.
    steps : int
        The most updates a call makes.
    mode : {"c", "jax"}
        As for :func:`~int8store.function_mode`.

    Returns
    -------
    TrainingSteps
        ``train_steps(first, count)`` updates the parameters on minibatches
        ``first, ..., first + count - 1`` in turn, as ``count`` calls of
        the one-step function would, and returns the ``count`` costs. In JAX
        mode the minibatches of the first and the last step are checked on
        the host before the call, as each minibatch index is.

    Examples
    --------
    >>> import numpy as np
    >>> from int8store import SharedDataset, tensor_library
    >>> T = tensor_library().tensor
    >>> data = SharedDataset.from_arrays(np.arange(40, dtype=np.uint8).reshape(8, 5),
    ...                                  np.arange(8) % 2, name="train", dtype="float64")
    >>> w = tensor_library().shared(np.zeros(5), name="w", shape=(5,))
    >>> index, x = T.lscalar(), T.matrix("x", dtype="float64")
    >>> cost = T.sum((x @ w - 1) ** 2)
    >>> train_steps = steps_function([index], cost, [(w, w - 0.01 * T.grad(cost, w))],
    ...                              givens={x: data.x[index * 2:(index + 1) * 2]}, steps=4)
    >>> train_steps(0).shape, train_steps(1, 3).shape
    ((4,), (3,))
    """
    from ..backend.ops.multistep import MultiStep

    mode = check_mode(mode)
    if int(steps) != steps or steps < 1:
        raise ArgumentError(f"steps={steps!r}: expected a positive number of updates a call")
    if len(inputs) != 1:
        raise ArgumentError(f"inputs={inputs!r}: many steps a call take one input, the "
                            "minibatch index")
    api = activate()
    (index,) = inputs
    if getattr(index, "ndim", None) != 0 or not str(index.dtype).startswith(("int", "uint")):
        raise ArgumentError(f"inputs={inputs!r}: the one input must be an integer scalar, the "
                            "minibatch index")
    updates = list(updates.items() if hasattr(updates, "items") else updates)
    params = [variable for variable, _ in updates]
    for number, (variable, value) in enumerate(updates):  # (as the library's function checks)
        name = variable.name or variable
        if getattr(value, "dtype", None) != variable.dtype:
            raise ArgumentError(
                f"the update of {name}: {getattr(value, 'dtype', value)} values for a "
                f"{variable.dtype} shared variable (cast the update, e.g. "
                f"value.astype('{variable.dtype}'))")
        if value.ndim != variable.ndim:
            raise ArgumentError(f"the update of {name}: {value.ndim}-D values for a "
                                f"{variable.ndim}-D shared variable (an update keeps its shape)")
        if variable in params[:number]:
            raise ArgumentError(f"{name} is updated twice: give one update a shared variable")
    # The step on its own: the index and the parameters' values as inputs, the
    # givens applied, the shared variables it reads as they are.
    index_in_step = index.type()
    flipped = [mode == "jax" and carried_transposed(variable) for variable in params]

    def turned(values):  # the parameters' values as the loop carries them, and back
        return [value.T if flip else value for value, flip in zip(values, flipped)]

    # In JAX mode the loop carries each value with its static shape: Aesara's
    # classic shared variables have none, and its conversions then trace
    # shapes that XLA refuses.
    def carried_as(variable, flip):
        if mode != "jax":
            return (variable.T if flip else variable).type()
        shape = np.shape(variable.get_value(borrow=True))
        return api.at.TensorType(variable.dtype, shape=shape[::-1] if flip else shape)()

    carried = [carried_as(variable, flip) for variable, flip in zip(params, flipped)]
    (cost_in_step, *updated), read = rebound(
        [cost] + [value for _, value in updates], givens,
        {index: index_in_step, **dict(zip(params, turned(carried)))})
    outputs = [cost_in_step] + turned(updated)
    if mode == "jax":  # one XLA loop, called directly (its parameters donated)
        from ..backend.jax.direct import JaxSteps, jax_graph

        step = jax_graph([index_in_step, *carried, *read], outputs)
        call = JaxSteps(step, params, steps, flipped)
        return TrainingSteps(call, int(steps), call)
    step = api.module("graph.fg").FunctionGraph([index_in_step, *carried, *read], outputs,
                                                 clone=False)
    op = MultiStep(step, steps, len(params), mode=function_mode("c"))
    first, count = index.type(), index.type()
    results = op(first, count, *params, *read)
    compiled = api.function([first, count], results[0], updates=list(zip(params, results[1:])),
                            mode=function_mode(mode))
    return TrainingSteps(compiled, int(steps), compiled)


def rebound(outputs, givens, replace):
    """``outputs`` with ``givens`` applied, then the variables of ``replace``
    (a function's explicit inputs, made anew: they also appear inside the
    givens) replaced; and the shared variables the result reads, for a
    graph of its own (a step, a scoring window)."""
    api = activate()
    SharedVariable = api.module("compile.sharedvalue").SharedVariable
    given = api.clone_replace(list(outputs), replace=dict(givens or {}))
    rebuilt = api.clone_replace(given, replace=replace)
    return rebuilt, [v for v in api.graph_inputs(rebuilt) if isinstance(v, SharedVariable)]


def minibatch_calls(split, epoch, batch_size, steps, ends=None, start=0):
    """The minibatches of epoch ``epoch`` of ``split`` grouped into calls of
    at most ``steps`` updates: ``(first number, first index, count)``
    (:meth:`~int8store.dataset.split.Split.calls`: a call ends after
    ``steps`` minibatches, where a streamed split's shard is replaced, and
    after any minibatch ``number`` for which ``ends(number)`` is true).

    Examples
    --------
    >>> import numpy as np
    >>> from int8store import SharedDataset
    >>> data = SharedDataset.from_arrays(np.zeros((50, 4), np.uint8), np.zeros(50), name="train")
    >>> list(minibatch_calls(data, 0, 5, steps=4, ends=lambda number: number == 5))
    [(0, 0, 4), (4, 4, 2), (6, 6, 4)]
    """
    return split.calls(epoch, batch_size, steps, ends, start)
