"""The backend: which library runs, and its BLAS set-up (the user's choice is
read as the library reads it, and the bundled OpenBLAS maps every routine
Aesara's C code calls)."""

import subprocess
import sys

from int8store.backend.setup.blas import _flag_names, openblas_ldflags, user_has_set
from int8store.backend import chosen_backend


def test_flags_and_config_files_both_count_as_set(tmp_path, monkeypatch):
    rc = tmp_path / "aesararc"
    rc.write_text("[blas]\nldflags = -lmkl_rt\n[global]\nfloatX = float32\n")
    monkeypatch.setenv("AESARARC", str(rc))
    monkeypatch.setenv("AESARA_FLAGS", 'gcc__cxxflags="-O2,-g"')
    assert user_has_set("blas__ldflags") and user_has_set("floatX") and user_has_set("gcc__cxxflags")
    assert not user_has_set("device")
    monkeypatch.setenv("AESARARC", str(tmp_path / "absent"))
    assert not user_has_set("blas__ldflags")


def test_quoted_values_keep_their_commas():
    from int8store.backend import activate

    # The library imported by int8store, without its noisy BLAS probe.
    parse_config_string = activate().module("configparser").parse_config_string

    flags = 'floatX=float32,blas__ldflags="-L/x -lblas -Wl,-rpath,/x"'
    assert _flag_names(flags) == {"floatX", "blas__ldflags"}
    assert parse_config_string(flags) == {"floatX": "float32", "blas__ldflags": "-L/x -lblas -Wl,-rpath,/x"}


def test_the_bundled_openblas_maps_every_routine_aesara_declares():
    flags = openblas_ldflags()
    assert flags is not None, "scipy-openblas32 is a dependency and should be usable"
    assert "-lscipy_openblas" in flags and "-Wl,-rpath," in flags
    for routine in ("sgemm_", "dgemm_", "sgemv_", "sger_", "sdot_", "saxpy_", "scopy_", "sscal_", "sswap_"):
        assert f"-D{routine}=scipy_{routine}" in flags


def test_activation_is_once_and_gives_the_graph_names():
    from int8store.backend import activate, is_active

    api = activate()
    assert is_active() and activate() is api
    assert api.lib.config.blas__ldflags and api.NAME == chosen_backend()
    assert api.float_dtype() == api.lib.config.floatX and api.float_dtype("float32") == "float32"


def run_python(code, **env):
    import os
    environment = {k: v for k, v in os.environ.items() if k != "INT8STORE_BACKEND"}
    environment.update(env)
    return subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True,
                          text=True, timeout=300)


def test_the_backend_can_be_forced_and_a_missing_one_is_named():
    running = chosen_backend()
    other = "aesara" if running == "pytensor" else "pytensor"
    code = "from int8store.backend import activate; print(activate().NAME)"
    assert run_python(code, INT8STORE_BACKEND=running).stdout.split() == [running]
    # The two cannot share an environment: forcing the other names its extra.
    missing = run_python(code, INT8STORE_BACKEND=other)
    assert missing.returncode != 0 and f"pip install 'int8store[{other}]'" in missing.stderr
    wrong = run_python(code, INT8STORE_BACKEND="theano")
    assert "INT8STORE_BACKEND='theano' is not one of pytensor, aesara" in wrong.stderr


def test_with_neither_library_the_first_graph_says_which_extra_to_install(tmp_path):
    # Both libraries hidden from the import system, as in an environment without them.
    code = ("import sys, importlib.abc\n"
            "class Hide(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('pytensor', 'aesara'): raise ImportError(name)\n"
            "sys.meta_path.insert(0, Hide())\n"
            "import int8store\n"
            "from int8store.backend import chosen_backend\n"
            "try:\n    chosen_backend()\nexcept int8store.MissingDependencyError as e:\n    print(e)\n")
    done = run_python(code)
    assert "neither is installed: pip install 'int8store[pytensor]'" in done.stdout, done.stderr
    assert "'int8store[aesara]'" in done.stdout
