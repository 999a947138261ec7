"""Does ``local-retrain`` pick the same facts when its refits take more steps?

``local-retrain`` fits a mimic of the fact's head with Adam for ``--local-steps`` steps and keeps
the ≤ k head facts whose removal costs the mimic's margin most. If the mimics have converged,
the choice is a property of the model; if not, of the step budget. For the facts a run ranks
first (tail side), each step budget's greedy choice among the same TracIn-pre-ranked candidates
is compared with the others' (Jaccard of the chosen sets, the share of identical sets), with the
full mimic's margin (the mimic fitted on all the head's facts; it moves while the fit moves).

Prints one JSON line (and appends it to ``--out`` when given); ``--file-as NAME`` also files it
under that name in ``benchmarks/results/local_refit_stability.json``, which the faithfulness
page's table is rendered from.

Usage: python benchmarks/local_refit_stability.py --model-dir RUN --facts FACTS.txt [--n 20]
    [--steps 30,60,240] [--candidates 16] [--threads 2] [--out FILE.jsonl] [--file-as NAME]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from tracegraph.kg.data.triples import read_labeled_triples
from tracegraph.kg.explain.compare import open_run, tail_ranks
from tracegraph.kg.explain.compare_arms import candidate_rows
from tracegraph.kg.explain.local_retrain import LocalRefit, LocalRetrainOptions
from tracegraph.kg.explain.methods import MethodOptions, fact_rows, method_keys_all
from tracegraph.kg.explain.tracin.checkpoints import resolve_checkpoint_list
from tracegraph.kg.model.model_io import run_label_smoothing

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "local_refit_stability.json"


def file_result(name: str, line: dict) -> None:
    """Put ``line`` under ``name`` in the results file, keeping the other datasets."""
    res = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    datasets = {**res.get("datasets", {}), name: line}
    about = "Whether local-retrain's choice moves with its refits' step budget, per dataset as last measured."
    RESULTS.write_text(json.dumps({"about": about, "datasets": dict(sorted(datasets.items()))}, indent=1) + "\n")


def choices(store, train_ids, known, facts, pre, steps: int, candidates: int, eps: float) -> tuple[list, list, float]:
    """Each fact's greedy choice (training rows) and full head-mimic margin at one step budget, and seconds per fact."""
    search = LocalRefit(
        store.model, train_ids, known, eps, LocalRetrainOptions(candidates=candidates, steps=steps), torch.device("cpu")
    )
    chosen, full, t0 = [], [], time.perf_counter()
    for f, p in zip(facts, pre):
        cands = candidate_rows(train_ids, f, "head")
        _, rec = search.explain(tuple(int(x) for x in f), cands, p, fact_rows(train_ids, f))
        chosen.append(set(rec["chosen_rows"]))
        full.append(rec["margin_full"]["head"])
    return chosen, full, (time.perf_counter() - t0) / len(facts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-dir", required=True)
    ap.add_argument(
        "--facts", required=True, help="triples (h r t, tab-separated); the first --n ranked first are used"
    )
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--steps", default="30,60,240")
    ap.add_argument("--candidates", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--file-as", help="file the line under this dataset name in benchmarks/results/")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    mdir = Path(args.model_dir)
    _, store, train_ids, _, known = open_run(mdir)
    lt = read_labeled_triples(args.facts)
    ids, _, ranks = tail_ranks(store, list(zip(lt.heads, lt.relations, lt.tails)), known)
    facts = ids[ranks <= 1][: args.n]  # the first --n the run ranks first, in file order
    cands = [candidate_rows(train_ids, f, "head") for f in facts]
    t0 = time.perf_counter()
    pre = method_keys_all(
        ["tracin"],
        model=store.model,
        checkpoints=resolve_checkpoint_list(mdir, None),
        train_ids=train_ids,
        facts=facts,
        subsets=cands,
        known=known,
        opts=MethodOptions(),
        device=torch.device("cpu"),
    )["tracin"]
    pre_seconds = (time.perf_counter() - t0) / len(facts)
    eps = run_label_smoothing(mdir)
    budgets = [int(s) for s in args.steps.split(",")]
    runs = {s: choices(store, train_ids, known, facts, [p[0] for p in pre], s, args.candidates, eps) for s in budgets}
    pairs = {}
    for a, b in itertools.combinations(budgets, 2):
        ca, cb = runs[a][0], runs[b][0]
        pairs[f"{a}-{b}"] = {
            "jaccard": float(np.mean([len(x & y) / max(1, len(x | y)) for x, y in zip(ca, cb)])),
            "same_set": float(np.mean([x == y for x, y in zip(ca, cb)])),
            "full_margin_mean_abs_change": float(np.mean(np.abs(np.subtract(runs[a][1], runs[b][1])))),
        }
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    line = {
        "benchmark": "local_refit_stability",
        "command": "python benchmarks/local_refit_stability.py " + " ".join(sys.argv[1:]),
        "model_dir": str(mdir),
        "facts": args.facts,
        "n_facts": len(facts),
        "candidates": args.candidates,
        "tracin_seconds_per_fact": pre_seconds,
        "budgets": {
            str(s): {"seconds_per_fact": r[2], "full_margin_mean": float(np.mean(r[1]))} for s, r in runs.items()
        },
        "pairs": pairs,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}",
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "commit": commit.stdout.strip(),
    }
    print(json.dumps(line))
    if args.out:
        with open(args.out, "a") as fh:
            fh.write(json.dumps(line) + "\n")
    if args.file_as:
        file_result(args.file_as, line)


if __name__ == "__main__":
    main()
