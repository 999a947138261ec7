"""KGX TSV (a header line, `|` between the values of a multivalued field, empty = absent) imports as
the same graph as its JSON Lines twin, file for file, and as the triples written out by hand; a
folder holding one pair is read as that pair; formats that are not read are named, with the
`kgx transform` that converts them, and never reported as invalid JSON."""

import gzip
import json

import pytest

from tests.conftest import run_cli, run_cli_error
from tracegraph.errors import DataError
from tracegraph.kg.data.kgx import import_kgx

NODES_TSV = (
    "id\tcategory\tname\txref\tprovided_by\n"
    "CHEBI:6801\tbiolink:SmallMolecule|biolink:ChemicalEntity\tmetformin\tDRUGBANK:DB00331|MESH:D008687\tinfores:a\n"
    "MONDO:0005148\tbiolink:Disease\ttype 2 diabetes mellitus\t\tinfores:a|infores:b\n"
    'NCBIGene:5562\t\tPRKAA1 "AMPK"\t\t\n'  # a quote is part of the value: KGX writes TSV unquoted
    "\n"
)
EDGES_TSV = (
    "id\tsubject\tpredicate\tobject\tobject_direction_qualifier\tpublications\tknowledge_level\n"
    "e1\tCHEBI:6801\tbiolink:treats\tMONDO:0005148\t\tPMID:1|PMID:2\tknowledge_assertion\n"
    "e2\tCHEBI:6801\tbiolink:affects\tNCBIGene:5562\tincreased\t\t\n"
    "e3\tCHEBI:6801\tbiolink:affects\tNCBIGene:5562\t\tPMID:3\t\n"
)
NODES_JSONL = [
    {"id": "CHEBI:6801", "category": ["biolink:SmallMolecule", "biolink:ChemicalEntity"], "name": "metformin"},
    {"id": "MONDO:0005148", "category": ["biolink:Disease"], "name": "type 2 diabetes mellitus"},
    {"id": "NCBIGene:5562", "name": 'PRKAA1 "AMPK"'},
]
EDGES_JSONL = [
    {"subject": "CHEBI:6801", "predicate": "biolink:treats", "object": "MONDO:0005148", "publications": ["PMID:1"]},
    {
        "subject": "CHEBI:6801",
        "predicate": "biolink:affects",
        "object": "NCBIGene:5562",
        "object_direction_qualifier": "increased",
    },
    {"subject": "CHEBI:6801", "predicate": "biolink:affects", "object": "NCBIGene:5562"},
]
# written out by hand: ids in sorted label order, relations in order of first appearance
EXPECTED = {
    "triples.txt": "CHEBI:6801\tpredicate:0\tMONDO:0005148\n"
    "CHEBI:6801\tpredicate:1\tNCBIGene:5562\n"
    "CHEBI:6801\tpredicate:2\tNCBIGene:5562\n",
    "node_dict.txt": "CHEBI:6801\t0\nMONDO:0005148\t1\nNCBIGene:5562\t2\n",
    "node_name_dict.txt": 'metformin\t0\ntype 2 diabetes mellitus\t1\nPRKAA1 "AMPK"\t2\n',
    "node_category.txt": "biolink:SmallMolecule\t0\nbiolink:Disease\t1\nbiolink:NamedThing\t2\n",
    "rel_dict.txt": "predicate:0\t0\npredicate:1\t1\npredicate:2\t2\n",
}
EXPECTED_EDGE_MAP = {
    '{"predicate": "biolink:treats"}': "predicate:0",
    '{"object_direction_qualifier": "increased", "predicate": "biolink:affects"}': "predicate:1",
    '{"predicate": "biolink:affects"}': "predicate:2",
}


def _outputs(folder):
    return {p.name: p.read_text() for p in folder.iterdir()}


def _write_pair(folder, prefix="graph", gz=False):
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for kind, text in (("nodes", NODES_TSV), ("edges", EDGES_TSV)):
        p = folder / f"{prefix}_{kind}.tsv{'.gz' if gz else ''}"
        p.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
        paths.append(p)
    return paths


@pytest.mark.parametrize("gz", [False, True], ids=["tsv", "tsv.gz"])
def test_a_tsv_pair_imports_as_written_by_hand_and_as_its_json_lines_twin(tmp_path, gz):
    nodes, edges = _write_pair(tmp_path / "tsv", gz=gz)
    res = import_kgx(nodes, edges, tmp_path / "from_tsv")
    assert (res.triples, res.entities, res.relations, res.notes) == (3, 3, 3, [])
    got = _outputs(tmp_path / "from_tsv")
    assert json.loads(got.pop("edge_map.json")) == EXPECTED_EDGE_MAP
    assert got == EXPECTED
    (tmp_path / "n.jsonl").write_text("".join(json.dumps(x) + "\n" for x in NODES_JSONL))
    (tmp_path / "e.jsonl").write_text("".join(json.dumps(x) + "\n" for x in EDGES_JSONL))
    import_kgx(tmp_path / "n.jsonl", tmp_path / "e.jsonl", tmp_path / "from_jsonl")
    assert _outputs(tmp_path / "from_jsonl") == _outputs(tmp_path / "from_tsv")


def test_a_folder_holding_one_pair_is_read_as_that_pair(tmp_path):
    _write_pair(tmp_path / "export", prefix="robokop")
    (tmp_path / "export" / "README.md").write_text("about the export\n")
    res = run_cli(["data", "import-kgx", tmp_path / "export", "-o", tmp_path / "kg"])
    assert res.exit_code == 0, res.output
    assert res.stdout == f"3 triples, 3 entities, 3 relations -> {tmp_path / 'kg'}\n"
    export = tmp_path / "export"
    assert res.stderr == f"reading {export / 'robokop_nodes.tsv'} and {export / 'robokop_edges.tsv'}\n"
    got = _outputs(tmp_path / "kg")
    del got["edge_map.json"]
    assert got == EXPECTED


