import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tests.conftest import run_cli_error
from tracegraph.errors import DataError
from tracegraph.kg.data.kgx import import_kgx
from tracegraph.kg.data.split import split_file
from tracegraph.kg.data.idmap import IdMap, read_name_dict
from tracegraph.kg.data.labels import read_edge_map
from tracegraph.kg.data.triples import KnownTails, read_labeled_triples, read_triples, with_reciprocals


def test_umls_counts_and_roundtrip(umls_dir, tmp_path):
    ts = read_triples(umls_dir / "train.txt")
    assert (len(ts.entities), len(ts.relations), len(ts)) == (135, 46, 5216)
    # ids decode back to the file's labels, line for line
    raw = [l.split("\t") for l in (umls_dir / "train.txt").read_text().splitlines() if l]
    assert [list(ts.labels(k)) for k in (0, 17, 5215)] == [raw[0], raw[17], raw[5215]]
    ts.entities.write(tmp_path / "node_dict.txt")
    again = IdMap.read(tmp_path / "node_dict.txt")
    assert again == ts.entities
    again.write(tmp_path / "node_dict2.txt")
    assert (tmp_path / "node_dict.txt").read_bytes() == (tmp_path / "node_dict2.txt").read_bytes()
    # reading with the given maps gives identical ids
    ts2 = read_triples(umls_dir / "train.txt", again, ts.relations)
    assert np.array_equal(ts.ids, ts2.ids)


def test_idmap_read_respects_file_indices(tmp_path):
    p = tmp_path / "m.txt"
    p.write_text("b\t1\r\na\t0\n\n")
    m = IdMap.read(p)
    assert m.labels == ["a", "b"] and m.id("b") == 1


def test_reciprocals():
    ids = np.array([[0, 1, 2], [3, 0, 4]])
    out = with_reciprocals(ids, 2)
    assert out.tolist() == [[0, 1, 2], [3, 0, 4], [2, 3, 0], [4, 2, 3]]


def test_known_tails_matches_bruteforce():
    rng = np.random.default_rng(0)
    a = rng.integers(0, [20, 5, 20], size=(300, 3))
    b = rng.integers(0, [20, 5, 20], size=(50, 3))
    kt = KnownTails([a, b], num_relations=5)
    ref: dict = {}
    for h, r, t in np.concatenate([a, b]):
        ref.setdefault((h, r), set()).add(t)
    for h in range(20):
        for r in range(5):
            assert set(kt.tails_of(h, r).tolist()) == ref.get((h, r), set())
    qh, qr = rng.integers(0, 20, 40), rng.integers(0, 5, 40)
    bi, tails = kt.batch(qh, qr)
    got = {(i, t) for i, t in zip(bi.tolist(), tails.tolist())}
    want = {(i, t) for i in range(40) for t in ref.get((qh[i], qr[i]), set())}
    assert got == want


def test_split_reproducible_and_train_covers(umls_dir, tmp_path):
    r1 = split_file(umls_dir / "train.txt", tmp_path / "a", 0.1, 0.1, seed=3)
    r2 = split_file(umls_dir / "train.txt", tmp_path / "b", 0.1, 0.1, seed=3)
    assert (tmp_path / "a" / "test.txt").read_bytes() == (tmp_path / "b" / "test.txt").read_bytes()
    assert (r2.train, r2.valid, r2.test) == (r1.train, r1.valid, r1.test)
    ents = {h for h, _, _ in r1.train} | {t for _, _, t in r1.train}
    assert all(h in ents and t in ents for h, _, t in r1.valid + r1.test)
    assert len(r1.train) + len(r1.valid) + len(r1.test) + sum(map(len, r1.dropped.values())) == 5216


def test_split_drops_unseen_entities(tmp_path):
    p = tmp_path / "all.txt"
    rows = [f"a\tr\tb{i}" for i in range(20)]  # every b_i occurs once: held-out ones are unseen
    p.write_text("\n".join(rows) + "\n")
    res = split_file(p, tmp_path / "o", 0.2, 0.2, seed=0)
    assert res.valid == [] and res.test == []
    assert len(res.dropped["valid"]) == 4 and len(res.dropped["test"]) == 4


def test_kgx_import(tmp_path):
    nodes = tmp_path / "nodes.jsonl"
    edges = tmp_path / "edges.jsonl"
    nodes.write_text(
        json.dumps({"id": "CHEBI:1", "name": "aspirin", "category": ["biolink:Drug"]})
        + "\n"
        + json.dumps({"id": "MONDO:2", "name": "pain", "category": ["biolink:Disease"]})
        + "\n"
        + json.dumps({"id": "NCBIGene:3", "name": "PTGS2"})
        + "\n"
    )
    edges.write_text(
        json.dumps({"subject": "CHEBI:1", "predicate": "biolink:treats", "object": "MONDO:2"})
        + "\n"
        + json.dumps(
            {
                "subject": "CHEBI:1",
                "predicate": "biolink:affects",
                "object": "NCBIGene:3",
                "object_direction_qualifier": "decreased",
                "publications": ["PMID:1"],
            }
        )
        + "\n"
        + json.dumps({"subject": "CHEBI:1", "predicate": "biolink:affects", "object": "NCBIGene:9"})
        + "\n"
    )
    res = import_kgx(nodes, edges, tmp_path / "out")
    assert (res.triples, res.entities, res.relations, res.nodes_only_in_edges) == (3, 4, 3, 1)
    ts = read_triples(
        tmp_path / "out" / "triples.txt",
        IdMap.read(tmp_path / "out" / "node_dict.txt"),
        IdMap.read(tmp_path / "out" / "rel_dict.txt"),
    )
    names = read_name_dict(tmp_path / "out" / "node_name_dict.txt")
    assert names[ts.entities.id("CHEBI:1")] == "aspirin"
    emap = read_edge_map(tmp_path / "out" / "edge_map.json")
    assert emap["predicate:1"] == "biolink:affects (object_direction_qualifier=decreased)"
    assert emap["predicate:0"] == "biolink:treats" and emap["predicate:2"] == "biolink:affects"


