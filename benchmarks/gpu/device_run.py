"""Everything a lent GPU is spent on, in one rerunnable command with a deadline.

Steps, each a process with its own time cap, scheduled by priority on one GPU (device_plan.py
lists them, in that order):

1. the CUDA suite (``pytest -m gpu`` and the CUDA-parametrised tests), beside everything else;
2. per dataset, ConvE trained with Kelpie's settings (the necessity protocol's original model);
3. ``tracegraph fidelity compare`` on Kelpie's 100 facts: the methods' explanations first, then one
   retrain per arm (Kelpie, its baselines, ours, random head facts, far facts, the noise floor), several at once;
   then the same on our own 100 rank-1 test facts;
4. TracIn's speed at FB15k-237 scale, if time is left.

Everything lands in ``--work``; ``--pack`` writes it to one archive (with the logs, without
weights) for the trip back, and ``benchmarks/necessity_kelpie_results.py`` files it under
``benchmarks/results/``. A rerun into the same ``--work`` skips what finished and resumes
interrupted retrains, but each call to a lent GPU starts from a fresh copy of the working tree,
even on a machine still warm from the last: plan one call (``--datasets`` picks what fits;
``--mps`` lets the retrains run side by side).

Usage (on the device, from the repository root)::

    python3 benchmarks/gpu/device_run.py --inputs .gpuin --work .gpuwork --deadline 520 --pack $OUT

``--quick`` runs the same schedule on UMLS in a few minutes on a CPU (a dry run of this script).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from device_files import pack, start_mps, stop_mps, write_summary  # the scripts beside this one
from device_plan import OURS, ROOT, Job, jobs  # noqa: F401  (OURS: the methods, for callers and tests)


def mps(args) -> None:
    """With --mps on a GPU: start the MPS daemon (``args.mps`` then says whether it runs, for the summary);
    without it, processes share the GPU by turns, and more than five at once only lengthen each."""
    if args.mps and args.device == "cuda":
        args.mps = start_mps(sys.executable)
        print(f"MPS: {args.mps}", flush=True)
        if args.mps != "on":
            args.concurrency = min(args.concurrency, 5)


def run(args) -> dict:
    """Run the schedule (device_plan.jobs) to its end or the deadline; ``device_run.json`` says how each step ended."""
    work = Path(args.work)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    todo = jobs(args)
    mps(args)
    try:
        status = schedule(todo, work, args, t0)
    finally:  # the daemon goes whatever happened, so the GPU is left as it was found
        stop_mps()
    part = work / "tracin_speed.jsonl.part"
    if status.get("tracin_speed") == "done" and part.is_file():
        part.rename(work / "tracin_speed.jsonl")
    return write_summary(work, status, t0, args)


def schedule(todo: list[Job], work: Path, args, t0: float) -> dict[str, str]:
    """Start each job, in list order, once its dependencies are done and the GPU has room; stop at the deadline.

    A job whose ``done`` file exists is skipped; one past its cap or the deadline is killed; one
    whose dependency failed is not run, except an ``after_any`` job, which waits for its
    dependencies to end however they ended.
    """
    status: dict[str, str] = {j.name: "done" for j in todo if j.done is not None and j.done.exists()}
    running: dict[str, tuple[subprocess.Popen, float, Job]] = {}
    while True:
        now = time.monotonic() - t0
        reap(running, status, work, args, now, t0)
        pending = [j for j in todo if j.name not in status and j.name not in running]
        if (not pending and not running) or now > args.deadline:
            for j in pending:
                status[j.name] = "not run (deadline)" if now > args.deadline else "not run"
            return status
        busy = sum(1 for _, _, j in running.values() if j.gpu)
        for j in pending:
            if not ready(j, status):
                continue
            if j.gpu and busy >= args.concurrency:
                continue
            running[j.name] = (start(j, work), now, j)
            busy += j.gpu
            print(f"[{now:6.0f}s] {j.name}: started", flush=True)
        time.sleep(args.tick)


def ready(j: Job, status: dict[str, str]) -> bool:
    """Whether ``j`` can start; marks it not run when a dependency it needs failed."""
    if j.after_any and all(d in status for d in j.deps):
        return True
    if all(status.get(d) == "done" for d in j.deps):
        return True
    if not j.after_any and any(status.get(d, "").startswith(("failed", "not run")) for d in j.deps):
        status[j.name] = "not run (a step it needs failed)"
    return False


def start(j: Job, work: Path) -> subprocess.Popen:
    """``j``'s process, its output in ``logs/`` (TracIn's speed: its JSON lines apart, kept only if it ends well)."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "PYTHONUNBUFFERED": "1"}
    log = open(work / "logs" / (j.name.replace("/", "__") + ".log"), "a")
    if j.name == "tracin_speed":
        out = open(work / "tracin_speed.jsonl.part", "w")
        return subprocess.Popen(j.cmd, cwd=ROOT, stdout=out, stderr=log, env=env)
    return subprocess.Popen(j.cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)


