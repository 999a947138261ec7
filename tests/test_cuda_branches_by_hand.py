"""The CUDA branches of the memory probes (runtime/memory.py) and of the random-state capture
(runtime/seeding.py) on a CPU, with torch.cuda's calls replaced by recording stand-ins: which call
each device reaches, with which argument, and what comes back. The real calls run in ``tests/gpu``.
"""

import pytest
import torch

from tracegraph.runtime import memory
from tracegraph.runtime.seeding import rng_state, seed_torch, set_rng_state


@pytest.fixture
def cuda_calls(monkeypatch):
    """torch.cuda's allocator and generator calls recorded; CUDA reported available."""
    calls: list = []
    generators = [torch.tensor([1, 2, 3], dtype=torch.uint8), torch.tensor([4, 5], dtype=torch.uint8)]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda d: calls.append(("max", d)) or 12345.0)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda d: calls.append(("reset", d)))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append(("empty",)))
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: calls.append(("get",)) or generators)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", lambda s: calls.append(("set", s)))
    monkeypatch.setattr(memory.gc, "collect", lambda: calls.append(("gc",)) or 0)
    return calls


def test_on_cuda_the_peak_is_the_allocators_for_that_device_as_an_int(cuda_calls):
    device = torch.device("cuda", 1)
    peak = memory.peak_memory_bytes(device)
    assert peak == 12345 and type(peak) is int
    assert cuda_calls == [("max", device)]


def test_on_a_cpu_the_peak_is_the_process_and_nothing_of_cuda_is_asked(cuda_calls):
    assert memory.peak_memory_bytes(torch.device("cpu")) == memory.peak_rss_bytes()
    memory.reset_peak(torch.device("cpu"))
    assert cuda_calls == []


def test_reset_starts_a_new_peak_on_the_cuda_device_given(cuda_calls):
    device = torch.device("cuda", 0)
    memory.reset_peak(device)
    assert cuda_calls == [("reset", device)]


@pytest.mark.parametrize("device, want", [("cuda", [("gc",), ("empty",)]), ("cpu", [("gc",)])])
def test_cleanup_collects_garbage_then_empties_only_the_cuda_cache(cuda_calls, device, want):
    memory.cleanup(torch.device(device))
    assert cuda_calls == want


def test_the_random_state_holds_and_restores_every_cuda_generator(cuda_calls):
    state = rng_state()
    assert [t.tolist() for t in state["cuda"]] == [[1, 2, 3], [4, 5]] and cuda_calls == [("get",)]
    set_rng_state(state)
    assert cuda_calls[-1][0] == "set" and cuda_calls[-1][1] is state["cuda"]


def test_a_state_without_cuda_generators_leaves_them_alone(cuda_calls):
    state = rng_state()
    del state["cuda"]
    set_rng_state(state)
    assert [c[0] for c in cuda_calls] == ["get"]


def test_without_cuda_no_generator_is_saved_or_restored(cuda_calls, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    state = rng_state()
    assert "cuda" not in state
    set_rng_state({**state, "cuda": [torch.tensor([9], dtype=torch.uint8)]})  # saved on a GPU machine
    assert cuda_calls == []


@pytest.mark.parametrize("initialized, want", [(True, [("seed_all", 5)]), (False, [])])
def test_seed_torch_seeds_the_gpus_once_cuda_is_in_use(monkeypatch, initialized, want):
    calls: list = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: initialized)
    monkeypatch.setattr(torch.cuda, "manual_seed_all", lambda s: calls.append(("seed_all", s)))
    seed_torch(5)
    assert calls == want
    # the CPU generator is seeded either way: its next draw is a fresh generator's with seed 5
    assert torch.rand(3).tolist() == torch.rand(3, generator=torch.Generator().manual_seed(5)).tolist()
