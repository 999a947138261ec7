"""Arc-length resampling and the node budget on trees worked by hand.

Held: no positive spacing, or a tree of two nodes or fewer, is returned as it is (the same object,
its meta untouched); a straight chain of unit steps keeps the root, a point each time the spacing
has passed, and the leaf, with ``meta["node_spacing"]`` a float; a three-node chain is resampled;
the budget: met as given, or not capped at 0 or less; otherwise the spacing starts at the larger of
the one given and the total length over the budget and widens by 1.25 until the tree fits (its
positions by hand); a star whose leaves alone exceed the budget is cut to the root and its first
leaves once the spacing passes the total length, ``meta`` saying so with the last spacing tried;
a spacing below 1 is used as given; a budget of one node is the root alone, cut once the spacing
is past (not at) the total length.
"""

import numpy as np
import pytest

from tracegraph.trees.data import Tree
from tracegraph.trees.resample import fit_to_budget, resample_by_arc_length


def _chain(xs):
    pos = np.zeros((len(xs), 3))
    pos[:, 0] = xs
    return Tree(pos, np.maximum(np.arange(len(xs)) - 1, 0))


def _star(leaves):
    pos = np.zeros((leaves + 1, 3))
    for k in range(leaves):
        a = 2 * np.pi * k / leaves
        pos[k + 1, :2] = np.cos(a), np.sin(a)
    return Tree(pos, np.zeros(leaves + 1, dtype=np.int64))


def test_no_spacing_or_two_nodes_returns_the_tree_itself():
    t = _chain(np.arange(11.0))
    assert resample_by_arc_length(t, 0) is t and resample_by_arc_length(t, -2.0) is t
    pair = _chain([0.0, 5.0])
    assert resample_by_arc_length(pair, 1.0) is pair and pair.meta == {}
    single = _chain([0.0])
    assert resample_by_arc_length(single, 1.0) is single
    assert t.meta == {}


def test_a_straight_chain_keeps_a_point_every_spacing():
    t = _chain(np.arange(11.0))  # 0, 1, ..., 10
    r = resample_by_arc_length(t, 3)
    assert r.pos[:, 0].tolist() == [0.0, 3.0, 6.0, 9.0, 10.0]
    assert r.parent.tolist() == [0, 0, 1, 2, 3]
    assert r.meta == {"node_spacing": 3.0} and type(r.meta["node_spacing"]) is float
    assert t.meta == {} and t.num_nodes == 11


def test_a_three_node_chain_is_resampled():
    t = _chain([0.0, 1.0, 2.5])
    assert resample_by_arc_length(t, 1.0).pos[:, 0].tolist() == [0.0, 1.0, 2.5]
    r = resample_by_arc_length(t, 2.0)  # the middle point is 1 along: dropped; the leaf stays
    assert r.pos[:, 0].tolist() == [0.0, 2.5] and r.meta["node_spacing"] == 2.0


def test_budget_met_as_given_or_not_capped():
    t = _chain(np.arange(11.0))
    f = fit_to_budget(t, 5, spacing=3.0)
    assert f.pos[:, 0].tolist() == [0.0, 3.0, 6.0, 9.0, 10.0] and f.meta == {"node_spacing": 3.0}
    for cap in (0, -1):
        assert fit_to_budget(t, cap, spacing=3.0).pos[:, 0].tolist() == [0.0, 3.0, 6.0, 9.0, 10.0]
        assert fit_to_budget(t, cap) is t
    assert fit_to_budget(t, 11) is t  # exactly at the budget
    assert fit_to_budget(t, 10).num_nodes <= 10


def test_budget_widens_from_total_over_budget_by_a_quarter_each_time():
    t = _chain(np.arange(101.0))  # total length 100
    f = fit_to_budget(t, 10)  # 100 / 10 = 10 keeps 11 points; 12.5 keeps 9
    assert f.meta == {"node_spacing": 12.5}
    assert f.pos[:, 0].tolist() == [0.0, 13.0, 26.0, 39.0, 52.0, 65.0, 78.0, 91.0, 100.0]


@pytest.mark.parametrize(
    "spacing, want",
    [
        (11.0, 25.0),  # 11 keeps 11 points; 100 / 5 = 20 keeps 6; 25 keeps 5
        (22.0, 27.5),  # 22 keeps 6, and is wider than 20: 22 again, then 27.5 keeps 5
    ],
)
def test_budget_widens_from_the_wider_of_spacing_and_total_over_budget(spacing, want):
    t = _chain(np.arange(101.0))
    f = fit_to_budget(t, 5, spacing=spacing)
    assert f.num_nodes == 5 and f.meta == {"node_spacing": pytest.approx(want)} and "truncated" not in f.meta


def test_leaves_beyond_the_budget_are_cut_breadth_first():
    t = _star(12)  # 13 structural nodes, total length 12
    f = fit_to_budget(t, 5)
    # spacing 12 / 5 = 2.4, widened by 1.25 until past the total: 2.4 * 1.25**8 ≈ 14.3
    assert f.meta == {"node_spacing": pytest.approx(2.4 * 1.25**8), "truncated": True}
    assert f.num_nodes == 5 and f.parent.tolist() == [0, 0, 0, 0, 0]
    assert np.allclose(f.pos, t.pos[:5])
    assert t.meta == {}


def test_a_spacing_below_one_is_used_too():
    t = _chain(np.arange(41) * 0.25)  # 41 points, length 10
    f = fit_to_budget(t, 100, spacing=0.5)
    assert f.num_nodes == 21 and f.meta == {"node_spacing": 0.5}
    assert np.allclose(f.pos[:, 0], np.arange(21) * 0.5)


def test_a_budget_of_one_node_keeps_the_root():
    t = _chain(np.arange(11.0))  # total 10: spacing 10 / 1 = 10 still keeps root and leaf; 12.5 is past the total
    f = fit_to_budget(t, 1)
    assert f.num_nodes == 1 and f.pos.tolist() == [[0.0, 0.0, 0.0]]
    assert f.meta == {"node_spacing": 12.5, "truncated": True}
