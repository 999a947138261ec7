"""Walks on the training graph's CSR adjacency: hop distances and simple head–tail paths.

Hop distances go by whole frontiers; the path filter finds which triples of a subgraph lie on a
simple head–tail path of at most L edges.

Used by kg/explain/neighborhood.py (the n-hop neighbourhoods and the path filter); the path
algorithm and why it is exact are in docs/filtering.md.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def gather(indptr: np.ndarray, indices: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Concatenate ``indices[indptr[x]:indptr[x+1]]`` for every x in ``nodes``, without a loop."""
    starts = indptr[nodes]
    counts = indptr[nodes + 1] - starts
    total = int(counts.sum())
    if total == 0:
        return indices[:0]
    shift = np.repeat(starts - (np.cumsum(counts) - counts), counts)
    return indices[shift + np.arange(total)]


def bfs(
    indptr, indices, source: int, depth: int, n: int, cut: tuple[int, int] | None = None, removed: int | None = None
) -> np.ndarray:
    """Hop distance from ``source`` (-1 beyond ``depth``), by whole frontiers at a time.

    ``cut=(a, b)`` drops the edge a–b (all its parallel triples); ``removed`` drops a node.
    """
    dist = np.full(n, -1, dtype=np.int32)
    dist[source] = 0
    if removed is not None:
        dist[removed] = depth + 1  # "visited" so it is never entered; reset below
    frontier = np.array([source], dtype=np.int64)
    for d in range(1, depth + 1):
        if frontier.size == 0:
            break
        if cut is None:
            nb = gather(indptr, indices, frontier)
        else:
            a, b = cut
            plain = frontier[(frontier != a) & (frontier != b)]
            parts = [gather(indptr, indices, plain)]
            for x, y in ((a, b), (b, a)):
                if np.any(frontier == x):
                    nx_ = gather(indptr, indices, np.array([x]))
                    parts.append(nx_[nx_ != y])
            nb = np.concatenate(parts)
        nb = nb[dist[nb] < 0]
        if nb.size == 0:
            break
        dist[nb] = d  # duplicates in nb are harmless: same value written twice
        mark = np.zeros(n, dtype=bool)
        mark[nb] = True
        frontier = np.flatnonzero(mark)
    if removed is not None:
        dist[removed] = -1
    return dist


def may_be_on_path(u, v, dh, dt, n_hops: int, L: int) -> np.ndarray:
    """Necessary condition d(h, x) + 1 + d(y, t) <= L for edge x–y in either orientation.

    A distance beyond the BFS depth (-1) is at least n_hops + 1.
    """

    def d(dist, x):
        dx = dist[x]
        return np.where(dx < 0, n_hops + 1, dx)

    return np.minimum(d(dh, u) + d(dt, v), d(dh, v) + d(dt, u)) + 1 <= L


def path_edges(u: np.ndarray, v: np.ndarray, h: int, t: int, L: int) -> np.ndarray:
    """For triples (u[i], v[i]) forming a subgraph: is each on a simple h–t path of length <= L?"""
    out = np.zeros(len(u), dtype=bool)
    if h == t or len(u) == 0:
        return out  # a simple path from h to itself has no edges
    # relabel to 0..k-1 through a dense map (np.unique would sort millions of ids for hubs)
    size = int(max(u.max(), v.max(), h, t)) + 1
    present = np.zeros(size, dtype=bool)
    present[u] = present[v] = True
    present[[h, t]] = True
    local = np.cumsum(present) - 1
    lu, lv, lh, lt = local[u], local[v], int(local[h]), int(local[t])
    k = int(local[-1]) + 1
    ok = lu != lv  # self-loops are never on a simple path
    lu_ok, lv_ok = lu[ok], lv[ok]
    a = sp.csr_matrix(
        (np.ones(2 * lu_ok.size, np.int32), (np.concatenate([lu_ok, lv_ok]), np.concatenate([lv_ok, lu_ok]))),
        shape=(k, k),
    )
    a.sum_duplicates()
    a.data[:] = 1  # simple graph: parallel triples are interchangeable on a path
    if L <= 4:
        out[ok] = _path_edges_fast(a, lu[ok], lv[ok], lh, lt, L)
    else:
        out[ok] = _path_edges_dfs(a, lu[ok], lv[ok], lh, lt, L)
    return out


