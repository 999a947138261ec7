"""The loss code paths that ``test_loss.py`` (which runs with float64 as the default dtype and
always feeds the fused loss's table gradient to the tied lookup) does not reach.

- float64 inputs under the ordinary float32 default: the fused backward must accumulate in the
  inputs' precision (its buffers take the dtype of the incoming gradient, not the default).
- ``tied_lookup`` whose loss produced no table gradient: its own dense gradient, duplicates summed.

References: a dense float64 label matrix with ``binary_cross_entropy_with_logits`` and autograd
of plain indexing.
"""

import torch
import torch.nn.functional as F

from tracegraph.kg.loss import Targets, fused_bce_1n, tied_lookup


def test_fused_backward_in_float64_under_a_float32_default():
    assert torch.get_default_dtype() == torch.float32
    gen = torch.Generator().manual_seed(7)
    B, N, d, eps = 5, 23, 4, 0.2
    x = torch.randn(B, d, generator=gen, dtype=torch.float64, requires_grad=True)
    E = torch.randn(N, d, generator=gen, dtype=torch.float64, requires_grad=True)
    b = torch.randn(N, generator=gen, dtype=torch.float64, requires_grad=True)
    t = Targets(torch.tensor([0, 0, 1, 2, 3, 4]), torch.tensor([3, 9, 0, 22, 5, 5]))
    got = fused_bce_1n(x, E, b, t, eps, chunk_size=6)
    y = torch.full((B, N), eps / N, dtype=torch.float64)
    y[t.batch_index, t.entity_index] += 1 - eps
    want = F.binary_cross_entropy_with_logits(x @ E.t() + b, y, reduction="none").mean(1).mean()
    g_got = torch.autograd.grad(got, (x, E, b))
    g_want = torch.autograd.grad(want, (x, E, b))
    assert got.dtype == torch.float64 and all(g.dtype == torch.float64 for g in g_got)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=0)
    for a, c in zip(g_got, g_want):
        torch.testing.assert_close(a, c, rtol=1e-10, atol=1e-15)


def test_tied_lookup_without_a_loss_buffer_is_plain_indexing():
    gen = torch.Generator().manual_seed(8)
    E = torch.randn(6, 3, generator=gen, requires_grad=True)
    idx = torch.tensor([4, 1, 4, 0])  # 4 twice: its gradient rows add up
    up = torch.randn(4, 3, generator=gen)
    (g_tied,) = torch.autograd.grad((tied_lookup(E, idx, {}) * up).sum(), E)
    (g_plain,) = torch.autograd.grad((E[idx] * up).sum(), E)
    assert g_tied.dtype == E.dtype
    torch.testing.assert_close(g_tied, g_plain, rtol=0, atol=0)
    assert torch.equal(g_tied[4], up[0] + up[2]) and torch.equal(g_tied[2], torch.zeros(3))


def test_tied_lookup_takes_over_the_loss_buffer():
    """With the fused loss, the head-lookup gradient is added into the loss's dL/dE buffer, which
    leaves the shared dict (one N×d buffer, not two); the sum equals autograd of plain indexing."""
    gen = torch.Generator().manual_seed(9)
    E = torch.randn(9, 4, generator=gen, requires_grad=True)
    h = torch.tensor([2, 7, 2])
    t = Targets.one_per_sample(torch.tensor([1, 2, 8]))
    sink: dict = {}
    x = torch.tanh(tied_lookup(E, h, sink))  # a stand-in for the encoder between lookup and loss
    (g_tied,) = torch.autograd.grad(fused_bce_1n(x, E, None, t, 0.1, chunk_size=4, sink=sink), E)
    assert sink == {}
    (g_plain,) = torch.autograd.grad(fused_bce_1n(torch.tanh(E[h]), E, None, t, 0.1, chunk_size=4), E)
    torch.testing.assert_close(g_tied, g_plain, rtol=1e-6, atol=1e-7)
