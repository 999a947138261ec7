"""Everything a lent GPU is spent on, in one rerunnable command with a deadline.

Steps, each a process with its own time cap, scheduled by priority on one GPU:

1. the CUDA suite (``pytest -m gpu`` and the CUDA-parametrised tests), beside everything else;
2. per dataset, ConvE trained with Kelpie's settings (the necessity protocol's original model);
3. ``tracegraph fidelity compare`` on Kelpie's 100 facts: the methods' explanations first, then one
   retrain per arm (Kelpie, its baselines, ours, random head facts, far facts, the noise floor), several at once;
   then the same on our own 100 rank-1 test facts;
4. TracIn's speed at FB15k-237 scale, if time is left.

Everything lands in ``--work``; ``--pack`` writes it to one archive (with the logs, without
weights) for the trip back, and ``benchmarks/necessity_kelpie_results.py`` files it under
``benchmarks/results/``. A rerun into the same ``--work`` skips what finished and resumes
interrupted retrains, but each call to a lent GPU starts from a fresh copy of the working tree:
plan one call (``--datasets`` picks what fits; on one H100 a FB15k-237 training at these
settings took 112 s beside two other processes, and each retrain about 220 s five at a time).

Usage (on the device, from the repository root)::

    python3 benchmarks/gpu/device_run.py --inputs .gpuin --work .gpuwork --deadline 520 --pack $OUT

``--quick`` runs the same schedule on UMLS in a few minutes on a CPU (a dry run of this script).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from device_files import pack, start_mps, stop_mps, write_summary  # the script beside this one

ROOT = Path(__file__).resolve().parents[2]
KELPIE = ("kelpie", "data_poisoning", "criage", "k1")
OURS = (
    "tracin-margin-path",
    "tracin-margin-query",
    "local-retrain",
    "tracin",
)  # tracin-margin-path: explain's default, first; tracin-margin-query: ahead of Kelpie's on FB15k-237 (CPU); local-retrain: the refit search


@dataclass
class Job:
    name: str
    cmd: list[str]
    cap: float  # seconds
    deps: list[str] = field(default_factory=list)
    done: Path | None = None  # skip when this file exists
    gpu: bool = True  # counts against --concurrency
    after_any: bool = False  # starts once its deps have ended, however they ended


def tg(*args: str) -> list[str]:
    return [sys.executable, "-m", "tracegraph", *args]


def datasets(args) -> dict[str, dict]:
    """Per dataset asked for: its split files, epochs and Kelpie's files (from --inputs)."""
    if args.quick:
        umls = ROOT / "tracegraph/kg/data/datasets/umls"
        return {
            name: dict(dir=umls, epochs=3, kelpie={s: Path(args.inputs) / f"umls_{s}.tsv" for s in KELPIE[:2]})
            for name in ("umls", "umls2")
        }
    out = {}
    for name, archive, epochs, tag in (
        ("fb15k-237", "FB15k-237.tar.gz", 60, "fb15k237"),
        ("wn18rr", "WN18RR.tar.gz", 90, "wn18rr"),
    ):
        if name not in args.datasets.split(","):
            continue
        d = Path(args.work) / "data" / name
        if not (d / "test.txt").is_file():
            d.mkdir(parents=True, exist_ok=True)
            with tarfile.open(Path(args.inputs) / archive) as tf:
                for m in tf.getmembers():
                    if m.isfile() and Path(m.name).name in ("train.txt", "valid.txt", "test.txt"):
                        m.name = Path(m.name).name
                        tf.extract(m, d)
        out[name] = dict(
            dir=d, epochs=epochs, kelpie={s: Path(args.inputs) / f"conve_{tag}_necessary_{s}.tsv" for s in KELPIE}
        )
    return out


