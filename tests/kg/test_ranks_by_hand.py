"""Filtered ranks, realistic ties, MRR/Hits@k and top-k against numbers a person can check.

The model's entity table is zeroed, so every score is exactly the entity's bias whatever the
query: the scores below are the whole story, ties are exact in any arithmetic, and the
reference is a plain Python loop over them.
"""

import numpy as np
import pytest
import torch

from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.model.evaluate import evaluate, metrics, rank_queries
from tracegraph.kg.data.triples import KnownTails

#        entity:  0    1    2    3    4     5    6    7    8    9
BIAS = [0.5, 2.0, 2.0, 1.0, 2.0, -1.0, 3.0, 1.0, 0.0, 2.0]
N = len(BIAS)
TINY = dict(embedding_dim=12, embedding_height=3, embedding_width=4, output_channels=4, reciprocal=False)
# known true triples (the filter); queries are (0, 0, ?) and (1, 1, ?)
FILTER = np.array([[0, 0, 6], [0, 0, 1], [0, 0, 2], [1, 1, 3], [1, 1, 9]])
QUERIES = np.array(
    [
        [0, 0, 2],  # 6 and 1 filtered; tied with 4, 9           -> optimistic 1, pessimistic 3
        [0, 0, 9],  # 6, 1, 2 filtered; tied with 4              -> 1, 2
        [1, 1, 2],  # 6 above; tied with 1, 4 (9 filtered)       -> 2, 4
        [1, 1, 3],  # 6, 1, 2, 4 above (9 filtered); tie with 7  -> 5, 6
        [1, 1, 5],  # all but 3 and 9 (filtered) above          -> 8, 8
        [0, 0, 6],  # the best                                   -> 1, 1
    ]
)


def bias_model() -> ConvE:
    torch.manual_seed(0)
    m = ConvE(ConvEConfig(num_entities=N, num_relations=2, **TINY)).eval()
    with torch.no_grad():
        m.entity.weight.zero_()
        m.entity_bias.copy_(torch.tensor(BIAS))
    return m


def loop_ranks(queries, filter_triples):
    """Optimistic and pessimistic filtered rank of each query's answer, by counting."""
    out = []
    for h, r, t in queries.tolist():
        others = {int(x[2]) for x in filter_triples if x[0] == h and x[1] == r and x[2] != t}
        above = sum(1 for e in range(N) if e not in others and BIAS[e] > BIAS[t])
        tied = sum(1 for e in range(N) if e not in others and e != t and BIAS[e] == BIAS[t])
        out.append((1 + above, 1 + above + tied))
    return np.array(out, dtype=float)


@pytest.mark.parametrize("entity_chunk", [3, 100])
def test_ranks_with_deliberate_ties_match_the_counting_loop(entity_chunk):
    known = KnownTails([FILTER], 2)
    rk = rank_queries(
        bias_model(), QUERIES[:, 0], QUERIES[:, 1], QUERIES[:, 2], known, entity_chunk=entity_chunk, batch_size=4
    )
    ref = loop_ranks(QUERIES, FILTER)
    np.testing.assert_array_equal(ref, [[1, 3], [1, 2], [2, 4], [5, 6], [8, 8], [1, 1]])  # the comments above
    np.testing.assert_array_equal(rk.optimistic, ref[:, 0])
    np.testing.assert_array_equal(rk.pessimistic, ref[:, 1])
    # realistic = the mean of the two: the expected rank under a random order of the tied entities
    np.testing.assert_array_equal(rk.realistic, [2.0, 1.5, 3.0, 5.5, 8.0, 1.0])
    np.testing.assert_array_equal(rk.score, np.array(BIAS, np.float32)[QUERIES[:, 2]])


def test_metrics_count_hits_at_exactly_k():
    ranks = [1, 3, 5, 10, 2.5, 11]
    m = metrics(ranks)
    assert m["count"] == 6
    assert m["hits@1"] == pytest.approx(1 / 6)
    assert m["hits@3"] == pytest.approx(3 / 6)  # 1, 3, 2.5: rank exactly 3 counts
    assert m["hits@5"] == pytest.approx(4 / 6)
    assert m["hits@10"] == pytest.approx(5 / 6)
    assert m["mrr"] == pytest.approx((1 + 1 / 3 + 1 / 5 + 1 / 10 + 1 / 2.5 + 1 / 11) / 6)
    assert m["mr"] == pytest.approx(32.5 / 6)


