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
    [--methods tracin-margin,tracin,...] [--load TEXT] [--page]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from tracegraph.kg.explain.methods import DEFAULT_EXPLAINER as DEFAULT

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the scripts beside this one
from benchmarks_page import write_blocks  # noqa: E402
from record import git_commit  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ARMS = (DEFAULT, "path", "neighbour", "far")
TREATS = "biolink:treats"  # the demo's predicted relation


def run_jobs(jobs: list[tuple[Path, list[str]]], at_once: int) -> None:
    """Run each ``(log, command)``, ``at_once`` at a time. Stops at the first that fails."""
    running: list[subprocess.Popen] = []
    while jobs or running:
        while jobs and len(running) < at_once:
            log, cmd = jobs.pop(0)
            running.append(subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT))
        time.sleep(2)
        for p in [p for p in running if p.poll() is not None]:
            running.remove(p)
            if p.returncode:
                sys.exit(f"error: {' '.join(p.args)} exited {p.returncode} (its log is beside its folder)")


def demo_jobs(work: Path, seeds: list[int]) -> list:
    """``tracegraph demo --seed S`` for each seed not yet finished; its commit and the load are written beside it."""
    jobs = []
    for s in seeds:
        if not (work / f"seed{s}" / "demo_summary.json").is_file():
            about = {"commit": git_commit(), "load_avg_1m_at_start": round(os.getloadavg()[0], 2)}
            (work / f"seed{s}.json").write_text(json.dumps(about))
            cmd = ["demo", "--output-dir", str(work / f"seed{s}"), "--seed", str(s)]
            jobs.append((work / f"seed{s}.log", [sys.executable, "-m", "tracegraph", *cmd]))
    return jobs


def method_jobs(work: Path, seeds: list[int], methods: list[str]) -> list:
    """The demo's necessity test again on each seed's run and facts, with the methods no earlier run of it had.

    The settings are the demo's (k = 4, the 30 tail-side facts drawn with the seed, one torch thread), so
    its random arms repeat the demo's retrains exactly and every arm is comparable fact by fact. Each run
    goes to the next ``seedS/methods-N``.
    """
    jobs = []
    for s in seeds:
        d = work / f"seed{s}"
        done = {
            a.rsplit("@", 1)[0]
            for p in d.glob("methods-*/necessity.json")
            for a in json.loads(p.read_text())["summary"]
        }
        todo = [m for m in methods if m not in done]
        if todo:
            out = d / f"methods-{len(list(d.glob('methods-*/')))}"
            out.mkdir(parents=True)
            (out / "commit.txt").write_text(git_commit())
            cmd = ["fidelity", "necessity", "--model-dir", str(d / "run"), "--train", str(d / "data" / "train.txt")]
            cmd += ["-o", str(out), "--sides", "tail", "--n", "30", "--k", "4", "--seed", str(s), "--device", "cpu"]
            cmd += ["--num-threads", "1", "--method", ",".join(todo)]
            jobs.append((work / f"seed{s}-{out.name}.log", [sys.executable, "-m", "tracegraph", *cmd]))
    return jobs


def necessity_arms(nec: dict, arms, folder: Path) -> dict:
    """Each arm's figures from ``folder``'s ``necessity.json`` (its first seed), with the facts' ranks after and
    how many of the arm's removed triples each relation has (from its retrain's ``excluded.txt``)."""
    k, seed = nec["config"]["ks"][0], str(nec["config"]["sample_seed"])
    ranks = nec["seeds"][seed]
    out = {}
    for a in arms:
        sm = nec["summary"][f"{a}@{k}"]
        excluded = (folder / "retrains" / f"seed{seed}_{a}_k{k}" / "excluded.txt").read_text().splitlines()
        relations = Counter(line.split("\t")[1] for line in excluded if line.strip())
        out[a] = {
            "delta_hits@1": sm["delta_hits@1"]["mean"],
            "delta_hits@1_ci95": sm["delta_hits@1_ci95_first_seed"],
            "above_far_hits@1": sm.get("above_far_hits@1", {}).get("mean"),
            "above_far_hits@1_ci95": sm.get("above_far_hits@1_ci95_first_seed"),
            "delta_mrr": sm["delta_mrr"]["mean"],
            "flipped": int(sm["flipped"]["mean"]),
            "triples_removed": sm["triples_removed"],
            "removed_at_fact": sm["removed_at_fact"],
            "ranks": ranks[f"{a}@{k}"]["ranks"],
            "removed_relations": dict(relations.most_common()),
        }
    return out


