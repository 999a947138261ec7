"""The generated blocks of the docs pages beside the benchmarks page: the testing page (the suite's size
and time), the UMLS evidence page (the replicates) and the GPUs page (the CUDA-only tests per GPU)."""

from __future__ import annotations

from page_cells import RESULTS, header, load, machine, row  # the script beside this one

REPLICATE_ARMS = {
    "tracin-margin-path": "**`tracin-margin-path`** (default)",
    "tracin-margin": "`tracin-margin`",
    "tracin-path": "`tracin-path`",
    "neighbour": "neighbour: 4 random triples at the head or tail",
    "far": "far: 4 random triples touching neither",
}


def replicate_lines(nec: dict) -> dict[str, dict]:
    """Each arm's across-replicates line, from every run of the file (an arm in several: the first run's)."""
    reps = {}
    for run in nec["runs"].values():
        for ln in run["lines"]:
            if ln.get("figure") == "necessity_replicates":
                reps.setdefault(ln["arm"].split("@")[0], ln)
    return reps


def replicates_block(nec: dict) -> str:
    """ΔHits@1 of each arm in every independent replicate on UMLS, with the paired excesses."""
    reps = replicate_lines(nec)
    first = reps["tracin-margin-path"]
    seeds = first["seeds"]
    out = [f"On {machine(nec['runs']['cpu'])}, replicates {seeds[0]}–{seeds[-1]}, k = {first['k']}:", ""]
    for run in nec["runs"].values():
        out.append(f"- `{run['command']}` at commit {run['commit']}: {run['load']}")
    out += [
        "",
        header("arm", f"ΔHits@1, replicates {seeds[0]}–{seeds[-1]}", "mean", "above far", "above neighbour", "ΔMRR"),
    ]
    for arm, title in REPLICATE_ARMS.items():
        r = reps[arm]
        out.append(
            row(
                title,
                " ".join(f"{x:.2f}" for x in r["delta_hits1"]),
                f"{r['delta_hits1_mean']:.3f}",
                f"{r['above_far_mean']:.3f}" if "above_far_mean" in r else "",
                f"{r['above_neighbour_mean']:.3f}" if "above_neighbour_mean" in r else "",
                f"{r['delta_mrr_mean']:.3f}",
            )
        )
    return "\n".join(out)


def suite_block(suite: dict) -> str:
    """The testing page's sentence on the suite's size and time, from the fresh-clone run."""
    run = suite["runs"]["cpu"]
    s = run["lines"][0]
    return (
        f"The whole suite: {s['tests']:,} tests, {s['skipped']} of them skipped on a CPU (the GPU-only ones "
        f"and those that read a local benchmark mirror), {s['pytest_seconds']:.0f} s of tests and "
        f"{s['wall_seconds']:.0f} s with the set-up, by the README's `./run test` in a fresh clone at commit "
        f"{s['clone_of']} (`{run['command']}`; {machine(run)}; {run['load']})."
    )


def testing_blocks() -> dict[str, str]:
    """The generated blocks of docs/testing.md."""
    return {"testing:suite": suite_block(load("suite_time"))}


def evidence_blocks() -> dict[str, str]:
    """The generated blocks of docs/demo-evidence.md."""
    return {"evidence:umls-replicates": replicates_block(load("necessity_umls"))}


def gpu_suite_block(kelpie: dict) -> str:
    """The CUDA-only tests' outcome on each GPU that ran them (device_run.py's suite step, filed per dataset)."""
    out = [header("GPU", "`pytest -m gpu tests/gpu`", "commit")]
    for key, d in kelpie["datasets"].items():
        log = RESULTS / "necessity_kelpie" / key / "suite.log"
        if log.is_file():
            tally = [ln for ln in log.read_text().splitlines() if " in " in ln and ("passed" in ln or "failed" in ln)]
            out.append(row(d["machine"].split(",")[0], tally[-1].strip() if tally else "no tally", d["commit"]))
    return "\n".join(out)


def gpu_blocks() -> dict[str, str]:
    """The generated blocks of docs/gpu.md."""
    return {"gpu:suite": gpu_suite_block(load("necessity_kelpie"))}
