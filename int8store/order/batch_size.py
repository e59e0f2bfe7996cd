"""The batch size a run takes: what the user asked, cut to what every split
(or shard) holds, then down to a multiple of the device count, so that each
device takes the same rows of every minibatch. The tutorials' run
(:class:`int8store.training.Run`) and ``int8store budget`` both take it from
here, so the budget plans the batch the run will take."""

from dataclasses import dataclass

from ..errors import ArgumentError

__all__ = ["BatchSize", "fitted_batch_size", "check_over_devices"]


@dataclass(frozen=True)
class BatchSize:
    """``size``, the batch size taken; ``largest``, set when the batch asked
    was more than every split holds (then cut to it); ``devices``, set when
    it was then cut to a multiple of that device count."""

    size: int
    largest: int = None
    devices: int = None


def check_over_devices(batch_size, devices):
    """Refuse a batch size that leaves a device without a row: it is cut
    down to a multiple of the device count."""
    if batch_size < devices:
        raise ArgumentError(f"--batch-size {batch_size} over {devices} devices: expected at "
                            f"least {devices}, a row on each device (a batch size is cut down "
                            f"to a multiple of {devices}); raise --batch-size or lower --devices")


def fitted_batch_size(asked, largest, devices=1):
    """The :class:`BatchSize` taken for ``asked`` where a minibatch may hold
    at most ``largest`` examples (the smallest split's, or shard's), over
    ``devices`` devices.

    >>> fitted_batch_size(600, 300).size, fitted_batch_size(600, 300, devices=8).size
    (300, 296)
    """
    size = min(int(asked), int(largest))
    check_over_devices(size, devices)
    cut = size % devices
    return BatchSize(size - cut, largest=size if size < asked else None,
                     devices=devices if cut else None)
