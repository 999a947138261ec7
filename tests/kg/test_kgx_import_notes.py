"""What a KGX import leaves out or changes, and says so: negated edges are no training facts (left
out, counted, the first five named); node rows that repeat exactly are merged and counted; rows of
one id that differ are all refused in one error; nodes only edges name are named; spaces around ids
are removed (so `" MONDO:1"` is `MONDO:1`) and listed. Expected outputs are written by hand or
built by a plain loop over the input rows."""

import json

import pytest

from tests.conftest import run_cli
from tracegraph.errors import DataError
from tracegraph.kg.data.kgx import import_kgx


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _tsv(path, header, rows):
    path.write_text("\t".join(header) + "\n" + "".join("\t".join(r) + "\n" for r in rows))
    return path


def _triples(out):
    return [tuple(line.split("\t")) for line in (out / "triples.txt").read_text().splitlines()]


NODES = [{"id": f"N:{i}", "name": f"n{i}"} for i in range(10)]


def test_negated_json_lines_edges_are_left_out_and_the_first_five_named(tmp_path):
    flags = [True, None, "true", False, "True", "false", True, "", True, "TRUE", True]  # None: no field
    edges = []
    for i, flag in enumerate(flags):
        e = {"subject": f"N:{i % 10}", "predicate": "biolink:treats", "object": f"N:{(i + 1) % 10}"}
        if flag is not None:
            e["negated"] = flag
        edges.append(e)
    res = import_kgx(_jsonl(tmp_path / "n.jsonl", NODES), _jsonl(tmp_path / "e.jsonl", edges), tmp_path / "out")
    negated = [i for i, f in enumerate(flags) if f is True or str(f).lower() == "true"]
    kept = [(e["subject"], "predicate:0", e["object"]) for i, e in enumerate(edges) if i not in negated]
    assert _triples(tmp_path / "out") == kept
    assert (res.triples, res.negated_edges) == (len(kept), len(negated)) == (4, 7)
    named = ", ".join(f"line {i + 1} ({edges[i]['subject']} biolink:treats {edges[i]['object']})" for i in negated[:5])
    assert res.notes == [
        "left out 7 negated edges of e.jsonl (negated: true says the relation does not hold, so they are no "
        f"training facts): {named} and 2 more"
    ]


def test_negated_tsv_edges_are_left_out_whatever_the_case_of_true(tmp_path):
    nodes = _tsv(tmp_path / "g_nodes.tsv", ["id", "name"], [("A:1", "a"), ("B:2", "b"), ("C:3", "c")])
    edges = _tsv(
        tmp_path / "g_edges.tsv",
        ["subject", "predicate", "object", "negated"],
        [
            ("A:1", "p", "B:2", "True"),
            ("A:1", "p", "C:3", "False"),
            ("B:2", "p", "C:3", ""),
            ("C:3", "p", "A:1", "true"),
        ],
    )
    res = import_kgx(nodes, edges, tmp_path / "out")
    assert _triples(tmp_path / "out") == [("A:1", "predicate:0", "C:3"), ("B:2", "predicate:0", "C:3")]
    assert res.notes[0].endswith("facts): line 2 (A:1 p B:2), line 5 (C:3 p A:1)")
    cli = run_cli(["data", "import-kgx", nodes, edges, "-o", tmp_path / "cli"])
    assert cli.stderr.splitlines() == [f"note: {res.notes[0]}"]


@pytest.mark.parametrize("value", ["maybe", 2, ["true"]])
def test_a_negated_value_that_is_neither_true_nor_false_is_refused_with_its_line(tmp_path, value):
    edges = [
        {"subject": "N:1", "predicate": "p", "object": "N:2"},
        {"subject": "N:1", "predicate": "p", "object": "N:3", "negated": value},
    ]
    e = _jsonl(tmp_path / "e.jsonl", edges)
    with pytest.raises(DataError) as err:
        import_kgx(_jsonl(tmp_path / "n.jsonl", NODES), e, tmp_path / "out")
    assert str(err.value) == f"{e}:2: field 'negated' is {value!r}: expected true or false"
    assert not (tmp_path / "out").exists()


def test_a_graph_whose_every_edge_is_negated_is_refused(tmp_path):
    e = _jsonl(tmp_path / "e.jsonl", [{"subject": "N:1", "predicate": "p", "object": "N:2", "negated": True}])
    with pytest.raises(DataError, match=r"e\.jsonl: every edge is negated \(1\): no training facts are left$"):
        import_kgx(_jsonl(tmp_path / "n.jsonl", NODES), e, tmp_path / "out")


