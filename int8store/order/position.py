"""A run's data position within an epoch: the minibatch it starts at
(a run resumed mid-epoch), checked the same way for a split held whole and
a streamed one."""

import math
import numbers

from ..errors import ArgumentError

__all__ = ["check_start", "check_epoch", "check_batch_size"]


def check_start(start, count, name):
    """Refuse a start outside an epoch of ``count`` minibatches of split
    ``name`` (``count`` itself is one: the epoch is over); returns it as an
    int (2.0 was taken, then failed streamed as a float)."""
    whole = isinstance(start, numbers.Real) and not isinstance(start, bool) \
        and math.isfinite(start) and int(start) == start  # (None, nan: int()'s own errors)
    if not whole or not 0 <= start <= count:
        raise ArgumentError(f"{name}: an epoch of {count} minibatches cannot start at "
                            f"minibatch {start!r}")
    return int(start)


def check_epoch(epoch, name):
    """Refuse an epoch that is not a whole number from 0 to 2**32 - 1 (-1
    drew an order of its own; the orders' arithmetic takes epochs to
    unsigned 32-bit integers, where 2**32 would be epoch 0 again)."""
    if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral) \
            or not 0 <= epoch < 1 << 32:
        raise ArgumentError(f"{name}: epoch {epoch!r}: expected a whole number from 0 to "
                            f"{(1 << 32) - 1}")
    return int(epoch)


def check_batch_size(batch_size, name):
    """Refuse a batch size that is not a positive whole number (True was 1)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) \
            or batch_size < 1:
        raise ArgumentError(f"{name}: batch_size must be a positive integer, got {batch_size!r}")
    return int(batch_size)
