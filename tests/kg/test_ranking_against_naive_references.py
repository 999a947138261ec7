"""kg/explain/ranking.py against references written separately here: the ranking metrics of
hand-worked lists and of a naive loop, the ranked order against Python's ``sorted`` on tuples,
the expected reciprocal rank of a random order against every placement enumerated with exact
fractions, degrees against a loop over the triples, head–tail walk lengths against networkx BFS
(and by hand for absent, repeated and self-looped ends), the path and margin shells and the
method keys by hand."""

from fractions import Fraction
from itertools import combinations, permutations

import networkx as nx
import numpy as np
import pytest

from tracegraph.kg.explain.ranking import (
    HITS_K,
    WalkLengths,
    degrees,
    expected_metrics,
    margin_shell,
    method_keys,
    path_lengths,
    path_shell,
    random_rr_expectation,
    ranked_order,
    ranking_metrics,
)

METRIC_NAMES = ["rr", "ap", "hits@1", "hits@3", "hits@10", "recall@10"]


def naive_metrics(relevant):
    """RR, AP, Hits@k and Recall@10 by a plain loop over the list."""
    ranks = [i + 1 for i, x in enumerate(relevant) if x]
    if not ranks:
        return dict.fromkeys(METRIC_NAMES, 0.0)
    ap = sum((j + 1) / r for j, r in enumerate(ranks)) / len(ranks)
    out = {"rr": 1 / ranks[0], "ap": ap}
    for k in (1, 3, 10):
        out[f"hits@{k}"] = 1.0 if ranks[0] <= k else 0.0
    out["recall@10"] = sum(r <= 10 for r in ranks) / len(ranks)
    return out


# --------------------------------------------------------------------------- ranking metrics


def test_metrics_of_a_list_without_relevant_items_are_all_zero():
    for lst in ([], [False], [False] * 12):
        m = ranking_metrics(lst)
        assert list(m) == METRIC_NAMES
        assert all(v == 0.0 and isinstance(v, float) for v in m.values())
    assert HITS_K == (1, 3, 10)


def test_metrics_of_relevant_items_at_ranks_two_and_four_by_hand():
    m = ranking_metrics([False, True, False, True])
    # RR = 1/2; AP = (1/2 + 2/4) / 2 = 1/2; first relevant at 2: Hits@1 = 0, Hits@3 = Hits@10 = 1
    assert m == {"rr": 0.5, "ap": 0.5, "hits@1": 0.0, "hits@3": 1.0, "hits@10": 1.0, "recall@10": 1.0}


def test_metrics_of_relevant_items_at_ranks_three_and_twelve_by_hand():
    lst = [False] * 12
    lst[2] = lst[11] = True
    m = ranking_metrics(lst)
    # AP = (1/3 + 2/12) / 2 = 1/4; only rank 3 is within 10: Recall@10 = 1/2
    assert m["rr"] == pytest.approx(1 / 3) and m["ap"] == pytest.approx(0.25)
    assert (m["hits@1"], m["hits@3"], m["hits@10"], m["recall@10"]) == (0.0, 1.0, 1.0, 0.5)


@pytest.mark.parametrize(
    "first, hits",
    [(1, (1.0, 1.0, 1.0)), (3, (0.0, 1.0, 1.0)), (4, (0.0, 0.0, 1.0)), (10, (0.0, 0.0, 1.0)), (11, (0.0, 0.0, 0.0))],
)
def test_hits_count_the_first_relevant_rank_up_to_and_including_k(first, hits):
    lst = [False] * 15
    lst[first - 1] = True
    m = ranking_metrics(lst)
    assert (m["hits@1"], m["hits@3"], m["hits@10"]) == hits
    assert m["rr"] == pytest.approx(1 / first)
    assert m["recall@10"] == (1.0 if first <= 10 else 0.0)


def test_metrics_equal_a_naive_loop_on_random_lists():
    rng = np.random.default_rng(0)
    for _ in range(200):
        lst = (rng.random(int(rng.integers(0, 25))) < rng.random()).tolist()
        got, ref = ranking_metrics(lst), naive_metrics(lst)
        assert list(got) == METRIC_NAMES
        for name in METRIC_NAMES:
            assert got[name] == pytest.approx(ref[name], abs=1e-15), (lst, name)


