"""Reading ``tracegraph explain`` output directories: ``summary.json`` and each test triple's ``_tracin.json``.

Files written before the ``Role`` column and the test triple's rank and score existed still read:
a row's role then follows the sign of its ordering score (``MethodScore`` when present, else
``TracInScore``), and a missing rank or score is left for the caller to fill in (or show as "—").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tracegraph.errors import DataError
from tracegraph.kg.data.questions import UNRESOLVED_FILE

PROPONENT, OPPONENT = "proponent", "opponent"


@dataclass
class ExplainedTriple:
    """One explained test triple: what the model said about it and the training triples ranked for it."""

    head: str
    relation: str
    tail: str
    names: tuple[str, str, str]  # head, relation and tail as the explanation's label columns name them
    rows: pd.DataFrame  # the _tracin.csv columns, Role included, in the file's (the method's) order
    source: Path  # the _tracin.json read
    method: str = "tracin"
    loss: str | None = None
    side: str = "tail"
    index: int | None = None
    rank: float | None = None
    rank_source: str = ""  # where the rank came from: explain, ranks.csv or computed
    score: float | None = None
    rival: dict | None = None
    meta: dict = field(default_factory=dict)  # the rest of the JSON (checkpoints, top_k, …)

    @property
    def triple(self) -> tuple[str, str, str]:
        """``(head, relation, tail)`` labels."""
        return self.head, self.relation, self.tail

    @property
    def order_column(self) -> str:
        """The score the method ranks rows by: ``MethodScore`` when the file has one, else ``TracInScore``."""
        return "MethodScore" if "MethodScore" in self.rows.columns else "TracInScore"

    @property
    def proponents(self) -> pd.DataFrame:
        """Rows that support the prediction, in the method's order (the file's)."""
        return self.rows[self.rows["Role"] == PROPONENT]

    @property
    def opponents(self) -> pd.DataFrame:
        """Rows that work against the prediction, the most negative first."""
        opp = self.rows[self.rows["Role"] == OPPONENT]
        return opp.sort_values(self.order_column, kind="stable")


def read_explanations(directory: str | Path) -> list[ExplainedTriple]:
    """Every explained test triple of one ``tracegraph explain -o`` directory, in the summary's order.

    Args:
        directory: the directory ``explain`` wrote (``summary.json`` and ``triple_*_tracin.json``).

    Returns:
        One :class:`ExplainedTriple` per test triple explained there; none for a folder whose
        ``unresolved.tsv`` says why no question was explained.

    Raises:
        DataError: the directory is missing, holds no explanation, or a file in it cannot be read.
    """
    d = Path(directory)
    if not d.is_dir():
        raise DataError("--explanations: not a directory (give the -o directory of `tracegraph explain`)", d)
    summary = _read_json(d / "summary.json") if (d / "summary.json").is_file() else {}
    entries = summary.get("triples")
    if not entries:  # before summary.json listed its triples: the JSON files it names, else those present
        names = [f for f in summary.get("files", []) if f.endswith("_tracin.json")] or sorted(
            p.name for p in d.glob("triple_*_tracin.json")
        )
        entries = [{"json": n} for n in names]
    if not entries:
        if (d / UNRESOLVED_FILE).is_file():  # explain explained none of the questions: it says why there
            return []
        raise DataError(
            "--explanations: no triple_*_tracin.json here (give the -o directory of `tracegraph explain`)", d
        )
    out = []
    for entry in entries:
        path = d / entry["json"]
        if not path.is_file():
            raise DataError("summary.json names this file but it is missing", path)
        out.append(_triple(_read_json(path), path, entry, summary))
    return out


def _triple(doc: dict, path: Path, entry: dict, summary: dict) -> ExplainedTriple:
    test = doc.get("test_triple") or {}
    rows = pd.DataFrame(doc.get("rows") or [])
    if not {"TestHead", "TestRel", "TestTail", "TracInScore"} <= set(rows.columns) and not rows.empty:
        raise DataError("not an explanation file: its rows lack TestHead/TestRel/TestTail/TracInScore", path)
    head, rel, tail = (test.get(k) for k in ("head", "relation", "tail"))
    if head is None:
        if rows.empty:
            raise DataError("no test_triple and no rows: cannot tell which triple this explains", path)
        head, rel, tail = (str(rows.iloc[0][c]) for c in ("TestHead", "TestRel", "TestTail"))
    names = (
        (head, rel, tail)
        if rows.empty
        else tuple(
            str(rows.iloc[0].get(f"{c}_label", x))
            for c, x in (("TestHead", head), ("TestRel", rel), ("TestTail", tail))
        )
    )
    if not rows.empty and "Role" not in rows.columns:
        key = rows["MethodScore"] if "MethodScore" in rows.columns else rows["TracInScore"]
        rows["Role"] = [OPPONENT if float(v) < 0 else PROPONENT for v in key]
    elif rows.empty:
        rows = pd.DataFrame(columns=["TrainHead", "TrainRel", "TrainTail", "TracInScore", "Role"])

    def first(key):  # the triple's own JSON, else its summary entry
        v = test.get(key)
        return entry.get(key) if v is None else v

    rank, score = first("rank"), first("score")
    meta = {k: v for k, v in doc.items() if k not in ("rows", "test_triple", "rival")}
    return ExplainedTriple(
        head=str(head),
        relation=str(rel),
        tail=str(tail),
        names=names,
        rows=rows,
        source=path,
        method=doc.get("method") or summary.get("method") or "tracin",
        loss=doc.get("loss") or summary.get("loss"),
        side=doc.get("side") or "tail",
        index=test.get("index", entry.get("index")),
        rank=None if rank is None else float(rank),
        rank_source="explain" if rank is not None else "",
        score=None if score is None else float(score),
        rival=doc.get("rival") or entry.get("rival"),
        meta=meta,
    )


def _read_json(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"cannot read: {err}", path) from None
    except json.JSONDecodeError as err:
        raise DataError(f"not valid JSON ({err.msg})", path, err.lineno) from None
    if not isinstance(doc, dict):
        raise DataError("expected a JSON object", path)
    return doc


__all__ = ["ExplainedTriple", "OPPONENT", "PROPONENT", "read_explanations"]