def one_seed(folder: Path) -> dict:
    """The figures of one finished demo: test metrics, the recovery table, and each necessity arm with its ranks after."""
    summ = json.loads((folder / "demo_summary.json").read_text())
    fid = json.loads((folder / "fidelity.json").read_text())
    nec = json.loads((folder / "necessity" / "necessity.json").read_text())
    k = nec["config"]["ks"][0]
    tm = summ["test_metrics"]
    necessity = necessity_arms(nec, ARMS, folder / "necessity")
    for more in sorted(folder.glob("methods-*/necessity.json")):  # further methods on the same facts
        extra = json.loads(more.read_text())
        got = necessity_arms(extra, [a.rsplit("@", 1)[0] for a in extra["summary"]], more.parent)
        for a in [a for a in got if a in necessity]:  # the random arms, or a method the demo ran: the same retrain
            if extra["facts"] != nec["facts"] or got.pop(a)["ranks"] != necessity[a]["ranks"]:
                sys.exit(f"error: {more}: its facts or its {a} arm differ from the demo's; remove it and rerun")
        necessity.update({a: x | {"commit": (more.parent / "commit.txt").read_text().strip()} for a, x in got.items()})
    rec = fid["recovery"]
    return {
        **json.loads((folder.parent / f"{folder.name}.json").read_text()),  # commit, load at its start
        "test": {
            "mrr_both": tm["both"]["mrr"],
            "mrr_tail": tm["tail"]["mrr"],
            "hits@1_tail": tm["tail"]["hits@1"],
            "hits@10_tail": tm["tail"]["hits@10"],
            "mrr_head": tm["head"]["mrr"],
        },
        "recovery": {m: {q: v["mean"] for q, v in row.items()} for m, row in rec["summary"].items()},
        "recovery_mrr_score_loss": summ["recovery_mrr_other_loss"],
        "recovery_candidates": rec["mean_candidates"],
        "recovery_coverage": rec["mechanism_edge_coverage"],
        "necessity": necessity,
        "k": k,
        "n_facts": nec["n_facts"],
        "stage_seconds": summ["stage_seconds"],
        "seconds": summ["total_seconds"],
    }


def lead(per_seed: dict, over: str, arm: str = DEFAULT, draws: int = 2000, seed: int = 0) -> dict:
    """``arm``'s ΔH@1 minus ``over``'s, paired by fact: per seed, their mean, and its bootstrap interval."""
    rng = np.random.default_rng(seed)
    diffs = {
        s: (np.asarray(r["necessity"][over]["ranks"]) <= 1).astype(float)
        - (np.asarray(r["necessity"][arm]["ranks"]) <= 1).astype(float)
        for s, r in per_seed.items()
    }  # 1 where the arm's removal broke a fact that the other arm's left first
    boot = np.mean([[d[rng.integers(0, len(d), len(d))].mean() for _ in range(draws)] for d in diffs.values()], 0)
    return {
        "per_seed": {s: float(d.mean()) for s, d in diffs.items()},
        "mean": float(np.mean([d.mean() for d in diffs.values()])),
        "ci95": [float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))],
    }


def treats_share(arm: dict) -> float:
    """The share of `treats` edges among the triples an arm removed (the relation the demo predicts)."""
    rel = arm["removed_relations"]
    return rel.get(TREATS, 0) / max(sum(rel.values()), 1)


def spread(values: list[float]) -> dict:
    return {"mean": float(np.mean(values)), "min": float(np.min(values)), "max": float(np.max(values))}


