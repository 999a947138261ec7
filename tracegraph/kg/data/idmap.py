"""Id maps (labels to ids 0..n-1) and name dicts, in the files researchers already have.

node_dict.txt
    ``label<TAB>index`` (also rel_dict.txt); indices are 0..n-1.
node_name_dict
    ``name<TAB>index`` (readable names; names may repeat, indices may not).

Every reader raises :class:`~tracegraph.errors.DataError` naming the file and line.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from tracegraph.errors import DataError
from tracegraph.kg.data.tsv import read_tsv
from tracegraph.runtime.checkpoints import atomic_write_text


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
    tracegraph.kg.data.idmap.UnknownLabelError: label 'ibuprofin' is not in the id map; closest: 'ibuprofen'
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