def test_evaluate_reports_realistic_metrics_of_the_tied_ranks():
    known = KnownTails([FILTER], 2)
    res, (tail,) = evaluate(bias_model(), QUERIES, known, entity_chunk=4)
    realistic = [2.0, 1.5, 3.0, 5.5, 8.0, 1.0]
    both = res["both"]
    assert both["mrr"] == pytest.approx(sum(1 / r for r in realistic) / 6)
    assert both["hits@1"] == pytest.approx(1 / 6)
    assert both["hits@3"] == pytest.approx(4 / 6)
    assert both["hits@5"] == pytest.approx(4 / 6)
    assert both["hits@10"] == pytest.approx(6 / 6)
    assert res["tail"]["mrr_optimistic"] == pytest.approx((1 + 1 + 1 / 2 + 1 / 5 + 1 / 8 + 1) / 6)
    assert res["tail"]["mrr_pessimistic"] == pytest.approx((1 / 3 + 1 / 2 + 1 / 4 + 1 / 6 + 1 / 8 + 1) / 6)


@pytest.mark.parametrize("entity_chunk", [1, 3, 4, 100])
def test_top_k_ids_and_scores_across_entity_chunks(entity_chunk):
    """Distinct scores, so the top-k list is unique; chunks smaller than N must keep their offset."""
    m = bias_model()
    distinct = [0.5, 2.1, 2.0, 1.0, 2.2, -1.0, 3.0, 1.1, 0.0, 2.3]
    with torch.no_grad():
        m.entity_bias.copy_(torch.tensor(distinct))
    q = np.array([[0, 0, 2], [1, 1, 5]])
    known = KnownTails([FILTER], 2)
    rk = rank_queries(m, q[:, 0], q[:, 1], q[:, 2], known, entity_chunk=entity_chunk, top_k=4)
    # (0, 0, ?): 6 and 1 are other known tails (filtered); (1, 1, ?): 3 and 9 are
    np.testing.assert_array_equal(rk.topk_ids, [[9, 4, 2, 7], [6, 4, 1, 2]])
    np.testing.assert_allclose(rk.topk_scores, [[2.3, 2.2, 2.0, 1.1], [3.0, 2.2, 2.1, 2.0]], rtol=1e-6)


def test_metrics_of_no_ranks_and_of_a_single_rank():
    assert metrics([]) == {"count": 0}
    one = metrics(np.array([4], dtype=np.int64))
    assert one["count"] == 1 and one["mrr"] == 0.25 and one["mr"] == 4.0
    assert (one["hits@1"], one["hits@3"], one["hits@5"], one["hits@10"]) == (0.0, 0.0, 1.0, 1.0)


def test_evaluate_lists_no_top_k_unless_asked():
    _, (tail,) = evaluate(bias_model(), QUERIES, KnownTails([FILTER], 2))
    assert tail.topk_ids.shape == (len(QUERIES), 0) and tail.topk_scores.shape == (len(QUERIES), 0)


def test_reciprocal_evaluate_ranks_heads_through_the_inverse_relation():
    """Head side: the query (t, r⁻¹, ?) with answer h, filtered by the other known heads of (?, r, t)."""
    torch.manual_seed(0)
    m = ConvE(ConvEConfig(num_entities=N, num_relations=2, **dict(TINY, reciprocal=True))).eval()
    with torch.no_grad():
        m.entity.weight.zero_()
        m.entity_bias.copy_(torch.tensor(BIAS))
    filt = np.array([[0, 0, 4], [1, 0, 4], [9, 0, 4], [3, 1, 7], [3, 1, 6]])
    test = [[0, 0, 4], [3, 1, 7]]  # a list: evaluate takes any [M, 3] array-like
    known = KnownTails([np.concatenate([filt, filt[:, [2, 1, 0]] + [0, 2, 0]])], 4)
    res, sides = evaluate(m, test, known, batch_size=1, entity_chunk=3, top_k=1)
    assert [s.side for s in sides] == ["tail", "head"]
    # tail side: (0, 0, ?) answer 4 (other known tails: none); (3, 1, ?) answer 7 with 6 filtered
    np.testing.assert_array_equal(sides[0].optimistic, [2, 5])
    np.testing.assert_array_equal(sides[0].pessimistic, [5, 6])
    assert sides[0].topk_ids[0].tolist() == [6]
    # head side: (4, 0⁻¹, ?) answer 0 with heads 1 and 9 filtered; (7, 1⁻¹, ?) answer 3
    heads = loop_ranks(np.array([[4, 0, 0], [7, 1, 3]]), np.array([[4, 0, 1], [4, 0, 9]]))
    np.testing.assert_array_equal(sides[1].optimistic, heads[:, 0])
    np.testing.assert_array_equal(sides[1].pessimistic, heads[:, 1])
    np.testing.assert_array_equal(sides[1].topk_ids, [[6], [6]])
    assert res["tail"]["mrr"] == pytest.approx((1 / 3.5 + 1 / 5.5) / 2)
    real = np.concatenate([sides[0].realistic, sides[1].realistic])
    assert res["head"]["count"] == 2 and res["both"]["mrr"] == pytest.approx(np.mean(1 / real))
