"""bench/time_to_accuracy.py reads a tutorial's figures from what it prints:
the whole process, the loop, the scoring and its first scores, XLA's
programs, the errors, the device."""

import importlib.util
import os
import sys

import numpy as np
import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import time_to_accuracy  # noqa: E402

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                reason="JAX is not installed in this environment")


def test_a_tutorial_run_gives_its_figures(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (3000, 28, 28), dtype=np.uint8)
    labels = np.arange(3000) % 10
    data = tmp_path / "small.npz"
    np.savez(data, x_train=images[:2000], y_train=labels[:2000], x_valid=images[2000:2500],
             y_valid=labels[2000:2500], x_test=images[2500:], y_test=labels[2500:])
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    run = time_to_accuracy.tutorial_run("logistic", str(data), "jax", 2, env)
    assert run["whole"] > run["loop"] > run["scoring"] >= run["first scores"] > 0  # (2 decimals)
    assert run["compiled"] >= 1 and run["loaded"] >= 0 and run["epochs"] == 2
    assert 0 < run["valid"] < 100 and 0 < run["test"] < 100
    assert run["device"].startswith("JAX on cpu")
