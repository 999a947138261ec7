import pytest
import torch
import torch.nn.functional as F

from tracegraph.errors import TracegraphError
from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.model.cpu_kernels import conv_as_bmm
from tracegraph.kg.model.loss import Targets, bce_1n


def small_model(**kw):
    torch.manual_seed(0)
    cfg = ConvEConfig(
        num_entities=30,
        num_relations=4,
        embedding_dim=12,
        embedding_height=3,
        embedding_width=4,
        **{"output_channels": 4, **kw},
    )
    return ConvE(cfg)


@pytest.mark.parametrize("axis", ["height", "width"])
def test_shapes_and_score_consistency(axis):
    m = small_model(concat_axis=axis).eval()
    h, r, t = torch.tensor([0, 5, 7]), torch.tensor([0, 3, 7]), torch.tensor([1, 2, 29])
    all_s = m.score_all(h, r)
    assert all_s.shape == (3, 30)
    torch.testing.assert_close(m.score_triples(h, r, t), all_s[torch.arange(3), t])


def test_config_errors():
    with pytest.raises(TracegraphError, match="must equal"):
        ConvEConfig(num_entities=3, num_relations=1, embedding_dim=10, embedding_height=3, embedding_width=4)


def test_vmap_grad_equals_per_example_loop():
    """The forward is vmap-able: per-example gradients by torch.func equal a Python loop."""
    m = small_model().eval()
    params = {k: v.detach() for k, v in m.named_parameters()}
    buffers = {k: v.detach() for k, v in m.named_buffers()}

    def loss_one(p, h, r, t):
        s = torch.func.functional_call(m, (p, buffers), (h[None], r[None]))
        return bce_1n(s, Targets.one_per_sample(t[None]), 0.1)

    h, r, t = torch.tensor([0, 1, 2, 3]), torch.tensor([0, 1, 2, 7]), torch.tensor([5, 6, 7, 8])
    batched = torch.func.vmap(torch.func.grad(loss_one), in_dims=(None, 0, 0, 0))(params, h, r, t)
    for i in range(4):
        m.zero_grad()
        s = m(h[i : i + 1], r[i : i + 1])
        bce_1n(s, Targets.one_per_sample(t[i : i + 1]), 0.1).backward()
        for k, p in m.named_parameters():
            torch.testing.assert_close(batched[k][i], p.grad, rtol=1e-5, atol=1e-7)


