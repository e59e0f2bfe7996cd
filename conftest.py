"""Collection settings for the whole tree (the doctests in int8store/ included)."""

import importlib.util

from int8store.backend import chosen_backend

# int8store's JAX conversions import JAX: without the [jax] extra their modules
# are not collected for doctests (the JAX tests skip, saying why).
_JAX_MODULES = ["int8store/backend/jax/conversions.py",
                "int8store/backend/jax/aesara_conversions.py", "int8store/backend/jax/pooling.py",
                "int8store/backend/jax/pytensor_conversions.py", "int8store/backend/jax/shuffle.py",
                "int8store/backend/jax/channels_last.py"]
collect_ignore = [] if importlib.util.find_spec("jax") else list(_JAX_MODULES)
# Each backend's own modules import it: collected for doctests on that backend only.
collect_ignore += (["int8store/backend/ops/conv.py", "int8store/backend/ops/pooling.py",
                    "int8store/backend/jax/pytensor_conversions.py"]
                   if chosen_backend() == "aesara" else ["int8store/backend/jax/aesara_conversions.py"])
# Scripts the tests run in processes of their own, as users run tutorials.
collect_ignore.append("tests/clients")


def pytest_addoption(parser):
    parser.addoption("--fuzz-long", action="store_true",
                     help="run the fuzz tests (tests/test_fuzz.py) with 20 times more examples")
