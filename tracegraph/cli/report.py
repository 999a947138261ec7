"""`tracegraph report`: one self-contained HTML page for a trained run."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from tracegraph.cli.common import DeviceOpt


def report_cmd(
    run_dir: Path = typer.Argument(
        ..., metavar="RUN", help="Run directory (written by `tracegraph train` or `tracegraph import`)."
    ),
    explanations: Optional[List[Path]] = typer.Option(
        None,
        "--explanations",
        help="An output directory of `tracegraph explain` (summary.json and the per-triple files); repeat for several.",
    ),
    necessity: Optional[Path] = typer.Option(
        None, "--necessity", help="necessity.json of `tracegraph fidelity necessity`, or its directory."
    ),
    test: Optional[Path] = typer.Option(
        None,
        "--test",
        help="Triples to rank for the metrics (default: RUN/evaluation/ranks.csv when `tracegraph evaluate` wrote one, else the run's recorded test file).",
    ),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="The .html file to write (default: RUN/report.html)."
    ),
    top: int = typer.Option(
        10,
        "--top",
        min=1,
        help="Rows in each explained triple's proponent table (the opponent table shows half as many, at least 5).",
    ),
    device: str = DeviceOpt,
):
    """One self-contained HTML report of a run: settings, training curves, test metrics overall and per
    relation, each explained test triple (rank, score, rival, proponents and opponents, a drawing) and
    the necessity test. Images are embedded and nothing is fetched: the file can be mailed or archived."""
    from tracegraph.errors import DataError
    from tracegraph.kg.run import Run
    from tracegraph.report import report_run

    if not run_dir.is_dir() and not run_dir.is_file():
        raise DataError("RUN: no such run directory", run_dir)
    if test is not None and not test.is_file():
        raise DataError("--test: file not found", test)
    out = output if output is not None else run_dir / "report.html"
    path = report_run(
        Run(run_dir, device),
        out,
        explanations=explanations or (),
        necessity=necessity,
        test=test,
        n_pro=top,
        n_opp=max(5, top // 2),
    )
    typer.echo(f"-> {path}")


def register(app: typer.Typer) -> None:
    app.command("report")(report_cmd)


__all__ = ["register"]
