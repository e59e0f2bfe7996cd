"""What an augmentation does to a minibatch of int8 codes, in numpy or
``jax.numpy`` (``xp``): :func:`augment`.

Each example's draws come from a counter-based key of (seed, epoch,
position), where the position is ``step * batch + example`` (the example's
place in the epoch's sequence of minibatches): MurmurHash3's finaliser
(:func:`int8store.order.shuffle.mix`) over the seed, the epoch and the
position, then once more per draw. Nothing is carried from step to step,
so any step's minibatch can be made again alone, in any mode, from those
integers; and since every draw is 32-bit unsigned arithmetic and the pixels
move by index arithmetic, numpy, JAX and the C op
(:mod:`int8store.backend.ops.augment`) give the same bytes.

Per example, in this order (output pixel ``(y, x)``):

1. flip: ``x`` is read from column ``cols - 1 - x`` when the example is flipped;
2. translation by ``(dy, dx)``, each drawn from ``[-r, r]``: the pixel comes
   from ``(y - dy, x' - dx)``, or, outside the image, from the fill (black,
   the nearest edge pixel, or the pixel mirrored about the edge);
3. cut-out: the square of side ``s`` whose centre ``(cy, cx)`` is drawn
   anywhere in the image (rows ``cy - s // 2`` to ``cy - s // 2 + s - 1``,
   clipped at the border) is set to black (DeVries and Taylor's cut-out).

Channels (images stored channels-last) move together.
"""

import numpy as np

from ..order.shuffle import EPOCH_SALT, GOLDEN, mix

__all__ = ["augment", "source_pixels", "example_parameters", "example_keys", "draw",
           "AUGMENT_SALT", "DRAWS"]

#: Added to the spread position before it is mixed into an example's key
#: (the shuffle's sub-streams use 1 and 2).
AUGMENT_SALT = 3
#: An example's draws, in the order of their increments: draw ``j`` mixes
#: ``key + (j + 1) * GOLDEN``.
DRAWS = ("row_shift", "column_shift", "flip", "cutout_row", "cutout_column")
_MASK = 0xFFFFFFFF


def example_keys(seed, epoch, positions, xp):
    """The uint32 key of the examples at ``positions`` (integers, taken
    modulo 2**32) of epoch ``epoch`` under ``seed``."""
    with np.errstate(over="ignore"):  # numpy's uint32 arithmetic wraps, as intended
        return _keys(seed, epoch, positions, xp)


def _keys(seed, epoch, positions, xp):
    seed = (xp.asarray(seed & _MASK, dtype=xp.uint32) if isinstance(seed, int)
            else xp.asarray(seed).astype(xp.uint32))
    epoch = xp.asarray(epoch).astype(xp.uint32)
    base = mix(seed ^ mix(epoch * xp.uint32(GOLDEN) + xp.uint32(EPOCH_SALT), xp), xp)
    positions = xp.asarray(positions).astype(xp.uint32)
    return mix(base ^ mix(positions * xp.uint32(GOLDEN) + xp.uint32(AUGMENT_SALT), xp), xp)


def draw(keys, name, bound, xp):
    """Draw ``name`` (one of :data:`DRAWS`) of each key, in ``[0, bound)``
    (int32; a remainder: its bias, under ``bound / 2**32``, is immaterial)."""
    increment = (DRAWS.index(name) + 1) * GOLDEN & _MASK
    with np.errstate(over="ignore"):
        return (mix(keys + xp.uint32(increment), xp) % xp.uint32(bound)).astype(xp.int32)


