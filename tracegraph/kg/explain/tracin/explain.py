"""`tracegraph explain`: rank training triples by TracIn influence on each test triple.

Outputs per test triple ``triple_NNN_<head>_<tail>_tracin.csv`` (the researchers' header),
``…_tracin.json`` (same rows plus method, loss, layers, checkpoints, learning rates), and one
``summary.json``. A test triple that cannot be explained (unknown entity, empty filtered
training set) is recorded with its reason and the run goes on.

Scaling out (docs/scaling.md): under ``torchrun`` the training triples are sharded across ranks
(whole batches), every rank scores its shard against all test triples, and rank 0 merges each test
triple's rows (or only the candidates for its top-k) and writes the same files as one process.
``devices=["cuda:0", "cuda:1"]`` (no torchrun) shards the *test* triples across devices instead.
"""

from __future__ import annotations

import csv
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np

from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.model.model_io import list_epoch_checkpoints, resolve_checkpoint
from tracegraph.kg.explain.tracin.engine import InfluenceOptions, InfluenceResult, _alloc, auto_batch_size, compute_influence
from tracegraph.kg.explain.methods import (
    MARGIN_METHODS, MethodOptions, competitors, default_method, margin_shell, method_keys_all, side_logits, single_score,
)
from tracegraph.kg.explain.ranking import WalkLengths
from tracegraph.kg.data.triples import (
    encode_triples, read_edge_map, read_labeled_triples, read_name_dict, triple_file_stem,
)
from tracegraph.runtime.checkpoints import atomic_path, atomic_write_json
from tracegraph.runtime.rundir import check_one_run
from tracegraph.runtime.distributed import (
    batch_aligned_shard, broadcast_object, gather_to_main, init_distributed, parse_devices, run_on_devices, shard_range,
)
from tracegraph.runtime.progress import log, make_progress

CSV_HEADER = [
    "TestHead", "TestHead_label", "TestRel", "TestRel_label", "TestTail", "TestTail_label",
    "TrainHead", "TrainHead_label", "TrainRel", "TrainRel_label", "TrainTail", "TrainTail_label",
    "TracInScore", "SelfInfluence",
]
# after CSV_HEADER: methods other than tracin add MethodScore (rows sorted by it); tracin-margin-path
# also HeadTailWalk, the shortest head–tail walk through the triple (rows sorted by shell, then score)
EXTRA_COLUMNS = ["MethodScore", "HeadTailWalk"]


@dataclass
class ExplainConfig:
    model_dir: str
    train: str
    test_triples: str
    output_dir: str
    checkpoints: list[str] | None = None  # ["all"] | ["best"] | ["final"] | paths
    method: str = "exact"  # TracIn's engine: exact | autograd | vmap
    # the explanation method (kg/explain/methods.py); others than tracin add a MethodScore column.
    # None: tracin-margin-path, or plain tracin with loss="train-loss" (the original research scripts' convention)
    explainer: str | None = None
    loss: str = "logit"  # the most necessary explanations on UMLS (docs/explaining.md)
    layers: str = "all"
    top_k: int | None = None  # proponents and opponents each; None = every training triple
    batch_size: int = 0  # training triples per step; 0 = auto (engine.auto_batch_size)
    precision: str = "fp32"
    device: str = "auto"
    node_name_dict: str | None = None
    edge_map: str | None = None
    start_index: int = 0
    max_triples: int | None = None
    skip_existing: bool = False
    label_smoothing: float | None = None  # default: the run's
    devices: list[str] | None = None  # one process, several devices: test triples sharded across them
    # which prediction the margin methods explain: the tail of (h, r, ?), or with reciprocal relations
    # the head of (?, r, t) — their rival is then a head; TracIn itself sums both of a triple's directions
    side: str = "tail"


base_name = triple_file_stem  # explain's outputs: <stem>_tracin.csv / .json


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


