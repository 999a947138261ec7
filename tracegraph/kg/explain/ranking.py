"""Ranked lists of candidate training triples, their metrics and the structural baselines.

The baselines (degree, head–tail walks) are what every explanation method is compared with.

Shared by ground-truth recovery (fidelity.py), the explanation methods (methods.py), the
necessity test and ``explain``'s path shells; it imports none of them, so each can import it
at module level.
"""

from __future__ import annotations

from math import comb
from typing import Sequence

import numpy as np

HITS_K = (1, 3, 10)


# --------------------------------------------------------------------------- ranking metrics


def ranking_metrics(relevant_in_order: Sequence[bool]) -> dict:
    """RR, AP, Hits@1/3/10 and Recall@10 of one ranked list.

    A list without relevant items scores 0 everywhere (the caller decides whether to grade it).

    Args:
        relevant_in_order: True where the item at that position is relevant.

    Returns:
        The metrics by name (``rr``, ``ap``, ``hits@k``, ``recall@10``).
    """
    rel = np.asarray(relevant_in_order, dtype=bool)
    pos = np.flatnonzero(rel) + 1  # 1-based ranks of the relevant items
    out = {"rr": 0.0, "ap": 0.0, **{f"hits@{k}": 0.0 for k in HITS_K}, "recall@10": 0.0}
    if pos.size == 0:
        return out
    out["rr"] = float(1.0 / pos[0])
    out["ap"] = float(np.mean(np.arange(1, pos.size + 1) / pos))
    for k in HITS_K:
        out[f"hits@{k}"] = float(pos[0] <= k)
    out["recall@10"] = float(np.mean(pos <= 10))
    return out


def ranked_order(keys: Sequence[np.ndarray], tiebreak: np.ndarray) -> np.ndarray:
    """Indices sorted by ``keys`` (each descending, the first most significant), ties by ``tiebreak``.

    Args:
        keys: Sort keys, one value per item each.
        tiebreak: The last key (ascending), e.g. a random permutation.

    Returns:
        The item indices in ranked order.
    """
    # np.lexsort sorts ascending by its *last* key first
    return np.lexsort([tiebreak, *[-np.asarray(k, dtype=np.float64) for k in reversed(keys)]])


def expected_metrics(keys: Sequence[np.ndarray], relevant: np.ndarray, perms: np.ndarray) -> dict:
    """The mean of :func:`ranking_metrics` over random tie-breaks.

    Args:
        keys: Sort keys, one value per item each.
        relevant: Boolean, one entry per item.
        perms: One tie-break permutation per row.

    Returns:
        The mean metrics by name.
    """
    runs = [ranking_metrics(relevant[ranked_order(keys, p)]) for p in perms]
    return {m: float(np.mean([r[m] for r in runs])) for m in runs[0]}


def random_rr_expectation(n: int, n_relevant: int = 1) -> float:
    """The exact expected reciprocal rank of the first relevant item in a uniformly random order.

    Args:
        n: Number of items.
        n_relevant: Number of relevant items among them.

    Returns:
        ``E[1 / rank of the first relevant]``.
    """
    total = comb(n, n_relevant)
    return sum((1.0 / k) * comb(n - k, n_relevant - 1) / total for k in range(1, n - n_relevant + 2))


# --------------------------------------------------------------------------- baselines


def degrees(train_ids: np.ndarray, num_entities: int) -> np.ndarray:
    """The number of training triples touching each entity (a self-loop counts once).

    Args:
        train_ids: Training triples ``[N, 3]``.
        num_entities: Number of entities.

    Returns:
        ``[num_entities]`` counts.
    """
    h, t = train_ids[:, 0], train_ids[:, 2]
    return np.bincount(h, minlength=num_entities) + np.bincount(t[t != h], minlength=num_entities)


class WalkLengths:
    """Shortest head–tail walk through each candidate edge (u, v) in the undirected candidate graph.

    The length is min(d(h,u) + 1 + d(v,t), d(h,v) + 1 + d(u,t)); inf if none. The graph is built
    once and each (head, tail) costs two breadth-first searches in scipy (C speed: ``explain``
    without a filter ranks every training triple for every test triple, and FB15k-237 has 272k
    edges).

    Args:
        edges: Candidate edges ``[n, 2]`` (head and tail ids).
    """

    def __init__(self, edges: np.ndarray):
        from scipy.sparse import coo_matrix

        edges = np.asarray(edges, np.int64).reshape(-1, 2)
        self.nodes, local = np.unique(edges.ravel(), return_inverse=True)
        self.u, self.v = local.reshape(-1, 2).T
        keep = self.u != self.v  # a self-loop joins nothing
        n = len(self.nodes)
        self.graph = coo_matrix((np.ones(int(keep.sum())), (self.u[keep], self.v[keep])), shape=(n, n)).tocsr()

    def __call__(self, head: int, tail: int) -> np.ndarray:
        """The shortest head-tail walk through each candidate edge.

        Args:
            head: The test head id.
            tail: The test tail id.

        Returns:
            One length per edge given at construction; inf where no walk exists.
        """
        from scipy.sparse.csgraph import shortest_path

        dist = np.full((2, len(self.nodes)), np.inf)
        ends = np.searchsorted(self.nodes, [head, tail])
        present = [i for i, (e, x) in enumerate(zip(ends, (head, tail))) if e < len(self.nodes) and self.nodes[e] == x]
        if present:
            dist[present] = shortest_path(self.graph, directed=False, unweighted=True, indices=ends[present])
        dh, dt = dist
        return np.minimum(dh[self.u] + 1 + dt[self.v], dh[self.v] + 1 + dt[self.u])


