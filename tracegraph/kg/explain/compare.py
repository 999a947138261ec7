"""Side by side: anyone's explanations through one necessity protocol (Kelpie's, with its controls).

Kelpie (Rossi et al., SIGMOD 2022) grades *necessary* explanations so: the facts of all the
explanations of N correctly predicted test facts are removed from the training set **at once**,
the model is retrained **once** from scratch with the same settings, and the facts' filtered tail
ranks before and after are compared (ΔHits@1, ΔMRR). This module runs that protocol on any number
of *arms* in one output folder, each a removal set and one retrain:

* an **explanations file** per arm (:mod:`tracegraph.kg.explain.explanation_tsv`; Kelpie's released
  TSVs are read as they are);
* an **explanation method** of ours per arm: each fact's top-``k`` among its candidates (the
  training facts featuring its head, as Kelpie's explanations do, or its head or tail);
* ``random-head`` (or ``random-head-tail``): per fact, as many random candidates as another arm's explanation of it holds;
* ``far``: as many random training facts as the random arm removes, featuring neither end of any
  graded fact, with the run's seed — what removing that many unrelated facts does by itself (the
  retrain's own noise under this protocol, where every removal arm keeps the run's seed and batches);
* ``noise``: nothing removed, another training seed — how many facts fall with no removal at all
  (Kelpie reports no such floor).

Only facts the run ranks first (filtered, tail side) are graded, and every arm removes the
explanations of those facts alone. Ranks after retraining are filtered two ways: with the
original known triples (``original``: a removed fact ``(h, r, t')`` stays known true), and with the
known triples minus the arm's removals (``reduced``: Kelpie's filter, under which a removed
sibling answer can outrank the fact by itself). Each arm is written to ``arms/NAME.json`` when its
retrain ends and skipped when rerun with the same removals; an interrupted retrain resumes from
its last epoch, and an arm removing the same facts with the same seed as a finished one takes its
record (``retrain_of``) instead of a second, identical retrain. ``compare.json`` and ``compare.md``
summarise every finished arm; ``facts.tsv`` lists every graded fact with each finished arm's ranks
after.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from tracegraph.errors import DataError, TracegraphError, require_file
from tracegraph.kg.explain.compare_arms import (  # noqa: F401  (candidate_rows, table_rows: compare's own words too)
    Arm,
    build_arms,
    check_arm_names,
    candidate_rows,
    removal_digest,
    table_rows,
    twin_record,
)
from tracegraph.kg.explain.compare_pairs import joins_versus, same_explanations, sizes_versus
from tracegraph.kg.explain.compare_summary import (
    compare_markdown,
    explanation_contents,
    fact_groups,
    facts_tsv,
    summarize,
)
from tracegraph.kg.explain.explanation_tsv import ExplanationTable, read_explanation_table
from tracegraph.kg.explain.grading import choose_facts, fact_margins, fact_ranks
from tracegraph.kg.explain.local_retrain import LocalRetrainOptions
from tracegraph.runtime.checkpoints import atomic_write_json, atomic_write_text, read_json
from tracegraph.runtime.progress import log

CANDIDATES = ("head", "head-tail")


@dataclass
class CompareConfig:
    """Settings of ``tracegraph fidelity compare``; each field is the option of the same name.

    Attributes:
        model_dir: The trained run (its config.json is what every arm retrains with).
        output_dir: Where ``compare.json``, ``compare.md``, ``facts.tsv``, ``arms/``, ``explanations/`` and
            ``retrains/`` go.
        explanations: Arm name -> explanations file.
        methods: Our explanation methods, one arm each.
        facts: A triples file to draw the facts from; None: the facts of the explanations files.
        n: Facts drawn (seeded) among those of ``facts`` the run ranks first.
        k: Facts per explanation for the method arms.
        candidates: ``head`` (training facts featuring the head) or ``head-tail``.
        random_like: The arm whose per-fact explanation sizes the random arm copies; None: the
            first explanations file, else ``k``.
        size_like: An explanations file's name: each method also gets the arm ``METHOD@NAME``,
            its explanations cut, fact by fact, to that file's explanation's size (its first
            facts, at most ``k``): whether a method's lead is what it chooses or how much it removes.
        versus: Arms every other arm is paired against by fact, as against the floors (say
            ``kelpie``): ΔH@1 beyond each under both filterings, and the falls of both where
            their explanations are the same size (:func:`sizes_versus`) and by which holds a fact
            joining head and tail (:func:`joins_versus`).
        noise_seed: The noise arm's training seed; None: the retrain seed + 1.
        retrain_seed: Every removal arm's training seed; None: the run's. Another seed repeats
            the protocol with other retrains, each in its own output folder; ``compare-pool``
            averages each fact's outcome over such folders.
        arms: The arms to retrain now; None: all (the summary covers every finished arm).
        bootstrap: Bootstrap resamples of the facts for the 95 % intervals.
        seed: Fact sample, random draws and tie-breaks.
        loss: TracIn loss convention of the methods.
        layers: Parameters whose gradients count.
        local: Settings of the local-retrain method.
        device: Where the methods compute and the retrains run (``auto``: the run's device).
        keep_models: Keep each retrain's weights (``retrains/NAME/run``); by default only its
            config and history stay.
    """

    model_dir: str
    output_dir: str
    explanations: dict[str, str] = field(default_factory=dict)
    methods: list[str] = field(default_factory=list)
    facts: str | None = None
    n: int = 100
    k: int = 4
    candidates: str = "head"
    random_like: str | None = None
    size_like: str | None = None
    versus: list[str] = field(default_factory=list)
    noise_seed: int | None = None
    retrain_seed: int | None = None
    arms: list[str] | None = None
    bootstrap: int = 1000
    seed: int = 0
    loss: str = "logit"
    layers: str = "all"
    local: LocalRetrainOptions = field(default_factory=LocalRetrainOptions)
    device: str = "auto"
    keep_models: bool = False


def open_run(mdir: Path) -> tuple:
    """What every use of a trained run here starts from.

    Returns:
        ``(training config, RunStore, training triples as ids [M, 3], filter files, filter index)``.
    """
    from tracegraph.kg.data.triples import encode_triples, read_labeled_triples
    from tracegraph.kg.model.store import RunStore, run_files

    run_cfg = read_json(require_file(mdir / "config.json", "run config (config.json of the run)"))["train"]
    store = RunStore(mdir / "final_model.pt" if (mdir / "final_model.pt").is_file() else mdir)
    train_ids = encode_triples(read_labeled_triples(run_cfg["train"]), store.entities, store.relations)
    files = run_files(store)
    return run_cfg, store, train_ids, files, store.known_tails(files)


def tail_ranks(store, offered: list, known) -> tuple[np.ndarray, list, np.ndarray]:
    """The label triples of ``offered`` the run has ids for, as ids and labels, with their filtered tail ranks."""
    ents, rels = store.entities, store.relations
    usable = [f for f in offered if f[0] in ents and f[2] in ents and f[1] in rels]
    ids = np.array([[ents.id(h), rels.id(r), ents.id(t)] for h, r, t in usable], np.int64).reshape(-1, 3)
    ranks = fact_ranks(store.model, ids, np.zeros(len(ids), bool), known) if len(ids) else np.zeros(0)
    return ids, usable, ranks


def graded_facts(store, cfg: CompareConfig, tables: dict[str, ExplanationTable], known) -> tuple:
    """The facts graded: those of ``--facts`` (or of the explanation files) the run ranks first.

    Args:
        store: The run.
        cfg: The settings.
        tables: The explanations files read.
        known: The original filter index.

    Returns:
        ``(facts as ids [n, 3], facts as labels, how many were offered)``.

    Raises:
        DataError: If there is nothing to grade.
    """
    from tracegraph.kg.data.triples import read_labeled_triples

    if cfg.facts:
        lt = read_labeled_triples(cfg.facts)
        offered = list(zip(lt.heads, lt.relations, lt.tails))
    elif tables:
        offered = list(dict.fromkeys(f for t in tables.values() for f in t.facts))
    else:
        raise TracegraphError("name the facts to grade: --facts FILE, or at least one --explanations NAME=FILE")
    ids, usable, ranks = tail_ranks(store, offered, known)
    pick = choose_facts(ranks, cfg.n, cfg.seed) if cfg.facts else np.flatnonzero(ranks <= 1)
    if not len(pick):
        raise DataError(
            "no fact is ranked first by the run (filtered, tail side)",
            cfg.facts or next(iter(cfg.explanations.values())),
        )
    return ids[pick], [usable[i] for i in pick], len(offered)


def run_arm(arm: Arm, ctx: dict) -> dict:
    """Retrain without the arm's removals and rank the facts under both filterings.

    Args:
        arm: The arm.
        ctx: What every arm shares: ``store``, ``facts``, ``labels``, ``train_ids``, ``known``,
            ``files`` (the filter's files), ``retrainer``.

    Returns:
        The arm's record (written to ``arms/NAME.json``).
    """
    model, seconds = ctx["retrainer"].run(arm.name, removed_labels(arm, ctx), arm.seed)
    return arm_record(arm, ctx, model, seconds)


def removed_labels(arm: Arm, ctx: dict) -> list[tuple[str, str, str]]:
    """The training triples the arm removes, as labels (what its retrain leaves out)."""
    e, r = ctx["store"].entities.labels, ctx["store"].relations.labels
    return [(e[a], r[b], e[c]) for a, b, c in ctx["train_ids"][arm.removed()]]


def arm_record(arm: Arm, ctx: dict, model, seconds: float) -> dict:
    """The arm's record from its retrained model: the facts' ranks under both filterings, their margins.

    Args:
        arm: The arm.
        ctx: As for :func:`run_arm` (``retrainer`` unused).
        model: The model retrained without the arm's removals.
        seconds: The retrain's time.

    Returns:
        The record.
    """
    store, facts, train_ids = ctx["store"], ctx["facts"], ctx["train_ids"]
    removed = arm.removed()
    head_side = np.zeros(len(facts), bool)
    # the margin over the strongest unfiltered rival, a continuous reading of the same prediction:
    # a retrain's chaos flips near ties either way, a removal that matters lowers the margin
    margins = fact_margins(model, facts, ctx["known"])
    ranks = {
        "original": fact_ranks(model, facts, head_side, ctx["known"]),
        # Kelpie's filter after removal: the removed facts are no longer known true
        "reduced": fact_ranks(model, facts, head_side, store.known_tails(ctx["files"], leave_out=train_ids[removed])),
    }
    return {
        "name": arm.name,
        "kind": arm.kind,
        "seed": arm.seed,
        "digest": removal_digest(arm, ctx["labels"]),
        "facts_removed": int(len(removed)),
        "explanation_sizes": [int(len(x)) for x in arm.rows],
        "seconds_per_explanation": arm.seconds_per_explanation,
        "retrain_seconds": seconds,
        "ranks": {k: v.tolist() for k, v in ranks.items()},
        "margins": margins.tolist(),
    }


def run_compare(cfg: CompareConfig, explain_only: bool = False, progress=None) -> dict:
    """Run the arms asked for, then summarise every finished arm into ``compare.json`` and ``compare.md``.

    Args:
        cfg: The settings.
        explain_only: Write the facts, the methods' explanations and the summary of the finished arms; retrain nothing.
        progress: A rich progress display for one bar over the retrains, or None.

    Returns:
        The summary (``compare.json``).

    Raises:
        TracegraphError: On a bad setting (an unknown arm, method or candidate scope).
        DataError: On a malformed or inconsistent explanations file, or no fact to grade.
    """
    from tracegraph.kg.explain.methods import check_methods
    from tracegraph.kg.explain.retrain import Retrainer
    from tracegraph.runtime.precision import resolve_device
    from tracegraph.runtime.progress import step_callback

    if cfg.candidates not in CANDIDATES:
        raise TracegraphError(f"--candidates must be one of {', '.join(CANDIDATES)}, not {cfg.candidates!r}")
    if cfg.methods:
        check_methods(cfg.methods)
    check_arm_names(cfg)
    t_start = time.perf_counter()
    mdir, out = Path(cfg.model_dir), Path(cfg.output_dir)
    run_cfg, store, train_ids, files, known = open_run(mdir)
    tables = {name: read_explanation_table(path) for name, path in cfg.explanations.items()}
    facts, labels, offered = graded_facts(store, cfg, tables, known)
    device = resolve_device(cfg.device)
    arms = build_arms(store, cfg, tables, facts, labels, train_ids, known, device, out)
    wanted = list(arms) if cfg.arms is None else cfg.arms
    ctx = {
        "store": store,
        "facts": facts,
        "labels": labels,
        "train_ids": train_ids,
        "known": known,
        "files": files,
        "retrainer": Retrainer(mdir, run_cfg["train"], cfg.device, out / "retrains", keep_models=cfg.keep_models),
    }
    records = {a: rec for a in arms if (rec := finished_record(out, arms[a], labels)) is not None}
    pending = [a for a in wanted if a not in records]
    tick = step_callback(None if explain_only else progress, "retrain", len(pending))
    for name in pending:
        # an arm removing what a finished arm removed, with its seed, is that arm's retrain: it needs none
        rec = twin_record(arms, records, name, labels)
        if rec is None and explain_only:
            continue
        rec = records[name] = rec or run_arm(arms[name], ctx)
        atomic_write_json(out / "arms" / f"{name}.json", rec)
        tick(name)
        o = np.asarray(rec["ranks"]["original"])
        retrain = (
            f"the retrain of {rec['retrain_of']}" if rec.get("retrain_of") else f"retrain {rec['retrain_seconds']:.0f}s"
        )
        log.info(
            f"compare: {name} removed {rec['facts_removed']} facts, H@1 after {np.mean(o <= 1):.3f} "
            f"(original filtering), {retrain}"
        )
    graded = {"facts": facts, "labels": labels, "offered": offered, "margins": fact_margins(store.model, facts, known)}
    return write_compare(cfg, out, arms, records, graded, train_ids, str(device), t_start)


def write_compare(
    cfg: CompareConfig, out: Path, arms: dict[str, Arm], records: dict, graded: dict, train_ids, device, t_start
):
    """Summarise every finished arm of ``out`` into its ``compare.json``, ``compare.md`` and ``facts.tsv``.

    Args:
        cfg: The settings.
        out: The comparison's folder (``cfg.output_dir``, or the folder it was moved to).
        arms: Every arm, in table order.
        records: The arms finished so far (others sharing the folder may have finished more).
        graded: ``facts`` (ids), ``labels``, ``offered`` (how many facts were offered) and
            ``margins`` (the run's, before any removal).
        train_ids: The training triples as ids.
        device: Where the methods computed.
        t_start: When the comparison started (``time.perf_counter``).

    Returns:
        The summary (``compare.json``).
    """
    facts, labels, margins = graded["facts"], graded["labels"], np.asarray(graded["margins"])
    # in table order, with the arms other processes sharing this folder finished meanwhile
    records = {a: rec for a in arms if (rec := records.get(a) or finished_record(out, arms[a], labels)) is not None}
    groups = fact_groups(facts, train_ids, margins, cfg.k)
    explained = {n: a.rows for n, a in arms.items() if a.kind in ("method", "file", "random")}
    res = {
        "model_dir": cfg.model_dir,
        "config": {**asdict(cfg), "local": asdict(cfg.local)},
        "offered": graded["offered"],
        "n_facts": len(facts),
        "facts": [list(f) for f in labels],
        "groups": groups,
        "margins": margins.tolist(),  # the run's, before any removal
        "arms": list(arms),
        "finished": list(records),
        "summary": summarize(records, np.ones(len(facts)), groups, cfg.bootstrap, cfg.seed, cfg.versus, margins),
        "same_explanation": same_explanations(
            {n: a.rows for n, a in arms.items() if a.kind in ("method", "file")}, records
        ),
        "contents": explanation_contents(explained, facts, train_ids, records),
        "sizes": sizes_versus(explained, records, cfg.versus),
        "joins": joins_versus(explained, facts, train_ids, records, cfg.versus),
        "device": device,
        "seconds": time.perf_counter() - t_start,
    }
    atomic_write_json(out / "compare.json", res)
    atomic_write_text(out / "compare.md", compare_markdown(res))
    atomic_write_text(out / "facts.tsv", facts_tsv(res["facts"], groups, records))
    return res


def finished_record(out: Path, arm: Arm, labels: list) -> dict | None:
    """The arm's record when it finished for these facts and removals, else None."""
    p = out / "arms" / f"{arm.name}.json"
    rec = read_json(p) if p.is_file() else None
    return rec if rec is not None and rec.get("digest") == removal_digest(arm, labels) else None
