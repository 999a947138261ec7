"""`tracegraph explain`: rank training triples by TracIn influence on each test triple.

Outputs per test triple ``triple_NNN_<head>_<tail>_tracin.csv`` (the researchers' header),
``…_tracin.json`` (same rows plus method, loss, layers, checkpoints, learning rates), and one
``summary.json``. A test triple that cannot be explained (unknown entity, empty filtered
training set) is recorded with its reason and the run goes on.
"""

from __future__ import annotations

import csv
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from tracegraph.errors import DataError
from tracegraph.kg.model_io import list_epoch_checkpoints, load_model, resolve_checkpoint
from tracegraph.kg.tracin.engine import InfluenceOptions, compute_influence
from tracegraph.kg.triples import encode_triples, read_edge_map, read_labeled_triples, read_name_dict
from tracegraph.runtime.checkpoints import atomic_path, atomic_write_json, read_json
from tracegraph.runtime.precision import resolve_device
from tracegraph.runtime.progress import log, make_progress

CSV_HEADER = [
    "TestHead", "TestHead_label", "TestRel", "TestRel_label", "TestTail", "TestTail_label",
    "TrainHead", "TrainHead_label", "TrainRel", "TrainRel_label", "TrainTail", "TrainTail_label",
    "TracInScore", "SelfInfluence",
]


@dataclass
class ExplainConfig:
    model_dir: str
    train: str
    test_triples: str
    output_dir: str
    checkpoints: list[str] | None = None  # ["all"] | ["best"] | ["final"] | paths
    method: str = "exact"
    loss: str = "train-loss"
    layers: str = "all"
    top_k: int | None = None  # proponents and opponents each; None = every training triple
    batch_size: int = 512
    precision: str = "fp32"
    device: str = "auto"
    node_name_dict: str | None = None
    edge_map: str | None = None
    start_index: int = 0
    max_triples: int | None = None
    skip_existing: bool = False
    label_smoothing: float | None = None  # default: the run's


def base_name(index: int, head: str, tail: str) -> str:
    clean = lambda s: re.sub(r"[:/\s\\]", "_", s)
    return f"triple_{index:03d}_{clean(head)}_{clean(tail)}"


def resolve_checkpoint_list(model_dir: Path, spec: list[str] | None) -> list[Path]:
    spec = spec or ["all"]
    if spec == ["all"]:
        found = list_epoch_checkpoints(model_dir)
        if not found:
            log.warning("no checkpoints/epoch_*.pt: using the single final/best model")
            return [resolve_checkpoint(model_dir)]
        return found
    out = []
    for s in spec:
        if s in ("best", "final"):
            p = model_dir / f"{s}_model.pt"
            if not p.is_file():
                raise DataError(f"--checkpoints {s}: {p.name} not found", model_dir)
            out.append(p)
        else:
            p = Path(s)
            if not p.is_file():
                raise DataError("checkpoint not found", p)
            out.append(p)
    return out


