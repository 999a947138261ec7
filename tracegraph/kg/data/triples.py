r"""Triples files read into ids, reciprocal relations, and the known-tails index.

A triples file holds ``head<TAB>relation<TAB>tail`` per line; a first line of column names is
skipped. Id maps are in :mod:`tracegraph.kg.data.idmap`; every reader raises
:class:`~tracegraph.errors.DataError` naming the file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from tracegraph.errors import DataError
from tracegraph.kg.data.idmap import IdMap
from tracegraph.kg.data.tsv import read_tsv


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
