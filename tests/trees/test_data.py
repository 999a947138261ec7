import networkx as nx
import numpy as np
import pytest
import torch
from torch_geometric.loader import DataLoader

from tracegraph.errors import DataError
from tracegraph.trees.cache import build_dataset, cached_paths
from tracegraph.trees.data import read_swc, simplify, to_data, tree_from_graph
from tracegraph.trees.synthetic import synthetic_trees

HEADER = "# id type x y z r parent\n"


def _swc(tmp_path, body, name="t.swc"):
    p = tmp_path / name
    p.write_text(HEADER + body)
    return p


def test_real_neurons_read_as_topological_trees(neurons_dir):
    for f in sorted(neurons_dir.glob("*.swc")):
        rows = [l.split() for l in f.read_text().splitlines() if l.strip() and not l.startswith("#")]
        t = read_swc(f)
        assert t.num_nodes + t.meta["dropped_nodes"] == len(rows)
        assert np.all(t.parent[1:] < np.arange(1, t.num_nodes)) and t.parent[0] == 0
        root_rows = [r for r in rows if int(r[6]) == -1]
        assert any(np.allclose(t.pos[0], [float(v) for v in r[2:5]]) for r in root_rows)
        # every edge of the tree is an edge of the file (parent pointers preserved)
        by_xyz = {tuple(float(v) for v in r[2:5]): r for r in rows}
        child = by_xyz[tuple(t.pos[5])]
        assert tuple(float(v) for v in next(r for r in rows if r[0] == child[6])[2:5]) == tuple(t.pos[t.parent[5]])


@pytest.mark.parametrize(
    "body,line,words",
    [
        ("1 1 0 0 0 1 -1\n2 1 1 0 0 1\n", 3, "7 fields"),
        ("1 1 0 0 0 1 -1\n2 1 x 0 0 1 1\n", 3, "non-numeric"),
        ("1 1 0 0 0 1 -1\n2 1 1 0 0 1 7\n", 3, "not in the file"),
        ("1 1 0 0 0 1 -1\n1 1 1 0 0 1 1\n", 3, "duplicate"),
        ("1 1 0 0 0 1 2\n2 1 1 0 0 1 1\n", 2, "cycle"),
        ("1 1 0 0 0 1 -1\n2 1 1 0 0 1 3\n3 1 1 1 0 1 2\n", 3, "cycle"),
    ],
)
def test_malformed_swc_names_file_and_line(tmp_path, body, line, words):
    p = _swc(tmp_path, body)
    with pytest.raises(DataError) as e:
        read_swc(p)
    assert e.value.path == str(p) and e.value.line == line and words in str(e.value)


def test_several_roots_keep_largest_or_refuse(tmp_path):
    p = _swc(tmp_path, "1 1 0 0 0 1 -1\n2 1 1 0 0 1 1\n3 1 5 0 0 1 -1\n4 1 6 0 0 1 3\n5 1 7 0 0 1 4\n")
    t = read_swc(p)
    assert t.num_nodes == 3 and t.meta["dropped_nodes"] == 2 and np.allclose(t.pos[0], [5, 0, 0])
    with pytest.raises(DataError, match="roots"):
        read_swc(p, multiple_roots="error")


def _random_graph(rng, n):
    g = nx.connected_watts_strogatz_graph(n, 4, 0.3, seed=int(rng.integers(1 << 30)))
    return np.array(g.edges()), rng.normal(size=(n, 3)), g


def test_tree_from_graph_bfs_and_mst_against_networkx():
    rng = np.random.default_rng(0)
    edges, pos, g = _random_graph(rng, 60)
    for u, v in g.edges():
        g[u][v]["weight"] = float(np.linalg.norm(pos[u] - pos[v]))
    bfs = tree_from_graph(edges, pos, root=7, method="bfs")
    assert bfs.num_nodes == 60 and np.allclose(bfs.pos[0], pos[7])
    hops = nx.single_source_shortest_path_length(g, 7)
    # node identity via positions; BFS tree depth == graph hop distance from the root
    ids = [int(np.argmin(np.linalg.norm(pos - p, axis=1))) for p in bfs.pos]
    assert [hops[i] for i in ids] == bfs.depth().tolist()
    assert all(g.has_edge(ids[c], ids[bfs.parent[c]]) for c in range(1, 60))
    mst = tree_from_graph(edges.T, pos, root=3, method="mst")
    ref = nx.minimum_spanning_tree(g).size(weight="weight")
    assert mst.total_length() == pytest.approx(ref, rel=1e-9)


def test_disconnected_graph_is_an_error():
    with pytest.raises(DataError, match="not connected"):
        tree_from_graph([[0, 1], [2, 3]], np.zeros((4, 3)))


def test_simplify_keeps_branch_points_and_leaves():
    t = synthetic_trees(1, seed=3, max_nodes=300)[0]
    s = simplify(t, keep_every=4)
    nch, sch = t.children_count(), s.children_count()
    assert (sch >= 2).sum() == (nch >= 2).sum() and (sch == 0).sum() == (nch == 0).sum()
    assert s.num_nodes < t.num_nodes / 2
    # straightening segments can only shorten the tree, and the points kept are original points
    assert s.total_length() <= t.total_length() + 1e-9
    assert {tuple(p) for p in s.pos} <= {tuple(p) for p in t.pos}


def test_synthetic_classes_differ_in_branching_angle():
    means = []
    for c in (0, 1):
        angles = []
        for t in synthetic_trees(10, seed=c, max_nodes=200)[c::2]:
            nch = t.children_count()
            for b in np.flatnonzero(nch == 2):
                kids = np.flatnonzero(t.parent == b)
                kids = kids[kids != b]
                u, v = t.pos[kids[0]] - t.pos[b], t.pos[kids[1]] - t.pos[b]
                angles.append(np.degrees(np.arccos(np.dot(u, v) / np.linalg.norm(u) / np.linalg.norm(v))))
        means.append(np.mean(angles))
    assert means[1] > means[0] + 5


def test_batching_shifts_parent_and_paths(tmp_path):
    trees = synthetic_trees(2, seed=1, max_nodes=40)
    ds = build_dataset(trees)
    b = next(iter(DataLoader(ds, batch_size=4)))
    off = np.cumsum([0] + [t.num_nodes for t in trees])[:-1]
    assert torch.equal(b.parent, torch.cat([d.parent + o for d, o in zip(ds, off)]))
    assert torch.equal(b.paths, torch.cat([d.paths + o for d, o in zip(ds, off)], 1))
    assert torch.equal(to_data(trees[0]).paths, ds[0].paths)


def test_path_cache_roundtrip_without_pickle(tmp_path):
    trees = synthetic_trees(3, seed=2, max_nodes=50)
    first, hit1 = cached_paths(trees, tmp_path)
    second, hit2 = cached_paths(trees, tmp_path)
    assert (hit1, hit2) == (False, True)
    assert all(np.array_equal(a, b) for a, b in zip(first, second))
    (f,) = tmp_path.glob("paths-*.npz")
    with np.load(f, allow_pickle=False) as z:
        assert z["offsets"][-1] == sum(p.shape[1] for p in first)
    other, hit3 = cached_paths(trees[:2], tmp_path)  # different content, different key
    assert not hit3 and len(list(tmp_path.glob("paths-*.npz"))) == 2
