"""Aesara defaults never override what the user set."""

from int8store.aesara_config import set_default, user_has_set


def test_a_default_is_added_only_when_the_user_set_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("AESARARC", str(tmp_path / "absent"))
    monkeypatch.setenv("AESARA_FLAGS", "floatX=float32")
    assert not user_has_set("blas__ldflags")
    assert set_default("blas__ldflags", "-lopenblas")
    assert "floatX=float32,blas__ldflags=-lopenblas" == __import__("os").environ["AESARA_FLAGS"]
    assert not set_default("blas__ldflags", "-lother")


def test_flags_and_config_files_both_count_as_set(tmp_path, monkeypatch):
    rc = tmp_path / "aesararc"
    rc.write_text("[blas]\nldflags = -lmkl_rt\n[global]\nfloatX = float32\n")
    monkeypatch.setenv("AESARARC", str(rc))
    monkeypatch.setenv("AESARA_FLAGS", "gcc__cxxflags=-O2")
    assert user_has_set("blas__ldflags") and user_has_set("floatX") and user_has_set("gcc__cxxflags")
    assert not set_default("blas__ldflags", "")
    assert not user_has_set("device")
