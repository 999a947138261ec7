"""What `rank_queries` promises beyond the ranks of one worked example, each against a count a person
can check: its defaults (tail side, 256 queries a batch, 65 536 entities a chunk, no top-k), that no
call scores more than ``entity_chunk`` entities, unfiltered ranks (``known=None``) against a counting
loop, exact counts and ids past 2**24 entities (where a float32 counter would round), float32
scores, and that it computes on ``device`` even when the caller has set another default device.

The small model is the bias model of test_ranks_by_hand (every score is exactly its entity's bias);
the huge one is a stand-in whose scores are written down entity by entity.
"""

import numpy as np
import torch

from tests.kg.test_ranks_by_hand import BIAS, FILTER, N, QUERIES, bias_model, loop_ranks
from tracegraph.kg.data.triples import KnownTails
from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.model.evaluate import rank_queries


class Recording:
    """A model that passes every call through and notes the batch sizes, entity ranges and the
    devices of the tensors it is handed."""

    def __init__(self, model):
        self.model, self.config = model, model.config
        self.batches, self.ranges, self.devices = [], [], set()

    def eval(self):
        self.model.eval()
        return self

    def hidden(self, heads, relations):
        self.batches.append(len(heads))
        self.devices |= {heads.device, relations.device}
        return self.model.hidden(heads, relations)

    def score_hidden(self, x, start=0, end=None):
        self.ranges.append((start, end))
        self.devices.add(x.device)
        return self.model.score_hidden(x, start, end)


def _rank(model, queries, known, **kw):
    return rank_queries(model, queries[:, 0], queries[:, 1], queries[:, 2], known, **kw)


def test_defaults_are_the_tail_side_and_no_top_k():
    rk = _rank(bias_model(), QUERIES, KnownTails([FILTER], 2))
    assert rk.side == "tail"
    assert rk.topk_ids.shape == (len(QUERIES), 0) and rk.topk_scores.shape == (len(QUERIES), 0)


def test_queries_go_in_batches_of_batch_size_each_once():
    spy = Recording(bias_model())
    rk = _rank(spy, QUERIES[:5], KnownTails([FILTER], 2), batch_size=2)
    assert spy.batches == [2, 2, 1]
    np.testing.assert_array_equal(rk.optimistic, loop_ranks(QUERIES[:5], FILTER)[:, 0])


def test_default_batch_is_256_queries():
    queries = np.tile(QUERIES, (50, 1))  # 300 queries
    spy = Recording(bias_model())
    rk = _rank(spy, queries, KnownTails([FILTER], 2))
    assert spy.batches == [256, 44]
    np.testing.assert_array_equal(rk.pessimistic, loop_ranks(queries, FILTER)[:, 1])


def test_no_call_scores_more_than_entity_chunk_entities():
    spy = Recording(bias_model())
    _rank(spy, QUERIES, KnownTails([FILTER], 2), entity_chunk=3, top_k=2)
    assert spy.ranges and all(end is not None and 0 < end - start <= 3 for start, end in spy.ranges)
    assert {r for r in spy.ranges} == {(0, 3), (3, 6), (6, 9), (9, 10)}


def test_default_entity_chunk_is_65536_entities():
    n = 65536 + 1
    torch.manual_seed(0)
    model = ConvE(
        ConvEConfig(
            num_entities=n,
            num_relations=1,
            embedding_dim=12,
            embedding_height=3,
            embedding_width=4,
            output_channels=2,
            reciprocal=False,
        )
    ).eval()
    bias = np.zeros(n)
    bias[[7, 65535, 65536]] = [1.0, 2.0, -1.0]
    with torch.no_grad():
        model.entity.weight.zero_()
        model.entity_bias.copy_(torch.tensor(bias))
    spy = Recording(model)
    rk = rank_queries(spy, np.array([0, 0]), np.array([0, 0]), np.array([65536, 7]), None)
    assert set(spy.ranges) == {(0, 65536), (65536, 65537)}
    # answer 65536 (bias -1) is below all others; answer 7 (bias 1) below only 65535
    np.testing.assert_array_equal(rk.optimistic, [n, 2])
    np.testing.assert_array_equal(rk.pessimistic, [n, 2])