def path_lengths(edges: np.ndarray, head: int, tail: int) -> np.ndarray:
    """The shortest head-tail walk through each candidate edge (see :class:`WalkLengths`).

    Args:
        edges: Candidate edges ``[n, 2]`` (head and tail ids).
        head: The test head id.
        tail: The test tail id.

    Returns:
        ``[n]`` walk lengths; inf where no walk exists.
    """
    return WalkLengths(edges)(head, tail)


def path_shell(plen: np.ndarray) -> np.ndarray:
    """Path length as a sort key: no head-tail path (inf) after every finite length.

    Args:
        plen: Walk lengths.

    Returns:
        The lengths with inf replaced by 1e9.
    """
    return np.where(np.isfinite(plen), plen, 1e9)


def margin_shell(walk: np.ndarray) -> np.ndarray:
    """Each candidate's shell for tracin-margin-path, from its head–tail walk length.

    Args:
        walk: each candidate's head–tail walk length (:func:`path_lengths`); inf for no walk.

    Returns:
        2 for a direct edge or a two-edge walk, then 3, 4, …; no walk last (1e9, as :func:`path_shell`).
    """
    return np.maximum(path_shell(np.asarray(walk, np.float64)), 2.0)


def candidate_rows(train_ids: np.ndarray, fact, scope: str) -> np.ndarray:
    """A fact's candidate training rows: those featuring its head (or its head or tail), never the fact.

    Args:
        train_ids: Training triples ``[M, 3]``.
        fact: The fact ``(h, r, t)`` as ids.
        scope: ``head`` or ``head-tail``.

    Returns:
        Sorted row positions.
    """
    h, r, t = (int(x) for x in fact)
    ends = (h,) if scope == "head" else (h, t)
    touch = np.isin(train_ids[:, 0], ends) | np.isin(train_ids[:, 2], ends)
    itself = (train_ids[:, 0] == h) & (train_ids[:, 1] == r) & (train_ids[:, 2] == t)
    return np.flatnonzero(touch & ~itself)


def same_query(cand: np.ndarray, fact, head_side: bool = False) -> np.ndarray:
    """Which candidates answer the fact's own query with another answer.

    On the tail side the query is (h, r, ?) and they are (h, r, t′), t′ ≠ t; on the head side
    (?, r, t) and they are (h′, r, t), h′ ≠ h. A 1-N model trains each query as one sample whose
    labels are its answers, so these are the labels of the very sample the prediction is read from.

    Args:
        cand: The candidate triples ``[n, 3]``.
        fact: The fact ``(h, r, t)``.
        head_side: The fact is predicted on the head side.

    Returns:
        ``[n]`` booleans.
    """
    h, r, t = (int(x) for x in fact)
    c = np.asarray(cand, np.int64).reshape(-1, 3)
    if head_side:
        return (c[:, 1] == r) & (c[:, 2] == t) & (c[:, 0] != h)
    return (c[:, 0] == h) & (c[:, 1] == r) & (c[:, 2] != t)


def method_keys(tracin_scores: np.ndarray, cand: np.ndarray, head: int, tail: int, degree: np.ndarray) -> dict:
    """Sort keys (descending) of TracIn and the baselines for one test triple's candidates.

    Args:
        tracin_scores: TracIn score of each candidate.
        cand: The candidate triples ``[n, 3]``.
        head: The test head id.
        tail: The test tail id.
        degree: Degree of every entity (see :func:`degrees`).

    Returns:
        Method name (``tracin``, ``random``, ``degree``, ``path``) to its list of sort keys.
    """
    deg = (degree[cand[:, 0]] + degree[cand[:, 2]]).astype(np.float64)
    plen = path_lengths(cand[:, [0, 2]], head, tail)
    return {
        "tracin": [np.asarray(tracin_scores, np.float64)],
        "random": [np.zeros(len(cand))],
        "degree": [deg],
        "path": [-path_shell(plen), deg],
    }
