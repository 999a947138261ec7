"""A directory of tree files, graph files, SWC writing, the tree-file cache and the data config, by hand.

Holds ``trees/files.py`` and ``trees/inputs.py`` to their docstrings and ``docs/trees.md`` ("Your
own labelled trees"): files listed by stem; a graph file's tree is its Euclidean minimum spanning
tree (worked out by hand on four points) from ``root`` (default 0); every refusal word for word
with its file; SWC text written out by hand; the node budget at exactly ``max_nodes``; the cache
keyed by the file's bytes and the options (sha256 computed here) and read back unchanged; the
config's options and loaders against seeded permutations drawn here.
"""

from __future__ import annotations

import hashlib
import json
import re

import numpy as np
import pytest
from tests.conftest import log_lines
from tests.trees.labelled_fixtures import write_png
from tracegraph.errors import DataError
from tracegraph.trees import files
from tracegraph.trees.data import Tree, neuron_subtrees, read_swc
from tracegraph.trees.synthetic import synthetic_trees
from tracegraph.trees.files import cached_tree_file, list_tree_files, read_graph_file, read_tree_file, write_swc
from tracegraph.trees.inputs import DataConfig, labelled_split, load_trees, make_loader, tree_dir_options

SUFFIXES = "*.swc, *.png, *.tif, *.tiff, *.jpg, *.jpeg, *.bmp, *.gif, *.json, *.npz"


def refusal(call, *args, **kwargs) -> DataError:
    with pytest.raises(DataError) as e:
        call(*args, **kwargs)
    return e.value


def edges_by_position(t: Tree) -> set:
    return {frozenset((tuple(t.pos[c]), tuple(t.pos[t.parent[c]]))) for c in range(1, t.num_nodes)}


# --------------------------------------------------------------------------- listing


def test_tree_files_are_listed_by_stem_in_sorted_order(tmp_path):
    for name in ("a.swc", "a-b.JSON", "B.PNG", "d.npz", "e.tiff", "notes.txt", "f.jpeg"):
        (tmp_path / name).write_text("x")
    (tmp_path / "sub.swc").mkdir()  # a folder named like a tree file is not one
    (tmp_path / "sub.swc" / "g.swc").write_text("x")  # nor is a file below the folder
    found = list_tree_files(tmp_path)
    assert list(found) == ["B", "a", "a-b", "d", "e", "f"]  # stems sorted; "a-b.JSON" sorts before "a.swc"
    assert found["a-b"] == tmp_path / "a-b.JSON" and found["B"] == tmp_path / "B.PNG"


def test_listing_refusals_word_for_word(tmp_path):
    e = refusal(list_tree_files, tmp_path / "none")
    assert str(e) == f"{tmp_path / 'none'}: trees directory not found (or not a directory)"
    (tmp_path / "f.swc").write_text("x")
    e = refusal(list_tree_files, tmp_path / "f.swc")
    assert str(e) == f"{tmp_path / 'f.swc'}: trees directory not found (or not a directory)"
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "readme.md").write_text("x")
    e = refusal(list_tree_files, tmp_path / "empty")
    assert str(e) == f"{tmp_path / 'empty'}: no tree files ({SUFFIXES})"
    (tmp_path / "f.json").write_text("x")
    e = refusal(list_tree_files, tmp_path)
    assert (e.path, e.reason) == (str(tmp_path), "two tree files share the name 'f' (f.json and f.swc)")


# --------------------------------------------------------------------------- graph files

# four points: 0 (0,0), 1 (1,0), 2 (2,0), 3 (1,1); all six pairs are edges. Lengths: 0-1, 1-2, 1-3 are
# 1; 0-3, 2-3 are √2; 0-2 is 2. The minimum spanning tree is the three unit edges, a star at 1.
POS = [[0, 0], [1, 0], [2, 0], [1, 1]]
ALL_PAIRS = [[0, 1], [1, 2], [0, 2], [1, 3], [0, 3], [2, 3]]
MST = {frozenset(((0.0, 0.0), (1.0, 0.0))), frozenset(((1.0, 0.0), (2.0, 0.0))), frozenset(((1.0, 0.0), (1.0, 1.0)))}


