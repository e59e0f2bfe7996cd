"""Shared test set-up: tutorials importable, hypothesis tuned for compiled graphs."""

import os
import signal
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from int8store.backend import BACKENDS, chosen_backend

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tutorials"))

# Compiling a function can take seconds on a cold cache: no deadline.
settings.register_profile("default", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "default")


def old_jax():
    """Whether the JAX installed is older than 0.12 (False without JAX): its
    XLA:CPU can deadlock a step that reduces over forced CPU devices when the
    cores are busy, three devices waiting for a fourth that never comes, and
    then aborts the process (seen on 2 cores with jaxlib 0.7.1, Aesara's,
    and with 0.10.2, the newest for Python 3.11, and 0.11.2; never with
    0.12.0.1 under the same load)."""
    try:
        import jax
    except ImportError:
        return False
    return tuple(int(part) for part in jax.__version__.split(".")[:2]) < (0, 12)


def one_short_line(message, path):
    """A refusal's message, whatever the file held: one printable line that
    names ``path`` and quotes no run of the file's bytes."""
    message = str(message)
    assert str(path) in message and message.isprintable(), message
    assert len(message) - len(str(path)) < 400, message


@pytest.fixture
def ctrl_c_raises():
    """Ctrl-C (SIGINT) raises KeyboardInterrupt during the test, whatever
    this process inherited: a shell starts its background jobs with SIGINT
    ignored, and CI runs one stack as one."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def pytest_collection_modifyitems(config, items):
    """A test marked ``aesara`` or ``pytensor`` is meaningful on that backend
    only: on the other it is skipped, and the summary says so."""
    running = chosen_backend()
    for item in items:
        wanted = [name for name in BACKENDS if item.get_closest_marker(name)]
        if wanted and running not in wanted:
            item.add_marker(pytest.mark.skip(
                reason=f"meaningful on {' or '.join(wanted)} only; this run's backend is {running}"))
