"""Aesara defaults never override what the user set, and survive Aesara's parser."""

import os

from int8store.aesara_config import openblas_ldflags, set_default, user_has_set


def test_a_default_is_added_only_when_the_user_set_nothing(tmp_path, monkeypatch):
    from aesara.configparser import parse_config_string

    monkeypatch.setenv("AESARARC", str(tmp_path / "absent"))
    monkeypatch.setenv("AESARA_FLAGS", "floatX=float32")
    assert not user_has_set("blas__ldflags")
    assert set_default("blas__ldflags", "-L/x -lblas -Wl,-rpath,/x")
    parsed = parse_config_string(os.environ["AESARA_FLAGS"])
    assert parsed == {"floatX": "float32", "blas__ldflags": "-L/x -lblas -Wl,-rpath,/x"}
    assert not set_default("blas__ldflags", "-lother")


def test_flags_and_config_files_both_count_as_set(tmp_path, monkeypatch):
    rc = tmp_path / "aesararc"
    rc.write_text("[blas]\nldflags = -lmkl_rt\n[global]\nfloatX = float32\n")
    monkeypatch.setenv("AESARARC", str(rc))
    monkeypatch.setenv("AESARA_FLAGS", 'gcc__cxxflags="-O2,-g"')
    assert user_has_set("blas__ldflags") and user_has_set("floatX") and user_has_set("gcc__cxxflags")
    assert not set_default("blas__ldflags", "")
    assert not user_has_set("device")


def test_the_bundled_openblas_maps_every_routine_aesara_declares():
    flags = openblas_ldflags()
    assert flags is not None, "scipy-openblas32 is a dependency and should be usable"
    assert "-lscipy_openblas" in flags and "-Wl,-rpath," in flags
    for routine in ("sgemm_", "dgemm_", "sgemv_", "sger_", "sdot_", "saxpy_", "scopy_", "sscal_", "sswap_"):
        assert f"-D{routine}=scipy_{routine}" in flags
