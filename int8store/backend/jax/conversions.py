"""int8store's JAX conversions, in :func:`convert`: a dispatcher of int8store's
own that falls back to the library's ``jax_funcify``. Only int8store's JAX
mode uses it (see :mod:`.mode`), so the library's plain ``"JAX"`` mode stays
as it ships.

Here: the minibatch op, the gathered rows, augmentation, Argmax and one
update a row (:mod:`.row_updates`), on both libraries. Then, by library, the
ops int8store's graphs use that it cannot convert: on Aesara 2.9.4 conv2d,
pooling, the classic softmax ops and two corrections (:mod:`.aesara_conversions`);
on PyTensor int8store's own convolution and pooling
(:mod:`.pytensor_conversions`).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ...augment.draws import augment
from ...codes.encoding import is_power_of_two
from ...errors import ArgumentError
from ..ops.augment import Augment
from ..ops.gather import GatherRows
from ..ops.quotient import LevelQuotient
from ..ops.minibatch import Minibatch
from ..setup.activation import activate
from ...order.blocks import check_shuffled_over
from .row_updates import one_update_a_row, row_update
from .sharding import AXIS, sharded_layout
from .shuffle import permuted_in_classes_jax

__all__ = ["convert", "typify"]

_api = activate()
_jax_funcify = _api.module("link.jax.dispatch").jax_funcify
_jax_typify = _api.module("link.jax.dispatch").jax_typify
Argmax = _api.module("tensor.math").Argmax
AdvancedIncSubtensor = _api.module("tensor.subtensor").AdvancedIncSubtensor
CheckAndRaise = _api.module("raise_op").CheckAndRaise
Constant = _api.module("graph.basic").Constant


def typify(data, dtype=None, **kwargs):
    """A constant of a converted graph as the generated code holds it: an
    array is put on the device as it is (the library's ``jax_typify`` goes
    through ``jnp.array``, which compiles a small XLA program for each shape
    and dtype, a dozen at a tutorial's start); anything else as the
    library's ``jax_typify`` gives it."""
    if isinstance(data, np.ndarray) and data.ndim:
        return jax.device_put(np.asarray(data, dtype=dtype))
    return _jax_typify(data, dtype=dtype, **kwargs)


@functools.singledispatch
def convert(op, **kwargs):
    """The JAX function for ``op``: int8store's conversion if it has one, else the library's."""
    return _jax_funcify(op, **kwargs)


@convert.register(Minibatch)
def jax_funcify_Minibatch(op, node=None, **kwargs):
    # Only int8store's JAX mode converts this op, and it checks every index
    # on the host first (the dynamic slice would clamp it).
    size, stride = op.size, op.stride
    layout = sharded_layout(node.inputs[0]) if node is not None else None
    if layout is not None:
        return _sharded_minibatch(op, *layout)
    if op.seed is not None:
        def shuffled(data, index):  # rows at these positions of the epoch's shuffle
            epoch, index = jnp.divmod(index, op.batches)
            rows = permuted_in_classes_jax(index * stride + jnp.arange(size), op.rows, op.seed,
                                           epoch)
            return jnp.take(data, rows, axis=0)

        return shuffled

    def minibatch(data, index):
        return jax.lax.dynamic_slice_in_dim(data, index * stride, size, axis=0)

    return minibatch


@convert.register(Augment)
def jax_funcify_Augment(op, node=None, **kwargs):
    # The numpy definition's arithmetic in jax.numpy: the same bytes.
    offsets = _places_over_devices(node.inputs[0]) if node is not None else None

    def augmented(codes, step, epoch):
        return augment(codes, op.spec, op.grid, op.seed, epoch, step, op.fill, jnp, offsets)

    return augmented


def _places_over_devices(codes):
    """Where ``codes`` are a minibatch of rows split over devices
    (:func:`_sharded_minibatch`), each row's place in the minibatch one
    device takes: row ``d * per + j`` (device ``d``'s ``j``-th) is example
    ``j * devices + d``. The augmentation's draws are keyed on it, so that
    they are those of one device; else None (the rows are in place)."""
    owner = codes.owner
    if owner is None or not isinstance(owner.op, Minibatch):
        return None
    layout = sharded_layout(owner.inputs[0])
    if layout is None:
        return None
    devices = layout[1]
    per, _ = sharded_steps(owner.op, devices)
    rows = np.arange(owner.op.size)
    return (rows % per) * devices + rows // per


@convert.register(GatherRows)
def jax_funcify_GatherRows(op, node=None, **kwargs):
    # The rows come from a permutation of the data's rows (a shard's order).
    def gather(data, rows):
        codes = jnp.take(data, rows, axis=0)
        if op.dtype is None:
            return codes
        dtype = jnp.dtype(op.dtype)
        return ((codes.astype(dtype) + dtype.type(op.offset)) - dtype.type(op.shift)) \
            * dtype.type(op.scale)

    return gather


@convert.register(LevelQuotient)
def jax_funcify_LevelQuotient(op, node=None, **kwargs):
    dtype = jax.dtypes.canonicalize_dtype(op.dtype)
    if is_power_of_two(op.divisor):  # (exact arithmetic, which XLA fuses into its consumer)
        precision = jax.dtypes.canonicalize_dtype(op.precision)
        offset, reciprocal = precision.type(op.offset), precision.type(1 / op.divisor)

        def quotient(codes):
            return ((codes.astype(precision) + offset) * reciprocal).astype(dtype)

        return quotient
    # Looked up: XLA's CPU division, float32 or float64, was an ulp off numpy's.
    table = op.table.astype(dtype)

    def quotient(codes):
        return jnp.take(jnp.asarray(table), codes.astype(jnp.int32) + 128)

    return quotient


def _sharded_minibatch(op, mesh, devices):
    """The minibatch of data split over ``devices`` (see :mod:`.sharding`:
    row ``r`` is local row ``r // devices`` of device ``r % devices``):
    ``size / devices`` consecutive local rows of each device from local row
    ``index * stride / devices`` (a window, ``stride`` 1, starts at local row
    ``index``), so that no device reads another's rows; shuffled, each
    device's positions take rows of its own classes (device counts dividing
    :data:`~int8store.order.shuffle.CLASSES`)."""
    from jax.sharding import NamedSharding, PartitionSpec

    per, local_stride = sharded_steps(op, devices)
    split = NamedSharding(mesh, PartitionSpec(AXIS))

    def in_blocks(data):
        blocks = data.reshape((devices, data.shape[0] // devices) + data.shape[1:])
        return jax.lax.with_sharding_constraint(blocks, split)

    def minibatch(data, index):
        rows = jax.lax.dynamic_slice_in_dim(in_blocks(data), index * local_stride, per, axis=1)
        return jax.lax.with_sharding_constraint(rows.reshape((op.size,) + data.shape[1:]), split)

    def shuffled(data, index):
        # Positions i * B + d + D * j of device d take rows of its own classes.
        epoch, index = jnp.divmod(index, op.batches)
        blocks = in_blocks(data)
        positions = (index * op.size + jnp.arange(devices)[:, None]
                     + devices * jnp.arange(per)[None, :])
        local = permuted_in_classes_jax(positions, op.rows, op.seed, epoch) // devices
        picked = jax.vmap(lambda block, take: jnp.take(block, take, axis=0))(blocks, local)
        return jax.lax.with_sharding_constraint(picked.reshape((op.size,) + data.shape[1:]), split)

    if op.seed is not None:
        check_shuffled_over(devices)
    return minibatch if op.seed is None else shuffled


def sharded_steps(op, devices):
    """``(rows per device, local stride)`` of a minibatch op over ``devices``."""
    if op.size % devices or (op.stride != 1 and op.stride % devices):
        raise ArgumentError(
            f"a minibatch of {op.size} rows (stride {op.stride}) cannot be split evenly over "
            f"{devices} devices: use a batch size that is a multiple of {devices}")
    return op.size // devices, 1 if op.stride == 1 else op.stride // devices


@convert.register(AdvancedIncSubtensor)
def jax_funcify_AdvancedIncSubtensor(op, node=None, **kwargs):
    general = _jax_funcify(op, node=node, **kwargs)
    if node is None or not one_update_a_row(node):
        return general
    return row_update(op, general)


@convert.register(CheckAndRaise)
def jax_funcify_CheckAndRaise(op, node=None, **kwargs):
    """An assertion JAX cannot check inside its trace: skipped, as the
    library's conversion skips it, without the warning that conversion gives
    for each (PyTensor's own broadcasting checks put one in most users'
    graphs: a false alarm on a first run). One false whatever the inputs is
    raised, as PyTensor raises it."""
    conditions = node.inputs[1:] if node is not None else ()
    if any(isinstance(c, Constant) and not bool(c.data) for c in conditions):
        raise op.exc_type(op.msg)

    def assert_fn(x, *conditions):
        return x

    return assert_fn


@convert.register(Argmax)
def jax_funcify_Argmax(op, **kwargs):
    axis = op.axis
    # int64 where JAX has it (x64 enabled), else int32: asking for int64
    # without x64 only warns and truncates.
    index = jax.dtypes.canonicalize_dtype("int64")

    def argmax(x):
        if axis is None:
            return jnp.argmax(x).astype(index)
        if len(axis) == 1:
            return jnp.argmax(x, axis=axis[0]).astype(index)
        # Several axes: move them last, flatten them, take the argmax there.
        keep = [a for a in range(x.ndim) if a not in axis]
        moved = jnp.transpose(x, keep + list(axis))
        flat = moved.reshape(moved.shape[:len(keep)] + (-1,))
        return jnp.argmax(flat, axis=-1).astype(index)

    return argmax



def jax_funcify_CAReduce(op, node=None, **kwargs):
    """The library's conversion returns the accumulator's dtype (Aesara 2.9.4 and PyTensor 3.3) (a float64 sum of
    float32 values stays float64, and an update then fails to store it):
    accumulate in that dtype, as the C backend does, and return the output's."""
    out_dtype = node.outputs[0].dtype if node is not None else None
    acc_dtype = getattr(op, "acc_dtype", None)
    numpy_name = (getattr(op, "nfunc_spec", None) or (None,))[0]
    if numpy_name in ("sum", "prod") and acc_dtype and out_dtype:
        axis = None if op.axis is None else tuple(op.axis)
        reduce_numpy = getattr(jnp, numpy_name)

        # 64-bit types only where JAX has them (x64 enabled): else 32-bit, as
        # before, without JAX's warning about a truncated dtype.
        accumulate = jax.dtypes.canonicalize_dtype(acc_dtype)
        result = jax.dtypes.canonicalize_dtype(out_dtype)

        def careduce(x):
            # dtype=, not x.astype(): XLA then accumulates in acc_dtype without
            # a widened copy of x (a float64 copy of a float32 activation).
            return reduce_numpy(x, axis=axis, dtype=accumulate).astype(result)

        return careduce
    reduce = _jax_funcify(op, node=node, **kwargs)

    def careduce_cast(x):
        out = reduce(x)
        return out.astype(jax.dtypes.canonicalize_dtype(out_dtype)) if out_dtype else out

    return careduce_cast


if _api.NAME == "aesara":
    from ..setup.fixes import in_versions
    from .aesara_conversions import CORRECTED_VERSIONS, register
    if in_versions(CORRECTED_VERSIONS):
        convert.register(_api.module("tensor.elemwise").CAReduce)(jax_funcify_CAReduce)
else:
    from .pytensor_conversions import register
    convert.register(_api.module("tensor.elemwise").CAReduce)(jax_funcify_CAReduce)
register(convert)
