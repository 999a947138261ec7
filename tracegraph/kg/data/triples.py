r"""Reading knowledge-graph triples and id maps, reciprocal relations, and the known-tails index.

File formats (the ones researchers already have):

triples
    ``head<TAB>relation<TAB>tail`` per line, no header.
node_dict.txt
    ``label<TAB>index`` (also rel_dict.txt); indices are 0..n-1.
node_name_dict
    ``name<TAB>index`` (readable names; names may repeat, indices may not).
edge_map.json
    JSON object: key = JSON string of the edge's qualifier object, value = the relation label
    used in the triples (e.g. ``predicate:7``).

Every reader raises :class:`~tracegraph.errors.DataError` naming the file and line.
Blank lines are ignored; a trailing ``\r`` (Windows line ends) is removed.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from tracegraph.errors import DataError, require_file
from tracegraph.runtime.checkpoints import atomic_write_json, atomic_write_text
from tracegraph.runtime.textfiles import strip_bom


# --------------------------------------------------------------------------- raw text


def read_text(path: str | Path, what: str = "file") -> str:
    """A file's UTF-8 text; a ``.gz`` file is decompressed first, a byte-order mark removed with a note.

    Args:
        path: The file.
        what: What the file is, for error messages.

    Returns:
        The text.

    Raises:
        DataError: If the file is missing, not valid gzip, or not UTF-8 (naming the line).
    """
    p = require_file(path, what)
    data = p.read_bytes()
    if p.name.endswith(".gz"):
        import gzip
        import zlib

        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise DataError(f"not a readable gzip file ({e})", p) from None
    try:
        return strip_bom(data.decode("utf-8"), p)
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise DataError(f"not valid UTF-8 ({e.reason})", p, line) from None


def read_tsv(path: str | Path, ncols: int, what: str, header_hint: str) -> tuple[list[list[str]], np.ndarray]:
    """Split a tab-separated file into ``ncols`` non-empty fields per line; blank lines are skipped.

    Args:
        path: The file.
        ncols: Fields per line.
        what: What the file is, for error messages.
        header_hint: The expected layout, for error messages (e.g. ``"label<TAB>index"``).

    Returns:
        The ``ncols`` columns as lists of strings, and the 1-based line number of every row.

    Raises:
        DataError: If a line has another number of fields or an empty field, or the file is empty.
    """
    text = read_text(path, what)
    cols: list[list[str]] = [[] for _ in range(ncols)]
    lines: list[int] = []
    for no, line in enumerate(text.split("\n"), start=1):
        if line.endswith("\r"):
            line = line[:-1]
        if not line:
            continue
        parts = line.split("\t")
        if len(parts) != ncols:
            raise DataError(f"expected {ncols} tab-separated fields ({header_hint}), found {len(parts)}", path, no)
        for j, part in enumerate(parts):
            if not part.strip():
                raise DataError(f"field {j + 1} is empty ({header_hint})", path, no)
            cols[j].append(part)
        lines.append(no)
    if not lines:
        raise DataError(f"{what} is empty", path)
    return cols, np.asarray(lines, dtype=np.int64)


# --------------------------------------------------------------------------- id maps


class UnknownLabelError(DataError, KeyError):
    """A label that is not in an id map; the message names it and the closest known labels.

    Also a ``KeyError``, so ``except KeyError`` around :meth:`IdMap.id` keeps working.
    """

    def __str__(self) -> str:  # KeyError would print the message quoted
        return DataError.__str__(self)


class IdMap:
    """A bijection between string labels and integer ids 0..n-1.

    >>> m = IdMap(["aspirin", "headache", "ibuprofen"])
    >>> len(m), "aspirin" in m, list(m)[:2]
    (3, True, ['aspirin', 'headache'])
    >>> m.id("ibuprofen")
    2
    >>> m.id("ibuprofin")
    Traceback (most recent call last):
    ...
    tracegraph.kg.data.triples.UnknownLabelError: label 'ibuprofin' is not in the id map; closest: 'ibuprofen'
    """

    def __init__(self, labels: Sequence[str]):
        self.labels = list(labels)
        self._index = pd.Index(self.labels)
        if not self._index.is_unique:
            dup = self._index[self._index.duplicated()][0]
            raise DataError(f"duplicate label {dup!r} in id map")

    @classmethod
    def from_labels(cls, labels: Iterable[str]) -> "IdMap":
        """Build a map with ids in sorted label order, so the same data always gives the same ids.

        Args:
            labels: Labels; duplicates are merged.

        Returns:
            The map.
        """
        return cls(sorted(set(labels)))

    @classmethod
    def read(cls, path: str | Path, what: str = "id map") -> "IdMap":
        """Read a ``label<TAB>index`` file whose indices are exactly ``0..n-1``.

        Args:
            path: The file.
            what: What the file is, for error messages.

        Returns:
            The map.

        Raises:
            DataError: If a line is malformed, a label repeats, or the indices are not contiguous.
        """
        (labels, idx), lines = read_tsv(path, 2, what, "label<TAB>index")
        ids = _parse_indices(idx, path, lines)
        seen_label: dict[str, int] = {}
        for lab, ln in zip(labels, lines):
            if lab in seen_label:
                raise DataError(f"duplicate label {lab!r} (first on line {seen_label[lab]})", path, int(ln))
            seen_label[lab] = int(ln)
        ordered = _check_contiguous(ids, path, lines)
        return cls([labels[i] for i in ordered])

    def write(self, path: str | Path) -> None:
        """Write the map as ``label<TAB>index`` lines, atomically.

        Args:
            path: The destination file.
        """
        atomic_write_text(path, "".join(f"{lab}\t{i}\n" for i, lab in enumerate(self.labels)))

    def __len__(self) -> int:
        return len(self.labels)

    def __contains__(self, label: str) -> bool:
        return label in self._index

    def __iter__(self):
        return iter(self.labels)

    def __repr__(self) -> str:
        shown = ", ".join(repr(lab) for lab in self.labels[:3])
        return f"IdMap([{shown}{', …' if len(self) > 3 else ''}], {len(self)} labels)"

    def contains_all(self, labels: Sequence[str]) -> np.ndarray:
        """Which of ``labels`` are in the map.

        Args:
            labels: Labels to look up.

        Returns:
            Boolean mask, one entry per label.
        """
        if not len(labels):
            return np.zeros(0, bool)
        return self._index.get_indexer(pd.Index(labels, dtype=object)) >= 0

    def __eq__(self, other) -> bool:
        return isinstance(other, IdMap) and self.labels == other.labels

    def id(self, label: str, what: str = "label") -> int:
        """The id of one label.

        Args:
            label: The label.
            what: What the label is (``"entity"``, ``"relation"``), for the error message.

        Returns:
            The id.

        Raises:
            UnknownLabelError: If the label is not in the map (naming the closest known labels).
        """
        pos = self._index.get_indexer([label])[0]
        if pos < 0:
            raise self.unknown(label, what)
        return int(pos)

    def ids(self, labels: Iterable[str], what: str = "label") -> np.ndarray:
        """The ids of labels typed by hand (there is no file to point at).

        Args:
            labels: The labels.
            what: What the labels are, for the error message.

        Returns:
            int64 ids, one per label.

        Raises:
            UnknownLabelError: For the first label not in the map (naming its closest matches).
        """
        labels = list(labels)
        ids = self._index.get_indexer(pd.Index(labels, dtype=object)) if labels else np.zeros(0, np.int64)
        missing = np.flatnonzero(ids < 0)
        if missing.size:
            raise self.unknown(labels[int(missing[0])], what)
        return ids.astype(np.int64)

    def unknown(self, label, what: str = "label") -> UnknownLabelError:
        """The error for a label that is not here, with up to three similar known labels.

        Args:
            label: The missing label.
            what: What the label is, for the message.

        Returns:
            The error (for the caller to raise).
        """
        close = difflib.get_close_matches(str(label), self.labels, n=3, cutoff=0.6)
        hint = f"; closest: {', '.join(repr(c) for c in close)}" if close else ""
        return UnknownLabelError(f"{what} {label!r} is not in the id map{hint}")

    def encode(self, labels: Sequence[str], path=None, lines=None, what: str = "label") -> np.ndarray:
        """Map labels read from a file to ids.

        Args:
            labels: The labels.
            path: The file they came from, for the error message.
            lines: The 1-based line of every label, for the error message.
            what: What the labels are, for the error message.

        Returns:
            int64 ids, one per label.

        Raises:
            DataError: For the first label not in the map, naming the file and line.
        """
        ids = self._index.get_indexer(pd.Index(labels, dtype=object)) if len(labels) else np.zeros(0, np.int64)
        missing = np.flatnonzero(ids < 0)
        if missing.size:
            k = int(missing[0])
            line = int(lines[k]) if lines is not None else None
            more = f" (and {missing.size - 1} more)" if missing.size > 1 else ""
            raise DataError(f"{what} {labels[k]!r} is not in the id map{more}", path, line)
        return ids.astype(np.int64)

    def decode(self, ids: Iterable[int]) -> list[str]:
        """The labels of ``ids``.

        Args:
            ids: Ids in ``0..n-1``.

        Returns:
            One label per id.
        """
        return [self.labels[int(i)] for i in ids]


def _parse_indices(idx: list[str], path, lines) -> np.ndarray:
    out = np.empty(len(idx), dtype=np.int64)
    for k, (s, ln) in enumerate(zip(idx, lines)):
        s = s.strip()
        if not (s.isascii() and s.isdigit()):
            raise DataError(f"index {s!r} is not a non-negative integer", path, int(ln))
        out[k] = int(s)
    return out


def _check_contiguous(ids: np.ndarray, path, lines) -> np.ndarray:
    """Return, for each index 0..n-1, the row holding it; duplicates and gaps are errors."""
    n = len(ids)
    first: dict[int, int] = {}
    for k, (i, ln) in enumerate(zip(ids.tolist(), lines.tolist())):
        if i in first:
            raise DataError(f"duplicate index {i} (first on line {lines[first[i]]})", path, ln)
        first[i] = k
        if i >= n:
            raise DataError(f"index {i} out of range: {n} entries need indices 0..{n - 1}", path, ln)
    return np.asarray([first[i] for i in range(n)], dtype=np.int64)


def read_name_dict(path: str | Path) -> dict[int, str]:
    """Read a ``name<TAB>index`` file into ``{index: name}``; names may repeat, indices may not.

    Args:
        path: The file.

    Returns:
        The names by index.

    Raises:
        DataError: If a line is malformed or an index repeats.
    """
    (names, idx), lines = read_tsv(path, 2, "name dict", "name<TAB>index")
    ids = _parse_indices(idx, path, lines)
    out: dict[int, str] = {}
    for name, i, ln in zip(names, ids.tolist(), lines.tolist()):
        if i in out:
            raise DataError(f"duplicate index {i}", path, ln)
        out[i] = name
    return out


def write_name_dict(path: str | Path, names: dict[int, str]) -> None:
    """Write ``{index: name}`` as ``name<TAB>index`` lines in index order, atomically.

    Args:
        path: The destination file.
        names: The names by index.
    """
    atomic_write_text(path, "".join(f"{names[i]}\t{i}\n" for i in sorted(names)))


def read_edge_map(path: str | Path) -> dict[str, str]:
    """Read ``edge_map.json`` into ``{relation label (e.g. "predicate:7"): readable description}``.

    Args:
        path: The file, a JSON object mapping a qualifier JSON key to a relation label.

    Returns:
        The descriptions by relation label (see :func:`describe_edge_key`).

    Raises:
        DataError: If the file is not such an object.
    """
    from tracegraph.runtime.checkpoints import read_json

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


# --------------------------------------------------------------------------- triples


def triple_file_stem(index: int, head: str, tail: str, width: int = 3) -> str:
    r"""The stem ``triple_NNN_<head>_<tail>`` of every per-test-triple output file.

    ``:``, ``/``, ``\`` and whitespace in the labels become ``_``.

    Args:
        index: The test triple's index.
        head: The head label.
        tail: The tail label.
        width: Digits of the zero-padded index.

    Returns:
        The stem.
    """
    safe = lambda s: re.sub(r"[:/\\\s]", "_", s)  # noqa: E731
    return f"triple_{index:0{width}d}_{safe(head)}_{safe(tail)}"


@dataclass
class LabeledTriples:
    """Triples as labels, with the line each came from."""

    heads: list[str]
    relations: list[str]
    tails: list[str]
    lines: np.ndarray
    path: str

    def __len__(self) -> int:
        return len(self.heads)


#: the column names a header line of a triples file is made of, by column:
#: head (``head``, ``subject``, ``h`` …), relation (``relation``, ``predicate``, ``r`` …), tail
HEAD_WORDS = {"head", "subject", "source", "from", "h", "s", "head_id", "subject_id", "head_label"}
RELATION_WORDS = {"relation", "predicate", "rel", "edge", "type", "label", "r", "p", "relation_id", "relation_label"}
TAIL_WORDS = {"tail", "object", "target", "to", "t", "o", "tail_id", "object_id", "tail_label"}


def is_header(fields: Sequence[str]) -> bool:
    """Whether the fields name a head, a relation and a tail column, in that order (ignoring ``#:``).

    ``head relation tail``, ``subject predicate object`` and ``# h r t`` are headers; a triple whose
    labels happen to be column words in another order (``O O O``, ``t r h``) is data.

    Args:
        fields: The fields of a file's first line.

    Returns:
        True for a header line.
    """
    words = [f.strip("#: ").lower() for f in fields]
    return len(words) == 3 and words[0] in HEAD_WORDS and words[1] in RELATION_WORDS and words[2] in TAIL_WORDS


def read_labeled_triples(path: str | Path) -> LabeledTriples:
    """Read a ``head<TAB>relation<TAB>tail`` file; a first line of column names is skipped with a note.

    Args:
        path: The triples file (``.gz`` allowed).

    Returns:
        The triples as labels, with their lines.

    Raises:
        DataError: If the file is missing, malformed, or holds only a header line.
    """
    (h, r, t), lines = read_tsv(path, 3, "triples file", "head<TAB>relation<TAB>tail")
    if is_header((h[0], r[0], t[0])):
        from tracegraph.runtime.progress import log

        log.info(f"{path}:{lines[0]}: skipped the header line {h[0]!r} {r[0]!r} {t[0]!r}")
        h, r, t, lines = h[1:], r[1:], t[1:], lines[1:]
        if not len(lines):
            raise DataError("triples file holds only a header line", path)
    return LabeledTriples(h, r, t, lines, str(path))


def count_duplicates(lt: LabeledTriples) -> int:
    """The number of lines repeating the ``(head, relation, tail)`` of an earlier line.

    Args:
        lt: The triples.

    Returns:
        The count.
    """
    return len(lt) - len(set(zip(lt.heads, lt.relations, lt.tails)))


@dataclass
class TripleSet:
    """Integer triples ``ids[:, 0..2] = head, relation, tail`` with the maps that define them."""

    ids: np.ndarray
    entities: IdMap
    relations: IdMap
    path: str | None = None

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def num_entities(self) -> int:
        """Number of entities in the map."""
        return len(self.entities)

    @property
    def num_relations(self) -> int:
        """Number of relations in the map (without inverses)."""
        return len(self.relations)

    def labels(self, k: int) -> tuple[str, str, str]:
        """The labels of triple ``k``.

        Args:
            k: Row index.

        Returns:
            ``(head, relation, tail)`` labels.
        """
        h, r, t = self.ids[k]
        return self.entities.labels[h], self.relations.labels[r], self.entities.labels[t]


def encode_triples(lt: LabeledTriples, entities: IdMap, relations: IdMap) -> np.ndarray:
    """Map labelled triples to ids.

    Args:
        lt: The triples.
        entities: The entity map.
        relations: The relation map.

    Returns:
        int64 array ``[N, 3]`` of head, relation, tail ids.

    Raises:
        DataError: For the first unknown label, naming the file and line.
    """
    h = entities.encode(lt.heads, lt.path, lt.lines, "entity")
    r = relations.encode(lt.relations, lt.path, lt.lines, "relation")
    t = entities.encode(lt.tails, lt.path, lt.lines, "entity")
    return np.stack([h, r, t], axis=1)


def read_triples(path: str | Path, entities: IdMap | None = None, relations: IdMap | None = None) -> TripleSet:
    """Read a triples file into ids; the maps are built from the file when not given.

    Args:
        path: The triples file.
        entities: The entity map, or None to build it from the file's labels.
        relations: The relation map, or None to build it from the file's labels.

    Returns:
        The triples with their maps.

    Raises:
        DataError: If the file is malformed or a label is not in a given map.
    """
    lt = read_labeled_triples(path)
    entities = entities or IdMap.from_labels(lt.heads + lt.tails)
    relations = relations or IdMap.from_labels(lt.relations)
    return TripleSet(encode_triples(lt, entities, relations), entities, relations, str(path))


def with_reciprocals(ids: np.ndarray, num_relations: int) -> np.ndarray:
    """Append ``(t, r + R, h)`` for every ``(h, r, t)``: relation ``r``'s inverse has id ``r + R``.

    Args:
        ids: Triples, shape ``[N, 3]``.
        num_relations: ``R``, the number of relations without inverses.

    Returns:
        ``[2N, 3]``: the triples, then their inverses.
    """
    inv = ids[:, [2, 1, 0]].copy()
    inv[:, 1] += num_relations
    return np.concatenate([ids, inv], axis=0)


# --------------------------------------------------------------------------- known tails


class KnownTails:
    """CSR index of the true tails of every (head, relation) over one or more splits.

    Keys are ``head * num_relations + relation`` (sorted, unique); ``tails[indptr[k]:indptr[k+1]]``
    are the sorted distinct tails of key k. Used for filtered ranking and KvsAll targets. With
    reciprocal relations, pass triples that already include the inverses.
    """

    def __init__(self, ids_list: Sequence[np.ndarray], num_relations: int):
        ids = np.concatenate([np.asarray(a, dtype=np.int64).reshape(-1, 3) for a in ids_list], axis=0)
        self.num_relations = int(num_relations)
        key = ids[:, 0] * self.num_relations + ids[:, 1]
        pairs = np.unique(np.stack([key, ids[:, 2]], axis=1), axis=0) if len(ids) else np.zeros((0, 2), np.int64)
        self.keys, starts = np.unique(pairs[:, 0], return_index=True)
        self.indptr = np.append(starts, len(pairs)).astype(np.int64)
        self.tails = pairs[:, 1].copy()

    def __len__(self) -> int:
        return len(self.keys)

    def key_rows(self, heads: np.ndarray, relations: np.ndarray) -> np.ndarray:
        """The row of each ``(h, r)`` in the index.

        Args:
            heads: Head ids, shape ``[B]``.
            relations: Relation ids, shape ``[B]``.

        Returns:
            ``[B]`` row numbers, -1 where the pair has no known tail.
        """
        key = np.asarray(heads, np.int64) * self.num_relations + np.asarray(relations, np.int64)
        pos = np.searchsorted(self.keys, key)
        pos_c = np.minimum(pos, max(len(self.keys) - 1, 0))
        hit = (pos < len(self.keys)) & (self.keys[pos_c] == key) if len(self.keys) else np.zeros(len(key), bool)
        return np.where(hit, pos_c, -1)

    def batch(self, heads: np.ndarray, relations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every known tail of a batch of ``(h, r)`` pairs, as ``(row_index, tail)`` pairs.

        Args:
            heads: Head ids, shape ``[B]``.
            relations: Relation ids, shape ``[B]``.

        Returns:
            Two equal-length arrays: the batch position (``0..B-1``) and the tail id of every known tail.
        """
        rows = self.key_rows(heads, relations)
        if not len(self.keys):  # no row to look up (indptr is [0])
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        valid = rows >= 0
        starts = np.where(valid, self.indptr[np.maximum(rows, 0)], 0)
        counts = np.where(valid, self.indptr[np.maximum(rows, 0) + 1] - starts, 0)
        batch_idx = np.repeat(np.arange(len(rows)), counts)
        offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        return batch_idx, self.tails[np.repeat(starts, counts) + offsets]

    def tails_of(self, head: int, relation: int) -> np.ndarray:
        """The sorted known tails of one ``(head, relation)``.

        Args:
            head: Head id.
            relation: Relation id.

        Returns:
            The tail ids (empty if none).
        """
        row = self.key_rows(np.array([head]), np.array([relation]))[0]
        return self.tails[self.indptr[row] : self.indptr[row + 1]] if row >= 0 else np.zeros(0, np.int64)

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """All (head, relation) keys of the index, as two arrays."""
        return self.keys // self.num_relations, self.keys % self.num_relations
