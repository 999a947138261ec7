"""Training-graph filtering against a plain networkx reference (the arbiter), the index cache,
and the `tracegraph filter` command."""

from __future__ import annotations

import itertools
import json

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import run_cli, run_cli_error
from tracegraph.kg.explain.neighborhood import FilterOptions, GraphIndex
from tracegraph.kg.explain.paths import path_edges
from tracegraph.kg.data.triples import read_triples

# --------------------------------------------------------------------------- the reference


def reference(ids: np.ndarray, n: int, h: int, t: int, o: FilterOptions) -> list[int]:
    """The definition of docs/filtering.md, written as directly as networkx allows."""
    g, degree = ref_graph(ids, n)
    nodes = ref_hop_nodes(g, h, t, o.n_hops, o.strict_hop)
    rows = [r for r, (a, _, b) in enumerate(ids.tolist()) if a in nodes and b in nodes]
    if not o.strict_path:

        def keep(r):
            a, b = ids[r, 0], ids[r, 2]
            if o.preserve_test_edges and {a, b} & {h, t}:
                return True
            return degree[a] >= o.min_degree or degree[b] >= o.min_degree

        rows = [r for r in rows if keep(r)]
    if o.uses_paths:
        key = ("paths", tuple(rows), h, t, o.max_path_length)
        if key not in _answers:
            _answers[key] = ref_path_pairs(ids, rows, h, t, o.max_path_length)
        on = _answers[key]
        rows = [r for r in rows if frozenset((ids[r, 0], ids[r, 2])) in on]
    if o.edges_only:
        seen, first = set(), []
        for r in rows:
            pair = frozenset((ids[r, 0], ids[r, 2]))
            if pair not in seen:
                seen.add(pair)
                first.append(r)
        rows = first
    return rows


# the reference's answers for the last graph: many option combinations share a subgraph, so
# each networkx search runs once per graph (every answer is still networkx's own)
_graph_cache: dict = {}
_answers: dict = {}


def ref_graph(ids: np.ndarray, n: int) -> tuple[nx.MultiGraph, dict[int, int]]:
    """The whole graph as a networkx multigraph (one edge per row) and each node's number of
    distinct neighbours; kept for the last graph, as the tests filter one graph many ways."""
    key = (ids.tobytes(), ids.shape, n)
    if key not in _graph_cache:
        _graph_cache.clear()
        _answers.clear()
        g = nx.MultiGraph()
        g.add_nodes_from(range(n))
        for row, (a, _, b) in enumerate(ids.tolist()):
            g.add_edge(a, b, key=row)
        _graph_cache[key] = g, {x: len(set(g.neighbors(x)) - {x}) for x in g}
    return _graph_cache[key]


def ref_hop_nodes(g: nx.MultiGraph, h: int, t: int, n_hops: int, strict_hop: bool) -> set[int]:
    """The nodes within n_hops of both h and t, and h and t, in the graph ref_graph last built."""
    key = ("hops", h, t, n_hops, strict_hop)
    if key not in _answers:
        hop_graph = g
        if strict_hop:  # the graph without its head–tail edges (a view: the cached graph stays whole)
            hop_graph = nx.subgraph_view(g, filter_edge=lambda a, b, _key: {a, b} != {h, t})
        dh = nx.single_source_shortest_path_length(hop_graph, h, cutoff=n_hops)
        dt = nx.single_source_shortest_path_length(hop_graph, t, cutoff=n_hops)
        _answers[key] = (set(dh) & set(dt)) | {h, t}
    return _answers[key]


def ref_path_pairs(ids, rows, h, t, L) -> set[frozenset]:
    """The node pairs on some simple h–t path of at most L edges through the given rows."""
    sub = nx.Graph()
    sub.add_nodes_from([h, t])
    sub.add_edges_from((ids[q, 0], ids[q, 2]) for q in rows)
    on = set()
    if h != t:
        for p in nx.all_simple_paths(sub, h, t, cutoff=L):
            on.update(frozenset(e) for e in zip(p, p[1:]))
    return on