def example_parameters(spec, grid, seed, epoch, step, batch, xp, offsets=None):
    """``(dy, dx, flipped, cy, cx)``, int32 vectors of ``batch``: each
    example's draws for minibatch ``step`` of ``epoch``; ``offsets``: each
    row's place in the minibatch (by default its row: see :func:`augment`)."""
    rows, columns, _ = grid
    offsets = xp.arange(batch, dtype=xp.uint32) if offsets is None \
        else xp.asarray(offsets).astype(xp.uint32)
    with np.errstate(over="ignore"):
        positions = xp.asarray(step).astype(xp.uint32) * xp.uint32(batch) + offsets
    keys = example_keys(seed, epoch, positions, xp)
    none = xp.zeros(batch, dtype=xp.int32)
    r = spec.translate
    dy, dx = ((draw(keys, "row_shift", 2 * r + 1, xp) - r, draw(keys, "column_shift", 2 * r + 1, xp) - r)
              if r else (none, none))
    if spec.flip == "random":
        flipped = draw(keys, "flip", 2, xp)
    elif spec.flip == "alternate":  # the position's draw of epoch 0, inverted in odd epochs
        first = draw(example_keys(seed, 0, positions, xp), "flip", 2, xp)
        flipped = first ^ (xp.asarray(epoch).astype(xp.int32) & 1)
    else:
        flipped = none
    cy, cx = ((draw(keys, "cutout_row", rows, xp), draw(keys, "cutout_column", columns, xp))
              if spec.cutout else (none, none))
    return dy, dx, flipped, cy, cx


def source_pixels(spec, grid, parameters, xp):
    """For each example and output pixel, the pixel (``y * cols + x``) it is
    read from, or -1 for black: int32 ``(batch, rows * cols)``."""
    rows, columns, _ = grid
    dy, dx, flipped, cy, cx = (p[:, None, None] for p in parameters)
    y = xp.arange(rows, dtype=xp.int32)[None, :, None]
    x = xp.arange(columns, dtype=xp.int32)[None, None, :]
    from_y, inside_y = _within(y - dy, rows, spec.fill, xp)
    from_x, inside_x = _within(xp.where(flipped != 0, columns - 1 - x, x) - dx, columns,
                               spec.fill, xp)
    keep = inside_y & inside_x
    if spec.cutout:
        top, left = cy - spec.cutout // 2, cx - spec.cutout // 2
        keep = keep & ~((y >= top) & (y < top + spec.cutout) & (x >= left)
                        & (x < left + spec.cutout))
    source = xp.where(keep, from_y * columns + from_x, -1)
    return source.reshape(source.shape[0], rows * columns).astype(xp.int32)


def _within(index, size, fill, xp):
    """``(index brought into [0, size), where it was inside)`` under ``fill``
    (a translation is shorter than the image, so one reflection suffices)."""
    if fill == "zero":
        return xp.clip(index, 0, size - 1), (index >= 0) & (index < size)
    if fill == "reflect":
        index = xp.where(index < 0, -index, index)
        index = xp.where(index > size - 1, 2 * (size - 1) - index, index)
    return xp.clip(index, 0, size - 1), xp.ones(index.shape, dtype=bool)


def augment(codes, spec, grid, seed, epoch, step, fill, xp, offsets=None):
    """Minibatch ``step`` of ``epoch``, int8 ``codes`` of shape ``(batch,
    rows * cols * channels)``, augmented by ``spec`` (an
    :class:`~int8store.augment.spec.Augmentation`) under ``seed``; ``fill``
    is the code of a black pixel. A new array of the same shape.
    ``offsets``: each row's place in the minibatch as one device takes it,
    where the rows come in another order (over devices, each device's rows
    in turn); by default row ``i`` is example ``i``."""
    batch = codes.shape[0]
    rows, columns, channels = grid
    source = source_pixels(spec, grid, example_parameters(spec, grid, seed, epoch, step, batch, xp,
                                                          offsets), xp)
    images = codes.reshape(batch, rows * columns, channels)
    taken = xp.take_along_axis(images, xp.maximum(source, 0)[:, :, None], axis=1)
    out = xp.where(source[:, :, None] < 0, xp.asarray(fill, dtype=xp.int8), taken)
    return out.reshape(batch, rows * columns * channels)