def test_unfiltered_ranks_count_every_other_entity():
    # the first query's answer is low, so every entity (0 included) can stand above it
    queries = np.array([[1, 1, 5], [0, 0, 2], [0, 0, 8], [1, 1, 6], [1, 0, 0]])
    for chunk in (3, 100):
        rk = _rank(bias_model(), queries, None, entity_chunk=chunk, batch_size=2, top_k=3)
        ref = loop_ranks(queries, np.zeros((0, 3), np.int64))
        np.testing.assert_array_equal(ref, [[10, 10], [2, 5], [9, 9], [1, 1], [8, 8]])  # by hand from BIAS
        np.testing.assert_array_equal(rk.optimistic, ref[:, 0])
        np.testing.assert_array_equal(rk.pessimistic, ref[:, 1])
        # nothing filtered: the top three scores are 3.0 (entity 6) and two of the 2.0s
        np.testing.assert_array_equal(rk.topk_scores, np.tile([3.0, 2.0, 2.0], (5, 1)))
        assert all(row[0] == 6 and {*row[1:]} <= {1, 2, 4, 9} for row in rk.topk_ids.tolist())


def test_scores_are_kept_as_float32():
    rk = _rank(bias_model(), QUERIES, KnownTails([FILTER], 2), top_k=2)
    assert rk.score.dtype == np.float32 and rk.topk_scores.dtype == np.float32
    assert rk.optimistic.dtype == rk.pessimistic.dtype == np.float64 and rk.topk_ids.dtype == np.int64
    np.testing.assert_array_equal(rk.score, np.array(BIAS, np.float32)[QUERIES[:, 2]])


class Huge:
    """2**24 + 3 entities; query head 0 and head 1 score every entity 1.0, except for head 0:
    entities 0 and 1 score 0.0 and entity 2**24 + 1 scores 2.0."""

    n = 2**24 + 3

    def __init__(self):
        self.config = type("Config", (), {"num_entities": self.n})()

    def eval(self):
        return self

    def hidden(self, heads, relations):
        return heads.float()[:, None]

    def score_hidden(self, x, start=0, end=None):
        end = self.n if end is None else end
        ids = torch.arange(start, end, device=x.device)
        s = torch.ones(len(x), end - start, device=x.device)
        head0 = x[:, 0] == 0
        s[head0[:, None] & (ids < 2)[None, :]] = 0.0
        s[head0[:, None] & (ids == 2**24 + 1)[None, :]] = 2.0
        return s


def test_counts_and_ids_stay_exact_past_two_to_the_24_entities():
    n = Huge.n
    rk = rank_queries(Huge(), np.array([0, 1]), np.array([0, 0]), np.array([0, 5]), None, entity_chunk=2**20, top_k=1)
    # head 0, answer 0 (score 0): n - 2 entities above, entity 1 tied; head 1: every other entity tied
    np.testing.assert_array_equal(rk.optimistic, [1 + (n - 2), 1])
    np.testing.assert_array_equal(rk.pessimistic, [1 + (n - 2) + 1, 1 + (n - 1)])
    assert rk.topk_ids[0, 0] == 2**24 + 1 and rk.topk_scores[0, 0] == 2.0


def test_computes_on_device_whatever_the_default_device():
    """A caller who set another default device (torch.set_default_device) still gets its ranks computed
    on ``device``; the meta device stands in for that other device on a machine without a GPU."""
    known = KnownTails([FILTER], 2)
    ref = loop_ranks(QUERIES, FILTER)
    free = loop_ranks(QUERIES, np.zeros((0, 3), np.int64))
    model = Recording(bias_model())
    with torch.device("meta"):
        rk = _rank(model, QUERIES, known, entity_chunk=3, batch_size=4, top_k=2, device="cpu")
        unfiltered = _rank(model, QUERIES, None, entity_chunk=3, batch_size=4, top_k=2, device="cpu")
    assert model.devices == {torch.device("cpu")}  # the query ids reached the model on `device`
    np.testing.assert_array_equal(np.stack([rk.optimistic, rk.pessimistic], 1), ref)
    np.testing.assert_array_equal(np.stack([unfiltered.optimistic, unfiltered.pessimistic], 1), free)
    best = []  # the two highest biases among the entities each query keeps, by a loop
    for h, r, t in QUERIES.tolist():
        drop = {int(x[2]) for x in FILTER if x[0] == h and x[1] == r and x[2] != t}
        best.append(sorted((BIAS[e] for e in range(N) if e not in drop), reverse=True)[:2])
    np.testing.assert_array_equal(rk.topk_scores, best)
    np.testing.assert_array_equal(unfiltered.topk_scores, np.tile([3.0, 2.0], (len(QUERIES), 1)))
    assert all(BIAS[e] == s for e, s in zip(rk.topk_ids.ravel(), rk.topk_scores.ravel()))
