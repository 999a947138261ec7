"""Tests written against the mutants that `tests/kg/test_neighborhood.py` let survive
(docs/testing.md, "Mutation testing"): option validation, the statistics, input checks, the index's
dtype rule, its arrays, and the cache's key and fallbacks. Each compares with a hand-computed
value, a naive loop or networkx — never with the code under test."""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re

import networkx as nx
import numpy as np
import pytest

from tracegraph.errors import TracegraphError
from tracegraph.kg.explain.neighborhood import (
    INDEX_SUFFIX,
    FilterOptions,
    FilterResult,
    GraphIndex,
    _index_dtype,
    cache_paths,
)

# --------------------------------------------------------------------------- options


def test_options_reject_negative_hops_and_degree_with_the_flag_name():
    assert FilterOptions(n_hops=0).n_hops == 0  # 0 hops is allowed: {h, t}
    assert FilterOptions(min_degree=0).min_degree == 0
    with pytest.raises(TracegraphError, match=r"^--n-hops must be >= 0, got -1$"):
        FilterOptions(n_hops=-1)
    with pytest.raises(TracegraphError, match=r"^--min-degree must be >= 0, got -3$"):
        FilterOptions(min_degree=-3)


def test_path_length_is_checked_only_when_paths_are_used():
    assert FilterOptions(max_path_length=0).max_path_length == 0  # no path filtering: not read
    assert FilterOptions(path_filtering=True, max_path_length=1).uses_paths
    for kw in (dict(path_filtering=True), dict(strict_path=True), dict(path_filtering=True, strict_path=True)):
        with pytest.raises(TracegraphError, match=r"^--max-total-path-length must be >= 1, got 0$"):
            FilterOptions(max_path_length=0, **kw)
    # --strict-path-filtering alone implies path filtering
    assert [
        FilterOptions(path_filtering=p, strict_path=s).uses_paths
        for p, s in ((False, False), (True, False), (False, True), (True, True))
    ] == [False, True, True, True]


# --------------------------------------------------------------------------- statistics


def test_stats_are_the_documented_numbers():
    res = FilterResult(
        head=4,
        tail=5,
        triple_rows=np.array([1, 2, 7]),
        hop_nodes=6,
        nodes_kept=4,
        edges_kept=3,
        total_edges=12,
        seconds=0.25,
    )
    assert res.stats() == {
        "hop_nodes": 6,
        "nodes_kept": 4,
        "edges_kept": 3,
        "total_edges": 12,
        "seconds": 0.25,
        "kept_fraction": 0.25,
        "reduction_ratio": 0.75,
    }
    empty = FilterResult(0, 0, np.array([], dtype=np.int64), 1, 0, 0, 0, 0.0)
    assert (empty.kept_fraction, empty.reduction_ratio) == (0.0, 1.0)  # no training triples: no division


def test_filter_statistics_on_a_hand_made_graph():
    # triangle 0-1-2, tail 2-3-4, an isolated self-loop 5-5, a parallel 1-0
    ids = np.array([[0, 0, 1], [1, 0, 2], [2, 0, 0], [2, 0, 3], [3, 0, 4], [5, 0, 5], [1, 1, 0]])
    index = GraphIndex.build(ids, 6)
    assert index.num_triples == 7
    res = index.filter(0, 2, FilterOptions(n_hops=1, min_degree=0))
    # d(0, .) <= 1: {0, 1, 2}; d(2, .) <= 1: {0, 1, 2, 3}; S = {0, 1, 2}
    assert (res.head, res.tail, res.hop_nodes) == (0, 2, 3)
    assert res.triple_rows.tolist() == [0, 1, 2, 6]
    assert (res.nodes_kept, res.edges_kept, res.total_edges) == (3, 4, 7)
    assert res.kept_fraction == 4 / 7 and 0 <= res.seconds < 5
    # only an edge that touches neither head nor tail: nodes_kept counts both of its ends
    res = index.filter(1, 4, FilterOptions(n_hops=2, min_degree=0, preserve_test_edges=False))
    # d(1, .) <= 2: {0, 1, 2, 3}; d(4, .) <= 2: {2, 3, 4}; S = {1, 2, 3, 4} (plus h, t)
    assert res.hop_nodes == 4 and res.triple_rows.tolist() == [1, 3, 4]
    assert res.nodes_kept == 4


