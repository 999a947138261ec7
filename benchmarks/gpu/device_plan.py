"""What device_run.py runs: the jobs of one call, in priority order, each with its command and what it waits for.

Read top to bottom, :func:`jobs` is the schedule: the CUDA suite, per dataset the run at Kelpie's
settings, the explanations, one retrain per arm, the arms again at other retrain seeds and
their pool, each fact set's summary, and TracIn's speed. The scheduler (device_run.py) starts
jobs in this order as their dependencies finish and the GPU has room.
"""

from __future__ import annotations

import os
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KELPIE = ("kelpie", "data_poisoning", "criage", "k1")
# tracin-margin-path: explain's default, first; tracin-margin-query: the query's own answers first;
# local-retrain: the refit search; tracin: TracIn top-k
OURS = ("tracin-margin-path", "tracin-margin-query", "local-retrain", "tracin")
# the arms repeated at other retrain seeds (--seeded-arms chooses among them and others)
SEEDED = (OURS[0], "kelpie", "noise", OURS[1])
# our own facts: the default, then the floors it must clear (random head facts, a retrain with nothing
# removed), then far facts, the floor a CPU's deterministic retrains add
OWN_ARMS = (OURS[0], "random-head", "noise", "far")


@dataclass
class Job:
    name: str
    cmd: list[str]
    cap: float  # seconds
    deps: list[str] = field(default_factory=list)
    done: Path | None = None  # skip when this file exists
    gpu: bool = True  # counts against --concurrency
    after_any: bool = False  # starts once its deps have ended, however they ended


@dataclass
class Plan:
    """One dataset's commands: Kelpie's facts (``kel``), our own (``own``), the seeded folders' base (``seeded``)."""

    kel: list[str]
    own: list[str]
    seeded: list[str]
    work: Path
    kelpie_files: dict[str, Path]


def tg(*args: str) -> list[str]:
    return [sys.executable, "-m", "tracegraph", *args]


def methods(args) -> list[str]:
    """Our methods explained and retrained on Kelpie's facts (``--methods``; default all of OURS)."""
    return [m for m in (args.methods or ",".join(OURS)).split(",") if m]


def seeded_arms(args) -> list[str]:
    """The arms repeated at each ``--retrain-seeds`` seed (``--seeded-arms``; default SEEDED)."""
    return [a for a in (args.seeded_arms or ",".join(SEEDED)).split(",") if a]


def series_arms() -> list[str] | None:
    """A CPU series interleaving datasets runs only these arms of Kelpie's facts now (``SERIES_ARMS``)."""
    return os.environ["SERIES_ARMS"].split(",") if os.environ.get("SERIES_ARMS") else None


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
        kelpie = {s: Path(args.inputs) / f"conve_{tag}_necessary_{s}.tsv" for s in KELPIE}
        out[name] = dict(dir=d, epochs=epochs, kelpie=kelpie)
    return out


def kelpie_settings(ds: dict, quick: bool) -> list[str]:
    """Kelpie's ConvE settings (its README): batch 128, lr 0.003, d 200, dropouts 0.2/0.3/0.2, decay 0.995, ε 0.1."""
    size = ["--embedding-dim", "32", "--embedding-height", "4", "--embedding-width", "8"] if quick else []
    epochs = str(ds["epochs"])
    return [
        *("--preset", "conve-paper", "--epochs", epochs, "--lr-decay", "0.995", "--seed", "42"),
        *("--patience", "0", "--eval-every", epochs, "--checkpoint-every", "10" if not quick else "1"),
        *size,
    ]


def suite_job(args) -> list[Job]:
    """The CUDA-only tests, beside everything else (on a GPU only)."""
    if args.quick or args.device != "cuda":
        return []
    cmd = [sys.executable, "-m", "pytest", *"-p no:xdist -p no:cacheprovider -q -rs -m gpu tests/gpu".split()]
    return [Job("suite", cmd, 300, gpu=False, done=Path(args.work) / "suite.ok")]


