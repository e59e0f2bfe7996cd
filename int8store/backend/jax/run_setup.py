"""What a training run in JAX mode sets up before its first graph:
:func:`set_up_run`.

* **The float type.** PyTensor and Aesara default ``floatX`` to float64, and
  their JAX dispatch then turns on JAX's 64-bit mode: on a GPU the classic
  LeNet5 run took 113 s in float64 against 33 s in float32, the classic
  tutorials' own setting. On an accelerator the run trains in float32 unless
  the user named ``floatX`` (in ``PYTENSOR_FLAGS``/``AESARA_FLAGS``, the
  library's configuration file, or by setting it before the call); on a CPU,
  and wherever the user chose, ``floatX`` is left as it is.
* **XLA's persistent compilation cache**, in a folder under the user's cache
  directory (:func:`compile_cache_folder`): a second run of the same model
  loads its programs instead of compiling them (every program, however
  small, is kept; the folder is capped at :data:`CACHE_BYTES`, the least
  recently used dropped first).
* **Deterministic GPU ops** (:data:`DETERMINISTIC_FLAGS`, in ``XLA_FLAGS``
  before JAX starts its backends): XLA picks GPU convolution algorithms by
  timing them, so two compiled programs of one model (held whole and
  streamed) could round differently. With them, XLA keeps what it timed,
  call by call, beside the compiled programs (``autotune/`` in the cache),
  so that a call tuned once runs the same algorithm in every program.
* **Device memory taken as needed** (``XLA_PYTHON_CLIENT_PREALLOCATE=false``
  before JAX starts its backends, unless the user set it): by default JAX
  takes three quarters of a GPU's memory at its first transfer, which took
  about 2 s on an H200 (141 GB), a quarter of the logistic tutorial's whole
  run. A run's memory is planned (``budget``), so nothing needs the pool.
* **A count of XLA's compilations** (:class:`Compilations`, from
  ``jax.monitoring``): what a run compiled and what it loaded from the cache.

Nothing here runs on ``import``: a program calls :func:`set_up_run` (the
tutorials do, before loading their data). It is the one place int8store
changes ``XLA_FLAGS``, ``XLA_PYTHON_CLIENT_PREALLOCATE`` and JAX's configuration, and only when asked.
"""

import configparser
import os
import sys
import tempfile
from pathlib import Path

from ...errors import ArgumentError
from ..setup.activation import activate
from .mode import require_jax

__all__ = ["set_up_run", "RunSetup", "Compilations", "compile_cache_folder",
           "user_named_float_type", "DETERMINISTIC_FLAGS", "CACHE_BYTES"]

#: XLA's flags for run-to-run deterministic GPU programs.
DETERMINISTIC_FLAGS = ("--xla_gpu_deterministic_ops=true",)
#: The compilation cache's ceiling: its least recently used programs go
#: first beyond it (a LeNet5 run's programs take a few MB).
CACHE_BYTES = 1 << 30


def compile_cache_folder():
    """Where the compilation cache lives: ``$XDG_CACHE_HOME/int8store/jax``,
    by default ``~/.cache/int8store/jax`` (a relative ``XDG_CACHE_HOME`` is
    ignored, as the XDG specification asks)."""
    root = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(root) if os.path.isabs(root) else Path.home() / ".cache"
    return root / "int8store" / "jax"


def _chosen_cache(compile_cache):
    """``(folder or None, where it comes from or why there is none)``:
    ``compile_cache`` as :func:`set_up_run` takes it, JAX's own settings
    (``JAX_ENABLE_COMPILATION_CACHE``, ``JAX_COMPILATION_CACHE_DIR``)
    kept where the user made them."""
    if not compile_cache:
        return None, None
    if compile_cache is not True:
        return Path(compile_cache), None
    enabled = os.environ.get("JAX_ENABLE_COMPILATION_CACHE", "").strip().lower()
    if enabled in ("0", "f", "false", "n", "no", "off"):  # (what JAX reads as false)
        return None, f"JAX_ENABLE_COMPILATION_CACHE={enabled}"
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return Path(os.environ["JAX_COMPILATION_CACHE_DIR"]), "JAX_COMPILATION_CACHE_DIR"
    return compile_cache_folder(), None


