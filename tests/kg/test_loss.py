"""The sparse and fused 1-N losses against the dense BCE reference (label matrix built here)."""

import pytest
import torch
import torch.nn.functional as F

from tracegraph.kg.model.loss import Targets, bce_1n, fused_bce_1n, stored_bce_1n


@pytest.fixture(autouse=True)
def float64_default():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def dense_reference(scores, targets, eps, reduction="mean"):
    B, N = scores.shape
    y = torch.zeros(B, N, dtype=scores.dtype)
    y[targets.batch_index, targets.entity_index] = 1.0
    y = (1 - eps) * y + eps / N
    per = F.binary_cross_entropy_with_logits(scores, y, reduction="none").mean(1)
    return per.mean() if reduction == "mean" else per


def make_targets(mode, B, N, gen):
    if mode == "1vsall":
        return Targets.one_per_sample(torch.randint(0, N, (B,), generator=gen))
    # KvsAll: a random set of distinct true tails per sample (some samples have several)
    mask = torch.rand(B, N, generator=gen) < 0.15
    mask[torch.arange(B), torch.randint(0, N, (B,), generator=gen)] = True
    bi, ei = mask.nonzero(as_tuple=True)
    return Targets(bi, ei)


@pytest.mark.parametrize("mode", ["1vsall", "kvsall"])
@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_sparse_loss_equals_dense(mode, eps, reduction):
    gen = torch.Generator().manual_seed(1)
    B, N = 7, 53
    scores = (3 * torch.randn(B, N, generator=gen)).requires_grad_()
    t = make_targets(mode, B, N, gen)
    got = bce_1n(scores, t, eps, reduction)
    want = dense_reference(scores, t, eps, reduction)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
    w = torch.randn(got.shape, generator=gen)
    (g1,) = torch.autograd.grad((got * w).sum(), scores)
    (g2,) = torch.autograd.grad((want * w).sum(), scores)
    torch.testing.assert_close(g1, g2, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("mode", ["1vsall", "kvsall"])
@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("with_bias", [True, False])
def test_fused_chunked_equals_dense(mode, eps, with_bias):
    gen = torch.Generator().manual_seed(2)
    B, N, d = 6, 37, 5
    x = torch.randn(B, d, generator=gen, requires_grad=True)
    E = torch.randn(N, d, generator=gen, requires_grad=True)
    b = torch.randn(N, generator=gen, requires_grad=True) if with_bias else None
    t = make_targets(mode, B, N, gen)
    got = fused_bce_1n(x, E, b, t, eps, chunk_size=8)  # 5 chunks, the last one partial
    scores = x @ E.t() + (b if b is not None else 0)
    want = dense_reference(scores, t, eps)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
    params = [x, E] + ([b] if b is not None else [])
    g1 = torch.autograd.grad(got, params)
    g2 = torch.autograd.grad(want, params)
    for a, c in zip(g1, g2):
        torch.testing.assert_close(a, c, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("mode", ["1vsall", "kvsall"])
@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_stored_logits_loss_equals_dense(mode, eps, with_bias, reduction, monkeypatch):
    """stored_bce_1n (logits kept, their gradient made in place) against the dense label matrix:
    value and the gradients of x, E and b, also for padded targets (weight 0 counts nothing)."""
    import tracegraph.kg.model.loss as loss_module

    monkeypatch.setattr(loss_module, "_ROW_BLOCK_BYTES", 4 * 37 * 8)  # softplus in blocks of 4 rows: 4 + 2
    gen = torch.Generator().manual_seed(4)
    B, N, d = 6, 37, 5
    x = torch.randn(B, d, generator=gen, requires_grad=True)
    E = torch.randn(N, d, generator=gen, requires_grad=True)
    b = torch.randn(N, generator=gen, requires_grad=True) if with_bias else None
    t = make_targets(mode, B, N, gen)
    pad = torch.randint(0, N, (4,), generator=gen)  # padding rows point at arbitrary entities
    padded = Targets(
        torch.cat([t.batch_index, torch.tensor([0, 2, 5, 5])]),
        torch.cat([t.entity_index, pad]),
        torch.cat([torch.ones(len(t.batch_index)), torch.zeros(4)]),
    )
    scores = x @ E.t() + (b if b is not None else 0)
    want = dense_reference(scores, t, eps, reduction)
    w = torch.randn(want.shape, generator=gen)
    params = [x, E] + ([b] if b is not None else [])
    g_want = torch.autograd.grad((want * w).sum(), params)
    for targets in (t, padded):
        got = stored_bce_1n(x, E, b, targets, eps, reduction)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
        for a, c in zip(torch.autograd.grad((got * w).sum(), params), g_want):
            torch.testing.assert_close(a, c, rtol=1e-6, atol=1e-12)


def test_fused_gradcheck():
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(3, 4, generator=gen, requires_grad=True)
    E = torch.randn(11, 4, generator=gen, requires_grad=True)
    b = torch.randn(11, generator=gen, requires_grad=True)
    t = Targets.one_per_sample(torch.tensor([0, 5, 10]))
    assert torch.autograd.gradcheck(lambda x, E, b: fused_bce_1n(x, E, b, t, 0.1, "none", 4), (x, E, b))


def test_float32_inputs_accumulate_stably():
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(4, 8, generator=gen, dtype=torch.float32)
    E = torch.randn(5000, 8, generator=gen, dtype=torch.float32)
    t = Targets.one_per_sample(torch.tensor([1, 2, 3, 4]))
    ref = dense_reference((x @ E.t()).double(), t, 0.1)
    got = fused_bce_1n(x, E, None, t, 0.1, chunk_size=1024)
    assert abs(got.item() - ref.item()) / ref.item() < 1e-5


@pytest.mark.parametrize("mode", ["1vsall", "kvsall"])
@pytest.mark.parametrize("ckpt", [False, True])
def test_tied_lookup_objective_gradients_equal_dense(mode, ckpt):
    """The training objective's fused path (head lookup adding into the loss's dE buffer) gives
    every parameter the gradient of the plain dense-BCE objective."""
    from tracegraph.kg.model.conve import ConvE, ConvEConfig
    from tracegraph.kg.model.objective import TrainingObjective

    gen = torch.Generator().manual_seed(5)
    m = (
        ConvE(
            ConvEConfig(
                num_entities=23,
                num_relations=3,
                embedding_dim=12,
                embedding_height=3,
                embedding_width=4,
                output_channels=4,
                input_dropout=0,
                feature_map_dropout=0,
                output_dropout=0,
            )
        )
        .double()
        .train()
    )
    m.gradient_checkpointing = ckpt
    h = torch.tensor([0, 3, 3, 7, 22, 5])  # repeated heads, and heads that are also targets
    r = torch.tensor([0, 1, 5, 2, 4, 0])
    t = make_targets(mode, 6, 23, gen)
    if not ((t.batch_index == 1) & (t.entity_index == 3)).any():  # sample 1's head is also its tail
        keep = t.batch_index != 1 if mode == "1vsall" else torch.ones_like(t.batch_index, dtype=torch.bool)
        t = Targets(
            torch.cat([t.batch_index[keep], torch.tensor([1])]), torch.cat([t.entity_index[keep], torch.tensor([3])])
        )
    grads = {}
    for fused in (False, True):
        m.zero_grad()
        TrainingObjective(m, fused, 5, 0.1)(h, r, t.batch_index, t.entity_index).backward()
        grads[fused] = {k: p.grad.clone() for k, p in m.named_parameters()}
    m.zero_grad()
    dense_reference(m(h, r), t, 0.1).backward()
    for k, p in m.named_parameters():
        torch.testing.assert_close(grads[True][k], p.grad, rtol=1e-6, atol=1e-12)
        torch.testing.assert_close(grads[False][k], p.grad, rtol=1e-6, atol=1e-12)
