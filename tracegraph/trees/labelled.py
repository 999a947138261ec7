"""The user's labelled trees: a directory of tree files plus a CSV ``name,label[,split]``.

``load_dataset`` is the Python API: a list of TreeData (torch_geometric ``Data``) with ``y``, usable
in any training loop, that also knows its class names, each item's file and the CSV's split.
"""

from __future__ import annotations

import csv
import itertools
from dataclasses import dataclass
from pathlib import Path

from tracegraph.errors import DataError, TracegraphError, require_file
from tracegraph.runtime.progress import log
from tracegraph.runtime.textfiles import strip_bom
from tracegraph.trees.cache import build_dataset
from tracegraph.trees.files import cached_tree_file, list_tree_files
from tracegraph.trees.splits import stratified_folds, stratified_split

SPLITS = ("train", "test")


@dataclass
class LabelRow:
    """One row of a labels CSV.

    Attributes:
        name: The tree file's stem.
        label: The class name.
        split: ``"train"``, ``"test"`` or None when the CSV has no split column.
        line: The row's line in the CSV.
    """

    name: str
    label: str
    split: str | None
    line: int


def read_labels(path: str | Path) -> list[LabelRow]:
    """Read the rows of a labels CSV; an optional header (``name,label[,split]``), ``#`` comments and blank lines are skipped.

    Args:
        path: The CSV file.

    Returns:
        The rows.

    Raises:
        DataError: If the file is missing or not UTF-8, or a row is malformed or repeats a name
            (with the line).
    """
    p = require_file(path, "labels file")
    rows: list[LabelRow] = []
    seen: dict[str, int] = {}
    try:
        with open(p, newline="", encoding="utf-8") as f:
            first = strip_bom(f.readline(), p)  # the one policy: a byte-order mark removed with a note
            reader = csv.reader(itertools.chain([first], f))
            next_line = 1  # a quoted field may span lines: a row starts after the lines read so far
            for rec in reader:
                lineno, next_line = next_line, reader.line_num + 1
                rec = [c.strip() for c in rec]
                if not rec or not any(rec) or rec[0].startswith("#"):
                    continue
                if not rows and not seen and [c.lower() for c in rec[:2]] == ["name", "label"]:
                    continue
                if len(rec) not in (2, 3):
                    raise DataError(f"expected name,label[,split], got {len(rec)} fields", p, lineno)
                name, label = rec[0], rec[1]
                split = rec[2].lower() if len(rec) == 3 and rec[2] else None
                if not name or not label:
                    raise DataError("empty name or label", p, lineno)
                if split is not None and split not in SPLITS:
                    raise DataError(f"split must be train or test, not {rec[2]!r}", p, lineno)
                if name in seen:
                    raise DataError(f"{name!r} is labelled twice (first on line {seen[name]})", p, lineno)
                seen[name] = lineno
                rows.append(LabelRow(name, label, split, lineno))
    except UnicodeDecodeError as e:
        raise DataError(f"not UTF-8 text: {e.reason}", p) from None
    except csv.Error as e:
        raise DataError(f"malformed CSV: {e}", p) from None
    if not rows:
        raise DataError("no labelled rows", p)
    given = [r.split is not None for r in rows]
    if any(given) and not all(given):
        r = rows[given.index(False)] if given[0] else rows[given.index(True)]
        raise DataError("give a split for every row or for none", p, r.line)
    return rows


def _class_order(labels: set[str]) -> list[str]:
    """Numeric labels in numeric order (so "2" < "10"), anything else alphabetically."""
    try:
        return sorted(labels, key=float)
    except ValueError:
        return sorted(labels)


