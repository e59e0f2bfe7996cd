"""Corrections of Aesara defects that int8store depends on, each applied only to
the Aesara versions that have it.

``CorrMM.make_node`` (the CPU convolution behind ``conv2d``) in Aesara 2.8.10 to
2.9.4 builds its output shape with ``tuple(a, b, c, d)``, which raises
``TypeError: tuple expected at most 1 argument, got 4``: every CPU conv2d
fails to compile. :func:`fix_corrmm_make_node` replaces that method with one
that builds the same shape correctly.
"""

__all__ = ["CORRMM_BROKEN_VERSIONS", "corrmm_needs_fix", "fix_corrmm_make_node",
           "shipped_corrmm_make_node", "apply_all", "aesara_release", "in_versions"]

#: The Aesara releases whose CorrMM.make_node calls tuple() with four arguments.
CORRMM_BROKEN_VERSIONS = ((2, 8, 10), (2, 9, 4))


def aesara_release(version=None):
    """``(major, minor, patch)`` of an Aesara version string (default: the installed one)."""
    if version is None:
        import aesara
        version = aesara.__version__
    numbers = []
    for part in version.split("+")[0].split("."):
        digits = "".join(c for c in part if c.isdigit())
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers[:3])


def in_versions(versions, version=None):
    """Whether Aesara ``version`` (default: the installed one) lies in the
    inclusive range ``versions = (lowest, highest)``."""
    low, high = versions
    return low <= aesara_release(version) <= high


def corrmm_needs_fix(version=None):
    """Whether Aesara ``version`` (default: the installed one) has the defect."""
    return in_versions(CORRMM_BROKEN_VERSIONS, version)


def _corrmm_make_node(self, img, kern):
    """CorrMM.make_node of Aesara 2.9.4 with its output shape built correctly."""
    from aesara.graph.basic import Apply
    from aesara.tensor.basic import as_tensor_variable
    from aesara.tensor.type import TensorType

    img = as_tensor_variable(img)
    kern = as_tensor_variable(kern)
    img, kern = self.as_common_dtype(img, kern)
    if img.type.ndim != 4:
        raise TypeError("img must be 4D tensor")
    if kern.type.ndim != (6 if self.unshared is True else 4):
        raise TypeError(f"kern must be {6 if self.unshared is True else 4}D tensor")
    out_shape = (
        1 if img.type.shape[0] == 1 else None,
        1 if kern.type.shape[0] == 1 else None,
        None,
        None,
    )
    return Apply(self, [img, kern], [TensorType(img.type.dtype, shape=out_shape)()])


# CorrMM.make_node as Aesara shipped it, kept for the test that shows the fix is needed.
shipped_corrmm_make_node = None


def fix_corrmm_make_node():
    """Replace CorrMM.make_node on the affected Aesara versions; returns whether it did."""
    global shipped_corrmm_make_node
    if not corrmm_needs_fix():
        return False
    import warnings

    with warnings.catch_warnings():  # aesara.tensor.nnet is deprecated, and the only conv2d
        warnings.simplefilter("ignore", DeprecationWarning)
        from aesara.tensor.nnet.corr import CorrMM

    if CorrMM.make_node is not _corrmm_make_node:
        shipped_corrmm_make_node = CorrMM.make_node
        CorrMM.make_node = _corrmm_make_node
    return True


def apply_all():
    """Apply every correction the installed Aesara needs (idempotent)."""
    fix_corrmm_make_node()