def kelpie_settings(ds: dict, quick: bool) -> list[str]:
    """Kelpie's ConvE settings (its README): batch 128, lr 0.003, d 200, dropouts 0.2/0.3/0.2, decay 0.995, ε 0.1."""
    size = ["--embedding-dim", "32", "--embedding-height", "4", "--embedding-width", "8"] if quick else []
    return [
        "--preset",
        "conve-paper",
        "--epochs",
        str(ds["epochs"]),
        "--lr-decay",
        "0.995",
        "--seed",
        "42",
        "--patience",
        "0",
        "--eval-every",
        str(ds["epochs"]),
        "--checkpoint-every",
        "10" if not quick else "1",
        *size,
    ]


def jobs(args) -> list[Job]:
    work, dev, thr = Path(args.work), args.device, ["--num-threads", str(args.threads)]
    out: list[Job] = []
    if not args.quick and dev == "cuda":
        out.append(
            Job(
                "suite",
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-p",
                    "no:xdist",
                    "-p",
                    "no:cacheprovider",
                    "-q",
                    "-rs",
                    "-m",
                    "gpu",
                    "tests/gpu",
                ],
                300,
                gpu=False,
                done=work / "suite.ok",
            )
        )
    plans, seeded = {}, {}
    for name, ds in datasets(args).items():
        d = work / name
        files = [
            "--train",
            str(ds["dir"] / "train.txt"),
            "--valid",
            str(ds["dir"] / "valid.txt"),
            "--test",
            str(ds["dir"] / "test.txt"),
        ]
        out.append(
            Job(
                f"{name}/train",
                tg(
                    "train",
                    *files,
                    *kelpie_settings(ds, args.quick),
                    "--device",
                    dev,
                    *thr,
                    "-o",
                    str(d / "run"),
                    # an interrupted training (a CPU run spread over days) continues where it stopped
                    "--resume" if (d / "run" / "checkpoints" / "resume.pt").is_file() else "--overwrite",
                ),
                args.train_cap,
                done=d / "run" / "final_model.pt",
            )
        )
        common = tg(
            "fidelity",
            "compare",
            "--model-dir",
            str(d / "run"),
            "--device",
            dev,
            *thr,
            "--k",
            "4",
            "--local-candidates",
            "16",
            "--random-like",
            OURS[0],
        )
        kel = [
            *common,
            "-o",
            str(d / "kelpie-facts"),
            *[a for s, p in ds["kelpie"].items() for a in ("--explanations", f"{s}={p}")],
            *[a for m in methods(args) for a in ("--method", m)],
            "--versus",
            "kelpie",
        ]
        own = [
            *common,
            "-o",
            str(d / "own-facts"),
            "--facts",
            str(ds["dir"] / "test.txt"),
            "--n",
            "100",
            "--method",
            OURS[0],
        ]
        plans[name] = (kel, own, d)
        seeded[name] = (
            [
                *tg("fidelity", "compare", "--model-dir", str(d / "run"), "--device", dev, *thr, "--k", "4"),
                *("--random-like", OURS[0], "--explanations", f"kelpie={ds['kelpie']['kelpie']}"),
                *[a for m in seeded_arms(args) if m in OURS for a in ("--method", m)],
                *("--versus", "kelpie"),
            ],
            d,
        )
    # explanations first (timed with the least else on the GPU), then arms by priority
    for name, (kel, own, d) in plans.items():
        out.append(Job(f"{name}/kelpie-facts/explain", [*kel, "--explain-only"], args.arm_cap, [f"{name}/train"]))
    own_explain = [
        Job(f"{name}/own-facts/explain", [*own, "--explain-only"], args.arm_cap, [f"{name}/train"])
        for name, (kel, own, d) in plans.items()
        if args.own_facts
    ]
    if dev == "cuda":  # beside the rest on a GPU; one process at a time on a CPU: after Kelpie's facts' arms
        out, own_explain = out + own_explain, []
    names = list(datasets(args))
    first = (
        ["kelpie", OURS[0], "noise", "random-head", "tracin", *KELPIE[1:]]
        if not args.quick
        else ["kelpie", OURS[0], "noise"]
    )
    later = [OURS[1], "far", "local-retrain"] if not args.quick else ["random-head", *OURS[1:], "data_poisoning"]
    order = [(name, "kelpie-facts", arm) for group in (first, later) for name in names for arm in group]
    order = [o for o in order if o[2] in methods(args) or o[2] not in OURS]
    if args.own_facts:
        order += [(name, "own-facts", arm) for name in names for arm in (OURS[0], "random-head", "far", "noise")]
    if args.seeds_first:  # the seeded arms at seed 42, then at every other seed, then the rest
        head = [o for o in order if o[1] == "kelpie-facts" and o[2] in seeded_arms(args)]
        order = head + [o for o in order if o not in head]
    if os.environ.get("SERIES_ARMS"):  # a CPU series interleaving datasets: only these arms of Kelpie's facts now
        keep = os.environ["SERIES_ARMS"].split(",")
        order = [o for o in order if o[1] == "kelpie-facts" and o[2] in keep]
    for name, facts, arm in order:
        if arm in KELPIE and arm not in datasets(args)[name]["kelpie"]:
            continue
        if facts == "own-facts" and dev != "cuda" and own_explain:
            out += own_explain  # a CPU explains our own facts once Kelpie's arms are done
            own_explain = []
        kel, own, d = plans[name]
        cmd = kel if facts == "kelpie-facts" else own
        out.append(
            Job(
                f"{name}/{facts}/{arm}",
                [*cmd, "--arm", arm],
                args.arm_cap,
                [f"{name}/{facts}/explain"],
                done=d / facts / "arms" / f"{arm}.json",
            )
        )
    if args.seeds_first:  # right after the last seeded arm at seed 42
        heads = {f"{name}/kelpie-facts/{a}" for name in names for a in seeded_arms(args)}
        at = max(i for i, j in enumerate(out) if j.name in heads) + 1
        out[at:at] = seed_jobs(args, seeded)
    else:
        out += seed_jobs(args, seeded)
    arms = [j.name for j in out if "/" in j.name and not j.name.endswith(("/train", "/pooled"))]
    series = bool(os.environ.get("SERIES_ARMS"))
    for name, (kel, own, d) in plans.items():  # one last summary of every arm that finished
        for tag, cmd in (("kelpie-facts", kel), ("own-facts", own))[: 2 if args.own_facts and not series else 1]:
            out.append(
                Job(
                    f"{name}/{tag}/summary",
                    [*cmd, "--explain-only"],
                    120,
                    [a for a in arms if a.startswith(f"{name}/{tag}/")],
                    after_any=True,
                )
            )
    if not args.quick and dev == "cuda":  # a GPU figure only
        out.append(
            Job(
                "tracin_speed",
                [
                    sys.executable,
                    "benchmarks/tracin_speed.py",
                    "--device",
                    dev,
                    "--train",
                    "272115",
                    "--entities",
                    "14541",
                    "--sample",
                    "8",
                ],
                120,
                [j.name for j in out if j.gpu],
                done=work / "tracin_speed.jsonl",
                after_any=True,
            )
        )
    return out