def test_head_or_tail_outside_the_graph_is_refused_by_name():
    index = GraphIndex.build(np.array([[0, 0, 1], [1, 0, 2]]), 3)
    for h, t, word, x in ((3, 0, "head", 3), (0, 3, "tail", 3), (-1, 0, "head", -1), (0, -1, "tail", -1)):
        with pytest.raises(
            TracegraphError, match=rf"^{word} id {x} is not an entity of the training graph \(0\.\.2\)$"
        ):
            index.filter(h, t)
    assert index.filter(2, 0).head == 2 and index.filter(0, 2).tail == 2  # the last id is an entity


# --------------------------------------------------------------------------- input checks


@pytest.mark.parametrize("shape", [(6,), (2, 4), (3, 2), (1, 2, 3)])
def test_triples_must_be_m_by_3(shape):
    with pytest.raises(TracegraphError, match=r"^triples must be an \[M, 3\] array of ids, got shape "):
        GraphIndex.build(np.zeros(shape, dtype=np.int64), 5)


@pytest.mark.parametrize("bad", [[[-1, 0, 1]], [[0, 0, -1]], [[5, 0, 1]], [[0, 0, 5]], [[0, 0, 1], [2, 0, 7]]])
def test_entity_ids_must_lie_in_range(bad):
    with pytest.raises(TracegraphError, match=r"^entity ids must lie in 0\.\.4$"):
        GraphIndex.build(np.array(bad), 5)


def test_relation_ids_and_the_last_entity_are_accepted():
    # only head and tail columns are entity ids; relation ids are not checked against num_entities
    index = GraphIndex.build(np.array([[0, -7, 4], [4, 99, 1]]), 5)
    assert index.heads.tolist() == [0, 4] and index.tails.tolist() == [4, 1]
    empty = GraphIndex.build(np.zeros((0, 3), dtype=np.int64), 3)
    assert empty.num_triples == 0 and empty.filter(0, 2).edges_kept == 0


def test_index_dtype_holds_every_id_and_id_plus_one():
    # int32 while n (the largest id + 1, which CSR code computes) fits in it, int64 beyond
    i32 = np.iinfo(np.int32).max
    for n in (1, 100, 2**20, i32 - 1):
        assert _index_dtype(n) is np.int32, n
    for n in (i32 + 1, i32 + 2, 2**32, 2**32 + 5, 2**40):
        assert _index_dtype(n) is np.int64, n
        assert n <= np.iinfo(_index_dtype(n)).max
    small = GraphIndex.build(np.array([[0, 0, 1], [1, 0, 2]]), 3)
    assert small.adj_indices.dtype == np.int32 and small.row_by_head.dtype == np.int32
    assert small.heads.dtype == np.int32 and small.tails.dtype == np.int32


# --------------------------------------------------------------------------- the index arrays


