"""local-newton's step against a Newton step written out by hand: the entity's 1-N objective with its
label matrix, its gradient and Hessian by float64 autograd, the eigenvalue floor, the margin by a loop."""

import numpy as np
import torch
import torch.nn.functional as F

from tests.kg.test_explanation_methods_by_hand import CPU, N, R, TRAIN, tiny_model
from tracegraph.kg.data.triples import KnownTails, with_reciprocals
from tracegraph.kg.explain import methods as M
from tracegraph.kg.explain.local_newton import DAMPING, LocalNewton
from tracegraph.kg.explain.local_retrain import LocalRetrainOptions

EPS = 0.2


def objective(model, vec, triples):
    """The entity's triples (entity first) as 1-N samples, one per relation: mean BCE against smoothed labels."""
    total, samples = vec.sum() * 0, 0  # no sample left: a zero objective, a zero step
    for rel in sorted({int(r) for _, r, _ in triples}):
        y = torch.zeros(N, dtype=torch.float64)
        for _, r, t in triples:
            if r == rel:
                y[int(t)] = 1.0
        logits = model.score_hidden(model.encode(vec[None], model.relation.weight[rel][None]))[0]
        total = total + F.binary_cross_entropy_with_logits(logits, (1 - EPS) * y + EPS / N, reduction="sum")
        samples += 1
    return total / max(samples, 1)


def by_hand(model, known, e, q_rel, answer, triples, removed):
    e0 = model.entity.weight[e].detach()
    kept = [t for t in triples if tuple(t) not in removed]
    g = torch.autograd.functional.jacobian(lambda v: objective(model, v, kept), e0)
    h = torch.autograd.functional.hessian(lambda v: objective(model, v, triples), e0)
    vals, vecs = torch.linalg.eigh(h)
    vals = vals.clamp_min(DAMPING * vals.abs().max())
    v = e0 - vecs @ torch.diag(1 / vals) @ vecs.T @ g
    with torch.no_grad():
        s = model.score_hidden(model.encode(v[None], model.relation.weight[q_rel][None]))[0]
    rivals = [x for x in range(N) if x != answer and x not in set(known.tails_of(e, q_rel).tolist())]
    return float(s[answer] - max(s[x] for x in rivals))


def test_each_removal_set_moves_the_entity_by_one_damped_newton_step():
    model = tiny_model(5).double()
    known = KnownTails([with_reciprocals(TRAIN, R)], 2 * R)
    search = LocalNewton(model, TRAIN, known, EPS, LocalRetrainOptions(), CPU)
    fact_rows = np.array([8])  # (0, 0, 3): never in the entity's data
    oriented, rows = search.side(0, fact_rows)
    removals = [np.zeros(0, np.int64), np.array([0]), np.array([3, 6]), np.array([0, 3, 6])]
    got = search.margins((0, 0, 3), oriented, rows, removals)
    triples = [tuple(int(x) for x in t) for t in oriented]
    want = [
        by_hand(model, known, 0, 0, 3, triples, {triples[i] for i in np.flatnonzero(np.isin(rows, x))})
        for x in removals
    ]
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)
    assert len(set(np.round(got, 9))) == len(removals)  # each set moves the entity elsewhere


def test_local_newton_is_a_method_whose_top_set_is_its_own_search():
    model = tiny_model(5)
    known = KnownTails([with_reciprocals(TRAIN, R)], 2 * R)
    local = LocalRetrainOptions(candidates=4, k=2)
    facts, subsets = np.array([[0, 0, 3]]), [np.array([3, 0, 2, 6, 4])]
    pre = np.array([0.5, 0.4, 0.3, 0.2, 0.1])
    want, rec = LocalNewton(model, TRAIN, known, 0.1, local, CPU).explain((0, 0, 3), subsets[0], pre, np.array([8]))
    assert len(rec["chosen_rows"]) == 2 and set(rec["chosen_rows"]) <= set(subsets[0][:4])
    assert M.LOCAL_SEARCHES["local-newton"] is LocalNewton and "local-newton" in M.METHODS
    del facts
