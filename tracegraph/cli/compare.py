"""`tracegraph fidelity compare`: anyone's explanations through one necessity retrain each, side by side."""

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


def named_files(values: list[str]) -> dict[str, str]:
    """``NAME=FILE`` options as a dict (a bare FILE is named by its stem)."""
    out: dict[str, str] = {}
    for v in values:
        name, _, path = v.partition("=") if "=" in v else (Path(v).stem, "=", v)
        if not name or not path:
            raise typer.BadParameter(f"--explanations {v!r}: write NAME=FILE", param_hint="--explanations")
        if name in out:
            raise typer.BadParameter(f"--explanations: the name {name!r} is given twice", param_hint="--explanations")
        out[name] = path
    return out


def compare_cmd(
    model_dir: Path = typer.Option(
        ..., "--model-dir", help="Run directory written by `tracegraph train`: every arm retrains with its config.json."
    ),
    output_dir: Path = typer.Option(
        ...,
        "--output-dir",
        "-o",
        help="compare.json, compare.md, compare.png, facts.tsv, arms/, explanations/ and retrains/ go here; a rerun resumes.",
    ),
    explanations: Optional[List[str]] = typer.Option(
        None,
        "--explanations",
        help="NAME=FILE: an explanations file (head, relation, tail, explanation columns; facts written h|r|t joined by ';', as Kelpie's released files), one arm each; repeat.",
    ),
    method: Optional[List[str]] = typer.Option(
        None, "--method", help=f"Our explanation method, one arm each: {METHODS_PLACEHOLDER}; repeat."
    ),
    facts: Optional[Path] = typer.Option(
        None, "--facts", help="Triples to draw the graded facts from (default: the facts of the explanations files)."
    ),
    n: int = typer.Option(
        100, "--n", min=1, help="With --facts: facts drawn (seeded) among those the run ranks first."
    ),
    k: int = typer.Option(4, "--k", min=1, help="Facts per explanation of the method arms."),
    candidates: str = typer.Option(
        "head",
        "--candidates",
        help="The method and random arms' candidates: head (training facts featuring the fact's head, as Kelpie's) or head-tail.",
    ),
    random_like: Optional[str] = typer.Option(
        None,
        "--random-like",
        help="The arm whose explanation sizes the random arm copies, fact by fact, and the far arm in all (default: the first --explanations, else --k).",
    ),
    size_like: Optional[str] = typer.Option(
        None,
        "--size-like",
        help="An --explanations name: each --method also gets the arm METHOD@NAME, its explanations cut, fact by fact, to that file's explanation's size (its first facts): whether a method's lead is what it chooses or how much it removes.",
    ),
    versus: Optional[List[str]] = typer.Option(
        None,
        "--versus",
        help="An arm (say kelpie) every other arm is paired against fact by fact, as against the floors: ΔH@1 beyond it under both filterings, and the falls by the two explanations' sizes and by which holds a fact joining head and tail; repeat.",
    ),
    noise_seed: Optional[int] = typer.Option(
        None, "--noise-seed", help="The noise arm's training seed (nothing removed; default: the retrain seed + 1)."
    ),
    retrain_seed: Optional[int] = typer.Option(
        None,
        "--retrain-seed",
        help="Every removal arm's training seed (default: the run's). Another seed repeats the protocol with other retrains, in its own -o; `fidelity compare-pool` averages the folders.",
    ),
    arm: Optional[List[str]] = typer.Option(
        None, "--arm", help="Retrain only this arm now (repeat; default: all). Parallel processes can share one -o."
    ),
    explain_only: bool = typer.Option(
        False,
        "--explain-only",
        help="Write the graded facts' explanations and the summary of the arms already finished; retrain nothing.",
    ),
    bootstrap: int = BootstrapOpt,
    seed: int = typer.Option(0, "--seed", help="Which facts (with --facts), the random arm's draws, tie-breaks."),
    local_candidates: int = LocalCandidatesOpt,
    local_steps: int = LocalStepsOpt,
    loss: str = MethodLossOpt,
    layers: str = MethodLayersOpt,
    keep_models: bool = typer.Option(
        False,
        "--keep-models",
        help="Keep each retrain's weights in retrains/NAME/run (default: config and history only).",
    ),
    device: str = DeviceOpt,
    num_threads: int = ThreadsOpt,
):
    """Necessity side by side: remove each arm's explanations at once, retrain, rank under both filterings.

    The arms: each --explanations file, each --method, random head facts (sized like --random-like),
    far facts (as many, touching no graded fact, the run's seed) and the noise floor (another seed).
    """
    from tracegraph.kg.explain.compare import CompareConfig, run_compare
    from tracegraph.kg.explain.local_retrain import LocalRetrainOptions
    from tracegraph.runtime.progress import make_progress, setup_logging

    setup_logging()
    set_threads(num_threads)
    cfg = CompareConfig(
        model_dir=str(model_dir),
        output_dir=str(output_dir),
        explanations=named_files(explanations or []),
        methods=list(dict.fromkeys(method or [])),
        facts=str(facts) if facts else None,
        n=n,
        k=k,
        candidates=candidates,
        random_like=random_like,
        size_like=size_like,
        versus=list(dict.fromkeys(versus or [])),
        noise_seed=noise_seed,
        retrain_seed=retrain_seed,
        arms=list(arm) if arm else None,
        bootstrap=bootstrap,
        seed=seed,
        local=LocalRetrainOptions(candidates=local_candidates, k=k, steps=local_steps, seed=seed),
        loss=loss,
        layers=layers,
        device=device,
        keep_models=keep_models,
    )
    with make_progress() as progress:
        res = run_compare(cfg, explain_only=explain_only, progress=progress)
    if res["summary"]:  # the figure beside compare.md, redrawn from every finished arm
        from tracegraph.report.plots import necessity_forest
        from tracegraph.runtime.checkpoints import atomic_path

        with atomic_path(output_dir / "compare.png") as tmp:
            tmp.write_bytes(necessity_forest({f"{res['n_facts']} facts graded": res["summary"]}))
    for name, s in res["summary"].items():
        o, r = s["original"], s["reduced"]
        typer.echo(
            f"{name}: ΔH@1 {o['change_hits@1']:+.3f} (reduced filter {r['change_hits@1']:+.3f}), "
            f"ΔMRR {o['change_mrr']:+.3f}, {s['facts_removed']} facts removed"
        )
    typer.echo(
        f"{res['n_facts']} facts graded; {len(res['finished'])} of {len(res['arms'])} arms finished "
        f"-> {output_dir / 'compare.md'}" + (" and compare.png" if res["summary"] else "")
    )


