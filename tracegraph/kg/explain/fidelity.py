"""Explanation quality: does TracIn find the edges a prediction really rests on?

Two checks, both written to ``fidelity.json`` (``tracegraph fidelity``, and the demo):

**Ground-truth recovery.** For a test triple with known mechanism edges (``mechanisms.tsv`` of
the synthetic graph, or your own curated paths), the *candidates* are the training triples of
its filtered subgraph (docs/filtering.md), ranked by TracIn influence, highest first. Relevant =
the mechanism edges of that test triple, matched exactly as stored (head, relation, tail).
Per triple: RR = 1 / rank of the first relevant edge, AP = average precision over the relevant
edges among the candidates, Hits@k = 1 if a relevant edge is in the top k, Recall@10 = share of
the relevant candidates in the top 10. The same figures for baselines on the *same* candidates:

* ``random``: a random order (mean over ``n_random`` permutations, fixed seed);
* ``degree``: sum of the endpoints' degrees in the whole training graph, high first;
* ``path``: length of the shortest head–tail walk through the edge inside the candidate
  subgraph, short first, then degree.

Ties (rare for TracIn, common for the baselines) are broken at random and averaged over the
same permutations, so every figure is an expected value, never the luck of the file order.

**Removal test.** For correctly predicted test triples (filtered tail rank <= ``max_rank``
under the run's final model), remove the top-k proponents from the training set, retrain with
the run's own TrainConfig (same seed, epochs, everything), and measure the drop of the triple's
reciprocal rank and score; against removing k random training triples that touch the head or
the tail, retrained with the same budget. Retrains mask the removed triples out of the full
training set's batches (kg/data/exclusion.py), so the batch order and dropout masks stay the original
run's. ``tracegraph fidelity necessity`` (kg/explain/necessity.py) is the stronger protocol.
"""

from __future__ import annotations

import csv
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from tracegraph.errors import DataError, TracegraphError, require_file
from tracegraph.kg.explain.removal import (  # noqa: F401 - part of this module's API
    RemovalCase,
    RemovalOptions,
    neighbour_rows,
    random_neighbour_rows,
    removal_test,
    select_correct,
    tail_ranks,
    write_without,
)
from tracegraph.kg.explain.ranking import (  # noqa: F401 - part of this module's API
    HITS_K,
    WalkLengths,
    degrees,
    expected_metrics,
    method_keys,
    path_lengths,
    path_shell,
    random_rr_expectation,
    ranked_order,
    ranking_metrics,
)
from tracegraph.runtime.progress import step_callback
from tracegraph.kg.explain.tracin.engine import DEFAULT_LOSS

METRICS = ("mrr", "map", *(f"hits@{k}" for k in HITS_K), "recall@10")
BASELINES = ("random", "degree", "path")
MECHANISM_COLUMNS = ("test_head", "test_relation", "test_tail", "edge_head", "edge_relation", "edge_tail")

Triple = tuple[str, str, str]


# --------------------------------------------------------------------------- mechanisms


