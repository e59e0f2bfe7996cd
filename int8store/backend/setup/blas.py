"""A BLAS for the graph library: the OpenBLAS of the ``scipy-openblas32`` wheel.

Aesara's CPU ``conv2d`` (CorrMM) and fast matrix products need a BLAS it can
link to. Its own probe goes through ``numpy.distutils`` (gone on Python 3.12,
where ``import aesara`` then fails unless ``blas__ldflags`` is set) and finds
nothing on most machines. PyTensor probes lazily, on the first read of
``blas__ldflags``, and warns when it finds nothing (a pip install): its C ops
that call a BLAS get the same OpenBLAS, and the warning has no cause. The ``scipy-openblas32`` wheel, a dependency, needs
no root; it prefixes its symbols with ``scipy_``, so ``-D`` macros map the
names Aesara's C code calls (``sgemm_`` → ``scipy_sgemm_``). Aesara passes the
non-library tokens of ``blas__ldflags`` to the compiler of every BLAS op, so
macros, library and rpath travel in that one option.

A choice of the user's always wins: ``blas__ldflags`` set in ``$AESARA_FLAGS``
/ ``$PYTENSOR_FLAGS`` or the library's config file, or a BLAS Aesara found by
itself, is left alone.

How the value reaches the library:

* PyTensor, and Aesara already imported (the classic tutorials import it
  first): the option is set on ``config``, which is read when a function is
  compiled, not before;
* Aesara not imported yet: Aesara reads its flags once, at import, and probes
  for a BLAS then. The value is given in ``$AESARA_FLAGS`` for the duration of
  that import only, and the variable is restored at once: the process and its
  children see the environment they had.
"""

import configparser
import contextlib
import ctypes
import importlib.util
import os
import shlex
import sys
import warnings
from pathlib import Path

__all__ = ["openblas_ldflags", "user_has_set", "import_with_blas", "import_aesara_with_blas",
           "blas_in_aesara_flags", "OPTION"]

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


def _config_files(library):
    prefix = library.upper()
    listed = os.environ.get(f"{prefix}RC", str(Path(f"~/.{library}rc").expanduser()))
    return [Path(p).expanduser() for p in listed.split(os.pathsep) if p]


def user_has_set(option=OPTION, library="aesara"):
    """Whether ``option`` is in ``$AESARA_FLAGS`` (``$PYTENSOR_FLAGS``) or the
    library's config file (read as the library reads them, before it is imported)."""
    if option in _flag_names(os.environ.get(f"{library.upper()}_FLAGS", "")):
        return True
    section, _, key = option.rpartition("__")
    parser = configparser.ConfigParser()
    for path in _config_files(library):
        try:
            parser.read(path)
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue
    return parser.has_option(section or "global", key)


def import_with_blas(library):
    """Import ``library`` ("pytensor" or "aesara") with a BLAS; returns it."""
    if library == "aesara":
        return import_aesara_with_blas()
    import pytensor

    _set_on_config(pytensor.config, lazy_default=True)
    return pytensor


def import_aesara_with_blas():
    """Import Aesara (if needed) with a BLAS, as the module docstring says; returns it."""
    if "aesara" in sys.modules:
        aesara = sys.modules["aesara"]
        _set_on_config(aesara.config)
        return aesara
    with blas_in_aesara_flags():
        return _import_quietly()


@contextlib.contextmanager
def blas_in_aesara_flags():
    """``$AESARA_FLAGS`` with the bundled OpenBLAS in ``blas__ldflags`` inside
    the block (unless the user chose a BLAS), as it was after it."""
    value = None if user_has_set() else openblas_ldflags()
    if value is None and not user_has_set() and importlib.util.find_spec("numpy.distutils") is None:
        value = ""  # without any value Aesara's probe fails to import on Python 3.12
    saved = os.environ.get("AESARA_FLAGS")
    if value is not None:
        # Quoted, so that the commas in -Wl,-rpath,... stay in the value.
        os.environ["AESARA_FLAGS"] = ",".join(filter(None, [(saved or "").strip().rstrip(","),
                                                            f'{OPTION}="{value}"']))
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("AESARA_FLAGS", None)
        else:
            os.environ["AESARA_FLAGS"] = saved


def _set_on_config(config, lazy_default=False):
    param = config._config_var_dict[OPTION]
    if not param.is_default:
        return  # set by the user
    # Aesara's default was probed at import; PyTensor's would be probed (and
    # warn) on this first read, so it is not read.
    if not lazy_default and config.blas__ldflags:
        return  # a BLAS Aesara found itself
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
