"""The demo at several seeds: how much its figures move from one run to another.

Each seed is the whole ``tracegraph demo --seed S`` (a new graph, a new model, new necessity
facts and random draws), run as a user runs it, in ``--work``/seedS (an existing finished seed is
read, not rerun). From every seed it keeps the test metrics, the planted-mechanism recovery of
explain's default and the baselines, and the necessity arms; across seeds it gives each figure's
mean and range, and the default's lead over the random neighbour and far arms paired by fact:
per seed, and over all seeds with a bootstrap 95 % interval (facts resampled within each seed,
seeds weighted equally).

Writes ``benchmarks/results/demo.json`` (``--results``), which the README, the demo page and the
benchmarks page quote: seed 0 is what ``./run demo`` reproduces, the rest its spread.

Usage: python benchmarks/demo_replicates.py --work DIR [--seeds 0,1,2,3,4] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = "tracin-margin-path"
ARMS = (DEFAULT, "path", "neighbour", "far")
RECOVERY = (DEFAULT, "tracin-path", "path", "degree", "random")


def run_seeds(work: Path, seeds: list[int], jobs: int) -> float:
    """Run every seed's demo not yet finished, ``jobs`` at a time (each on one torch thread); wall seconds."""
    todo = [s for s in seeds if not (work / f"seed{s}" / "demo_summary.json").is_file()]
    running: list[subprocess.Popen] = []
    t0 = time.perf_counter()
    while todo or running:
        while todo and len(running) < jobs:
            s = todo.pop(0)
            log = open(work / f"seed{s}.log", "w")
            cmd = [sys.executable, "-m", "tracegraph", "demo", "--output-dir", str(work / f"seed{s}"), "--seed", str(s)]
            running.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
        time.sleep(2)
        for p in [p for p in running if p.poll() is not None]:
            running.remove(p)
            if p.returncode:
                sys.exit(f"error: {' '.join(p.args)} exited {p.returncode} (its log is beside its folder)")
    return time.perf_counter() - t0


def one_seed(folder: Path) -> dict:
    """The figures of one finished demo, with each necessity arm's per-fact ranks after."""
    summ = json.loads((folder / "demo_summary.json").read_text())
    nec = json.loads((folder / "necessity" / "necessity.json").read_text())
    k = nec["config"]["ks"][0]
    arms = nec["seeds"][str(nec["config"]["sample_seed"])]
    tm = summ["test_metrics"]
    return {
        "test": {
            "mrr_both": tm["both"]["mrr"],
            "mrr_tail": tm["tail"]["mrr"],
            "hits@1_tail": tm["tail"]["hits@1"],
            "hits@10_tail": tm["tail"]["hits@10"],
            "mrr_head": tm["head"]["mrr"],
        },
        "recovery": {m: {"mrr": summ["recovery_mrr"][m], "map": summ["recovery_map"][m]} for m in RECOVERY},
        "necessity": {
            a: {
                "delta_hits@1": arms[f"{a}@{k}"]["delta_hits@1"],
                "delta_mrr": arms[f"{a}@{k}"]["delta_mrr"],
                "flipped": arms[f"{a}@{k}"]["flipped"],
                "ranks": arms[f"{a}@{k}"]["ranks"],
            }
            for a in ARMS
        },
        "k": k,
        "n_facts": nec["n_facts"],
        "seconds": summ["total_seconds"],
    }


def lead(per_seed: dict, over: str, draws: int = 2000, seed: int = 0) -> dict:
    """The default's ΔH@1 minus ``over``'s, paired by fact: per seed, their mean, and its bootstrap interval."""
    rng = np.random.default_rng(seed)
    diffs = {
        s: (np.asarray(r["necessity"][over]["ranks"]) <= 1).astype(float)
        - (np.asarray(r["necessity"][DEFAULT]["ranks"]) <= 1).astype(float)
        for s, r in per_seed.items()
    }  # 1 where the default's removal broke a fact that the other arm's left first
    boot = np.mean([[d[rng.integers(0, len(d), len(d))].mean() for _ in range(draws)] for d in diffs.values()], 0)
    return {
        "per_seed": {s: float(d.mean()) for s, d in diffs.items()},
        "mean": float(np.mean([d.mean() for d in diffs.values()])),
        "ci95": [float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))],
    }


def spread(values: list[float]) -> dict:
    return {"mean": float(np.mean(values)), "min": float(np.min(values)), "max": float(np.max(values))}


def across(per_seed: dict) -> dict:
    """Each figure's mean and range over the seeds, and the default's paired leads."""
    rs = list(per_seed.values())
    return {
        "test_mrr_tail": spread([r["test"]["mrr_tail"] for r in rs]),
        "recovery_mrr": {m: spread([r["recovery"][m]["mrr"] for r in rs]) for m in RECOVERY},
        "necessity_delta_hits@1": {a: spread([r["necessity"][a]["delta_hits@1"] for r in rs]) for a in ARMS},
        "lead_over": {a: lead(per_seed, a) for a in ("neighbour", "far", "path")},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True, help="one demo folder per seed goes here (kept: a rerun reads them)")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--jobs", type=int, default=2, help="demos at once (each uses one torch thread)")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "results" / "demo.json"))
    a = ap.parse_args()
    work, seeds = Path(a.work), [int(s) for s in a.seeds.split(",")]
    work.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    wall = run_seeds(work, seeds, a.jobs)
    per_seed = {str(s): one_seed(work / f"seed{s}") for s in seeds}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    res = {
        "about": "The demo (tracegraph demo) at several seeds: seed 0 is ./run demo's, the others its spread.",
        "command": f"python benchmarks/demo_replicates.py --seeds {a.seeds} --jobs {a.jobs}",
        "commit": commit.stdout.strip(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, {a.jobs} demos at once, one torch thread each",
        "load_avg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "wall_seconds": round(wall, 1),
        "seeds": per_seed,
        "across_seeds": across(per_seed),
    }
    Path(a.results).write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({"seeds": seeds, **res["across_seeds"]["lead_over"]["neighbour"]}))


if __name__ == "__main__":
    main()