ALL_OPTIONS = [
    FilterOptions(
        n_hops=nh,
        min_degree=md,
        preserve_test_edges=pr,
        strict_hop=sh,
        path_filtering=pf,
        max_path_length=L,
        strict_path=spf,
        edges_only=eo,
    )
    for nh, md, pr, sh, eo in itertools.product((1, 2, 3), (1, 2, 3, 4), (True, False), (True, False), (True, False))
    for pf, L, spf in [(False, 3, False)] + [(True, L, s) for L in (1, 2, 3, 4) for s in (False, True)]
]


# --------------------------------------------------------------------------- random graphs


@st.composite
def multigraphs(draw):
    """Small multigraphs with parallel triples, both directions, several relations, self-loops."""
    n = draw(st.integers(2, 30))
    m = draw(st.integers(1, 80))
    node = st.integers(0, n - 1)
    triples = draw(st.lists(st.tuples(node, st.integers(0, 2), node), min_size=m, max_size=m))
    # make parallel edges and self-loops likely rather than rare
    extra = draw(st.lists(st.sampled_from(triples), max_size=10))
    loops = draw(st.lists(node.map(lambda x: (x, 0, x)), max_size=3))
    ids = np.array(triples + [(b, r, a) for a, r, b in extra] + loops, dtype=np.int64)
    h = draw(node)
    t = draw(st.one_of(node, st.sampled_from([int(x) for x in ids[:, 2]]))) if draw(st.booleans()) else draw(node)
    return ids, n, h, t


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(multigraphs())
def test_all_option_combinations_match_networkx(graph):
    """Every one of the 864 combinations on each graph (~1 s per graph)."""
    ids, n, h, t = graph
    index = GraphIndex.build(ids, n)
    for o in ALL_OPTIONS:
        got = index.filter(h, t, o).triple_rows
        assert got.dtype == np.int64 and np.all(np.diff(got) > 0)
        assert got.tolist() == reference(ids, n, h, t, o), o


@settings(max_examples=400, deadline=None)
@given(multigraphs(), st.sampled_from(ALL_OPTIONS))
def test_random_option_combination_matches_networkx(graph, o):
    """Many more graphs, one drawn combination each."""
    ids, n, h, t = graph
    assert GraphIndex.build(ids, n).filter(h, t, o).triple_rows.tolist() == reference(ids, n, h, t, o)


@settings(max_examples=300, deadline=None)
@given(multigraphs(), st.integers(1, 6), st.booleans())
def test_path_edges_match_all_simple_paths(graph, L, dense):
    """The path rule alone, on the whole graph (denser than n-hop subgraphs), L up to 6
    (L > 4 exercises the depth-first fallback)."""
    ids, n, h, t = graph
    if dense:  # a clique on a few nodes: many short paths, the (1,2)/(2,1) cases and walks
        k = min(n, 6)
        ids = np.concatenate([ids, [[a, 0, b] for a in range(k) for b in range(a + 1, k)]])
    rows = list(range(len(ids)))
    got = path_edges(ids[:, 0], ids[:, 2], h, t, L)
    on = ref_path_pairs(ids, rows, h, t, L)
    want = [frozenset((ids[r, 0], ids[r, 2])) in on for r in rows]
    assert got.tolist() == want


def test_hand_made_cases_for_simple_paths():
    # h=0, t=3. Walk 0-1-0-... is not simple; 0-1-2-3 and triangle tricks.
    ids = np.array(
        [[0, 0, 1], [1, 0, 2], [2, 0, 3], [1, 0, 3], [0, 0, 4], [4, 0, 0], [4, 0, 4], [5, 0, 1], [5, 0, 0]],
        dtype=np.int64,
    )
    on = path_edges(ids[:, 0], ids[:, 2], 0, 3, 3)
    # 0-4 (both directions) and the loop 4-4 lead nowhere; 1-2 is on 0-1-2-3; 5-1 on 0-5-1-3
    assert on.tolist() == [True, True, True, True, False, False, False, True, True]
    assert not path_edges(ids[:, 0], ids[:, 2], 0, 0, 4).any()  # h == t: no simple path