def train_job(args, name: str, ds: dict) -> Job:
    """The original run at Kelpie's settings; an interrupted one (a CPU run spread over days) resumes."""
    run = Path(args.work) / name / "run"
    files = [a for split in ("train", "valid", "test") for a in (f"--{split}", str(ds["dir"] / f"{split}.txt"))]
    again = "--resume" if (run / "checkpoints" / "resume.pt").is_file() else "--overwrite"
    cmd = tg("train", *files, *kelpie_settings(ds, args.quick), "--device", args.device, *threads(args))
    return Job(f"{name}/train", [*cmd, "-o", str(run), again], args.train_cap, done=run / "final_model.pt")


def threads(args) -> list[str]:
    return ["--num-threads", str(args.threads)]


def plan(args, name: str, ds: dict) -> Plan:
    """The ``fidelity compare`` commands of one dataset, without their ``--arm`` or ``--explain-only``."""
    d = Path(args.work) / name
    base = tg("fidelity", "compare", "--model-dir", str(d / "run"), "--device", args.device, *threads(args))
    common = [*base, "--k", "4", "--local-candidates", "16", "--random-like", OURS[0]]
    ours = [a for m in methods(args) for a in ("--method", m)]
    theirs = [a for s, p in ds["kelpie"].items() for a in ("--explanations", f"{s}={p}")]
    # --size-like kelpie: each method also cut to Kelpie's explanation sizes (METHOD@kelpie), the size control
    kel = [*common, "-o", str(d / "kelpie-facts"), *theirs, *ours, "--size-like", "kelpie", "--versus", "kelpie"]
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
    seeded = [
        *base,
        *("--k", "4", "--random-like", OURS[0], "--explanations", f"kelpie={ds['kelpie']['kelpie']}"),
        *[a for m in seeded_arms(args) if m in OURS for a in ("--method", m)],
        *("--versus", "kelpie"),
    ]
    return Plan(kel, own, seeded, d, ds["kelpie"])


def explain_jobs(args, plans: dict[str, Plan], facts: str) -> list[Job]:
    """Each dataset's explanations of one fact set, timed before its arms retrain."""
    if not (args.own_facts if facts == "own-facts" else args.kelpie_facts):
        return []
    cmd = {name: p.kel if facts == "kelpie-facts" else p.own for name, p in plans.items()}
    return [Job(f"{n}/{facts}/explain", [*c, "--explain-only"], args.arm_cap, [f"{n}/train"]) for n, c in cmd.items()]


def arm_order(args, names: list[str]) -> list[tuple[str, str, str]]:
    """(dataset, fact set, arm) by priority: Kelpie's facts' first arms, their later ones, then our own facts'."""
    if args.quick:
        first, later = ["kelpie", OURS[0], "noise"], ["random-head", f"{OURS[0]}@kelpie", *OURS[1:], "data_poisoning"]
    else:
        first = ["kelpie", OURS[0], "noise", "random-head", "tracin", *KELPIE[1:]]
        later = [f"{OURS[0]}@kelpie", OURS[1], "far", OURS[2]]
    ours, seeded, series = methods(args), seeded_arms(args), series_arms()
    groups = [[arm for arm in group if arm in ours or arm not in OURS] for group in (first, later)]
    order = [(name, "kelpie-facts", arm) for group in groups for name in names for arm in group]
    order = order if args.kelpie_facts else []
    if args.own_facts:
        order += [(name, "own-facts", arm) for name in names for arm in OWN_ARMS]
    if args.seeds_first:  # the seeded arms at seed 42 first (then every other seed's: seed_jobs), then the rest
        head = [o for o in order if o[1] == "kelpie-facts" and o[2] in seeded]
        order = head + [o for o in order if o not in head]
    if series:
        order = [o for o in order if o[1] == "kelpie-facts" and o[2] in series]
    return order


def arm_jobs(args, plans: dict[str, Plan], own_explain: list[Job]) -> list[Job]:
    """One retrain per arm, in :func:`arm_order`; on a CPU our own facts are explained once Kelpie's arms are done."""
    out = []
    for name, facts, arm in arm_order(args, list(plans)):
        p = plans[name]
        if arm in KELPIE and arm not in p.kelpie_files:
            continue
        if facts == "own-facts" and own_explain:
            out, own_explain = out + own_explain, []
        cmd = [*(p.kel if facts == "kelpie-facts" else p.own), "--arm", arm]
        done = p.work / facts / "arms" / f"{arm}.json"
        out.append(Job(f"{name}/{facts}/{arm}", cmd, args.arm_cap, [f"{name}/{facts}/explain"], done=done))
    return out