# --------------------------------------------------------------------------- ranked order


def test_ranked_order_equals_sorted_tuples_with_several_keys_and_ties():
    rng = np.random.default_rng(1)
    for _ in range(100):
        n = int(rng.integers(1, 12))
        nkeys = int(rng.integers(1, 4))
        keys = [rng.integers(-2, 3, n).astype(np.float64) for _ in range(nkeys)]
        tie = rng.permutation(n)
        ref = sorted(range(n), key=lambda i: (*(-k[i] for k in keys), tie[i]))
        assert ranked_order(keys, tie).tolist() == ref


def test_ranked_order_reads_unsigned_and_boolean_keys_by_value():
    # descending by value: negating unsigned or boolean arrays in their own type would not be
    tie = np.arange(4)
    assert ranked_order([np.array([0, 200, 7, 255], np.uint8)], tie).tolist() == [3, 1, 2, 0]
    assert ranked_order([np.array([False, True, False, True])], tie).tolist() == [1, 3, 0, 2]
    assert ranked_order([[1, 3, 2, 3]], np.array([3, 2, 1, 0])).tolist() == [3, 1, 2, 0]


def test_ranked_order_puts_the_first_key_above_the_second():
    first = np.array([1.0, 2.0, 2.0])
    second = np.array([9.0, 0.0, 1.0])
    assert ranked_order([first, second], np.arange(3)).tolist() == [2, 1, 0]
    assert ranked_order([second, first], np.arange(3)).tolist() == [0, 2, 1]


def test_expected_metrics_are_the_mean_over_every_tie_break_by_hand():
    # three items tied, item 2 relevant: over all 6 orders it is first, second or third twice each
    keys = [np.zeros(3)]
    relevant = np.array([False, False, True])
    perms = np.array(list(permutations(range(3))))
    m = expected_metrics(keys, relevant, perms)
    assert list(m) == METRIC_NAMES
    assert m["rr"] == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)
    assert m["hits@1"] == pytest.approx(1 / 3) and m["hits@3"] == 1.0
    # a key that separates them: every tie-break gives the same order
    m = expected_metrics([np.array([0.0, 1.0, 2.0])], relevant, perms)
    assert m["rr"] == 1.0 and m["ap"] == 1.0


def test_expected_metrics_of_one_tie_break_are_that_order_s_metrics():
    relevant = np.array([True, False, True])
    m = expected_metrics([np.zeros(3)], relevant, np.array([[2, 1, 0]]))  # the order 2, 1, 0
    assert m == naive_metrics([True, False, True])


def test_expected_metrics_equal_a_loop_over_permutations_with_a_naive_sort():
    rng = np.random.default_rng(2)
    for _ in range(20):
        n = int(rng.integers(2, 8))
        keys = [rng.integers(0, 2, n).astype(float), rng.integers(0, 2, n).astype(float)]
        relevant = rng.random(n) < 0.4
        perms = np.stack([rng.permutation(n) for _ in range(5)])
        runs = []
        for p in perms:
            order = sorted(range(n), key=lambda i: (-keys[0][i], -keys[1][i], p[i]))
            runs.append(naive_metrics(relevant[order].tolist()))
        got = expected_metrics(keys, relevant, perms)
        for name in METRIC_NAMES:
            assert got[name] == pytest.approx(np.mean([r[name] for r in runs]), abs=1e-12)


# --------------------------------------------------------------------------- random expectation


def exact_random_rr(n, n_relevant):
    """E[1 / first relevant rank] over every placement of the relevant items, as a fraction."""
    total = Fraction(0)
    placements = list(combinations(range(1, n + 1), n_relevant))
    for places in placements:
        total += Fraction(1, min(places))
    return total / len(placements)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_random_rr_expectation_equals_every_placement_enumerated(n):
    for n_relevant in range(1, n + 1):
        assert random_rr_expectation(n, n_relevant) == pytest.approx(float(exact_random_rr(n, n_relevant)), rel=1e-12)


