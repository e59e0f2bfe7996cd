"""A store's splits placed over several devices, each process keeping only
the rows its own devices hold: no host ever holds a whole split's images.

The layout is :class:`~int8store.order.blocks.Blocks` (a pure function of
the split's length and the device count: row ``r`` on device ``r % D``);
JAX asks each process for its own devices' rows only
(``jax.make_array_from_callback``), which are read from the store a stretch
at a time, checked against their chunks' checksums, every ``D``-th row
kept. (A device's rows lie all over the file, so each process reads the
split's chunks once per device of its own.) Labels (4 bytes an example) are read whole by every process: the
tutorials count and score with them. Before anything is placed, every
process checks that all opened the same store (its manifest digest).
"""

import numpy as np

from ..codes.vocabulary import SPLITS

#: Rows read at a time when a device's rows (every D-th) are read from a store.
_STRETCH_ROWS = 4096

__all__ = ["load_store_over_devices"]


def load_store_over_devices(store, devices, normalize="unit", dtype=None, statistics=(None, None)):
    """``{split: SharedDataset}`` of ``store`` (an opened
    :class:`~int8store.store.reader.Store` holding the three splits), each
    split in blocks over ``devices`` (a count, ``"all"`` or a list: see
    :func:`int8store.place`); ``statistics``: the training split's
    ``(dataset_mean, channel_statistics)`` for ``normalize``
    (:func:`int8store.codes.statistics.normalization_statistics`).
    ``dataset.rows_read`` lists the ``(start, stop)`` row ranges this process
    read."""
    from ..backend.jax.sharding import check_same_data, data_mesh, place_rows
    from ..order.blocks import Blocks
    from .shared import SharedDataset

    path = store.path
    mesh = data_mesh(devices)
    check_same_data(bytes.fromhex(store.manifest_digest), str(path))
    blocks = {name: Blocks(store.splits[name], mesh.size, name=name) for name in SPLITS}
    mean, per_channel = statistics
    features = int(np.prod(store.image_shape))
    datasets = {}
    for name in SPLITS:
        labels = store.read_labels(name)
        # Built over one placeholder row; the rows go straight to the devices.
        dataset = SharedDataset(np.zeros((1, features), np.int8), labels[:1], store.encoding,
                                normalize=normalize, dataset_mean=mean,
                                image_shape=store.image_shape, name=name, dtype=dtype,
                                channel_statistics=per_channel)
        dataset.rows_read = []

        def read(start, stop, step, name=name, dataset=dataset):
            # One device's rows, every step-th: read a stretch at a time, kept strided.
            wanted = range(start, stop, step)
            rows = np.empty((len(wanted), features), np.int8)
            stretch = max(1, _STRETCH_ROWS // step) * step
            for first in range(start, stop, stretch):
                last = min(first + stretch, stop)
                chunk = np.empty((last - first, features), np.int8)
                store.read_rows(name, first, last, chunk)
                taken = chunk[::step]
                done = (first - start) // step
                rows[done:done + len(taken)] = taken
            dataset.rows_read.append((start, stop, step))
            return rows

        dataset.adopt_placement(labels, blocks[name],
                                lambda name=name: store.split_digest(name))
        place_rows(dataset.data, mesh, blocks[name], read)
        # y.get_value() gives the host labels, padding left out (what a classic loop counts).
        place_rows(dataset.y, mesh, blocks[name],
                   lambda start, stop, step, labels=dataset.labels: labels[start:stop:step],
                   host=dataset.labels)
        datasets[name] = dataset
    return datasets
