"""KGX import: a nodes file and an edges file (KGX TSV or JSON Lines) -> a triples file and its labels.

Writes triples.txt, node_dict.txt, node_name_dict.txt, rel_dict.txt, edge_map.json and
node_category.txt, all at once or (on an error) none of them.

A relation is a predicate together with its qualifiers: edges with the same predicate but other
qualifier values become different relations. The relation label is ``predicate:N`` and
``edge_map.json`` maps the JSON of ``{"predicate": ..., <qualifiers>}`` (sorted keys) to it.
Qualifier fields are ``qualified_predicate`` and every field whose name ends in ``_qualifier``.

What the import changes or leaves out is said in :attr:`KGXImport.notes`: negated edges (they state
that a relation does *not* hold, so they are no training facts), node rows that repeat an earlier
row exactly (merged), ids with spaces around them (stripped: ``" MONDO:1"`` is ``MONDO:1``), and
nodes named only by edges (kept, named by their id).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tracegraph.errors import DataError
from tracegraph.kg.data.kgx_read import read_records
from tracegraph.kg.data.split import write_triples
from tracegraph.kg.data.idmap import IdMap, write_name_dict
from tracegraph.kg.data.labels import write_edge_map
from tracegraph.runtime.checkpoints import atomic_write_text
from tracegraph.runtime.outfolder import check_output_folder, staged_folder

#: how many examples a note or an error lists before "and N more"
SHOWN = 5
TRUE, FALSE = {"true", "t", "yes", "1"}, {"false", "f", "no", "0", ""}


def _is_qualifier(key: str) -> bool:
    return key == "qualified_predicate" or key.endswith("_qualifier")


def counted(n: int, noun: str) -> str:
    """``1 edge``, ``2 edges``: a count with its noun."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def few(items: list[str]) -> str:
    """The first :data:`SHOWN` items joined by commas, then ``and N more``."""
    shown = ", ".join(items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def _id_field(rec: dict, key: str, path: Path, no: int, stripped: list[str]) -> str:
    v = rec.get(key)
    if not isinstance(v, str) or not v.strip():
        raise DataError(f"field {key!r} missing or not a non-empty string", path, no)
    if any(c in v for c in "\t\n\r"):
        raise DataError(f"field {key!r} contains a tab or newline", path, no)
    if v != v.strip():  # an export artefact: " MONDO:1" would otherwise be an entity of its own
        stripped.append(f"{path.name}:{no} {v!r}")
    return v.strip()


def _negated(rec: dict, path: Path, no: int) -> bool:
    v = rec.get("negated")
    if v is None or isinstance(v, bool):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in TRUE | FALSE:
        return v.strip().lower() in TRUE
    raise DataError(f"field 'negated' is {v!r}: expected true or false", path, no)


@dataclass
class KGXImport:
    """Counts from a KGX import, and what it changed or left out.

    Attributes:
        triples: Edges written as triples.
        entities: Distinct nodes.
        relations: Distinct relations (predicate with its qualifiers).
        nodes_only_in_edges: Nodes named by an edge but missing from the nodes file (their id is
            used as their name).
        negated_edges: Edges with ``negated: true``, left out.
        merged_node_rows: Node rows identical to an earlier row of the same id, merged into it.
        stripped_ids: Ids, subjects, objects and predicates with spaces around them, stripped.
        notes: One sentence for each of the above that happened, naming the first few cases.
    """

    triples: int
    entities: int
    relations: int
    nodes_only_in_edges: int
    negated_edges: int = 0
    merged_node_rows: int = 0
    stripped_ids: int = 0
    notes: list[str] = field(default_factory=list)


def _read_nodes(path: Path, stripped: list[str], notes: list[str]) -> tuple[dict[str, dict], int]:
    """Each node's record by id, and how many identical repeats were merged (differing ones are refused)."""
    first: dict[str, tuple[int, dict]] = {}
    conflicts: dict[str, list[int]] = {}
    merged: list[str] = []
    for no, rec in read_records(path, ("id",)):
        nid = _id_field(rec, "id", path, no, stripped)
        rec = {**rec, "id": nid}
        if nid not in first:
            first[nid] = (no, rec)
        elif rec == first[nid][1]:
            merged.append(f"{nid!r} (lines {first[nid][0]} and {no})")
        else:
            conflicts.setdefault(nid, [first[nid][0]]).append(no)
    if conflicts:
        listed = [
            f"{nid!r} (lines {', '.join(map(str, lines[:3]))}{', …' if len(lines) > 3 else ''})"
            for nid, lines in conflicts.items()
        ]
        raise DataError(
            f"rows with the same id differ for {counted(len(conflicts), 'node')}, so which one holds is unclear: "
            f"{few(listed)}; keep one row per id",
            path,
        )
    if merged:
        notes.append(
            f"merged {counted(len(merged), 'node row')} of {path.name} repeating an earlier row exactly: {few(merged)}"
        )
    return {nid: rec for nid, (_, rec) in first.items()}, len(merged)


def _name(rec: dict, nid: str) -> str:
    name = rec.get("name")
    # names go into a TAB-separated file: fold any whitespace run to one space
    return " ".join(name.split()) if isinstance(name, str) and name.strip() else nid


def _category(rec: dict) -> str:
    cat = rec.get("category")
    if isinstance(cat, list):
        cat = cat[0] if cat else ""
    return "".join(cat.split()) if isinstance(cat, str) and cat.strip() else "biolink:NamedThing"


def _read_edges(path: Path, nodes: dict, stripped: list[str], notes: list[str]):
    """The kept edges as ``(subject, relation label, object)``, the relation keys, and the nodes only edges name."""
    rel_of_key: dict[str, str] = {}
    rows: list[tuple[str, str, str]] = []
    negated: list[str] = []
    only_in_edges: dict[str, int] = {}  # node -> the first line naming it
    for no, rec in read_records(path, ("subject", "predicate", "object")):
        s, p, o = (_id_field(rec, k, path, no, stripped) for k in ("subject", "predicate", "object"))
        if _negated(rec, path, no):
            negated.append(f"line {no} ({s} {p} {o})")
            continue
        quals = {k: v for k, v in rec.items() if _is_qualifier(k) and v not in (None, "", [])}
        key = json.dumps({"predicate": p, **quals}, sort_keys=True)
        rel = rel_of_key.setdefault(key, f"predicate:{len(rel_of_key)}")
        for n in (s, o):
            if n not in nodes:
                only_in_edges.setdefault(n, no)
        rows.append((s, rel, o))
    if negated:
        notes.append(
            f"left out {counted(len(negated), 'negated edge')} of {path.name} (negated: true says the relation does not "
            f"hold, so they are no training facts): {few(negated)}"
        )
        if not rows:
            raise DataError(f"every edge is negated ({len(negated)}): no training facts are left", path)
    if only_in_edges:
        named = [f"{n!r} (line {no})" for n, no in only_in_edges.items()]
        notes.append(
            f"{counted(len(only_in_edges), 'node')} only in edges of {path.name}, not in the nodes file; "
            f"kept, named by their id: {few(named)}"
        )
    return rows, rel_of_key, list(only_in_edges), len(negated)


def import_kgx(nodes_path: str | Path, edges_path: str | Path, out_dir: str | Path) -> KGXImport:
    """Convert KGX node and edge files (TSV or JSON Lines) into a triples file and its label files.

    Each distinct predicate with its qualifiers becomes one relation ``predicate:N``. Written into
    ``out_dir``: ``triples.txt``, ``node_dict.txt``, ``rel_dict.txt``, ``node_name_dict.txt``,
    ``node_category.txt`` and ``edge_map.json``, all at once or none.

    Args:
        nodes_path: The KGX nodes file: ``*_nodes.tsv`` (columns ``id``, optional ``name`` and
            ``category``, ``|`` between values) or ``.jsonl`` (objects with the same fields);
            ``.gz`` too.
        edges_path: The KGX edges file (``subject``, ``predicate``, ``object``, optional
            qualifiers and ``negated``), in either format.
        out_dir: The folder to write into.

    Returns:
        The import's counts and notes.

    Raises:
        DataError: If a file is in another format, a line is malformed, a required field is missing
            or holds a tab or newline, node rows with the same id differ, or every edge is negated.
        TracegraphError: If ``out_dir`` is a file or cannot be written.
    """
    check_output_folder(out_dir)
    nodes_path, edges_path = Path(nodes_path), Path(edges_path)
    stripped: list[str] = []
    notes: list[str] = []
    nodes, n_merged = _read_nodes(nodes_path, stripped, notes)
    rows, rel_of_key, only_in_edges, n_negated = _read_edges(edges_path, nodes, stripped, notes)
    if stripped:
        notes.insert(0, f"removed the spaces around {counted(len(stripped), 'id')}: {few(stripped)}")
    names = {nid: _name(rec, nid) for nid, rec in nodes.items()} | {n: n for n in only_in_edges}
    categories = {nid: _category(rec) for nid, rec in nodes.items()} | {n: "biolink:NamedThing" for n in only_in_edges}
    entities = IdMap.from_labels(names)
    relations = IdMap(list(rel_of_key.values()))
    with staged_folder(out_dir) as out:
        write_triples(out / "triples.txt", rows)
        entities.write(out / "node_dict.txt")
        relations.write(out / "rel_dict.txt")
        write_name_dict(out / "node_name_dict.txt", {i: names[lab] for i, lab in enumerate(entities.labels)})
        atomic_write_text(
            out / "node_category.txt", "".join(f"{categories[lab]}\t{i}\n" for i, lab in enumerate(entities.labels))
        )
        write_edge_map(out / "edge_map.json", rel_of_key)
    return KGXImport(
        len(rows),
        len(entities),
        len(relations),
        len(only_in_edges),
        negated_edges=n_negated,
        merged_node_rows=n_merged,
        stripped_ids=len(stripped),
        notes=notes,
    )
