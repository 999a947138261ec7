"""trees/cache.py by hand: the chains of a set of trees enumerated at once equal each tree's own
chains (four nested loops over its edges), the cache key follows the topology and nothing else, and
the cache file is read back instead of recomputed, refused when it does not fit.

Reference: ``i → j → k → p`` walks with ``k ≠ i`` and ``p ≠ j`` enumerated by loops over each tree's
parent array, written here.
"""

import numpy as np
import pytest

import tracegraph.trees.cache as cache
from tracegraph.errors import DataError
from tracegraph.trees.data import Tree


def tree(parent, seed=0, dim=2):
    parent = np.asarray(parent, np.int64)
    return Tree(pos=np.random.default_rng(seed).normal(size=(len(parent), dim)), parent=parent)


def chains_by_hand(parent) -> set:
    n = len(parent)
    adj = [set() for _ in range(n)]
    for c in range(1, n):
        adj[c].add(int(parent[c]))
        adj[int(parent[c])].add(c)
    return {(i, j, k, p) for i in range(n) for j in adj[i] for k in adj[j] if k != i for p in adj[k] if p != j}


TREES = [
    [0, 0, 1, 2, 3],  # a chain of 5
    [0, 0, 0, 0],  # a star
    [0],  # one node: no chain
    [0, 0, 1, 1, 2, 2, 0],  # a binary tree
    [0, 0],  # one edge: no chain of four
]


def test_chains_of_many_trees_at_once_equal_each_trees_own():
    trees = [tree(p, seed=i) for i, p in enumerate(TREES)]
    got = cache.all_tree_paths(trees)
    assert len(got) == len(trees) and cache.all_tree_paths([]) == []
    for p, g in zip(TREES, got):
        assert g.shape[0] == 4 and g.dtype == np.int64
        as_set = {tuple(c) for c in g.T.tolist()}
        assert len(as_set) == g.shape[1] and as_set == chains_by_hand(p)  # each once, indices local to the tree
    assert [g.shape[1] for g in got] == [len(chains_by_hand(p)) for p in TREES]
    assert got[0].shape[1] == 4  # 0-1-2-3, 1-2-3-4 and their reversals


def test_the_key_is_the_topology_not_the_positions():
    a = [tree(p, seed=0) for p in TREES]
    b = [tree(p, seed=1, dim=3) for p in TREES]  # other positions, other dimension
    assert cache.topology_key(a) == cache.topology_key(b)
    assert len(cache.topology_key(a)) == 24 and int(cache.topology_key(a), 16) >= 0
    other_parent = [tree([0, 0, 0, 2, 3])] + a[1:]  # same sizes, one parent moved
    assert cache.topology_key(other_parent) != cache.topology_key(a)
    assert cache.topology_key(a[::-1]) != cache.topology_key(a)  # the order of the trees counts
    assert cache.topology_key(a[:-1]) != cache.topology_key(a)
    # the node count is hashed as well: a tree of one node and an empty parent list differ
    assert cache.topology_key([tree([0]), tree([0, 0])]) != cache.topology_key([tree([0, 0]), tree([0])])


def test_the_cache_file_is_written_once_then_read_back(tmp_path, monkeypatch):
    trees = [tree(p, seed=i) for i, p in enumerate(TREES)]
    first, hit = cache.cached_paths(trees, tmp_path)
    assert not hit
    (f,) = tmp_path.glob("paths-*.npz")
    assert f.name == f"paths-{cache.topology_key(trees)}.npz"
    monkeypatch.setattr(cache, "all_tree_paths", lambda t: pytest.fail("recomputed despite the cache"))
    again, hit = cache.cached_paths(trees, tmp_path)
    assert hit and all(np.array_equal(a, b) for a, b in zip(first, again))
    with np.load(f, allow_pickle=False) as z:  # plain arrays: nothing to unpickle
        assert sorted(z.files) == ["offsets", "paths"] and z["offsets"].tolist()[0] == 0


