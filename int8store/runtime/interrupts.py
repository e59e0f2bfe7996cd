"""Interrupts during long writes: SIGINT and SIGTERM become KeyboardInterrupt
and are remembered.

Python delivers Ctrl-C as a KeyboardInterrupt raised wherever the main thread
is; when that is inside a weakref callback or a ``__del__`` (h5py has some),
Python prints "Exception ignored" and carries on as if nothing happened. A
conversion must not then publish its output, so :func:`interrupts_remembered`
records every signal it turns into an exception, and
:func:`raise_if_interrupted` raises again before anything is published.
SIGTERM (what ``kill`` and job schedulers send) gets the same treatment, so
the temporary file is removed instead of being left on disk. Python's report
of an interrupt it swallowed ("Exception ignored in ...") is kept off
stderr: the interrupt is handled, and the command says so in one line. So is
the traceback C code prints when it swallows one: numpy's ``import_array()``,
run by each of numpy's extension modules as it is imported, reports a failed
import with ``PyErr_Print()`` (``sys.excepthook``) before raising an
ImportError of its own, so Ctrl-C during ``import numpy.linalg`` printed a
traceback and then "numpy.core.multiarray failed to import"; and Cython's
module initialisation, interrupted, warns "Cython module failed to patch
module with custom type" (kept off stderr too).

Training loops get a gentler treatment (:func:`stop_requests`): the first
SIGINT or SIGTERM only asks the loop to stop at its next check
(:func:`stop_requested`), so that it can report the best model so far and
keep its checkpoint whole; a second stops at once. Before the loop starts
(:func:`arm_stop_requests`; a tutorial's loading, a download, the model
built) there is no model to keep, and the first stops at once.

A few lines of bookkeeping must not be cut in half (a reply read from a
helper process, and the job it answers marked done):
:func:`interrupts_deferred` holds back the Python handlers of SIGINT and
SIGTERM for such a block and runs them when it ends.
"""

import signal
import sys
import threading
import warnings
from contextlib import contextmanager

__all__ = ["interrupts_remembered", "raise_if_interrupted", "Interrupted", "stop_requests",
           "stop_requested", "arm_stop_requests", "interrupts_deferred", "interrupts_ignored"]

_received = []  # signal numbers received inside interrupts_remembered()
_stops = []  # signal numbers received inside stop_requests()
_armed = [True]  # whether a first signal there asks the loop to stop (else: at once)


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _install(handler, previous, which=lambda previous_handler: True):
    """Set ``handler`` for SIGINT and SIGTERM (those whose handler passes
    ``which``), each one's handler recorded in ``previous`` before it is
    replaced: the caller installs inside its ``try`` and restores
    ``previous`` in its ``finally``, so that a signal landing between the
    two (SIGTERM's handler raising once SIGINT's is set) leaves no handler
    of the block installed for good."""
    for signum in _SIGNALS:
        current = signal.getsignal(signum)
        if which(current):
            previous[signum] = current
            signal.signal(signum, handler)


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
    outermost = not _received and all(signal.getsignal(s) is not _handler for s in _SIGNALS)
    previous_hooks = sys.unraisablehook, sys.excepthook
    quiet_warnings = warnings.catch_warnings()
    if outermost:
        sys.unraisablehook = _quiet_about_interrupts(previous_hooks[0])
        sys.excepthook = _quiet_excepthook(previous_hooks[1])
        quiet_warnings.__enter__()
        # Cython's module initialisation turns an exception raised while it
        # patches a module (the interrupt, landing in an import: h5py's)
        # into this warning; the interrupt is handled, and said in one line.
        warnings.filterwarnings("ignore", message="Cython module failed to patch",
                                category=RuntimeWarning)
    previous = {}
    try:
        _install(_handler, previous)
        yield
    finally:
        if outermost:
            quiet_warnings.__exit__(None, None, None)
        for s, handler in previous.items():
            signal.signal(s, handler)
        if outermost:
            sys.unraisablehook, sys.excepthook = previous_hooks
            pending = list(_received)
            _received.clear()
            if pending:
                # An interrupt swallowed inside the block still ends the run.
                raise Interrupted(pending[0])


