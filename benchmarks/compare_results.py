"""File one `tracegraph fidelity compare` output under ``benchmarks/results/NAME.json`` (with its arms).

The file has the layout of ``necessity_kelpie.json`` (command, commit, machine, load, and per
dataset its test metrics and fact sets), so the faithfulness page renders it the same way
(:func:`tracegraph.kg.explain.compare_page.side_by_side_table`).

Usage: python benchmarks/compare_results.py NAME --dataset umls --run RUN --compare own-facts=DIR
    --command "..." --commit HASH --machine "2 CPU cores" --load "..."
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_metrics(run: Path) -> dict:
    """A run's test metrics (``test_results.json``, nested under ``metrics`` or, in older runs, flat)."""
    test = json.loads((run / "test_results.json").read_text())
    return test.get("metrics", test)


def fact_set(compare_dir: Path) -> dict:
    """What the faithfulness page reads of one ``compare.json``."""
    c = json.loads((compare_dir / "compare.json").read_text())
    out = {k: c[k] for k in ("offered", "n_facts", "arms", "finished", "summary", "groups")}
    out["same_explanation"] = c.get("same_explanation", [])
    out["contents"] = c.get("contents", {})
    out["sizes"] = c.get("sizes", [])
    out["joins"] = c.get("joins", [])
    out["config"] = {k: c["config"][k] for k in ("k", "candidates", "random_like", "local")}
    # each method's time per explanation, also for arms whose retrain has not finished
    out["explained"] = {
        p.stem: json.loads(p.read_text()).get("seconds_per_explanation")
        for p in sorted((compare_dir / "explanations").glob("*.json"))
    }
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--run", type=Path, required=True, help="the run compare retrained (its test_results.json)")
    ap.add_argument("--compare", action="append", required=True, help="FACT_SET=DIR, a compare output folder")
    for k in ("command", "commit", "machine", "load"):
        ap.add_argument(f"--{k}", required=True)
    args = ap.parse_args()
    out = ROOT / "benchmarks" / "results" / args.name
    metrics = run_metrics(args.run)
    sets = {}
    for item in args.compare:
        fs, _, d = item.partition("=")
        sets[fs] = fact_set(Path(d))
        for sub in ("arms", "explanations"):
            shutil.copytree(Path(d) / sub, out / args.dataset / fs / sub, dirs_exist_ok=True)
        for f in ("compare.json", "compare.md"):
            shutil.copy(Path(d) / f, out / args.dataset / fs / f)
    res = {k: getattr(args, k) for k in ("command", "commit", "machine", "load")}
    res["datasets"] = {args.dataset: {"test_tail": metrics["tail"], "test_both": metrics["both"], "fact_sets": sets}}
    (out.parent / f"{args.name}.json").write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