def seed_jobs(args, plans: dict[str, Plan]) -> list[Job]:
    """Kelpie's facts again at each ``--retrain-seeds`` seed (the seeded arms), then pooled with seed 42's.

    One retrain per arm leaves each fact to the retrain's chaos; ``fidelity compare-pool`` averages
    each fact's outcome over the seed-42 folder and these, then bootstraps over the facts.
    """
    seeds = [int(s) for s in args.retrain_seeds.split(",") if s.strip()] if args.kelpie_facts else []
    out: list[Job] = []
    for name, p in plans.items() if seeds else ():
        folders, ends = [p.work / "kelpie-facts"], [f"{name}/kelpie-facts/{a}" for a in seeded_arms(args)]
        for s in seeds:
            f = p.work / f"kelpie-facts-seed{s}"
            at = [*p.seeded, "-o", str(f), "--retrain-seed", str(s)]
            out.append(Job(f"{name}/seed{s}/explain", [*at, "--explain-only"], args.arm_cap, [f"{name}/train"]))
            for a in seeded_arms(args):
                deps = [f"{name}/seed{s}/explain"]
                out.append(
                    Job(f"{name}/seed{s}/{a}", [*at, "--arm", a], args.arm_cap, deps, done=f / "arms" / f"{a}.json")
                )
                ends.append(f"{name}/seed{s}/{a}")
            folders.append(f)
        pool = tg("fidelity", "compare-pool", *map(str, folders), "-o", str(p.work / "pooled"), "--versus", "kelpie")
        out.append(Job(f"{name}/pooled", pool, 120, ends, gpu=False, after_any=True))
    return out


def with_seeds(args, out: list[Job], seeded: list[Job]) -> list[Job]:
    """The seed jobs after every other arm, or with ``--seeds-first`` right after seed 42's seeded arms."""
    if not args.seeds_first or not seeded:
        return out + seeded
    heads = {f"{j.name.split('/')[0]}/kelpie-facts/{a}" for j in out for a in seeded_arms(args)}
    at = max(i for i, j in enumerate(out) if j.name in heads) + 1
    return out[:at] + seeded + out[at:]


def summary_jobs(args, plans: dict[str, Plan], arms: list[str]) -> list[Job]:
    """One last summary of every arm that finished, per fact set, once they have all ended."""
    sets = (["kelpie-facts"] if args.kelpie_facts else []) + (
        ["own-facts"] if args.own_facts and not series_arms() else []
    )
    return [
        Job(
            f"{name}/{tag}/summary",
            [*(p.kel if tag == "kelpie-facts" else p.own), "--explain-only"],
            120,
            [a for a in arms if a.startswith(f"{name}/{tag}/")],
            after_any=True,
        )
        for name, p in plans.items()
        for tag in sets
    ]


def tracin_job(args, out: list[Job]) -> list[Job]:
    """TracIn's speed at FB15k-237's size, alone on the GPU once every GPU job has ended (a GPU figure only)."""
    if args.quick or args.device != "cuda":
        return []
    size = ["--train", "272115", "--entities", "14541", "--sample", "8"]
    cmd = [sys.executable, "benchmarks/tracin_speed.py", "--device", args.device, *size]
    deps = [j.name for j in out if j.gpu]
    return [Job("tracin_speed", cmd, 120, deps, done=Path(args.work) / "tracin_speed.jsonl", after_any=True)]


def jobs(args) -> list[Job]:
    """The whole schedule of one call, in priority order."""
    sets = datasets(args)
    plans = {name: plan(args, name, ds) for name, ds in sets.items()}
    out = suite_job(args) + [train_job(args, name, ds) for name, ds in sets.items()]
    out += explain_jobs(args, plans, "kelpie-facts")  # timed with the least else running
    own_explain = explain_jobs(args, plans, "own-facts")
    if args.device == "cuda":  # beside the rest on a GPU; on a CPU, after Kelpie's facts' arms
        out, own_explain = out + own_explain, []
    out = with_seeds(args, out + arm_jobs(args, plans, own_explain), seed_jobs(args, plans))
    arms = [j.name for j in out if "/" in j.name and not j.name.endswith(("/train", "/pooled"))]
    out += summary_jobs(args, plans, arms)
    return out + tracin_job(args, out)