def across(per_seed: dict) -> dict:
    """Each figure's mean and range over the seeds, and every method arm's paired leads over the random arms."""
    rs = list(per_seed.values())
    arms = [a for a in rs[0]["necessity"] if all(a in r["necessity"] for r in rs)]
    return {
        "test_mrr_tail": spread([r["test"]["mrr_tail"] for r in rs]),
        "recovery_mrr": {m: spread([r["recovery"][m]["mrr"] for r in rs]) for m in rs[0]["recovery"]},
        "necessity_delta_hits@1": {a: spread([r["necessity"][a]["delta_hits@1"] for r in rs]) for a in arms},
        # what each arm removes: the share of the prediction's own relation among its triples
        "treats_share": {a: spread([treats_share(r["necessity"][a]) for r in rs]) for a in arms},
        "lead_over": {
            m: {a: lead(per_seed, a, arm=m) for a in ("neighbour", "far")}
            for m in arms
            if m not in ("neighbour", "far")
        },
    }


NAMES = {
    "tracin-margin-path": "**`tracin-margin-path`** (`explain`'s default)",
    "tracin-path": "`tracin-path`",
    "tracin": "TracIn",
    "relatif": "RelatIF",
    "tracin-cosine": "TracIn-cosine",
    "tracin-margin": "`tracin-margin`",
    "path": "edges on short head–tail paths (baseline)",
    "random": "random order (baseline)",
    "degree": "degree (baseline)",
    "neighbour": "`neighbour` (4 random triples at the head or tail)",
    "far": "`far` (4 random triples touching neither: the floor)",
}
PAGE = ROOT / "docs" / "demo.md"


def f(x: float, d: int = 2) -> str:
    return f"{x:.{d}f}".replace("-", "−")


def ci(pair: list | None, d: int = 2) -> str:
    return f"({f(pair[0], d)} to {f(pair[1], d)})" if pair else ""


def mean_range(sp: dict, d: int = 2) -> str:
    return f"{f(sp['mean'], d)} ({f(sp['min'], d)}–{f(sp['max'], d)})"


def seeds_title(res: dict) -> str:
    ss = list(res["seeds"])
    return (
        f"seeds {ss[0]}–{ss[-1]}"
        if ss == [str(i) for i in range(int(ss[0]), int(ss[-1]) + 1)]
        else "seeds " + ", ".join(ss)
    )


def figures_block(res: dict) -> str:
    """The demo page's figures table: seed 0 and the spread over the seeds."""
    s0, acr, n = res["seeds"]["0"], res["across_seeds"], len(res["seeds"])
    t, nec, st = s0["test"], s0["necessity"], s0["stage_seconds"]
    lines = [
        f"Seed 0 is `./run demo` (commit {s0['commit']}); the last column runs the same demo at {seeds_title(res)} "
        f"(each a new graph, model, necessity facts and random draws): mean (range) over the {n} runs. "
        f"{res['machine']}; {res['load']} "
        f"(`{res['command']}`, read from `benchmarks/results/demo.json`).",
        "",
        f"| figure | seed 0 | {seeds_title(res)} |",
        "|---|---|---|",
        f"| test MRR, `treats` edges, tail side | {f(t['mrr_tail'], 3)} (Hits@1 {f(t['hits@1_tail'])}, "
        f"Hits@10 {f(t['hits@10_tail'])}) | {mean_range(acr['test_mrr_tail'], 3)} |",
        f"| test MRR, both sides / head side | {f(t['mrr_both'], 3)} / {f(t['mrr_head'], 3)} | |",
    ]
    for m in ("tracin-margin-path", "tracin-path", "path"):
        lines.append(
            f"| recovery MRR, {NAMES[m]} | {f(s0['recovery'][m]['mrr'], 3)} | {mean_range(acr['recovery_mrr'][m], 3)} |"
        )
    for a in ARMS:
        lines.append(
            f"| necessity ΔH@1, {NAMES[a]}, k = {s0['k']} | {f(nec[a]['delta_hits@1'])}, flips "
            f"{nec[a]['flipped']} of {s0['n_facts']} | {mean_range(acr['necessity_delta_hits@1'][a])} |"
        )
    for a in ("neighbour", "far"):
        ld = acr["lead_over"][DEFAULT][a]
        lines.append(
            f"| the default's lead over `{a}`, paired by fact | {f(ld['per_seed']['0'])} | "
            f"{f(ld['mean'])} {ci(ld['ci95'])} |"
        )
    lines.append(
        f"| wall time, `./run demo` | {s0['seconds']:.0f} s (train {st['train']:.0f} s, explain {st['explain']:.0f} s, "
        f"grade {st['grade']:.0f} s, necessity {st['necessity test']:.0f} s) | |"
    )
    return "\n".join(lines)