# ---------------------------------------------------------------- bad input, through the CLI

BAD_TRIPLES = {
    "two columns": ("a\tr\tb\nc\td\n", 2),
    "four columns": ("a\tr\tb\na\tr\tb\tx\n", 2),
    "empty field": ("a\tr\tb\n\tr\tb\n", 2),
    "blank field": ("a\tr\tb\na\t \tb\n", 2),
}


@pytest.mark.parametrize("case", sorted(BAD_TRIPLES))
def test_bad_triples_clear_error_nothing_written(tmp_path, case):
    text, line = BAD_TRIPLES[case]
    p = tmp_path / "t.txt"
    p.write_text(text)
    out = tmp_path / "split"
    run_cli_error(
        ["data", "split", p, "--output-dir", out], tmp_path, contains=f"{p}:{line}:"
    )  # one line, however long the path
    assert not out.exists()


def test_empty_and_missing_files(tmp_path):
    p = tmp_path / "empty.txt"
    p.write_text("\n\n")
    for f, words in ((p, "is empty"), (tmp_path / "nope.txt", "not found")):
        res = run_cli_error(["data", "stats", f], tmp_path, contains=str(f))
        assert words in res.stderr


@pytest.mark.parametrize(
    "text,line,words",
    [
        ("a\t0\nb\t0\n", 2, "duplicate index 0"),
        ("a\t0\na\t1\n", 2, "duplicate label 'a'"),
        ("a\t0\nb\tx\n", 2, "not a non-negative integer"),
        ("a\t0\nb\t5\n", 2, "out of range"),
    ],
)
def test_bad_id_maps(tmp_path, text, line, words):
    p = tmp_path / "node_dict.txt"
    p.write_text(text)
    with pytest.raises(DataError) as e:
        IdMap.read(p)
    assert e.value.path == str(p) and e.value.line == line and words in str(e.value)


def test_entity_missing_from_map_names_line(tmp_path):
    m = tmp_path / "node_dict.txt"
    m.write_text("a\t0\nb\t1\n")
    r = tmp_path / "rel_dict.txt"
    r.write_text("r\t0\n")
    t = tmp_path / "t.txt"
    t.write_text("a\tr\tb\n\nb\tr\tzzz\n")
    with pytest.raises(DataError) as e:
        read_triples(t, IdMap.read(m), IdMap.read(r))
    assert e.value.line == 3 and "'zzz'" in str(e.value)


def test_non_utf8_names_line(tmp_path):
    p = tmp_path / "t.txt"
    p.write_bytes(b"a\tr\tb\nc\tr\t\xff\n")
    with pytest.raises(DataError) as e:
        read_labeled_triples(p)
    assert e.value.line == 2


# ---------------------------------------------------------------- fuzzing

alphabet = st.sampled_from(list('ab\t\n\r :{}"x0') + ["\u00e9", "\x00"])


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet, max_size=60))
def test_fuzz_triples_parser(tmp_path_factory, text):
    p = tmp_path_factory.mktemp("fz") / "t.txt"
    p.write_text(text, encoding="utf-8")
    try:
        lt = read_labeled_triples(p)
    except DataError:
        return
    # whatever parses must be exactly the non-blank lines' three fields
    rows = [l.removesuffix("\r").split("\t") for l in text.split("\n") if l.removesuffix("\r")]
    assert [list(x) for x in zip(lt.heads, lt.relations, lt.tails)] == rows


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80))
def test_fuzz_all_readers_bytes(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("fzb") / "f"
    p.write_bytes(data)
    for reader in (read_labeled_triples, IdMap.read, read_name_dict, read_edge_map):
        try:
            reader(p)
        except DataError:
            pass


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.dictionaries(
                st.sampled_from(["id", "name", "subject", "predicate", "object", "x_qualifier"]),
                st.one_of(st.text(max_size=5), st.integers(), st.none()),
            ),
            st.integers(),
        ),
        max_size=5,
    )
)
def test_fuzz_kgx(tmp_path_factory, objs):
    d = tmp_path_factory.mktemp("kgx")
    text = "\n".join(json.dumps(o) for o in objs)
    (d / "n.jsonl").write_text(text)
    (d / "e.jsonl").write_text(text)
    try:
        import_kgx(d / "n.jsonl", d / "e.jsonl", d / "out")
    except DataError:
        pass
