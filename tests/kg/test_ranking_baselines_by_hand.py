"""The structural baselines every explanation method is compared with (kg/explain/ranking.py):
degree counts (self-loops once), the path key (no walk ranks last), and the ranked order with
its tie-break — worked by hand."""

import numpy as np

from tracegraph.kg.explain.ranking import (
    degrees,
    expected_metrics,
    method_keys,
    path_shell,
    ranked_order,
    ranking_metrics,
)


def test_degrees_count_touching_triples_with_self_loops_once():
    ids = np.array([[0, 0, 1], [1, 0, 1], [2, 1, 2], [0, 1, 2], [1, 0, 0]])
    # entity 0: rows 0, 3, 4 -> 3; entity 1: rows 0, 1 (self-loop, once), 4 -> 3; entity 2: 2 (once), 3 -> 2; 3: none
    assert degrees(ids, 4).tolist() == [3, 3, 2, 0]


def test_method_keys_by_hand():
    # candidates around the test pair (0, 3): 0-1, 1-3 make a walk of length 2; 4-5 is not connected
    cand = np.array([[0, 0, 1], [1, 0, 3], [4, 1, 5]])
    degree = np.array([1, 2, 0, 1, 1, 1])
    keys = method_keys(np.array([0.5, -1.0, 2.0]), cand, 0, 3, degree)
    assert keys["degree"][0].tolist() == [3.0, 3.0, 2.0]  # degree of head + degree of tail
    assert keys["path"][0].tolist() == [-2.0, -2.0, -1e9]  # shorter walks first, none last
    assert keys["path"][1].tolist() == [3.0, 3.0, 2.0]  # ties by degree
    assert ranked_order(keys["path"], np.array([1, 0, 2])).tolist() == [1, 0, 2]  # then the tie-break
    assert ranked_order(keys["tracin"], np.arange(3)).tolist() == [2, 0, 1]
    assert path_shell(np.array([1.0, np.inf, 3.0])).tolist() == [1.0, 1e9, 3.0]


def test_expected_metrics_average_over_tie_breaks():
    keys = [np.array([1.0, 1.0, 0.0])]
    relevant = np.array([False, True, False])
    perms = np.array([[0, 1, 2], [1, 0, 2]])  # item 1 first in one order, second in the other
    m = expected_metrics(keys, relevant, perms)
    assert m["rr"] == (1.0 + 0.5) / 2 and m["hits@1"] == 0.5
    assert ranking_metrics([False, True])["rr"] == 0.5
