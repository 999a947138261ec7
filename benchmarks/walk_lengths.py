"""Head–tail walk lengths (the shells of tracin-path / tracin-margin-path and the path baseline):
ranking.WalkLengths (scipy BFS, one graph for every test triple when explain ranks every training
triple) against a pure-Python BFS reference, the implementation it replaced, on a random graph
the size of FB15k-237's training set (14,541 entities, 272,115 edges).

Prints one JSON line per setting: seconds per (head, tail) pair and the ratio python / scipy. The
results of both are checked equal first.

    python benchmarks/walk_lengths.py [--nodes 14541 --edges 272115 --pairs 20]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections import defaultdict

import numpy as np

from tracegraph.kg.explain.ranking import WalkLengths, path_lengths


def python_bfs_walks(edges: np.ndarray, head: int, tail: int) -> np.ndarray:
    """The reference: adjacency sets and two breadth-first searches in Python."""
    nbrs: dict[int, set[int]] = defaultdict(set)
    for u, v in edges.tolist():
        if u != v:
            nbrs[u].add(v)
            nbrs[v].add(u)

    def bfs(src: int) -> dict[int, int]:
        dist, frontier = {src: 0}, [src]
        while frontier:
            nxt = []
            for x in frontier:
                for y in nbrs[x]:
                    if y not in dist:
                        dist[y] = dist[x] + 1
                        nxt.append(y)
            frontier = nxt
        return dist

    dh, dt = bfs(head), bfs(tail)
    d = lambda dist, x: dist.get(x, float("inf"))
    return np.array([min(d(dh, u) + 1 + d(dt, v), d(dh, v) + 1 + d(dt, u)) for u, v in edges.tolist()])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=14541)
    ap.add_argument("--edges", type=int, default=272115)
    ap.add_argument("--pairs", type=int, default=20)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    edges = rng.integers(0, a.nodes, size=(a.edges, 2))
    pairs = edges[rng.choice(a.edges, size=a.pairs, replace=False)]
    machine = f"{platform.machine()}, {os.cpu_count()} cores"

    t0 = time.perf_counter()
    ref = [python_bfs_walks(edges, int(h), int(t)) for h, t in pairs]
    python_s = (time.perf_counter() - t0) / a.pairs
    t0 = time.perf_counter()
    one = [path_lengths(edges, int(h), int(t)) for h, t in pairs]  # a graph per pair (filtered subgraphs)
    per_pair_s = (time.perf_counter() - t0) / a.pairs
    t0 = time.perf_counter()
    walks = WalkLengths(edges)
    shared = [walks(int(h), int(t)) for h, t in pairs]  # one graph (explain without a filter)
    shared_s = (time.perf_counter() - t0) / a.pairs
    assert all(np.array_equal(x, y) and np.array_equal(x, z) for x, y, z in zip(ref, one, shared))
    for name, s in (("walk_lengths_graph_per_pair", per_pair_s), ("walk_lengths_shared_graph", shared_s)):
        print(
            json.dumps(
                {
                    "figure": name,
                    "seconds_per_pair": round(s, 4),
                    "python_bfs_seconds_per_pair": round(python_s, 4),
                    "ratio_python_over_scipy": round(python_s / s, 1),
                    "edges": a.edges,
                    "pairs": a.pairs,
                    "machine": machine,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