def run_explain(cfg: ExplainConfig, train_subsets: Callable[[int, int], np.ndarray] | None = None,
                run=None, collect: list | None = None) -> dict:
    """Explain every selected test triple. ``train_subsets(head_id, tail_id)``, when given,
    returns the row indices of the training triples to rank for that test triple (filtering).
    ``run``: the :class:`~tracegraph.kg.run.Run` of ``cfg.model_dir`` when the caller has it open
    (its id maps and cached checkpoints are reused); ``collect`` receives every CSV row written."""
    from tracegraph.kg.run import Run

    if cfg.top_k is not None and cfg.top_k < 1:  # 0 would keep every row (order[-0:] is all of it)
        raise TracegraphError(f"--top-k must be at least 1, not {cfg.top_k}")
    if cfg.side not in ("tail", "head"):
        raise TracegraphError(f"--side must be tail or head, not {cfg.side!r}")
    if cfg.explainer is None:
        cfg = replace(cfg, explainer=default_method(cfg.loss))
        if cfg.loss == "train-loss":
            log.info("--loss train-loss without --method: plain TracIn over the 1-N training loss, the earlier "
                     "codebase's convention (name --method to combine the loss with another method)")
    t0 = time.perf_counter()
    ctx = init_distributed(cfg.device)  # one process: resolve_device(cfg.device); torchrun: this rank's
    devices = parse_devices(cfg.devices) if cfg.devices else None
    if devices and ctx.active:
        raise TracegraphError("--devices is for one process on one node; under torchrun every rank uses its own device")
    device = devices[0] if devices else ctx.device
    run = run if run is not None else Run(cfg.model_dir, device)  # the id maps only: no weights loaded here
    mdir = run.path
    ents, rels = run.entities, run.relations
    train_ids = encode_triples(read_labeled_triples(cfg.train), ents, rels)
    checkpoints = resolve_checkpoint_list(mdir, cfg.checkpoints)
    check_one_run(mdir, checkpoints)  # TracIn sums over them: they must be one run's
    eps = cfg.label_smoothing if cfg.label_smoothing is not None else run.label_smoothing
    if cfg.side == "head" and not run.model.config.reciprocal:
        raise TracegraphError("--side head needs a model with reciprocal relations (this run has none)")
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
    todo, failures, skipped = broadcast_object((todo, failures, skipped))  # torchrun: rank 0's disk decides

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
    in_pass = cfg.explainer in ("tracin", *MARGIN_METHODS)  # computed by the engine pass itself
    if todo and not in_pass and (ctx.active or (devices and len(devices) > 1)):
        raise TracegraphError(f"--method {cfg.explainer} runs in one process on one device "
                              f"({', '.join(('tracin', *MARGIN_METHODS))} also run under torchrun and --devices)")
    if todo:
        opts = InfluenceOptions(method=cfg.method, loss=cfg.loss, layers=cfg.layers, label_smoothing=eps,
                                batch_size=cfg.batch_size or auto_batch_size(len(ents), device),
                                precision=cfg.precision, scratch_dir=str(out))
        out.mkdir(parents=True, exist_ok=True)
        test_ids = np.array([ids for _, _, ids in todo], np.int64)
        T = len(test_ids)
        engine_ids = test_ids
        if cfg.explainer in MARGIN_METHODS:  # the rivals ride along as T more test triples (methods.py)
            from tracegraph.kg.model.predict import filter_index, run_files

            head_side = np.full(T, cfg.side == "head")
            engine_ids = np.concatenate([test_ids, competitors(run.model, test_ids, filter_index(run, run_files(run)), head_side)])
        rival_of = (_rival_records(run.model, engine_ids[T:], test_ids, ents.labels, ent_names, cfg.side)
                    if len(engine_ids) > T else None)
        walk_of = None  # tracin-margin-path: todo position -> walk length of each of its rows (every rank's own)
        if cfg.explainer == "tracin-margin-path":
            walk_of = _walks(train_ids, [subsets[i] for i, _, _ in todo], test_ids, train_subsets is None)
        picks = None  # torchrun: rank 0's merged (position in cols, score, self-influence) per test triple
        with make_progress() as progress:
            if ctx.active:
                cols_of = [np.searchsorted(union, subsets[i]) for i, _, _ in todo]
                result, picks = _influence_over_ranks(ctx, checkpoints, train_ids, union, cols_of, engine_ids, opts,
                                                      device, progress, cfg.top_k, run.read_checkpoint,
                                                      walk_of)
            elif devices and len(devices) > 1:
                result = _influence_over_devices(devices, checkpoints, train_ids[union], engine_ids, opts, progress,
                                                 run.read_checkpoint)
            else:
                result = compute_influence(checkpoints, train_ids[union], engine_ids, opts, device, progress,
                                           read=run.read_checkpoint)
        by_method = None if in_pass else _method_scores(
            cfg, run, checkpoints, train_ids, test_ids, [subsets[i] for i, _, _ in todo], eps, device)
        for j, (i, name, (h, r, t)) in enumerate(todo if ctx.is_main else []):
            cols = np.searchsorted(union, subsets[i])
            meta = {
                "test_triple": {"index": i, "head": ents.labels[h], "relation": rels.labels[r], "tail": ents.labels[t]},
                "method": cfg.explainer, "side": cfg.side, "engine": cfg.method, "loss": cfg.loss, "label_smoothing": eps,
                "layers": result.layers,
                "checkpoints": [asdict(c) for c in result.checkpoints],
                "learning_rates": [c.lr for c in result.checkpoints],
                "test_self_influence": float(result.test_self[j]),
                "training_triples_ranked": int(len(cols)), "top_k": cfg.top_k,
            }
            if rival_of is not None:  # what the margin is taken against: without it the ranking cannot be read
                meta["rival"] = rival_of[j]
            pos = np.arange(len(cols))
            if picks is None:
                sc, self_inf, sel = np.asarray(result.scores[j, cols], np.float64), result.train_self[cols], cols
                key = np.asarray(result.scores[T + j, cols], np.float64) if len(engine_ids) > T else None
                key = by_method[j] if by_method is not None else (None if key is None else sc - key)
            else:
                pos, sc, self_inf, key = picks[j]
                sel = cols[pos]
            walk = None if walk_of is None else walk_of(j)[pos]
            rows = _rows(sc, self_inf, train_ids[union[sel]], (h, r, t), cfg.top_k, ents.labels, rels.labels,
                         ent_names, rel_names, key, walk)
            header = [*CSV_HEADER, *EXTRA_COLUMNS[:len(rows[0]) - len(CSV_HEADER)]] if rows else CSV_HEADER
            _write_csv(out / f"{name}_tracin.csv", rows, header)
            if collect is not None:
                collect.extend(rows)
            atomic_write_json(out / f"{name}_tracin.json", dict(meta, rows=[dict(zip(header, row)) for row in rows]))
            written += [f"{name}_tracin.csv", f"{name}_tracin.json"]
    summary = {
        "requested": end - cfg.start_index, "explained": len(todo), "skipped_existing": len(skipped),
        "failed": len(failures), "failures": failures, "elapsed_seconds": time.perf_counter() - t0,
        "files": written, "method": cfg.explainer, "engine": cfg.method, "loss": cfg.loss, "layers": result.layers if result else cfg.layers,
        "checkpoints": [str(c) for c in checkpoints], "training_triples": int(len(train_ids)),
        "union_of_ranked_training_triples": int(len(union)), "device": str(device),
    }
    if ctx.active:
        summary["world_size"] = ctx.world_size
    if devices:
        summary["devices"] = [str(d) for d in devices]
    if not ctx.is_main:
        return summary
    atomic_write_json(out / "summary.json", summary)
    for f in failures:
        log.warning(f"test triple {f['index']} {f['triple']}: {f['reason']}")
    return summary


