"""The backend's BLAS set-up: the user's choice is read as Aesara reads it, and
the bundled OpenBLAS maps every routine Aesara's C code calls."""

from int8store.backend.blas import _flag_names, openblas_ldflags, user_has_set


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

    activate()  # Aesara imported by int8store, without its noisy BLAS probe
    from aesara.configparser import parse_config_string

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
    assert api.aesara.config.blas__ldflags
    assert api.float_dtype() == api.aesara.config.floatX and api.float_dtype("float32") == "float32"
