"""Explanation quality, ``tracegraph fidelity`` and the demo: the driver of both checks.

Both are written to ``fidelity.json``. **Ground-truth recovery** (kg/explain/recovery.py): are a
test triple's known mechanism edges ranked first among the training triples of its filtered
subgraph, against random, degree and path baselines on the same candidates?

**Removal test.** For correctly predicted test triples (filtered tail rank <= ``max_rank``
under the run's final model), remove the top-k proponents from the training set, retrain with
the run's own TrainConfig (same seed, epochs, everything), and measure the drop of the triple's
reciprocal rank and score; against removing k random training triples that touch the head or
the tail, retrained with the same budget. Retrains mask the removed triples out of the full
training set's batches (kg/data/exclusion.py), so the batch order and dropout masks stay the original
run's. ``tracegraph fidelity necessity`` (kg/explain/necessity.py) is the stronger protocol.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from tracegraph.errors import DataError
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
from tracegraph.kg.explain.recovery import (  # noqa: F401 - part of this module's API
    BASELINES,
    MECHANISM_COLUMNS,
    METRICS,
    Triple,
    ground_truth_recovery,
    influence_on_candidates,
    read_mechanisms,
)
from tracegraph.runtime.progress import step_callback
from tracegraph.kg.explain.tracin.engine import DEFAULT_LOSS

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
