"""The final splits' examples read from the source's splits, in the order
the arrangement drew (:mod:`.arrangement`), a chunk at a time.

Each final split is some ``rows`` of a source split, in order. They are
read in one of three ways, by what the order and the source allow:

* **in one pass** when no order was drawn (each final split takes its rows
  in the source's order): each chunk's examples go to the split that takes
  them, so a validation split cut from train comes out of train's own pass;
* **by index** when the source reaches any example cheaply (an array in
  memory, image files in a folder or a zip): each final split's rows are
  read a chunk at a time, in its order;
* **through a spill file** when the source is read in its own order only
  (a tar, an ``.npz``, an HDF5 file, a store): one pass writes the split's
  int8 codes, in the source's order, to a temporary file that has no name
  (``spill_dir``: beside the output), and each final split's rows are read
  back from it by index, a chunk at a time (sorted within a chunk, for the
  disk's sake). Memory: a chunk, and 8 bytes an example for the order;
  disk: the split's codes (what the store will hold), given back when the
  file is closed, whatever stops the conversion.

So a shuffle needs no more memory than a conversion in order, for a source
of any size.
"""

import os
import tempfile

import numpy as np

from ..errors import OutputError

__all__ = ["drawn_chunks"]


def drawn_chunks(sources, drawn, rows_per_chunk, encode, spill_dir=None):
    """``(final split, codes)`` for every final split, each one's in order.

    Parameters
    ----------
    sources : dict
        ``{name: Split}``: the source's splits.
    drawn : dict
        ``{final split: Drawn}`` (:class:`.arrangement.Drawn`).
    rows_per_chunk : callable
        ``rows_per_chunk(source split)``: examples read at a time.
    encode : callable
        ``encode(images, source name)``: their int8 codes, shaped ``(n,) + image shape``.
    spill_dir : path, optional
        Where a spill file goes (default: the system's temporary folder).
    """
    groups = {}
    for name, part in drawn.items():
        groups.setdefault(part.source, []).append((name, part.rows))
    for source_name, finals in groups.items():
        source = sources[source_name]
        rows = rows_per_chunk(source)

        def coded(images, source_name=source_name):
            return encode(images, source_name)

        if all(r is None or _increasing(r) for _, r in finals):
            yield from _in_one_pass(source, finals, rows, coded)
        elif source.random_access:
            yield from _by_index(source, finals, rows, coded)
        else:
            yield from _spilled(source, finals, rows, coded, spill_dir)


def _increasing(rows):
    return len(rows) < 2 or bool((rows[1:] > rows[:-1]).all())


def _in_one_pass(source, finals, rows, coded):
    if len(finals) == 1 and finals[0][1] is None:
        for chunk in source.chunks(rows):
            yield finals[0][0], coded(chunk)
        return
    destination = np.full(source.count, -1, dtype=np.int16)
    for number, (_, taken) in enumerate(finals):
        destination[slice(None) if taken is None else taken] = number
    start = 0
    for chunk in source.chunks(rows):
        here = destination[start:start + len(chunk)]
        start += len(chunk)
        codes = coded(chunk)
        if (here == here[0]).all():  # (most chunks go whole to one split)
            if here[0] >= 0:
                yield finals[here[0]][0], codes
            continue
        for number, (name, _) in enumerate(finals):
            mask = here == number
            if mask.any():
                yield name, codes[mask]


def _by_index(source, finals, rows, coded):
    for name, taken in finals:
        taken = np.arange(source.count) if taken is None else taken
        for start in range(0, len(taken), rows):
            yield name, coded(source.rows(taken[start:start + rows]))


def _spilled(source, finals, rows, coded, spill_dir):
    try:
        spill = tempfile.TemporaryFile(dir=spill_dir, prefix=".int8store-spill-")
    except OSError as error:
        raise _spill_error(spill_dir, source, error) from error
    with spill:
        shape = None
        try:
            for chunk in source.chunks(rows):
                codes = coded(chunk)
                shape = codes.shape[1:]
                spill.write(np.ascontiguousarray(codes).data)
            spill.flush()
        except OSError as error:
            raise _spill_error(spill_dir, source, error) from error
        if shape is None:
            return
        spilled = np.memmap(spill, dtype=np.int8, mode="r", shape=(source.count,) + shape)
        try:
            for name, taken in finals:
                for start in range(0, len(taken), rows):
                    wanted = taken[start:start + rows]
                    by_place = np.argsort(wanted, kind="stable")
                    codes = np.empty((len(wanted),) + shape, dtype=np.int8)
                    codes[by_place] = spilled[wanted[by_place]]
                    yield name, codes
        finally:
            del spilled


def _spill_error(spill_dir, source, error):
    folder = spill_dir or tempfile.gettempdir()
    return OutputError(
        f"{os.fspath(folder)}: cannot write the temporary copy of {source.origin}'s split "
        f"{source.name!r} that its shuffle reads by index ({error.strerror or error}); it takes "
        "as much room as the store: free some, or pass --keep-order to convert in the "
        "source's order")
