"""Necessity of explanations on UMLS (bundled) or any train/valid/test folder such as
WN18RR (`tracegraph data get wn18rr -o DIR`): train ConvE with the README's defaults, then
`fidelity necessity` with the methods asked for, and print one JSON line per arm plus one with the targets
(the chosen method's — the first of --methods — ΔH@1 >= 0.3 and >= 2x the neighbour arm's; far within 0.05 of 0) and the seconds.

Usage: python benchmarks/necessity.py --out DIR [--data DIR] [--model small|default] [--epochs 100] [--n 100] [--k 4]
       [--methods tracin-margin-path,tracin-margin,tracin,local-retrain,path,...] [--device cuda]
       [--seeds 0 | --replicates 0,1,2] [--sides auto|tail|head|both]

Two ways to see the spread over training seeds:
- `--seeds 0,1,2` (transfer): explain the seed-0 run once, then make the same removals in retrains
  with seeds 1, 2 and compare with full retrains of those seeds (`fidelity necessity --seeds`) —
  do the explanations of one run hold for runs it never saw?
- `--replicates 0,1,2` (independent replicates): the whole test per seed — train a run with that
  seed (DIR/seed{s}/run), pick the facts *it* ranks first, explain them with *its* checkpoints,
  retrain it with the same seed minus the removals. Each replicate is the protocol for one
  run; the replicates show how much that figure varies between runs.

`--model small` (d = 64 as 8x8, 16 channels, a checkpoint every 5 epochs) is the model of the
figures in README / docs/demo.md (2 shared CPU cores); `default` is ConvE's defaults (d = 200,
a checkpoint every epoch), for a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch

from tracegraph.kg.explain.local_retrain import LocalRetrainOptions
from tracegraph.kg.explain.necessity import NecessityConfig, run_necessity
from tracegraph.kg.model.train import TrainConfig, train

UMLS = Path(__file__).resolve().parents[1] / "tracegraph" / "kg" / "data" / "datasets" / "umls"


def emit(**kw):
    gpu = f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    kw.update(machine=f"{platform.machine()}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}{gpu}")
    print(json.dumps(kw), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--data", default=str(UMLS), help="folder with train.txt, valid.txt, test.txt (default: bundled UMLS)"
    )
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--model", choices=["small", "default"], default="small")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--k", default="4")
    ap.add_argument(
        "--methods",
        default="tracin-margin-path,tracin-margin",
        help="arms; the first is the method the targets are checked for (default: explain's default)",
    )
    ap.add_argument("--seeds", default="0", help="transfer: retrain the seed-0 run's removals with these seeds")
    ap.add_argument(
        "--replicates", default=None, help="independent replicates: train, explain, remove, retrain per seed"
    )
    ap.add_argument("--device", default="cpu")
    ap.add_argument(
        "--sides", default="auto", help="which answer a fact is: tail, head, both (auto: both, the model is reciprocal)"
    )
    ap.add_argument(
        "--checkpoint-every", type=int, default=None, help="epochs between checkpoints (small: 5, default: 1)"
    )
    ap.add_argument("--loss", default="logit", help="TracIn loss convention (score, logit, train-loss)")
    ap.add_argument("--checkpoints", default="all", help="all, or every:N (every N-th saved epoch)")
    ap.add_argument("--local-candidates", type=int, default=8)
    ap.add_argument("--local-steps", type=int, default=60)
    a = ap.parse_args()
    if a.replicates is None:
        replicate(a, Path(a.out), seed=None)
        return
    seeds = [int(x) for x in a.replicates.split(",")]
    per = {s: replicate(a, Path(a.out) / f"seed{s}", seed=s) for s in seeds}
    k = max(int(x) for x in a.k.split(","))
    arms = list(next(iter(per.values()))["summary"])
    mean = lambda arm, key: float(sum(per[s]["summary"][arm][key]["mean"] for s in seeds) / len(seeds))
    for arm in arms:
        first = per[seeds[0]]["summary"][arm]
        names = {
            "above_far_hits@1": "above_far_mean",
            "above_neighbour_hits@1": "above_neighbour_mean",
            "delta_hits@1_tail": "delta_hits1_tail_mean",
            "delta_hits@1_head": "delta_hits1_head_mean",
        }
        extra = {out: mean(arm, key) for key, out in names.items() if key in first}
        emit(
            figure="necessity_replicates",
            arm=arm,
            seeds=seeds,
            k=k,
            delta_hits1=[per[s]["summary"][arm]["delta_hits@1"]["mean"] for s in seeds],
            delta_hits1_mean=mean(arm, "delta_hits@1"),
            delta_mrr_mean=mean(arm, "delta_mrr"),
            **extra,
        )
    chosen = a.methods.split(",")[0]
    d, nb, far = (mean(f"{x}@{k}", "delta_hits@1") for x in (chosen, "neighbour", "far"))
    emit(
        figure="necessity_replicates_targets",
        method=chosen,
        k=k,
        seeds=seeds,
        delta_hits1_mean=d,
        neighbour=nb,
        far=far,
        target_met=bool(d >= 0.3 and d >= 2 * nb and abs(far) <= 0.05),
    )


def replicate(a, out: Path, seed: int | None) -> dict:
    """One necessity test: train (unless DIR/run holds a finished run), explain, remove, retrain."""
    run = out / "run"
    data = Path(a.data)
    name = data.name.lower()
    t0 = time.perf_counter()
    if not (run / "final_model.pt").is_file():
        small = a.model == "small"
        train(
            TrainConfig(
                train=str(data / "train.txt"),
                valid=str(data / "valid.txt"),
                test=str(data / "test.txt"),
                output_dir=str(run),
                epochs=a.epochs,
                device=a.device,
                eval_every=25,
                checkpoint_every=a.checkpoint_every or (5 if small else 1),
                **({} if seed is None else {"seed": seed}),
                model=dict(embedding_dim=64, embedding_height=8, embedding_width=8, output_channels=16)
                if small
                else {},
            )
        )
    train_s = time.perf_counter() - t0
    ckpts = None
    if a.checkpoints.startswith("every:"):
        step = int(a.checkpoints.split(":")[1])
        found = sorted((run / "checkpoints").glob("epoch_*.pt"))
        ckpts = [str(p) for p in found[step - 1 :: step]]
    ks = [int(x) for x in a.k.split(",")]
    cfg = NecessityConfig(
        model_dir=str(run),
        train=str(data / "train.txt"),
        output_dir=str(out / "necessity"),
        n=a.n,
        ks=ks,
        methods=a.methods.split(","),
        seeds=None if seed is not None else [int(s) for s in a.seeds.split(",")],
        checkpoints=ckpts,
        device=a.device,
        loss=a.loss,
        sides=a.sides,
        local=LocalRetrainOptions(candidates=a.local_candidates, steps=a.local_steps, k=max(ks)),
    )
    res = run_necessity(cfg)
    tag = {} if seed is None else {"replicate_seed": seed}
    for arm, e in res["summary"].items():
        sides = {
            f"delta_hits1_{x}": e[f"delta_hits@1_{x}"]["mean"] for x in ("tail", "head") if f"delta_hits@1_{x}" in e
        }
        emit(
            figure=f"necessity_{name}",
            arm=arm,
            delta_hits1=e["delta_hits@1"],
            delta_mrr=e["delta_mrr"]["mean"],
            hits1_after=e["hits@1"]["mean"],
            removed=e["triples_removed"],
            **sides,
            **tag,
        )
    k = max(ks)
    s = res["summary"]
    nb, far = s[f"neighbour@{k}"]["delta_hits@1"]["mean"], s[f"far@{k}"]["delta_hits@1"]["mean"]
    # the targets are the chosen method's (the first of --methods), not the best of several
    chosen = cfg.methods[0]
    best = max(cfg.methods, key=lambda m: s[f"{m}@{k}"]["delta_hits@1"]["mean"])
    d = s[f"{chosen}@{k}"]["delta_hits@1"]["mean"]
    emit(
        figure=f"necessity_{name}_targets",
        n_facts=res["n_facts"],
        head_side_facts=sum(x == "head" for x in res["fact_sides"]),
        k=k,
        method=chosen,
        delta_hits1=d,
        most_necessary=best,
        neighbour=nb,
        far=far,
        ratio_to_neighbour=d / nb if nb > 0 else None,
        target_met=bool(d >= 0.3 and d >= 2 * nb and abs(far) <= 0.05),
        train_seconds=train_s,
        explain_seconds=res["explain_seconds"],
        necessity_seconds=res["seconds"],
        retrain_seconds=[v["seconds"] for sd in res["seeds"].values() for v in sd.values()],
        **tag,
    )
    return res


if __name__ == "__main__":
    main()
