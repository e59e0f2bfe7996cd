"""Interrupts during long writes: SIGINT and SIGTERM become KeyboardInterrupt
and are remembered.

Python delivers Ctrl-C as a KeyboardInterrupt raised wherever the main thread
is; when that is inside a weakref callback or a ``__del__`` (h5py has some),
Python prints "Exception ignored" and carries on as if nothing happened. A
conversion must not then publish its output, so :func:`interrupts_remembered`
records every signal it turns into an exception, and
:func:`raise_if_interrupted` raises again before anything is published.
SIGTERM (what ``kill`` and job schedulers send) gets the same treatment, so
the temporary file is removed instead of being left on disk.
"""

import signal
import threading
from contextlib import contextmanager

__all__ = ["interrupts_remembered", "raise_if_interrupted", "Interrupted"]

_received = []  # signal numbers received inside interrupts_remembered()


class Interrupted(KeyboardInterrupt):
    """A SIGINT or SIGTERM received during a write; ``signal`` says which."""

    def __init__(self, signum):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signal = signum


def _handler(signum, frame):
    _received.append(signum)
    raise Interrupted(signum)


@contextmanager
def interrupts_remembered():
    """For the block's duration, SIGINT and SIGTERM raise :class:`Interrupted`
    and are remembered; the previous handlers come back afterwards.

    Only the main thread can install handlers; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _handler) for s in (signal.SIGINT, signal.SIGTERM)}
    outermost = not _received and all(h is not _handler for h in previous.values())
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if outermost:
            pending = list(_received)
            _received.clear()
            if pending:
                # An interrupt swallowed inside the block still ends the run.
                raise Interrupted(pending[0])


def raise_if_interrupted():
    """Raise :class:`Interrupted` if a signal was received (and swallowed)."""
    if _received:
        raise Interrupted(_received[0])
