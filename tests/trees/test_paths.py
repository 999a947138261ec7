import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from tracegraph.errors import DataError
from tracegraph.trees.paths import enumerate_paths, enumerate_paths_naive


def _as_set(p):
    rows = list(map(tuple, p.t().tolist()))
    assert len(rows) == len(set(rows)), "vectorised enumeration produced duplicates"
    return set(rows)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**31 - 1))
def test_matches_naive_loop_on_random_trees(n, seed):
    rng = np.random.default_rng(seed)
    parent = [int(rng.integers(0, i)) for i in range(1, n)]
    ei = torch.tensor([list(range(1, n)), parent], dtype=torch.long).reshape(2, -1)
    assert _as_set(enumerate_paths(ei, n)) == enumerate_paths_naive(ei, n)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 25), st.lists(st.tuples(st.integers(0, 24), st.integers(0, 24)), max_size=60))
def test_matches_naive_loop_on_random_graphs(n, pairs):
    # arbitrary graphs: duplicate edges, both directions, self-loops, cycles
    pairs = [(a % n, b % n) for a, b in pairs]
    ei = torch.tensor(pairs, dtype=torch.long).reshape(-1, 2).t()
    assert _as_set(enumerate_paths(ei, n)) == enumerate_paths_naive(ei, n)


def test_count_on_trees_is_linear_and_matches_degree_formula():
    # On a tree a chain is fixed by its middle directed edge j→k and the choices i∈N(j)\{k},
    # p∈N(k)\{j}: count = Σ_(j,k) (deg j − 1)(deg k − 1). Bounded degree d: count ≤ N·d(d−1)².
    rng = np.random.default_rng(0)
    ratios = []
    for n in (100, 400, 1600, 6400):
        parent = [0]
        kids = np.zeros(n, int)
        for i in range(1, n):  # random binary tree: degree ≤ 3
            p = int(rng.integers(0, i))
            while kids[p] >= 2:
                p = int(rng.integers(0, i))
            kids[p] += 1
            parent.append(p)
        child = np.arange(1, n)
        ei = torch.tensor(np.stack([child, np.array(parent[1:])]))
        count = enumerate_paths(ei, n).shape[1]
        deg = np.bincount(np.concatenate([child, parent[1:]]), minlength=n)
        a, b = np.concatenate([child, parent[1:]]), np.concatenate([parent[1:], child])
        assert count == int(((deg[a] - 1) * (deg[b] - 1)).sum())
        assert count <= n * 3 * 2 * 2
        ratios.append(count / n)
    assert max(ratios) / min(ratios) < 1.5


def test_no_edges_give_no_chains_as_an_empty_long_tensor():
    for empty in (torch.empty(2, 0, dtype=torch.long), [], np.zeros((2, 0), np.int32)):
        p = enumerate_paths(empty, 5)
        assert p.shape == (4, 0) and p.dtype == torch.long


def test_chains_are_long_whatever_integer_type_the_edges_come_in():
    # a path 0-1-2-3 has exactly two chains: 0→1→2→3 and 3→2→1→0
    for ei in ([[0, 1, 2], [1, 2, 3]], np.array([[0, 1, 2], [1, 2, 3]], np.int32)):
        p = enumerate_paths(ei, 4)
        assert p.dtype == torch.long and _as_set(p) == {(0, 1, 2, 3), (3, 2, 1, 0)}


def test_bad_edge_lists_are_one_error_naming_the_problem():
    for bad, shape in ((torch.zeros(3, 4, dtype=torch.long), "(3, 4)"), (torch.zeros(4, dtype=torch.long), "(4,)")):
        with pytest.raises(DataError) as e:
            enumerate_paths(bad, 5)
        assert str(e.value) == f"edge_index must have shape (2, E), got {shape}"
    for node in (-1, 5):  # one past either end of 0..4, the other nodes in range
        with pytest.raises(DataError) as e:
            enumerate_paths(torch.tensor([[0, 1], [1, node]]), 5)
        assert str(e.value) == "edge_index refers to nodes outside 0..4"
