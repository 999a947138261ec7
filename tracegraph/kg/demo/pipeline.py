"""`tracegraph demo`: the whole pipeline on the synthetic graph, ending in ``report.html``.

generate -> train ConvE -> evaluate -> filter -> explain (exact TracIn) -> grade against the planted
mechanisms -> necessity test (remove explanations, retrain) -> report. Every stage writes its own files
under the output directory, so each can be inspected (and re-run with the ordinary commands):
``data/`` (the graph), ``run/`` (the trained model and its checkpoints), ``explanations/`` (explain's
CSV/JSON), ``fidelity.json``, ``necessity/`` (necessity.json/.md, the retrains' configs, histories and
excluded triples), ``report.html``, ``demo_summary.json``.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from tracegraph.kg.explain.fidelity import FidelityConfig
from tracegraph.kg.explain.methods import DEFAULT_EXPLAINER
from tracegraph.runtime.progress import console, quiet


@dataclass
class DemoConfig:
    """Settings of ``tracegraph demo``.

    Attributes:
        output_dir: Where the graph, run, explanations and report go.
        quick: Use a smaller graph and model (see :func:`preset`).
        seed: Seed of the graph and the training.
        n_explain: Best-predicted test triples shown in the report.
        device: Where to train and explain.
        threads: Torch intra-op threads during the demo (1 is robust on shared CPUs).
    """

    output_dir: str = "demo-output"
    quick: bool = False
    seed: int = 0
    n_explain: int = 5  # best-predicted test triples shown in the report
    device: str = "cpu"
    threads: int = 1  # torch intra-op threads; 1 is robust on shared CPUs (see docs/demo.md)


@dataclass
class Preset:
    """Sizes chosen so the default demo fits in 5 minutes on an idle 2-core CPU (see docs/demo.md)."""

    graph: dict = field(default_factory=dict)  # SyntheticConfig overrides (quick: SyntheticConfig.quick)
    model: dict = field(
        default_factory=lambda: dict(embedding_dim=64, embedding_height=8, embedding_width=8, output_channels=32)
    )
    epochs: int = 100
    checkpoint_every: int = 10
    eval_every: int = 5
    learning_rate: float = 0.01
    batch_size: int = 256  # half the steps of 128 at the same test MRR on this graph
    # no smoothing: sharper predictions, fewer near-ties that any retrain flips (necessity's far
    # arm flipped 4 of 30 facts without, 11 with 0.1)
    label_smoothing: float = 0.0
    necessity_k: int = 4  # each fact's top-k removed in the necessity test (one retrain per arm)
    necessity_facts: int = 30  # test edges ranked first drawn as the necessity test's facts (fewer if fewer)
    necessity_methods: tuple = (DEFAULT_EXPLAINER, "path")  # arms beside the random neighbour / far arms
    loss: str = "logit"  # the TracIn convention explained and graded (the score convention is graded too)
    # explanation methods graded beside TracIn and the baselines (kg/explain/methods.py). local-retrain
    # re-fits embeddings per candidate subset: on the full graph it alone would double the grading
    # stage, so it is graded by `tracegraph fidelity recovery --method local-retrain` on request
    graded: tuple = ("tracin-margin", "tracin-margin-path", "tracin-cosine", "relatif", "tracin-path")


def preset(quick: bool) -> Preset:
    """The demo's sizes: the default, or a smaller graph and model for ``--quick``.

    Args:
        quick: Whether to use the quick sizes.

    Returns:
        The sizes.
    """
    if not quick:
        return Preset()
    return Preset(
        model=dict(embedding_dim=32, embedding_height=4, embedding_width=8, output_channels=8),
        epochs=20,
        checkpoint_every=5,
        eval_every=5,
        batch_size=128,
        label_smoothing=0.1,
        graded=(*Preset.graded, "local-retrain"),
    )


class Stages:
    """Prints each stage as a rich rule with its number, and records its wall time."""

    def __init__(self, names: list[str]):
        self.names, self.seconds = names, {}

    @contextlib.contextmanager
    def __call__(self, name: str, detail: str = ""):
        i = self.names.index(name) + 1
        console.rule(f"[bold cyan]stage {i}/{len(self.names)}: {name}[/] {detail}", align="left")
        t0 = time.perf_counter()
        yield
        self.seconds[name] = round(time.perf_counter() - t0, 2)
        console.print(f"[green]✓[/] {name} ({self.seconds[name]:.1f} s)", highlight=False)


STAGES = ["generate", "train", "evaluate", "filter", "explain", "grade", "necessity test", "report"]


def run_demo(cfg: DemoConfig) -> dict:
    """Run the whole demo: generate the graph, train, explain, check fidelity and write the report.

    Torch's thread count is set to ``cfg.threads`` for the duration and restored afterwards.

    Args:
        cfg: The settings.

    Returns:
        The demo's summary (output directory, seconds per stage, file paths, headline figures).
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, cfg.threads))
    try:
        return _run(cfg)
    finally:
        torch.set_num_threads(threads)


