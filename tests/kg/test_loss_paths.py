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

from tracegraph.kg.model.loss import Targets, auto_chunk_size, bce_1n, fused_bce_1n, tied_lookup


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


def _dense_reference(x, E, b, t, eps):
    x, E, b = (v.detach().double().requires_grad_() for v in (x, E, b))
    B, N = x.shape[0], E.shape[0]
    y = torch.full((B, N), eps / N, dtype=torch.float64)
    y[t.batch_index, t.entity_index] += 1 - eps
    loss = F.binary_cross_entropy_with_logits(x @ E.t() + b, y, reduction="none").mean(1).mean()
    return loss, torch.autograd.grad(loss, (x, E, b))


def test_fused_loss_of_bf16_inputs_accumulates_in_float32():
    """Mixed precision hands the loss bf16 tensors: scores and sums run in float32 (the loss is
    float32, within float32 rounding of the float64 value of the same bf16 numbers), and each
    gradient comes back in its input's dtype."""
    gen = torch.Generator().manual_seed(10)
    x, E, b = (torch.randn(*s, generator=gen).bfloat16().requires_grad_() for s in ((6, 16), (40, 16), (40,)))
    t = Targets(torch.tensor([0, 1, 1, 2, 3, 4, 5]), torch.tensor([3, 9, 0, 39, 5, 5, 17]))
    got = fused_bce_1n(x, E, b, t, 0.1, chunk_size=16)
    want, g_want = _dense_reference(x, E, b, t, 0.1)
    assert got.dtype == torch.float32
    assert abs(float(got) - float(want)) < 1e-6 * float(want)
    g_got = torch.autograd.grad(got, (x, E, b))
    for g, w in zip(g_got, g_want):
        assert g.dtype == torch.bfloat16
        torch.testing.assert_close(g.double(), w, rtol=2**-7, atol=1e-6)


def test_fused_backward_with_a_frozen_table_and_without_deprecated_resizes():
    """Only x needs a gradient (a frozen entity table): dL/dx still comes back, the table gets
    none; and no chunk writes through an ``out=`` slice of the wrong size (PyTorch resizes
    those with a deprecation warning today and will refuse them)."""
    import warnings

    gen = torch.Generator().manual_seed(11)
    x = torch.randn(4, 3, generator=gen, requires_grad=True)
    E = torch.randn(19, 3, generator=gen)
    b = torch.randn(19, generator=gen, requires_grad=True)
    t = Targets.one_per_sample(torch.tensor([0, 5, 18, 7]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gx, gb = torch.autograd.grad(fused_bce_1n(x, E, b, t, 0.1, chunk_size=5), (x, b))
        E.requires_grad_(True)
        gE = torch.autograd.grad(fused_bce_1n(x, E, b, t, 0.1, chunk_size=5), E)[0]
    _, (wx, wE, wb) = _dense_reference(x, E, b, t, 0.1)
    for g, w in ((gx, wx), (gb, wb), (gE, wE)):
        torch.testing.assert_close(g.double(), w, rtol=1e-5, atol=1e-7)


def test_the_loss_hands_its_table_gradient_to_the_tied_lookup():
    """Between the loss's backward and the lookup's, the shared dict holds the loss's dL/dE (an
    N×d tensor) for the lookup to add into: the memory saving is the protocol, so it is checked."""
    gen = torch.Generator().manual_seed(12)
    E = torch.randn(9, 4, generator=gen, requires_grad=True)
    sink: dict = {}
    seen = {}
    e_h = tied_lookup(E, torch.tensor([1, 3]), sink)
    e_h.register_hook(lambda g: seen.update(buf=sink.get("grad")))  # runs after the loss's backward
    fused_bce_1n(torch.tanh(e_h), E, None, Targets.one_per_sample(torch.tensor([0, 8])), 0.1, sink=sink).backward()
    assert seen["buf"] is not None and seen["buf"].shape == E.shape
    assert sink == {} and E.grad is not None


def test_targets_move_both_index_tensors():
    t = Targets(torch.tensor([0, 0, 1]), torch.tensor([4, 2, 7])).to("meta")
    assert t.batch_index.device.type == "meta" and t.entity_index.device.type == "meta"
    assert t.batch_index.shape == (3,) and t.entity_index.shape == (3,)


def test_losses_follow_their_inputs_device():
    """Every buffer is made on the inputs' device (CUDA in real runs). The 'meta' device stands in
    for a second device on a CPU-only machine: one tensor made on the default device would fail."""
    x = torch.empty(3, 4, device="meta", requires_grad=True)
    E = torch.empty(10, 4, device="meta", requires_grad=True)
    b = torch.empty(10, device="meta", requires_grad=True)
    t = Targets.one_per_sample(torch.tensor([1, 2, 9], device="meta"))
    assert t.batch_index.device.type == "meta"
    sink: dict = {}
    loss = fused_bce_1n(
        tied_lookup(E, torch.tensor([0, 4, 4], device="meta"), sink) + x, E, b, t, 0.1, chunk_size=4, sink=sink
    )
    grads = torch.autograd.grad(loss, (x, E, b))
    assert loss.device.type == "meta" and all(g.device.type == "meta" for g in grads)
    assert bce_1n(x @ E.t() + b, t, 0.1).device.type == "meta"
    (g_fallback,) = torch.autograd.grad(tied_lookup(E, torch.tensor([1], device="meta"), {}).sum(), E)
    assert g_fallback.device.type == "meta"


def test_sparse_loss_in_float64_under_a_float32_default():
    gen = torch.Generator().manual_seed(13)
    s = torch.randn(4, 7, generator=gen, dtype=torch.float64)
    t = Targets(torch.tensor([0, 1, 1, 3]), torch.tensor([6, 0, 2, 3]))
    y = torch.full((4, 7), 0.3 / 7, dtype=torch.float64)
    y[t.batch_index, t.entity_index] += 0.7
    got = bce_1n(s, t, 0.3)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, F.binary_cross_entropy_with_logits(s, y), rtol=1e-13, atol=0)


def test_loss_defaults_and_the_chunk_rule():
    gen = torch.Generator().manual_seed(14)
    x, E = torch.randn(2, 3, generator=gen), torch.randn(5, 3, generator=gen)
    t = Targets.one_per_sample(torch.tensor([0, 4]))
    assert torch.equal(fused_bce_1n(x, E, None, t), fused_bce_1n(x, E, None, t, 0.0))  # no smoothing by default
    # one B×chunk float32 block within 64 MiB, never below 1024 entities
    assert auto_chunk_size(128) == 64 * 2**20 // (4 * 128) == 131072
    assert auto_chunk_size(0) == auto_chunk_size(1) == 16 * 2**20
    assert auto_chunk_size(10**6) == 1024 and auto_chunk_size(16384) == 1024
    assert auto_chunk_size(100, budget_bytes=4 * 100 * 3000 + 7) == 3000
    assert isinstance(auto_chunk_size(3), int)


def test_tied_lookup_dense_fallback_keeps_the_table_dtype():
    E = torch.arange(12.0, dtype=torch.float64).reshape(4, 3).requires_grad_()
    (g,) = torch.autograd.grad(tied_lookup(E, torch.tensor([3, 3]), {}).sum() * (1 + 1e-12), E)
    assert g.dtype == torch.float64
    assert g[3].tolist() == [2 * (1 + 1e-12)] * 3 and g[:3].abs().sum() == 0
