"""Defaults for Aesara's configuration, applied before Aesara is imported.

Aesara reads its configuration once, at import, from ``$AESARA_FLAGS`` and
its config files (``$AESARARC``, default ``~/.aesararc``). int8store adds
defaults to ``$AESARA_FLAGS`` only for options the user has set in neither
place, so an explicit choice always wins.

The one default that matters is the BLAS: Aesara's CPU ``conv2d`` (CorrMM) and
fast matrix products need a BLAS it can link to, and Aesara 2.9.4's own probe
goes through ``numpy.distutils`` (gone on Python 3.12). int8store points it at
the OpenBLAS of the ``scipy-openblas32`` wheel, a dependency, which needs no
root: that library prefixes its symbols with ``scipy_``, so ``-D`` macros map
the names Aesara's C code calls (``sgemm_`` → ``scipy_sgemm_``). Aesara
passes the non-library tokens of ``blas__ldflags`` to the compiler of every
BLAS op, so macros, library and rpath travel in that one option.
"""

import configparser
import ctypes
import importlib.util
import os
import shlex
import sys
import warnings
from pathlib import Path

__all__ = ["user_has_set", "set_default", "apply_defaults", "openblas_ldflags"]

# The BLAS routines Aesara's C code declares, in single and double precision.
_BLAS_ROUTINES = ("gemm", "gemv", "ger", "dot", "axpy", "copy", "scal", "swap",
                  "asum", "nrm2", "rot", "rotg", "rotm", "rotmg")
_SYMBOL_PREFIX = "scipy_"


def _flag_names():
    """Option names in $AESARA_FLAGS, parsed as Aesara parses them."""
    splitter = shlex.shlex(os.environ.get("AESARA_FLAGS", ""), posix=True)
    splitter.whitespace = ","
    splitter.whitespace_split = True
    return {pair.split("=", 1)[0].strip() for pair in splitter if "=" in pair}


def _config_files():
    listed = os.environ.get("AESARARC", str(Path("~/.aesararc").expanduser()))
    return [Path(p).expanduser() for p in listed.split(os.pathsep) if p]


def user_has_set(option):
    """Whether ``option`` (e.g. ``"blas__ldflags"``) is in $AESARA_FLAGS or a config file."""
    if option in _flag_names():
        return True
    section, _, key = option.rpartition("__")
    parser = configparser.ConfigParser()
    for path in _config_files():
        try:
            parser.read(path)
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue
    return parser.has_option(section or "global", key)


def set_default(option, value):
    """Add ``option=value`` to $AESARA_FLAGS unless the user has set ``option``.

    Returns whether the default was applied.
    """
    if user_has_set(option):
        return False
    if '"' in value:
        raise ValueError(f"an AESARA_FLAGS value cannot hold a double quote: {value!r}")
    existing = os.environ.get("AESARA_FLAGS", "").strip().rstrip(",")
    # Quoted, so that commas in the value (-Wl,-rpath,...) stay in it.
    os.environ["AESARA_FLAGS"] = ",".join(filter(None, [existing, f'{option}="{value}"']))
    return True


def openblas_ldflags():
    """``blas__ldflags`` for the scipy-openblas32 wheel, or None if it is unusable."""
    if importlib.util.find_spec("scipy_openblas32") is None:
        return None
    import scipy_openblas32

    lib_dir = scipy_openblas32.get_lib_dir()
    library = scipy_openblas32.get_library()
    if any(c.isspace() for c in lib_dir):
        return None  # Aesara splits blas__ldflags on whitespace
    try:
        handle = ctypes.CDLL(os.path.join(lib_dir, scipy_openblas32.get_library(fullname=True)))
        getattr(handle, f"{_SYMBOL_PREFIX}sgemm_")
    except (OSError, AttributeError):
        return None
    macros = [f"-D{p}{r}_={_SYMBOL_PREFIX}{p}{r}_" for p in "sd" for r in _BLAS_ROUTINES]
    return " ".join([f"-L{lib_dir}", f"-l{library}", f"-Wl,-rpath,{lib_dir}"] + macros)


def apply_defaults():
    """The defaults int8store needs, before ``import aesara`` (idempotent)."""
    if user_has_set("blas__ldflags"):
        return
    if "aesara" in sys.modules:
        if not sys.modules["aesara"].config.blas__ldflags:
            warnings.warn(
                "Aesara was imported before int8store, without a BLAS: conv2d will not "
                "compile. Import int8store first, or set blas__ldflags in AESARA_FLAGS.",
                RuntimeWarning, stacklevel=3)
        return
    flags = openblas_ldflags()
    if flags:
        set_default("blas__ldflags", flags)
    elif importlib.util.find_spec("numpy.distutils") is None:
        # Without a value, Aesara's probe imports numpy.distutils, which is gone
        # on Python 3.12: ``import aesara`` would fail there.
        set_default("blas__ldflags", "")