def _path_edges_fast(a: sp.csr_matrix, u, v, h: int, t: int, L: int) -> np.ndarray:
    """Exact for L <= 4.

    In a simple path h always comes first and t last, so:

    * edge h–t: the path [h, t] itself;
    * edge h–x (x != t): h, x, …, t where the rest avoids h: dist(x, t) in G − h <= L − 1
      (a shortest path is simple, so a distance suffices here); t–x symmetric, in G − t;
    * edge u–v touching neither: h ~ u – v ~ t with side lengths (a, b), 2 <= a + b <= 3
      for L <= 4: (1,1) u∈N(h), v∈N(t); (1,2) u∈N(h) and v, t have a common neighbour w
      other than h and u; (2,1) symmetric. Walks would over-count here (w = h or w = u),
      so those two candidates are subtracted explicitly. Both orientations are tried.
    """
    k = a.shape[0]
    ih, it = (u == h) | (v == h), (u == t) | (v == t)
    out = ih & it  # the h–t edge, on a path for every L >= 1
    other = np.where(u == h, v, u)
    d_t = bfs(a.indptr, a.indices, t, L - 1, k, removed=h)
    out |= ih & ~it & (d_t[other] >= 0)
    other = np.where(u == t, v, u)
    d_h = bfs(a.indptr, a.indices, h, L - 1, k, removed=t)
    out |= it & ~ih & (d_h[other] >= 0)
    mid = ~ih & ~it
    if L >= 3 and mid.any():
        nh = np.zeros(k, bool)
        nh[a.indices[a.indptr[h] : a.indptr[h + 1]]] = True
        nt = np.zeros(k, bool)
        nt[a.indices[a.indptr[t] : a.indptr[t + 1]]] = True
        cnt_t = a @ nt.astype(np.int32)  # |N(x) ∩ N(t)| for every x
        cnt_h = a @ nh.astype(np.int32)
        for x, y in ((u, v), (v, u)):  # x on the head side, y on the tail side
            on = nh[x] & nt[y]
            if L >= 4:
                on |= nh[x] & (cnt_t[y] - (nh[y] & nt[h]) - nt[x] >= 1)
                on |= nt[y] & (cnt_h[x] - (nt[x] & nh[t]) - nh[y] >= 1)
            out |= mid & on
    return out


def _path_edges_dfs(a: sp.csr_matrix, u, v, h: int, t: int, L: int) -> np.ndarray:
    """Any L: enumerate simple h–t paths of length <= L depth-first.

    The search is pruned by the distance to t (a lower bound on what remains). Exponential in the
    worst case; used only for L > 4.
    """
    k = a.shape[0]
    d_t = bfs(a.indptr, a.indices, t, L, k)
    nbrs = [a.indices[a.indptr[x] : a.indptr[x + 1]].tolist() for x in range(k)]
    on_path: set[tuple[int, int]] = set()
    path, used = [h], {h}

    def walk(x: int, depth: int) -> None:
        for y in nbrs[x]:
            if y in used:
                continue
            if y == t:
                on_path.update(zip(path, path[1:] + [t]))
                continue
            if d_t[y] < 0 or depth + 1 + d_t[y] > L:
                continue
            path.append(y)
            used.add(y)
            walk(y, depth + 1)
            path.pop()
            used.discard(y)

    walk(h, 0)
    ends = {(min(p), max(p)) for p in on_path}
    return np.fromiter(
        ((min(x, y), max(x, y)) in ends for x, y in zip(u.tolist(), v.tolist())), dtype=bool, count=len(u)
    )
