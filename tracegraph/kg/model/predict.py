"""Evaluation and prediction on label files, for the CLI: labels in, labels + scores out."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.run import Run, run_files
from tracegraph.kg.data.triples import KnownTails, read_tsv
from tracegraph.runtime.checkpoints import atomic_path, atomic_write_json


def filter_index(run: Run, files) -> KnownTails:
    return run.known_tails(files)


def evaluate_files(model_dir, test, filter_files, output_dir, top_k, batch_size, entity_chunk, device,
                   unseen: str = "include") -> dict:
    run = Run(model_dir, device)
    files = list(filter_files) if filter_files else run_files(run)
    ev = run.evaluate(test, files, top_k=top_k, batch_size=batch_size, entity_chunk=entity_chunk, unseen=unseen)
    out = Path(output_dir) if output_dir else run.path / "evaluation"
    atomic_write_json(out / "evaluation.json", {"metrics": ev.metrics, "checkpoint": str(ev.checkpoint),
                                                "test": str(test), "filter": [str(f) for f in files] + [str(test)],
                                                "unseen": ev.unseen})
    with atomic_path(out / "ranks.csv") as tmp, open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(list(ev.ranks.columns))
        for row in ev.ranks.itertuples(index=False):
            w.writerow([*row[:7], f"{row.score:.6f}", row.top_predictions])
    return {"metrics": ev.metrics, "output_dir": str(out), "unseen": ev.unseen}


def predict(model_dir, query, query_file, triples, top_k, exclude_train, output, device) -> None:
    if sum(x is not None for x in (query, query_file, triples)) != 1:
        raise TracegraphError("give exactly one of --query HEAD RELATION, --query-file, --triples")
    run = Run(model_dir, device)
    if triples is not None:
        frame = run.score(triples)
    else:
        if query is not None:
            heads, rels = [query[0]], [query[1]]
        else:
            (heads, rels), lines = read_tsv(query_file, 2, "query file", "head<TAB>relation")
            run.entities.encode(heads, query_file, lines, "entity")  # an unknown label names its line
            run.relations.encode(rels, query_file, lines, "relation")
        frame = run.predict(heads, rels, k=top_k, exclude_train=exclude_train)
    _emit(frame.to_dict("records"), output)


def _emit(rows: list[dict], output) -> None:
    if output is not None and str(output).endswith(".json"):
        atomic_write_json(output, rows)
        return
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    if output is None:
        print(buf.getvalue(), end="")
    else:
        with atomic_path(output) as tmp:
            tmp.write_text(buf.getvalue())


__all__ = ["evaluate_files", "predict", "run_files", "filter_index", "DataError"]
