"""glibc's allocator, where a loaded set leaves it: freed memory given back
(:func:`give_back_freed_memory`), and large blocks kept for reuse
(:func:`keep_large_blocks`). Both do nothing on other C libraries.

glibc maps every block above its *mmap threshold* (128 KiB at start) from
the kernel on its own and unmaps it when freed, and gives back the top of
its heap beyond its *trim threshold*, so a compiled step that allocates and
frees the same large buffers each call can pay for fresh, zero-filled pages
each time. glibc raises both as the process frees large blocks (the mmap
threshold to a freed block's size, up to 32 MiB on 64-bit systems; the trim
threshold to twice that), and where the heap's top stays in use nothing is
given back. The classic tutorials' loader left the process there; after
int8store's loader, which frees less and gives its freed memory back, the
classic LeNet5 step took 18 % longer in float64, all of it system time:
twice the page faults (``python bench/classic_dropin.py``, 2026-11-28:
39.6 s an epoch against 33.6). Freeing a block of 31 MiB after loading, to
raise both by glibc's own rule, changed nothing; nor did setting them where
that rule ends (32 and 64 MiB). With the trim threshold at 256 MiB or
1 GiB the epoch took 33.6 s, as the classic's, at 0.61 of its peak memory:
what the step frees at the heap's top is kept for its next call, and the
peak is what it was."""

import ctypes
import ctypes.util
import os
import sys

__all__ = ["give_back_freed_memory", "keep_large_blocks", "MMAP_THRESHOLD", "TRIM_THRESHOLD",
           "ALLOCATOR_VARIABLES"]

#: glibc's mmap threshold set by :func:`keep_large_blocks`: the most its own rule reaches.
MMAP_THRESHOLD = 32 << 20
#: Its trim threshold: the heap's top kept, up to this, for the next step
#: (64 MiB, where glibc's own rule ends, was not enough after a load).
TRIM_THRESHOLD = 1 << 30
#: The environment variables by which a user tunes glibc's allocator: set,
#: int8store leaves the allocator as they say.
ALLOCATOR_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
                       "MALLOC_MMAP_MAX_", "GLIBC_TUNABLES")
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # (mallopt's parameters, malloc.h)
_kept = False


def _glibc():
    """The C library, if it is glibc (it has ``mallopt``), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018 - glibc's (musl has neither)
    except (OSError, AttributeError):
        return None
    return libc


def give_back_freed_memory():
    """Return freed heap memory to the operating system (glibc's ``malloc_trim``;
    elsewhere nothing). Loading frees large float arrays in an order that can
    leave their pages in glibc's heap behind the codes allocated meanwhile, so
    that the process would go on holding memory it no longer uses."""
    libc = _glibc()
    return bool(libc.malloc_trim(0)) if libc is not None else False


def keep_large_blocks():
    """Set glibc's mmap threshold to :data:`MMAP_THRESHOLD` and its trim
    threshold to :data:`TRIM_THRESHOLD` (see the module docstring), once a
    process, after a set is loaded; nothing where
    the user tuned the allocator (:data:`ALLOCATOR_VARIABLES`) or on other C
    libraries. It stays so: glibc then stops moving them. True if set."""
    global _kept
    if _kept or any(name in os.environ for name in ALLOCATOR_VARIABLES):
        return False
    libc = _glibc()
    if libc is None:
        return False
    _kept = bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
        bool(libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _kept
