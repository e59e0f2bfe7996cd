"""Max pooling in JAX shared by the conversions of both libraries' pooling ops
(:mod:`.aesara_conversions`, :mod:`.pytensor_conversions`): it imports JAX only."""

import jax.numpy as jnp

__all__ = ["tiled_max_pool_grad"]


def tiled_max_pool_grad(x, maxout, gz, window):
    """Windows that tile the input (stride = window, the common case): one
    elementwise expression over the input, which XLA fuses into the output
    buffer, instead of a masked update per window position, each of which XLA
    keeps as a temporary the size of the pooled output."""
    # Rows and columns the windows cover: all of them but a remainder that
    # ignore_border=True leaves out; partial border windows are cut to x.
    rows = min(maxout.shape[-2] * window[0], x.shape[-2])
    cols = min(maxout.shape[-1] * window[1], x.shape[-1])

    def spread(pooled):
        return jnp.repeat(jnp.repeat(pooled, window[0], axis=-2), window[1], axis=-1)[..., :rows, :cols]

    grad = jnp.where(x[..., :rows, :cols] == spread(maxout), spread(gz), 0).astype(x.dtype)
    if (rows, cols) == tuple(x.shape[-2:]):
        return grad
    extra = [(0, 0)] * (x.ndim - 2) + [(0, x.shape[-2] - rows), (0, x.shape[-1] - cols)]
    return jnp.pad(grad, extra)
