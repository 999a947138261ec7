"""`tracegraph tune`: hyperparameter search (Optuna TPE + median pruning on valid MRR)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tracegraph.cli.common import ThreadsOpt


def tune_cmd(
    train: Path = typer.Option(..., "--train", help="Training triples."),
    valid: Path = typer.Option(
        ..., "--valid", help="Validation triples: trials are pruned and selected on their filtered MRR."
    ),
    search_space: Path = typer.Option(
        ...,
        "--search-space",
        help="JSON search-space file (format in tracegraph/kg/model/search_space.py and docs/training.md).",
    ),
    output_dir: Path = typer.Option(
        ..., "--output-dir", "-o", help="study.db, trials/trial_NNNN/, best_preset.json, tune_summary.json."
    ),
    test: Optional[Path] = typer.Option(
        None, "--test", help="Evaluated once, at the end, with the best trial's model."
    ),
    preset: Optional[str] = typer.Option(
        None, "--preset", help='Settings every trial starts from (overrides the search space\'s "preset").'
    ),
    trials: int = typer.Option(
        20,
        "--trials",
        min=1,
        help="Finished (complete or pruned) trials the study should hold; a rerun resumes up to this.",
    ),
    timeout: Optional[float] = typer.Option(
        None, "--timeout", min=0.0, help="Seconds per worker after which no new trial starts."
    ),
    devices: str = typer.Option(
        "auto", "--devices", help="Comma-separated devices, one worker process each (e.g. cuda:0,cuda:1)."
    ),
    study_name: str = typer.Option("tracegraph", "--study-name"),
    storage: Optional[str] = typer.Option(
        None, "--storage", help="Optuna storage URL shared by workers (default: sqlite:///OUTPUT_DIR/study.db)."
    ),
    seed: int = typer.Option(0, "--seed", help="Training seed of every trial; sampler seed of worker i is seed + i."),
    num_threads: int = ThreadsOpt,
):
    """Search ConvE hyperparameters on valid MRR; write the best as a preset for `train --preset`."""
    from tracegraph.kg.model.tune import TuneConfig, tune
    from tracegraph.runtime.progress import setup_logging

    setup_logging()
    cfg = TuneConfig(
        train=str(train),
        valid=str(valid),
        test=str(test) if test else None,
        output_dir=str(output_dir),
        search_space=str(search_space),
        preset=preset,
        study_name=study_name,
        storage=storage,
        trials=trials,
        timeout=timeout,
        devices=[d.strip() for d in devices.split(",") if d.strip()],
        seed=seed,
        num_threads=num_threads,
    )
    s = tune(cfg)
    typer.echo(f"best trial {s['best_trial']}: valid MRR {s['best_valid_mrr']:.4f}  -> {s['best_preset']}")
    if "test" in s:
        b = s["test"]["both"]
        typer.echo(f"test (once, best trial) MRR {b['mrr']:.4f}  Hits@1 {b['hits@1']:.4f}  Hits@10 {b['hits@10']:.4f}")


def register(app: typer.Typer) -> None:
    app.command("tune")(tune_cmd)