def _influence_over_ranks(ctx, checkpoints, train_ids, union, cols_of, test_ids, opts, device, progress, top_k,
                          read=None, walk_of=None):
    """torchrun: this rank scores a contiguous shard of whole training batches (the batches one
    process would score, so its numbers are bitwise the same) against every test triple. Rank 0
    receives, per test triple, (position in its column list, score, self-influence) of every row —
    or, with ``top_k``, only each rank's own top-k and bottom-k, which contain the global ones
    (ties included: the order is the same stable sort restricted to a shard). Others get None.
    ``test_ids`` beyond ``len(cols_of)`` are the rivals of tracin-margin, one per test triple: then
    each pick also carries the margin TracIn(test) − TracIn(rival), and the top-k are the margin's
    (with ``walk_of``, tracin-margin-path's: by shell, then margin — the order :func:`_rows` writes)."""
    lo, hi = batch_aligned_shard(len(union), opts.batch_size, ctx.rank, ctx.world_size)
    result = compute_influence(checkpoints, train_ids[union[lo:hi]], test_ids, opts, device, progress, read=read)
    T = len(cols_of)
    mine = []
    for j, cols in enumerate(cols_of):
        pos = np.nonzero((cols >= lo) & (cols < hi))[0]
        sc = np.asarray(result.scores[j, cols[pos] - lo], np.float64)
        self_inf = result.train_self[cols[pos] - lo]
        key = sc - np.asarray(result.scores[T + j, cols[pos] - lo], np.float64) if len(test_ids) > T else None
        if top_k is not None and 2 * top_k < len(pos):
            keep = np.sort(_pick(sc if key is None else key, None if walk_of is None else walk_of(j)[pos], top_k))
            pos, sc, self_inf = pos[keep], sc[keep], self_inf[keep]
            key = None if key is None else key[keep]
        mine.append((pos, sc, self_inf, key))
    parts = gather_to_main(mine)
    if parts is None:
        return result, None
    picks = []
    for j in range(T):
        pos, sc, self_inf = (np.concatenate([p[j][k] for p in parts]) for k in range(3))
        key = None if parts[0][j][3] is None else np.concatenate([p[j][3] for p in parts])
        o = np.argsort(pos, kind="stable")  # back to the single-process column order
        picks.append((pos[o], sc[o], self_inf[o], None if key is None else key[o]))
    return result, picks