def _quiet_about_interrupts(hook):
    """An unraisable-exception hook that drops the interrupts this module
    remembered (Python would print "Exception ignored in ..." and a traceback
    for one swallowed by a callback) and passes anything else on."""
    def quiet(unraisable):
        if not isinstance(unraisable.exc_value, Interrupted):
            hook(unraisable)
    return quiet


def _quiet_excepthook(hook):
    """A ``sys.excepthook`` for the block's duration: C code that swallows an
    exception with ``PyErr_Print()`` calls it; the interrupts this module
    remembered are dropped (the block ends with them), anything else is passed on."""
    def quiet(kind, value, traceback):
        if not isinstance(value, Interrupted):
            hook(kind, value, traceback)
    return quiet


def raise_if_interrupted():
    """Raise :class:`Interrupted` if a signal was received (and swallowed)."""
    if _received:
        raise Interrupted(_received[0])


class StopRequests:
    """What :func:`stop_requests` yields. Once the block has ended,
    ``signal`` is the first signal received in it (None if none) and
    ``exit_status`` the status a command ends with: 0, or 128 + that signal
    (130 for SIGINT, 143 for SIGTERM)."""

    signal = None

    @property
    def exit_status(self):
        return 128 + self.signal if self.signal else 0


def _stop_handler(signum, frame):
    if _stops or not _armed[0]:
        raise Interrupted(signum)  # the second, or one before the loop: at once
    _stops.append(signum)
    try:
        print(f"\n{signal.Signals(signum).name} received: stopping after the updates under way, "
              "with the best model so far (again to stop at once)", file=sys.stderr, flush=True)
    except RuntimeError:  # stderr was being written when the signal came
        pass


@contextmanager
def stop_requests(until_armed=False):
    """For a training loop run in the block: the first SIGINT or SIGTERM
    makes :func:`stop_requested` true, and the loop stops at its next check;
    a second raises :class:`Interrupted` at once. With ``until_armed``, a
    signal before :func:`arm_stop_requests` raises at once too (what runs
    before the loop has no best model to keep, and a download may take
    minutes). The previous handlers come back afterwards. Only the main
    thread can install handlers; elsewhere the signals keep their usual
    effect."""
    requests = StopRequests()
    if threading.current_thread() is not threading.main_thread():
        yield requests
        return
    _stops.clear()
    _armed[0] = not until_armed  # (before the handler: a signal at once sees its setting)
    previous = {}
    try:
        _install(_stop_handler, previous)
        yield requests
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        requests.signal = stop_requested()
        _stops.clear()
        _armed[0] = True


def arm_stop_requests():
    """The training loop has started: from now on a first signal only asks
    it to stop (see :func:`stop_requests`)."""
    _armed[0] = True


def stop_requested():
    """Inside :func:`stop_requests`: the signal that asked the training loop
    to stop, or None (always None outside)."""
    return _stops[0] if _stops else None


@contextmanager
def interrupts_deferred():
    """SIGINT and SIGTERM received in the block are handled when it ends, by
    the Python handlers they had (KeyboardInterrupt, a stop request, ...),
    in the order received. A signal without a Python handler keeps its
    usual effect; outside the main thread (which alone runs handlers) the
    block runs as it is. Two ``sigaction`` calls each way: cheap enough for
    each shard of a stream."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = {}
    try:
        _install(lambda n, frame: received.append((n, frame)), previous, callable)
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum, frame in received:
            previous[signum](signum, frame)


@contextmanager
def interrupts_ignored():
    """SIGINT and SIGTERM ignored in the block (a command saying how it
    ended: Ctrl-C pressed again must not cut the line short), their
    handlers back after it; outside the main thread the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    try:
        _install(signal.SIG_IGN, previous)
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