def test_a_json_graph_gives_its_minimum_spanning_tree_from_its_root(tmp_path):
    p = tmp_path / "g.json"
    p.write_text(json.dumps({"pos": POS, "edges": ALL_PAIRS, "root": 2}))
    t = read_graph_file(p)
    assert t.num_nodes == 4 and edges_by_position(t) == MST and t.pos[0].tolist() == [2.0, 0.0]
    p.write_text(json.dumps({"pos": POS, "edges": ALL_PAIRS}))
    t = read_graph_file(p)  # root 0 by default
    assert edges_by_position(t) == MST and t.pos[0].tolist() == [0.0, 0.0]
    p.write_bytes(
        b"\xef\xbb\xbf" + json.dumps({"pos": POS, "edges": np.array(ALL_PAIRS).T.tolist(), "root": 3}).encode()
    )
    with log_lines() as lines:
        t = read_graph_file(p)  # a byte-order mark, and edges given as (2, E)
    assert lines == [f"{p}:1: removed a UTF-8 byte-order mark"]
    assert edges_by_position(t) == MST and t.pos[0].tolist() == [1.0, 1.0]


def test_an_npz_graph_and_an_upper_case_json_suffix(tmp_path):
    np.savez(tmp_path / "g.npz", pos=np.array(POS, float), edges=np.array(ALL_PAIRS), root=np.array(1))
    t = read_graph_file(tmp_path / "g.npz")
    assert edges_by_position(t) == MST and t.pos[0].tolist() == [1.0, 0.0]
    np.savez(tmp_path / "h.npz", pos=np.array(POS, float), edges=np.array(ALL_PAIRS))
    assert read_graph_file(tmp_path / "h.npz").pos[0].tolist() == [0.0, 0.0]
    (tmp_path / "G.JSON").write_text(json.dumps({"pos": [[0, 0, 0], [0, 0, 2.5]], "edges": [[0, 1]]}))
    t = read_graph_file(tmp_path / "G.JSON")
    assert t.pos.tolist() == [[0, 0, 0], [0, 0, 2.5]] and t.parent.tolist() == [0, 0]


def test_graph_file_refusals_word_for_word(tmp_path):
    p = tmp_path / "g.json"
    cases = [
        ("[1, 2]", "expected a JSON object with 'pos' and 'edges'"),
        ("{}", "graph file lacks 'pos' and 'edges'"),
        ('{"edges": []}', "graph file lacks 'pos'"),
        ('{"pos": [[0, 0]]}', "graph file lacks 'edges'"),
        (
            '{"pos": [["a", 0]], "edges": []}',
            "'pos' and 'edges' must be numeric arrays (could not convert string to float: 'a')",
        ),
        (
            '{"pos": [[0, 0], [1, 0]], "edges": [["a", 1]]}',
            "'pos' and 'edges' must be numeric arrays (invalid literal for int() with base 10: 'a')",
        ),
        ('{"pos": [0, 1], "edges": []}', "'pos' must be an (N, 2) or (N, 3) array of finite numbers, got shape (2,)"),
        (
            '{"pos": [[0, 1, 2, 3]], "edges": []}',
            "'pos' must be an (N, 2) or (N, 3) array of finite numbers, got shape (1, 4)",
        ),
        ('{"pos": [[0]], "edges": []}', "'pos' must be an (N, 2) or (N, 3) array of finite numbers, got shape (1, 1)"),
        (
            '{"pos": [[0, NaN]], "edges": []}',
            "'pos' must be an (N, 2) or (N, 3) array of finite numbers, got shape (1, 2)",
        ),
        (
            '{"pos": [[0, 0], [1, 0], [2, 0]], "edges": [[0, 1]]}',
            "graph is not connected: 1 of 3 nodes unreachable from root 0",
        ),
        ('{"pos": [[0, 0], [1, 0]], "edges": [[0, 1]], "root": 2}', "root 2 is not a node (graph has 2)"),
    ]
    for text, reason in cases:
        p.write_text(text)
        e = refusal(read_graph_file, p)
        assert (e.path, e.line, e.reason) == (str(p), None, reason), text
    p.write_text("{not json")
    assert refusal(read_graph_file, p).reason.startswith(
        "cannot read graph file (JSONDecodeError: Expecting property name"
    )
    p.write_bytes(b'{"pos": "\xff"}')
    assert refusal(read_graph_file, p).reason.startswith("cannot read graph file (UnicodeDecodeError: ")
    q = tmp_path / "g.npz"
    q.write_bytes(b"garbage")
    e = refusal(read_graph_file, q)
    assert e.path == str(q) and e.reason.startswith("cannot read graph file (ValueError: ")
    e = refusal(read_graph_file, tmp_path / "none.npz")
    assert e.path == str(tmp_path / "none.npz") and e.reason.startswith("cannot read graph file (FileNotFoundError: ")


# --------------------------------------------------------------------------- one file's trees