def _influence_over_devices(devices, checkpoints, train_rows, test_ids, opts, progress, read=None) -> InfluenceResult:
    """One process, several devices: the test triples are split across devices, each device scores
    every training triple against its share (a thread per device), and the rows are stacked."""
    devices = devices[:max(1, min(len(devices), len(test_ids)))]  # no device without a test triple
    parts = run_on_devices(devices, len(test_ids), lambda d, lo, hi: compute_influence(
        checkpoints, train_rows, test_ids[lo:hi], opts, d, progress, read=read))
    scores = _alloc(len(test_ids), len(train_rows), opts)  # in RAM or on disk, as one process would
    for p, (lo, hi) in zip(parts, (shard_range(len(test_ids), i, len(devices)) for i in range(len(devices)))):
        scores[lo:hi] = p.scores
    return InfluenceResult(scores, parts[0].train_self, np.concatenate([p.test_self for p in parts]),
                           parts[0].checkpoints, parts[0].layers)


def _method_scores(cfg, run, checkpoints, train_ids, test_ids, subsets, eps, device) -> list[np.ndarray]:
    """Per test triple, the explanation method's score of each of its rows (kg/explain/methods.py)."""
    from tracegraph.kg.model.predict import filter_index, run_files

    opts = MethodOptions(loss=cfg.loss, layers=cfg.layers, label_smoothing=eps)
    keys = method_keys_all([cfg.explainer], model=run.model, checkpoints=checkpoints, train_ids=train_ids,
                           facts=test_ids, subsets=subsets, known=filter_index(run, run_files(run)), opts=opts,
                           device=device)[cfg.explainer]
    return [single_score(k, seed=j) for j, k in enumerate(keys)]