def test_random_rr_expectation_of_one_relevant_item_is_the_harmonic_mean_by_hand():
    # one relevant among 4: (1 + 1/2 + 1/3 + 1/4) / 4 = 25/48
    assert random_rr_expectation(4) == pytest.approx(25 / 48, rel=1e-12)
    assert random_rr_expectation(1) == 1.0
    # two relevant among 3: first at 1 in 2 of 3 placements, at 2 in the other: (2 + 1/2) / 3
    assert random_rr_expectation(3, 2) == pytest.approx(5 / 6, rel=1e-12)


# --------------------------------------------------------------------------- degrees


def test_degrees_equal_a_loop_over_the_triples():
    rng = np.random.default_rng(3)
    for _ in range(30):
        n = int(rng.integers(1, 9))
        ids = np.stack([rng.integers(0, n, 20), rng.integers(0, 3, 20), rng.integers(0, n, 20)], 1)
        extra = int(rng.integers(0, 3))  # entities with no triple at the end
        ref = np.zeros(n + extra, np.int64)
        for h, _, t in ids:
            ref[h] += 1
            if t != h:
                ref[t] += 1
        assert degrees(ids, n + extra).tolist() == ref.tolist()


# --------------------------------------------------------------------------- walk lengths


def networkx_walks(edges, head, tail):
    """min(d(h,u) + 1 + d(v,t), d(h,v) + 1 + d(u,t)) per edge by networkx BFS; inf without a walk."""
    g = nx.Graph()
    g.add_edges_from((int(u), int(v)) for u, v in edges)  # self-loops are nodes too; BFS ignores them
    dh = nx.single_source_shortest_path_length(g, head) if head in g else {}
    dt = nx.single_source_shortest_path_length(g, tail) if tail in g else {}
    d = lambda dist, x: dist.get(int(x), np.inf)
    return np.array([min(d(dh, u) + 1 + d(dt, v), d(dh, v) + 1 + d(dt, u)) for u, v in edges], float)


def test_walk_lengths_equal_networkx_on_random_graphs():
    rng = np.random.default_rng(4)
    for _ in range(80):
        n = int(rng.integers(2, 15))
        m = int(rng.integers(1, 25))
        edges = np.stack([rng.integers(0, n, m), rng.integers(0, n, m)], 1)
        walks = WalkLengths(edges)
        for _ in range(4):
            head, tail = int(rng.integers(-1, n + 2)), int(rng.integers(-1, n + 2))  # -1, n, n+1: absent
            got = walks(head, tail)
            np.testing.assert_array_equal(got, networkx_walks(edges, head, tail))
            np.testing.assert_array_equal(path_lengths(edges, head, tail), got)


def test_walk_shells_count_a_direct_edge_as_one_and_a_detour_through_it_by_hand():
    # path 0-1-2-3 and a branch 1-4; the test pair is (0, 3)
    edges = np.array([[0, 1], [1, 2], [2, 3], [1, 4], [3, 0]])
    got = path_lengths(edges, 0, 3)
    # (a cycle 0-1-2-3-0). From 0: d(1) = d(3) = 1, d(2) = d(4) = 2; from 3: d(0) = d(2) = 1, d(1) = 2, d(4) = 3.
    # 0-1: min(0 + 1 + 2, 1 + 1 + 1) = 3; 1-2: min(1 + 1 + 1, 2 + 1 + 2) = 3; 2-3: min(2 + 1 + 0, 1 + 1 + 1) = 3;
    # 1-4: min(1 + 1 + 3, 2 + 1 + 2) = 5; 3-0, the test pair's own edge: 0 + 1 + 0 = 1
    assert got.tolist() == [3.0, 3.0, 3.0, 5.0, 1.0]