def _run(cfg: DemoConfig) -> dict:
    import torch

    from tracegraph.kg.explain import fidelity as fid
    from tracegraph.kg.model.evaluate import evaluate
    from tracegraph.kg.demo.report import write_report
    from tracegraph.kg.demo.synthetic import SyntheticConfig, generate, write
    from tracegraph.kg.explain.tracin.explain import ExplainConfig
    from tracegraph.kg.outputs import explain_files as run_explain  # records, then the standard files
    from tracegraph.errors import DataError
    from tracegraph.kg.explain.necessity import NecessityConfig, run_necessity
    from tracegraph.kg.model.train import TrainConfig, train
    from tracegraph.runtime.checkpoints import atomic_write_json
    from tracegraph.runtime.progress import make_progress

    t_start = time.perf_counter()
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    p = preset(cfg.quick)
    stage = Stages(STAGES)
    data, run_dir = out / "data", out / "run"

    with stage("generate", "synthetic biomedical graph with planted mechanisms"):
        gcfg = SyntheticConfig.quick(**p.graph) if cfg.quick else SyntheticConfig(**p.graph)
        counts = write(generate(gcfg, seed=cfg.seed), data)
        console.print(
            f"{counts['entities']} entities, {counts['train']} train / {counts['valid']} valid / "
            f"{counts['test']} test triples (test = held-out treats edges)",
            highlight=False,
        )

    tcfg = TrainConfig(
        train=str(data / "train.txt"),
        valid=str(data / "valid.txt"),
        test=str(data / "test.txt"),
        entity_map=str(data / "node_dict.txt"),
        relation_map=str(data / "rel_dict.txt"),
        output_dir=str(run_dir),
        epochs=p.epochs,
        batch_size=p.batch_size,
        learning_rate=p.learning_rate,
        label_smoothing=p.label_smoothing,
        checkpoint_every=p.checkpoint_every,
        eval_every=p.eval_every,
        seed=cfg.seed,
        device=cfg.device,
        model=dict(p.model),
        patience=0,  # every epoch, as the demo's documented results were measured
        overwrite=True,
    )  # the demo regenerates its data, so a rerun replaces its own run
    with stage(
        "train", f"ConvE d={p.model['embedding_dim']}, {p.epochs} epochs, checkpoint every {p.checkpoint_every}"
    ):
        train(tcfg)

    fcfg = FidelityConfig(
        model_dir=str(run_dir),
        train=str(data / "train.txt"),
        test=str(data / "test.txt"),
        mechanisms=str(data / "mechanisms.tsv"),
        output_dir=str(out),
        loss=p.loss,
        seed=cfg.seed,
        removal=False,
        device=cfg.device,
    )
    with stage("evaluate", "filtered ranks of the held-out treats edges (final model)"):
        ctx = fid.prepare(fcfg)
        known = ctx.known
        metrics, _ = evaluate(ctx.lm.model, ctx.test_ids, known, device=cfg.device)
        fid.rank_test(ctx)
        order = np.lexsort((-ctx.model_scores, ctx.ranks))
        chosen = [int(j) for j in order[: cfg.n_explain]]
        console.print(
            f"test MRR {metrics['both']['mrr']:.3f} (tails {metrics['tail']['mrr']:.3f}); best tail ranks "
            f"{', '.join(f'{ctx.ranks[j]:g}' for j in chosen)}",
            highlight=False,
        )

    with stage("filter", "2-hop training subgraph around every test triple"):
        sizes = [len(s) for s in ctx.subsets]
        console.print(
            f"{len(sizes)} subgraphs, {np.mean(sizes):.0f} training triples on average "
            f"(max {max(sizes)}) of {len(ctx.train_ids)}",
            highlight=False,
        )

    with stage(
        "explain", f"exact TracIn ({p.loss}) over {len(list((run_dir / 'checkpoints').glob('*.pt')))} checkpoints"
    ):
        with make_progress() as progress:
            fid.compute_tracin(ctx, progress)
        main_scores, main_infl, main_opts = ctx.scores, ctx.influence, ctx.influence_options
        # the standard explain outputs for the predictions shown in the report
        sel = out / "explanations" / "selected_test.txt"
        sel.parent.mkdir(parents=True, exist_ok=True)
        sel.write_text("".join("\t".join(ctx.labels(*ctx.test_ids[j])) + "\n" for j in chosen))
        rows_of = {(int(ctx.test_ids[j][0]), int(ctx.test_ids[j][2])): ctx.subsets[j] for j in chosen}
        with quiet():
            run_explain(
                ExplainConfig(
                    model_dir=str(run_dir),
                    train=str(data / "train.txt"),
                    test_triples=str(sel),
                    output_dir=str(out / "explanations"),
                    loss=p.loss,
                    device=cfg.device,
                    node_name_dict=str(data / "node_name_dict.txt"),
                ),
                lambda h, t: rows_of[(h, t)],
            )

    other = "score" if p.loss != "score" else "logit"
    with stage(
        "grade",
        f"ground-truth recovery: {', '.join(p.graded)} vs baselines (and TracIn with --loss {other} for comparison)",
    ):
        with make_progress() as progress:
            fid.compute_methods(ctx, p.graded, progress)
        recovery = fid.recovery(ctx)
        ctx.extra_keys = None  # the comparison grades TracIn alone
        ctx.cfg = replace(fcfg, loss=other)
        with make_progress() as progress:
            fid.compute_tracin(ctx, progress)
        recovery_other = fid.recovery(ctx)
        ctx.cfg, ctx.scores, ctx.influence, ctx.influence_options = fcfg, main_scores, main_infl, main_opts
        s = recovery["summary"]
        console.print(
            "MRR of the mechanism edges: "
            + ", ".join(f"{m} {s[m]['mrr']['mean']:.3f}" for m in s)
            + f"; TracIn {other} {recovery_other['summary']['tracin']['mrr']['mean']:.3f}",
            highlight=False,
        )

    # necessity (kg/explain/necessity.py): the test a user can run on a graph without planted answers.
    # Tail side only: the demo asks which disease a drug treats, as its recovery grading does.
    ncfg = NecessityConfig(
        model_dir=str(run_dir),
        train=str(data / "train.txt"),
        output_dir=str(out / "necessity"),
        n=p.necessity_facts,
        ks=[p.necessity_k],
        methods=list(p.necessity_methods),
        loss=p.loss,
        sample_seed=cfg.seed,
        device=cfg.device,
        sides="tail",
    )
    with stage("necessity test", f"remove every top-ranked fact's top-{p.necessity_k} at once, retrain once per arm"):
        with make_progress() as progress:
            try:
                with quiet():
                    necessity = run_necessity(ncfg, progress=progress)
            except DataError as err:  # e.g. no test triple ranked first by a weak model
                necessity = {"note": str(err), "summary": {}}
        arms = necessity["summary"]
        if arms:
            console.print(
                f"ΔH@1 of {necessity['n_facts']} facts ranked first, top-{p.necessity_k} removed: "
                + ", ".join(f"{name.split('@')[0]} {v['delta_hits@1']['mean']:.2f}" for name, v in arms.items()),
                highlight=False,
            )
        else:
            console.print(necessity["note"], highlight=False)

    fidelity = {
        "model_dir": str(run_dir),
        "train": fcfg.train,
        "test": fcfg.test,
        "mechanisms": fcfg.mechanisms,
        "recovery": recovery,
        "recovery_other_loss": recovery_other,
        "necessity": necessity,
    }
    atomic_write_json(out / "fidelity.json", fidelity)

    with stage("report", "report.html"):
        marks = {tuple(ctx.labels(*ctx.test_ids[j])): {tuple(ctx.labels(*x)) for x in ctx.relevant[j]} for j in chosen}
        write_report(
            out / "report.html",
            run=run_dir / "final_model.pt",
            device=cfg.device,
            explanations=out / "explanations",
            metrics=metrics,
            counts=counts,
            fidelity=fidelity,
            marks=marks,
            n_checkpoints=len(fidelity["recovery"]["influence"]["checkpoints"]),
            settings={
                "graph": "quick" if cfg.quick else "default",
                "seed": cfg.seed,
                "model": p.model,
                "epochs": p.epochs,
                "checkpoint_every": p.checkpoint_every,
                "learning_rate": p.learning_rate,
                "label_smoothing": p.label_smoothing,
                "tracin_loss": p.loss,
                "necessity": f"k={p.necessity_k}, arms {', '.join(p.necessity_methods)}, neighbour, far",
                "torch_threads": torch.get_num_threads(),
            },
            stage_seconds=stage.seconds,
        )

    summary = {
        "output_dir": str(out),
        "stage_seconds": stage.seconds,
        "total_seconds": round(time.perf_counter() - t_start, 2),
        "test_metrics": metrics,
        "recovery_mrr": {m: v["mrr"]["mean"] for m, v in recovery["summary"].items()},
        "recovery_map": {m: v["map"]["mean"] for m, v in recovery["summary"].items()},
        "recovery_mrr_other_loss": recovery_other["summary"]["tracin"]["mrr"]["mean"],
        "necessity_delta_hits@1": {k: v["delta_hits@1"]["mean"] for k, v in necessity["summary"].items()},
        "necessity_delta_mrr": {k: v["delta_mrr"]["mean"] for k, v in necessity["summary"].items()},
    }
    summary["stage_seconds"]["report"] = stage.seconds.get("report")
    atomic_write_json(out / "demo_summary.json", summary)
    return summary


__all__ = ["DemoConfig", "Preset", "preset", "run_demo", "STAGES"]
