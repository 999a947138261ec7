"""References shared by knowledge-graph tests: a small ConvE's sizes, dense filtered ranks by
counting, and a relative comparison scaled by the reference's largest value."""

import numpy as np
import torch

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
