"""Which form of the classic tutorials' convolution a GPU runs fastest.

Theano's conv2d, which the classic LeNet5 calls, is a true convolution: the
kernel turned half-way round, then correlated (what
``jax.lax.conv_general_dilated`` computes), and int8store converts it so
(``int8store/backend/jax/pytensor_conversions.py``). XLA's GPU compiler folds
the turned kernel into the convolution and calls cuDNN's backward-data
convolution (``__cudnn$convBackwardInput``) for the forward pass. Behind an
optimization barrier the turn stays a kernel of its own (a few hundred
values) and the forward pass is cuDNN's forward convolution. Which is faster
is the GPU's to say. This times three forms:

* ``turned``: the kernel turned in the graph, as int8store converts it now;
* ``turned, barrier``: the same behind ``jax.lax.optimization_barrier``;
* ``correlation``: no turn (what a kernel stored turned would cost: the floor).

Each form runs for LeNet5's two layers, at a training minibatch (500) and a
scoring group (5000), forward only and forward with backward (the weights'
gradient, and the input's for the second layer, as a training step needs).
Each is a loop of ``--steps`` trips in one call; the forms alternate round by
round, and the table gives medians of ``--rounds``. First it checks that the
three forms give the same values.

    python bench/conv_forms.py [--rounds 5] [--steps 100] [--batches 500 5000]
"""

import argparse
import statistics
import time

import numpy as np

#: LeNet5's convolutions: (name, input's channels and side, filters, side)
LAYERS = (("layer 0", 1, 28, 20, 5), ("layer 1", 20, 12, 50, 5))


def forms():
    """``{name: conv(x, kern)}``, the true convolution in each form."""
    import jax

    def correlate(x, kern):
        return jax.lax.conv_general_dilated(x, kern, (1, 1), "VALID")

    return {
        "turned": lambda x, kern: correlate(x, kern[:, :, ::-1, ::-1]),
        "turned, barrier": lambda x, kern: correlate(
            x, jax.lax.optimization_barrier(kern[:, :, ::-1, ::-1])),
        "correlation": lambda x, kern: correlate(x, kern),  # (kern given turned already)
    }


def loops(conv, steps, backward, input_gradient):
    """A jitted loop of ``steps`` trips of ``conv`` (the weights nudged each
    trip, so that XLA cannot take the work out of the loop)."""
    import jax
    import jax.numpy as jnp

    def loss(x, kern):
        return jnp.sum(jnp.tanh(conv(x, kern)))

    def forward(x, kern):
        def body(i, total):
            return total + loss(x, kern * (1 + i * 1e-7))
        return jax.lax.fori_loop(0, steps, body, jnp.zeros((), x.dtype))

    def train(x, kern):
        def body(i, carry):
            kern, total = carry
            if input_gradient:
                grad_x, grad_kern = jax.grad(loss, argnums=(0, 1))(x, kern)
                total = total + jnp.sum(grad_x)
            else:
                grad_kern = jax.grad(loss, argnums=1)(x, kern)
            return kern - 1e-3 * grad_kern, total
        kern, total = jax.lax.fori_loop(0, steps, body, (kern, jnp.zeros((), x.dtype)))
        return total + jnp.sum(kern)  # (what the loop computes, used: none of it left out)

    return jax.jit(train if backward else forward)


def arrays(batch, channels, side, filters, size, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, channels, side, side), dtype=np.float32)
    kern = rng.standard_normal((filters, channels, size, size), dtype=np.float32) * 0.1
    return x, kern


def largest_difference(batch=8):
    """The largest difference between the forms' values (and gradients),
    relative to the largest value: they compute the same convolution."""
    import jax

    largest = 0.0
    for _, channels, side, filters, size in LAYERS:
        x, kern = arrays(batch, channels, side, filters, size)
        turned = np.ascontiguousarray(kern[:, :, ::-1, ::-1])
        got = {}
        for name, conv in forms().items():
            given = turned if name == "correlation" else kern
            value = conv(x, given)
            grad_x = jax.grad(lambda x: (conv(x, given) ** 2).sum())(x)
            got[name] = np.concatenate([np.ravel(value), np.ravel(grad_x)])
        reference = got["turned"]
        scale = float(np.max(np.abs(reference)))
        for values in got.values():
            largest = max(largest, float(np.max(np.abs(values - reference))) / scale)
    return largest


def measure(batches, steps, rounds):
    """Rows ``(layer, batch, pass, form, ms a trip)``."""
    import jax

    timings = {}
    for layer, channels, side, filters, size in LAYERS:
        for batch in batches:
            x, kern = arrays(batch, channels, side, filters, size)
            x, kern = jax.device_put(x), jax.device_put(kern)
            for backward in (False, True):
                calls = {name: loops(conv, steps, backward, layer != "layer 0")
                         for name, conv in forms().items()}
                for call in calls.values():
                    call(x, kern).block_until_ready()  # (compiled and warm)
                for _ in range(rounds):
                    for name, call in calls.items():
                        began = time.perf_counter()
                        call(x, kern).block_until_ready()
                        key = (layer, batch, "forward and backward" if backward else "forward",
                               name)
                        timings.setdefault(key, []).append(
                            (time.perf_counter() - began) * 1e3 / steps)
    return [key + (statistics.median(times),) for key, times in timings.items()]


def table(rows):
    lines = ["| layer | batch | pass | form | ms a trip | vs turned |",
             "|---|---:|---|---|---:|---:|"]
    turned = {row[:3]: row[4] for row in rows if row[3] == "turned"}
    for layer, batch, passes, form, ms in rows:
        lines.append(f"| {layer} | {batch} | {passes} | {form} | {ms:.4f} | "
                     f"{ms / turned[layer, batch, passes]:.2f} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100, help="trips of each loop (default 100)")
    parser.add_argument("--batches", type=int, nargs="+", default=[500, 5000])
    args = parser.parse_args(argv)
    import jax

    device = jax.devices()[0]
    print(f"JAX {jax.__version__} on {device.platform} ({device.device_kind}); "
          f"medians of {args.rounds} rounds of {args.steps} trips")
    print(f"the forms' values and gradients differ by at most {largest_difference():.1e} "
          "of the largest")
    print(table(measure(args.batches, args.steps, args.rounds)))


if __name__ == "__main__":
    main()
