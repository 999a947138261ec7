"""trees/data.py's tree operations by hand: depth, children, edge lengths, the nodes' one-hot roles,
thinning by point count and by arc length, breadth-first subtrees and how their roots are drawn.

References: small trees drawn out in comments, with every expected index written by hand.
"""

import numpy as np
import pytest

from tracegraph.trees.data import Tree, node_features, sample_subtrees, simplify, subtree, thin_chains

#        0
#       / \
#      1   2
#     / \   \
#    3   4   5
#    |
#    6
BRANCHY = np.array([0, 0, 0, 1, 1, 2, 3])


def tree(parent, pos=None):
    parent = np.asarray(parent, np.int64)
    pos = np.arange(len(parent) * 3, dtype=np.float64).reshape(-1, 3) if pos is None else np.asarray(pos, float)
    return Tree(pos=pos, parent=parent, label=1, name="t", meta={"k": 1})


def test_depth_children_and_lengths():
    pos = [[0, 0, 0], [3, 4, 0], [0, 0, 1], [3, 4, 2], [3, 4, -2], [0, 0, 3], [3, 4, 5]]
    t = tree(BRANCHY, pos)
    assert t.depth().tolist() == [0, 1, 1, 2, 2, 2, 3]
    assert t.children_count().tolist() == [2, 2, 1, 1, 0, 0, 0]
    assert t.edge_lengths().tolist() == [5.0, 1.0, 2.0, 2.0, 2.0, 3.0]
    assert t.total_length() == 15.0


def test_each_node_has_its_topological_role():
    x = node_features(tree(BRANCHY))
    assert x.dtype == np.float32 and x.shape == (7, 4)
    # columns: root, leaf, branch point, chain point
    assert x.tolist() == [
        [1, 0, 1, 0],
        [0, 0, 1, 0],
        [0, 0, 0, 1],
        [0, 0, 0, 1],
        [0, 1, 0, 0],
        [0, 1, 0, 0],
        [0, 1, 0, 0],
    ]
    assert node_features(tree([0])).tolist() == [[1, 1, 0, 0]]  # a lone root is also a leaf
    assert node_features(tree([0, 0])).tolist() == [[1, 0, 0, 1], [0, 1, 0, 0]]


def test_thinning_keeps_root_branch_points_leaves_and_every_kth_chain_point():
    chain = tree([0, 0, 1, 2, 3, 4, 5])  # 0-1-2-3-4-5-6
    t = simplify(chain, keep_every=2)
    assert t.parent.tolist() == [0, 0, 1, 2] and t.pos.tolist() == chain.pos[[0, 2, 4, 6]].tolist()
    assert (t.label, t.name, t.meta) == (1, "t", {"k": 1}) and t.meta is not chain.meta
    #   0 - 1 - 2 < 3 - 4          branch point 2; keep_every 3 keeps no chain point here
    #               5 - 6 - 7
    fork = tree([0, 0, 1, 2, 3, 2, 5, 6])
    t = simplify(fork, keep_every=3)
    assert t.parent.tolist() == [0, 0, 1, 1] and t.pos.tolist() == fork.pos[[0, 2, 4, 7]].tolist()
    assert simplify(chain, keep_every=1).parent.tolist() == chain.parent.tolist()  # k = 1 keeps everything


def test_thinning_by_arc_length_counts_weight_since_the_last_kept_point():
    chain = tree([0, 0, 1, 2, 3])
    t = thin_chains(chain, np.array([1.0, 0.5, 2.0, 0.2]), 1.5)
    # node 1 at weight 1 (dropped), node 2 at 1.5 (kept: reaching the threshold counts), node 3 at 2, node 4 a leaf
    assert t.pos.tolist() == chain.pos[[0, 2, 3, 4]].tolist() and t.parent.tolist() == [0, 0, 1, 2]
    t = thin_chains(chain, np.array([1.0, 0.49, 2.0, 0.2]), 1.5)
    assert t.pos.tolist() == chain.pos[[0, 3, 4]].tolist() and t.parent.tolist() == [0, 0, 1]


def test_a_subtree_is_the_first_nodes_breadth_first_reindexed():
    t = tree(BRANCHY)
    s = subtree(t, 0, 4)
    assert s.pos.tolist() == t.pos[[0, 1, 2, 3]].tolist() and s.parent.tolist() == [0, 0, 0, 1]
    s = subtree(t, 1, 10)  # 1, then its children 3 and 4, then 3's child 6
    assert s.pos.tolist() == t.pos[[1, 3, 4, 6]].tolist() and s.parent.tolist() == [0, 0, 0, 1]
    assert subtree(t, 5, 3).pos.tolist() == [t.pos[5].tolist()] and subtree(t, 2, 1).parent.tolist() == [0]
    s = subtree(t, 0, 6)
    assert s.pos.tolist() == t.pos[[0, 1, 2, 3, 4, 5]].tolist() and s.parent.tolist() == [0, 0, 0, 1, 1, 2]


def test_subtree_roots_are_drawn_among_nodes_with_enough_below_them():
    t = tree(BRANCHY)
    # nodes below each node, itself included: 0:7, 1:4, 2:2, 3:2, 4:1, 5:1, 6:1
    root_of = {tuple(p): i for i, p in enumerate(t.pos.tolist())}
    for seed in range(20):
        subs = sample_subtrees(t, 2, 3, 3, np.random.default_rng(seed))
        roots = [root_of[tuple(s.pos[0].tolist())] for s in subs]
        assert sorted(roots) == [0, 1]  # the only two with ≥ 3 nodes, each once (enough to draw without replacement)
        assert all(s.num_nodes == 3 for s in subs)
    subs = sample_subtrees(t, 5, 10, 4, np.random.default_rng(0))  # more draws than candidates: with replacement
    assert len(subs) == 5 and {root_of[tuple(s.pos[0].tolist())] for s in subs} <= {0, 1}
    (whole,) = sample_subtrees(t, 3, 10, 8, np.random.default_rng(0))  # no node has 8 below it
    assert whole is t


@pytest.mark.parametrize("n", [2, 3])
def test_roots_drawn_without_replacement_are_uniform(n):
    t = tree(BRANCHY)  # min_nodes 2: candidates 0, 1, 2, 3
    counts = np.zeros(7)
    for seed in range(2000):
        for s in sample_subtrees(t, n, 1, 2, np.random.default_rng(seed)):
            counts[int(s.pos[0, 0]) // 3] += 1
    assert counts[4:].sum() == 0
    expected = 2000 * n / 4
    assert np.all(np.abs(counts[:4] - expected) < 5 * np.sqrt(expected))
