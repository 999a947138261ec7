"""The 1-N softmax cross-entropy (``--loss ce``) against a dense float64 target matrix built by hand:
padding weights, every reduction, half-precision logits."""

import pytest
import torch

from tracegraph.kg.model.loss import Targets
from tracegraph.kg.model.softmax_loss import ce_1n

B, N, EPS = 4, 9, 0.2
# samples with 1, 2, 1 and 3 true tails
BI = [0, 1, 1, 2, 3, 3, 3]
TI = [4, 0, 8, 2, 1, 5, 6]


def dense_per_sample(scores: torch.Tensor, eps: float) -> torch.Tensor:
    """-Σ_j y_j log softmax(s)_j with y = eps/N everywhere plus (1-eps)/k on each of the k true tails."""
    y = torch.full((B, N), eps / N, dtype=torch.float64)
    for b in range(B):
        tails = [t for bb, t in zip(BI, TI) if bb == b]
        for t in tails:
            y[b, t] += (1 - eps) / len(tails)
    return -(y * torch.log_softmax(scores.double(), 1)).sum(1)


def scores_():
    torch.manual_seed(3)
    return torch.randn(B, N, dtype=torch.float64) * 3


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_each_reduction_of_the_per_sample_cross_entropy(reduction):
    s = scores_()
    per = dense_per_sample(s, EPS)
    want = {"mean": per.mean(), "sum": per.sum(), "none": per}[reduction]
    got = ce_1n(s, Targets(torch.tensor(BI), torch.tensor(TI)), EPS, reduction)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_padding_with_weight_zero_changes_neither_value_nor_gradient():
    """A CUDA-graph replay pads the targets with weight-0 pairs (pointing anywhere): the loss and its
    gradient are those of the unpadded targets, and a true tail's count k ignores the padding."""
    s = scores_().requires_grad_()
    plain = ce_1n(s, Targets(torch.tensor(BI), torch.tensor(TI)), EPS)
    bi = torch.tensor(BI + [0, 0, 2, 3])
    ti = torch.tensor(TI + [4, 7, 0, 8])
    w = torch.tensor([1.0] * len(BI) + [0.0] * 4, dtype=torch.float64)
    padded = ce_1n(s, Targets(bi, ti, w), EPS)
    torch.testing.assert_close(padded, dense_per_sample(s.detach(), EPS).mean(), rtol=1e-12, atol=1e-12)
    (g_plain,) = torch.autograd.grad(plain, s)
    (g_padded,) = torch.autograd.grad(padded, s)
    torch.testing.assert_close(g_padded, g_plain, rtol=0, atol=1e-15)


def test_gradient_is_softmax_minus_targets_over_the_batch():
    """d/ds of the mean cross-entropy is (softmax(s) - y) / B: written out, not through autograd of a reference."""
    s = scores_().requires_grad_()
    (g,) = torch.autograd.grad(ce_1n(s, Targets(torch.tensor(BI), torch.tensor(TI)), EPS), s)
    y = torch.full((B, N), EPS / N, dtype=torch.float64)
    for b in range(B):
        tails = [t for bb, t in zip(BI, TI) if bb == b]
        y[b, tails] += (1 - EPS) / len(tails)
    torch.testing.assert_close(g, (torch.softmax(s.detach(), 1) - y) / B, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_logits_are_summed_in_float32(dtype):
    """Large half-precision logits: the loss is computed in float32 (a bf16 logsumexp would be off
    by whole units), and comes back as float32."""
    s = (scores_() * 10).to(dtype)
    got = ce_1n(s, Targets(torch.tensor(BI), torch.tensor(TI)), EPS)
    assert got.dtype == torch.float32
    want = dense_per_sample(s.double(), EPS).mean()
    assert abs(got.double().item() - want.item()) < 1e-4 * abs(want.item())


def test_without_smoothing_only_the_true_tails_carry_mass():
    s = scores_()
    got = ce_1n(s, Targets(torch.tensor([0, 0]), torch.tensor([1, 3])), 0.0, "none")
    lsm = torch.log_softmax(s, 1)
    assert got[0].item() == pytest.approx(-(lsm[0, 1] + lsm[0, 3]).item() / 2, rel=1e-12)
    # samples without any true tail: only logsumexp remains (no division by zero)
    torch.testing.assert_close(got[1:], torch.logsumexp(s[1:], 1), rtol=1e-12, atol=1e-12)
    # no smoothing unless asked: the default is 0
    default = ce_1n(s, Targets(torch.tensor([0, 0]), torch.tensor([1, 3])))
    assert default.item() == pytest.approx((-(lsm[0, 1] + lsm[0, 3]) / 2 + torch.logsumexp(s[1:], 1).sum()).item() / 4)


def test_float32_padding_weights_with_float64_logits():
    """Batches carry their 0/1 weights in float32 (kg/model/batching.py) whatever the logits' dtype."""
    s = scores_()
    w = torch.ones(len(BI), dtype=torch.float32)
    got = ce_1n(s, Targets(torch.tensor(BI), torch.tensor(TI), w), EPS)
    torch.testing.assert_close(got, dense_per_sample(s, EPS).mean(), rtol=1e-12, atol=1e-12)


def test_every_intermediate_stays_on_the_logits_device():
    """On ``meta`` (standing in for CUDA) a tensor made on the default device would fail the index_add."""
    s = torch.empty(B, N, device="meta")
    t = Targets(torch.tensor(BI, device="meta"), torch.tensor(TI, device="meta"))
    assert ce_1n(s, t, EPS, "none").device.type == "meta"
    w = torch.ones(len(BI), device="meta")
    assert ce_1n(s, Targets(t.batch_index, t.entity_index, w), EPS).device.type == "meta"
