"""Runtime helpers: one seed fixes Python, NumPy and torch; a captured RNG state restored later
gives the same draws from all three (what resume relies on); byte counts read as a person would."""

import gc
import random
import weakref
from pathlib import Path

import numpy as np
import pytest
import torch

from tracegraph.runtime import memory
from tracegraph.runtime.memory import (
    cleanup,
    current_rss_bytes,
    format_bytes,
    peak_memory_bytes,
    peak_rss_bytes,
    reset_peak,
)
from tracegraph.runtime.seeding import rng_state, seed_everything, seed_torch, set_rng_state


def _draws():
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_one_seed_fixes_all_three_generators():
    seed_everything(123)
    a = _draws()
    seed_everything(123)
    assert _draws() == a
    seed_everything(124)
    b = _draws()
    assert all(x != y for x, y in zip(a, b))  # each generator moved with the seed
    seed_everything(2**40 + 5)  # above NumPy's 32-bit seed range: folded, not an error
    _draws()


def test_captured_state_restores_every_generator():
    seed_everything(7)
    _draws()
    state = rng_state()
    want = [_draws() for _ in range(3)]
    seed_everything(99)
    _draws()
    set_rng_state(state)
    assert [_draws() for _ in range(3)] == want
    # the state is plain tensors and numbers: a weights_only checkpoint can hold it
    assert all(isinstance(v, (torch.Tensor, int, float)) for v in state.values())


@pytest.mark.parametrize("seed", [100, 2**32 + 5])
def test_seed_reaches_each_generator_as_documented(seed):
    # the documented rule restated with fresh generators: Python and torch take the seed as given,
    # NumPy takes it modulo 2**32 (100 tells 2**32 from a smaller modulus; 2**32 + 5 is out of
    # NumPy's range unless folded)
    seed_everything(seed)
    want = (
        random.Random(seed).random(),
        float(np.random.RandomState(seed % 2**32).rand()),
        float(torch.rand(1, generator=torch.Generator().manual_seed(seed))),
    )
    assert _draws() == want


def test_seed_torch_gives_torch_manual_seeds_stream():
    # what training reseeds with for every batch: the CPU stream torch.manual_seed gives
    torch.manual_seed(31)
    want = torch.rand(4).tolist(), torch.randn(2).tolist()
    torch.manual_seed(0)
    seed_torch(31)
    assert (torch.rand(4).tolist(), torch.randn(2).tolist()) == want


def test_captured_state_keeps_the_pending_gaussian_of_python_and_numpy():
    # Python's gauss() and NumPy's legacy normal draws make values in pairs and hold the second
    # one back; a state captured between the two must hand that same value out after restore
    seed_everything(11)
    random.gauss(0.0, 1.0)
    np.random.standard_normal()
    state = rng_state()
    want = (random.gauss(0.0, 1.0), float(np.random.standard_normal()), _draws())
    seed_everything(12)
    random.gauss(0.0, 1.0)
    np.random.standard_normal()  # the other seed leaves its own value pending
    set_rng_state(state)
    assert (random.gauss(0.0, 1.0), float(np.random.standard_normal()), _draws()) == want


def test_captured_state_with_nothing_pending_restores_normal_draws():
    seed_everything(5)
    state = rng_state()
    want = [float(np.random.standard_normal()) for _ in range(3)] + [random.gauss(0.0, 1.0)]
    seed_everything(6)
    set_rng_state(state)
    assert [float(np.random.standard_normal()) for _ in range(3)] + [random.gauss(0.0, 1.0)] == want


def test_state_from_before_the_pending_gaussian_was_recorded_still_restores():
    # checkpoints written before the pending normal draw was kept hold only these four entries
    seed_everything(8)
    state = {k: rng_state()[k] for k in ("python", "numpy_keys", "numpy_pos", "torch")}
    want = [float(np.random.standard_normal()) for _ in range(3)] + [random.gauss(0.0, 1.0), _draws()]
    seed_everything(9)
    set_rng_state(state)
    assert [float(np.random.standard_normal()) for _ in range(3)] + [random.gauss(0.0, 1.0), _draws()] == want


def test_state_survives_a_weights_only_checkpoint(tmp_path):
    seed_everything(3)
    random.gauss(0.0, 1.0)
    np.random.standard_normal()  # a value pending in each: the checkpoint must carry it
    torch.save({"rng": rng_state()}, tmp_path / "s.pt")
    want = (random.gauss(0.0, 1.0), float(np.random.standard_normal()), _draws())
    set_rng_state(torch.load(tmp_path / "s.pt", weights_only=True)["rng"])
    assert (random.gauss(0.0, 1.0), float(np.random.standard_normal()), _draws()) == want


@pytest.mark.parametrize(
    "n, text",
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (5 * 1024**2, "5.0 MiB"),
        (3 * 1024**3, "3.0 GiB"),
        (2 * 1024**5, "2048.0 TiB"),
    ],
)
def test_byte_formats_by_hand(n, text):
    assert format_bytes(n) == text


def test_memory_probes_on_cpu_are_the_process_rss():
    cur, peak = current_rss_bytes(), peak_rss_bytes()
    assert 10 * 1024**2 < cur <= peak * 1.01 + 4096  # a Python process with torch holds > 10 MiB
    assert peak_memory_bytes(torch.device("cpu")) >= peak


class _Usage:
    ru_maxrss = 1000


@pytest.mark.parametrize("platform, want", [("linux", 1000 * 1024), ("darwin", 1000)])
def test_peak_rss_reads_getrusage_in_each_platforms_unit(monkeypatch, platform, want):
    # getrusage(2): ru_maxrss is in kilobytes on Linux, in bytes on macOS
    monkeypatch.setattr(memory.sys, "platform", platform)
    monkeypatch.setattr(memory.resource, "getrusage", lambda who: _Usage())
    assert peak_rss_bytes() == want


def _status_kib(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(field)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_current_rss_is_the_resident_memory_now_not_the_peak():
    block = np.ones(200 * 1024**2 // 8)  # 200 MiB touched, then returned to the OS
    del block
    gc.collect()
    before = _status_kib("VmRSS") * 1024
    cur = current_rss_bytes()
    after = _status_kib("VmRSS") * 1024
    slack = 8 * 1024**2
    assert before - slack <= cur <= after + slack  # the kernel's own VmRSS, read beside it
    assert peak_rss_bytes() > after + 100 * 1024**2  # the peak still holds the freed block


def test_cpu_peak_cannot_be_reset_and_cleanup_collects_garbage():
    cpu = torch.device("cpu")
    reset_peak(cpu)  # nothing to reset on CPU: no error, the lifetime peak stays
    assert peak_memory_bytes(cpu) >= current_rss_bytes() * 0.99

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # a reference cycle: only the collector frees it
    gone = weakref.ref(a)
    gc.disable()
    try:
        del a, b
        cleanup(cpu)
        assert gone() is None
    finally:
        gc.enable()
