"""A run's data position within an epoch: the minibatch it starts at
(a run resumed mid-epoch), checked the same way for a split held whole and
a streamed one."""

from ..errors import ArgumentError

__all__ = ["check_start"]


def check_start(start, count, name):
    """Refuse a start outside an epoch of ``count`` minibatches of split
    ``name`` (``count`` itself is one: the epoch is over)."""
    if int(start) != start or not 0 <= start <= count:
        raise ArgumentError(f"{name}: an epoch of {count} minibatches cannot start at "
                            f"minibatch {start!r}")