def chain_json(path, n):
    path.write_text(json.dumps({"pos": [[i, 0] for i in range(n)], "edges": [[i, i + 1] for i in range(n - 1)]}))
    return path


def test_a_file_s_trees_are_named_by_stem_and_fitted_to_the_budget(tmp_path):
    (t300,) = read_tree_file(chain_json(tmp_path / "c300.json", 300))
    assert t300.num_nodes == 300 and t300.name == "c300" and t300.meta == {"source": "c300.json"}
    (t301,) = read_tree_file(chain_json(tmp_path / "c301.json", 301))  # the default budget is 300 nodes
    assert t301.num_nodes <= 300 and "node_spacing" in t301.meta
    (t,) = read_tree_file(chain_json(tmp_path / "c5.json", 5), node_spacing=2)
    assert t.pos.tolist() == [[0, 0], [2, 0], [4, 0]] and t.meta == {"node_spacing": 2.0, "source": "c5.json"}
    (t,) = read_tree_file(tmp_path / "c5.json", max_nodes=3)
    assert t.num_nodes <= 3 and t.pos[0].tolist() == [0, 0] and t.pos[-1].tolist() == [4, 0]


def test_an_swc_file_is_read_as_its_tree(tmp_path):
    p = tmp_path / "n.SWC"
    p.write_text("# a neuron\n1 1 0 0 0 1 -1\n2 3 3 4 0 1 1\n3 3 3 4 5 1 2\n")
    (t,) = read_tree_file(p)
    assert t.pos.tolist() == [[0, 0, 0], [3, 4, 0], [3, 4, 5]] and t.parent.tolist() == [0, 0, 1]
    assert t.name == "n" and t.meta["source"] == "n.SWC"


def test_a_vessel_image_gives_its_largest_components(tmp_path):
    mask = np.zeros((40, 40), bool)
    mask[5, 2:38] = True  # 36 pixels
    mask[30, 5:21] = True  # 16 pixels
    write_png(mask, tmp_path / "eye.png")
    one = read_tree_file(tmp_path / "eye.png")
    assert len(one) == 1 and one[0].name == "eye" and one[0].meta["source"] == "eye.png"
    two = read_tree_file(tmp_path / "eye.png", trees_per_image=2)
    assert [t.name for t in two] == ["eye", "eye"] and two[0].total_length() > two[1].total_length()
    assert all(t.meta["source"] == "eye.png" for t in two)
    e = refusal(read_tree_file, tmp_path / "eye.png", image_root="nope")  # raised without a file: named here
    assert str(e) == f"{tmp_path / 'eye.png'}: image root must be 'widest' or 'disc', not 'nope'"
    write_png(np.zeros((20, 20), bool), tmp_path / "blank.png")
    e = refusal(read_tree_file, tmp_path / "blank.png")
    assert str(e) == f"{tmp_path / 'blank.png'}: the image is blank (one grey value): no vessels"


def test_an_unknown_suffix_is_refused(tmp_path):
    e = refusal(read_tree_file, tmp_path / "t.csv")
    assert (
        str(e)
        == f"{tmp_path / 't.csv'}: not a tree file (expected one of .swc, .png, .tif, .tiff, .jpg, .jpeg, .bmp, .gif, .json, .npz)"
    )


# --------------------------------------------------------------------------- SWC writing


def test_write_swc_by_hand(tmp_path):
    t = Tree(np.array([[0.0, 0.0], [1.5, 0.0], [1.5, 2.25]]), np.array([0, 0, 1]))
    write_swc(t, tmp_path / "t.swc")
    assert (tmp_path / "t.swc").read_text() == (
        "# id type x y z radius parent\n1 0 0 0 0 1 -1\n2 0 1.5 0 0 1 1\n3 0 1.5 2.25 0 1 2\n"
    )
    t3 = Tree(np.array([[1.23456789, -2e-7, 1e7], [0, 1, 2], [3, 4, 5]]), np.array([0, 0, 0]))
    write_swc(t3, tmp_path / "u.swc")
    assert (tmp_path / "u.swc").read_text().splitlines()[1:] == [
        "1 0 1.23457 -2e-07 1e+07 1 -1",
        "2 0 0 1 2 1 1",
        "3 0 3 4 5 1 1",
    ]
    back = read_swc(tmp_path / "u.swc")
    assert back.parent.tolist() == [0, 0, 0] and back.pos[1:].tolist() == [[0, 1, 2], [3, 4, 5]]


# --------------------------------------------------------------------------- the cache


def key_of(path, options) -> str:
    h = hashlib.sha256(b"tracegraph-tree-file-v1" + json.dumps(options, sort_keys=True).encode() + path.read_bytes())
    return h.hexdigest()[:24]


