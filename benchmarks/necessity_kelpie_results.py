"""Collect a device run of the side-by-side necessity protocol into ``benchmarks/results/``.

``benchmarks/gpu/device_run.py --pack DIR`` brings back ``gpu_results.tar.gz``; this unpacks what
the docs table is read from — per dataset and fact set, ``compare.json``, ``compare.md``, every
finished arm's record and every explanation file — into ``benchmarks/results/necessity_kelpie/``,
and writes ``benchmarks/results/necessity_kelpie.json`` with the command, commit and machine.
The faithfulness page's table is rendered from that file
(:func:`tracegraph.kg.explain.compare_summary.side_by_side_table`; a test holds the page to it).

Usage: python benchmarks/necessity_kelpie_results.py gpu_results.tar.gz --commit HASH [--docs-only]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "benchmarks" / "results"
KEEP = ("compare.json", "compare.md", "test_results.json", "config.json")


def collect(archive: Path, commit: str) -> dict:
    out = DEST / "necessity_kelpie"
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(archive) as tf:
            tf.extractall(tmp, filter="data")
        work = Path(tmp)
        run_info = json.loads((work / "device_run.json").read_text())
        shutil.rmtree(out, ignore_errors=True)
        for p in sorted(work.rglob("*")):
            rel = p.relative_to(work)
            wanted = (
                p.name in KEEP
                and ("retrains" not in rel.parts)
                or rel.parts[-2:-1] in (("arms",), ("explanations",))
                or rel == Path("logs/suite.log")
            )
            if p.is_file() and wanted:
                (out / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(p, out / rel)
        (out / "device_run.json").write_text(json.dumps(run_info, indent=1) + "\n")
        datasets = {}
        for ds in sorted(d.name for d in work.iterdir() if (d / "run").is_dir()):
            test = json.loads((work / ds / "run" / "test_results.json").read_text())
            sets = {}
            for fs in ("kelpie-facts", "own-facts"):
                p = work / ds / fs / "compare.json"
                if p.is_file():
                    c = json.loads(p.read_text())
                    sets[fs] = {k: c[k] for k in ("offered", "n_facts", "arms", "finished", "summary", "groups")}
                    sets[fs]["config"] = {k: c["config"][k] for k in ("k", "candidates", "random_like", "local")}
            datasets[ds] = {"test_tail": test["tail"], "test_both": test["both"], "fact_sets": sets}
    return {
        "command": "python3 benchmarks/gpu/device_run.py --inputs .gpuin --work .gpuwork --deadline 520 "
        "--concurrency 5 --threads 3 --pack $OUT",
        "commit": commit,
        "machine": run_info["machine"],
        "load": "five processes shared the GPU (the schedule's --concurrency 5); seconds are wall time under that load",
        "status": run_info["status"],
        "datasets": datasets,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archive", type=Path, nargs="?")
    ap.add_argument("--commit", help="the commit whose working tree the device ran (needed unless --docs-only)")
    ap.add_argument("--docs-only", action="store_true", help="only rewrite the page's tables from the results file")
    args = ap.parse_args()
    if not args.docs_only:
        if not args.archive or not args.commit:
            ap.error("give the archive and --commit (or --docs-only)")
        res = collect(args.archive, args.commit)
        (DEST / "necessity_kelpie.json").write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")
    update_docs()


def update_docs() -> None:
    """Rewrite the faithfulness page's generated blocks (between their markers) from the results files."""
    from tracegraph.kg.explain.compare_summary import page_blocks

    page = ROOT / "docs" / "faithfulness.md"
    text = page.read_text()
    results = {n: json.loads((DEST / f"{n}.json").read_text()) for n in ("necessity_kelpie", "compare_umls")}
    for (start, end), block in page_blocks(results).items():
        i, j = text.index(start) + len(start), text.index(end)
        text = text[:i] + "\n" + block + text[j:]
    page.write_text(text)


if __name__ == "__main__":
    main()
