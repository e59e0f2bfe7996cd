"""A run in JAX mode set up before its first graph (int8store.training.set_up_run):
float32 on an accelerator unless the user named floatX, XLA's compilation
cache (a second run compiles nothing; --no-compile-cache keeps none),
deterministic GPU ops in XLA_FLAGS before JAX starts, and the tutorials'
first line saying so. Each case runs in a fresh process: floatX, XLA_FLAGS
and JAX's backends are the process's."""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

pytestmark = [pytest.mark.own_flags, pytest.mark.skipif(
    subprocess.run([sys.executable, "-c", "import jax"], capture_output=True).returncode != 0,
    reason="JAX is not installed in this environment")]


def fresh(script, tmp_path, **env):
    """The JSON the script prints last, run in a fresh process whose home
    and cache are ``tmp_path`` and whose library flags are ``env``'s only."""
    environment = {key: value for key, value in os.environ.items()
                   if not key.endswith("_FLAGS") and not key.endswith("RC")
                   and key != "XLA_PYTHON_CLIENT_PREALLOCATE"}
    environment.update(HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"))
    environment.update(env)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                          text=True, env=environment, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


SET_UP = """
    import json, os, jax, int8store
    from int8store.backend import activate
    lib = activate().lib
    if {pretend_gpu!r}:  # what JAX says on a machine with a GPU
        jax.default_backend = lambda: "gpu"
    setup = int8store.training.set_up_run(deterministic={deterministic!r})
    print(json.dumps({{"float": setup.float_type, "floatX": lib.config.floatX, "why": setup.why,
                      "x64": bool(jax.config.jax_enable_x64), "line": setup.describe(),
                      "xla_flags": os.environ.get("XLA_FLAGS", ""),
                      "deterministic": setup.deterministic,
                      "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE")}}))
"""


def test_on_an_accelerator_a_run_trains_in_float32_and_says_why(tmp_path):
    seen = fresh(SET_UP.format(pretend_gpu=True, deterministic=None), tmp_path)
    assert seen["float"] == seen["floatX"] == "float32" and not seen["x64"]
    assert "int8store's choice on an accelerator" in seen["why"] and "floatX=float64" in seen["why"]
    assert seen["line"].startswith("JAX on gpu") and "deterministic GPU ops" in seen["line"]
    assert "--xla_gpu_deterministic_ops=true" in seen["xla_flags"] and seen["deterministic"]
    # XLA's autotuning kept call by call beside the programs, in a folder it needs made
    autotune = tmp_path / "cache" / "int8store" / "jax" / "autotune"
    assert f"--xla_gpu_per_fusion_autotune_cache_dir={autotune}" in seen["xla_flags"]
    assert autotune.is_dir()


@pytest.mark.parametrize("named", ["flags", "file", "program"])
def test_a_float_type_the_user_named_is_kept(tmp_path, named):
    from int8store.backend import activate

    prefix = activate().NAME.upper()
    env = {}
    if named == "flags":
        env = {f"{prefix}_FLAGS": "floatX=float64"}
    elif named == "file":
        rc = tmp_path / "my.rc"
        rc.write_text("[global]\nfloatX = float64\n")
        env = {f"{prefix}RC": str(rc)}
    script = SET_UP.format(pretend_gpu=True, deterministic=None)
    if named == "program":  # set by the program itself before the call
        script = script.replace("lib = activate().lib", "lib = activate().lib\n"
                                "    lib.config.floatX = 'float32'")
    seen = fresh(script, tmp_path, **env)
    expected = "float32" if named == "program" else "float64"
    assert seen["float"] == seen["floatX"] == expected
    assert seen["why"].startswith("floatX as named in")


def test_on_a_cpu_nothing_changes_and_deterministic_ops_may_be_declined(tmp_path):
    seen = fresh(SET_UP.format(pretend_gpu=False, deterministic=False), tmp_path)
    assert seen["float"] == seen["floatX"] == "float64"  # the library's default, left as it is
    assert "default floatX" in seen["why"] and seen["xla_flags"] == ""
    assert seen["line"].startswith("JAX on cpu") and "GPU ops" not in seen["line"]


def test_without_a_compilation_cache_no_autotuning_is_kept(tmp_path):
    script = SET_UP.format(pretend_gpu=True, deterministic=None).replace(
        "set_up_run(deterministic=None)", "set_up_run(deterministic=None, compile_cache=False)")
    seen = fresh(script, tmp_path)
    assert seen["deterministic"] and "autotune" not in seen["xla_flags"]
    assert not (tmp_path / "cache").exists()


def test_device_memory_is_taken_as_needed_unless_the_user_said_otherwise(tmp_path):
    """JAX's pool of three quarters of a GPU's memory, taken at the first
    transfer, cost about 2 s of a 6 s run on an H200: a run asks for memory
    as it needs it, unless the user set XLA_PYTHON_CLIENT_PREALLOCATE."""
    script = SET_UP.format(pretend_gpu=True, deterministic=None)
    assert fresh(script, tmp_path)["preallocate"] == "false"
    kept = fresh(script, tmp_path, XLA_PYTHON_CLIENT_PREALLOCATE="true")
    assert kept["preallocate"] == "true"
    started = script.replace("if True:", "jax.devices()\n    if True:")
    assert started != script
    assert fresh(started, tmp_path)["preallocate"] is None  # too late to matter: left alone


def test_deterministic_ops_asked_for_are_refused_once_jax_has_started(tmp_path):
    """Asked for, once XLA has read its flags: refused, saying why; by
    default, the ops are left as XLA picks them (no flag, no error)."""
    script = """
        import json, os, jax, int8store
        jax.devices()  # JAX's backends started: XLA has read its flags
        by_default = int8store.training.set_up_run(deterministic=None)
        try:
            int8store.training.set_up_run(deterministic=True)
            refused = None
        except int8store.ArgumentError as error:
            refused = str(error)
        print(json.dumps([refused, os.environ.get("XLA_FLAGS", ""), by_default.deterministic]))
    """
    refused, flags, deterministic = fresh(script, tmp_path)
    assert "JAX had started" in refused and flags == "" and not deterministic


def tutorial(tmp_path, *options):
    environment = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, str(ROOT / "tutorials" / "logistic_sgd.py"),
                           "--dataset", "digits", "--mode", "jax", "--epochs", "2",
                           "--batch-size", "100", "--save-model", "", "--timings", *options],
                          capture_output=True, text=True, env=environment, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def test_a_second_run_compiles_nothing_and_the_cache_can_be_declined(tmp_path):
    # The second run checkpoints, and compiles nothing all the same: a copy of
    # each parameter on the device, a program a parameter shape, came before
    # the checkpoint's copy to the host.
    first, second = tutorial(tmp_path), tutorial(tmp_path, "--checkpoint", "run.npz")
    assert first[0].startswith("... JAX on cpu") and "compilation cache" in first[0]
    timings = [line for line in first + second if line.startswith("timings:")]
    assert len(timings) == 2
    assert "0 XLA programs compiled" not in timings[0]
    assert "0 XLA programs compiled" in timings[1], timings[1]  # all loaded from the cache
    assert (tmp_path / "run.npz").is_file()
    for line in timings:  # the first score of each split (its program made) apart
        scoring, first_scores = map(float, re.search(
            r"scoring the splits ([\d.]+) s in \d+ calls \(([\d.]+) s the first score", line).groups())
        assert 0 < first_scores <= scoring, line
    assert [line for line in first if "error" in line] == \
        [line for line in second if "error" in line]
    cache = tmp_path / "cache" / "int8store" / "jax"
    held = sorted(cache.iterdir())
    assert held and any("int8store_full_steps" in path.name for path in held)
    declined = tutorial(tmp_path, "--no-compile-cache")
    assert "no compilation cache" in declined[0]
    assert sorted(cache.iterdir()) == held  # nothing written
    assert "0 loaded from the cache" in [line for line in declined if "timings" in line][0]