def read_mechanisms(path: str | Path) -> dict[Triple, set[Triple]]:
    """Read a mechanisms file: for each test triple, the training edges that explain it.

    Args:
        path: A tab-separated file with a header holding at least ``test_head``, ``test_relation``,
            ``test_tail``, ``edge_head``, ``edge_relation`` and ``edge_tail``.

    Returns:
        Test triple (labels) to its set of mechanism edges (labels).

    Raises:
        DataError: If the file is missing, lacks a column, or has an empty field (with the line).
    """
    p = require_file(path, "mechanisms file")
    out: dict[Triple, set[Triple]] = defaultdict(set)
    with open(p, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f, delimiter="\t")
        missing = [c for c in MECHANISM_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise DataError(
                f"mechanisms file needs the columns {', '.join(MECHANISM_COLUMNS)} "
                f"(tab-separated, with a header); missing {', '.join(missing)}",
                p,
            )
        for line, row in enumerate(reader, start=2):
            if not any((v or "").strip() for v in row.values()):
                continue
            if any(not (row[c] or "").strip() for c in MECHANISM_COLUMNS):
                raise DataError("empty field", p, line)
            out[(row["test_head"], row["test_relation"], row["test_tail"])].add(
                (row["edge_head"], row["edge_relation"], row["edge_tail"])
            )
    return dict(out)


# --------------------------------------------------------------------------- influence on candidates


def influence_on_candidates(
    checkpoints,
    train_ids: np.ndarray,
    test_ids: np.ndarray,
    subsets: list[np.ndarray],
    opts,
    device,
    progress=None,
    read=None,
):
    """TracIn of each test triple's candidate training rows only, in one engine pass over their union.

    Args:
        checkpoints: The checkpoints to sum over.
        train_ids: All training triples ``[N, 3]``.
        test_ids: The test triples ``[M, 3]``.
        subsets: Per test triple, its candidate rows into ``train_ids``.
        opts: The influence options.
        device: Where to compute.
        progress: A rich progress display, or None.
        read: Checkpoint reader (e.g. a run store's cached one); None reads from disk.

    Returns:
        Per test triple, the scores aligned with its subset; and the engine's result.

    Raises:
        TracegraphError: If no test triple has any candidate.
    """
    from tracegraph.kg.explain.tracin.influence import TracIn

    union = np.unique(np.concatenate(subsets)) if subsets else np.zeros(0, np.int64)
    if union.size == 0:
        raise TracegraphError("no candidate training triples for any test triple")
    # no store: the options' batch size is used as given, and ``read`` (None: from disk) reads the checkpoints
    res = TracIn.from_parts(None, train_ids, checkpoints, opts, device=device, read=read).result(
        test_ids, union, progress=progress
    )
    per = [np.asarray(res.scores[j, np.searchsorted(union, rows)], np.float64) for j, rows in enumerate(subsets)]
    return per, res


# --------------------------------------------------------------------------- ground-truth recovery


def _summary(per_triple: list[dict], methods) -> dict:
    out = {}
    for m in methods:
        out[m] = {}
        for key, name in zip(("rr", "ap", *(f"hits@{k}" for k in HITS_K), "recall@10"), METRICS):
            vals = np.array([p["methods"][m][key] for p in per_triple], np.float64)
            out[m][name] = {
                "mean": float(vals.mean()) if vals.size else None,
                "std": float(vals.std()) if vals.size else None,
            }
    return out


def ground_truth_recovery(
    test_ids: np.ndarray,
    subsets: list[np.ndarray],
    scores: list[np.ndarray],
    train_ids: np.ndarray,
    relevant: list[set[tuple[int, int, int]]],
    num_entities: int,
    *,
    n_random: int = 20,
    seed: int = 0,
    labels: Callable | None = None,
    extra: dict | None = None,
) -> dict:
    """Grade how well each ranking of the candidates recovers the known mechanism edges.

    Each test triple's candidates are ranked by TracIn, by the ``extra`` methods and by the
    baselines (degree, random), and graded against ``relevant``. Test triples without a mechanism
    edge among their candidates are listed under ``not_graded`` and left out of the means.

    Args:
        test_ids: Test triples ``[M, 3]``.
        subsets: Per test triple, its candidate rows into ``train_ids``.
        scores: Per test triple, the TracIn score of each candidate.
        train_ids: All training triples ``[N, 3]``.
        relevant: Per test triple, its mechanism edges as id triples.
        num_entities: Number of entities (for degrees).
        n_random: Random orderings averaged for the random baseline.
        seed: Seed of the random baseline.
        labels: ``labels(h, r, t)`` gives a triple's labels for the report; None reports ids.
        extra: Method name to, per test triple, its list of sort keys (see the explanation methods).

    Returns:
        The grades per method (``summary``), per test triple (``per_triple``), and coverage counts.
    """
    degree = degrees(train_ids, num_entities)
    rng = np.random.default_rng(seed)
    per, skipped = [], []
    for j, (h, r, t) in enumerate(np.asarray(test_ids)):
        cand = train_ids[subsets[j]]
        rel = np.array([tuple(map(int, c)) in relevant[j] for c in cand], dtype=bool)
        entry = {
            "index": j,
            "triple": labels(h, r, t) if labels else [int(h), int(r), int(t)],
            "candidates": int(len(cand)),
            "mechanism_edges": len(relevant[j]),
            "mechanism_edges_in_candidates": int(rel.sum()),
        }
        if not relevant[j] or not rel.any():
            skipped.append(
                dict(
                    entry,
                    reason="no mechanism edge among the candidates" if relevant[j] else "no mechanism edges known",
                )
            )
            continue
        perms = np.stack([rng.permutation(len(cand)) for _ in range(n_random)])
        keys = method_keys(scores[j], cand, int(h), int(t), degree)
        keys = {"tracin": keys.pop("tracin"), **{m: per[j] for m, per in (extra or {}).items()}, **keys}
        entry["methods"] = {m: expected_metrics(k, rel, perms) for m, k in keys.items()}
        entry["random_rr_exact"] = random_rr_expectation(len(cand), int(rel.sum()))
        per.append(entry)
    methods = ("tracin", *(extra or {}), *BASELINES)
    n_cands = sum(p["candidates"] for p in per)
    return {
        "definition": {
            "candidates": "training triples of the test triple's filtered subgraph",
            "relevant": "its mechanism edges, matched exactly as stored (head, relation, tail)",
            "mrr": "mean over test triples of 1 / rank of the first mechanism edge",
            "map": "mean average precision over the mechanism edges among the candidates",
            "hits@k": "share of test triples with a mechanism edge in the top k",
            "recall@10": "mean share of the (candidate) mechanism edges in the top 10",
            "ties": f"broken at random; every figure is the mean over {n_random} permutations (seed {seed})",
            "baselines": {
                "random": "random order",
                "degree": "sum of endpoint degrees in train, high first",
                "path": "shortest head-tail walk through the edge in the candidate graph, short first, then degree",
            },
        },
        "graded": len(per),
        "not_graded": skipped,
        "mechanism_edge_coverage": (
            sum(p["mechanism_edges_in_candidates"] for p in per + skipped)
            / max(sum(p["mechanism_edges"] for p in per + skipped), 1)
        ),
        "mean_candidates": n_cands / len(per) if per else 0.0,
        "summary": _summary(per, methods),
        "per_triple": per,
    }


# --------------------------------------------------------------------------- the driver (CLI and demo)


@dataclass
class FidelityConfig:
    """Settings of ``tracegraph fidelity``; each field is the option of the same name.

    Attributes:
        model_dir: The trained run.
        train: Its training triples file.
        test: Test triples to explain.
        mechanisms: The mechanisms file (see :func:`read_mechanisms`).
        output_dir: Where ``fidelity.json`` and the removal retrains go.
        filter_files: Known true triples for filtered ranks; None for the run's files.
        checkpoints: Checkpoints to sum TracIn over; None for all.
        loss: The loss TracIn differentiates.
        layers: The layers whose gradients count.
        label_smoothing: None for the run's.
        n_hops: Neighbourhood radius for the candidates.
        min_degree: Degree below which non-touching candidates are dropped.
        n_random: Random orderings for the random baseline.
        seed: Seed of the random baseline.
        removal: Also run the removal test (retrains).
        removal_options: The removal test's settings.
        device: Where to compute.
        methods: Explanation methods graded beside the baselines.
    """

    model_dir: str
    train: str
    test: str
    mechanisms: str
    output_dir: str
    filter_files: list[str] | None = None  # known true triples for filtered ranks (default: the run's files)
    checkpoints: list[str] | None = None  # as `tracegraph explain --checkpoints` (default: all)
    loss: str = DEFAULT_LOSS
    layers: str = "all"
    label_smoothing: float | None = None  # default: the run's
    n_hops: int = 2
    min_degree: int = 2
    n_random: int = 20
    seed: int = 0
    removal: bool = True
    removal_options: RemovalOptions = field(default_factory=RemovalOptions)
    device: str = "auto"
    methods: list[str] = field(default_factory=lambda: ["tracin"])  # graded beside the baselines


@dataclass
class FidelityContext:
    """Everything the checks share: the model, ids, candidates, influence, ranks."""

    cfg: FidelityConfig
    lm: object
    train_ids: np.ndarray
    test_ids: np.ndarray
    subsets: list[np.ndarray]
    relevant: list[set]
    known: object
    filter_seconds: float = 0.0
    scores: list[np.ndarray] = field(default_factory=list)
    influence: object = None
    ranks: np.ndarray | None = None
    model_scores: np.ndarray | None = None

    def labels(self, h, r, t) -> list[str]:
        """The labels of an id triple.

        Args:
            h: Head id.
            r: Relation id.
            t: Tail id.

        Returns:
            ``[head, relation, tail]`` labels.
        """
        e, rl = self.lm.entities.labels, self.lm.relations.labels
        return [e[int(h)], rl[int(r)], e[int(t)]]


def prepare(cfg: FidelityConfig) -> FidelityContext:
    """Load the run, encode train, test and mechanisms, and filter the graph around each test triple.

    Args:
        cfg: The settings.

    Returns:
        The context the checks share.

    Raises:
        DataError: If a file is malformed, or no test triple has mechanism edges.
    """
    from tracegraph.kg.explain.neighborhood import FilterOptions, GraphIndex
    from tracegraph.kg.model.store import RunStore as Run, run_files
    from tracegraph.kg.data.triples import encode_triples, read_labeled_triples

    lm = Run(
        Path(cfg.model_dir) / "final_model.pt" if (Path(cfg.model_dir) / "final_model.pt").is_file() else cfg.model_dir
    )  # opened once: ranking and TracIn share its id maps and checkpoint cache
    train_ids = encode_triples(read_labeled_triples(cfg.train), lm.entities, lm.relations)
    test_ids = encode_triples(read_labeled_triples(cfg.test), lm.entities, lm.relations)
    mech = read_mechanisms(cfg.mechanisms)
    ent, rel = lm.entities, lm.relations
    relevant = []
    for h, r, t in test_ids:
        edges = mech.get((ent.labels[h], rel.labels[r], ent.labels[t]), set())
        relevant.append({(ent.id(a), rel.id(b), ent.id(c)) for a, b, c in edges if a in ent and c in ent and b in rel})
    if not any(relevant):
        raise DataError(
            "none of the test triples has mechanism edges in the mechanisms file "
            "(columns test_head/test_relation/test_tail must match the test file)",
            cfg.mechanisms,
        )
    files = list(cfg.filter_files) if cfg.filter_files else run_files(lm)
    known = lm.known_tails([*files, cfg.test])
    t0 = time.perf_counter()
    index = GraphIndex.load_or_build(cfg.train, train_ids, len(ent))  # the cache explain --n-hops uses
    fopts = FilterOptions(n_hops=cfg.n_hops, min_degree=cfg.min_degree)
    subsets = [index.filter(int(h), int(t), fopts).triple_rows for h, _, t in test_ids]
    return FidelityContext(cfg, lm, train_ids, test_ids, subsets, relevant, known, time.perf_counter() - t0)


def compute_tracin(ctx: FidelityContext, progress=None) -> None:
    """Compute exact TracIn of every test triple's candidates over the run's checkpoints, into ``ctx``.

    Args:
        ctx: The shared context; ``scores``, ``influence`` and ``influence_options`` are set.
        progress: A rich progress display, or None.
    """
    from tracegraph.kg.explain.tracin.engine import InfluenceOptions
    from tracegraph.kg.explain.tracin.checkpoints import resolve_checkpoint_list
    from tracegraph.kg.model.model_io import run_label_smoothing
    from tracegraph.runtime.precision import resolve_device

    cfg, mdir = ctx.cfg, Path(ctx.cfg.model_dir)
    eps = cfg.label_smoothing if cfg.label_smoothing is not None else run_label_smoothing(mdir)
    opts = InfluenceOptions(engine="exact", loss=cfg.loss, layers=cfg.layers, label_smoothing=eps)
    ckpts = resolve_checkpoint_list(mdir, cfg.checkpoints)
    ctx.scores, ctx.influence = influence_on_candidates(
        ckpts,
        ctx.train_ids,
        ctx.test_ids,
        ctx.subsets,
        opts,
        resolve_device(cfg.device),
        progress,
        ctx.lm.read_checkpoint,
    )
    ctx.influence_options = dict(
        method="exact",
        loss=cfg.loss,
        layers=ctx.influence.layers,
        label_smoothing=eps,
        checkpoints=[asdict(c) for c in ctx.influence.checkpoints],
    )


def rank_test(ctx: FidelityContext) -> None:
    """Compute the filtered tail ranks and scores of the test triples under the final model, into ``ctx``.

    Args:
        ctx: The shared context; ``ranks`` and ``model_scores`` are set.
    """
    ctx.ranks, ctx.model_scores = tail_ranks(ctx.lm.model, ctx.test_ids, ctx.known)


def compute_methods(ctx: FidelityContext, methods, progress=None) -> None:
    """Compute the other explanation methods' sort keys on the same candidates, into ``ctx``.

    :func:`recovery` then grades them beside TracIn and the baselines.

    Args:
        ctx: The shared context; ``extra_keys`` and ``extra_seconds`` are set.
        methods: Method names; ``tracin`` and the baselines are skipped here.
        progress: A rich progress display, or None.
    """
    from tracegraph.kg.explain.methods import BASELINE_METHODS, MethodOptions, method_keys_all
    from tracegraph.kg.model.model_io import run_label_smoothing
    from tracegraph.kg.explain.tracin.checkpoints import resolve_checkpoint_list
    from tracegraph.runtime.precision import resolve_device

    cfg, mdir = ctx.cfg, Path(ctx.cfg.model_dir)
    wanted = [m for m in methods if m not in ("tracin", *BASELINE_METHODS)]
    if not wanted:
        return
    eps = cfg.label_smoothing if cfg.label_smoothing is not None else run_label_smoothing(mdir)
    t0 = time.perf_counter()
    keys = method_keys_all(
        wanted,
        model=ctx.lm.model,
        checkpoints=resolve_checkpoint_list(mdir, cfg.checkpoints),
        train_ids=ctx.train_ids,
        facts=ctx.test_ids,
        subsets=ctx.subsets,
        known=ctx.known,
        opts=MethodOptions(loss=cfg.loss, layers=cfg.layers, label_smoothing=eps),
        device=resolve_device(cfg.device),
        progress=progress,
    )
    keys.pop("_local_retrain_records", None)
    ctx.extra_keys = {m: keys[m] for m in wanted}
    ctx.extra_seconds = time.perf_counter() - t0


def recovery(ctx: FidelityContext) -> dict:
    """The ground-truth recovery check (see :func:`ground_truth_recovery`) with its settings.

    Args:
        ctx: The shared context, after :func:`compute_tracin`.

    Returns:
        The grades, plus the influence and filter settings.
    """
    out = ground_truth_recovery(
        ctx.test_ids,
        ctx.subsets,
        ctx.scores,
        ctx.train_ids,
        ctx.relevant,
        len(ctx.lm.entities),
        n_random=ctx.cfg.n_random,
        seed=ctx.cfg.seed,
        labels=ctx.labels,
        extra=getattr(ctx, "extra_keys", None),
    )
    out["influence"] = ctx.influence_options
    out["filter"] = {"n_hops": ctx.cfg.n_hops, "min_degree": ctx.cfg.min_degree, "seconds": ctx.filter_seconds}
    return out


def removal(ctx: FidelityContext, progress=None) -> dict:
    """The removal test on the test triples the model ranks best.

    Args:
        ctx: The shared context, after :func:`compute_tracin`.
        progress: A rich progress display that gets one bar over the retrains, or None.

    Returns:
        The removal test's report (see :func:`~tracegraph.kg.explain.removal.removal_test`).
    """
    o = ctx.cfg.removal_options
    if ctx.ranks is None:
        rank_test(ctx)
    chosen = select_correct(ctx.ranks, ctx.model_scores, o.max_rank, o.n_triples)
    cases = []
    for j in chosen:
        order = np.argsort(-ctx.scores[j], kind="stable")
        cases.append(
            RemovalCase(j, tuple(int(x) for x in ctx.test_ids[j]), ctx.subsets[j][order], relevant=ctx.relevant[j])
        )
    if not cases:
        return {
            "options": asdict(o),
            "graded": 0,
            "retrains": 0,
            "note": f"no test triple has a filtered tail rank <= {o.max_rank} under the final model",
        }
    on_retrain = step_callback(progress, "retrain", len(cases) * (1 + o.random_draws))
    return removal_test(
        ctx.cfg.model_dir,
        ctx.cfg.train,
        ctx.train_ids,
        cases,
        ctx.known,
        Path(ctx.cfg.output_dir) / "removal",
        o,
        labels=ctx.labels,
        on_retrain=on_retrain,
    )


def run_fidelity(cfg: FidelityConfig) -> dict:
    """Run both checks; write ``<output_dir>/fidelity.json`` and return its content.

    Args:
        cfg: The settings.

    Returns:
        The report: ``recovery``, ``removal`` (when asked for) and ``seconds``.

    Raises:
        DataError: If an input file is malformed.
        TracegraphError: If a setting is invalid.
    """
    from tracegraph.runtime.checkpoints import atomic_write_json
    from tracegraph.runtime.progress import make_progress

    t0 = time.perf_counter()
    ctx = prepare(cfg)
    with make_progress() as progress:  # closed before the retrains' own bar
        compute_tracin(ctx, progress)
        compute_methods(ctx, cfg.methods, progress)
    rank_test(ctx)
    result = {
        "model_dir": str(cfg.model_dir),
        "train": str(cfg.train),
        "test": str(cfg.test),
        "mechanisms": str(cfg.mechanisms),
        "recovery": recovery(ctx),
    }
    if cfg.removal:
        with make_progress() as progress:  # one bar over the retrains
            result["removal"] = removal(ctx, progress=progress)
    result["seconds"] = time.perf_counter() - t0
    atomic_write_json(Path(cfg.output_dir) / "fidelity.json", result)
    return result


__all__ = [
    "ranking_metrics",
    "ranked_order",
    "expected_metrics",
    "random_rr_expectation",
    "degrees",
    "WalkLengths",
    "path_lengths",
    "path_shell",
    "method_keys",
    "read_mechanisms",
    "influence_on_candidates",
    "ground_truth_recovery",
    "RemovalOptions",
    "RemovalCase",
    "removal_test",
    "neighbour_rows",
    "random_neighbour_rows",
    "write_without",
    "tail_ranks",
    "select_correct",
    "FidelityConfig",
    "FidelityContext",
    "prepare",
    "compute_tracin",
    "compute_methods",
    "rank_test",
    "recovery",
    "removal",
    "run_fidelity",
]
