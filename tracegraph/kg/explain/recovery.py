"""Ground-truth recovery: does an explanation method rank a prediction's known mechanism edges first?

For a test triple with known mechanism edges (``mechanisms.tsv`` of
the synthetic graph, or your own curated paths), the *candidates* are the training triples of
its filtered subgraph (docs/filtering.md), ranked by TracIn influence, highest first. Relevant =
the mechanism edges of that test triple, matched exactly as stored (head, relation, tail).
Per triple: RR = 1 / rank of the first relevant edge, AP = average precision over the relevant
edges among the candidates, Hits@k = 1 if a relevant edge is in the top k, Recall@10 = share of
the relevant candidates in the top 10. The same figures for baselines on the *same* candidates:

* ``random``: a random order (mean over ``n_random`` permutations, fixed seed);
* ``degree``: sum of the endpoints' degrees in the whole training graph, high first;
* ``path``: length of the shortest head–tail walk through the edge inside the candidate
  subgraph, short first, then degree.

Ties (rare for TracIn, common for the baselines) are broken at random and averaged over the
same permutations, so every figure is an expected value, never the luck of the file order.

The driver that loads a run and writes ``fidelity.json`` is kg/explain/fidelity.py.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path
from typing import Callable

import numpy as np

from tracegraph.errors import DataError, TracegraphError, require_file
from tracegraph.kg.explain.ranking import (
    HITS_K,
    degrees,
    expected_metrics,
    method_keys,
    random_rr_expectation,
)


METRICS = ("mrr", "map", *(f"hits@{k}" for k in HITS_K), "recall@10")
BASELINES = ("random", "degree", "path")
MECHANISM_COLUMNS = ("test_head", "test_relation", "test_tail", "edge_head", "edge_relation", "edge_tail")

Triple = tuple[str, str, str]


# --------------------------------------------------------------------------- mechanisms


def read_mechanisms(path: str | Path) -> dict[Triple, set[Triple]]:
    """Read a mechanisms file: for each test triple, the training edges that explain it.

    Args:
        path: A tab-separated file with a header holding at least ``test_head``, ``test_relation``,
            ``test_tail``, ``edge_head``, ``edge_relation`` and ``edge_tail``.

    Returns:
        Test triple (labels) to its set of mechanism edges (labels).

    Raises:
        DataError: If the file is missing, lacks a column, or has an empty field (with the line).
    """
    p = require_file(path, "mechanisms file")
    out: dict[Triple, set[Triple]] = defaultdict(set)
    with open(p, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f, delimiter="\t")
        missing = [c for c in MECHANISM_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise DataError(
                f"mechanisms file needs the columns {', '.join(MECHANISM_COLUMNS)} "
                f"(tab-separated, with a header); missing {', '.join(missing)}",
                p,
            )
        for line, row in enumerate(reader, start=2):
            if not any((v or "").strip() for v in row.values()):
                continue
            if any(not (row[c] or "").strip() for c in MECHANISM_COLUMNS):
                raise DataError("empty field", p, line)
            out[(row["test_head"], row["test_relation"], row["test_tail"])].add(
                (row["edge_head"], row["edge_relation"], row["edge_tail"])
            )
    return dict(out)


# --------------------------------------------------------------------------- influence on candidates


def influence_on_candidates(
    checkpoints,
    train_ids: np.ndarray,
    test_ids: np.ndarray,
    subsets: list[np.ndarray],
    opts,
    device,
    progress=None,
    read=None,
):
    """TracIn of each test triple's candidate training rows only, in one engine pass over their union.

    Args:
        checkpoints: The checkpoints to sum over.
        train_ids: All training triples ``[N, 3]``.
        test_ids: The test triples ``[M, 3]``.
        subsets: Per test triple, its candidate rows into ``train_ids``.
        opts: The influence options.
        device: Where to compute.
        progress: A rich progress display, or None.
        read: Checkpoint reader (e.g. a run store's cached one); None reads from disk.

    Returns:
        Per test triple, the scores aligned with its subset; and the engine's result.

    Raises:
        TracegraphError: If no test triple has any candidate.
    """
    from tracegraph.kg.explain.tracin.influence import TracIn

    union = np.unique(np.concatenate(subsets)) if subsets else np.zeros(0, np.int64)
    if union.size == 0:
        raise TracegraphError("no candidate training triples for any test triple")
    # no store: the options' batch size is used as given, and ``read`` (None: from disk) reads the checkpoints
    res = TracIn.from_parts(None, train_ids, checkpoints, opts, device=device, read=read).result(
        test_ids, union, progress=progress
    )
    per = [np.asarray(res.scores[j, np.searchsorted(union, rows)], np.float64) for j, rows in enumerate(subsets)]
    return per, res


# --------------------------------------------------------------------------- ground-truth recovery


def _summary(per_triple: list[dict], methods) -> dict:
    out = {}
    for m in methods:
        out[m] = {}
        for key, name in zip(("rr", "ap", *(f"hits@{k}" for k in HITS_K), "recall@10"), METRICS):
            vals = np.array([p["methods"][m][key] for p in per_triple], np.float64)
            out[m][name] = {
                "mean": float(vals.mean()) if vals.size else None,
                "std": float(vals.std()) if vals.size else None,
            }
    return out


def ground_truth_recovery(
    test_ids: np.ndarray,
    subsets: list[np.ndarray],
    scores: list[np.ndarray],
    train_ids: np.ndarray,
    relevant: list[set[tuple[int, int, int]]],
    num_entities: int,
    *,
    n_random: int = 20,
    seed: int = 0,
    labels: Callable | None = None,
    extra: dict | None = None,
) -> dict:
    """Grade how well each ranking of the candidates recovers the known mechanism edges.

    Each test triple's candidates are ranked by TracIn, by the ``extra`` methods and by the
    baselines (degree, random), and graded against ``relevant``. Test triples without a mechanism
    edge among their candidates are listed under ``not_graded`` and left out of the means.

    Args:
        test_ids: Test triples ``[M, 3]``.
        subsets: Per test triple, its candidate rows into ``train_ids``.
        scores: Per test triple, the TracIn score of each candidate.
        train_ids: All training triples ``[N, 3]``.
        relevant: Per test triple, its mechanism edges as id triples.
        num_entities: Number of entities (for degrees).
        n_random: Random orderings averaged for the random baseline.
        seed: Seed of the random baseline.
        labels: ``labels(h, r, t)`` gives a triple's labels for the report; None reports ids.
        extra: Method name to, per test triple, its list of sort keys (see the explanation methods).

    Returns:
        The grades per method (``summary``), per test triple (``per_triple``), and coverage counts.
    """
    degree = degrees(train_ids, num_entities)
    rng = np.random.default_rng(seed)
    per, skipped = [], []
    for j, (h, r, t) in enumerate(np.asarray(test_ids)):
        cand = train_ids[subsets[j]]
        rel = np.array([tuple(map(int, c)) in relevant[j] for c in cand], dtype=bool)
        entry = {
            "index": j,
            "triple": labels(h, r, t) if labels else [int(h), int(r), int(t)],
            "candidates": int(len(cand)),
            "mechanism_edges": len(relevant[j]),
            "mechanism_edges_in_candidates": int(rel.sum()),
        }
        if not relevant[j] or not rel.any():
            skipped.append(
                dict(
                    entry,
                    reason="no mechanism edge among the candidates" if relevant[j] else "no mechanism edges known",
                )
            )
            continue
        perms = np.stack([rng.permutation(len(cand)) for _ in range(n_random)])
        keys = method_keys(scores[j], cand, int(h), int(t), degree)
        keys = {"tracin": keys.pop("tracin"), **{m: per[j] for m, per in (extra or {}).items()}, **keys}
        entry["methods"] = {m: expected_metrics(k, rel, perms) for m, k in keys.items()}
        entry["random_rr_exact"] = random_rr_expectation(len(cand), int(rel.sum()))
        per.append(entry)
    methods = ("tracin", *(extra or {}), *BASELINES)
    n_cands = sum(p["candidates"] for p in per)
    return {
        "definition": {
            "candidates": "training triples of the test triple's filtered subgraph",
            "relevant": "its mechanism edges, matched exactly as stored (head, relation, tail)",
            "mrr": "mean over test triples of 1 / rank of the first mechanism edge",
            "map": "mean average precision over the mechanism edges among the candidates",
            "hits@k": "share of test triples with a mechanism edge in the top k",
            "recall@10": "mean share of the (candidate) mechanism edges in the top 10",
            "ties": f"broken at random; every figure is the mean over {n_random} permutations (seed {seed})",
            "baselines": {
                "random": "random order",
                "degree": "sum of endpoint degrees in train, high first",
                "path": "shortest head-tail walk through the edge in the candidate graph, short first, then degree",
            },
        },
        "graded": len(per),
        "not_graded": skipped,
        "mechanism_edge_coverage": (
            sum(p["mechanism_edges_in_candidates"] for p in per + skipped)
            / max(sum(p["mechanism_edges"] for p in per + skipped), 1)
        ),
        "mean_candidates": n_cands / len(per) if per else 0.0,
        "summary": _summary(per, methods),
        "per_triple": per,
    }
