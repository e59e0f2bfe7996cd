"""glibc's allocator after a load (int8store.runtime.allocator): large blocks
kept for the next step, once a process, never where the user tuned it.
The speed it buys is bench/classic_dropin.py's (a classic LeNet5 epoch in
float64: 39.6 s against the classic loader's 33.6, then 33.6)."""

import pytest

from int8store.runtime import allocator


class FakeLibc:
    """glibc's two calls, recorded."""

    def __init__(self):
        self.calls = []

    def mallopt(self, parameter, value):
        self.calls.append((parameter, value))
        return 1

    def malloc_trim(self, pad):
        return 1


@pytest.fixture
def libc(monkeypatch):
    fake = FakeLibc()
    monkeypatch.setattr(allocator, "_glibc", lambda: fake)
    monkeypatch.setattr(allocator, "_kept", False)
    for name in allocator.ALLOCATOR_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return fake


def test_the_thresholds_are_set_once_a_process(libc):
    assert allocator.keep_large_blocks()
    assert libc.calls == [(-3, 32 << 20), (-1, 1 << 30)]  # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD
    assert not allocator.keep_large_blocks() and len(libc.calls) == 2


@pytest.mark.parametrize("name", allocator.ALLOCATOR_VARIABLES)
def test_an_allocator_the_user_tuned_is_left_alone(libc, monkeypatch, name):
    monkeypatch.setenv(name, "1")
    assert not allocator.keep_large_blocks() and libc.calls == []


def test_other_c_libraries_are_left_alone(monkeypatch):
    monkeypatch.setattr(allocator, "_glibc", lambda: None)
    monkeypatch.setattr(allocator, "_kept", False)
    assert not allocator.keep_large_blocks() and not allocator.give_back_freed_memory()


def test_a_load_sets_them(libc, tmp_path):
    from int8store import load_splits

    load_splits("digits", cache_dir=tmp_path)
    assert (-1, 1 << 30) in libc.calls


def test_on_this_machine_glibc_takes_them(monkeypatch):
    """The real calls: glibc accepts both values (mallopt returns 1)."""
    if allocator._glibc() is None:
        pytest.skip("not glibc")
    monkeypatch.setattr(allocator, "_kept", False)
    for name in allocator.ALLOCATOR_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert allocator.keep_large_blocks()
