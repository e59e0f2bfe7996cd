"""bench/conv_forms.py, which times on a GPU the forms a true convolution
can take: its forms compute the same values, and its table has every row."""

import importlib.util
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import conv_forms  # noqa: E402

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                reason="JAX is not installed in this environment")


def test_the_forms_compute_one_convolution():
    """The kernel turned in the graph, turned behind a barrier, and given
    turned to a correlation: the same values and input gradients."""
    assert conv_forms.largest_difference(batch=3) < 1e-5


def test_every_layer_batch_pass_and_form_is_timed(capsys):
    conv_forms.main(["--rounds", "1", "--steps", "1", "--batches", "2"])
    printed = capsys.readouterr().out
    rows = [line for line in printed.splitlines() if line.startswith(("| layer 0 ", "| layer 1 "))]
    assert len(rows) == 2 * 2 * 3  # layers, passes, forms
    assert all(" | 2 | " in row for row in rows)
    turned = [row for row in rows if "| turned |" in row]
    assert len(turned) == 4 and all(row.endswith("| 1.00 |") for row in turned)
