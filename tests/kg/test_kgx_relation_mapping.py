"""How KGX edges become relations: a relation is the predicate together with its qualifiers
(``qualified_predicate`` and every ``*_qualifier`` field); empty qualifiers count as absent, every
other field is irrelevant, labels are ``predicate:N`` in order of first appearance."""

import json
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracegraph.kg.data.kgx import import_kgx

PREDICATES = ["biolink:affects", "biolink:treats"]
QUALIFIERS = [
    "object_direction_qualifier",
    "qualified_predicate",
    "object_aspect_qualifier",
    "subject_form_or_variant_qualifier",
]
IRRELEVANT = ["publications", "knowledge_level", "primary_knowledge_source", "id", "qualifiers", "direction"]

edge = st.fixed_dictionaries(
    {
        "subject": st.sampled_from(["A:1", "A:2", "B:3"]),
        "predicate": st.sampled_from(PREDICATES),
        "object": st.sampled_from(["B:3", "C:4", "C:5"]),
    },
    optional={q: st.sampled_from(["increased", "decreased", "", None, "activity"]) for q in QUALIFIERS},
)
noise = st.dictionaries(
    st.sampled_from(IRRELEVANT),
    st.one_of(st.text(max_size=5), st.lists(st.integers(), max_size=2), st.none()),
    max_size=3,
)


def _write(d, edges):
    d.mkdir(parents=True, exist_ok=True)
    (d / "nodes.jsonl").write_text(json.dumps({"id": "A:1", "name": "x"}) + "\n")
    (d / "edges.jsonl").write_text("".join(json.dumps(e) + "\n" for e in edges))
    import_kgx(d / "nodes.jsonl", d / "edges.jsonl", d / "out")
    rel = [line.split("\t")[1] for line in (d / "out" / "triples.txt").read_text().splitlines()]
    return rel, json.loads((d / "out" / "edge_map.json").read_text())


def _key(e):
    """The relation's identity, restated: predicate + the non-empty qualifier fields."""
    return (e["predicate"], tuple(sorted((k, v) for k, v in e.items() if k in QUALIFIERS and v not in ("", None))))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    edges=st.lists(edge, min_size=1, max_size=12),
    extra=st.lists(noise, min_size=12, max_size=12),
    shuffle_seed=st.integers(0, 100),
)
def test_relations_are_predicate_plus_qualifiers_whatever_else_the_edge_holds(
    tmp_path_factory, edges, extra, shuffle_seed
):
    root = tmp_path_factory.mktemp("kgx")
    rel, emap = _write(root / "plain", edges)
    # same relation <=> same predicate and qualifiers
    for i in range(len(edges)):
        for j in range(len(edges)):
            assert (rel[i] == rel[j]) == (_key(edges[i]) == _key(edges[j]))
    # labels numbered by first appearance
    first = list(dict.fromkeys(_key(e) for e in edges))
    assert [f"predicate:{first.index(_key(e))}" for e in edges] == rel
    # edge_map: the sorted-key JSON of predicate + qualifiers -> label
    assert emap == {
        json.dumps({"predicate": p, **dict(q)}, sort_keys=True): f"predicate:{n}" for n, (p, q) in enumerate(first)
    }
    # irrelevant fields added and the fields of every edge written in another order: same relations
    rng = random.Random(shuffle_seed)
    noisy = []
    for e, x in zip(edges, extra):
        items = list({**x, **e}.items())
        rng.shuffle(items)
        noisy.append(dict(items))
    rel2, emap2 = _write(root / "noisy", noisy)
    assert rel2 == rel and emap2 == emap


def test_qualifier_fields_by_name():
    from tracegraph.kg.data.kgx import _is_qualifier

    assert _is_qualifier("qualified_predicate") and _is_qualifier("object_direction_qualifier")
    assert not _is_qualifier("qualifiers") and not _is_qualifier("qualifier_note") and not _is_qualifier("predicate")


def test_nodes_only_in_edges_get_their_id_as_name(tmp_path):
    (tmp_path / "nodes.jsonl").write_text(json.dumps({"id": "A:1", "name": "  two\twords ", "category": []}) + "\n")
    (tmp_path / "edges.jsonl").write_text(json.dumps({"subject": "A:1", "predicate": "p", "object": "Z:9"}) + "\n")
    res = import_kgx(tmp_path / "nodes.jsonl", tmp_path / "edges.jsonl", tmp_path / "out")
    assert (res.triples, res.entities, res.relations, res.nodes_only_in_edges) == (1, 2, 1, 1)
    names = (tmp_path / "out" / "node_name_dict.txt").read_text()
    ids = dict(line.split("\t") for line in (tmp_path / "out" / "node_dict.txt").read_text().splitlines())
    assert ids == {"A:1": "0", "Z:9": "1"}  # sorted labels
    assert "two words" in names and "Z:9" in names
    cats = (tmp_path / "out" / "node_category.txt").read_text().splitlines()
    assert cats == ["biolink:NamedThing\t0", "biolink:NamedThing\t1"]