CACHE_LINE = """
    import json, jax, int8store
    setup = int8store.training.set_up_run(compile_cache={compile_cache!r})
    jax.jit(lambda x: x * 3 + 1)(jax.numpy.arange(5.0)).block_until_ready()
    print(json.dumps({{"line": setup.describe().split("; ")[-1]}}))
"""


def test_the_cache_follows_jaxs_own_settings_and_a_folder_that_cannot_be_made_is_none(
        tmp_path):
    """JAX_COMPILATION_CACHE_DIR was replaced by int8store's folder, and
    JAX_ENABLE_COMPILATION_CACHE=false left a line naming a cache never
    written; --no-compile-cache (compile_cache=False) wrote into JAX's
    folder all the same; a cache folder that could not be made (a file in
    the way, a read-only file system) ended the run in a traceback; a
    relative XDG_CACHE_HOME made a folder where the run was started (user
    trial)."""
    theirs = tmp_path / "theirs"
    seen = fresh(CACHE_LINE.format(compile_cache=True), tmp_path,
                 JAX_COMPILATION_CACHE_DIR=str(theirs))
    assert seen["line"] == "compilation cache ~/theirs (JAX_COMPILATION_CACHE_DIR)"  # (HOME)
    assert any(path.name.endswith("-cache") for path in theirs.iterdir())
    declined = tmp_path / "declined"
    seen = fresh(CACHE_LINE.format(compile_cache=False), tmp_path,
                 JAX_COMPILATION_CACHE_DIR=str(declined))
    assert seen["line"] == "no compilation cache" and not declined.exists()
    held = sorted(theirs.iterdir())
    seen = fresh(CACHE_LINE.format(compile_cache=True).replace("x * 3", "x * 5"), tmp_path,
                 JAX_ENABLE_COMPILATION_CACHE="F", JAX_COMPILATION_CACHE_DIR=str(theirs))
    assert seen["line"] == "no compilation cache (JAX_ENABLE_COMPILATION_CACHE=f)"
    assert sorted(theirs.iterdir()) == held and not (tmp_path / "cache").exists()
    from int8store.backend.jax.run_setup import _chosen_cache

    for off in ("false", "0", "No", " off ", "n"):  # (JAX's own words for false, each)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("JAX_ENABLE_COMPILATION_CACHE", off)
            assert _chosen_cache(True) == (None, f"JAX_ENABLE_COMPILATION_CACHE="
                                                 f"{off.strip().lower()}")
    # A folder there but read-only (a home mounted so) is no cache either: JAX
    # writes a lock file even to read one, and warned at every program.
    read_only = CACHE_LINE.replace("import json, jax, int8store", """import json, jax, int8store
    import errno, tempfile
    def refused(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")
    tempfile.TemporaryFile = refused""")
    seen = fresh(read_only.format(compile_cache=True), tmp_path)
    assert seen["line"] == ("no compilation cache (~/cache/int8store/jax cannot be written: "
                            "Read-only file system)")
    (tmp_path / "a file").write_text("")
    seen = fresh(CACHE_LINE.format(compile_cache=True), tmp_path,
                 XDG_CACHE_HOME=str(tmp_path / "a file"))
    assert seen["line"] == ("no compilation cache (~/a file/int8store/jax cannot "
                            "be made: Not a directory)")
    seen = fresh(CACHE_LINE.format(compile_cache=True), tmp_path, XDG_CACHE_HOME="relative")
    assert seen["line"] == "compilation cache ~/.cache/int8store/jax"  # (HOME is tmp_path)
    assert not (tmp_path / "relative").exists()