def reap(running: dict, status: dict[str, str], work: Path, args, now: float, t0: float) -> None:
    """Record the jobs that ended; kill those past their cap or the deadline."""
    for name, (p, begun, job) in list(running.items()):
        rc = p.poll()
        if rc is None and (now - begun > job.cap or now > args.deadline):
            p.kill()
            p.wait()
            rc = "killed"
        if rc is None:
            continue
        status[name] = "done" if rc == 0 else f"failed ({rc})"
        if rc == 0 and job.name == "suite":
            (work / "suite.ok").write_text("ok\n")
        print(f"[{now:6.0f}s] {name}: {status[name]} after {now - begun:.0f}s", flush=True)
        del running[name]
        write_summary(work, {**status, **{n: "running" for n in running}}, t0, args)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", default=".gpuin", help="FB15k-237.tar.gz, WN18RR.tar.gz and Kelpie's TSVs")
    ap.add_argument("--work", default=".gpuwork")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--deadline", type=float, default=520, help="seconds: nothing starts after it, all is killed at it")
    ap.add_argument("--concurrency", type=int, default=3, help="GPU processes at once (the suite aside)")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads per process")
    ap.add_argument("--train-cap", type=float, default=300)
    ap.add_argument("--arm-cap", type=float, default=400)
    ap.add_argument("--pack", default=None, help="write gpu_results.tar.gz here at the end")
    ap.add_argument("--pack-only", default=None, help="only pack what --work holds now into this folder")
    ap.add_argument("--quick", action="store_true", help="UMLS, 3 epochs: a dry run of the schedule")
    ap.add_argument("--datasets", default="wn18rr", help="comma-separated, in priority order (one fits a lent call)")
    ap.add_argument(
        "--retrain-seeds",
        default="",
        help="comma-separated: Kelpie's facts again at these retrain seeds (the default, Kelpie's, the noise floor, "
        "tracin-margin-query), "
        "after every other arm, then pooled with the seed-42 folder (fidelity compare-pool)",
    )
    ap.add_argument("--methods", default=None, help="comma-separated: our methods on Kelpie's facts (default: all)")
    ap.add_argument("--seeded-arms", default=None, help="comma-separated: the arms repeated at --retrain-seeds")
    ap.add_argument(
        "--seeds-first",
        action="store_true",
        help="the seeded arms at seed 42 and at every --retrain-seeds seed before any other arm",
    )
    ap.add_argument("--tick", type=float, default=1.0, help=argparse.SUPPRESS)  # seconds between looks (tests: less)
    ap.add_argument("--own-facts", action=argparse.BooleanOptionalAction, default=True, help="our own 100 facts too")
    ap.add_argument(
        "--kelpie-facts",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Kelpie's facts (without them, a call spends its retrains on our own facts; file it under its own name)",
    )
    ap.add_argument(
        "--mps",
        action="store_true",
        help="run the GPU's processes through CUDA's MPS daemon (side by side rather than by turns); "
        "without it, or if it fails to start, at most 5 at once",
    )
    return ap


def main():
    args = parser().parse_args()
    if args.pack_only:
        pack(Path(args.work), Path(args.pack_only))
        return
    summary = run(args)
    if args.pack:
        pack(Path(args.work), Path(args.pack))
    for k, v in summary["status"].items():
        print(f"{k}: {v}")


if __name__ == "__main__":
    main()
