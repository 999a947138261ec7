"""KGX JSON Lines import (the format ROBOKOP ships).

nodes.jsonl + edges.jsonl -> triples.txt, node_dict.txt, node_name_dict.txt, rel_dict.txt,
edge_map.json, node_category.txt.

A relation is a predicate together with its qualifiers: edges with the same predicate but other
qualifier values become different relations. The relation label is ``predicate:N`` and
``edge_map.json`` maps the JSON of ``{"predicate": ..., <qualifiers>}`` (sorted keys) to it.
Qualifier fields are ``qualified_predicate`` and every field whose name ends in ``_qualifier``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tracegraph.errors import DataError
from tracegraph.kg.data.split import write_triples
from tracegraph.kg.data.triples import IdMap, read_text, write_edge_map, write_name_dict
from tracegraph.runtime.checkpoints import atomic_write_text


def _is_qualifier(key: str) -> bool:
    return key == "qualified_predicate" or key.endswith("_qualifier")


def _jsonl(path: str | Path):
    text = read_text(path, "JSON Lines file")
    any_row = False
    for no, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"invalid JSON: {e.msg}", path, no) from None
        if not isinstance(obj, dict):
            raise DataError("each line must be a JSON object", path, no)
        any_row = True
        yield no, obj
    if not any_row:
        raise DataError("JSON Lines file is empty", path)


def _str_field(obj: dict, key: str, path, no) -> str:
    v = obj.get(key)
    if not isinstance(v, str) or not v.strip():
        raise DataError(f"field {key!r} missing or not a non-empty string", path, no)
    if "\t" in v or "\n" in v:
        raise DataError(f"field {key!r} contains a tab or newline", path, no)
    return v


@dataclass
class KGXImport:
    """Counts from a KGX import.

    Attributes:
        triples: Edges written as triples.
        entities: Distinct nodes.
        relations: Distinct relations (predicate with its qualifiers).
        nodes_only_in_edges: Nodes named by an edge but missing from the nodes file (their id is
            used as their name).
    """

    triples: int
    entities: int
    relations: int
    nodes_only_in_edges: int


def import_kgx(nodes_path: str | Path, edges_path: str | Path, out_dir: str | Path) -> KGXImport:
    """Convert KGX JSON-lines node and edge files into a triples file and its label files.

    Each distinct predicate with its qualifiers becomes one relation ``predicate:N``. Written into
    ``out_dir``: ``triples.txt``, ``node_dict.txt``, ``rel_dict.txt``, ``node_name_dict.txt``,
    ``node_category.txt`` and ``edge_map.json``.

    Args:
        nodes_path: The KGX nodes file (``.jsonl``; objects with ``id``, optional ``name``, ``category``).
        edges_path: The KGX edges file (objects with ``subject``, ``predicate``, ``object``).
        out_dir: The directory to write into.

    Returns:
        The import's counts.

    Raises:
        DataError: If a line is not a JSON object, a required field is missing or holds a tab or
            newline, or a node id repeats.
    """
    names: dict[str, str] = {}
    categories: dict[str, str] = {}
    for no, obj in _jsonl(nodes_path):
        nid = _str_field(obj, "id", nodes_path, no)
        if nid in names:
            raise DataError(f"duplicate node id {nid!r}", nodes_path, no)
        name = obj.get("name")
        # names go into a TAB-separated file: fold any whitespace run to one space
        names[nid] = " ".join(name.split()) if isinstance(name, str) and name.strip() else nid
        cat = obj.get("category")
        if isinstance(cat, list):
            cat = cat[0] if cat else ""
        categories[nid] = "".join(cat.split()) if isinstance(cat, str) and cat.strip() else "biolink:NamedThing"

    rel_of_key: dict[str, str] = {}
    rows: list[tuple[str, str, str]] = []
    only_in_edges: set[str] = set()
    for no, obj in _jsonl(edges_path):
        s = _str_field(obj, "subject", edges_path, no)
        p = _str_field(obj, "predicate", edges_path, no)
        o = _str_field(obj, "object", edges_path, no)
        quals = {k: v for k, v in obj.items() if _is_qualifier(k) and v not in (None, "", [])}
        key = json.dumps({"predicate": p, **quals}, sort_keys=True)
        rel = rel_of_key.setdefault(key, f"predicate:{len(rel_of_key)}")
        for n in (s, o):
            if n not in names:
                only_in_edges.add(n)
        rows.append((s, rel, o))

    for n in only_in_edges:  # keep the edge; the node gets its id as name
        names[n] = n
        categories[n] = "biolink:NamedThing"
    entities = IdMap.from_labels(names)
    relations = IdMap(list(rel_of_key.values()))
    out = Path(out_dir)
    write_triples(out / "triples.txt", rows)
    entities.write(out / "node_dict.txt")
    relations.write(out / "rel_dict.txt")
    write_name_dict(out / "node_name_dict.txt", {i: names[lab] for i, lab in enumerate(entities.labels)})
    atomic_write_text(
        out / "node_category.txt", "".join(f"{categories[lab]}\t{i}\n" for i, lab in enumerate(entities.labels))
    )
    write_edge_map(out / "edge_map.json", rel_of_key)
    return KGXImport(len(rows), len(entities), len(relations), len(only_in_edges))
