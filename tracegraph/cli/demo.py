"""`tracegraph demo` (the README's first command) and `tracegraph fidelity` (grade explanations)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from tracegraph.cli.common import GRADED_METHODS_PLACEHOLDER, DeviceOpt, method_list_command


def demo_cmd(
    output_dir: Path = typer.Option(
        Path("demo-output"), "--output-dir", "-o", help="Where everything goes; report.html at the top."
    ),
    quick: bool = typer.Option(
        False, "--quick", help="A 4x smaller graph and model (15 held-out test edges; CI: about a minute)."
    ),
    seed: int = typer.Option(0, help="Seed of the graph, the training and the random baselines."),
    n_explain: int = typer.Option(5, "--n-explain", min=1, help="Best-predicted test edges explained in the report."),
    device: str = typer.Option(
        "cpu", "--device", help="cpu (default: the demo is sized for 2 CPU cores), cuda, or auto."
    ),
    threads: int = typer.Option(
        1,
        "--num-threads",
        "--threads",
        min=1,
        help="torch CPU threads. 1 (default): the demo's tensors are small, and on a busy machine 2+ threads can be 10x slower (docs/demo.md).",
    ),
):
    """Generate a graph, train ConvE, explain its best predictions with exact TracIn, grade the explanations, write report.html."""
    from tracegraph.kg.demo.pipeline import DemoConfig, run_demo
    from tracegraph.runtime.progress import setup_logging

    setup_logging()
    s = run_demo(
        DemoConfig(
            output_dir=str(output_dir), quick=quick, seed=seed, n_explain=n_explain, device=device, threads=threads
        )
    )
    typer.echo(f"demo finished in {s['total_seconds']:.0f} s -> {output_dir / 'report.html'}")


def fidelity_cmd(
    model_dir: Path = typer.Option(
        ...,
        "--model-dir",
        help="Run directory written by `tracegraph train` (config.json, checkpoints/, final_model.pt).",
    ),
    train: Path = typer.Option(..., "--train", help="The training triples of that run."),
    test: Path = typer.Option(..., "--test", help="Test triples whose explanations are graded."),
    mechanisms: Path = typer.Option(
        ...,
        "--mechanisms",
        help="TSV with header; columns test_head test_relation test_tail edge_head edge_relation edge_tail (one row per ground-truth edge).",
    ),
    output_dir: Path = typer.Option(
        ..., "--output-dir", "-o", help="fidelity.json (and removal/ with the retrained runs) go here."
    ),
    filter_files: Optional[List[Path]] = typer.Option(
        None, "--filter", help="Known true triples for filtered ranks (default: the run's train/valid/test); repeat."
    ),
    checkpoints: Optional[List[str]] = typer.Option(
        None, "--checkpoints", help="As for `tracegraph explain` (default: all saved epochs)."
    ),
    loss: str = typer.Option(
        "logit",
        help="TracIn loss convention: logit (-s of the triple), score (softplus(-s)) or train-loss (1-N BCE). See docs/demo.md.",
    ),
    layers: str = typer.Option("all", help="all, last:N, or parameter names."),
    n_hops: int = typer.Option(
        2, "--n-hops", min=0, help="Candidates: the n-hop filtered subgraph of each test triple."
    ),
    min_degree: int = typer.Option(
        2,
        "--min-degree",
        min=0,
        help="Candidates: keep an edge if an endpoint has at least this many distinct neighbours (as `tracegraph filter`).",
    ),
    n_random: int = typer.Option(
        20, "--n-random", min=1, help="Random permutations for the random baseline and tie-breaks."
    ),
    seed: int = typer.Option(0, help="Seed of the random baseline, the tie-breaks and the removal test's random arms."),
    removal: bool = typer.Option(
        True, "--removal/--no-removal", help="Run the removal-and-retrain test (retrains 2x --removal-triples times)."
    ),
    removal_k: int = typer.Option(10, "--removal-k", min=1, help="Proponents (and random neighbour triples) removed."),
    removal_triples: int = typer.Option(5, "--removal-triples", min=1, help="Correctly predicted test triples graded."),
    max_rank: float = typer.Option(1.0, "--max-rank", help="'Correctly predicted': filtered tail rank <= this."),
    random_draws: int = typer.Option(1, "--random-draws", min=1, help="Random arms per test triple (each a retrain)."),
    method: str = typer.Option(
        "tracin",
        "--method",
        help=f"Explanation methods graded beside the baselines, comma-separated; TracIn is always among them: "
        f"{GRADED_METHODS_PLACEHOLDER}.",
    ),
    device: str = DeviceOpt,
):
    """Grade TracIn explanations: ground-truth recovery vs baselines, and removal-and-retrain."""
    from tracegraph.kg.explain.fidelity import FidelityConfig, RemovalOptions, run_fidelity
    from tracegraph.kg.explain.removal import describe_ratio
    from tracegraph.runtime.progress import setup_logging

    setup_logging()
    cfg = FidelityConfig(
        model_dir=str(model_dir),
        train=str(train),
        test=str(test),
        mechanisms=str(mechanisms),
        output_dir=str(output_dir),
        filter_files=[str(f) for f in filter_files] if filter_files else None,
        checkpoints=checkpoints,
        loss=loss,
        layers=layers,
        n_hops=n_hops,
        min_degree=min_degree,
        n_random=n_random,
        seed=seed,
        removal=removal,
        device=device,
        methods=list(dict.fromkeys(["tracin", *(m.strip() for m in method.split(",") if m.strip())])),
        removal_options=RemovalOptions(
            k=removal_k, n_triples=removal_triples, max_rank=max_rank, random_draws=random_draws, seed=seed
        ),
    )
    res = run_fidelity(cfg)
    s = res["recovery"]["summary"]
    typer.echo("ground-truth recovery MRR: " + ", ".join(f"{m} {v['mrr']['mean']:.3f}" for m, v in s.items()))
    if "removal" in res and res["removal"].get("graded"):
        r = res["removal"]
        typer.echo(
            f"removal: mean ΔRR proponents {r['proponents']['delta_rr']['mean']:.3f}, random "
            f"{r['random']['delta_rr']['mean']:.3f}, {describe_ratio(r)}"
        )
    typer.echo(f"-> {output_dir / 'fidelity.json'}")


def register(app: typer.Typer) -> None:
    from tracegraph.cli.compare import compare_cmd, compare_pool_cmd
    from tracegraph.cli.necessity import necessity_cmd

    app.command("demo")(demo_cmd)
    fidelity = typer.Typer(
        help="Grade explanations: recovery of known mechanisms, necessity by removal and retraining.",
        no_args_is_help=True,
    )
    fidelity.command("recovery", cls=method_list_command())(fidelity_cmd)
    fidelity.command("necessity", cls=method_list_command())(necessity_cmd)
    fidelity.command("compare", cls=method_list_command())(compare_cmd)
    fidelity.command("compare-pool")(compare_pool_cmd)
    app.add_typer(fidelity, name="fidelity")