def test_without_a_cache_folder_the_file_is_read(tmp_path, monkeypatch):
    p = chain_json(tmp_path / "c.json", 4)
    seen = []
    monkeypatch.setattr(files, "read_tree_file", lambda path, **o: seen.append((path, o)) or ["trees"])
    assert cached_tree_file(p, None, max_nodes=9) == ["trees"] and seen == [(p, {"max_nodes": 9})]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["c.json"]


def test_the_cache_file_is_named_by_stem_bytes_and_options_and_read_back(tmp_path, monkeypatch):
    p = chain_json(tmp_path / "c.json", 6)
    opts = {"node_spacing": 2.0, "max_nodes": 50}
    first = cached_tree_file(p, tmp_path / "cache", **opts)
    target = tmp_path / "cache" / f"trees-c-{key_of(p, opts)}.npz"
    assert [x.name for x in (tmp_path / "cache").iterdir()] == [target.name]
    assert re.fullmatch(r"trees-c-[0-9a-f]{24}\.npz", target.name)
    monkeypatch.setattr(files, "read_tree_file", lambda *a, **k: pytest.fail("read although cached"))
    again = cached_tree_file(p, tmp_path / "cache", max_nodes=50, node_spacing=2.0)  # option order does not matter
    (a,), (b,) = first, again
    assert b.pos.tolist() == a.pos.tolist() == [[0, 0], [2, 0], [4, 0], [5, 0]]
    assert b.parent.tolist() == a.parent.tolist() == [0, 0, 1, 2]
    assert b.name == "c" and b.meta == a.meta == {"node_spacing": 2.0, "source": "c.json"}
    assert b.pos.dtype == np.float64 and b.parent.dtype == np.int64
    monkeypatch.undo()
    other = tmp_path / "elsewhere"
    other.mkdir()
    q = other / "c.json"
    q.write_bytes(p.read_bytes())  # the same bytes elsewhere: the same entry
    monkeypatch.setattr(files, "read_tree_file", lambda *a, **k: pytest.fail("read although cached"))
    assert cached_tree_file(q, tmp_path / "cache", **opts)[0].pos.tolist() == a.pos.tolist()
    monkeypatch.undo()
    cached_tree_file(p, tmp_path / "cache", node_spacing=1.0, max_nodes=50)
    assert len(list((tmp_path / "cache").iterdir())) == 2


def test_a_cached_image_keeps_every_tree_and_its_meta(tmp_path, monkeypatch):
    mask = np.zeros((40, 40), bool)
    mask[5, 2:38] = True
    mask[30, 5:21] = True
    write_png(mask, tmp_path / "eye.png")
    first = cached_tree_file(tmp_path / "eye.png", tmp_path / "cache", trees_per_image=2, max_nodes=300)
    monkeypatch.setattr(files, "read_tree_file", lambda *a, **k: pytest.fail("read although cached"))
    again = cached_tree_file(tmp_path / "eye.png", tmp_path / "cache", trees_per_image=2, max_nodes=300)
    assert len(again) == 2
    for a, b in zip(first, again):
        assert np.array_equal(a.pos, b.pos) and np.array_equal(a.parent, b.parent) and a.meta == b.meta
        assert b.name == "eye"


def test_a_pickled_cache_file_is_refused(tmp_path):
    p = chain_json(tmp_path / "c.json", 3)
    opts = {"max_nodes": 10}
    (tmp_path / "cache").mkdir()
    target = tmp_path / "cache" / f"trees-c-{key_of(p, opts)}.npz"
    meta = np.array(json.dumps([{}]), dtype=object)  # an object array: stored with pickle
    with open(target, "wb") as f:
        np.savez(f, offsets=np.array([0, 1]), pos=np.zeros((1, 2)), parent=np.zeros(1, np.int64), meta=meta)
    e = refusal(cached_tree_file, p, tmp_path / "cache", **opts)
    assert e.path == str(target) and "allow_pickle=False" in e.reason and e.reason.endswith("; delete it to rebuild")


def test_a_corrupt_cache_file_is_named(tmp_path):
    p = chain_json(tmp_path / "c.json", 3)
    opts = {"max_nodes": 10}
    (tmp_path / "cache").mkdir()
    target = tmp_path / "cache" / f"trees-c-{key_of(p, opts)}.npz"
    target.write_bytes(b"not an npz")
    e = refusal(cached_tree_file, p, tmp_path / "cache", **opts)
    assert (
        e.path == str(target)
        and e.reason.startswith("unreadable tree cache (")
        and e.reason.endswith("); delete it to rebuild")
    )