def test_degree_counts_distinct_neighbours_without_self_loops():
    ids = np.array([[0, 0, 1], [1, 1, 0], [0, 2, 1], [1, 0, 1], [1, 0, 2]], dtype=np.int64)
    index = GraphIndex.build(ids, 4)
    assert index.degree.tolist() == [1, 2, 1, 0]


def test_strict_hop_ignores_direct_head_tail_edges():
    # h=0, t=1 joined directly (twice); 2 hangs off h, 3 off t. Through the direct edge, 2 is
    # within 2 hops of t and 3 within 2 hops of h; with strict-hop neither is.
    ids = np.array([[0, 0, 1], [1, 1, 0], [0, 0, 2], [2, 0, 5], [1, 0, 3], [3, 0, 6]], dtype=np.int64)
    index = GraphIndex.build(ids, 7)
    loose = index.filter(0, 1, FilterOptions(n_hops=2, min_degree=0))
    strict = index.filter(0, 1, FilterOptions(n_hops=2, min_degree=0, strict_hop=True))
    assert (loose.hop_nodes, strict.hop_nodes) == (4, 2)  # {0,1,2,3} vs {0,1}
    assert loose.triple_rows.tolist() == [0, 1, 2, 4]
    assert strict.triple_rows.tolist() == [0, 1]  # the direct edges themselves stay


# --------------------------------------------------------------------------- UMLS


@pytest.fixture(scope="module")
def umls(umls_dir):
    ts = read_triples(umls_dir / "train.txt")
    test = read_triples(umls_dir / "test.txt", ts.entities, ts.relations)
    return ts, test


def test_umls_matches_networkx(umls):
    ts, test = umls
    index = GraphIndex.build(ts.ids, ts.num_entities)
    rng = np.random.default_rng(0)
    picks = test.ids[rng.choice(len(test), 3, replace=False)]
    opts = [
        FilterOptions(n_hops=1, min_degree=30),
        FilterOptions(n_hops=1, min_degree=40, preserve_test_edges=False, edges_only=True),
        FilterOptions(n_hops=2, min_degree=3, strict_hop=True),
        FilterOptions(n_hops=1, min_degree=45, path_filtering=True, max_path_length=2),
        FilterOptions(n_hops=1, min_degree=50, path_filtering=True, max_path_length=3),
        FilterOptions(n_hops=1, strict_path=True, max_path_length=3, edges_only=True),
    ]
    # all_simple_paths is the slow part: up to 0.5 s for L=3 on the 2-hop subgraph (nearly all of
    # UMLS), 2-4 s for L=4 on a 1-hop one (~20 s on the 2-hop one); these two on the first pick
    h, _, t = picks[0].tolist()
    for o in (
        FilterOptions(n_hops=2, min_degree=40, path_filtering=True, max_path_length=3),
        FilterOptions(n_hops=1, min_degree=55, path_filtering=True, max_path_length=4, strict_hop=True),
    ):
        assert index.filter(h, t, o).triple_rows.tolist() == reference(ts.ids, ts.num_entities, h, t, o), o
    for h, _, t in picks.tolist():
        for o in opts:
            res = index.filter(h, t, o)
            assert res.triple_rows.tolist() == reference(ts.ids, ts.num_entities, h, t, o), (h, t, o)
            assert res.edges_kept <= len(ts) and 0 <= res.reduction_ratio <= 1


# --------------------------------------------------------------------------- cache


