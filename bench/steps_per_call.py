"""Many steps per call: milliseconds per training step of the tutorials'
models in int8store's JAX mode with K = 1, 10 and 100 minibatch updates per
call (:func:`int8store.training.steps_function`), beside the same step written in
plain JAX, called once per step (``jax.jit``) and K = 100 steps per call
(``lax.scan``), all measured in one run, alternated round by round.

Every way trains on int8 images resident on JAX's default device (a GPU when
JAX sees one): 60,000 generated 28x28 images, each minibatch sliced from the
int8 array and widened to float32 inside the step, parameters kept on the
device. Logistic regression at batch 10, 100 and 600; the MLP (784-500-10, tanh)
at 20, its tutorial's; LeNet5 at 100 and 500.
A second table gives the C backend's K = 1 and K = 10 (``--c-rows``), where
a call costs little and many steps per call do not pay.

In JAX mode "int8store" is what the tutorials run, the steps function
called directly (K = 1 included), and "classic function" the classic
``function([index], ...)`` compiled in int8store's JAX mode, called through
the library's ``Function`` (what the classic tutorial files run with
int8store's ``load_data``).

The medians are over ``--rounds`` rounds, each timing ``--steps`` steps of
every way (a multiple of the largest K; ``lax.scan`` makes that many steps a
call); the ratios are to int8store's K = 1 and to plain ``jax.jit`` in the
same run. ``--cases`` picks model/batch pairs (``logistic-10``, ...,
``lenet5-500``) and ``--ks`` the steps a call: on a CPU, where a LeNet5 step
takes a large part of a second, ``--cases lenet5-100 lenet5-500 --ks 1 10
--steps 10``.

With ``--tutorial``, instead: the logistic-regression tutorial itself
(``tutorials/logistic_sgd.py``, JAX mode, batch 600) on an MNIST-shaped set
(50,000 / 10,000 / 10,000 generated 28x28 images, int8 resident), six epochs
with each K of ``--ks``: the time of an epoch, from one validation line to
the next (its steps, the validation and, when the model improved, the test
scoring, as the tutorial does them), the first epoch (which compiles) left out.

    python bench/steps_per_call.py [--rounds 9] [--steps 200] [--cases ...] [--ks 1 10 100] [--c-rows]
    python bench/steps_per_call.py --tutorial [--ks 1 100]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tutorials"), str(HERE)]

import numpy as np  # noqa: E402

from models import MLP_L2, build_step  # noqa: E402  (sets floatX to float32)
from synthetic import digit_like_images  # noqa: E402

from int8store import SharedDataset, keep_on_device, place  # noqa: E402
from int8store.training import steps_function

EXAMPLES = 60000
CASES = {"logistic-10": ("logistic regression", 10), "logistic-100": ("logistic regression", 100),
         "logistic-600": ("logistic regression", 600), "mlp-20": ("MLP", 20),
         "lenet5-100": ("LeNet5", 100), "lenet5-500": ("LeNet5", 500)}
RATES = {"logistic regression": 0.13, "MLP": 0.01, "LeNet5": 0.1}


# -- the same steps in plain JAX -----------------------------------------------------

def _plain(model, codes, labels, batch, rate, steps):
    """``(params, step, scan)``: the model's parameters (as int8store's are
    initialised for logistic regression: zeros; the MLP's hidden layer and
    LeNet5: uniform, as the tutorials), one SGD step on minibatch ``i`` (jitted), and ``steps``
    steps from minibatch ``first`` in one call (``lax.scan``, jitted)."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(23455)
    if model == "logistic regression":
        params = [jnp.zeros((784, 10), jnp.float32), jnp.zeros(10, jnp.float32)]

        def forward(params, x):
            W, b = params
            return x @ W + b
    elif model == "MLP":
        bound = np.sqrt(6.0 / (784 + 500))
        params = [jnp.asarray(np.random.RandomState(1234).uniform(-bound, bound, (784, 500)),
                              jnp.float32), jnp.zeros(500, jnp.float32),
                  jnp.zeros((500, 10), jnp.float32), jnp.zeros(10, jnp.float32)]

        def forward(params, x):
            W0, b0, W1, b1 = params
            return jnp.tanh(x @ W0 + b0) @ W1 + b1
    else:
        def uniform(shape, fan_in, fan_out):
            bound = np.sqrt(6.0 / (fan_in + fan_out))
            return jnp.asarray(rng.uniform(-bound, bound, shape), jnp.float32)

        params = [uniform((20, 1, 5, 5), 25, 20 * 25 // 4), jnp.zeros(20, jnp.float32),
                  uniform((50, 20, 5, 5), 500, 50 * 25 // 4), jnp.zeros(50, jnp.float32),
                  uniform((800, 500), 800, 500), jnp.zeros(500, jnp.float32),
                  jnp.zeros((500, 10), jnp.float32), jnp.zeros(10, jnp.float32)]

        def conv_pool(x, W, b):
            y = jax.lax.conv_general_dilated(x, W, (1, 1), "VALID")
            y = jax.lax.reduce_window(y, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
            return jnp.tanh(y + b[None, :, None, None])

        def forward(params, x):
            W0, b0, W1, b1, W2, b2, W3, b3 = params
            h = conv_pool(x.reshape(-1, 1, 28, 28), W0, b0)
            h = conv_pool(h, W1, b1)
            h = jnp.tanh(h.reshape(h.shape[0], -1) @ W2 + b2)
            return h @ W3 + b3

    def loss(params, x, y):
        nll = -jnp.mean(jax.nn.log_softmax(forward(params, x))[jnp.arange(y.shape[0]), y])
        if model == "MLP":  # the tutorial's L2 term
            nll = nll + MLP_L2 * sum((W ** 2).sum() for W in params[::2])
        return nll

    def one(params, codes, labels, i):
        rows = jax.lax.dynamic_slice_in_dim(codes, i * batch, batch)
        x = (rows.astype(jnp.float32) + 128) / 256
        y = jax.lax.dynamic_slice_in_dim(labels, i * batch, batch)
        cost, grads = jax.value_and_grad(loss)(params, x, y)
        return [p - rate * g for p, g in zip(params, grads)], cost

    step = jax.jit(one)

    @jax.jit
    def scan(params, codes, labels, first):
        def body(params, k):
            return one(params, codes, labels, first + k)
        return jax.lax.scan(body, params, jnp.arange(steps))

    return params, step, scan


def _int8store_ways(model, images, labels, batch, mode, ks):
    """``{(mode, "int8store", k): run(n)}``: n steps in calls of k, each
    returning what to wait for (the first parameter's value)."""
    from int8store import function_mode, tensor_library

    train = SharedDataset.from_arrays(images, labels, name="train", dtype="float32")
    if mode == "jax":
        place([train], "jax")
    params, index, cost, updates, givens = build_step(model, train, batch, RATES[model])
    one = tensor_library().function([index], cost, updates=updates, givens=givens,
                                    mode=function_mode(mode))
    # In JAX mode the tutorials make every update through steps_function (K =
    # 1 too: int8store's own loop, called directly); on the C backend, K = 1
    # is the classic function's call.
    calls = {k: steps_function([index], cost, updates, givens, steps=k, mode=mode)
             for k in ks if k > 1 or mode == "jax"}
    if mode == "jax":
        keep_on_device(params, [one])
    span = len(labels) // batch - max(ks) + 1  # every call's minibatches lie in the split

    def value():
        return params[0].get_value(borrow=True, return_internal_type=True)

    def single(n):
        for i in range(n):
            one(i % span)
        return value()

    def grouped(n, call):
        for i in range(n // call.steps):
            call((i * call.steps) % span)
        return value()

    ways = {(mode, "classic function" if mode == "jax" else "int8store", 1): single}
    for k, call in calls.items():
        ways[(mode, "int8store", k)] = lambda n, call=call: grouped(n, call)
    return ways


def _plain_data(images, labels):
    """What the plain JAX ways train on: the images as int8 codes (pixel -
    128), a row each, and the labels as int32 (on the host)."""
    codes = (images.reshape(len(images), -1).astype(np.int16) - 128).astype(np.int8)
    return codes, labels.astype(np.int32)


def _plain_ways(model, images, labels, batch, k):
    """The same step in plain JAX: one ``jax.jit`` call a step, and ``k``
    steps a call in ``lax.scan``."""
    import jax
    import jax.numpy as jnp

    codes, ys = (jax.device_put(jnp.asarray(array)) for array in _plain_data(images, labels))
    params, step, scan = _plain(model, codes, ys, batch, RATES[model], k)
    state = {"jit": params, "scan": list(params)}
    span = len(labels) // batch - k + 1

    def jitted(n):
        params = state["jit"]
        for i in range(n):
            params, _ = step(params, codes, ys, i % span)
        state["jit"] = params
        return params

    def scanned(n):
        params = state["scan"]
        for i in range(n // k):
            params, _ = scan(params, codes, ys, (i * k) % span)
        state["scan"] = params
        return params

    return {("jax", "plain jax.jit", 1): jitted, ("jax", "plain lax.scan", k): scanned}


def measure(cases, ks, rounds, steps, c_rows):
    """Each case's rows as soon as it is measured (a run cut short, as on a
    lent GPU's time limit, keeps the cases it finished)."""
    import jax

    images, labels = digit_like_images(EXAMPLES, seed=0)
    for case in cases:
        model, batch = CASES[case]
        ways = _int8store_ways(model, images, labels, batch, "jax", ks)
        ways.update(_plain_ways(model, images, labels, batch, max(ks)))
        if c_rows:
            ways.update(_int8store_ways(model, images, labels, batch, "c", [k for k in ks if k <= 10]))
        for run in ways.values():  # compile and warm up
            jax.block_until_ready(run(max(ks)))
        times = {way: [] for way in ways}
        for round_ in range(rounds):
            for way in (list(ways) if round_ % 2 == 0 else list(reversed(ways))):
                start = time.perf_counter()
                jax.block_until_ready(ways[way](steps))
                times[way].append((time.perf_counter() - start) / steps)
        median = {way: statistics.median(t) for way, t in times.items()}
        plain = median[("jax", "plain jax.jit", 1)]
        yield [(model, batch, mode, how, k, seconds, seconds / median[(mode, "int8store", 1)],
                seconds / plain if mode == "jax" else None)
               for (mode, how, k), seconds in median.items()]


def tutorial_epochs(ks, epochs=6):
    """``{k: [seconds of each epoch after the first]}`` of the logistic
    tutorial in JAX mode: the time from one epoch's validation line to the
    next (an epoch's steps, its validation, and its test scoring when the
    model improved); the first epoch also holds XLA's compilation."""
    from scratch import scratch_folder

    import logistic_sgd

    images, labels = digit_like_images(70000, seed=1)
    folder = scratch_folder("int8store-steps-")
    path = Path(folder) / "mnist-shaped.npz"
    np.savez(path, x_train=images[:50000], y_train=labels[:50000],
             x_valid=images[50000:60000], y_valid=labels[50000:60000],
             x_test=images[60000:], y_test=labels[60000:])
    from int8store.training import runner

    lines = runner.EpochLines
    times = {}
    for k in ks:
        stamps = {}

        class Timed(lines):  # the tutorial's per-epoch lines, time-stamped
            def __call__(self, epoch, text):
                if "validation error" in text:
                    stamps[epoch] = time.perf_counter()
                super().__call__(epoch, text)

        runner.EpochLines = Timed
        try:
            logistic_sgd.sgd_optimization_mnist(dataset=str(path), n_epochs=epochs, mode="jax",
                                                model_path=None, steps_per_call=k)
        finally:
            runner.EpochLines = lines
        times[k] = [stamps[e + 1] - stamps[e] for e in range(1, epochs)]
    return times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9,
                        help="alternating rounds of the cases (--tutorial times epochs 2 to 6 "
                             "of one run a K instead)")
    parser.add_argument("--steps", type=int, default=200,
                        help="steps a round, a multiple of the largest K")
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--ks", nargs="+", type=int, default=[1, 10, 100],
                        help="steps a call (1 is always measured)")
    parser.add_argument("--c-rows", action="store_true",
                        help="also the C backend's K = 1 and 10 (those of --ks)")
    parser.add_argument("--tutorial", action="store_true",
                        help="time epochs of the logistic tutorial instead (see above)")
    args = parser.parse_args(argv)
    ks = sorted(set([1] + args.ks))
    if args.steps % max(ks):
        parser.error(f"--steps must be a multiple of the largest K, {max(ks)}")
    import jax

    from int8store.backend import activate

    device = jax.devices()[0]
    if args.tutorial:
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):  # the tutorial's own lines
            times = tutorial_epochs(ks)
        print(f"{activate().describe()}, JAX {jax.__version__} on {device.platform}: "
              f"{device.device_kind}; tutorials/logistic_sgd.py, JAX mode, batch 600, "
              "50,000 training images (83 minibatches an epoch)")
        print("| steps per call | an epoch, ms (median of epochs 2 to 6) | fastest | vs K=1 |")
        print("|---:|---:|---:|---:|")
        base = statistics.median(times[ks[0]])
        for k, epochs in times.items():
            print(f"| {k} | {1000 * statistics.median(epochs):.1f} | {1000 * min(epochs):.1f} | "
                  f"{statistics.median(epochs) / base:.2f} |")
        return
    print(f"{activate().describe()}, JAX {jax.__version__} on {device.platform}: "
          f"{device.device_kind}; {EXAMPLES} int8 28x28 images resident; medians of "
          f"{args.rounds} alternating rounds of {args.steps} steps")
    print("| model | batch | mode | way | steps per call | ms/step | vs int8store K=1 | "
          "vs plain jax.jit |")
    print("|---|---:|---|---|---:|---:|---:|---:|", flush=True)
    for rows in measure(args.cases, ks, args.rounds, args.steps, args.c_rows):
        for model, batch, mode, how, k, seconds, vs_one, vs_plain in rows:
            print(f"| {model} | {batch} | {mode} | {how} | {k} | {1000 * seconds:.4f} | "
                  f"{vs_one:.2f} | {'' if vs_plain is None else f'{vs_plain:.2f}'} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
