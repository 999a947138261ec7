"""Explanations as a table: one row per explained prediction, its explanation's training facts in one cell.

The layout is Kelpie's end-to-end files (Rossi et al., SIGMOD 2022), so their released
explanations are read as they are and ours can be read by their scripts' readers::

    head<TAB>relation<TAB>tail<TAB>explanation[<TAB>more columns…]
    /m/09qs08<TAB>/award/…/category_of<TAB>/m/0gcf2r<TAB>/m/09qs08|/award/…/ceremony|/m/03nnm4t;…

The first line names the columns (in any order; ``head``, ``relation``, ``tail`` and
``explanation`` are required, others are kept as text in :attr:`ExplanationTable.columns`). An explanation is its facts written
``head|relation|tail``, joined by ``;``; an empty cell is an empty explanation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tracegraph.errors import DataError
from tracegraph.runtime.checkpoints import atomic_write_text
from tracegraph.kg.data.tsv import read_text

REQUIRED = ("head", "relation", "tail", "explanation")
Triple = tuple[str, str, str]


@dataclass
class ExplanationTable:
    """Explanations of some predictions, in file order.

    Attributes:
        facts: The explained predictions ``(head, relation, tail)``.
        explanations: Per prediction, its explanation's training facts.
        path: The file read, or None.
        lines: Per prediction, its line in ``path`` (1-based), or None.
        columns: The file's other columns, name -> one text value per prediction (Kelpie's files
            hold each prediction's rank before and after its retrain there).
    """

    facts: list[Triple] = field(default_factory=list)
    explanations: list[list[Triple]] = field(default_factory=list)
    path: str | None = None
    lines: list[int] = field(default_factory=list)
    columns: dict[str, list[str]] = field(default_factory=dict)

    def of(self) -> dict[Triple, list[Triple]]:
        """Prediction -> its explanation (the first row wins for a prediction listed twice)."""
        out: dict[Triple, list[Triple]] = {}
        for f, e in zip(self.facts, self.explanations):
            out.setdefault(f, e)
        return out


def _fact(text: str, path: str, line: int) -> Triple:
    parts = text.strip().split("|")
    if len(parts) != 3 or not all(p.strip() for p in parts):
        raise DataError(f"explanation fact {text!r} is not head|relation|tail", path, line)
    return (parts[0].strip(), parts[1].strip(), parts[2].strip())


def read_explanation_table(path: str | Path) -> ExplanationTable:
    """Read an explanations file (see the module doc).

    Args:
        path: The file.

    Returns:
        Its rows.

    Raises:
        DataError: On a missing file, a header without the required columns, a row with another
            number of fields or an empty prediction field, or a malformed explanation fact; the
            message names the file and line.
    """
    p = str(path)
    text = read_text(path, "explanations file")
    rows = [(no, line.rstrip("\r")) for no, line in enumerate(text.split("\n"), start=1) if line.strip()]
    if not rows:
        raise DataError("explanations file is empty", p)
    header = [c.strip().lower() for c in rows[0][1].split("\t")]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise DataError(
            f"the first line must name the columns {', '.join(REQUIRED)} (tab-separated); "
            f"missing: {', '.join(missing)}",
            p,
            rows[0][0],
        )
    col = {c: header.index(c) for c in REQUIRED}
    others = {c: i for i, c in enumerate(header) if c not in REQUIRED}
    table = ExplanationTable(path=p, columns={c: [] for c in others})
    for no, line in rows[1:]:
        parts = line.split("\t")
        if len(parts) != len(header):
            raise DataError(
                f"expected {len(header)} tab-separated fields as the header names, found {len(parts)}", p, no
            )
        fact = tuple(parts[col[c]].strip() for c in REQUIRED[:3])
        if not all(fact):
            raise DataError("head, relation and tail must not be empty", p, no)
        cell = parts[col["explanation"]].strip()
        table.facts.append(fact)  # type: ignore[arg-type]
        table.explanations.append([_fact(x, p, no) for x in cell.split(";") if x.strip()] if cell else [])
        table.lines.append(no)
        for c, i in others.items():
            table.columns[c].append(parts[i].strip())
    return table


def write_explanation_table(path: str | Path, table: ExplanationTable, extra: dict[str, list] | None = None) -> None:
    """Write explanations in the layout :func:`read_explanation_table` reads, atomically.

    Args:
        path: The destination.
        table: The explanations.
        extra: More columns, name -> one value per row.

    Raises:
        DataError: If a label holds a tab, ``|`` or ``;`` (the layout could not be read back).
    """
    extra = extra or {}
    for f, e in zip(table.facts, table.explanations):
        for label in (*f, *(x for t in e for x in t)):
            if any(c in label for c in "\t|;\n"):
                raise DataError(f"label {label!r} holds a tab, '|' or ';' and cannot be written", path)
    lines = ["\t".join([*REQUIRED, *extra])]
    for i, (f, e) in enumerate(zip(table.facts, table.explanations)):
        cell = ";".join("|".join(t) for t in e)
        lines.append("\t".join([*f, cell, *(str(v[i]) for v in extra.values())]))
    atomic_write_text(path, "\n".join(lines) + "\n")