def _walks(train_ids, subsets, test_ids, every_row: bool):
    """j -> the head–tail walk length of each of test triple j's rows, computed when asked (a
    [tests × rows] table would be as large as the scores); one graph for all when every test
    triple ranks every training triple (no filter), else one per filtered subgraph."""
    shared = WalkLengths(train_ids[:, [0, 2]]) if every_row else None

    def walk_of(j: int) -> np.ndarray:
        h, _, t = (int(x) for x in test_ids[j])
        return (shared or WalkLengths(train_ids[subsets[j]][:, [0, 2]]))(h, t)

    return walk_of


def _pick(score: np.ndarray, walk: np.ndarray | None, top_k: int | None) -> np.ndarray:
    """The rows written, in order. Best first: by score; with ``walk`` (tracin-margin-path) by
    margin shell, then score. With ``top_k``: the first k of that order (proponents), then the k
    lowest scores among the rest (opponents: against the prediction wherever they sit; for a plain
    score, simply the order's last k). Stable, so equal keys keep their column order, and a
    torchrun rank's own picks contain every global pick in its shard (_influence_over_ranks)."""
    by_score = np.argsort(-np.asarray(score, np.float64), kind="stable")
    if walk is None:
        order = by_score
    else:
        order = np.lexsort((-np.asarray(score, np.float64), margin_shell(walk)))
    if top_k is None or 2 * top_k >= len(order):
        return order
    pro = order[:top_k]
    return np.concatenate([pro, by_score[~np.isin(by_score, pro)][-top_k:]])


def _rows(scores, self_inf, train_rows, test, top_k, ent_labels, rel_labels, ent_names, rel_names, method=None,
          walk=None):
    """CSV rows ordered by ``method``'s scores when given (then a last MethodScore column; with
    ``walk``, by its shell first and a HeadTailWalk column after), else TracIn."""
    order = _pick(scores if method is None else method, walk, top_k)  # proponents, then opponents
    h, r, t = test
    head = [ent_labels[h], ent_names[h], rel_labels[r], rel_names[r], ent_labels[t], ent_names[t]]
    out = []
    for k in order:
        th, tr, tt = train_rows[k]
        out.append(head + [ent_labels[th], ent_names[th], rel_labels[tr], rel_names[tr], ent_labels[tt], ent_names[tt],
                           float(scores[k]), float(self_inf[k])] + ([] if method is None else [float(method[k])])
                   + ([] if walk is None else [float(walk[k])]))
    return out


def _write_csv(path: Path, rows, header=CSV_HEADER) -> None:
    n_text = 12  # the label columns; the rest are floats, written exactly
    with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        for row in rows:
            w.writerow(row[:n_text] + [repr(x) for x in row[n_text:]])


def _rival_records(model, rivals: np.ndarray, test_ids: np.ndarray, ent_labels, ent_names, side: str) -> list[dict]:
    """Per test triple (h, r, t): its margin methods' rival t* (the best-scored tail neither t nor
    known true) with both logits and the margin s(h, r, t) − s(h, r, t*); on the head side h*, the
    logits of (t, r⁻¹, h) and (t, r⁻¹, h*)."""
    s_fact, s_rival = side_logits(model, test_ids, rivals, np.full(len(test_ids), side == "head"))
    col = 0 if side == "head" else 2
    return [{"side": side, side: ent_labels[int(x[col])], f"{side}_name": ent_names[int(x[col])], "logit": float(b),
             "fact_logit": float(a), "logit_margin": float(a - b)} for x, a, b in zip(rivals, s_fact, s_rival)]


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


