"""KGX import refuses bad input with one message naming the file and line, and writes nothing;
good input around blank lines and odd node fields imports as documented."""

import json

import pytest

from tracegraph.errors import DataError
from tracegraph.kg.data.kgx import import_kgx

NODE = json.dumps({"id": "A:1", "name": "a"})
EDGE = json.dumps({"subject": "A:1", "predicate": "p", "object": "A:1"})


def _run(tmp_path, nodes, edges):
    (tmp_path / "nodes.jsonl").write_text(nodes)
    (tmp_path / "edges.jsonl").write_text(edges)
    return import_kgx(tmp_path / "nodes.jsonl", tmp_path / "edges.jsonl", tmp_path / "out")


@pytest.mark.parametrize(
    "which, text, line, message",
    [
        ("nodes", "", None, "JSON Lines file is empty"),
        ("nodes", "\n  \n", None, "JSON Lines file is empty"),
        ("nodes", NODE + "\n{broken\n", 2, "invalid JSON: "),
        ("nodes", NODE + "\n[1, 2]\n", 2, "each line must be a JSON object"),
        ("nodes", NODE + "\n" + json.dumps({"id": "A:1"}) + "\n", None, "rows with the same id differ for 1 node"),
        ("nodes", json.dumps({"name": "x"}) + "\n", 1, "field 'id' missing or not a non-empty string"),
        ("nodes", json.dumps({"id": 5}) + "\n", 1, "field 'id' missing or not a non-empty string"),
        ("nodes", json.dumps({"id": "  "}) + "\n", 1, "field 'id' missing or not a non-empty string"),
        ("nodes", json.dumps({"id": "a\tb"}) + "\n", 1, "field 'id' contains a tab or newline"),
        ("nodes", json.dumps({"id": "a\nb"}) + "\n", 1, "field 'id' contains a tab or newline"),
        (
            "edges",
            "\n" + EDGE + "\n" + json.dumps({"subject": "A:1", "object": "A:1"}) + "\n",
            3,
            "field 'predicate' missing or not a non-empty string",
        ),
        ("edges", json.dumps({"subject": "A:1", "predicate": "p"}) + "\n", 1, "field 'object' missing"),
        ("edges", json.dumps({"predicate": "p", "object": "A:1"}) + "\n", 1, "field 'subject' missing"),
    ],
)
def test_bad_input_names_file_and_line_and_writes_nothing(tmp_path, which, text, line, message):
    nodes, edges = (text, EDGE + "\n") if which == "nodes" else (NODE + "\n", text)
    with pytest.raises(DataError) as e:
        _run(tmp_path, nodes, edges)
    where = f"{tmp_path / (which + '.jsonl')}:{line}: " if line else f"{tmp_path / (which + '.jsonl')}: "
    assert str(e.value).startswith(where + message), str(e.value)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "out").exists()


def test_node_fields_by_hand(tmp_path):
    nodes = "\n".join(
        [
            json.dumps({"id": "A:1", "name": "  spaced\tname  ", "category": ["biolink:Drug", "biolink:X"]}),
            json.dumps({"id": "B:2", "name": "   ", "category": []}),
            json.dumps({"id": "C:3", "name": 7, "category": "biolink: Gene"}),  # whitespace folded away
            "",
        ]
    )
    edges = (
        "\n".join(
            [
                json.dumps({"subject": "A:1", "predicate": "p", "object": "B:2"}),
                json.dumps({"subject": "C:3", "predicate": "p", "object": "A:1"}),
            ]
        )
        + "\n"
    )
    res = _run(tmp_path, nodes, edges)
    assert (res.triples, res.entities, res.relations, res.nodes_only_in_edges) == (2, 3, 1, 0)
    names = (tmp_path / "out" / "node_name_dict.txt").read_text().splitlines()
    assert names == ["spaced name\t0", "B:2\t1", "C:3\t2"]  # blank or non-string name: the id
    cats = (tmp_path / "out" / "node_category.txt").read_text().splitlines()
    assert cats == ["biolink:Drug\t0", "biolink:NamedThing\t1", "biolink:Gene\t2"]
    assert (tmp_path / "out" / "triples.txt").read_text() == "A:1\tpredicate:0\tB:2\nC:3\tpredicate:0\tA:1\n"
    assert (tmp_path / "out" / "rel_dict.txt").read_text() == "predicate:0\t0\n"


def test_missing_or_undecodable_file_is_named_as_a_json_lines_file(tmp_path):
    (tmp_path / "edges.jsonl").write_text(EDGE + "\n")
    with pytest.raises(DataError, match=r"nodes\.jsonl: JSON Lines file not found$"):
        import_kgx(tmp_path / "nodes.jsonl", tmp_path / "edges.jsonl", tmp_path / "out")
    (tmp_path / "nodes.jsonl").write_bytes(NODE.encode() + b"\n\xff\xfe\n")
    with pytest.raises(DataError, match=r"nodes\.jsonl:2: not valid UTF-8"):
        import_kgx(tmp_path / "nodes.jsonl", tmp_path / "edges.jsonl", tmp_path / "out")
