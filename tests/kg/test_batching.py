"""Device-built training batches against the numpy CSR reference, and padded targets (for CUDA
graphs) against exact ones: same loss value and gradients, with dense BCE as the judge."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tracegraph.kg.model.batching import SampleStore
from tracegraph.kg.model.loss import bce_1n, fused_bce_1n
from tracegraph.kg.data.triples import KnownTails


def _graph(seed=0, n=60, E=25, R=4):
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, E, n), rng.integers(0, R, n), rng.integers(0, E, n)], 1), E, R


def _reference_pairs(known: KnownTails, heads, rels):
    """Every (row, tail) pair by a plain loop over the batch."""
    out = []
    for row, (h, r) in enumerate(zip(heads, rels)):
        out += [(row, int(t)) for t in known.tails_of(int(h), int(r))]
    return sorted(out)


def test_kvsall_targets_equal_a_loop_over_the_csr_index():
    ids, E, R = _graph()
    known = KnownTails([ids], R)
    store = SampleStore(np.stack(known.pairs(), 1), known, torch.device("cpu"))
    order = [list(b) for b in np.array_split(np.random.default_rng(1).permutation(len(store)), 5)]
    for batch in store.epoch(order):
        h, r = store.heads_relations(batch.index)
        assert np.array_equal(h.numpy(), known.pairs()[0][batch.host_index])
        t = store.targets(batch.index, store.target_count(batch))
        got = sorted(zip(t.batch_index.tolist(), t.entity_index.tolist()))
        assert got == _reference_pairs(known, h.numpy(), r.numpy()) and t.weight is None


def test_onevsall_targets_are_the_triples_tails():
    ids, E, R = _graph()
    store = SampleStore(ids, None, torch.device("cpu"))
    (batch,) = store.epoch([[5, 0, 9]])
    t = store.targets(batch.index, 3)
    assert t.entity_index.tolist() == ids[[5, 0, 9], 2].tolist() and t.batch_index.tolist() == [0, 1, 2]


def _dense_bce(scores, pairs, eps):
    B, N = scores.shape
    y = torch.zeros(B, N, dtype=scores.dtype)
    for row, t in pairs:
        y[row, t] = 1.0
    return F.binary_cross_entropy_with_logits(scores, (1 - eps) * y + eps / N)


@pytest.mark.parametrize("fused", [False, True])
def test_padded_targets_give_the_dense_loss_and_gradients(fused):
    ids, E, R = _graph(seed=3)
    known = KnownTails([ids], R)
    store = SampleStore(np.stack(known.pairs(), 1), known, torch.device("cpu"))
    (batch,) = store.epoch([[0, 3, 4, 7, 8, 11]])
    n = store.target_count(batch)
    padded = store.targets(batch.index, n + 13, padded=True)  # 13 padding rows
    assert padded.weight.sum().item() == n and len(padded.entity_index) == n + 13
    g = torch.Generator().manual_seed(0)
    x = torch.randn(len(batch), 5, dtype=torch.float64, generator=g, requires_grad=True)
    W = torch.randn(E, 5, dtype=torch.float64, generator=g, requires_grad=True)
    b = torch.randn(E, dtype=torch.float64, generator=g, requires_grad=True)
    h, r = store.heads_relations(batch.index)
    ref = _dense_bce(x @ W.T + b, _reference_pairs(known, h.numpy(), r.numpy()), 0.1)
    ref_grads = torch.autograd.grad(ref, (x, W, b))
    got = fused_bce_1n(x, W, b, padded, 0.1, chunk_size=7) if fused else bce_1n(x @ W.T + b, padded, 0.1)
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)
    for gg, rg in zip(torch.autograd.grad(got, (x, W, b)), ref_grads):
        torch.testing.assert_close(gg, rg, rtol=1e-10, atol=1e-12)
