"""The necessity test: are an explanation's triples what a prediction needs (after Kelpie's protocol)?

Facts: N test triples the trained model ranks first (filtered; on the tail side, and with reciprocal
relations on the head side too: a triple ranked first on both sides can be two facts), or the
triples of ``--facts`` on those sides. For each *arm* and k, every fact's top-k explanation triples are removed **at once**
and the model is retrained **once** with the run's own configuration; the facts are then ranked
again. Arms:

* each explanation method asked for, on the candidates = training triples touching the fact's
  head or tail (the fact itself never);
* ``neighbour``: k random candidates per fact (what a method must beat);
* ``far``: k random training triples touching neither the fact's head nor its tail (the noise
  floor: with the batch-preserving retrain of kg/data/exclusion.py it should move nothing).

Per arm and k: H@1, MRR and mean rank of the facts after retraining; ΔH@1 and ΔMRR against the
reference model (the original run for its own seed, else a retrain of the full set with that
seed), with bootstrap 95 % intervals over the facts; triples removed; seconds. Each other arm's
ΔH@1 *above far* (paired by fact, with its own interval): against the run itself, the facts were
chosen because the run ranks them first, so any retrain that changes the trajectory loses a few
of them (the winner's curse; 0.03–0.08 on UMLS) — the far arm measures that floor, and the
paired difference is what the removal itself did. And each arm's ΔH@1 on the facts with the
smaller and the larger half of the reference's margins (fact − strongest filtered rival): near-ties
flip on any retrain, confident predictions only when their support goes. With facts on both
sides, each arm's ΔH@1 on the tail-side and on the head-side facts too.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from tracegraph.errors import DataError, TracegraphError, require_file
from tracegraph.kg.explain.methods import (
    DEFAULT_EXPLAINER,
    MethodOptions,
    check_methods,
    fact_rows,
    method_keys_all,
)
from tracegraph.kg.explain.grading import choose_facts, fact_margins, fact_ranks, top_rows
from tracegraph.kg.explain.local_retrain import LocalRetrainOptions
from tracegraph.kg.explain.ranking import candidate_rows
from tracegraph.kg.explain.retrain import Retrainer
from tracegraph.kg.explain.necessity_summary import (
    SPLITS,
    across_seeds,
    add_above,
    add_margin_halves,
    add_split,
    necessity_markdown,
    removed_at_fact,
    summarize_arm,
)
from tracegraph.runtime.checkpoints import atomic_write_json, atomic_write_text, read_json
from tracegraph.runtime.progress import log, step_callback
from tracegraph.kg.explain.tracin.engine import DEFAULT_LOSS

RANDOM_ARMS = ("neighbour", "far")
SIDES = ("auto", "tail", "head", "both")


@dataclass
class NecessityConfig:
    """Settings of ``tracegraph necessity``; each field is the option of the same name.

    Attributes:
        model_dir: The trained run.
        train: Its training triples file.
        output_dir: Where ``necessity.json``, ``necessity.md`` and the retrains go.
        facts: Triples to explain; None for ``n`` of the run's test triples ranked first.
        sides: Which answer a fact is: ``tail``, ``head``, ``both``, or ``auto`` (both with
            reciprocal relations).
        n: Number of facts.
        ks: Numbers of training triples removed per arm.
        methods: Explanation methods whose top-k are removed.
        seeds: Retraining seeds; None for the run's own seed.
        loss: The loss the methods differentiate.
        layers: The layers whose gradients count.
        checkpoints: Checkpoints to sum over; None for all.
        filter_files: Known true triples for filtered ranks; None for the run's files.
        bootstrap: Bootstrap resamples for the confidence intervals.
        sample_seed: Seed of the fact sample, the random arms and tie-breaks.
        local: Settings of the local-retrain method.
        device: Device for the explanations; retrains use the run's unless this names one.
        keep_models: Keep the retrained runs' checkpoints.
    """

    model_dir: str
    train: str
    output_dir: str
    facts: str | None = None  # default: N test triples (the run's test file) ranked first
    sides: str = "auto"  # which answer a fact is: tail, head, both; auto = both with reciprocal relations
    n: int = 100
    ks: list[int] = field(default_factory=lambda: [1, 2, 4])
    methods: list[str] = field(default_factory=lambda: [DEFAULT_EXPLAINER])
    seeds: list[int] | None = None  # default: the run's own seed (its reference is the run itself)
    loss: str = DEFAULT_LOSS
    layers: str = "all"
    checkpoints: list[str] | None = None
    filter_files: list[str] | None = None
    bootstrap: int = 1000
    sample_seed: int = 0  # which facts, the random arms' draws and tie-breaks
    local: LocalRetrainOptions = field(default_factory=LocalRetrainOptions)
    device: str = "auto"  # explanations; retrains use the run's device unless this names one
    keep_models: bool = False


def resolve_sides(sides: str, reciprocal: bool) -> tuple[str, ...]:
    """``--sides`` as the tuple of sides a fact may be predicted on.

    Args:
        sides: ``"auto"``, ``"tail"``, ``"head"`` or ``"both"``.
        reciprocal: Whether the model has reciprocal relations (needed for heads).

    Returns:
        ``("tail",)``, ``("head",)`` or ``("tail", "head")``.

    Raises:
        TracegraphError: If the name is unknown, or head-side facts are asked of a model without
            reciprocal relations.
    """
    if sides not in SIDES:
        raise TracegraphError(f"--sides must be one of {', '.join(SIDES)}, not {sides!r}")
    if sides == "auto":
        return ("tail", "head") if reciprocal else ("tail",)
    if sides != "tail" and not reciprocal:
        raise TracegraphError(
            f"--sides {sides}: head-side facts need a model with reciprocal relations "
            "(this run has none); use --sides tail"
        )
    return ("tail", "head") if sides == "both" else (sides,)


def arm_rows(
    arm: str, train_ids: np.ndarray, fact, candidates: np.ndarray, k: int, seed: int, index: int
) -> np.ndarray:
    """The ``k`` random training rows of a random arm for one fact (never the fact itself).

    Args:
        arm: ``"neighbour"`` draws from ``candidates``; any other arm from the triples touching
            neither the head nor the tail.
        train_ids: Training triples ``[N, 3]``.
        fact: The fact ``(h, r, t)``.
        candidates: The fact's candidate rows.
        k: Rows to draw.
        seed: Sampling seed.
        index: The fact's position (part of the seed).

    Returns:
        Up to ``k`` rows; the first ``k' < k`` are the ``k'``-draw.
    """
    h, _, t = (int(x) for x in fact)
    if arm == "neighbour":
        pool = candidates
    else:
        touch = np.isin(train_ids[:, 0], (h, t)) | np.isin(train_ids[:, 2], (h, t))
        pool = np.flatnonzero(~touch)
    pool = pool[~np.isin(pool, fact_rows(train_ids, fact))]
    rng = np.random.default_rng([seed, index, 0 if arm == "neighbour" else 1])
    return rng.permutation(pool)[:k]  # a permutation prefix: the k-draw contains the smaller k's


@dataclass
class Graded:
    """The facts a necessity test grades, with what every stage reads of them."""

    facts: np.ndarray  # [T, 3] ids, base relations
    head_side: np.ndarray  # [T] booleans
    base_ranks: np.ndarray  # [T] the run's filtered ranks
    candidates: list[np.ndarray]  # per fact, its candidate rows of the training triples
    fact_file: str
    sides: tuple[str, ...]


def run_necessity(cfg: NecessityConfig, progress=None) -> dict:
    """Run the whole test; write ``<output_dir>/necessity.json`` (and ``.md``) and return the JSON.

    Args:
        cfg: The settings.
        progress: A rich progress display that gets one bar over the retrains, or None.

    Returns:
        The report.

    Raises:
        TracegraphError: If a setting is invalid.
        DataError: If an input file is malformed or the run has no test file and no facts are given.
    """
    from tracegraph.kg.data.triples import encode_triples, read_labeled_triples
    from tracegraph.kg.model.store import RunStore

    t_start = time.perf_counter()
    methods = check_methods(cfg.methods)
    ks = sorted({int(k) for k in cfg.ks})
    if not ks or ks[0] < 1:
        raise TracegraphError("--k must list positive integers, e.g. 1,2,4")
    mdir, out = Path(cfg.model_dir), Path(cfg.output_dir)
    lm = RunStore(mdir / "final_model.pt" if (mdir / "final_model.pt").is_file() else mdir)  # maps, model, filter
    run_cfg = read_json(require_file(mdir / "config.json", "run config (config.json of the run)"))["train"]
    train_ids = encode_triples(read_labeled_triples(cfg.train), lm.entities, lm.relations)
    g, known = grade_facts(cfg, lm, run_cfg, train_ids)
    keys, explain_seconds, device = explain_facts(cfg, methods, lm, train_ids, g, known)
    local_records = keys.pop("_local_retrain_records", None)
    per_fact = removals(cfg, methods, keys, train_ids, g, ks[-1])
    retrainer = Retrainer(mdir, cfg.train, cfg.device, out / "retrains", cfg.keep_models)
    run_seed = int(run_cfg.get("seed", 0))
    on_retrain = step_callback(progress, "retrain", retrain_count(cfg, run_seed))
    results = {
        "seeds": {
            str(seed): retrain_arms(cfg, seed, run_seed, lm, retrainer, per_fact, ks, train_ids, g, known, on_retrain)
            for seed in cfg.seeds or [run_seed]
        }
    }
    label = _labeller(lm)
    result = {
        "model_dir": str(mdir),
        "train": str(cfg.train),
        "facts_file": str(g.fact_file),
        "protocol": {
            "facts": (
                f"filtered rank 1 ({' or '.join(g.sides)} side) under the run's final model"
                if not cfg.facts
                else f"given, on the {' and '.join(g.sides)} side"
            ),
            "candidates": "training triples touching the fact's head or tail, never the fact",
            "removal": "every fact's top-k at once, one retrain per arm and k (kg/data/exclusion.py)",
            "reference": "the run itself for its own seed, else a full retrain with that seed",
            "ci": f"bootstrap over facts, {cfg.bootstrap} resamples",
        },
        "config": _jsonable(asdict(cfg)),
        "n_facts": int(len(g.facts)),
        "facts": [list(label(x)) for x in g.facts],
        "fact_sides": ["head" if h else "tail" for h in g.head_side],
        "base_ranks": g.base_ranks.tolist(),
        "mean_candidates": float(np.mean([len(c) for c in g.candidates])),
        "explain_seconds": explain_seconds,
        **results,
        # a retrain reproduces the run bit for bit only with the run's device and thread count
        "environment": {
            "explain_device": str(device),
            "retrain_device": retrainer.cfg.device,
            "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__,
        },
        "local_retrain": None if local_records is None else _local_diagnostics(local_records, cfg.local),
        "summary": across_seeds(results["seeds"], [*RANDOM_ARMS, *methods], ks),
    }
    result["seconds"] = time.perf_counter() - t_start
    atomic_write_json(out / "necessity.json", result)
    atomic_write_text(out / "necessity.md", necessity_markdown(result))
    return result


def _labeller(lm):
    e, r = lm.entities.labels, lm.relations.labels
    return lambda x: (e[int(x[0])], r[int(x[1])], e[int(x[2])])


def grade_facts(cfg: NecessityConfig, lm, run_cfg: dict, train_ids: np.ndarray):
    """The facts to grade (drawn among those ranked first, or all of ``--facts``) and the filter.

    Args:
        cfg: The settings.
        lm: The run (maps, model, filter index).
        run_cfg: The run's training settings.
        train_ids: The training triples as ids.

    Returns:
        ``(Graded, known)``: the facts and the filter index their ranks use.

    Raises:
        DataError: No fact file, or no fact ranked first.
    """
    from tracegraph.kg.data.triples import encode_triples, read_labeled_triples
    from tracegraph.kg.model.store import filter_index, run_files

    fact_file = cfg.facts or run_cfg.get("test")
    if not fact_file:
        raise DataError(
            "the run has no test file: name the facts to explain with --facts", Path(cfg.model_dir) / "config.json"
        )
    candidates_ids = encode_triples(read_labeled_triples(fact_file), lm.entities, lm.relations)
    files = list(cfg.filter_files) if cfg.filter_files else run_files(lm)
    known = filter_index(lm, [*files, fact_file])
    sides = resolve_sides(cfg.sides, lm.model.config.reciprocal)
    # every candidate on every side, tail side first (so --sides tail draws what it always drew)
    pool = np.concatenate([candidates_ids] * len(sides))
    pool_head = np.repeat(np.array([s == "head" for s in sides]), len(candidates_ids))
    pool_ranks = fact_ranks(lm.model, pool, pool_head, known)
    chosen = choose_facts(pool_ranks, cfg.n, cfg.sample_seed) if not cfg.facts else np.arange(len(pool))
    if len(chosen) == 0:
        raise DataError(f"no fact is ranked first by the model (filtered, {' or '.join(sides)} side)", fact_file)
    facts = pool[chosen]
    cands = [candidate_rows(train_ids, f, "head-tail") for f in facts]
    return Graded(facts, pool_head[chosen], pool_ranks[chosen], cands, fact_file, sides), known


def explain_facts(cfg: NecessityConfig, methods: list[str], lm, train_ids: np.ndarray, g: Graded, known):
    """Every method's keys for every graded fact's candidates.

    Returns:
        ``(keys, seconds, device)``: :func:`method_keys_all`'s keys, the time they took, the device.
    """
    from tracegraph.kg.explain.tracin.checkpoints import resolve_checkpoint_list
    from tracegraph.kg.model.model_io import run_label_smoothing
    from tracegraph.runtime.precision import resolve_device

    mdir = Path(cfg.model_dir)
    device = resolve_device(cfg.device)
    mopts = MethodOptions(loss=cfg.loss, layers=cfg.layers, label_smoothing=run_label_smoothing(mdir), local=cfg.local)
    t0 = time.perf_counter()
    keys = method_keys_all(
        methods,
        model=lm.model,
        checkpoints=resolve_checkpoint_list(mdir, cfg.checkpoints),
        train_ids=train_ids,
        facts=g.facts,
        subsets=g.candidates,
        known=known,
        opts=mopts,
        device=device,
        head_side=g.head_side,
    )
    seconds = time.perf_counter() - t0
    n_head = int(g.head_side.sum())
    log.info(
        f"necessity: {len(g.facts)} facts ({len(g.facts) - n_head} tail-side, {n_head} head-side) explained by "
        f"{', '.join(methods)} in {seconds:.0f}s"
    )
    return keys, seconds, device


def removals(cfg: NecessityConfig, methods, keys: dict, train_ids: np.ndarray, g: Graded, kmax: int) -> dict:
    """Per arm, per fact, its removed rows for the largest k (a smaller k removes a prefix).

    The random arms come first: without them no method's figure means anything.
    """
    n = len(g.facts)
    per_fact = {
        arm: [arm_rows(arm, train_ids, g.facts[j], g.candidates[j], kmax, cfg.sample_seed, j) for j in range(n)]
        for arm in RANDOM_ARMS
    }
    per_fact.update(
        {m: [top_rows(keys[m][j], g.candidates[j], kmax, cfg.sample_seed, j) for j in range(n)] for m in methods}
    )
    return per_fact


def retrain_arms(cfg, seed, run_seed, lm, retrainer, per_fact, ks, train_ids, g: Graded, known, on_retrain) -> dict:
    """One seed's arms: the reference (the run itself for its own seed) and one retrain per arm and k.

    Returns:
        Arm key (``reference``, ``ARM@k``) -> its ranks and statistics, with the above-far,
        margin-half and side splits added.
    """
    facts, head_side, label = g.facts, g.head_side, _labeller(lm)
    if seed == run_seed:
        ref_model, ref_ranks, ref_seconds = lm.model, g.base_ranks, 0.0
    else:
        ref_model, ref_seconds = retrainer.run(f"seed{seed}_reference", [], seed)
        on_retrain(f"reference seed {seed}")
        ref_ranks = fact_ranks(ref_model, facts, head_side, known)
    ref_margins = fact_margins(ref_model, facts, known, head_side)
    arms = {
        "reference": {
            "ranks": ref_ranks.tolist(),
            "seconds": ref_seconds,
            "hits@1": float(np.mean(ref_ranks <= 1)),
            "mrr": float(np.mean(1 / ref_ranks)),
        }
    }
    for arm, rows_per_fact in per_fact.items():
        for k in ks:
            rows = np.unique(np.concatenate([x[:k] for x in rows_per_fact]))
            model, secs = retrainer.run(f"seed{seed}_{arm}_k{k}", [label(x) for x in train_ids[rows]], seed)
            on_retrain(f"{arm} k={k}")
            ranks = fact_ranks(model, facts, head_side, known)
            a = arms[f"{arm}@{k}"] = dict(
                summarize_arm(ref_ranks, ranks, cfg.bootstrap, cfg.sample_seed),
                arm=arm,
                k=k,
                triples_removed=int(len(rows)),
                seconds=secs,
                ranks=ranks.tolist(),
                removed_at_fact=removed_at_fact(train_ids[rows], facts),
            )
            log.info(
                f"necessity seed {seed} {arm} k={k}: ΔH@1 {a['delta_hits@1']:.3f} "
                f"{[round(x, 3) for x in a['delta_hits@1_ci95']]}, ΔMRR {a['delta_mrr']:.3f}, H@1 after "
                f"{a['hits@1']:.3f} ({len(rows)} triples removed, {secs:.0f}s)"
            )
    add_above(arms, ks, cfg.bootstrap, cfg.sample_seed)
    add_margin_halves(arms, ref_margins)
    add_split(arms, ~head_side, SPLITS[1])
    return arms


def retrain_count(cfg: NecessityConfig, run_seed: int) -> int:
    """How many retrains :func:`run_necessity` will do (for its progress bar).

    Args:
        cfg: The settings.
        run_seed: The run's own training seed.

    Returns:
        The count.
    """
    seeds = cfg.seeds or [run_seed]
    arms = len(RANDOM_ARMS) + len(check_methods(cfg.methods))
    return sum(arms * len(set(cfg.ks)) + (s != run_seed) for s in seeds)


def _local_diagnostics(records: list[dict], opts: LocalRetrainOptions) -> dict:
    """How well the mimics fit: a mimic trained on all its entity's triples should rank the answer first."""
    full = [m for r in records for m in r["margin_full"].values()]
    return {
        "options": asdict(opts),
        "mimic_ranks_answer_first": float(np.mean(np.array(full) > 0)),
        "mean_margin_full": float(np.mean(full)),
        "mean_searched": float(np.mean([r["searched"] for r in records])),
    }


def _jsonable(x):
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x
