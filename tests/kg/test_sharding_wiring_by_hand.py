"""The influence stage spread over devices or torchrun ranks (kg/explain/tracin/sharding.py), wired
by hand around a stand-in TracIn whose scores are a fixed matrix written here.

Held: each device scores its contiguous share of the test triples against the rows asked (with the
progress display), and the stack equals the matrix; no device gets no test triple; each rank scores
its batch-aligned shard of the rows and sends only its own picks (at most k proponents and k
opponents, by TracIn, by the margin over the rival, or by shell then margin), which rank 0 merges
back into column order and which hold every pick one process makes (:func:`pick` over all rows).
"""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tracegraph.kg.explain.tracin import sharding as sh
from tracegraph.kg.explain.tracin.engine import InfluenceResult
from tracegraph.kg.explain.tracin.rows import pick
from tracegraph.runtime.distributed import batch_aligned_shard

# 3 test triples (then 3 rivals) x 8 training rows, with ties, zeros and both signs
S = np.array(
    [
        [0.5, -1.0, 2.0, 0.0, -0.25, 2.0, 1.0, -3.0],
        [-0.5, -0.5, 0.75, 4.0, 0.0, -2.0, 0.1, 0.1],
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
        [0.0, 0.5, -1.0, 1.0, 0.25, 0.0, 2.0, -1.0],  # rivals of the three
        [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5],
        [8.0, 6.0, 7.0, 1.0, 5.0, 4.0, 3.0, 2.0],
    ]
)
TRAIN_SELF = np.arange(8, dtype=np.float64) + 10
TEST_SELF = np.arange(6, dtype=np.float64) + 100


class StubTracIn:
    """Scores rows of S: test triple j is ``[j, 0, 0]``, training row m is column m."""

    def __init__(self, batch_size=2, dtype=np.float64):
        self.options = SimpleNamespace(batch_size=batch_size, memory_budget_bytes=1 << 30, scratch_dir=None)
        self.calls, self.dtype = [], dtype  # float32: scores spilled to disk, as large results are

    def result(self, test_ids, rows, device=None, progress=None):
        j, rows = np.asarray(test_ids)[:, 0], np.asarray(rows)
        self.calls.append((j.tolist(), rows.tolist(), device, progress))
        scores = S[np.ix_(j, rows)] if self.dtype == np.float64 else (S[np.ix_(j, rows)] + 1 / 3).astype(self.dtype)
        return InfluenceResult(scores, TRAIN_SELF[rows], TEST_SELF[j], ["ckpt"], ["layer"])


def ids_of_tests(n):
    return np.stack([np.arange(n), np.zeros(n, int), np.zeros(n, int)], 1)


def test_devices_score_contiguous_shares_of_the_test_triples():
    tracin, progress = StubTracIn(), object()
    rows = np.array([0, 2, 3, 7])
    devices = [torch.device("cpu"), torch.device("meta")]
    res = sh._influence_over_devices(devices, tracin, rows, ids_of_tests(5), progress)
    assert sorted(tracin.calls, key=lambda c: c[0]) == [
        ([0, 1], [0, 2, 3, 7], torch.device("cpu"), progress),
        ([2, 3, 4], [0, 2, 3, 7], torch.device("meta"), progress),
    ]
    np.testing.assert_array_equal(res.scores, S[:5][:, rows])
    np.testing.assert_array_equal(res.train_self, TRAIN_SELF[rows])
    np.testing.assert_array_equal(res.test_self, TEST_SELF[:5])
    assert (res.checkpoints, res.layers) == (["ckpt"], ["layer"])

    one = StubTracIn()
    sh._influence_over_devices(devices, one, rows, ids_of_tests(1), progress)
    assert one.calls == [([0], [0, 2, 3, 7], torch.device("cpu"), progress)]  # the second device stays idle