def test_cache_is_reused_and_invalidated(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    data = tmp_path / "data"
    data.mkdir()
    train = data / "train.txt"
    train.write_text("a\tr\tb\nb\tr\tc\nc\tr\ta\n")
    ts = read_triples(train)
    first = GraphIndex.load_or_build(train, ts.ids, ts.num_entities)
    (cache,) = (tmp_path / "cache" / "index").iterdir()  # in the user cache, keyed by content
    assert first.loaded_from is None and sorted(p.name for p in data.iterdir()) == ["train.txt"]
    second = GraphIndex.load_or_build(train, ts.ids, ts.num_entities)
    assert second.loaded_from == cache
    for name in GraphIndex.ARRAYS:
        assert np.array_equal(getattr(first, name), getattr(second, name))
    with np.load(cache, allow_pickle=False) as z:  # plain arrays: loads without pickle
        assert set(z.files) == {"key", *GraphIndex.ARRAYS}
    train.write_text("a\tr\tb\nb\tr\tc\nc\tr\td\n")
    ts2 = read_triples(train)
    third = GraphIndex.load_or_build(train, ts2.ids, ts2.num_entities)
    assert third.loaded_from is None
    assert third.filter(0, 3, FilterOptions(n_hops=3, min_degree=0)).edges_kept == 3


def test_unwritable_cache_location_falls_back(tmp_path, monkeypatch, caplog):
    # A file squatting on the cache dir makes it unwritable for anyone (root included, unlike
    # chmod): the index is then built every time, never written beside the data.
    train = tmp_path / "train.txt"
    train.write_text("a\tr\tb\n")
    (tmp_path / "blocker").write_text("")
    monkeypatch.setenv("TRACEGRAPH_CACHE_DIR", str(tmp_path / "blocker"))
    train.write_text("a\tr\tc\n")
    ts = read_triples(train)
    idx = GraphIndex.load_or_build(train, ts.ids, ts.num_entities)
    assert idx.loaded_from is None and idx.filter(0, 1).edges_kept == 1


# --------------------------------------------------------------------------- CLI


def _graph_files(tmp_path):
    train = tmp_path / "train.txt"
    train.write_text(
        "".join(
            f"{a}\trel\t{b}\n" for a, b in [("x:1", "y/2"), ("y/2", "z 3"), ("z 3", "x:1"), ("z 3", "w"), ("w", "v")]
        )
    )
    return train


def test_cli_directory_mode_with_unknown_entity(tmp_path):
    train = _graph_files(tmp_path)
    test = tmp_path / "test.txt"
    test.write_text("x:1\trel\tz 3\nnope\trel\tw\ny/2\tother\tw\n")
    out = tmp_path / "out"
    res = run_cli(
        [
            "filter",
            "--train",
            train,
            "--test-triples",
            test,
            "--output",
            out,
            "--n-hops",
            "1",
            "--min-degree",
            "1",
            "--no-cache",
        ]
    )
    assert res.exit_code == 0, res.output
    files = sorted(p.name for p in out.iterdir())
    assert files == ["filter_summary.json", "triple_000_x_1_z_3_train.txt", "triple_002_y_2_w_train.txt"]
    summary = json.loads((out / "filter_summary.json").read_text())
    status = [r["status"] for r in summary["triples"]]
    assert status == ["ok", "failed", "ok"]
    assert "'nope' is not in the training graph" in summary["triples"][1]["error"]
    assert "nope" in res.stderr
    kept = (out / "triple_000_x_1_z_3_train.txt").read_text().splitlines()
    assert kept == ["x:1\trel\ty/2", "y/2\trel\tz 3", "z 3\trel\tx:1"]


def test_cli_single_triple_file_and_unknown_entity(tmp_path):
    train = _graph_files(tmp_path)
    test = tmp_path / "one.txt"
    test.write_text("x:1\trel\tv\n")
    out = tmp_path / "filtered.txt"
    res = run_cli(
        [
            "filter",
            "--train",
            train,
            "--test-triples",
            test,
            "--output",
            out,
            "--n-hops",
            "3",
            "--path-filtering",
            "--max-total-path-length",
            "3",
            "--save-edges-only",
        ]
    )
    assert res.exit_code == 0, res.output
    assert out.read_text().splitlines() == ["z 3\trel\tx:1", "z 3\trel\tw", "w\trel\tv"]
    assert not list(tmp_path.glob("*.tgindex.npz"))  # the index went to the user cache, not beside the data
    test.write_text("x:1\trel\tmissing\n")
    run_cli_error(
        ["filter", "--train", train, "--test-triples", test, "--output", out],
        tmp_path,
        contains="'missing' is not in the training graph",
    )  # the earlier output stays as it was
