"""Runtime helpers: one seed fixes Python, NumPy and torch; a captured RNG state restored later
gives the same draws from all three (what resume relies on); byte counts read as a person would."""

import random

import numpy as np
import pytest
import torch

from tracegraph.runtime.memory import (
    current_rss_bytes,
    format_bytes,
    peak_memory_bytes,
    peak_rss_bytes,
)
from tracegraph.runtime.seeding import rng_state, seed_everything, set_rng_state


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
    # the state is plain tensors and ints: a weights_only checkpoint can hold it
    assert all(isinstance(v, (torch.Tensor, int)) for v in state.values())


def test_state_survives_a_weights_only_checkpoint(tmp_path):
    seed_everything(3)
    torch.save({"rng": rng_state()}, tmp_path / "s.pt")
    want = _draws()
    set_rng_state(torch.load(tmp_path / "s.pt", weights_only=True)["rng"])
    assert _draws() == want


@pytest.mark.parametrize("n, text", [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"),
                                     (5 * 1024**2, "5.0 MiB"), (3 * 1024**3, "3.0 GiB"), (2 * 1024**5, "2048.0 TiB")])
def test_byte_formats_by_hand(n, text):
    assert format_bytes(n) == text


def test_memory_probes_on_cpu_are_the_process_rss():
    cur, peak = current_rss_bytes(), peak_rss_bytes()
    assert 10 * 1024**2 < cur <= peak * 1.01 + 4096  # a Python process with torch holds > 10 MiB
    assert peak_memory_bytes(torch.device("cpu")) >= peak
