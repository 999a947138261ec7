"""Which test triples ``explain`` explains: the questions resolved, then each one's training rows.

Every question of the window (``start_index``, ``max_triples``) is resolved first, by the one
resolver of :mod:`tracegraph.kg.data.questions`: entities by label or name, relations by label,
readable name or predicate. Those that name nothing of the run are all reported in one error,
or, with ``skip_unresolved``, set aside (``summary.json``'s ``unresolved``; the writer's
``unresolved.tsv``) while the others are explained.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
import numpy as np

from tracegraph.kg.data.questions import Questions, read_questions, resolve
from tracegraph.kg.data.triples import triple_file_stem
from tracegraph.kg.model.store import RunStore, label_columns
from tracegraph.runtime.distributed import broadcast_object

#: how to go on when questions do not resolve, added to the error (the CLI shows --skip-unresolved)
SKIP_HINT = "skip_unresolved=True explains the others and lists these in unresolved.tsv"


@dataclass
class Selection:
    """The test triples to explain and the training rows each one ranks."""

    todo: list  # (index, file stem, (h, r, t) ids)
    failures: list  # explainable questions that could not be explained (an empty filtered graph)
    skipped: list  # file stems already written (skip_existing)
    subsets: dict  # index -> training rows ranked
    union: np.ndarray
    requested: int
    filtered: bool  # each test triple ranks its own subgraph (else every training triple)
    unresolved: list  # {"line", "question", "reason"} of questions that name nothing of the run


def explain_questions(cfg, store: RunStore) -> Questions:
    """The questions of ``cfg``'s window, resolved to the run's labels.

    Args:
        cfg: The :class:`~tracegraph.kg.explain.tracin.explain.ExplainConfig` (``test_triples``: a file or label triples; ``start_index``,
            ``max_triples``, ``skip_unresolved``).
        store: The run (its id maps and names).

    Returns:
        The resolved questions; ``positions`` count from the first question of the file or list.

    Raises:
        UnresolvedQuestions: Some questions name no entity or relation of the run (all are
            listed), unless ``cfg.skip_unresolved``.
        DataError: The file is missing or malformed.
    """
    test = cfg.test_triples
    if isinstance(test, (str, Path)):
        rows, lines = read_questions(test)
        source = str(test)
    else:
        rows = list(zip(*label_columns(test, 3)))
        lines, source = list(range(1, len(rows) + 1)), "<questions>"
    end = len(rows) if cfg.max_triples is None else min(len(rows), cfg.start_index + cfg.max_triples)
    start = min(cfg.start_index, end)
    q = resolve(rows[start:end], store.labels, store.entities, store.relations, lines[start:end], source)
    q.positions = [start + p for p in q.positions]
    return q if cfg.skip_unresolved else q.check(SKIP_HINT)


def select_candidates(
    cfg, store: RunStore, train_ids: np.ndarray, train_subsets, questions: Questions | None = None
) -> Selection:
    """The test triples to explain and the training rows each one ranks.

    A question that names nothing of the run is refused (or set aside with ``skip_unresolved``);
    one whose filtered training graph is empty is a recorded failure, not a stop; with
    ``skip_existing``, one whose CSV exists is skipped. Under torchrun rank 0's list is used by
    every rank.

    Args:
        cfg: the settings (test triples, ``start_index``, ``max_triples``, ``skip_existing``, ``output_dir``).
        store: the run's store (its id maps and names).
        train_ids: ``[M, 3]`` training triples as ids.
        train_subsets: ``(head_id, tail_id) -> rows`` of the training triples a test triple ranks;
            None: every training triple.
        questions: :func:`explain_questions` of ``cfg``, when the caller has resolved them already.

    Returns:
        The selection: the test triples to explain, failures, skipped and unresolved ones, each
        one's rows and their union.
    """
    q = questions if questions is not None else explain_questions(cfg, store)
    ents, rels = store.entities, store.relations
    out = Path(cfg.output_dir) if cfg.output_dir else None
    todo, skipped = [], []
    for i, (h, r, t) in zip(q.positions, q.labels):
        name = triple_file_stem(i, h, t)
        if cfg.skip_existing and out is not None and (out / f"{name}_tracin.csv").is_file():
            skipped.append(name)
            continue
        todo.append((i, name, (ents.id(h), rels.id(r), ents.id(t))))
    todo, skipped = broadcast_object((todo, skipped))  # torchrun: rank 0's disk decides
    unresolved = [{"line": u.line, "question": list(u.question), "reason": u.reason} for u in q.unresolved]
    failures, subsets = [], {}
    for i, name, (h, r, t) in list(todo):
        rows = np.arange(len(train_ids)) if train_subsets is None else np.asarray(train_subsets(h, t), np.int64)
        if len(rows) == 0:
            failures.append(
                {
                    "index": i,
                    "triple": [ents.labels[h], rels.labels[r], ents.labels[t]],
                    "reason": "the filtered training graph around this triple is empty",
                }
            )
            todo.remove((i, name, (h, r, t)))
            continue
        subsets[i] = rows
    union = np.unique(np.concatenate(list(subsets.values()))) if subsets else np.zeros(0, np.int64)
    return Selection(todo, failures, skipped, subsets, union, q.total, train_subsets is not None, unresolved)


__all__ = ["Selection", "explain_questions", "select_candidates", "SKIP_HINT"]
