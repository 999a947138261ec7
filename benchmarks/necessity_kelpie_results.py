"""Collect a device run of the side-by-side necessity protocol into ``benchmarks/results/``.

``benchmarks/gpu/device_run.py --pack DIR`` brings back ``gpu_results.tar.gz``; this unpacks what
the docs table is read from — per dataset and fact set, ``compare.json``, ``compare.md``, every
finished arm's record and every explanation file — into ``benchmarks/results/necessity_kelpie/``,
and writes ``benchmarks/results/necessity_kelpie.json`` with, per dataset, the command, commit,
machine and load. A run of one dataset replaces that dataset's files and figures and keeps the others.
The faithfulness page's table is rendered from that file
(:func:`tracegraph.kg.explain.compare_page.side_by_side_table`; a test holds the page to it).

A series run on a CPU (``device_run.py --device cpu``, spread over days) is filed beside the GPU's
under its own name (``--as fb15k-237-cpu``), with the command that ran it (``--command``).

Usage: python benchmarks/necessity_kelpie_results.py gpu_results.tar.gz --commit HASH [--as NAME] [--docs-only]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tarfile
import tempfile
from pathlib import Path

from compare_results import fact_set, run_metrics  # the script beside this one

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "benchmarks" / "results"
KEEP = ("compare.json", "compare.md", "facts.tsv", "test_results.json", "config.json", "pooled.json", "pooled.md")


COMMAND = "python3 benchmarks/gpu/device_run.py --inputs .gpuin --work .gpuwork --deadline 520 --pack $OUT"


def collect(
    archive: Path, commit: str, previous: dict, load: str | None = None, name: str | None = None, command: str = ""
) -> dict:
    """``previous`` with the datasets of ``archive`` replaced (each dataset keeps its own commit and machine).

    ``name`` files the archive's one dataset under that name instead of its own (a CPU series
    beside a GPU one); ``command`` is what ran it (default: the GPU call's).
    """
    out = DEST / "necessity_kelpie"
    datasets = dict(previous.get("datasets", {}))
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(archive) as tf:
            tf.extractall(tmp, filter="data")
        work = Path(tmp)
        run_info = json.loads((work / "device_run.json").read_text())
        found = sorted(d.name for d in work.iterdir() if (d / "run").is_dir())
        if name and len(found) != 1:
            raise SystemExit(f"error: --as names one dataset, the archive holds {len(found)}")
        for ds in found:
            key = name or ds
            shutil.rmtree(out / key, ignore_errors=True)  # this dataset's earlier files: replaced, the others kept
            for p in sorted((work / ds).rglob("*")):
                rel = p.relative_to(work)
                wanted = (
                    p.name in KEEP and "retrains" not in rel.parts or rel.parts[-2:-1] in (("arms",), ("explanations",))
                )
                if p.is_file() and wanted:
                    dest = out / key / rel.relative_to(ds)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(p, dest)
            if (work / "logs" / "suite.log").is_file():
                (out / key / "suite.log").write_text((work / "logs" / "suite.log").read_text())
            metrics = run_metrics(work / ds / "run")
            sets = {}
            for fs in ("kelpie-facts", "own-facts"):
                if (work / ds / fs / "compare.json").is_file():
                    sets[fs] = fact_set(work / ds / fs)
            datasets[key] = {
                "command": command or COMMAND,
                "commit": commit,
                "machine": run_info["machine"],
                "load": load or describe_load(run_info),
                "status": {k: v for k, v in run_info["status"].items() if k.startswith(f"{ds}/") or "/" not in k},
                "test_tail": metrics["tail"],
                "test_both": metrics["both"],
                "fact_sets": sets,
            }
            if (work / ds / "pooled" / "pooled.json").is_file():  # Kelpie's facts over several retrain seeds
                datasets[key]["pooled"] = json.loads((work / ds / "pooled" / "pooled.json").read_text())
    return {"about": ABOUT, "datasets": dict(sorted(datasets.items()))}


def describe_load(run_info: dict) -> str:
    """What shared the GPU, from the schedule's settings that device_run.json records."""
    args = run_info.get("args", {})
    n = args.get("concurrency")
    who = f"up to {n} processes" if n else "several processes"
    how = " side by side through CUDA's MPS daemon" if args.get("mps") == "on" else ""
    return f"{who} shared the GPU{how} (the schedule's --concurrency); seconds are wall time under that load"


ABOUT = "The side-by-side necessity protocol on Kelpie's facts and on 100 of ours, per dataset as last measured."


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archive", type=Path, nargs="?")
    ap.add_argument("--commit", help="the commit whose working tree the device ran (needed unless --docs-only)")
    ap.add_argument("--load", help="what shared the machine, when the archive does not say")
    ap.add_argument("--as", dest="name", help="file the archive's one dataset under this name (e.g. fb15k-237-cpu)")
    ap.add_argument("--command", default="", help="the command that ran the series (default: the GPU call's)")
    ap.add_argument("--docs-only", action="store_true", help="only rewrite the page's tables from the results file")
    args = ap.parse_args()
    if not args.docs_only:
        if not args.archive or not args.commit:
            ap.error("give the archive and --commit (or --docs-only)")
        path = DEST / "necessity_kelpie.json"
        previous = json.loads(path.read_text()) if path.is_file() else {}
        res = collect(args.archive, args.commit, previous, args.load, args.name, args.command)
        (DEST / "necessity_kelpie.json").write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")
    update_docs()


def update_docs() -> None:
    """Rewrite the faithfulness page's generated blocks (between their markers) from the results files."""
    from tracegraph.kg.explain.compare_page import load_page_results, page_blocks

    page = ROOT / "docs" / "faithfulness.md"
    text = page.read_text()
    results = load_page_results(DEST)
    for (start, end), block in page_blocks(results).items():
        i, j = text.index(start) + len(start), text.index(end)
        text = text[:i] + "\n" + block + text[j:]
    page.write_text(text)


if __name__ == "__main__":
    main()