# the arms repeated at other retrain seeds; tracin-margin-query, ahead of Kelpie's on FB15k-237 at seed 42, to see
# whether that lead survives other retrains
SEEDED = (OURS[0], "kelpie", "noise", OURS[1])


def methods(args) -> list[str]:
    """Our methods explained and retrained on Kelpie's facts (``--methods``; default all of OURS)."""
    return [m for m in (args.methods or ",".join(OURS)).split(",") if m]


def seeded_arms(args) -> list[str]:
    """The arms repeated at each ``--retrain-seeds`` seed (``--seeded-arms``; default SEEDED)."""
    return [a for a in (args.seeded_arms or ",".join(SEEDED)).split(",") if a]


def seed_jobs(args, seeded: dict[str, tuple[list[str], Path]]) -> list[Job]:
    """Kelpie's facts again at each ``--retrain-seeds`` seed (the default, Kelpie's, the noise floor, the query arm), pooled.

    One retrain per arm leaves each fact to the retrain's chaos; ``fidelity compare-pool`` averages
    each fact's outcome over the seed-42 folder and these, then bootstraps over the facts.
    """
    seeds = [int(s) for s in args.retrain_seeds.split(",") if s.strip()]
    out: list[Job] = []
    for name, (cmd, d) in seeded.items() if seeds else ():
        folders, ends = [d / "kelpie-facts"], [f"{name}/kelpie-facts/{a}" for a in seeded_arms(args)]
        for s in seeds:
            f = d / f"kelpie-facts-seed{s}"
            at = [*cmd, "-o", str(f), "--retrain-seed", str(s)]
            out.append(Job(f"{name}/seed{s}/explain", [*at, "--explain-only"], args.arm_cap, [f"{name}/train"]))
            for a in seeded_arms(args):
                deps = [f"{name}/seed{s}/explain"]
                out.append(
                    Job(f"{name}/seed{s}/{a}", [*at, "--arm", a], args.arm_cap, deps, done=f / "arms" / f"{a}.json")
                )
                ends.append(f"{name}/seed{s}/{a}")
            folders.append(f)
        pool = tg("fidelity", "compare-pool", *map(str, folders), "-o", str(d / "pooled"), "--versus", "kelpie")
        out.append(Job(f"{name}/pooled", pool, 120, ends, gpu=False, after_any=True))
    return out


