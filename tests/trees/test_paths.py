import numpy as np
import torch
from hypothesis import given, settings, strategies as st

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
