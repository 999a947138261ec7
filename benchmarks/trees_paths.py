"""Paths per tree vs nodes: linear on trees, explosive on kNN graphs of the same points.

For each size, a synthetic tree (bounded degree) and the k-nearest-neighbour graph of the same
points (what the earlier implementation built from superpixels). One JSON line per size with
the counts, paths per node, enumeration time, and the kNN/tree ratio.

    python benchmarks/trees_paths.py [--sizes 100 300 1000 3000 10000] [--k 8]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch


def knn_edges(pos: np.ndarray, k: int) -> torch.Tensor:
    from scipy.spatial import cKDTree

    _, nb = cKDTree(pos).query(pos, k=k + 1)
    src = np.repeat(np.arange(len(pos)), k)
    return torch.from_numpy(np.stack([src, nb[:, 1:].ravel()]).astype(np.int64))


def main() -> None:
    from tracegraph.trees.synthetic import synthetic_tree
    from tracegraph.trees.paths import enumerate_paths

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000, 3000, 10000])
    ap.add_argument("--k", type=int, default=8)
    args = ap.parse_args()
    for n in args.sizes:
        rng = np.random.default_rng(n)
        t = synthetic_tree(0, rng, max_nodes=n, max_depth=40)
        while t.num_nodes < 0.9 * n:  # a growth that died out early: draw again
            t = synthetic_tree(0, rng, max_nodes=n, max_depth=40)
        child = np.arange(1, t.num_nodes)
        ei = torch.from_numpy(np.stack([child, t.parent[1:]]).astype(np.int64))
        t0 = time.perf_counter()
        tree_paths = enumerate_paths(ei, t.num_nodes).shape[1]
        tree_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        knn_paths = enumerate_paths(knn_edges(t.pos, args.k), t.num_nodes).shape[1]
        knn_s = time.perf_counter() - t0
        print(
            json.dumps(
                {
                    "benchmark": "trees_paths",
                    "nodes": t.num_nodes,
                    "tree_paths": tree_paths,
                    "tree_paths_per_node": tree_paths / t.num_nodes,
                    "tree_seconds": tree_s,
                    f"knn{args.k}_paths": knn_paths,
                    f"knn{args.k}_paths_per_node": knn_paths / t.num_nodes,
                    "knn_seconds": knn_s,
                    "knn_to_tree_ratio": knn_paths / max(tree_paths, 1),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
