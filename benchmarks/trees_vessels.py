"""Whole vessel masks at fundus size -> trees -> one GT-SSL pretraining epoch over 1,000 trees.

Synthetic retina-like masks (3504×2336 by default) go through the real pipeline: skeleton, the
largest component as a tree rooted near the optic disc, arc-length resampling at
--node-spacing, capped at --max-nodes. Skeletonising a full-size mask takes seconds, so
--images distinct masks are made and their trees repeated up to --trees for the epoch
(epoch time depends on tree sizes and path counts, which the copies share with the originals).
On a shared machine the load moves absolute times several-fold, so the script also times the
trees_memory.py baseline (1,000 synthetic trees of ~300 nodes) before and after, in the same
process, and prints the ratio. Prints one JSON line.

    python benchmarks/trees_vessels.py [--images 8] [--trees 1000] [--node-spacing 20] [--max-nodes 500]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=8)
    ap.add_argument("--trees", type=int, default=1000)
    ap.add_argument("--height", type=int, default=2336)
    ap.add_argument("--width", type=int, default=3504)
    ap.add_argument("--node-spacing", type=float, default=20.0)
    ap.add_argument("--max-nodes", type=int, default=500)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--no-baseline", action="store_true", help="skip the synthetic baseline epochs")
    args = ap.parse_args()

    import numpy as np
    import torch

    from tracegraph.trees.cache import build_dataset
    from tracegraph.trees.synthetic import synthetic_trees
    from tracegraph.trees.inputs import DataConfig
    from tracegraph.trees.resample import fit_to_budget
    from tracegraph.trees.skeleton import retina_like_mask, trees_from_mask
    from tracegraph.trees.train import TrainConfig, pretrain

    torch.set_num_threads(args.threads)
    trees, to_tree, pixels = [], [], []
    for k in range(args.images):
        mask = retina_like_mask((args.height, args.width), np.random.default_rng(k))
        t0 = time.perf_counter()
        (t,) = trees_from_mask(mask, 1, root="disc")
        t = fit_to_budget(t, args.max_nodes, args.node_spacing)
        to_tree.append(time.perf_counter() - t0)
        pixels.append(t.meta["skeleton_pixels"])
        trees.append(t)
    data = build_dataset([trees[i % len(trees)] for i in range(args.trees)])
    cfg = TrainConfig(
        data=DataConfig(None, 0, args.max_nodes),
        epochs=1,
        batch_size=args.batch_size,
        encoder=dict(hidden_channels=64, num_interactions=3, num_rbf=20, cutoff=None),
        device=args.device,
        seed=0,
    )

    def epoch(d):
        with tempfile.TemporaryDirectory() as out:
            return pretrain(cfg, out, data=d)[-1]

    baseline = [] if args.no_baseline else [build_dataset(synthetic_trees(args.trees // 2, 0, max_nodes=340))]
    before = [epoch(b)["seconds"] for b in baseline]
    hist = [epoch(data)]
    after = [epoch(b)["seconds"] for b in baseline]
    base = float(np.mean(before + after)) if baseline else None
    nodes = np.array([d.num_nodes for d in data])
    print(
        json.dumps(
            {
                "benchmark": "trees_vessels",
                "image_shape": [args.height, args.width],
                "distinct_images": args.images,
                "mask_to_tree_seconds_mean": float(np.mean(to_tree)),
                "skeleton_pixels_mean": float(np.mean(pixels)),
                "node_spacing_used_mean": float(np.mean([t.meta.get("node_spacing", 0.0) for t in trees])),
                "trees": len(data),
                "nodes_mean": float(nodes.mean()),
                "nodes_max": int(nodes.max()),
                "paths_per_node": float(sum(d.paths.shape[1] for d in data) / nodes.sum()),
                "epoch_seconds": hist[-1]["seconds"],
                "peak_memory_bytes": hist[-1]["peak_memory_bytes"],
                "baseline_epoch_seconds": before + after,
                "ratio_to_baseline": hist[-1]["seconds"] / base if base else None,
                "batch_size": args.batch_size,
                "threads": torch.get_num_threads(),
                "cpu_count": os.cpu_count(),
                "device": args.device,
            }
        )
    )


if __name__ == "__main__":
    main()
