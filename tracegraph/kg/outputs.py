"""Files the facade writes: predictions (``tracegraph predict``) and explanations (``tracegraph explain``).

The layers below return records (DataFrames, :class:`~tracegraph.kg.explain.tracin.records.Explanation`);
the CLI, the demo and ``Run`` write them with these functions.
"""

from __future__ import annotations

import csv
import io

from tracegraph.errors import TracegraphError
from tracegraph.kg.data.triples import read_tsv
from tracegraph.kg.model.run_evaluation import evaluate_files
from tracegraph.kg.run import Run
from tracegraph.runtime.checkpoints import atomic_path, atomic_write_json


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


__all__ = ["evaluate_files", "predict"]
