"""Peak memory and time per GT-SSL pretraining epoch, with and without gradient checkpointing.

Default: 1,000 synthetic trees of ~300 nodes (cap 340), batch 32, 1 intra-op thread, hidden 64, 3 interactions, 20 RBFs.
Each setting runs in its own process, so the CPU figure (peak RSS, which cannot be reset) is
that setting's own. Prints one JSON line per setting; the checkpointing line carries the
side-by-side ratios (memory and time relative to no checkpointing).

    python benchmarks/trees_memory.py [--trees 1000] [--nodes 300] [--epochs 1] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def activation_bytes(data, cfg, checkpointing: bool, batches: int = 5) -> int:
    """Largest total of tensors autograd keeps for backward, over a few batches.

    On CPU the process RSS is dominated by the interpreter, torch and the data set and cannot be
    reset between settings; what checkpointing changes is this number (CUDA: the allocator peak).
    """
    import torch
    from torch_geometric.loader import DataLoader

    from tracegraph.trees.gtssl import GTSSL
    from tracegraph.trees.train import make_encoder

    torch.manual_seed(0)
    model = GTSSL(make_encoder(cfg.encoder, data)).train()
    model.encoder.gradient_checkpointing = checkpointing
    best = 0
    for k, batch in enumerate(DataLoader(data, batch_size=cfg.batch_size)):
        if k == batches:
            break
        seen: dict[int, int] = {}

        def pack(t):
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            ls = model.losses(batch)
        best = max(best, sum(seen.values()))
        (ls["order"] + ls["growth"]).backward()
    return best


def worker(args) -> dict:
    import torch

    from tracegraph.trees.train import DataConfig, TrainConfig, load_trees, pretrain

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    # --trees counts trees in total; synthetic generation takes a per-class count (two classes)
    dc = DataConfig(None, args.trees // 2, args.nodes, seed=0, cache_dir=args.cache_dir)
    data = load_trees(dc)
    build = time.perf_counter() - t0
    cfg = TrainConfig(
        data=dc,
        encoder=dict(hidden_channels=64, num_interactions=3, num_rbf=20, cutoff=None),
        epochs=args.epochs,
        batch_size=args.batch_size,
        device=args.device,
        precision=args.precision,
        gradient_checkpointing=bool(args.checkpointing),
        seed=0,
    )
    with tempfile.TemporaryDirectory() as out:
        hist = pretrain(cfg, out, data=data)
    saved = activation_bytes(data, cfg, bool(args.checkpointing))
    return {
        "benchmark": "trees_memory",
        "gradient_checkpointing": bool(args.checkpointing),
        "trees": len(data),
        "nodes_mean": sum(d.num_nodes for d in data) / len(data),
        "paths_mean": sum(d.paths.shape[1] for d in data) / len(data),
        "epoch_seconds": min(h["seconds"] for h in hist),
        "peak_memory_bytes": max(h["peak_memory_bytes"] for h in hist),
        "peak_memory_kind": "cuda allocator" if "cuda" in args.device else "process RSS",
        "activation_bytes_per_batch": saved,
        "data_build_seconds": build,
        "batch_size": args.batch_size,
        "precision": args.precision,
        "device": args.device,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "loss_last": hist[-1]["loss"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=340, help="growth cap; some trees stop early: mean ~300")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads; 2 ran 4-7x slower on the busy shared box")
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--checkpointing", type=int, default=None, help="internal: run one setting in this process")
    args = ap.parse_args()
    if args.checkpointing is not None:
        print(json.dumps(worker(args)))
        return
    results = []
    for ck in (0, 1):
        cmd = [sys.executable, __file__, *sys.argv[1:], "--checkpointing", str(ck)]
        out = subprocess.run(
            cmd, check=True, capture_output=True, text=True, env={**os.environ, "TRACEGRAPH_PROGRESS": "0"}
        ).stdout
        res = json.loads(out.strip().splitlines()[-1])
        if results:
            base = results[0]
            res["memory_ratio_vs_no_checkpointing"] = res["peak_memory_bytes"] / base["peak_memory_bytes"]
            res["time_ratio_vs_no_checkpointing"] = res["epoch_seconds"] / base["epoch_seconds"]
            res["activation_ratio_vs_no_checkpointing"] = (
                res["activation_bytes_per_batch"] / base["activation_bytes_per_batch"]
            )
        results.append(res)
        print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
