"""Readable names of a run's entities and relations, from the label files beside its training file.

``tracegraph data import-kgx`` writes ``node_name_dict.txt`` (name<TAB>index of its ``node_dict.txt``)
and ``edge_map.json`` (predicate and qualifiers -> relation label ``predicate:N``) next to
``triples.txt``. ``train`` records those files in ``config.json`` (``label_files``: path, path from
the run directory, sha256, as for the data files), so a run knows its names wherever it is opened.
Names are a convenience: a label file that is gone or changed is left out with a warning.

``edge_map.json`` is a JSON object: key = JSON string of the edge's qualifier object, value = the
relation label used in the triples (e.g. ``predicate:7``).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path

from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.data.datafiles import record_data_files, sha256_of
from tracegraph.kg.data.idmap import IdMap, UnknownLabelError, read_name_dict
from tracegraph.runtime.checkpoints import atomic_write_json, read_json

#: the label files looked for beside a training file, by the key config.json records them under
LABEL_FILES = {"node_names": "node_name_dict.txt", "node_dict": "node_dict.txt", "edge_map": "edge_map.json"}


def record_label_files(train_file: str | Path, run_dir: str | Path) -> dict:
    """``config.json``'s ``label_files``: those of :data:`LABEL_FILES` beside ``train_file``.

    Args:
        train_file: the run's training triples.
        run_dir: the run directory (for the relative paths).

    Returns:
        ``{key: {"path", "relative", "sha256"}}`` of the files found; empty when none is there.
    """
    folder = Path(train_file).parent
    found = {k: folder / name for k, name in LABEL_FILES.items() if (folder / name).is_file()}
    if "node_names" not in found:
        found.pop("node_dict", None)  # only needed to read the names' indices
    return record_data_files(found, run_dir)


@dataclass
class RunLabels:
    """Entity and relation labels -> readable names (only those the run's label files give).

    :meth:`entity` and :meth:`relation` turn what a user typed (a label, a name, a predicate) into
    the run's label; :mod:`tracegraph.kg.data.questions` resolves whole questions with them.
    """

    entity_names: dict[str, str] = field(default_factory=dict)
    relation_names: dict[str, str] = field(default_factory=dict)
    # name -> labels, rebuilt when entity_names is replaced (tests and callers may assign a new dict)
    _by_name: tuple = field(default=(None, 0, {}), init=False, repr=False, compare=False)

    def relation(self, text: str, relations: IdMap) -> str:
        """The relation label that ``text`` means.

        Args:
            text: A relation label itself (``predicate:4``), or a readable relation
                (``biolink:treats``, or ``biolink:affects (object_direction_qualifier=increased)``).
            relations: The run's relation id map.

        Returns:
            The relation label.

        Raises:
            TracegraphError: If no relation, or several, go by that name (an unknown one names the
                closest labels and names).
        """
        if text in relations:
            return text
        exact = [lab for lab, name in self.relation_names.items() if name == text and lab in relations]
        by_predicate = [
            lab for lab, name in self.relation_names.items() if _predicate(name) == text and lab in relations
        ]
        hits = exact or by_predicate
        if len(hits) == 1:
            return hits[0]
        if hits:
            shown = "; ".join(f"{h} = {self.relation_names[h]}" for h in hits)
            raise TracegraphError(
                f"relation {text!r} names {len(hits)} relations (its qualifiers differ): {shown}; "
                f"give one of their labels"
            )
        named: dict[str, list[str]] = {}
        for lab, name in self.relation_names.items():
            for key in {name, _predicate(name)} if lab in relations else ():
                named.setdefault(key, []).append(lab)
        raise _unknown(text, "relation", relations, named)

    def entity(self, text: str, entities: IdMap) -> str:
        """The entity label that ``text`` means: a label itself, or a name only one entity has (in any case).

        Args:
            text: An entity label or name.
            entities: The run's entity id map.

        Returns:
            The entity label.

        Raises:
            TracegraphError: If no entity, or several, go by that name (an unknown one names the
                closest labels and names).
        """
        if text in entities:
            return text
        by_name = self._entities_by_name()
        hits = by_name.get(text, [])
        if not hits:  # a name as typed in lower case ("hypercholesterolemia"), when its case is all that differs
            hits = [lab for name, labs in by_name.items() if name.casefold() == text.casefold() for lab in labs]
        if len(hits) == 1:
            return hits[0]
        if hits:
            raise TracegraphError(
                f"entity {text!r} is the name of {len(hits)} entities ({', '.join(hits[:5])}); give its label"
            )
        raise _unknown(text, "entity", entities, by_name)

    def _entities_by_name(self) -> dict[str, list[str]]:
        names, size, index = self._by_name
        if names is not self.entity_names or size != len(names):  # built again for a new or grown dict
            index = {}
            for lab, name in self.entity_names.items():
                index.setdefault(name, []).append(lab)
            self._by_name = (self.entity_names, len(self.entity_names), index)
        return index


def _predicate(name: str) -> str:
    """A readable relation up to its first qualifier bracket: ``biolink:affects (…)`` -> ``biolink:affects``."""
    return name.split(" (", 1)[0]


def _unknown(text: str, what: str, idmap: IdMap, named: dict[str, list[str]]) -> UnknownLabelError:
    """The error for ``text`` that is neither a label nor a name: the closest labels and names (difflib)."""
    close = difflib.get_close_matches(str(text), [*idmap.labels, *named], n=3, cutoff=0.6)
    shown = []
    for c in close:
        if c in idmap:
            shown.append(repr(c))
        else:
            labels = named[c]
            shown.append(f"{c!r} ({', '.join(labels[:3])}{', …' if len(labels) > 3 else ''})")
    hint = f"; closest: {', '.join(shown)}" if shown else ""
    return UnknownLabelError(f"{what} {text!r} is not in the id map{hint}")


def run_labels(run_dir: str | Path, config: dict, entities: IdMap) -> RunLabels:
    """The names a run's recorded label files give its entities and relations.

    Args:
        run_dir: the run directory, where it is now.
        config: its ``config.json``.
        entities: the run's entity id map.

    Returns:
        The names; empty maps for a run without label files (or with ones gone or changed).
    """
    files = _resolve(Path(run_dir), config.get("label_files") or {})
    labels = RunLabels()
    if "edge_map" in files:
        labels.relation_names = read_edge_map(files["edge_map"])
    if "node_names" in files:
        by_index = read_name_dict(files["node_names"])
        order = IdMap.read(files["node_dict"], "entity map").labels if "node_dict" in files else entities.labels
        labels.entity_names = {order[i]: name for i, name in by_index.items() if i < len(order)}
    return labels


def _resolve(run_dir: Path, recorded: dict) -> dict[str, Path]:
    from tracegraph.runtime.progress import log

    out = {}
    for key, entry in recorded.items():
        for c in (Path(entry["path"]), (run_dir / entry["relative"]).resolve()):
            try:
                if c.is_file() and sha256_of(c) == entry["sha256"]:
                    out[key] = c
                    break
            except (OSError, DataError):
                continue
        else:
            log.warning(
                f"{entry['path']}: the run's {key.replace('_', ' ')} file is missing or changed; "
                f"labels are shown without its names"
            )
    if "node_names" in out and "node_dict" in recorded and "node_dict" not in out:
        del out["node_names"]  # names by the index of a node_dict that is gone: they would be misplaced
    return out


# --------------------------------------------------------------------------- edge maps


def read_edge_map(path: str | Path) -> dict[str, str]:
    """Read ``edge_map.json`` into ``{relation label (e.g. "predicate:7"): readable description}``.

    Args:
        path: The file, a JSON object mapping a qualifier JSON key to a relation label.

    Returns:
        The descriptions by relation label (see :func:`describe_edge_key`).

    Raises:
        DataError: If the file is not such an object.
    """
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise DataError("edge map must be a JSON object {qualifier-json: relation label}", path)
    out: dict[str, str] = {}
    for key, label in raw.items():
        if not isinstance(label, str):
            raise DataError(f"value for key {key!r} must be a string relation label", path)
        out[label] = describe_edge_key(key)
    return out


def describe_edge_key(key: str) -> str:
    """Turn an edge-map key into a readable relation.

    For example ``{"predicate": "biolink:affects", "object_direction_qualifier": "increased"}``
    becomes ``biolink:affects (object_direction_qualifier=increased)``.

    Args:
        key: The JSON key; a key that is not a JSON object is returned unchanged.

    Returns:
        The readable relation.
    """
    try:
        obj = json.loads(key)
    except json.JSONDecodeError:
        return key
    if not isinstance(obj, dict):
        return key
    pred = obj.get("predicate", "")
    quals = [f"{k}={v}" for k, v in sorted(obj.items()) if k != "predicate"]
    return f"{pred} ({', '.join(quals)})" if quals else str(pred)


def write_edge_map(path: str | Path, edge_map: dict[str, str]) -> None:
    """Write an edge map (qualifier JSON key to relation label) as JSON, atomically.

    Args:
        path: The destination file.
        edge_map: The map.
    """
    atomic_write_json(path, edge_map)
