"""`tracegraph fidelity necessity`: remove each fact's explanation, retrain once per arm, rank again."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from tracegraph.cli.common import (
    METHODS_PLACEHOLDER,
    BootstrapOpt,
    DeviceOpt,
    LocalCandidatesOpt,
    LocalStepsOpt,
    MethodLayersOpt,
    MethodLossOpt,
    ThreadsOpt,
    set_threads,
)

METHOD_HELP = (
    f"Explanation methods (comma-separated): {METHODS_PLACEHOLDER} (docs/explaining.md, 'How to choose'). "
    "Each is one arm; the random arms neighbour and far always run."
)


def int_list(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(f"{what} must be comma-separated integers, e.g. 1,2,4") from None


def necessity_cmd(
    model_dir: Path = typer.Option(
        ...,
        "--model-dir",
        help="Run directory written by `tracegraph train` (config.json, checkpoints/, final_model.pt).",
    ),
    train: Path = typer.Option(..., "--train", help="The training triples of that run."),
    output_dir: Path = typer.Option(
        ..., "--output-dir", "-o", help="necessity.json, necessity.md and retrains/ go here."
    ),
    facts: Optional[Path] = typer.Option(
        None,
        "--facts",
        help="Triples to explain (default: --n test triples of the run ranked first), each on every side of --sides.",
    ),
    sides: str = typer.Option(
        "auto",
        "--sides",
        help="Which answer a fact is: tail, head or both (a triple ranked first on both sides can be two facts). auto: both when the run has reciprocal relations (the default model), else tail.",
    ),
    n: int = typer.Option(100, "--n", min=1, help="Facts drawn among the test triples the model ranks first."),
    k: str = typer.Option("1,2,4", "--k", help="Explanation sizes; one retrain per arm and k."),
    method: str = typer.Option(
        "tracin-margin-path", "--method", help=METHOD_HELP + " Default: explain's default, tracin-margin-path."
    ),
    seeds: Optional[str] = typer.Option(
        None,
        "--seeds",
        help="Training seeds, comma-separated (default: the run's). Another seed tests the run's explanations in retrains with that seed, against a full retrain with it as the reference (one more retrain).",
    ),
    loss: str = MethodLossOpt,
    layers: str = MethodLayersOpt,
    checkpoints: Optional[List[str]] = typer.Option(
        None, "--checkpoints", help="As for `tracegraph explain` (default: all saved epochs)."
    ),
    filter_files: Optional[List[Path]] = typer.Option(
        None, "--filter", help="Known true triples for filtered ranks (default: the run's train/valid/test); repeat."
    ),
    bootstrap: int = BootstrapOpt,
    seed: int = typer.Option(0, "--seed", help="Which facts, the random arms' draws, tie-breaks."),
    local_candidates: int = LocalCandidatesOpt,
    local_steps: int = LocalStepsOpt,
    keep_models: bool = typer.Option(False, "--keep-models", help="Keep the retrained runs' weights."),
    device: str = DeviceOpt,
    num_threads: int = ThreadsOpt,
):
    """Necessity of explanations on any graph: H@1/MRR of the facts after removing their top-k triples."""
    from tracegraph.kg.explain.local_retrain import LocalRetrainOptions
    from tracegraph.kg.explain.necessity import NecessityConfig, run_necessity
    from tracegraph.runtime.progress import make_progress, setup_logging

    setup_logging()
    set_threads(num_threads)
    cfg = NecessityConfig(
        model_dir=str(model_dir),
        train=str(train),
        output_dir=str(output_dir),
        facts=str(facts) if facts else None,
        sides=sides,
        n=n,
        ks=int_list(k, "--k"),
        methods=[m.strip() for m in method.split(",") if m.strip()],
        seeds=int_list(seeds, "--seeds") if seeds else None,
        loss=loss,
        layers=layers,
        checkpoints=checkpoints,
        filter_files=[str(f) for f in filter_files] if filter_files else None,
        bootstrap=bootstrap,
        sample_seed=seed,
        local=LocalRetrainOptions(candidates=local_candidates, k=max(int_list(k, "--k")), steps=local_steps, seed=seed),
        device=device,
        keep_models=keep_models,
    )
    with make_progress() as progress:  # one bar over the retrains; their own epoch lines are silenced
        res = run_necessity(cfg, progress=progress)
    typer.echo(res_lines(res))
    typer.echo(f"-> {output_dir / 'necessity.json'}")


def res_lines(res: dict) -> str:
    from tracegraph.kg.explain.necessity_summary import FLOORS

    def above(e: dict) -> str:
        parts = [f"{e[f'above_{f}_hits@1']['mean']:+.3f} above {f}" for f in FLOORS if f"above_{f}_hits@1" in e]
        return f" ({', '.join(parts)})" if parts else ""

    return "\n".join(
        f"{name}: ΔH@1 {e['delta_hits@1']['mean']:.3f}{above(e)}, ΔMRR {e['delta_mrr']['mean']:.3f}, "
        f"{e['triples_removed']} removed"
        for name, e in res["summary"].items()
    )