def run_explain(cfg: ExplainConfig, train_subsets: Callable[[int, int], np.ndarray] | None = None) -> dict:
    """Explain every selected test triple. ``train_subsets(head_id, tail_id)``, when given,
    returns the row indices of the training triples to rank for that test triple (filtering)."""
    t0 = time.perf_counter()
    device = resolve_device(cfg.device)
    lm = load_model(cfg.model_dir, device)
    mdir = Path(cfg.model_dir) if Path(cfg.model_dir).is_dir() else lm.model_dir
    ents, rels = lm.entities, lm.relations
    train_ids = encode_triples(read_labeled_triples(cfg.train), ents, rels)
    checkpoints = resolve_checkpoint_list(mdir, cfg.checkpoints)
    eps = cfg.label_smoothing
    if eps is None:
        run_cfg = read_json(mdir / "config.json") if (mdir / "config.json").is_file() else {}
        eps = float(run_cfg.get("train", {}).get("label_smoothing", 0.0))
    ent_names = _names(cfg.node_name_dict, ents.labels)
    rel_names = _rel_names(cfg.edge_map, rels.labels)

    # ---- the test triples: encode one by one so a bad one is a recorded failure, not a stop
    lt = read_labeled_triples(cfg.test_triples)
    end = len(lt) if cfg.max_triples is None else min(len(lt), cfg.start_index + cfg.max_triples)
    out = Path(cfg.output_dir)
    todo, failures, skipped = [], [], []
    for i in range(cfg.start_index, end):
        h, r, t = lt.heads[i], lt.relations[i], lt.tails[i]
        name = base_name(i, h, t)
        if cfg.skip_existing and (out / f"{name}_tracin.csv").is_file():
            skipped.append(name)
            continue
        missing = [f"entity {x!r}" for x in (h, t) if x not in ents] + ([f"relation {r!r}"] if r not in rels else [])
        if missing:
            failures.append({"index": i, "triple": [h, r, t], "reason": f"not in the model's id maps: {', '.join(missing)}"})
            continue
        todo.append((i, name, (ents.id(h), rels.id(r), ents.id(t))))

    # ---- which training rows each test triple ranks (all, or its filtered subgraph)
    subsets = {}
    for i, name, (h, r, t) in list(todo):
        rows = np.arange(len(train_ids)) if train_subsets is None else np.asarray(train_subsets(h, t), np.int64)
        if len(rows) == 0:
            failures.append({"index": i, "triple": [lt.heads[i], lt.relations[i], lt.tails[i]],
                             "reason": "the filtered training graph around this triple is empty"})
            todo.remove((i, name, (h, r, t)))
            continue
        subsets[i] = rows
    union = np.unique(np.concatenate(list(subsets.values()))) if subsets else np.zeros(0, np.int64)

    written = []
    result = None
    if todo:
        opts = InfluenceOptions(method=cfg.method, loss=cfg.loss, layers=cfg.layers, label_smoothing=eps,
                                batch_size=cfg.batch_size, precision=cfg.precision, scratch_dir=str(out))
        out.mkdir(parents=True, exist_ok=True)
        test_ids = np.array([ids for _, _, ids in todo], np.int64)
        with make_progress() as progress:
            result = compute_influence(checkpoints, train_ids[union], test_ids, opts, device, progress)
        for j, (i, name, (h, r, t)) in enumerate(todo):
            cols = np.searchsorted(union, subsets[i])
            meta = {
                "test_triple": {"index": i, "head": ents.labels[h], "relation": rels.labels[r], "tail": ents.labels[t]},
                "method": cfg.method, "loss": cfg.loss, "label_smoothing": eps, "layers": result.layers,
                "checkpoints": [asdict(c) for c in result.checkpoints],
                "learning_rates": [c.lr for c in result.checkpoints],
                "test_self_influence": float(result.test_self[j]),
                "training_triples_ranked": int(len(cols)), "top_k": cfg.top_k,
            }
            rows = _rows(np.asarray(result.scores[j, cols], np.float64), result.train_self[cols], train_ids[union[cols]],
                         (h, r, t), cfg.top_k, ents.labels, rels.labels, ent_names, rel_names)
            _write_csv(out / f"{name}_tracin.csv", rows)
            atomic_write_json(out / f"{name}_tracin.json", dict(meta, rows=[dict(zip(CSV_HEADER, row)) for row in rows]))
            written += [f"{name}_tracin.csv", f"{name}_tracin.json"]
    summary = {
        "requested": end - cfg.start_index, "explained": len(todo), "skipped_existing": len(skipped),
        "failed": len(failures), "failures": failures, "elapsed_seconds": time.perf_counter() - t0,
        "files": written, "method": cfg.method, "loss": cfg.loss, "layers": result.layers if result else cfg.layers,
        "checkpoints": [str(c) for c in checkpoints], "training_triples": int(len(train_ids)),
        "union_of_ranked_training_triples": int(len(union)), "device": str(device),
    }
    atomic_write_json(out / "summary.json", summary)
    for f in failures:
        log.warning(f"test triple {f['index']} {f['triple']}: {f['reason']}")
    return summary


def _rows(scores, self_inf, train_rows, test, top_k, ent_labels, rel_labels, ent_names, rel_names):
    order = np.argsort(-scores, kind="stable")
    if top_k is not None and 2 * top_k < len(order):
        order = np.concatenate([order[:top_k], order[-top_k:]])  # proponents, then opponents
    h, r, t = test
    head = [ent_labels[h], ent_names[h], rel_labels[r], rel_names[r], ent_labels[t], ent_names[t]]
    out = []
    for k in order:
        th, tr, tt = train_rows[k]
        out.append(head + [ent_labels[th], ent_names[th], rel_labels[tr], rel_names[tr], ent_labels[tt], ent_names[tt],
                           float(scores[k]), float(self_inf[k])])
    return out


def _write_csv(path: Path, rows) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(CSV_HEADER)
        for row in rows:
            w.writerow(row[:-2] + [repr(row[-2]), repr(row[-1])])


def _names(path, labels: list[str]) -> list[str]:
    if not path:
        return list(labels)
    names = read_name_dict(path)
    return [names.get(i, lab) for i, lab in enumerate(labels)]


def _rel_names(path, labels: list[str]) -> list[str]:
    if not path:
        return list(labels)
    emap = read_edge_map(path)
    return [emap.get(lab, lab) for lab in labels]