def compare_pool_cmd(
    folders: List[Path] = typer.Argument(
        ..., help="`fidelity compare` output folders of one run and one fact set (say one per --retrain-seed)."
    ),
    output_dir: Path = typer.Option(..., "--output-dir", "-o", help="pooled.json and pooled.md go here."),
    versus: Optional[List[str]] = typer.Option(
        None, "--versus", help="An arm every other arm is paired against fact by fact, as against the floors; repeat."
    ),
    bootstrap: int = BootstrapOpt,
    seed: int = typer.Option(0, "--seed", help="Bootstrap resampling seed."),
) -> None:
    """Pool compare folders over retrain seeds: each fact's outcome averaged over them, then bootstrapped.

    Every folder must grade the same facts; an arm is pooled where it finished in every folder.
    """
    from tracegraph.kg.explain.compare_pool import pool_folders, pooled_markdown
    from tracegraph.runtime.checkpoints import atomic_write_json, atomic_write_text

    res = pool_folders(list(folders), bootstrap, seed, list(dict.fromkeys(versus or [])))
    output_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(output_dir / "pooled.json", res)
    atomic_write_text(output_dir / "pooled.md", pooled_markdown(res))
    for name, s in res["summary"].items():
        o = s["original"]
        typer.echo(f"{name}: ΔH@1 {o['change_hits@1']:+.3f} over {len(res['folders'])} folders")
    typer.echo(f"{res['n_facts']} facts, {len(res['arms'])} arms pooled -> {output_dir / 'pooled.md'}")
