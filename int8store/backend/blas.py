"""A BLAS for Aesara: the OpenBLAS of the ``scipy-openblas32`` wheel.

Aesara's CPU ``conv2d`` (CorrMM) and fast matrix products need a BLAS it can
link to. Its own probe goes through ``numpy.distutils`` (gone on Python 3.12,
where ``import aesara`` then fails unless ``blas__ldflags`` is set) and finds
nothing on most machines. The ``scipy-openblas32`` wheel, a dependency, needs
no root; it prefixes its symbols with ``scipy_``, so ``-D`` macros map the
names Aesara's C code calls (``sgemm_`` → ``scipy_sgemm_``). Aesara passes the
non-library tokens of ``blas__ldflags`` to the compiler of every BLAS op, so
macros, library and rpath travel in that one option.

A choice of the user's always wins: ``blas__ldflags`` set in ``$AESARA_FLAGS``
or an Aesara config file, or a BLAS Aesara found by itself, is left alone.

How the value reaches Aesara:

* Aesara already imported (the classic tutorials import it first): the option
  is set on ``aesara.config``, which Aesara reads when it compiles, not before;
* Aesara not imported yet: Aesara reads its flags once, at import, and probes
  for a BLAS then. The value is given in ``$AESARA_FLAGS`` for the duration of
  that import only, and the variable is restored at once: the process and its
  children see the environment they had.
"""

import configparser
import ctypes
import importlib.util
import os
import shlex
import sys
import warnings
from pathlib import Path

__all__ = ["openblas_ldflags", "user_has_set", "import_aesara_with_blas", "OPTION"]

OPTION = "blas__ldflags"
# The BLAS routines Aesara's C code declares, in single and double precision.
_BLAS_ROUTINES = ("gemm", "gemv", "ger", "dot", "axpy", "copy", "scal", "swap",
                  "asum", "nrm2", "rot", "rotg", "rotm", "rotmg")
_SYMBOL_PREFIX = "scipy_"


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


def _flag_names(flags):
    """Option names in an ``$AESARA_FLAGS`` string, parsed as Aesara parses them."""
    splitter = shlex.shlex(flags, posix=True)
    splitter.whitespace = ","
    splitter.whitespace_split = True
    return {pair.split("=", 1)[0].strip() for pair in splitter if "=" in pair}


def _config_files():
    listed = os.environ.get("AESARARC", str(Path("~/.aesararc").expanduser()))
    return [Path(p).expanduser() for p in listed.split(os.pathsep) if p]


def user_has_set(option=OPTION):
    """Whether ``option`` is in ``$AESARA_FLAGS`` or an Aesara config file
    (read as Aesara reads them, before Aesara is imported)."""
    if option in _flag_names(os.environ.get("AESARA_FLAGS", "")):
        return True
    section, _, key = option.rpartition("__")
    parser = configparser.ConfigParser()
    for path in _config_files():
        try:
            parser.read(path)
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue
    return parser.has_option(section or "global", key)


def import_aesara_with_blas():
    """Import Aesara (if needed) with a BLAS, as the module docstring says; returns it."""
    if "aesara" in sys.modules:
        aesara = sys.modules["aesara"]
        _set_on_config(aesara.config)
        return aesara
    value = None if user_has_set() else openblas_ldflags()
    if value is None and not user_has_set() and importlib.util.find_spec("numpy.distutils") is None:
        value = ""  # without any value Aesara's probe fails to import on Python 3.12
    saved = os.environ.get("AESARA_FLAGS")
    if value is not None:
        # Quoted, so that the commas in -Wl,-rpath,... stay in the value.
        os.environ["AESARA_FLAGS"] = ",".join(filter(None, [(saved or "").strip().rstrip(","),
                                                            f'{OPTION}="{value}"']))
    try:
        return _import_quietly()
    finally:
        if saved is None:
            os.environ.pop("AESARA_FLAGS", None)
        else:
            os.environ["AESARA_FLAGS"] = saved


def _set_on_config(config):
    param = config._config_var_dict[OPTION]
    if not param.is_default or config.blas__ldflags:
        return  # set by the user, or a BLAS Aesara found itself
    flags = openblas_ldflags()
    if flags:
        config.blas__ldflags = flags


def _import_quietly():
    with warnings.catch_warnings():
        # Aesara's BLAS probe goes through numpy.distutils, which warns about
        # its own deprecation and about every library it fails to find.
        warnings.filterwarnings("ignore", category=UserWarning, module="numpy.distutils")
        warnings.filterwarnings("ignore", message=r"(?s).*numpy\.distutils", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message="msvccompiler is deprecated", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message="Use shutil.which instead of find_executable",
                                category=DeprecationWarning)  # Aesara's own, on Python 3.12
        import aesara
    return aesara