def test_gradient_checkpointing_same_gradients():
    m = small_model().train()
    h, r, t = torch.tensor([0, 1, 2, 3]), torch.tensor([0, 1, 2, 7]), torch.tensor([5, 6, 7, 8])
    grads = []
    for ckpt in (False, True):
        m.gradient_checkpointing = ckpt
        m.zero_grad()
        torch.manual_seed(5)  # same dropout masks
        bce_1n(m(h, r), Targets.one_per_sample(t), 0.1).backward()
        grads.append({k: p.grad.clone() for k, p in m.named_parameters()})
    for k in grads[0]:
        torch.testing.assert_close(grads[0][k], grads[1][k])


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("p", [0.3, 0.0])
def test_one_buffer_conv_block_equals_the_modules_bit_for_bit(p, momentum):
    """Training on a CPU, bn1 → ReLU → Dropout2d runs as one fused Function; against the same
    model through the nn modules (same seed): scores, every gradient and BatchNorm's running
    statistics and batch count are identical over three steps, so the dropout masks are too. The
    BatchNorm has a learned scale and shift away from 1 and 0, a cumulative average (momentum
    None) as well as the default, and more filters (5) than the feature map has rows (4)."""
    import copy

    fused = small_model(feature_map_dropout=p, output_channels=5).train()
    with torch.no_grad():
        fused.bn1.weight.uniform_(0.5, 1.5)
        fused.bn1.bias.normal_()
    fused.bn1.momentum = momentum
    modules = copy.deepcopy(fused)
    modules._one_buffer_block = lambda z1: False
    h, r = torch.tensor([0, 5, 7, 7, 29, 3]), torch.tensor([0, 3, 7, 1, 2, 2])
    weights = torch.linspace(-1, 1, 30)
    seen = []
    for m in (fused, modules):
        torch.manual_seed(5)
        for _ in range(3):
            m.zero_grad()
            s = m(h, r)
            (torch.sigmoid(s) * weights).sum().backward()
        seen.append((s.detach(), {k: v.grad for k, v in m.named_parameters()}, dict(m.named_buffers())))
    assert torch.equal(seen[0][0], seen[1][0])
    for k in seen[0][1]:
        assert torch.equal(seen[0][1][k], seen[1][1][k]), k
    for k in seen[0][2]:
        assert torch.equal(seen[0][2][k], seen[1][2][k]), k
    assert int(seen[0][2]["bn1.num_batches_tracked"]) == 3
    assert fused._one_buffer_block(torch.zeros(1)) and not fused.eval()._one_buffer_block(torch.zeros(1))


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("axis", ["height", "width"])
@pytest.mark.parametrize("kernel", [3, 2])
def test_cpu_training_convolution_equals_conv2d(axis, kernel, bias):
    """Training on a CPU the convolution runs as a batched matmul over patches: in float64 its
    output and its gradients (input, filters, bias) equal F.conv2d's to rounding, for either
    stacking of the image, any kernel size, and a convolution with or without a bias."""
    m = small_model(concat_axis=axis, kernel_size=kernel).double().train()
    if not bias:
        m.conv.bias = None
    x = torch.randn(5, 1, *m.config.image_shape, dtype=torch.float64, requires_grad=True)
    g = torch.randn_like(F.conv2d(x, m.conv.weight))
    assert m._conv_by_bmm(x)
    ours = conv_as_bmm(m.conv, x)
    ref = F.conv2d(x, m.conv.weight, m.conv.bias)
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-12)
    wrt = (x, m.conv.weight, m.conv.bias) if bias else (x, m.conv.weight)
    for a, b in zip(torch.autograd.grad(ours, wrt, g), torch.autograd.grad(ref, wrt, g)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-11)


def test_convolution_by_matmul_only_where_it_applies():
    """The matmul convolution is for plain stride-1 Conv2d training on a CPU; evaluation, a
    recorded forward (TracIn's factors) and other convolutions keep nn.Conv2d."""
    m = small_model().train()
    z = torch.zeros(1)
    assert m._conv_by_bmm(z)
    with torch.no_grad():
        assert not m._conv_by_bmm(z)
    assert not m.eval()._conv_by_bmm(z)
    m.train().conv.padding = (1, 1)
    assert not m._conv_by_bmm(z)
    calls = []
    m = small_model().train()
    m.conv.register_forward_hook(lambda *a: calls.append(1))
    m.encode(torch.randn(2, 12), torch.randn(2, 12))
    assert calls == []
    m.encode(torch.randn(2, 12), torch.randn(2, 12), record={})
    assert calls == [1]


def test_training_step_with_matmul_convolution_matches_the_modules():
    """A float64 training step through the CPU kernels (matmul convolution, fused bn1 block) and the
    same model through nn modules, same seed: scores, every gradient and BatchNorm's running
    statistics agree to rounding over three steps."""
    import copy

    fast = small_model(feature_map_dropout=0.3).double().train()
    modules = copy.deepcopy(fast)
    modules._conv_by_bmm = lambda z0: False
    modules._one_buffer_block = lambda z1: False
    h, r = torch.tensor([0, 5, 7, 7, 29, 3]), torch.tensor([0, 3, 7, 1, 2, 2])
    weights = torch.linspace(-1, 1, 30, dtype=torch.float64)
    seen = []
    for m in (fast, modules):
        torch.manual_seed(5)
        for _ in range(3):
            m.zero_grad()
            s = m(h, r)
            (torch.sigmoid(s) * weights).sum().backward()
        seen.append((s.detach(), {k: v.grad for k, v in m.named_parameters()}, dict(m.named_buffers())))
    torch.testing.assert_close(seen[0][0], seen[1][0], rtol=0, atol=1e-12)
    for part in (1, 2):
        for k in seen[0][part]:
            torch.testing.assert_close(seen[0][part][k], seen[1][part][k], rtol=1e-9, atol=1e-12, msg=k)