def test_walk_lengths_with_an_end_missing_from_the_graph_are_infinite():
    edges = np.array([[2, 4], [4, 6]])
    for head, tail in [(0, 6), (6, 0), (3, 4), (4, 3), (7, 2), (2, 7), (0, 9)]:
        assert np.isinf(path_lengths(edges, head, tail)).all(), (head, tail)
    # both present, in separate components
    assert path_lengths(np.array([[0, 1], [2, 3]]), 0, 3).tolist() == [np.inf, np.inf]


def test_walk_lengths_when_head_and_tail_are_one_entity():
    # a walk from 1 back to 1 through each edge: out and back
    edges = np.array([[1, 2], [2, 3], [1, 1]])
    assert path_lengths(edges, 1, 1).tolist() == [2.0, 4.0, 1.0]
    # a self-loop alone is a walk of one step from its entity to itself, and joins nothing else
    assert path_lengths(np.array([[5, 5]]), 5, 5).tolist() == [1.0]
    assert path_lengths(np.array([[5, 5], [6, 7]]), 5, 7).tolist() == [np.inf, np.inf]


def test_walk_lengths_read_flat_int32_edge_lists_and_repeated_edges():
    flat = np.array([0, 1, 1, 2, 0, 1], np.int32)  # (0,1), (1,2), (0,1) again
    assert path_lengths(flat, 0, 2).tolist() == [2.0, 2.0, 2.0]
    assert path_lengths(np.array([[10**9, 3]]), 3, 10**9).tolist() == [1.0]  # large ids, reversed


# --------------------------------------------------------------------------- shells and keys


def test_path_shell_puts_no_walk_after_every_finite_length():
    assert path_shell(np.array([1.0, np.inf, 3.0, 0.0])).tolist() == [1.0, 1e9, 3.0, 0.0]


def test_margin_shell_joins_direct_edges_with_two_edge_walks():
    got = margin_shell([1, 2, 3, np.inf, 4])
    assert got.dtype == np.float64
    assert got.tolist() == [2.0, 2.0, 3.0, 1e9, 4.0]
    assert margin_shell(np.array([1, 5], np.int64)).tolist() == [2.0, 5.0]


def test_margin_shell_of_half_precision_walks_still_puts_no_walk_at_1e9():
    # 1e9 is beyond float16's range: the shells are float64 whatever the walk lengths' type
    got = margin_shell(np.array([1.0, np.inf, 3.0], np.float16))
    assert got.dtype == np.float64 and got.tolist() == [2.0, 1e9, 3.0]


def test_method_keys_by_hand_for_each_baseline():
    # candidates (h, r, t) around the test pair (0, 2): 0-2 direct, 0-1 and 1-2 a two-step walk
    # through 1, 3-4 unconnected
    cand = np.array([[0, 0, 2], [0, 1, 1], [1, 0, 2], [3, 2, 4]], np.int64)
    degree = np.array([5, 1, 2, 0, 7])
    tracin = np.array([1, -2, 3, 0], np.int32)
    keys = method_keys(tracin, cand, 0, 2, degree)
    assert sorted(keys) == ["degree", "path", "random", "tracin"]
    assert [len(v) for v in (keys["tracin"], keys["random"], keys["degree"], keys["path"])] == [1, 1, 1, 2]
    assert keys["tracin"][0].dtype == np.float64 and keys["tracin"][0].tolist() == [1.0, -2.0, 3.0, 0.0]
    assert keys["random"][0].tolist() == [0.0] * 4
    assert keys["degree"][0].dtype == np.float64 and keys["degree"][0].tolist() == [7.0, 6.0, 3.0, 7.0]
    assert keys["path"][0].tolist() == [-1.0, -2.0, -2.0, -1e9]
    assert keys["path"][1].tolist() == [7.0, 6.0, 3.0, 7.0]
    # ranked: the direct edge, then the walk through 1 by degree, the unconnected last
    assert ranked_order(keys["path"], np.arange(4)).tolist() == [0, 1, 2, 3]
    assert ranked_order(keys["degree"], np.arange(4)).tolist() == [0, 3, 1, 2]
    assert ranked_order(keys["random"], np.array([2, 0, 3, 1])).tolist() == [1, 3, 0, 2]