def _two_ranks(monkeypatch, test_ids, cols_of, top_k, walk_of=None, batch_size=2, dtype=np.float64):
    """Run rank 1 then rank 0 over ``union = 0..7``; returns (rank 0's picks, what each rank sent, calls)."""
    union = np.arange(8)
    sent, progress = {}, object()
    tracins = {}
    for rank in (1, 0):

        def gather(mine, rank=rank):
            sent[rank] = mine
            return None if rank else [sent[0], sent[1]]

        monkeypatch.setattr(sh, "gather_to_main", gather)
        tracins[rank] = StubTracIn(batch_size, dtype)
        ctx = SimpleNamespace(rank=rank, world_size=2)
        res, picks = sh._influence_over_ranks(ctx, tracins[rank], union, cols_of, test_ids, progress, top_k, walk_of)
        lo, hi = batch_aligned_shard(8, batch_size, rank, 2)
        assert tracins[rank].calls == [(list(range(len(test_ids))), list(range(lo, hi)), None, progress)]
        handed = S if dtype == np.float64 else (S + 1 / 3).astype(dtype)  # what the stand-in scores
        assert res.scores.dtype == dtype
        np.testing.assert_array_equal(res.scores, handed[: len(test_ids), lo:hi])
        if rank:
            assert picks is None
    return picks, sent


COLS = [np.arange(8), np.array([1, 3, 4, 6]), np.array([0, 5, 6, 7])]


@pytest.mark.parametrize("top_k", [None, 1, 2])
def test_ranks_send_their_own_picks_and_rank_0_holds_every_global_pick(monkeypatch, top_k):
    picks, sent = _two_ranks(monkeypatch, ids_of_tests(3), COLS, top_k)
    for j, cols in enumerate(COLS):
        pos, sc, self_inf, key = picks[j]
        assert key is None and np.all(np.diff(pos) > 0)  # column order
        np.testing.assert_array_equal(sc, S[j, cols[pos]])
        np.testing.assert_array_equal(self_inf, TRAIN_SELF[cols[pos]])
        assert sc.dtype == np.float64
        one_process = pick(S[j, cols], None, top_k)[0]
        assert set(one_process) <= set(pos.tolist())
        if top_k is None:
            assert pos.tolist() == list(range(len(cols)))
        for rank in (0, 1):  # each rank sends at most k proponents and k opponents of its shard
            lo, hi = batch_aligned_shard(8, 2, rank, 2)
            mine = sent[rank][j][0]
            in_shard = np.nonzero((cols >= lo) & (cols < hi))[0]
            want = (
                in_shard
                if top_k is None or 2 * top_k >= len(in_shard)
                else in_shard[np.sort(pick(S[j, cols[in_shard]], None, top_k)[0])]
            )
            assert mine.tolist() == want.tolist(), (rank, j)


@pytest.mark.parametrize("with_walk", [False, True])
def test_margin_picks_use_the_rival_and_the_walk_shells(monkeypatch, with_walk):
    walks = [np.array([1, 2, 3, 3, np.inf, 4, 2, 1.0]), np.array([3, 1, np.inf, 2.0]), np.array([2, 2, 5, 1.0])]
    walk_of = (lambda j: walks[j]) if with_walk else None
    picks, sent = _two_ranks(monkeypatch, ids_of_tests(6), COLS, 1, walk_of)
    for j, cols in enumerate(COLS):
        margin = S[j, cols] - S[3 + j, cols]
        pos, sc, _, key = picks[j]
        np.testing.assert_array_equal(key, margin[pos])
        np.testing.assert_array_equal(sc, S[j, cols[pos]])
        one_process = pick(margin, walks[j] if with_walk else None, 1)[0]
        assert set(one_process) <= set(pos.tolist())
        for rank in (0, 1):
            lo, hi = batch_aligned_shard(8, 2, rank, 2)
            in_shard = np.nonzero((cols >= lo) & (cols < hi))[0]
            w = walks[j][in_shard] if with_walk else None
            want = in_shard if 2 >= len(in_shard) else in_shard[np.sort(pick(margin[in_shard], w, 1)[0])]
            assert sent[rank][j][0].tolist() == want.tolist(), (rank, j)


def test_spilled_float32_scores_are_merged_and_subtracted_in_float64(monkeypatch):
    # a float32 score matrix (spilled to disk): values and margins are taken in float64, as one process does
    picks, _ = _two_ranks(monkeypatch, ids_of_tests(6), COLS, None, dtype=np.float32)
    S32 = (S + 1 / 3).astype(np.float32).astype(np.float64)  # what the stub hands out, widened exactly
    for j, cols in enumerate(COLS):
        pos, sc, _, key = picks[j]
        assert sc.dtype == np.float64 and key.dtype == np.float64
        np.testing.assert_array_equal(sc, S32[j, cols[pos]])
        np.testing.assert_array_equal(key, S32[j, cols[pos]] - S32[3 + j, cols[pos]])
