"""Collection settings for the whole tree (the doctests in int8store/ included)."""

import importlib.util

# int8store's JAX conversions import JAX: without the [jax] extra their module
# is not collected for doctests (the JAX tests skip, saying why).
collect_ignore = [] if importlib.util.find_spec("jax") else ["int8store/backend/jax_ops.py"]
# Scripts the tests run in processes of their own, as users run tutorials.
collect_ignore.append("tests/clients")


def pytest_addoption(parser):
    parser.addoption("--fuzz-long", action="store_true",
                     help="run the fuzz tests (tests/test_fuzz.py) with 20 times more examples")