def recovery_block(res: dict) -> str:
    """Seed 0's recovery table, every ranking, with each MRR's spread over the seeds."""
    s0 = res["seeds"]["0"]
    spread_mrr = {m: spread([r["recovery"][m]["mrr"] for r in res["seeds"].values()]) for m in s0["recovery"]}
    lines = [
        f"| ranking | MRR | MAP | Hits@1 | Hits@3 | Hits@10 | recall@10 | MRR, {seeds_title(res)} |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in sorted(s0["recovery"], key=lambda m: (m in ("path", "random", "degree"), -s0["recovery"][m]["mrr"])):
        r = s0["recovery"][m]
        cells = " | ".join(f(r[q], 3) for q in ("mrr", "map", "hits@1", "hits@3", "hits@10", "recall@10"))
        lines.append(f"| {NAMES.get(m, m)} | {cells} | {mean_range(spread_mrr[m], 3)} |")
    lines.append(f"| TracIn, `--loss score` | {f(s0['recovery_mrr_score_loss'], 3)} | | | | | | |")
    lines += [
        "",
        f"Seed 0: {s0['recovery_candidates']:.0f} candidates per test edge on average, "
        f"{100 * s0['recovery_coverage']:.1f} % of the mechanism edges among them.",
    ]
    return "\n".join(lines)


def necessity_block(res: dict) -> str:
    """Seed 0's necessity table, then every seed's ΔH@1 per arm and the default's paired leads."""
    s0, acr = res["seeds"]["0"], res["across_seeds"]
    lines = [
        f"| arm (k = {s0['k']}, {s0['n_facts']} facts, seed 0) | facts flipped | ΔH@1 (95 % CI) | above far (95 % CI) "
        "| ΔMRR | triples removed (at each fact) |",
        "|---|---|---|---|---|---|",
    ]
    for a in ARMS:
        x = s0["necessity"][a]
        above = f"{f(x['above_far_hits@1'])} {ci(x['above_far_hits@1_ci95'])}" if a != "far" else "—"
        lines.append(
            f"| {NAMES.get(a, a)} | {x['flipped']} | {f(x['delta_hits@1'])} {ci(x['delta_hits@1_ci95'])} | {above} | "
            f"{f(x['delta_mrr'], 3)} | {x['triples_removed']} ({x['removed_at_fact']:.1f}) |"
        )
    lines += [
        "",
        "| seed | facts | ΔH@1 default | path | neighbour | far | default − neighbour | default − far |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s, r in res["seeds"].items():
        cells = " | ".join(f(r["necessity"][a]["delta_hits@1"]) for a in ARMS)
        leads = " | ".join(f(acr["lead_over"][DEFAULT][a]["per_seed"][s]) for a in ("neighbour", "far"))
        lines.append(f"| {s} | {r['n_facts']} | {cells} | {leads} |")
    means = " | ".join(f(acr["necessity_delta_hits@1"][a]["mean"]) for a in ARMS)
    leads = " | ".join(
        f"{f(acr['lead_over'][DEFAULT][a]['mean'])} {ci(acr['lead_over'][DEFAULT][a]['ci95'])}"
        for a in ("neighbour", "far")
    )
    lines.append(f"| mean | | {means} | {leads} |")
    return "\n".join(lines)


def methods_block(res: dict) -> str:
    """Every necessity arm over the seeds: its ΔH@1, its paired lead over the random arms, what it removes, and
    its recovery MRR."""
    acr, t = res["across_seeds"], seeds_title(res)
    lines = [
        f"| arm (k = 4, the same facts) | ΔH@1, {t}: mean (range) | above `neighbour`, paired (95 % CI) "
        f"| above `far`, paired (95 % CI) | `treats` edges among its removals | recovery MRR, {t} |",
        "|---|---|---|---|---|---|",
    ]
    leads = acr["lead_over"]
    for m in [*sorted(leads, key=lambda m: -leads[m]["neighbour"]["mean"]), "neighbour", "far"]:
        above = " | ".join(
            f"{f(leads[m][a]['mean'])} {ci(leads[m][a]['ci95'])}" if m in leads else "" for a in ("neighbour", "far")
        )
        rec = mean_range(acr["recovery_mrr"][m], 3) if m in acr["recovery_mrr"] else "not graded"
        share = f"{100 * acr['treats_share'][m]['mean']:.0f} %"
        lines.append(
            f"| {NAMES.get(m, f'`{m}`')} | {mean_range(acr['necessity_delta_hits@1'][m])} | {above} | {share} | "
            f"{rec if m in leads else ''} |"
        )
    return "\n".join(lines)


def page_blocks(res: dict) -> dict[str, str]:
    """The demo page's generated blocks, by marker name (``<!-- NAME -->`` … ``<!-- /NAME -->``)."""
    return {
        "demo-figures": figures_block(res),
        "demo-recovery": recovery_block(res),
        "demo-necessity": necessity_block(res),
        "demo-methods": methods_block(res),
    }


def load_text(loads: list) -> str:
    """The 1-minute load average at the demos' starts, as "a–b"."""
    if any(x is None for x in loads):
        return "load not recorded"
    return f"load average {min(loads):.1f}–{max(loads):.1f} at the demos' starts"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True, help="one demo folder per seed goes here (kept: a rerun reads them)")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--jobs", type=int, default=2, help="demos at once (each uses one torch thread)")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "results" / "demo.json"))
    ap.add_argument(
        "--methods", default="", help="more explanation methods, each one more necessity arm on every seed's facts"
    )
    ap.add_argument("--load", help="what else ran on the machine, when the load averages were not recorded")
    ap.add_argument("--page", action="store_true", help="also rewrite docs/demo.md's generated blocks")
    a = ap.parse_args()
    work, seeds = Path(a.work), [int(s) for s in a.seeds.split(",")]
    work.mkdir(parents=True, exist_ok=True)
    run_jobs(demo_jobs(work, seeds), a.jobs)
    run_jobs(method_jobs(work, seeds, [m for m in a.methods.split(",") if m]), a.jobs)
    per_seed = {str(s): one_seed(work / f"seed{s}") for s in seeds}
    commits = sorted({r["commit"] for r in per_seed.values()})
    res = {
        "about": "The demo (tracegraph demo) at several seeds: seed 0 is ./run demo's, the others its spread.",
        "command": f"python benchmarks/demo_replicates.py --seeds {a.seeds} --jobs {a.jobs}"
        + (f" --methods {a.methods}" if a.methods else ""),
        "commit": ", ".join(commits),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, {a.jobs} demos at once, one torch thread each",
        "load": a.load or load_text([r["load_avg_1m_at_start"] for r in per_seed.values()]),
        "seeds": per_seed,
        "across_seeds": across(per_seed),
    }
    Path(a.results).write_text(json.dumps(res, indent=1) + "\n")
    if a.page:
        write_blocks(PAGE, page_blocks(res))
    print(json.dumps({"seeds": seeds, **res["across_seeds"]["lead_over"][DEFAULT]["neighbour"]}))


if __name__ == "__main__":
    main()
