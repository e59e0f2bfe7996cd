"""How many bytes a dataset's images take on the device, int8 against float32,
and giving the memory of released source arrays back to the system."""

import ctypes
import ctypes.util
import sys

__all__ = ["memory_table", "give_back_freed_memory"]


def give_back_freed_memory():
    """Return freed heap memory to the operating system (glibc's ``malloc_trim``;
    elsewhere nothing). Loading frees large float arrays in an order that can
    leave their pages in glibc's heap behind the codes allocated meanwhile, so
    that the process would go on holding memory it no longer uses."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.malloc_trim(0))
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return False


def memory_table(splits):
    """A printable table of image bytes per split, as int8 and as float32.

    ``splits`` maps split names to :class:`~int8store.SharedDataset` objects,
    or is what :func:`~int8store.load_data` returns.

    Examples
    --------
    >>> from int8store import load_data
    >>> print(memory_table(load_data("digits")))  # doctest: +ELLIPSIS
    split  examples  image  int8 bytes  float32 bytes  int8/float32  held as
    train      1197  8x8        76,608        306,432          0.25  int8
    ...
    """
    if isinstance(splits, (list, tuple)):
        from .vocabulary import SPLITS
        splits = {name: x.dataset for name, (x, _) in zip(SPLITS, splits)}
    rows = [("split", "examples", "image", "int8 bytes", "float32 bytes", "int8/float32",
             "held as")]
    totals = [0, 0, 0]
    for name, ds in splits.items():
        rows.append((name, f"{ds.n_examples}", "x".join(map(str, ds.image_shape)),
                     f"{ds.int8_nbytes:,}", f"{ds.float32_nbytes:,}",
                     f"{ds.int8_nbytes / ds.float32_nbytes:.2f}", ds.storage))
        totals = [totals[0] + ds.n_examples, totals[1] + ds.int8_nbytes,
                  totals[2] + ds.float32_nbytes]
    rows.append(("total", f"{totals[0]}", "", f"{totals[1]:,}", f"{totals[2]:,}",
                 f"{totals[1] / totals[2]:.2f}", ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    right = {1, 3, 4, 5}
    return "\n".join(
        "  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                  for i, (cell, w) in enumerate(zip(row, widths))).rstrip()
        for row in rows
    )