def test_a_folder_without_exactly_one_pair_is_refused_naming_what_it_holds(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    run_cli_error(["data", "import-kgx", d, "-o", tmp_path / "kg"], tmp_path, contains="no *_nodes.tsv or *nodes.jsonl")
    _write_pair(d, prefix="a")
    _write_pair(d, prefix="b")
    run_cli_error(
        ["data", "import-kgx", d, "-o", tmp_path / "kg"],
        tmp_path,
        contains=f"{d}: holds 2 nodes files (a_nodes.tsv, b_nodes.tsv): give the nodes and edges files themselves",
    )
    nodes, edges = _write_pair(tmp_path / "one")
    run_cli_error(
        ["data", "import-kgx", tmp_path / "one", edges, "-o", tmp_path / "kg"], tmp_path, contains="is a folder"
    )
    run_cli_error(["data", "import-kgx", nodes, "-o", tmp_path / "kg"], tmp_path, contains="give the edges file")
    run_cli_error(
        ["data", "import-kgx", tmp_path / "nope", "-o", tmp_path / "kg"],
        tmp_path,
        contains=f"{tmp_path / 'nope'}: KGX nodes file or folder not found",
    )


def test_windows_line_ends_leave_no_carriage_return_in_any_field(tmp_path):
    nodes, edges = _write_pair(tmp_path)
    for p in (nodes, edges):
        p.write_bytes(p.read_bytes().replace(b"\n", b"\r\n"))
    import_kgx(nodes, edges, tmp_path / "out")
    got = _outputs(tmp_path / "out")
    del got["edge_map.json"]
    assert got == EXPECTED


def test_a_tsv_file_named_jsonl_is_read_as_tsv(tmp_path):
    nodes, edges = _write_pair(tmp_path)
    (tmp_path / "nodes.jsonl").write_text(nodes.read_text())
    import_kgx(tmp_path / "nodes.jsonl", edges, tmp_path / "out")
    assert (tmp_path / "out" / "triples.txt").read_text() == EXPECTED["triples.txt"]


KGX_JSON = {"nodes": [NODES_JSONL[0]], "edges": []}
CONVERT = "kgx transform --input-format {} --output-format tsv --output OUT"
NOT_READ = {
    "graph.json": (json.dumps(KGX_JSON, indent=2), 'KGX JSON (one object with "nodes" and "edges" lists) is not read'),
    "one-line.json": (json.dumps(KGX_JSON), "KGX JSON"),
    "array.json": (json.dumps([NODES_JSONL[0]]), "KGX JSON"),
    "nodes.csv": ("id,name\nA:1,a\n", "this looks like CSV (comma-separated); KGX TSV is tab-separated"),
    "nodes.nt": ("<http://a> <http://b> <http://c> .\n", "RDF (N-Triples, Turtle or OWL) is not read"),
    "nodes.txt": ("id\n", "cannot tell the format"),
}


@pytest.mark.parametrize("name", sorted(NOT_READ))
def test_a_format_not_read_is_named_with_its_conversion(tmp_path, name):
    text, words = NOT_READ[name]
    _, edges = _write_pair(tmp_path)
    (tmp_path / name).write_text(text)
    with pytest.raises(DataError) as e:
        import_kgx(tmp_path / name, edges, tmp_path / "out")
    message = str(e.value)
    assert message.startswith(f"{tmp_path / name}: {words}"), message
    assert "invalid JSON" not in message
    fmt = {"json": "json", "csv": "csv", "nt": "nt"}.get(name.rsplit(".", 1)[1])
    if fmt:
        assert CONVERT.format(fmt) in message
    assert not (tmp_path / "out").exists()


def test_an_archive_is_refused_with_how_to_unpack_it(tmp_path):
    (tmp_path / "export.tar.gz").write_bytes(gzip.compress(b"not really a tar"))
    _, edges = _write_pair(tmp_path)
    with pytest.raises(DataError, match=r"export\.tar\.gz: an archive, not a KGX file: unpack it \(tar -xzf"):
        import_kgx(tmp_path / "export.tar.gz", edges, tmp_path / "out")


@pytest.mark.parametrize(
    "which, text, line, words",
    [
        ("nodes", "id\tname\nA:1\ta\nB:2\n", 3, "expected 2 tab-separated fields (as the header line has), found 1"),
        ("nodes", "id\tname\nA:1\ta\textra\n", 2, "expected 2 tab-separated fields"),
        ("nodes", "name\tcategory\na\tb\n", 1, "the header line has no 'id' column (it names name, category)"),
        ("nodes", "id\tname\tid\nA\ta\tA\n", 1, "the header line names column 'id' twice"),
        ("nodes", "id\tname\n\ta\n", 2, "field 'id' missing or not a non-empty string"),
        ("nodes", "id\tname\n", None, "KGX TSV file is empty (a header line only)"),
        ("edges", "subject\tobject\nA\tB\n", 1, "the header line has no 'predicate' column"),
        ("edges", "subject\tpredicate\tobject\n\nA:1\tp\t\n", 3, "field 'object' missing or not a non-empty string"),
    ],
)
def test_bad_tsv_lines_name_the_file_and_line_and_write_nothing(tmp_path, which, text, line, words):
    nodes, edges = _write_pair(tmp_path)
    target = nodes if which == "nodes" else edges
    target.write_text(text)
    with pytest.raises(DataError) as e:
        import_kgx(nodes, edges, tmp_path / "out")
    assert str(e.value).startswith(f"{target}:{line}: {words}" if line else f"{target}: {words}"), str(e.value)
    assert not (tmp_path / "out").exists()
