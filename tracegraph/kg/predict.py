"""Evaluation and prediction on label files, for the CLI: labels in, labels + scores out."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import torch

from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.evaluate import evaluate
from tracegraph.kg.model_io import LoadedModel, load_model
from tracegraph.kg.triples import KnownTails, encode_triples, read_labeled_triples, read_tsv, with_reciprocals
from tracegraph.runtime.checkpoints import atomic_path, atomic_write_json, read_json
from tracegraph.runtime.precision import resolve_device


def run_files(lm: LoadedModel) -> list[str]:
    """The train/valid/test files recorded in the run's config.json (those that still exist)."""
    cfg_path = lm.model_dir / "config.json"
    if not cfg_path.is_file():
        return []
    tcfg = read_json(cfg_path).get("train", {})
    return [tcfg[k] for k in ("train", "valid", "test") if tcfg.get(k) and Path(tcfg[k]).is_file()]


def _encode_file(lm: LoadedModel, path) -> np.ndarray:
    return encode_triples(read_labeled_triples(path), lm.entities, lm.relations)


def filter_index(lm: LoadedModel, files) -> KnownTails:
    from tracegraph.kg.unseen import encode_known

    # a triple the model has no id for filters nothing (a run trained with --unseen drop keeps such files)
    ids = [encode_known(read_labeled_triples(f), lm.entities, lm.relations) for f in files]
    ids = np.concatenate(ids) if ids else np.zeros((0, 3), np.int64)
    c = lm.model.config
    return KnownTails([with_reciprocals(ids, c.num_relations) if c.reciprocal else ids], c.num_relation_rows)


def evaluate_files(model_dir, test, filter_files, output_dir, top_k, batch_size, entity_chunk, device,
                   unseen: str = "include") -> dict:
    from tracegraph.kg.unseen import evaluation_triples

    dev = resolve_device(device)
    lm = load_model(model_dir, dev)
    files = list(filter_files) if filter_files else run_files(lm)
    test_ids, unseen_report = evaluation_triples(lm, test, unseen, run_files(lm)[:1])
    known = filter_index(lm, [*files, test])
    res, sides = evaluate(lm.model, test_ids, known, batch_size=batch_size, entity_chunk=entity_chunk,
                          top_k=top_k, device=dev)
    out = Path(output_dir) if output_dir else lm.model_dir / "evaluation"
    atomic_write_json(out / "evaluation.json", {"metrics": res, "checkpoint": str(lm.checkpoint),
                                                "test": str(test), "filter": [str(f) for f in files] + [str(test)],
                                                "unseen": unseen_report})
    ent = lm.entities.labels
    rel = lm.relations.labels
    with atomic_path(out / "ranks.csv") as tmp, open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["head", "relation", "tail", "side", "rank", "rank_optimistic", "rank_pessimistic", "score", "top_predictions"])
        for rk in sides:
            for i, (h, r, t) in enumerate(test_ids):
                # a JSON list of [entity, score] pairs: unambiguous for ids containing ':' or ';' (CURIEs, URLs)
                top = json.dumps([[ent[e], round(float(s), 4)] for e, s in zip(rk.topk_ids[i], rk.topk_scores[i])],
                                 ensure_ascii=False) if top_k else ""
                w.writerow([ent[h], rel[r], ent[t], rk.side, rk.realistic[i], rk.optimistic[i], rk.pessimistic[i],
                            f"{rk.score[i]:.6f}", top])
    return {"metrics": res, "output_dir": str(out), "unseen": unseen_report}


@torch.no_grad()
def predict(model_dir, query, query_file, triples, top_k, exclude_train, output, device) -> None:
    dev = resolve_device(device)
    lm = load_model(model_dir, dev)
    if sum(x is not None for x in (query, query_file, triples)) != 1:
        raise TracegraphError("give exactly one of --query HEAD RELATION, --query-file, --triples")
    rows: list[dict] = []
    if triples is not None:
        ids = _encode_file(lm, triples)
        t = torch.as_tensor(ids, device=dev)
        scores = lm.model.score_triples(t[:, 0], t[:, 1], t[:, 2]).float().cpu().numpy()
        for (h, r, tl), s in zip(ids, scores):
            rows.append({"head": lm.entities.labels[h], "relation": lm.relations.labels[r],
                         "tail": lm.entities.labels[tl], "score": float(s), "probability": float(1 / (1 + np.exp(-s)))})
    else:
        if query is not None:
            heads, rels, path, lines = [query[0]], [query[1]], None, None
        else:
            (heads, rels), lines = read_tsv(query_file, 2, "query file", "head<TAB>relation")
            path = query_file
        h = lm.entities.encode(heads, path, lines, "entity")
        r = lm.relations.encode(rels, path, lines, "relation")
        known = filter_index(lm, run_files(lm)[:1]) if exclude_train else None
        k = min(top_k, lm.model.config.num_entities)
        for b0 in range(0, len(h), 256):
            hb = torch.as_tensor(h[b0 : b0 + 256], device=dev)
            rb = torch.as_tensor(r[b0 : b0 + 256], device=dev)
            s = lm.model.score_all(hb, rb).float()
            if known is not None:
                bi, ti = known.batch(h[b0 : b0 + 256], r[b0 : b0 + 256])
                s[torch.as_tensor(bi), torch.as_tensor(ti)] = float("-inf")
            vals, idx = s.topk(k, dim=1)
            for j in range(len(hb)):
                for rank, (e, v) in enumerate(zip(idx[j].tolist(), vals[j].tolist()), start=1):
                    rows.append({"head": heads[b0 + j], "relation": rels[b0 + j], "rank": rank,
                                 "tail": lm.entities.labels[e], "score": v, "probability": float(1 / (1 + np.exp(-v)))})
    _emit(rows, output)


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