# --------------------------------------------------------------------------- the data config


def test_tree_dir_options_are_the_config_s():
    dc = DataConfig(max_nodes=7, cache_dir="c", node_spacing=1.5, trees_per_image=3, image_root="disc", num_trees=9)
    assert tree_dir_options(dc) == {
        "node_spacing": 1.5,
        "max_nodes": 7,
        "trees_per_image": 3,
        "image_root": "disc",
        "cache_dir": "c",
    }


def test_load_trees_reads_the_trees_folder_first(tmp_path):
    chain_json(tmp_path / "a.json", 12)
    chain_json(tmp_path / "b.json", 5)
    ds = load_trees(DataConfig(trees_dir=str(tmp_path), swc_dir="ignored", max_nodes=6))
    assert len(ds) == 2 and all(int(x.y) == -1 for x in ds)
    sizes = sorted(int(x.num_nodes) for x in ds)
    assert sizes[0] == 5 and sizes[1] <= 6  # the 12-node chain fitted to the config's budget


def test_load_trees_generates_synthetic_trees_without_a_folder(tmp_path):
    ds = load_trees(DataConfig(num_trees=3, max_nodes=25, seed=4, cache_dir=str(tmp_path / "c")))
    ref = synthetic_trees(3, 4, max_nodes=25)  # 3 trees per class
    assert len(ds) == len(ref) == 6
    for item, t in zip(ds, ref):
        assert int(item.num_nodes) == t.num_nodes and np.allclose(item.pos.numpy(), t.pos, atol=1e-6)
    assert any((tmp_path / "c").iterdir())


def test_load_trees_samples_neuron_subtrees_from_the_swc_folder(tmp_path):
    # a comb: a spine of 40 points, a 3-point tooth on every fourth
    rows = ["1 1 0 0 0 1 -1"] + [f"{i} 3 {i} 0 0 1 {i - 1}" for i in range(2, 41)]
    rows += [
        f"{40 + 3 * k + j} 3 {4 * k} {j} 0 1 {4 * k if j == 1 else 40 + 3 * k + j - 1}"
        for k in range(1, 10)
        for j in (1, 2, 3)
    ]
    (tmp_path / "n.swc").write_text("\n".join(rows) + "\n")
    ds = load_trees(DataConfig(swc_dir=str(tmp_path), num_trees=4, max_nodes=10, keep_every=2, seed=3))

    def positions(trees):
        return [t.pos.round(6).tolist() for t in trees]

    want = positions(neuron_subtrees(tmp_path, 4, 10, 2, 3))
    assert [x.pos.numpy().round(6).tolist() for x in ds] == want
    # each setting shows: another seed, thinning or size samples other subtrees
    for other in ((4, 10, 2, 0), (4, 10, 4, 3), (4, 12, 2, 3)):
        assert positions(neuron_subtrees(tmp_path, *other)) != want, other


def test_make_loader_shuffles_with_its_own_seed_only_when_asked():
    data = list(range(10))

    def order(*args, **kw):
        return [int(x) for b in make_loader(data, *args, **kw) for x in b]

    got = order(3, True, seed=5)
    assert sorted(got) == data and got != data  # shuffled (10! orders: the identity by chance is 1 in 3.6 million)
    assert order(3, True, seed=5) == got and order(3, True, seed=6) != got  # its own seeded generator
    assert order(3, True) == order(3, True, seed=0)
    batches = list(make_loader(data, 4, False, seed=5))
    assert [b.tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert make_loader(data, 4, False).generator is None


def test_labelled_split_holds_out_a_seeded_share_of_synthetic_trees():
    dc = DataConfig(swc_dir="not/used", num_trees=5, max_nodes=20, seed=3)
    train, test = labelled_split(dc)
    data = load_trees(DataConfig(num_trees=5, max_nodes=20, seed=3))
    idx = np.random.default_rng(4).permutation(10)  # the seed + 1's permutation; round(10 · 0.3) = 3 held out
    assert [t.pos.tolist() for t in test] == [data[i].pos.tolist() for i in idx[:3]]
    assert [t.pos.tolist() for t in train] == [data[i].pos.tolist() for i in idx[3:]]
    train, test = labelled_split(dc, test_fraction=0.5)
    assert (len(train), len(test)) == (5, 5)


def test_labelled_split_uses_the_config_s_cache(tmp_path):
    labelled_split(DataConfig(num_trees=2, max_nodes=15, seed=1, cache_dir=str(tmp_path / "c")))
    assert any((tmp_path / "c").iterdir())
