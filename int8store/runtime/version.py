"""The package's version, read from its installed metadata (the one place
it is written is pyproject.toml)."""

__all__ = ["package_version"]


def package_version():
    """``0.3.1``; ``0+unknown`` for a source tree that was never installed.
    Read on first use: importlib.metadata takes longer to import than the
    rest of the package, and the helper processes never need it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("int8store")
    except PackageNotFoundError:
        return "0+unknown"