def _random_ids(rng, n, m):
    ids = np.stack([rng.integers(0, n, m), rng.integers(0, 3, m), rng.integers(0, n, m)], axis=1)
    return np.concatenate([ids, ids[: m // 4, ::-1], [[1, 0, 1], [n - 1, 2, n - 1]]])  # reversed copies, self-loops


@pytest.mark.parametrize("seed", range(3))
def test_index_arrays_match_networkx_and_a_loop(seed):
    rng = np.random.default_rng(seed)
    n = 12
    ids = _random_ids(rng, n, 30)
    index = GraphIndex.build(ids, n)
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from((a, b) for a, _, b in ids.tolist() if a != b)
    for x in range(n):
        row = index.adj_indices[index.adj_indptr[x] : index.adj_indptr[x + 1]].tolist()
        assert row == sorted(g.neighbors(x)), x  # sorted, distinct, no self-loop
        assert index.degree[x] == g.degree(x)
        rows = index.row_by_head[index.head_ptr[x] : index.head_ptr[x + 1]].tolist()
        assert rows == [r for r, (a, _, _) in enumerate(ids.tolist()) if a == x]  # in file order
    assert index.adj_indptr[0] == 0 and index.adj_indptr[-1] == 2 * g.number_of_edges()
    assert index.head_ptr[-1] == len(ids) and index.num_entities == n


# --------------------------------------------------------------------------- cache


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture
def logged():
    lg = logging.getLogger("tracegraph")
    handler, level = _Records(), lg.level
    lg.addHandler(handler)
    lg.setLevel(logging.DEBUG)
    yield handler.lines
    lg.removeHandler(handler)
    lg.setLevel(level)


def _same(a: GraphIndex, b: GraphIndex) -> bool:
    return all(np.array_equal(getattr(a, k), getattr(b, k)) for k in (*GraphIndex.ARRAYS, "heads", "tails"))


def test_cache_key_covers_file_bytes_ids_and_entity_count(tmp_path, monkeypatch, logged):
    monkeypatch.setenv("TRACEGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    train = tmp_path / "train.txt"
    train.write_text("a\tr\tb\nb\tr\tc\n")
    ids = np.array([[0, 0, 1], [1, 0, 2]])
    first = GraphIndex.load_or_build(train, ids, 3)
    built = [re.fullmatch(r"built graph index in (\d+\.\d\d) s", line) for line in logged]
    assert first.loaded_from is None and any(m and float(m[1]) < 60 for m in built), logged
    (cached,) = (tmp_path / "cache" / "index").iterdir()
    assert cached.name.endswith(INDEX_SUFFIX) and f"graph index cached at {cached}" in logged
    assert GraphIndex.load_or_build(train, ids, 3).loaded_from == cached
    # same bytes elsewhere: content-keyed, so reused
    other = tmp_path / "elsewhere.txt"
    other.write_bytes(train.read_bytes())
    assert GraphIndex.load_or_build(other, ids, 3).loaded_from == cached
    # other bytes, the same ids (only a relation renamed): not reused
    train.write_text("a\ts\tb\nb\tr\tc\n")
    assert GraphIndex.load_or_build(train, ids, 3).loaded_from is None
    # the same bytes read with other ids: heads differ, or tails differ, or the entity count
    train.write_text("a\tr\tb\nb\tr\tc\n")
    for ids2, n2 in ((np.array([[2, 0, 1], [0, 0, 2]]), 3), (np.array([[0, 0, 2], [1, 0, 0]]), 3), (ids, 4)):
        got = GraphIndex.load_or_build(train, ids2, n2)
        assert got.loaded_from is None
        assert _same(got, GraphIndex.build(ids2, n2))
    assert len(list((tmp_path / "cache" / "index").iterdir())) == 5


def test_large_training_file_is_hashed_whole(tmp_path, monkeypatch):
    # differs only after the first MiB: a key that read one chunk only would reuse the cache
    monkeypatch.setenv("TRACEGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    train = tmp_path / "train.txt"
    body = b"a\tr\tb\n" * ((1 << 20) // 6 + 10)
    train.write_bytes(body + b"a\tr\tb\n")
    ids = np.array([[0, 0, 1]])
    assert GraphIndex.load_or_build(train, ids, 2).loaded_from is None
    train.write_bytes(body + b"a\tq\tb\n")
    assert GraphIndex.load_or_build(train, ids, 2).loaded_from is None
    train.write_bytes(body + b"a\tr\tb\n")
    assert GraphIndex.load_or_build(train, ids, 2).loaded_from is not None


def test_cache_path_is_in_the_user_cache_named_by_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEGRAPH_CACHE_DIR", str(tmp_path / "c"))
    (p,) = cache_paths("some key")
    assert p == tmp_path / "c" / "index" / (hashlib.sha256(b"some key").hexdigest()[:32] + ".tgindex.npz")


def test_damaged_or_stale_cache_is_rebuilt_and_replaced(tmp_path, monkeypatch, logged):
    monkeypatch.setenv("TRACEGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    train = tmp_path / "train.txt"
    train.write_text("a\tr\tb\nb\tr\tc\nc\tr\ta\n")
    ids = np.array([[0, 0, 1], [1, 0, 2], [2, 0, 0]])
    GraphIndex.load_or_build(train, ids, 3)
    (cached,) = (tmp_path / "cache" / "index").iterdir()
    with np.load(cached, allow_pickle=False) as z:
        real_key = str(z["key"])
    fresh = GraphIndex.build(ids, 3)
    cached.write_bytes(b"not an npz file")
    logged.clear()
    idx = GraphIndex.load_or_build(train, ids, 3)
    assert idx.loaded_from is None and _same(idx, fresh)
    assert any(
        line.startswith(f"graph index cache {cached} unreadable (") and line.endswith("); rebuilding")
        for line in logged
    ), logged
    again = GraphIndex.load_or_build(train, ids, 3)  # the damaged file was replaced
    assert again.loaded_from == cached and _same(again, fresh)
    # a cache file of another key (e.g. a hash collision of the file name): stale, rebuilt
    with open(cached, "wb") as f:
        np.savez(f, key=np.array("v1:other"), **{k: getattr(fresh, k) for k in GraphIndex.ARRAYS})
    logged.clear()
    idx = GraphIndex.load_or_build(train, ids, 3)
    assert idx.loaded_from is None and _same(idx, fresh)
    assert f"graph index cache {cached} is stale (training file or ids changed); rebuilding" in logged
    assert GraphIndex.load_or_build(train, ids, 3).loaded_from == cached
    # a cache holding a pickled (object) array is never unpickled: unreadable, rebuilt
    with open(cached, "wb") as f:
        arrays = {k: getattr(fresh, k) for k in GraphIndex.ARRAYS}
        arrays["adj_indptr"] = np.array(list(fresh.adj_indptr) + [None], dtype=object)[:-1]
        np.savez(f, key=np.array(real_key), **arrays)
    idx = GraphIndex.load_or_build(train, ids, 3)
    assert idx.loaded_from is None and _same(idx, fresh)
    # a cache file missing an array: unreadable, rebuilt
    with open(cached, "wb") as f:
        np.savez(f, key=np.array(real_key))
    assert GraphIndex.load_or_build(train, ids, 3).loaded_from is None


def test_cache_loads_arrays_for_the_callers_triples(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    train = tmp_path / "train.txt"
    train.write_text("a\tr\tb\nb\tr\tc\nc\tr\td\n")
    ids = np.array([[0, 0, 1], [1, 0, 2], [2, 0, 3]])
    GraphIndex.load_or_build(train, ids, 4)
    idx = GraphIndex.load_or_build(train, ids, 4)
    assert idx.loaded_from is not None and _same(idx, GraphIndex.build(ids, 4))
    assert idx.num_entities == 4 and idx.degree.tolist() == [1, 2, 2, 1]
    assert idx.filter(0, 3, FilterOptions(n_hops=3, min_degree=0)).triple_rows.tolist() == [0, 1, 2]


def test_no_cache_writes_nothing_and_missing_file_is_an_error(tmp_path, monkeypatch, logged):
    monkeypatch.setenv("TRACEGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    train = tmp_path / "train.txt"
    train.write_text("a\tr\tb\n")
    ids = np.array([[0, 0, 1]])
    idx = GraphIndex.load_or_build(train, ids, 2, use_cache=False)
    assert idx.loaded_from is None and _same(idx, GraphIndex.build(ids, 2))
    assert not (tmp_path / "cache").exists() and logged == []
    with pytest.raises(TracegraphError, match="training file not found"):
        GraphIndex.load_or_build(tmp_path / "missing.txt", ids, 2)
    with pytest.raises(TracegraphError, match="training file not found"):
        GraphIndex.load_or_build(tmp_path / "missing.txt", ids, 2, use_cache=False)


def test_unwritable_cache_is_reported_and_the_index_still_built(tmp_path, monkeypatch, logged):
    (tmp_path / "blocker").write_text("")  # a file where the cache dir should be
    monkeypatch.setenv("TRACEGRAPH_CACHE_DIR", str(tmp_path / "blocker"))
    train = tmp_path / "train.txt"
    train.write_text("a\tr\tb\n")
    ids = np.array([[0, 0, 1]])
    idx = GraphIndex.load_or_build(train, ids, 2)
    assert idx.loaded_from is None and _same(idx, GraphIndex.build(ids, 2))
    (path,) = cache_paths("unused")
    # the reason is the OS's words for it (mkdir under a file: "Not a directory"), not the repr
    assert any(
        line.startswith(f"cannot write graph index cache {tmp_path / 'blocker' / 'index'}")
        and line.endswith(f" ({os.strerror(errno.ENOTDIR)})")
        for line in logged
    ), logged
    assert "graph index not cached (no writable location); it is rebuilt on every run" in logged
    assert not any(line.startswith("graph index cached at") for line in logged)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker", "train.txt"]


# --------------------------------------------------------------------------- path rule by hand


def _nx_on_path(ids, h, t, L):
    """networkx reference: the node pairs on some simple h–t path with at most L edges."""
    g = nx.Graph()
    g.add_nodes_from([h, t])
    g.add_edges_from((a, b) for a, _, b in ids.tolist() if a != b)
    on = set()
    if h != t:
        for p in nx.all_simple_paths(g, h, t, cutoff=L):
            on.update(frozenset(e) for e in zip(p, p[1:]))
    return [frozenset((a, b)) in on for a, _, b in ids.tolist()]


def _path_edges_of(ids, h, t, L):
    from tracegraph.kg.explain.paths import path_edges

    got = path_edges(ids[:, 0], ids[:, 2], h, t, L)
    assert got.dtype == bool and got.shape == (len(ids),)  # a mask over the given triples
    return got.tolist()


@pytest.mark.parametrize("L", [1, 2, 3, 4, 5, 6])
def test_path_rule_when_head_or_tail_has_the_largest_id_and_no_edge(L):
    # the subgraph handed to the path rule need not contain h or t at all
    ids = np.array([[0, 0, 1], [1, 0, 2], [2, 0, 3], [3, 0, 0]])
    for h, t in ((9, 0), (0, 9), (9, 7), (2, 9)):
        assert _path_edges_of(ids, h, t, L) == _nx_on_path(ids, h, t, L) == [False] * 4
    assert _path_edges_of(ids, 0, 2, L) == _nx_on_path(ids, 0, 2, L)


@pytest.mark.parametrize("L", [3, 4, 5])
def test_path_rule_common_neighbour_that_is_the_head(L):
    # h=0, t=3 with the edge h–t; 1 and 2 hang off h and off each other. 1–2 is on no simple
    # path: the only neighbour 2 (or 1) shares with t is h itself, which the path already used.
    ids = np.array([[0, 0, 1], [1, 0, 2], [2, 0, 0], [0, 0, 3], [2, 1, 1], [3, 0, 0]])
    assert _path_edges_of(ids, 0, 3, L) == _nx_on_path(ids, 0, 3, L) == [False, False, False, True, False, True]
    # mirrored: the common neighbour is the tail
    assert _path_edges_of(ids, 3, 0, L) == _nx_on_path(ids, 3, 0, L)
    ids2 = ids.copy()
    ids2[:, [0, 2]] = np.array([3, 4, 5, 0])[ids[:, [0, 2]]]  # 0->3, 1->4, 2->5, 3->0
    assert _path_edges_of(ids2, 0, 3, L) == _nx_on_path(ids2, 0, 3, L)


@pytest.mark.parametrize("L", [3, 4])
def test_path_rule_on_seeded_random_graphs_of_six_nodes(L):
    # dense small graphs hold every case of the L <= 4 rule: h–t, h–x, x–t, (1,1), (1,2), (2,1),
    # and common neighbours that are h, t or the edge's other end
    rng = np.random.default_rng(L)
    pairs = [(a, b) for a in range(6) for b in range(a + 1, 6)]
    for _ in range(120):
        es = [p for p in pairs if rng.random() < 0.55]
        if not es:
            continue
        ids = np.array([[a, 0, b] if rng.random() < 0.5 else [b, 1, a] for a, b in es])
        h, t = (int(x) for x in rng.choice(6, 2, replace=False))
        assert _path_edges_of(ids, h, t, L) == _nx_on_path(ids, h, t, L), (es, h, t)


# --------------------------------------------------------------------------- keep rule by hand


def _keep_graph():
    # h=0, t=5. Path 0-1-2-5; leaves on h and t in both orientations (3→0, 0→7, 5→4, 6→5);
    # a branch 1-8-9 given in both directions, so each orientation of an edge whose one end has
    # degree exactly 2 (node 8) and the other degree 1 (node 9) is present.
    ids = np.array(
        [[0, 0, 1], [1, 0, 2], [2, 0, 5], [3, 0, 0], [0, 0, 7], [5, 0, 4], [6, 0, 5], [1, 0, 8], [8, 0, 9], [9, 1, 8]]
    )
    degree = {0: 3, 1: 3, 2: 2, 3: 1, 4: 1, 5: 3, 6: 1, 7: 1, 8: 2, 9: 1}  # counted by hand
    return ids, 10, degree


def test_keep_rule_touching_and_degree_by_hand():
    ids, n, degree = _keep_graph()
    index = GraphIndex.build(ids, n)
    assert index.degree.tolist() == [degree[x] for x in range(n)]
    every = FilterOptions(n_hops=5, min_degree=0)
    assert index.filter(0, 5, every).triple_rows.tolist() == list(range(len(ids)))  # all within 5 hops
    # preserve, degrees never high enough: exactly the triples touching h or t, either end
    touching = [r for r, (a, _, b) in enumerate(ids.tolist()) if {a, b} & {0, 5}]
    assert touching == [0, 2, 3, 4, 5, 6]
    assert index.filter(0, 5, FilterOptions(n_hops=5, min_degree=99)).triple_rows.tolist() == touching
    # no preserve: an edge stays when either end has degree >= min_degree (rows 8 and 9: 8–9, 9–8)
    for md in (1, 2, 3, 4):
        want = [r for r, (a, _, b) in enumerate(ids.tolist()) if degree[a] >= md or degree[b] >= md]
        got = index.filter(0, 5, FilterOptions(n_hops=5, min_degree=md, preserve_test_edges=False))
        assert got.triple_rows.tolist() == want, md
    by_hand = {1: list(range(10)), 2: list(range(10)), 3: list(range(8)), 4: []}  # md 2: 8–9 via 8 only
    for md, want in by_hand.items():
        got = index.filter(0, 5, FilterOptions(n_hops=5, min_degree=md, preserve_test_edges=False))
        assert got.triple_rows.tolist() == want, md


def test_path_filtering_applies_to_the_kept_edges_only():
    ids, n, degree = _keep_graph()
    index = GraphIndex.build(ids, n)
    # the path 0-1-2-5 needs 1–2, which no rule keeps when min_degree = 4 and nothing is preserved
    o = FilterOptions(n_hops=5, min_degree=4, preserve_test_edges=False, path_filtering=True, max_path_length=3)
    assert index.filter(0, 5, o).triple_rows.tolist() == []
    o = FilterOptions(n_hops=5, min_degree=99, path_filtering=True, max_path_length=3)
    assert index.filter(0, 5, o).triple_rows.tolist() == []  # preserved leaves lead nowhere
    o = FilterOptions(n_hops=5, min_degree=2, path_filtering=True, max_path_length=3)
    assert index.filter(0, 5, o).triple_rows.tolist() == [0, 1, 2]
    o = FilterOptions(n_hops=5, strict_path=True, max_path_length=3)
    assert index.filter(0, 5, o).triple_rows.tolist() == [0, 1, 2]
