"""Questions in the user's own words, resolved to a run's labels: one resolver for every command.

A question is a triple (``explain``, ``predict --triples``, ``run.explain``, ``run.score``) or a
(head, relation) query (``predict --query-file``). Each entity may be given by its label
(``CHEBI:1``) or by a name the run's label files give only it (``aspirin``); each relation by its
label (``predicate:1``), its full readable name, or its predicate alone when only one relation has
it (``biolink:treats``); :class:`~tracegraph.kg.data.labels.RunLabels` decides each. Every question
is resolved before any work, and *all* those that cannot be are reported together, each with its
line and its reason: an ambiguous name lists its candidates, a typo the closest labels and names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from tracegraph.errors import TracegraphError
from tracegraph.kg.data.labels import RunLabels
from tracegraph.kg.data.idmap import IdMap, UnknownLabelError
from tracegraph.kg.data.triples import read_labeled_triples
from tracegraph.kg.data.tsv import read_tsv

TRIPLE = ("entity", "relation", "entity")
QUERY = ("entity", "relation")
SHOWN = 20  # unresolved questions spelled out in one error line; the rest are counted
#: the file ``explain --skip-unresolved`` writes beside its explanations, and its columns (the report reads it)
UNRESOLVED_FILE = "unresolved.tsv"
UNRESOLVED_HEADER = ("line", "question", "reason")


@dataclass(frozen=True)
class Unresolved:
    """A question that names no entity or relation of the run, and why."""

    line: int  # the file's line (1-based), or the question's position in a list (1-based)
    question: tuple[str, ...]  # as given
    reason: str  # each field that failed, with its candidates or closest labels and names


@dataclass
class Questions:
    """Questions resolved to labels: those that resolve, in order, and those that do not."""

    labels: list[tuple[str, ...]]  # the resolved questions as the run's labels
    positions: list[int]  # each resolved question's 0-based position among the questions given
    unresolved: list[Unresolved] = field(default_factory=list)
    source: str = "<questions>"  # the file, or <questions> for a list
    total: int = 0  # questions looked at

    def check(self, hint: str = "") -> "Questions":
        """Raise :class:`UnresolvedQuestions` naming every unresolved question, if any.

        Args:
            hint: Added to the message (how to go on without them).

        Returns:
            ``self``, when every question resolved.
        """
        if self.unresolved:
            raise UnresolvedQuestions(self, hint)
        return self


class UnresolvedQuestions(UnknownLabelError):
    """Questions that name no entity or relation of the run: all of them, in one message.

    An :class:`~tracegraph.kg.data.idmap.UnknownLabelError` (so a ``DataError`` and a ``KeyError``),
    as a single unknown label always was; ``unresolved`` holds each question with its line and reason.
    """

    def __init__(self, questions: Questions, hint: str = ""):
        self.unresolved = questions.unresolved
        u, n, src = questions.unresolved, questions.total, questions.source
        in_file = src != "<questions>"
        tail = f"; {hint}" if hint else ""
        if len(u) == 1 and (in_file or n == 1):  # the usual file:line: reason; one question: its reason
            super().__init__(u[0].reason + tail, src if in_file else None, u[0].line if in_file else None)
            return
        shown = "; ".join(f"{_where(x.line, in_file)} ({describe(x.question)}): {x.reason}" for x in u[:SHOWN])
        more = f"; and {len(u) - SHOWN} more" if len(u) > SHOWN else ""
        what = f"{len(u)} of {n} questions name no entity or relation of the run: {shown}{more}{tail}"
        super().__init__(what, src if in_file else None)


def _where(line: int, in_file: bool) -> str:
    return f"line {line}" if in_file else f"question {line}"


def describe(question: Sequence[str]) -> str:
    """A question as it reads in messages and in ``unresolved.tsv``: its fields joined by `` | ``.

    Args:
        question: The fields as given.

    Returns:
        The text.
    """
    return " | ".join(question)


def resolve(
    rows: Sequence[Sequence[str]],
    labels: RunLabels,
    entities: IdMap,
    relations: IdMap,
    lines: Sequence[int] | None = None,
    source: str = "<questions>",
    kinds: tuple[str, ...] = TRIPLE,
) -> Questions:
    """Resolve every question; nothing is raised for the ones that do not resolve (see :meth:`Questions.check`).

    Args:
        rows: The questions, each a sequence of ``len(kinds)`` strings.
        labels: The run's names (:attr:`tracegraph.kg.model.store.RunStore.labels`).
        entities: The run's entity id map.
        relations: The run's relation id map.
        lines: Each question's file line; default its 1-based position.
        source: The file the questions came from, for messages.
        kinds: What each field is: ``"entity"`` or ``"relation"``.

    Returns:
        The resolved questions and the unresolved ones with their reasons.

    Raises:
        TracegraphError: A question is not a sequence of ``len(kinds)`` fields.
    """
    out = Questions([], [], [], str(source), len(rows))
    for pos, row in enumerate(rows):
        line = int(lines[pos]) if lines is not None else pos + 1
        if isinstance(row, str) or len(row) != len(kinds):
            what = "(head, relation, tail) triples" if kinds == TRIPLE else "(head, relation) queries"
            raise TracegraphError(f"expected {what}, got {row!r}")
        fields = tuple(str(x) for x in row)
        got, why = [], []
        for text, kind in zip(fields, kinds):
            try:
                got.append(labels.entity(text, entities) if kind == "entity" else labels.relation(text, relations))
            except TracegraphError as e:
                why.append(getattr(e, "reason", str(e)))
        if why:
            out.unresolved.append(Unresolved(line, fields, "; ".join(why)))
        else:
            out.labels.append(tuple(got))
            out.positions.append(pos)
    return out


def read_questions(path: str | Path, kinds: tuple[str, ...] = TRIPLE) -> tuple[list[tuple[str, ...]], list[int]]:
    """A questions file's rows and their lines, unresolved.

    Args:
        path: A ``head<TAB>relation<TAB>tail`` file (a header line is skipped), or with
            ``kinds=QUERY`` a ``head<TAB>relation`` one.
        kinds: What each column is.

    Returns:
        The rows and each row's 1-based line.

    Raises:
        DataError: The file is missing or malformed (naming the line).
    """
    if kinds == TRIPLE:
        lt = read_labeled_triples(path)
        return list(zip(lt.heads, lt.relations, lt.tails)), lt.lines.tolist()
    cols, lines = read_tsv(path, len(kinds), "query file", "head<TAB>relation")
    return list(zip(*cols)), lines.tolist()


def resolve_file(path, labels: RunLabels, entities: IdMap, relations: IdMap, kinds=TRIPLE) -> Questions:
    """:func:`resolve` over a questions file (:func:`read_questions`), naming its lines.

    Args:
        path: The questions file.
        labels: The run's names.
        entities: The run's entity id map.
        relations: The run's relation id map.
        kinds: What each column is.

    Returns:
        The resolved and unresolved questions.
    """
    rows, lines = read_questions(path, kinds)
    return resolve(rows, labels, entities, relations, lines, str(path), kinds)


__all__ = [
    "Questions",
    "Unresolved",
    "UnresolvedQuestions",
    "resolve",
    "resolve_file",
    "read_questions",
    "describe",
    "TRIPLE",
    "QUERY",
    "UNRESOLVED_HEADER",
]
