"""`tracegraph explain`: rank training triples by TracIn influence on each test triple.

:func:`run_explain` is a pipeline read top to bottom — resolve checkpoints, select candidates,
influence parts (the engine; the one stage spread over torchrun ranks or devices), method order,
pick rows — and returns records (:class:`~tracegraph.kg.explain.tracin.rows.ExplainResult`). It
writes nothing: :mod:`tracegraph.kg.outputs` writes ``triple_NNN_<head>_<tail>_tracin.csv``, its
companion ``.json`` and ``summary.json``. A test triple that cannot be explained (unknown entity,
empty filtered training set) is recorded with its reason and the run goes on.

Scaling out (docs/scaling.md): under ``torchrun`` the training triples are sharded across ranks
(whole batches), every rank scores its shard against all test triples, and rank 0 merges each test
triple's rows (or only the candidates for its top-k). ``devices=["cuda:0", "cuda:1"]`` (no
torchrun) shards the *test* triples across devices instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from tracegraph.errors import TracegraphError
from tracegraph.kg.data.questions import Questions
from tracegraph.kg.data.triples import encode_triples, read_labeled_triples, triple_file_stem
from tracegraph.kg.explain.methods import (
    MethodOptions,
    default_method,
    get_method,
    method_keys_all,
    single_score,
)
from tracegraph.kg.explain.rivals import rank_and_rival
from tracegraph.kg.explain.ranking import WalkLengths
from tracegraph.kg.explain.tracin.checkpoints import (
    explained_checkpoints,
    resolve_checkpoint_list,
    single_checkpoint_warning,
)
from tracegraph.kg.explain.tracin.engine import DEFAULT_LOSS, InfluenceOptions, InfluenceResult, check_influence_options
from tracegraph.kg.explain.tracin.factors import select_layers
from tracegraph.kg.explain.tracin.influence import TracIn
from tracegraph.kg.explain.tracin.rows import (
    CSV_HEADER,
    EXTRA_COLUMNS,
    ROLE_COLUMN,
    Explanation,
    ExplainResult,
    _names,
    _pick,
    _rel_names,
    _rows,
    explanation_meta,
    header_of,
    rival_records,
    run_summary,
)
from tracegraph.kg.explain.tracin.selection import Selection as _Selection, explain_questions, select_candidates
from tracegraph.kg.explain.tracin.sharding import _influence_over_devices, _influence_over_ranks
from tracegraph.kg.model.store import RunStore, filter_index, run_files
from tracegraph.runtime.devices import parse_devices
from tracegraph.runtime.distributed import init_distributed
from tracegraph.runtime.progress import log, make_progress
from tracegraph.runtime.rundir import check_one_run

__all__ = [
    "ExplainConfig",
    "run_explain",
    "explain_questions",
    "resolve_checkpoint_list",
    "CSV_HEADER",
    "EXTRA_COLUMNS",
    "ROLE_COLUMN",
    "Explanation",
    "ExplainResult",
    "base_name",
    "_pick",
]


@dataclass
class ExplainConfig:
    """Every setting of one ``explain`` (the CLI's options, with ``_``)."""

    model_dir: str  # a run directory, or one checkpoint file of it (then TracIn uses that checkpoint alone)
    train: str
    test_triples: str | list  # a triples file, or (head, relation, tail) labels
    output_dir: str | None = None  # where the facade writes; run_explain itself writes nothing
    checkpoints: list[str] | None = None  # None: up to the explained model's epoch | ["all"] | ["best"] | paths
    engine: str = "exact"  # how TracIn is computed: exact | autograd | vmap
    # the explanation method (kg/explain/methods.py); others than tracin add a MethodScore column.
    # None: tracin-margin-path, or plain tracin with loss="train-loss" (the original research scripts' convention)
    method: str | None = None
    loss: str = DEFAULT_LOSS
    layers: str = "all"
    top_k: int | None = None  # proponents and opponents each; None = every training triple
    batch_size: int = 0  # training triples per step; 0 = auto (engine.auto_batch_size, fixed by TracIn.from_parts)
    precision: str = "fp32"
    device: str = "auto"
    node_name_dict: str | None = None  # default: the run's recorded label files
    edge_map: str | None = None
    start_index: int = 0
    max_triples: int | None = None
    skip_existing: bool = False
    label_smoothing: float | None = None  # default: the run's
    devices: list[str] | None = None  # one process, several devices: test triples sharded across them
    # which prediction the margin methods explain: the tail of (h, r, ?), or with reciprocal relations
    # the head of (?, r, t) — their rival is then a head; TracIn itself sums both of a triple's directions
    side: str = "tail"
    # questions that name no entity or relation of the run: refused, all listed (False), or set aside
    # in summary.json's "unresolved" while the others are explained (True)
    skip_unresolved: bool = False
    # the known true triples of the rank and rival filter; None: the run's train/valid/test files
    filter_files: list[str] | None = None


base_name = triple_file_stem  # explain's outputs: <stem>_tracin.csv / .json


@dataclass
class _Inputs:
    train_ids: np.ndarray
    checkpoints: list[Path]
    checkpoints_note: str  # which checkpoints are summed, and why (logged when the work starts)
    checkpoints_warning: str | None  # one checkpoint summed that nobody named: how to get more
    eps: float
    ent_names: list[str]
    rel_names: list[str]


@dataclass
class _Parts:
    result: InfluenceResult
    picks: list | None  # torchrun: rank 0's merged picks per test triple
    rivals: list | None  # margin methods: the rival record per test triple
    walk_of: Callable | None
    ranks: np.ndarray
    scores: np.ndarray


def run_explain(
    cfg: ExplainConfig,
    train_subsets: Callable[[int, int], np.ndarray] | None = None,
    run: RunStore | None = None,
    questions: Questions | None = None,
) -> ExplainResult:
    """Explain every selected test triple; returns the records (nothing is written).

    Args:
        cfg: the settings.
        train_subsets: ``(head_id, tail_id) -> rows`` of the training triples to rank for that test
            triple (a filtered subgraph); default every training triple.
        run: the store of ``cfg.model_dir`` when the caller has it open (id maps and cached checkpoints reused).
        questions: :func:`explain_questions` of ``cfg`` when the caller resolved them already (to
            refuse bad questions before it prepares the output folder).

    Returns:
        An :class:`ExplainResult`; under torchrun only rank 0's holds explanations.

    Raises:
        UnresolvedQuestions: some test triples name no entity or relation of the run (all are
            listed), unless ``cfg.skip_unresolved``.
    """
    cfg = _checked(cfg)
    t0 = time.perf_counter()
    ctx, devices, device = _placement(cfg)
    store = run if run is not None else RunStore(cfg.model_dir, device)  # the id maps only: no weights yet
    inputs = _inputs(cfg, store)
    sel = select_candidates(cfg, store, inputs.train_ids, train_subsets, questions)
    explanations, parts = [], None
    if sel.todo:
        method = get_method(cfg.method)
        if not method.in_pass and (ctx.active or (devices and len(devices) > 1)):
            raise TracegraphError(
                f"method {cfg.method} runs in one process on one device (tracin, "
                f"tracin-margin, tracin-margin-path also run under torchrun and on several devices)"
            )
        test_ids = np.array([ids for _, _, ids in sel.todo], np.int64)
        parts = influence_parts(cfg, store, inputs, sel, test_ids, method, ctx, devices, device)
        keys = None if method.in_pass else method_order(cfg, store, inputs, sel, test_ids, device)
        if ctx.is_main:
            explanations = pick_rows(cfg, store, inputs, sel, parts, keys, method)
    summary = run_summary(cfg, sel, inputs, parts, explanations, ctx, devices, device, time.perf_counter() - t0)
    if ctx.is_main:
        for f in sel.failures:
            log.warning(f"test triple {f['index']} {f['triple']}: {f['reason']}")
        for u in sel.unresolved:
            log.warning(f"skipped question on line {u['line']} {u['question']}: {u['reason']}")
    return ExplainResult(explanations, summary)


def _checked(cfg: ExplainConfig) -> ExplainConfig:
    if cfg.top_k is not None and cfg.top_k < 1:  # 0 would keep every row (order[-0:] is all of it)
        raise TracegraphError(f"top_k must be at least 1, not {cfg.top_k}")
    if cfg.side not in ("tail", "head"):
        raise TracegraphError(f"side must be tail or head, not {cfg.side!r}")
    if cfg.method is None:
        cfg = replace(cfg, method=default_method(cfg.loss))
        if cfg.loss == "train-loss":
            log.info(
                "loss train-loss without a method: plain TracIn over the 1-N training loss, the original "
                "research scripts' convention (name the method to combine the loss with another one)"
            )
    get_method(cfg.method)  # an unknown name is an error before any work
    check_influence_options(InfluenceOptions(engine=cfg.engine, loss=cfg.loss))
    return cfg


def _placement(cfg: ExplainConfig):
    ctx = init_distributed(cfg.device)  # one process: resolve_device(cfg.device); torchrun: this rank's
    devices = parse_devices(cfg.devices) if cfg.devices else None
    if devices and ctx.active:
        raise TracegraphError("devices is for one process on one node; under torchrun every rank uses its own device")
    return ctx, devices, devices[0] if devices else ctx.device


def _inputs(cfg: ExplainConfig, store: RunStore) -> _Inputs:
    """Stage 1: the training triples, the checkpoints summed over (logged), the loss's smoothing, names."""
    train_ids = encode_triples(read_labeled_triples(cfg.train), store.entities, store.relations)
    select_layers(store.model, cfg.layers)  # a bad --layers is an error before anything is logged
    checkpoints, note = explained_checkpoints(store, cfg.checkpoints)
    few = single_checkpoint_warning(store, cfg.checkpoints, checkpoints)
    check_one_run(store.path, checkpoints)  # TracIn sums over them: they must be one run's
    eps = cfg.label_smoothing if cfg.label_smoothing is not None else store.label_smoothing
    if cfg.side == "head" and not store.model.config.reciprocal:
        raise TracegraphError("side head needs a model with reciprocal relations (this run has none)")
    ents, rels = store.entities.labels, store.relations.labels
    ent_names = (
        _names(cfg.node_name_dict, ents) if cfg.node_name_dict else [store.labels.entity_names.get(x, x) for x in ents]
    )  # the run's recorded label files
    rel_names = (
        _rel_names(cfg.edge_map, rels) if cfg.edge_map else [store.labels.relation_names.get(x, x) for x in rels]
    )
    return _Inputs(train_ids, checkpoints, note, few, eps, ent_names, rel_names)


def influence_parts(cfg, store, inputs: _Inputs, sel: _Selection, test_ids, method, ctx, devices, device) -> _Parts:
    """Stage 3: TracIn of every candidate on each test triple, and each one's filtered rank and score.

    For the margin methods the rivals ride along as T more test triples. One
    :class:`~tracegraph.kg.explain.tracin.influence.TracIn` computes it all; the work is sharded
    under torchrun or over ``devices``. Rank and score are on the explained side.

    Args:
        cfg: the settings (engine, loss, layers, batch size, precision, side, top_k).
        store: the run's store.
        inputs: stage 1's training triples, checkpoints, label smoothing and names.
        sel: stage 2's selection (candidates per test triple, their union).
        test_ids: ``[T, 3]`` the selected test triples as ids.
        method: the explanation method (:class:`~tracegraph.kg.explain.methods.Method`).
        ctx: the distributed context (torchrun when active).
        devices: several devices in one process, or None.
        device: where the gradients are computed (one process, one device).

    Returns:
        The parts: the engine's result over the union of candidates (``[T, U]``, ``[2T, U]`` with
        rivals; under torchrun this rank's shard of the columns), rank 0's merged picks under
        torchrun, the rival records, the walk lengths, the ranks and the scores.
    """
    T = len(test_ids)
    log.info(inputs.checkpoints_note)
    if inputs.checkpoints_warning and ctx.is_main:
        log.warning(inputs.checkpoints_warning)
    tracin = TracIn.from_parts(
        store,
        inputs.train_ids,
        inputs.checkpoints,
        InfluenceOptions(
            engine=cfg.engine,
            loss=cfg.loss,
            layers=cfg.layers,
            label_smoothing=inputs.eps,
            batch_size=cfg.batch_size,
            precision=cfg.precision,
            scratch_dir=cfg.output_dir,
        ),
        device=device,
    )
    head_side = np.full(T, cfg.side == "head")
    ranks, s_fact, rivals, s_rival = rank_and_rival(
        store.model, test_ids, filter_index(store, _filter_files(cfg, store)), head_side
    )
    engine_ids = np.concatenate([test_ids, rivals]) if method.needs_rival else test_ids
    rival_of = (
        rival_records(rivals, s_fact, s_rival, store.entities.labels, inputs.ent_names, cfg.side)
        if method.needs_rival
        else None
    )
    walk_of = _walks(
        inputs.train_ids, [sel.subsets[i] for i, _, _ in sel.todo], test_ids, not method.walk_shells, not sel.filtered
    )
    picks = None
    with make_progress() as progress:
        if ctx.active:
            cols_of = [np.searchsorted(sel.union, sel.subsets[i]) for i, _, _ in sel.todo]
            result, picks = _influence_over_ranks(
                ctx, tracin, sel.union, cols_of, engine_ids, progress, cfg.top_k, walk_of
            )
        elif devices and len(devices) > 1:
            result = _influence_over_devices(devices, tracin, sel.union, engine_ids, progress)
        else:
            result = tracin.result(engine_ids, sel.union, progress=progress)
    return _Parts(result, picks, rival_of, walk_of, ranks, s_fact)


def method_order(cfg, store, inputs: _Inputs, sel: _Selection, test_ids, device) -> list[np.ndarray]:
    """Stage 4 (methods other than the engine pass's own): each candidate's score under the method.

    Args:
        cfg: the settings (``method``, loss, layers).
        store: the run's store (final model, filter index).
        inputs: stage 1's training triples, checkpoints and label smoothing.
        sel: stage 2's selection (candidates per test triple).
        test_ids: ``[T, 3]`` the selected test triples as ids.
        device: where the method computes.

    Returns:
        Per test triple, one score per candidate (aligned with its rows), larger first.
    """
    opts = MethodOptions(loss=cfg.loss, layers=cfg.layers, label_smoothing=inputs.eps)
    keys = method_keys_all(
        [cfg.method],
        model=store.model,
        checkpoints=inputs.checkpoints,
        train_ids=inputs.train_ids,
        facts=test_ids,
        subsets=[sel.subsets[i] for i, _, _ in sel.todo],
        known=filter_index(store, _filter_files(cfg, store)),
        opts=opts,
        device=device,
        head_side=np.full(len(test_ids), cfg.side == "head"),
    )[cfg.method]
    return [single_score(k, seed=j) for j, k in enumerate(keys)]


def pick_rows(cfg, store, inputs: _Inputs, sel: _Selection, parts: _Parts, keys, method) -> list[Explanation]:
    """Stage 5: per test triple, the rows listed (proponents, then opponents) and its record.

    Args:
        cfg: the settings (``top_k``, method, side).
        store: the run's store (labels).
        inputs: stage 1's training triples and names.
        sel: stage 2's selection.
        parts: stage 3's influence, picks, rivals, walks, ranks and scores.
        keys: stage 4's scores per test triple; None: the method is the engine pass's own.
        method: the explanation method.

    Returns:
        One :class:`Explanation` per test triple explained, in order.
    """
    ents, rels = store.entities, store.relations
    res, T, out = parts.result, len(sel.todo), []
    for j, (i, name, (h, r, t)) in enumerate(sel.todo):
        cols = np.searchsorted(sel.union, sel.subsets[i])
        pos = np.arange(len(cols))
        if parts.picks is None:
            sc, self_inf, chosen = np.asarray(res.scores[j, cols], np.float64), res.train_self[cols], cols
            key = sc - np.asarray(res.scores[T + j, cols], np.float64) if method.needs_rival else None
            key = keys[j] if keys is not None else key
        else:
            pos, sc, self_inf, key = parts.picks[j]
            chosen = cols[pos]
        walk = None if parts.walk_of is None else parts.walk_of(j)[pos]
        rows = _rows(
            sc,
            self_inf,
            inputs.train_ids[sel.union[chosen]],
            (h, r, t),
            cfg.top_k,
            ents.labels,
            rels.labels,
            inputs.ent_names,
            inputs.rel_names,
            key,
            walk,
            method.signed,
        )
        out.append(
            Explanation(
                name,
                explanation_meta(cfg, store, inputs.eps, parts, j, i, (h, r, t), len(cols), rows),
                pd.DataFrame(rows, columns=header_of(rows)),
            )
        )
    return out


def _filter_files(cfg: ExplainConfig, store: RunStore) -> list:
    """The known true triples of the rank and rival filter: ``cfg.filter_files``, else the run's data files."""
    return list(cfg.filter_files) if cfg.filter_files is not None else run_files(store)


def _walks(train_ids, subsets, test_ids, skip, every_row: bool):
    """tracin-margin-path: ``j -> the head–tail walk length of each of test triple j's rows``.

    Computed when asked (a [tests × rows] table would be as large as the scores); one graph for all
    when every test triple ranks every training triple, else one per filtered subgraph.
    """
    if skip:
        return None
    shared = WalkLengths(train_ids[:, [0, 2]]) if every_row else None

    def walk_of(j: int) -> np.ndarray:
        h, _, t = (int(x) for x in test_ids[j])
        return (shared or WalkLengths(train_ids[subsets[j]][:, [0, 2]]))(h, t)

    return walk_of