def test_no_cache_folder_means_no_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    per, hit = cache.cached_paths([tree(TREES[0])], None)
    assert not hit and {tuple(c) for c in per[0].T.tolist()} == chains_by_hand(TREES[0])
    assert list(tmp_path.iterdir()) == []


def test_a_cache_that_does_not_fit_or_cannot_be_read_is_refused(tmp_path):
    trees = [tree(p) for p in TREES]
    f = tmp_path / f"paths-{cache.topology_key(trees)}.npz"
    np.savez(f, paths=np.zeros((4, 0), np.int64), offsets=np.zeros(3, np.int64))  # 2 trees' offsets for 5
    with pytest.raises(DataError) as e:
        cache.cached_paths(trees, tmp_path)
    assert str(e.value) == f"{f}: path cache does not match the trees; delete it to rebuild"
    f.write_bytes(b"not a zip")
    with pytest.raises(DataError) as e:
        cache.cached_paths(trees, tmp_path)
    assert str(e.value).startswith(f"{f}: unreadable path cache (") and str(e.value).endswith("); delete it to rebuild")


def test_a_dataset_carries_each_trees_own_chains_from_the_cache(tmp_path):
    trees = [tree(p, seed=i) for i, p in enumerate(TREES)]
    trees[3].label = 2
    data = cache.build_dataset(trees, tmp_path)
    again = cache.build_dataset(trees, tmp_path)  # from the file this time
    assert len(list(tmp_path.glob("paths-*.npz"))) == 1
    for t, p, d, e in zip(trees, TREES, data, again):
        assert d.num_nodes == len(p) and d.y.tolist() == [t.label]
        assert {tuple(c) for c in d.paths.T.tolist()} == chains_by_hand(p)
        assert np.array_equal(d.paths.numpy(), e.paths.numpy())


def test_chains_keep_each_trees_own_order_and_the_key_ignores_the_parent_dtype():
    import torch

    from tracegraph.trees.paths import enumerate_paths

    deep = [0] + [(i - 1) // 2 for i in range(1, 63)]  # a full binary tree: hundreds of chains per tree
    trees = [tree(deep, seed=0), tree(TREES[3], seed=1), tree(deep, seed=2)]
    for t, got in zip(trees, cache.all_tree_paths(trees)):
        child = np.arange(1, t.num_nodes)
        edges = torch.from_numpy(
            np.stack([np.concatenate([child, t.parent[1:]]), np.concatenate([t.parent[1:], child])])
        )
        assert np.array_equal(got, enumerate_paths(edges, t.num_nodes).numpy())  # grouped by first node, as alone
    narrow = [Tree(pos=t.pos, parent=t.parent.astype(np.int32)) for t in trees]
    assert cache.topology_key(narrow) == cache.topology_key(trees)


def test_no_trees_cache_an_empty_set_and_a_pickled_cache_is_refused(tmp_path):
    assert cache.cached_paths([], tmp_path) == ([], False)
    (f,) = tmp_path.glob("paths-*.npz")
    with np.load(f, allow_pickle=False) as z:
        assert z["paths"].shape == (4, 0) and z["paths"].dtype == np.int64 and z["offsets"].tolist() == [0]
    trees = [tree(TREES[0])]
    f = tmp_path / f"paths-{cache.topology_key(trees)}.npz"
    np.savez(f, paths=np.array([None, 1], dtype=object), offsets=np.array([0, 0]))  # would need unpickling
    with pytest.raises(DataError, match="unreadable path cache"):
        cache.cached_paths(trees, tmp_path)


def test_a_dataset_built_from_the_cache_enumerates_nothing(tmp_path, monkeypatch):
    import tracegraph.trees.paths as paths

    trees = [tree(p, seed=i) for i, p in enumerate(TREES)]
    monkeypatch.setattr(paths, "enumerate_paths", lambda *a: pytest.fail("chains enumerated per tree"))
    for _ in range(2):  # cold (one pass over all trees at once), then warm (the file)
        data = cache.build_dataset(trees, tmp_path)
        assert [{tuple(c) for c in d.paths.T.tolist()} for d in data] == [chains_by_hand(p) for p in TREES]
