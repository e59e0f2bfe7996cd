"""Collection settings for the whole tree (the doctests in int8store/ included)."""

import importlib.util
import re
from pathlib import Path

from int8store.backend import chosen_backend

# int8store's JAX conversions import JAX: without the [jax] extra the modules
# that import it at their top are not collected for doctests (the JAX tests
# skip, saying why).
_JAX_MODULES = [str(path.relative_to(Path(__file__).parent))
                for path in sorted(Path(__file__).parent.glob("int8store/backend/jax/*.py"))
                if re.search(r"^(import|from) jax\b", path.read_text(), re.MULTILINE)]
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
    parser.addoption("--fuzz-random", action="store_true",
                     help="draw the fuzz tests' examples at random, not the same each run")