def _made(folder):
    """``(folder, None)`` once it exists and takes files, else ``(None,
    why)``: a cache that cannot be written is none, not a crash (JAX would
    warn at every program, even to read it: it writes a lock file there)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return None, f"{_short(folder)} cannot be made: {error.strerror or error}"
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as error:
        return None, f"{_short(folder)} cannot be written: {error.strerror or error}"
    return folder, None


def user_named_float_type():
    """Where the user named ``floatX``, or None: the library's flags variable
    (``PYTENSOR_FLAGS`` or ``AESARA_FLAGS``), its configuration file
    (``PYTENSORRC``/``~/.pytensorrc``, ``AESARARC``/``~/.aesararc``), or a
    value the program set before (any but the library's float64)."""
    api = activate()
    prefix = api.NAME.upper()
    flags = os.environ.get(f"{prefix}_FLAGS", "")
    if any(item.split("=", 1)[0].strip() == "floatX" for item in flags.split(",")):
        return f"{prefix}_FLAGS"
    files = os.environ.get(f"{prefix}RC") or os.pathsep.join(
        str(Path.home() / f".{api.NAME}rc{suffix}") for suffix in ("", ".txt"))
    for name in filter(None, files.split(os.pathsep)):
        parser = configparser.ConfigParser()
        try:
            parser.read(name)
        except configparser.Error:
            continue  # the library reports its own file's errors
        if parser.has_option("global", "floatX"):
            return name
    if api.lib.config.floatX != "float64":
        return "the program"
    return None


class Compilations:
    """XLA's compilations since this was made, counted by ``jax.monitoring``:
    :attr:`compiled` programs compiled, :attr:`loaded` loaded from the
    persistent cache instead, :attr:`seconds` the time both took."""

    _listening = []  # the live counters: jax.monitoring keeps its listeners for good

    def __init__(self):
        self.compiled = self.loaded = 0
        self.seconds = 0.0
        self._hits = 0
        if not Compilations._listening:
            import jax.monitoring as monitoring

            monitoring.register_event_listener(Compilations._event)
            monitoring.register_event_duration_secs_listener(Compilations._duration)
        Compilations._listening.append(self)

    @staticmethod
    def _event(event, **kwargs):
        if event == "/jax/compilation_cache/cache_hits":
            for counter in Compilations._listening:
                counter._hits += 1

    @staticmethod
    def _duration(event, seconds, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            for counter in Compilations._listening:
                counter.seconds += seconds
                if counter._hits:  # (a hit is announced before its load's duration)
                    counter._hits -= 1
                    counter.loaded += 1
                else:
                    counter.compiled += 1

    def close(self):
        """Stop counting."""
        if self in Compilations._listening:
            Compilations._listening.remove(self)

    def describe(self):
        """``"3 XLA programs compiled (1.2 s), 0 loaded from the cache"``."""
        return (f"{self.compiled} XLA program{'s' if self.compiled != 1 else ''} compiled, "
                f"{self.loaded} loaded from the cache ({self.seconds:.1f} s)")


class RunSetup:
    """What :func:`set_up_run` set up: the ``platform`` JAX runs on
    (``"gpu"``, ``"cpu"``, ...) and its ``device`` kind, the ``float_type``
    the run trains in and ``why``, whether GPU ops are ``deterministic``,
    the compilation cache's ``cache`` folder (None: off) and the run's
    ``compilations``."""

    def __init__(self, platform, device, float_type, why, deterministic, cache, compilations,
                 cache_note=None):
        self.platform, self.device = platform, device
        self.float_type, self.why = float_type, why
        self.deterministic, self.cache, self.compilations = deterministic, cache, compilations
        self.cache_note = cache_note  # where the cache's folder was named, or why there is none

    @property
    def accelerator(self):
        return self.platform != "cpu"

    def describe(self):
        """One line: the device, the float type and why, the GPU ops, the cache."""
        parts = [f"JAX on {self.platform} ({self.device})", f"{self.float_type}: {self.why}"]
        if self.platform == "gpu":
            parts.append("deterministic GPU ops" if self.deterministic else
                         "GPU ops as XLA picks them (not deterministic)")
        parts.append((f"compilation cache {_short(self.cache)}" if self.cache else
                      "no compilation cache")
                     + (f" ({self.cache_note})" if self.cache_note else ""))
        return "; ".join(parts)


def _short(path):
    """``path`` with the home folder written ``~``."""
    try:
        return "~/" + str(Path(path).relative_to(Path.home()))
    except ValueError:
        return str(path)


def set_up_run(compile_cache=True, deterministic=None):
    """Set up a training run in JAX mode (see the module docstring); call it
    before anything builds a graph or uses JAX.

    Parameters
    ----------
    compile_cache : bool or path
        True: XLA's persistent compilation cache in
        :func:`compile_cache_folder`, or where ``JAX_COMPILATION_CACHE_DIR``
        names (none under ``JAX_ENABLE_COMPILATION_CACHE=false``); a path:
        there; False: none, whatever JAX's settings. A folder that cannot
        be made is no cache, said in the line.
    deterministic : bool or None
        Deterministic GPU ops (:data:`DETERMINISTIC_FLAGS`); None: on GPUs
        (they are what makes a run held whole and streamed, or stopped and
        resumed, print the same lines there). They must be set before JAX
        starts its backends: if it had, True is refused, and None leaves
        the ops as XLA picks them (the line says so).

    Returns
    -------
    RunSetup
    """
    jax = require_jax()
    started = _backends_started(jax)
    cache, cache_note = _chosen_cache(compile_cache)
    if cache is not None:
        cache, problem = _made(cache)
        cache_note = problem or cache_note
    if deterministic or (deterministic is None and not started):
        _add_xla_flags(jax, DETERMINISTIC_FLAGS + _shared_autotuning(cache))
    if not started:
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    _use_cache(jax, cache)
    devices = jax.devices()
    platform, device = jax.default_backend(), devices[0].device_kind
    api = activate()
    float_type, why = api.lib.config.floatX, None
    named = user_named_float_type()
    flags = f"{api.NAME.upper()}_FLAGS"
    if named is not None:
        why = f"floatX as named in {named}"
    elif platform != "cpu":
        float_type = api.lib.config.floatX = "float32"
        _x64_as(jax, float_type)
        why = (f"int8store's choice on an accelerator ({flags}=floatX=float64 to train in "
               "float64)")
    else:
        other = "float32" if float_type == "float64" else "float64"
        why = f"{api.NAME}'s default floatX ({flags}=floatX={other} to change)"
    xla_flags = os.environ.get("XLA_FLAGS", "")
    deterministic = platform == "gpu" and all(flag in xla_flags for flag in DETERMINISTIC_FLAGS)
    return RunSetup(platform, device, float_type, why, deterministic, cache, Compilations(),
                    cache_note)


def _add_xla_flags(jax, flags):
    """Add ``flags`` to ``XLA_FLAGS`` (those not named there already), which
    XLA reads when JAX starts its backends: refused once it has."""
    present = os.environ.get("XLA_FLAGS", "")
    missing = [flag for flag in flags if flag.split("=", 1)[0] not in present]
    if not missing:
        return
    if _backends_started(jax):
        raise ArgumentError(
            f"deterministic GPU ops need {' '.join(missing)} in XLA_FLAGS before JAX starts its "
            "backends, and JAX had started them: set up the run before using JAX, or set "
            "XLA_FLAGS yourself (or leave deterministic ops off)")
    os.environ["XLA_FLAGS"] = " ".join(filter(None, [present] + missing))


def _shared_autotuning(cache):
    """XLA's flag that keeps its GPU autotuning results, call by call, in
    the compilation cache (``autotune/``), or none without a cache. The
    programs of one model held whole and streamed differ, and XLA timed
    each one's convolutions and GEMMs anew, so the same call could get
    another algorithm and round otherwise: shared, a call tuned once keeps
    its algorithm in every program and every later run. (XLA_FLAGS splits
    on spaces: a folder whose path holds one goes without.)"""
    if cache is None or any(character.isspace() for character in str(cache)):
        return ()
    folder = cache / "autotune"
    try:
        folder.mkdir(exist_ok=True)  # (XLA needs it there)
    except OSError:  # (a cache that takes no folder: the programs, without the tuning)
        return ()
    return (f"--xla_gpu_per_fusion_autotune_cache_dir={folder}",)


def _backends_started(jax):
    bridge = sys.modules.get("jax._src.xla_bridge")
    started = getattr(bridge, "backends_are_initialized", None)
    return bool(started()) if started is not None else bool(getattr(bridge, "_backends", None))


def _use_cache(jax, folder):
    """XLA's persistent compilation cache in ``folder``, every program kept;
    None: none (JAX's own, named by its environment variables, off too)."""
    try:
        jax.config.update("jax_enable_compilation_cache", folder is not None)
    except AttributeError:  # (an older JAX without that setting)
        pass
    if folder is None:
        return
    jax.config.update("jax_compilation_cache_dir", str(folder))
    for name, value in (("jax_persistent_cache_min_compile_time_secs", 0),
                        ("jax_persistent_cache_min_entry_size_bytes", 0),
                        ("jax_compilation_cache_max_size", CACHE_BYTES)):
        try:
            jax.config.update(name, value)
        except AttributeError:  # (an older JAX without that setting)
            pass


def _x64_as(jax, float_type):
    """JAX's 64-bit mode as the library's JAX dispatch sets it for
    ``float_type`` when first imported: set again if it was imported before."""
    api = activate()
    if f"{api.NAME}.link.jax.dispatch" in sys.modules:
        jax.config.update("jax_enable_x64", float_type == "float64")
