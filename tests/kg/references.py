"""References shared by knowledge-graph tests: a small ConvE's sizes, dense filtered ranks by
counting, a relative comparison scaled by the reference's largest value, head–tail walk lengths by
breadth-first search, and a stand-in progress display that records its bars."""

from collections import deque

import numpy as np
import torch
import torch.nn.functional as F

TINY = dict(embedding_dim=12, embedding_height=3, embedding_width=4, output_channels=4)


def brute_force_ranks(model, triples, filter_triples):
    """Dense reference: score everything, drop other known tails, count greater/equal by hand."""
    known = {}
    for h, r, t in filter_triples:
        known.setdefault((h, r), set()).add(t)
    with torch.no_grad():
        S = model.score_all(torch.as_tensor(triples[:, 0]), torch.as_tensor(triples[:, 1])).numpy()
    out = []
    for i, (h, r, t) in enumerate(triples):
        s = S[i].copy()
        others = [e for e in known.get((h, r), ()) if e != t]
        s[others] = -np.inf
        g = int((s > s[t]).sum())
        e = int((s == s[t]).sum()) - 1
        out.append((1 + g, 1 + g + e))
    return np.array(out, dtype=float)


def assert_rel_close(a, b, rtol=1e-4):
    """``a`` within ``rtol`` of ``b``, relative to ``b``'s largest magnitude (which must be nonzero)."""
    a, b = np.asarray(a), np.asarray(b)
    scale = np.abs(b).max()
    assert scale > 0
    err = np.abs(a - b).max() / scale
    assert err < rtol, f"relative error {err:.2e}"


def one_mimic_margin(model, triples_and_rows, query, removed, known, eps, steps, lr, start):
    """The margin of ``query`` after fitting one local-retrain mimic in a plain loop: per Adam step, the
    mean over its relations of the summed BCE against targets built from Python sets; the rival is the
    best entity outside ``known``'s tails of the query and the answer."""
    e, q, answer = query
    N = model.config.num_entities
    data: dict = {}
    for (_, r, b), row in triples_and_rows:
        if row not in removed:
            data.setdefault(r, set()).add(b)
    mimic = start.clone().requires_grad_(True)
    opt = torch.optim.Adam([mimic], lr=lr)
    for _ in range(steps if data else 0):  # no data: no gradient, Adam leaves the start as it is
        total = 0
        for r, tails in data.items():
            y = torch.full((N,), eps / N, dtype=start.dtype)
            for b in tails:
                y[b] += 1 - eps
            s = model.score_hidden(model.encode(mimic[None], model.relation.weight[r][None]))[0]
            total = total + F.binary_cross_entropy_with_logits(s, y, reduction="sum")
        opt.zero_grad()
        (total / len(data)).backward()
        opt.step()
    with torch.no_grad():
        s = model.score_hidden(model.encode(mimic[None], model.relation.weight[q][None]))[0]
    filtered = set(known.tails_of(e, q).tolist()) | {answer}
    rivals = [float(s[j]) for j in range(N) if j not in filtered]
    return float(s[answer]) - (max(rivals) if rivals else 0.0)


def bfs(adj: dict, start: int) -> dict:
    """Hops from ``start`` to every node it reaches in the adjacency ``{node: neighbours}``."""
    dist, todo = {start: 0}, deque([start])
    while todo:
        u = todo.popleft()
        for v in adj.get(u, ()):
            if v not in dist:
                dist[v] = dist[u] + 1
                todo.append(v)
    return dist


def walk_lengths(cand, h, t) -> np.ndarray:
    """Per candidate (u, ·, v): the shortest h–t walk through it in the undirected candidate graph."""
    adj: dict = {}
    for u, _, v in cand:
        if u != v:
            adj.setdefault(int(u), set()).add(int(v))
            adj.setdefault(int(v), set()).add(int(u))
    dh, dt = bfs(adj, int(h)), bfs(adj, int(t))
    d = lambda dist, x: dist.get(int(x), np.inf)
    return np.array([min(d(dh, u) + 1 + d(dt, v), d(dh, v) + 1 + d(dt, u)) for u, _, v in cand], np.float64)


class Bars:
    """A stand-in progress display: records each bar and its steps."""

    def __init__(self):
        self.tasks, self.steps = [], []

    def add_task(self, description, total, info):
        self.tasks.append((description, total, info))
        return len(self.tasks) - 1

    def update(self, task, advance, info):
        self.steps.append((task, advance, info))
