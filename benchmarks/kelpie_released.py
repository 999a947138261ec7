"""File Kelpie's released necessity figures: its ranks before and after its own retrain, per explainer.

Kelpie (Rossi et al., SIGMOD 2022) released, for ConvE on FB15k-237 and WN18RR, each explained
prediction's tail rank under its model and under the model it retrained without all 100
explanations (filtered with the reduced training set). This recomputes ΔH@1 and ΔMRR from those
rows, with the bootstrap intervals ``fidelity compare`` uses, on all 100 facts and on each filed
series' graded facts (the facts of Kelpie's that our model ranks first), and writes
``benchmarks/results/kelpie_released.json``. The faithfulness page sets them beside the same
explanations through our retrain: on the same facts, what differs is the model and the retrain.

Usage: python benchmarks/kelpie_released.py DIR   (DIR holds conve_<dataset>_necessary_<explainer>.tsv)
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))

from device_files import machine  # noqa: E402  (the scripts beside this one)
from record import git_commit  # noqa: E402
from tracegraph.errors import DataError, TracegraphError  # noqa: E402
from tracegraph.kg.explain.compare import CompareConfig  # noqa: E402
from tracegraph.kg.explain.compare_standing import RELEASED_ARMS as EXPLAINERS  # noqa: E402  (the files' names)

# our dataset names -> the files' names
DATASETS = {"fb15k-237": "fb15k237", "wn18rr": "wn18rr"}
N_BOOT, SEED = CompareConfig.bootstrap, CompareConfig.seed  # the intervals fidelity compare gives by default


def read_ranks(path: Path) -> dict[tuple[str, str, str], tuple[int, int, int]]:
    """Prediction -> (its rank before, its rank after, its explanation's size), from one released file."""
    from tracegraph.kg.explain.explanation_tsv import read_explanation_table

    table = read_explanation_table(path)
    missing = [c for c in ("rank_before", "rank_after") if c not in table.columns]
    if missing:
        raise DataError(
            f"the first line must name the columns rank_before and rank_after; missing: {', '.join(missing)}", path
        )
    out = {}
    for i, (fact, expl) in enumerate(zip(table.facts, table.explanations)):
        try:
            before, after = (int(table.columns[c][i]) for c in ("rank_before", "rank_after"))
        except ValueError:
            raise DataError("rank_before and rank_after must be whole numbers", path, table.lines[i]) from None
        out.setdefault(fact, (before, after, len(expl)))
    return out


def figures(ranks: list[tuple[int, int, int]]) -> dict:
    """ΔH@1 and ΔMRR (after − before) with bootstrap intervals, as ``compare.json`` gives an arm's."""
    from tracegraph.kg.explain.compare_summary import change

    before, after = (np.array([r[i] for r in ranks]) for i in (0, 1))
    return {"facts_removed": sum(r[2] for r in ranks), "reduced": change(before, after, N_BOOT, SEED)}


def graded_rows(series: Path) -> list[dict[str, str]]:
    """The facts a filed series graded, with each finished arm's ranks after (its ``facts.tsv``)."""
    with open(series / "kelpie-facts" / "facts.tsv", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def agreement(theirs: list[int], ours: list[float]) -> dict[str, int]:
    """Fact by fact, whether the same explanations broke a prediction in Kelpie's retrain and in ours.

    Our ranks may be a tie's mean (2.5): a prediction tied for first is not ranked first.
    """
    pairs = [(a > 1, b > 1) for a, b in zip(theirs, ours)]
    return {
        "both": pairs.count((True, True)),
        "theirs_only": pairs.count((True, False)),
        "ours_only": pairs.count((False, True)),
        "neither": pairs.count((False, False)),
    }


def graded_series(filed: Path, dataset: str) -> list[Path]:
    """The filed series of ``dataset`` (its name, or its name and a suffix) with an arm measured on Kelpie's facts."""
    index = json.loads((filed.parent / f"{filed.name}.json").read_text())["datasets"]
    names = [n for n, d in index.items() if n == dataset or n.startswith(f"{dataset}-")]
    return [filed / n for n in names if (d := index[n]["fact_sets"].get("kelpie-facts")) and d.get("summary")]


def collect(anchors: Path, filed: Path) -> dict:
    """Per dataset, each explainer's released figures on all its facts and on every filed series' graded facts."""
    out = {}
    for ds, name in DATASETS.items():
        released = {a: read_ranks(anchors / f"conve_{name}_necessary_{a}.tsv") for a in EXPLAINERS}
        n = len(released["kelpie"])
        entry = {"n_facts": n, "arms": {a: figures(list(r.values())) for a, r in released.items()}, "graded": {}}
        for series in graded_series(filed, ds):
            rows = graded_rows(series)
            facts = [(r["head"], r["relation"], r["tail"]) for r in rows]
            unknown = [f for f in facts if any(f not in r for r in released.values())]
            if unknown:
                raise DataError(f"{len(unknown)} graded facts are not in Kelpie's files, e.g. {unknown[0]}", series)
            entry["graded"][series.name] = {
                "n_facts": len(facts),
                "arms": {a: figures([r[f] for f in facts]) for a, r in released.items()},
                # our retrain's ranks under the reduced filter, as Kelpie's, for the arms the series finished
                "agreement": {
                    a: agreement([released[a][f][1] for f in facts], [float(r[f"{a} reduced"]) for r in rows])
                    for a in EXPLAINERS
                    if rows and f"{a} reduced" in rows[0]
                },
            }
        out[ds] = entry
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("anchors", type=Path, help="the folder of Kelpie's conve_<dataset>_necessary_<explainer>.tsv")
    ap.add_argument("--filed", type=Path, default=RESULTS / "necessity_kelpie", help="the filed series' folder")
    ap.add_argument("-o", "--out", type=Path, default=RESULTS / "kelpie_released.json")
    args = ap.parse_args(argv)
    try:
        datasets = collect(args.anchors, args.filed)
    except TracegraphError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    record = {
        "about": "Kelpie's released ranks (ConvE, its own model and its retrain without all 100 explanations, "
        "filtered with the reduced training set), recomputed: after − before, bootstrap 95 % over the facts",
        "source": "AndRossi/Kelpie, scripts/experiments/end_to_end/*_necessary_conve_*.csv at afb5f925",
        "command": "python benchmarks/kelpie_released.py DIR",
        "commit": git_commit(),
        "machine": machine(),
        "datasets": datasets,
    }
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(
        json.dumps(
            {
                ds: {a: round(x["reduced"]["change_hits@1"], 2) for a, x in d["arms"].items()}
                for ds, d in datasets.items()
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
