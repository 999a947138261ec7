"""runtime/allocator.py's policy in-process, with glibc's ``mallopt`` replaced by a recorder: which
thresholds it sets (mallopt's parameter numbers from malloc.h, values from the docstring), when it
leaves malloc alone, and that it decides once per process. What glibc then does with the thresholds
is checked against the real allocator in ``test_malloc_keeps_freed_buffers.py``.
"""

import pytest

from tests.conftest import log_lines
from tracegraph.runtime import allocator as A

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # malloc.h


class FakeLibc:
    def __init__(self, answers=(1, 1)):
        self.calls, self.answers = [], list(answers)

    def mallopt(self, param, value):
        self.calls.append((param, value))
        return self.answers[len(self.calls) - 1]


@pytest.fixture
def glibc(monkeypatch):
    libc = FakeLibc()
    monkeypatch.setattr(A.platform, "system", lambda: "Linux")
    monkeypatch.setattr(A.platform, "libc_ver", lambda: ("glibc", "2.36"))
    monkeypatch.setattr(A.ctypes, "CDLL", lambda name: libc if name == "libc.so.6" else pytest.fail(name))
    for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES", "LD_PRELOAD"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setattr(A, "_applied", None)
    return libc


def test_it_keeps_buffers_up_to_32_mib_and_a_gib_of_free_heap(glibc):
    assert A.keep_freed_buffers() is True
    assert glibc.calls == [(M_MMAP_THRESHOLD, 32 * 1024 * 1024), (M_TRIM_THRESHOLD, 1024**3)]
    assert A.keep_freed_buffers() is True and len(glibc.calls) == 2  # once per process


@pytest.mark.parametrize("answers,result,calls", [((0, 1), False, 1), ((1, 0), False, 2)])
def test_a_refused_setting_is_reported(glibc, answers, result, calls):
    glibc.answers = list(answers)
    assert A.keep_freed_buffers() is result and len(glibc.calls) == calls
    glibc.answers = [1, 1]
    assert A.keep_freed_buffers() is result  # decided once


@pytest.mark.parametrize("var", ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES", "LD_PRELOAD"])
def test_the_users_malloc_settings_win(glibc, monkeypatch, var):
    monkeypatch.setenv(var, "x")
    assert A.keep_freed_buffers() is False and glibc.calls == []
    monkeypatch.setenv(var, "")  # empty is unset (a new decision needs a new process)
    monkeypatch.setattr(A, "_applied", None)
    assert A.keep_freed_buffers() is True


def test_other_systems_and_c_libraries_are_left_alone(glibc, monkeypatch):
    monkeypatch.setattr(A.platform, "libc_ver", lambda: ("musl", "1.2"))
    assert A.keep_freed_buffers() is False and glibc.calls == []
    monkeypatch.setattr(A, "_applied", None)
    monkeypatch.setattr(A.platform, "libc_ver", lambda: ("glibc", "2.36"))
    monkeypatch.setattr(A.platform, "system", lambda: "Darwin")
    assert A.keep_freed_buffers() is False and glibc.calls == []


def test_a_missing_libc_is_no_error(glibc, monkeypatch):
    def missing(name):
        raise OSError(name)

    monkeypatch.setattr(A.ctypes, "CDLL", missing)
    assert A.keep_freed_buffers() is False


@pytest.fixture
def debug_lines():
    import logging

    with log_lines(A.log, logging.DEBUG) as got:
        yield got


def test_each_decision_is_logged_at_debug_level(glibc, monkeypatch, debug_lines):
    A.keep_freed_buffers()
    assert debug_lines == ["glibc malloc keeps freed buffers up to 33554432 bytes: True"]
    monkeypatch.setattr(A, "_applied", None)
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=0")
    A.keep_freed_buffers()
    assert debug_lines[1:] == ["malloc settings left as the environment gives them"]
