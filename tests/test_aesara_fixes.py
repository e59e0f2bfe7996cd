"""The CorrMM.make_node correction: needed on the affected Aesara versions, and working."""

import numpy as np
import pytest

from int8store.backend import activate, chosen_backend, conv2d
from int8store.backend.setup import fixes as aesara_fixes

pytestmark = pytest.mark.aesara
if chosen_backend() != "aesara":  # the module's own set-up needs Aesara
    pytest.skip(f"meaningful on aesara only; this run's backend is {chosen_backend()}",
                allow_module_level=True)

api = activate()
lib, at = api.lib, api.at


def test_the_affected_versions_are_recognised():
    assert aesara_fixes.corrmm_needs_fix("2.8.10")
    assert aesara_fixes.corrmm_needs_fix("2.9.4")
    assert aesara_fixes.corrmm_needs_fix("2.9.4+1.gabcdef")
    assert not aesara_fixes.corrmm_needs_fix("2.8.9")
    assert not aesara_fixes.corrmm_needs_fix("2.9.5")


@pytest.mark.skipif(not aesara_fixes.corrmm_needs_fix(),
                    reason="this Aesara's CorrMM.make_node is not broken")
def test_without_the_correction_conv2d_cannot_compile(monkeypatch):
    from aesara.tensor.nnet.corr import CorrMM

    shipped = aesara_fixes.shipped_corrmm_make_node
    assert shipped is not None
    x, w = at.tensor4(dtype="float32"), at.tensor4(dtype="float32")
    with pytest.raises(TypeError, match="tuple expected at most 1 argument, got 4"):
        shipped(CorrMM(), x, w)
    # In a compile, Aesara's rewriter swallows that TypeError and then finds
    # no CPU convolution at all.
    monkeypatch.setattr(CorrMM, "make_node", shipped)
    with pytest.raises(Exception, match="AbstractConv2d Aesara rewriting failed"):
        lib.function([x, w], conv2d(x, w))


def test_conv2d_compiles_and_matches_numpy():
    rng = np.random.default_rng(0)
    images = rng.normal(size=(2, 3, 7, 6)).astype(np.float32)
    filters = rng.normal(size=(4, 3, 3, 2)).astype(np.float32)
    x, w = at.tensor4(dtype="float32"), at.tensor4(dtype="float32")
    f = lib.function([x, w], conv2d(x, w))
    assert any(type(n.op).__name__ == "CorrMM" for n in f.maker.fgraph.toposort())
    expected = np.zeros((2, 4, 5, 5), np.float32)
    flipped = filters[:, :, ::-1, ::-1]  # conv2d flips its filters
    for r in range(5):
        for c in range(5):
            patch = images[:, None, :, r:r + 3, c:c + 2]
            expected[:, :, r, c] = (patch * flipped[None]).sum(axis=(2, 3, 4))
    np.testing.assert_allclose(f(images, filters), expected, rtol=1e-5, atol=1e-5)


def test_blas_is_configured_for_aesara():
    assert lib.config.blas__ldflags, "conv2d on the CPU needs a BLAS Aesara links to"
