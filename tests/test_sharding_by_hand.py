"""runtime/distributed.py's single-process rules by hand: which slice each rank takes (balanced,
whole batches), each rank's share of a global batch, the device list, work spread over devices,
per-rank seeds, the collective timeout, and who counts as rank 0.

References: slices and shares written out for small cases; Hypothesis for the balance rules.
"""

import threading

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tracegraph.errors import TracegraphError
from tracegraph.runtime import devices as DV
from tracegraph.runtime import distributed as D


def test_slices_by_hand():
    assert [D.shard_range(7, r, 3) for r in range(3)] == [(0, 2), (2, 4), (4, 7)]
    assert [D.shard_range(2, r, 3) for r in range(3)] == [(0, 0), (0, 1), (1, 2)]
    # 21 items in batches of 5: [0,5) [5,10) [10,15) [15,20) [20,21)
    assert [D.batch_aligned_shard(21, 5, r, 2) for r in range(2)] == [(0, 10), (10, 21)]
    assert [D.batch_aligned_shard(21, 5, r, 3) for r in range(3)] == [(0, 5), (5, 15), (15, 21)]
    assert [D.batch_aligned_shard(20, 5, r, 3) for r in range(3)] == [(0, 5), (5, 10), (10, 20)]
    assert [D.batch_aligned_shard(3, 5, r, 2) for r in range(2)] == [(0, 0), (0, 3)]
    assert [D.batch_aligned_shard(0, 5, r, 2) for r in range(2)] == [(0, 0), (0, 0)]


@given(st.integers(0, 500), st.integers(1, 9), st.integers(1, 40))
def test_slices_cover_everything_once_balanced_and_in_whole_batches(n, world, batch):
    r = [D.shard_range(n, k, world) for k in range(world)]
    assert [lo for lo, _ in r[1:]] == [hi for _, hi in r[:-1]] and r[0][0] == 0 and r[-1][1] == n
    sizes = [hi - lo for lo, hi in r]
    assert set(sizes) <= {n // world, -(-n // world)}
    b = [D.batch_aligned_shard(n, batch, k, world) for k in range(world)]
    assert [lo for lo, _ in b[1:]] == [hi for _, hi in b[:-1]] and b[0][0] == 0 and b[-1][1] == n
    batches = [-(-(hi - lo) // batch) for lo, hi in b]  # whole batches: every start on a batch boundary
    assert all(lo % batch == 0 or lo == n for lo, _ in b)
    nb = -(-n // batch)
    assert sum(batches) == nb and max(batches) - min(batches) <= 1


def test_each_rank_takes_every_world_size_th_item_of_each_global_batch():
    global_batches = [[9, 4, 7, 1, 8], [3, 0], [5]]
    shares = [list(D.ShardedBatchSampler(global_batches, r, 2)) for r in range(2)]
    assert shares == [[[9, 7, 8], [3], [5]], [[4, 1], [0], []]]
    assert len(D.ShardedBatchSampler(global_batches, 1, 2)) == 3  # the same number of steps on every rank


def test_device_lists(monkeypatch):
    assert DV.parse_devices(None) == [] and DV.parse_devices([" cpu", "cpu "]) == [torch.device("cpu")] * 2
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert DV.parse_devices("cuda:1, cpu,cuda:0") == [
        torch.device("cuda", 1),
        torch.device("cpu"),
        torch.device("cuda", 0),
    ]
    with pytest.raises(TracegraphError) as e:
        DV.parse_devices("cuda:0,cuda:2")
    assert str(e.value) == "--devices: cuda:2 does not exist (2 CUDA devices)"
    with pytest.raises(TracegraphError) as e:
        DV.parse_devices("cuda:1,cuda:1")
    assert str(e.value) == "--devices: a CUDA device is listed twice"
    with pytest.raises(TracegraphError) as e:
        DV.parse_devices(",")
    assert str(e.value) == "--devices: give at least one device, e.g. cuda:0,cuda:1"


def test_work_over_devices_returns_in_device_order_and_raises_the_first_error():
    cpu = torch.device("cpu")
    where = []
    assert DV.run_on_devices([cpu], 5, lambda d, lo, hi: where.append(threading.current_thread()) or (lo, hi)) == [
        (0, 5)
    ]
    assert where == [threading.main_thread()]  # one device: no thread
    assert DV.run_on_devices([cpu] * 3, 8, lambda d, lo, hi: list(range(lo, hi))) == [[0, 1], [2, 3, 4], [5, 6, 7]]

    def fail(d, lo, hi):
        raise (KeyError if lo == 0 else ValueError)(lo)

    with pytest.raises(KeyError):
        DV.run_on_devices([cpu] * 3, 6, fail)


def test_rank_seeds_depend_on_every_key_in_order():
    seeds = {D.rank_seed(s, e, r) for s in range(3) for e in range(3) for r in range(3)}
    assert len(seeds) == 27 and all(0 <= x < 2**32 for x in seeds)
    assert D.rank_seed(1, 2) != D.rank_seed(2, 1) and D.rank_seed(7) == D.rank_seed(7)
    assert D.rank_seed(2**32 + 5) == D.rank_seed(5) and D.rank_seed(-1) == D.rank_seed(2**32 - 1)
    assert D.rank_seed(0, 1) == int(np.random.SeedSequence([0, 1]).generate_state(1)[0])


@pytest.mark.parametrize("raw", ["0", "-3", "nan", "soon"])
def test_the_timeout_is_a_positive_number_of_seconds(monkeypatch, raw):
    monkeypatch.delenv("TRACEGRAPH_DIST_TIMEOUT", raising=False)
    assert D.timeout_seconds() == 300.0
    monkeypatch.setenv("TRACEGRAPH_DIST_TIMEOUT", "")
    assert D.timeout_seconds() == 300.0
    monkeypatch.setenv("TRACEGRAPH_DIST_TIMEOUT", raw)
    with pytest.raises(TracegraphError) as e:
        D.timeout_seconds()
    assert str(e.value) == f"TRACEGRAPH_DIST_TIMEOUT={raw!r}: must be a positive number of seconds"


def test_torchrun_is_recognised_by_its_variables(monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    assert not D.launched_by_torchrun() and D.env_rank() == 0 and D.is_main_process()
    monkeypatch.setenv("RANK", "1")
    assert not D.launched_by_torchrun() and D.env_rank() == 0  # no WORLD_SIZE: one process
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert not D.launched_by_torchrun()
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert D.launched_by_torchrun() and D.env_rank() == 1 and not D.is_main_process()
    ctx = D.DistContext(rank=1, world_size=2)
    assert ctx.active and not ctx.is_main and D.DistContext().is_main and not D.DistContext().active
