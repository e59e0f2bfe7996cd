"""Defaults for Aesara's configuration, applied before Aesara is imported.

Aesara reads its configuration once, at import, from ``$AESARA_FLAGS`` and
its config files (``$AESARARC``, default ``~/.aesararc``). int8store adds
defaults to ``$AESARA_FLAGS`` only for options the user has not set in
either place, so an explicit choice always wins.
"""

import configparser
import importlib.util
import os
from pathlib import Path

__all__ = ["user_has_set", "set_default", "apply_defaults"]


def _flags():
    return [part.strip() for part in os.environ.get("AESARA_FLAGS", "").split(",") if part.strip()]


def _config_files():
    listed = os.environ.get("AESARARC", str(Path("~/.aesararc").expanduser()))
    return [Path(p).expanduser() for p in listed.split(os.pathsep) if p]


def user_has_set(option):
    """Whether ``option`` (e.g. ``"blas__ldflags"``) is in $AESARA_FLAGS or a config file."""
    if any(flag.split("=", 1)[0].strip() == option for flag in _flags()):
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

    Returns whether the default was applied. Values may not contain commas
    (Aesara splits the flags on them).
    """
    if user_has_set(option):
        return False
    if "," in str(value):
        raise ValueError(f"an AESARA_FLAGS value cannot hold a comma: {value!r}")
    os.environ["AESARA_FLAGS"] = ",".join(_flags() + [f"{option}={value}"])
    return True


def apply_defaults():
    """The defaults int8store needs, before ``import aesara``."""
    if importlib.util.find_spec("numpy.distutils") is None:
        # Aesara's default BLAS probe imports numpy.distutils, which is gone on
        # Python 3.12: without a value here, ``import aesara`` fails there.
        set_default("blas__ldflags", "")
