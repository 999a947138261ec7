"""Training-graph filtering speed on a generated 10M-edge power-law graph.

Prints one JSON line per setting (figure, target, ratio to target) on stdout, per-triple
details on stderr:

* ``build``: GraphIndex.build from the id array (target <= 30 s);
* ``cache_write`` / ``cache_read``: first and second ``load_or_build`` (.npz next to the
  "training file", here the ids saved as .npy so the sha256 key covers real bytes);
* ``2hop`` and ``2hop_path3``: per-test-triple time, n_hops=2, min_degree=2, without and with
  path filtering (L=3), over held-out random training triples (target <= 1 s each);
* ``*_hubs``: the same for triples joining the top hubs pairwise (the worst case, reported
  honestly: their 2-hop sets hold most of the graph).

The graph is a Chung–Lu graph: endpoints drawn with probability ∝ (rank+1)^-alpha, node ids
shuffled, so degrees follow a power law with hubs (alpha=0.6: tail exponent ~2.7).
Test triples are random training triples held out before the build, as a user would pick them,
so they are biased towards hub endpoints exactly as real test edges are.

    python benchmarks/filter_speed.py [--edges 10000000 --nodes 1000000 --triples 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tracegraph.kg.explain.neighborhood import FilterOptions, GraphIndex
from tracegraph.runtime.memory import peak_rss_bytes


def power_law_triples(n_edges: int, n_nodes: int, alpha: float, n_rel: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = np.arange(1, n_nodes + 1, dtype=np.float64) ** -alpha
    cdf = np.cumsum(w)
    cdf /= cdf[-1]
    relabel = rng.permutation(n_nodes)  # hubs are not the low ids
    ends = relabel[np.searchsorted(cdf, rng.random(2 * n_edges), side="right").clip(max=n_nodes - 1)]
    rel = rng.integers(0, n_rel, n_edges)
    return np.stack([ends[:n_edges], rel, ends[n_edges:]], axis=1).astype(np.int64)


def emit(setting: str, value: float, target: float, unit: str = "s", **extra) -> None:
    print(
        json.dumps(
            {
                "benchmark": "filter_speed",
                "setting": setting,
                "value": round(value, 4),
                "unit": unit,
                "target": target,
                "ratio_to_target": round(value / target, 4),
                "peak_rss_mb": round(peak_rss_bytes() / 2**20, 1),
                **extra,
            }
        ),
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edges", type=int, default=10_000_000)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--alpha", type=float, default=0.6)
    ap.add_argument("--relations", type=int, default=50)
    ap.add_argument("--triples", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hub-triples", type=int, default=5, help="Extra worst-case triples between top hubs.")
    ap.add_argument("--skip-cache", action="store_true", help="Do not time the .npz cache.")
    args = ap.parse_args()

    t0 = time.perf_counter()
    ids = power_law_triples(args.edges, args.nodes, args.alpha, args.relations, args.seed)
    rng = np.random.default_rng(args.seed + 1)
    held = rng.choice(len(ids), args.triples, replace=False)
    tests = ids[held]
    train = np.delete(ids, held, axis=0)
    del ids
    gen_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    index = GraphIndex.build(train, args.nodes)
    build_s = time.perf_counter() - t0
    deg = index.degree
    graph = {
        "edges": len(train),
        "nodes": args.nodes,
        "alpha": args.alpha,
        "generate_s": round(gen_s, 2),
        "max_degree": int(deg.max()),
        "median_degree": float(np.median(deg)),
        "mean_degree": round(float(deg.mean()), 2),
    }
    emit("build", build_s, 30.0, graph=graph)

    if not args.skip_cache:
        with tempfile.TemporaryDirectory() as d:
            fake_train = Path(d) / "train.npy"
            np.save(fake_train, train)
            t0 = time.perf_counter()
            GraphIndex.load_or_build(fake_train, train, args.nodes)
            write_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            again = GraphIndex.load_or_build(fake_train, train, args.nodes)
            read_s = time.perf_counter() - t0
            assert again.loaded_from is not None
            size_mb = again.loaded_from.stat().st_size / 2**20
        emit("cache_write", write_s, 30.0, note="hash + build + save", cache_mb=round(size_mb, 1))
        emit("cache_read", read_s, 30.0, note="hash + np.load", cache_mb=round(size_mb, 1))

    # Worst case, reported separately: test triples joining the biggest hubs, whose 2-hop
    # neighbourhoods cover most of the graph (time then grows with the edges inside the set).
    hubs = np.argsort(-deg)[: 2 * args.hub_triples].reshape(-1, 2)
    hub_tests = np.stack([hubs[:, 0], np.zeros(len(hubs), np.int64), hubs[:, 1]], axis=1)
    settings = [
        ("2hop", FilterOptions(n_hops=2, min_degree=2), tests),
        ("2hop_path3", FilterOptions(n_hops=2, min_degree=2, path_filtering=True, max_path_length=3), tests),
    ]
    if args.hub_triples:
        settings += [(name + "_hubs", opts, hub_tests) for name, opts, _ in settings]
    for name, opts, triples in settings:
        times, hop_nodes, kept = [], [], []
        for h, _, t in triples.tolist():
            res = index.filter(h, t, opts)
            times.append(res.seconds)
            hop_nodes.append(res.hop_nodes)
            kept.append(res.edges_kept)
            print(
                f"{name} h={h} (deg {deg[h]}) t={t} (deg {deg[t]}): {res.hop_nodes} nodes, "
                f"{res.edges_kept} edges kept, {res.seconds:.3f} s",
                file=sys.stderr,
            )
        times = np.array(times)
        emit(
            name,
            float(times.mean()),
            1.0,
            unit="s/triple",
            max_s=round(float(times.max()), 4),
            median_s=round(float(np.median(times)), 4),
            triples=len(times),
            median_hop_nodes=int(np.median(hop_nodes)),
            max_hop_nodes=int(max(hop_nodes)),
            median_edges_kept=int(np.median(kept)),
            max_edges_kept=int(max(kept)),
        )


if __name__ == "__main__":
    main()
