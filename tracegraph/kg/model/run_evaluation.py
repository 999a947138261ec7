"""Filtered evaluation of a run (a :class:`~tracegraph.kg.model.store.RunStore`) and its files.

``Run.evaluate`` and ``tracegraph evaluate`` are this; ``tune`` uses it for the chosen
configuration's one look at the test split.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tracegraph.kg.data.unseen import evaluation_triples
from tracegraph.kg.model.evaluate import evaluate, evaluation_record
from tracegraph.kg.model.store import RunStore
from tracegraph.runtime.checkpoints import atomic_path, atomic_write_json
from tracegraph.runtime.progress import log

RANKS_COLUMNS = [
    "head",
    "relation",
    "tail",
    "side",
    "rank",
    "rank_optimistic",
    "rank_pessimistic",
    "score",
    "top_predictions",
]


@dataclass
class Evaluation:
    """``run.evaluate(...)``: filtered metrics per side and one row of ``ranks.csv`` per test triple and side."""

    metrics: dict
    ranks: pd.DataFrame
    checkpoint: Path
    unseen: dict | None = None  # what --unseen did with test triples naming entities absent from training

    def __repr__(self) -> str:
        both = self.metrics.get("both", {})
        return (
            f"Evaluation(MRR {both.get('mrr', float('nan')):.4f}, Hits@1 {both.get('hits@1', float('nan')):.4f}, "
            f"Hits@10 {both.get('hits@10', float('nan')):.4f}, {both.get('count', 0)} ranks)"
        )


def evaluate_store(
    store: RunStore,
    test,
    filter_triples=None,
    top_k: int = 10,
    batch_size: int = 256,
    entity_chunk: int = 65536,
    unseen: str = "include",
) -> Evaluation:
    """Filtered ranks of test triples against every entity (``Run.evaluate``).

    Args:
        store: The run.
        test: A triples file, or ``(head, relation, tail)`` label triples.
        filter_triples: More known true triples to filter (files or label triples), added to the
            run's train, valid and test files; the test triples are always filtered too.
        top_k: Best-scored entities to list per test triple and side (0: none).
        batch_size: Queries per batch.
        entity_chunk: Entities scored at a time.
        unseen: ``"error"``, ``"include"`` or ``"drop"``, for test entities absent from training
            (files only).

    Returns:
        The metrics and one row of ranks per test triple and side.

    Raises:
        DataError: If a file is malformed or a label is unknown.
        TracegraphError: If an unseen entity is refused by the policy.
    """
    report = None
    if isinstance(test, (str, Path)):
        train_file = store.data_files.get("train")
        test_ids, report = evaluation_triples(store, test, unseen, [train_file] if train_file else [])
    else:
        test_ids = store.encode(test)
    sources = filter_sources(store, filter_triples)
    if not sources:  # an imported model, say: say so rather than report a test-only filtered MRR silently
        log.warning(
            f"{store.path}: the run records no data files, so only the test triples are filtered "
            f"(give the known true triples with --filter)"
        )
    known = store.known_tails([*sources, test])
    metrics, sides = evaluate(
        store.model, test_ids, known, batch_size=batch_size, entity_chunk=entity_chunk, top_k=top_k, device=store.device
    )
    ent, rel = store.entities.labels, store.relations.labels
    rows = []
    for rk in sides:
        for i, (h, r, t) in enumerate(test_ids):
            top = (
                json.dumps(
                    [[ent[e], round(float(s), 4)] for e, s in zip(rk.topk_ids[i], rk.topk_scores[i])],
                    ensure_ascii=False,
                )
                if top_k
                else ""
            )
            rows.append(
                (
                    ent[h],
                    rel[r],
                    ent[t],
                    rk.side,
                    rk.realistic[i],
                    rk.optimistic[i],
                    rk.pessimistic[i],
                    float(rk.score[i]),
                    top,
                )
            )
    return Evaluation(metrics, pd.DataFrame(rows, columns=RANKS_COLUMNS), store.checkpoint, report)


def filter_sources(store: RunStore, extra=None) -> list:
    """The known true triples of a filtered ranking: the run's train, valid and test files, then ``extra``.

    Args:
        store: The run.
        extra: More files (or label triples) of known true triples; None for none.

    Returns:
        The sources, each file once, the run's first.
    """
    out, seen = [], set()
    for s in [*store.data_files.values(), *(extra or [])]:
        key = str(Path(s).resolve()) if isinstance(s, (str, Path)) else id(s)
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


def evaluate_files(
    model_dir, test, filter_files, output_dir, top_k, batch_size, entity_chunk, device, unseen: str = "include"
) -> dict:
    """Evaluate a run and write ``evaluation.json`` and ``ranks.csv`` (``tracegraph evaluate``).

    Args:
        model_dir: The run directory, or an open run store.
        test: The test triples file.
        filter_files: More files of known true triples, added to the run's data files.
        output_dir: Where to write; None for ``RUN/evaluation``.
        top_k: Best-scored entities to list per test triple and side.
        batch_size: Queries per batch.
        entity_chunk: Entities scored at a time.
        device: Device name.
        unseen: ``"error"``, ``"include"`` or ``"drop"``.

    Returns:
        The metrics, the output directory and the unseen-entity report.

    Raises:
        DataError: If a file is malformed or a label is unknown.
        TracegraphError: If an unseen entity is refused by the policy.
    """
    store = model_dir if isinstance(model_dir, RunStore) else RunStore(model_dir, device)
    ev = evaluate_store(
        store, test, filter_files, top_k=top_k, batch_size=batch_size, entity_chunk=entity_chunk, unseen=unseen
    )
    files = filter_sources(store, [*(filter_files or []), test])
    out = Path(output_dir) if output_dir else store.path / "evaluation"
    atomic_write_json(out / "evaluation.json", evaluation_record(ev.metrics, ev.checkpoint, test, files, ev.unseen))
    with atomic_path(out / "ranks.csv") as tmp, open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(list(ev.ranks.columns))
        for row in ev.ranks.itertuples(index=False):
            w.writerow([*row[:7], f"{row.score:.6f}", row.top_predictions])
    return {"metrics": ev.metrics, "output_dir": str(out), "unseen": ev.unseen}


__all__ = ["Evaluation", "evaluate_store", "evaluate_files", "filter_sources", "RANKS_COLUMNS"]