class TreeDataset(list):
    """The trees of a directory, as a list of ``TreeData`` (``torch_geometric`` ``Data``).

    Attributes:
        names: ``names[i]`` is the file stem item ``i`` came from (a file may give several trees).
        classes: The label names; ``classes[int(item.y)]`` is an item's label.
        rows: The labels CSV's row of each labelled file stem.
        labels_path: The labels CSV, or None.
    """

    def __init__(self, items, names, classes=None, rows=None, labels_path=None):
        super().__init__(items)
        self.names: list[str] = list(names)
        self.classes: list[str] = list(classes or [])
        self.rows: dict[str, LabelRow] = rows or {}
        self.labels_path = labels_path

    def file_labels(self) -> dict[str, int]:
        """Each file's class.

        Returns:
            File stem → class index, one entry per file.
        """
        return {n: int(d.y) for n, d in zip(self.names, self)}

    def select(self, files) -> "TreeDataset":
        """The items that came from the given files.

        Args:
            files: File stems; all trees of a file go together.

        Returns:
            A new dataset with those items, the same classes and labels.
        """
        keep = set(files)
        pairs = [(d, n) for d, n in zip(self, self.names) if n in keep]
        return TreeDataset([d for d, _ in pairs], [n for _, n in pairs], self.classes, self.rows, self.labels_path)

    def require_per_class(self, need: int, why: str) -> None:
        """Check that every class has at least ``need`` files.

        Args:
            need: The least number of files per class.
            why: What needs them, for the message.

        Raises:
            DataError: Naming the CSV line of the first member of a class with fewer files.
        """
        counts: dict[int, list[str]] = {}
        for n, y in self.file_labels().items():
            counts.setdefault(y, []).append(n)
        for y, members in sorted(counts.items()):
            if len(members) < need:
                first = min((self.rows[m] for m in members), key=lambda r: r.line)
                raise DataError(
                    f"class {self.classes[y]!r} has {len(members)} file(s); {why} needs at least {need}",
                    self.labels_path,
                    first.line,
                )

    def splits(self, folds: int = 0, test_fraction: float = 0.3, seed: int = 0) -> list[tuple[list[str], list[str]]]:
        """Train/test splits over files, never trees, stratified by class.

        Args:
            folds: 0 for one split (the CSV's ``split`` column when it has one, else a seeded
                stratified one); k ≥ 2 for k stratified folds, each file held out exactly once.
            test_fraction: The share of each class held out when the split is drawn.
            seed: The seed of the drawn split or folds; the same seed and files give the same
                split in any listing order.

        Returns:
            One ``(train file stems, test file stems)`` pair per fold.

        Raises:
            DataError: A class with too few files, a CSV split together with ``folds``, or a
                split that leaves one side empty (naming the CSV and line).
            TracegraphError: ``folds`` is 1 or negative.
        """
        if folds == 1 or folds < 0:
            raise TracegraphError(f"folds must be 0 (one split) or at least 2, not {folds}")
        labels = self.file_labels()
        given = {n: self.rows[n].split for n in labels if self.rows[n].split}
        if folds:
            if given:
                raise DataError(
                    "the labels give a split column; --folds would ignore it (drop one of the two)", self.labels_path
                )
            self.require_per_class(folds, f"{folds}-fold cross-validation")
            fold = stratified_folds(labels, folds, seed)
            return [([n for n in labels if fold[n] != k], [n for n in labels if fold[n] == k]) for k in range(folds)]
        if given:
            side = given
        else:
            self.require_per_class(2, "a train/test split")
            side = stratified_split(labels, test_fraction, seed)
        train, test = [n for n in labels if side[n] == "train"], [n for n in labels if side[n] == "test"]
        if not train or not test:
            raise DataError(f"the split leaves no {'training' if not train else 'test'} files", self.labels_path)
        return [(train, test)]


def load_dataset(
    directory: str | Path,
    labels: str | Path | None = None,
    *,
    max_nodes: int = 300,
    node_spacing: float = 0.0,
    trees_per_image: int = 1,
    image_root: str = "widest",
    cache_dir: str | Path | None = None,
) -> TreeDataset:
    """Read a directory of trees (SWC, vessel images, graph files), optionally labelled.

    Each file becomes one or more rooted trees with their 3rd-order paths, ready for the SGMP
    encoder. Files the labels do not name are left out with a warning, so one directory can
    serve several labellings.

    Args:
        directory: Holds ``*.swc``, binary vessel images (``*.png``, ``*.tif``, ``*.jpg``, …)
            and graph files (``*.json`` / ``*.npz`` with ``pos``, ``edges`` and optionally
            ``root``); each file is named by its stem.
        labels: A CSV of ``name,label[,split]`` rows (header optional), or None for unlabelled
            trees (``y`` is then -1).
        max_nodes: The node budget per tree; the spacing widens until a tree fits.
        node_spacing: One node per this much arc length (file units); 0 keeps every point.
        trees_per_image: How many of an image's largest skeleton components become trees.
        image_root: Where an image's tree is rooted: ``"widest"`` (the widest vessel point)
            or ``"disc"`` (nearest the optic disc).
        cache_dir: Where each file's trees and paths are cached (``.npz``); large images are
            skeletonised once.

    Returns:
        The trees, each with ``x``, ``pos``, ``parent``, ``depth``, ``edge_index``, ``paths``,
        ``y`` and ``name`` (its file stem).

    Raises:
        DataError: A malformed tree file or labels CSV, or a CSV name with no file (naming the
            file and line).
    """
    files = list_tree_files(directory)
    rows: dict[str, LabelRow] = {}
    classes: list[str] = []
    if labels is not None:
        label_rows = read_labels(labels)
        for r in label_rows:
            if r.name not in files:
                raise DataError(f"no tree file named {r.name!r} in {directory}", labels, r.line)
        rows = {r.name: r for r in label_rows}
        classes = _class_order({r.label for r in label_rows})
        skipped = [n for n in files if n not in rows]
        if skipped:
            log.warning(
                f"{len(skipped)} tree file(s) have no label and are left out: {', '.join(skipped[:5])}"
                + (" …" if len(skipped) > 5 else "")
            )
        files = {n: f for n, f in files.items() if n in rows}
    index = {c: k for k, c in enumerate(classes)}
    trees, names = [], []
    for name, path in files.items():
        for t in cached_tree_file(
            path,
            cache_dir,
            max_nodes=max_nodes,
            node_spacing=node_spacing,
            trees_per_image=trees_per_image,
            image_root=image_root,
        ):
            t.label = index[rows[name].label] if rows else -1
            trees.append(t)
            names.append(name)
    data = build_dataset(trees, cache_dir)
    for d, n in zip(data, names):
        d.name = n
    return TreeDataset(data, names, classes, rows, str(labels) if labels is not None else None)