def mps(args) -> None:
    """With --mps on a GPU: start the MPS daemon (``args.mps`` then says whether it runs, for the summary);
    without it, processes share the GPU by turns, and more than five at once only lengthen each."""
    if args.mps and args.device == "cuda":
        args.mps = start_mps(sys.executable)
        print(f"MPS: {args.mps}", flush=True)
        if args.mps != "on":
            args.concurrency = min(args.concurrency, 5)


def run(args) -> dict:
    work = Path(args.work)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    todo = jobs(args)
    mps(args)
    status: dict[str, str] = {j.name: "done" for j in todo if j.done is not None and j.done.exists()}
    running: dict[str, tuple[subprocess.Popen, float, Job]] = {}
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "PYTHONUNBUFFERED": "1"}
    while True:
        now = time.monotonic() - t0
        for name, (p, start, job) in list(running.items()):
            rc = p.poll()
            if rc is None and (now - start > job.cap or now > args.deadline):
                p.kill()
                p.wait()
                rc = "killed"
            if rc is not None:
                status[name] = "done" if rc == 0 else f"failed ({rc})"
                if rc == 0 and job.name == "suite":
                    (work / "suite.ok").write_text("ok\n")
                print(f"[{now:6.0f}s] {name}: {status[name]} after {now - start:.0f}s", flush=True)
                del running[name]
                write_summary(work, {**status, **{n: "running" for n in running}}, t0, args)
        pending = [j for j in todo if j.name not in status and j.name not in running]
        if (not pending and not running) or now > args.deadline:
            for j in pending:
                status[j.name] = "not run (deadline)" if now > args.deadline else "not run"
            break
        busy = sum(1 for _, _, j in running.values() if j.gpu)
        for j in pending:
            if j.after_any and all(d in status for d in j.deps):
                pass
            elif any(status.get(d, "") not in ("done",) for d in j.deps):
                if not j.after_any and any(status.get(d, "").startswith(("failed", "not run")) for d in j.deps):
                    status[j.name] = "not run (a step it needs failed)"
                continue
            if j.gpu and busy >= args.concurrency:
                continue
            log = open(work / "logs" / (j.name.replace("/", "__") + ".log"), "a")
            cmd = j.cmd
            if j.name == "tracin_speed":
                log2 = open(work / "tracin_speed.jsonl.part", "w")
                p = subprocess.Popen(cmd, cwd=ROOT, stdout=log2, stderr=log, env=env)
            else:
                p = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
            running[j.name] = (p, now, j)
            busy += j.gpu
            print(f"[{now:6.0f}s] {j.name}: started", flush=True)
        time.sleep(1.0)
    stop_mps()
    part = work / "tracin_speed.jsonl.part"
    if status.get("tracin_speed") == "done" and part.is_file():
        part.rename(work / "tracin_speed.jsonl")
    return write_summary(work, status, t0, args)


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
    ap.add_argument("--own-facts", action=argparse.BooleanOptionalAction, default=True, help="our own 100 facts too")
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