EDGES = [{"subject": "N:0", "predicate": "p", "object": f"N:{i}"} for i in range(1, 10)]


def test_node_rows_that_repeat_exactly_are_merged_and_counted(tmp_path):
    repeats = [NODES[i % 3] for i in range(7)]  # N:0, N:1, N:2, N:0, ... seven exact repeats
    res = import_kgx(
        _jsonl(tmp_path / "n.jsonl", NODES + repeats), _jsonl(tmp_path / "e.jsonl", EDGES), tmp_path / "out"
    )
    import_kgx(_jsonl(tmp_path / "plain.jsonl", NODES), tmp_path / "e.jsonl", tmp_path / "plain")
    for name in ("triples.txt", "node_dict.txt", "node_name_dict.txt", "node_category.txt"):
        assert (tmp_path / "out" / name).read_text() == (tmp_path / "plain" / name).read_text()
    assert res.merged_node_rows == 7
    first = [f"'N:{i % 3}' (lines {i % 3 + 1} and {11 + i})" for i in range(5)]
    assert res.notes == [
        f"merged 7 node rows of n.jsonl repeating an earlier row exactly: {', '.join(first)} and 2 more"
    ]


def test_node_rows_of_one_id_that_differ_are_all_listed_in_one_error(tmp_path):
    differing = [{"id": f"N:{i}", "name": f"other {i}"} for i in range(7)] + [{"id": "N:0", "name": "third"}]
    differing += [{"id": "N:0", "name": "fourth"}, {"id": "N:0", "name": "fifth"}]
    n = _jsonl(tmp_path / "n.jsonl", NODES + differing)
    with pytest.raises(DataError) as err:
        import_kgx(n, _jsonl(tmp_path / "e.jsonl", EDGES), tmp_path / "out")
    listed = ["'N:0' (lines 1, 11, 18, …)"] + [f"'N:{i}' (lines {i + 1}, {11 + i})" for i in range(1, 5)]
    assert str(err.value) == (
        f"{n}: rows with the same id differ for 7 nodes, so which one holds is unclear: "
        f"{', '.join(listed)} and 2 more; keep one row per id"
    )
    assert not (tmp_path / "out").exists()


def test_nodes_only_edges_name_are_named_with_their_first_line(tmp_path):
    edges = [{"subject": "N:0", "predicate": "p", "object": f"X:{i % 7}"} for i in range(9)]
    res = import_kgx(_jsonl(tmp_path / "n.jsonl", NODES), _jsonl(tmp_path / "e.jsonl", edges), tmp_path / "out")
    assert res.nodes_only_in_edges == 7
    named = ", ".join(f"'X:{i}' (line {i + 1})" for i in range(5))
    assert res.notes == [
        f"7 nodes only in edges of e.jsonl, not in the nodes file; kept, named by their id: {named} and 2 more"
    ]
    names = dict(line.split("\t")[::-1] for line in (tmp_path / "out" / "node_name_dict.txt").read_text().splitlines())
    ids = dict(line.split("\t") for line in (tmp_path / "out" / "node_dict.txt").read_text().splitlines())
    assert all(names[ids[f"X:{i}"]] == f"X:{i}" for i in range(7))


def test_spaces_around_ids_are_removed_and_listed(tmp_path):
    nodes = _tsv(tmp_path / "g_nodes.tsv", ["id", "name"], [("A:1 ", "a"), ("B:2", "b")])
    edges = _tsv(
        tmp_path / "g_edges.tsv", ["subject", "predicate", "object"], [(" A:1", "p", "B:2"), ("B:2", " p ", "A:1")]
    )
    res = import_kgx(nodes, edges, tmp_path / "out")
    assert _triples(tmp_path / "out") == [("A:1", "predicate:0", "B:2"), ("B:2", "predicate:0", "A:1")]
    assert (tmp_path / "out" / "node_dict.txt").read_text() == "A:1\t0\nB:2\t1\n"  # one A:1, not two
    assert (res.stripped_ids, res.nodes_only_in_edges) == (3, 0)
    assert res.notes == [
        "removed the spaces around 3 ids: g_nodes.tsv:2 'A:1 ', g_edges.tsv:2 ' A:1', g_edges.tsv:3 ' p '"
    ]
