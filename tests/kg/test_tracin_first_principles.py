"""TracIn against a reference that shares no code with tracegraph's influence engine.

The reference re-implements ConvE's eval-mode forward with plain ``torch.nn.functional`` calls
on a float64 copy of each checkpoint's state dict, writes both loss conventions out by hand, and
takes every per-triple gradient with one ``torch.autograd.grad`` call. It never touches
``compute_influence``, ``_directions``, ``example_loss`` or ``ConvE.forward``, so a bug in any of
them (a dropped η_k, r instead of r⁻¹ in the reverse direction, only the last checkpoint kept)
makes the engine disagree with it.

The fixture is built so that each of those bugs changes the answer: two checkpoints whose
learning rates differ (0.7 and 0.05), reciprocal relation rows that differ from the forward rows,
and BatchNorm running statistics away from (0, 1).
"""

import math

import numpy as np
import pytest
import torch

from tests.kg.conve_reference import direction_loss
from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.model.model_io import model_payload
from tracegraph.kg.explain.tracin.engine import InfluenceOptions, compute_influence
from tracegraph.runtime.checkpoints import save_checkpoint

N_ENT, N_REL = 7, 2
CFG = dict(
    num_entities=N_ENT,
    num_relations=N_REL,
    embedding_dim=6,
    embedding_height=2,
    embedding_width=3,
    output_channels=2,
    kernel_size=2,
    reciprocal=True,
)
LRS = (0.7, 0.05)
SMOOTHING = 0.2
TRAIN = np.array([[0, 0, 1], [1, 1, 2], [2, 0, 3], [3, 1, 0], [4, 0, 5], [6, 1, 4]])
TEST = np.array([[0, 1, 6], [5, 0, 2]])


def _checkpoint(seed: int, reciprocal: bool = True) -> ConvE:
    torch.manual_seed(seed)
    m = ConvE(ConvEConfig(**dict(CFG, reciprocal=reciprocal))).eval()
    with torch.no_grad():
        for p in m.parameters():  # everything non-trivial, BatchNorm affine and entity bias included
            p.add_(0.3 * torch.randn_like(p))
        for bn in (m.bn0, m.bn1, m.bn2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    return m


def _save_checkpoints(d, reciprocal=True):
    paths, states = [], []
    for k, lr in enumerate(LRS):
        m = _checkpoint(seed=10 + k, reciprocal=reciprocal)
        # the reverse direction must read other rows than the forward one, or r vs r⁻¹ is invisible
        assert not reciprocal or not torch.allclose(m.relation.weight[:N_REL], m.relation.weight[N_REL:])
        p = d / f"epoch_{k + 1:04d}.pt"
        save_checkpoint(p, model_payload(m, k + 1, lr, {}))
        paths.append(p)
        states.append({n: t.detach().double().clone() for n, t in m.state_dict().items() if t.is_floating_point()})
    return paths, states


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return _save_checkpoints(tmp_path_factory.mktemp("tracin_ref"))


def _direction_loss(s, h, r, t, loss):
    return direction_loss(s, h, r, t, loss, SMOOTHING, CFG["embedding_height"], CFG["embedding_width"])


def _triple_gradient(s, names, triple, loss, reciprocal=True) -> torch.Tensor:
    h, r, t = (int(v) for v in triple)
    # a reciprocal model's triple loss: forward direction plus (t, r⁻¹, h), r⁻¹ = r + |R|
    value = _direction_loss(s, h, r, t, loss)
    if reciprocal:
        value = value + _direction_loss(s, t, r + N_REL, h, loss)
    grads = torch.autograd.grad(value, [s[n] for n in names])
    return torch.cat([g.reshape(-1) for g in grads])


def reference_influence(states, loss, lrs=LRS, reciprocal=True):
    """Σ_k η_k ⟨∇ℓ(θ_k, test), ∇ℓ(θ_k, train)⟩ in float64, and both self-influences."""
    scores = np.zeros((len(TEST), len(TRAIN)))
    train_self, test_self = np.zeros(len(TRAIN)), np.zeros(len(TEST))
    for lr, state in zip(lrs, states):
        s = {n: t.clone().requires_grad_(t.is_floating_point() and "running" not in n) for n, t in state.items()}
        names = [n for n, t in s.items() if t.requires_grad]
        gtr = torch.stack([_triple_gradient(s, names, x, loss, reciprocal) for x in TRAIN]).numpy()
        gte = torch.stack([_triple_gradient(s, names, x, loss, reciprocal) for x in TEST]).numpy()
        scores += lr * gte @ gtr.T
        train_self += lr * (gtr * gtr).sum(1)
        test_self += lr * (gte * gte).sum(1)
    return scores, train_self, test_self


@pytest.mark.parametrize("loss", ["train-loss", "score", "logit"])
@pytest.mark.parametrize("method", ["exact", "autograd", "vmap"])
def test_influence_equals_float64_first_principles(checkpoints, loss, method):
    paths, states = checkpoints
    ref, ref_train_self, ref_test_self = reference_influence(states, loss)
    opts = InfluenceOptions(engine=method, loss=loss, label_smoothing=SMOOTHING, batch_size=4, test_batch_size=1)
    res = compute_influence(paths, TRAIN, TEST, opts, torch.device("cpu"))
    scale = np.abs(ref).max()
    assert scale > 1e-3  # not a vacuous comparison of zeros
    np.testing.assert_allclose(res.scores, ref, rtol=0, atol=2e-5 * scale)
    np.testing.assert_allclose(res.train_self, ref_train_self, rtol=2e-5)
    np.testing.assert_allclose(res.test_self, ref_test_self, rtol=2e-5)
    assert [c.lr for c in res.checkpoints] == list(LRS)


@pytest.mark.parametrize("method", ["exact", "autograd"])
def test_influence_without_reciprocal_relations(tmp_path, method):
    paths, states = _save_checkpoints(tmp_path, reciprocal=False)
    ref, ref_train_self, ref_test_self = reference_influence(states, "train-loss", reciprocal=False)
    opts = InfluenceOptions(
        engine=method, loss="train-loss", label_smoothing=SMOOTHING, batch_size=4, test_batch_size=2
    )
    res = compute_influence(paths, TRAIN, TEST, opts, torch.device("cpu"))
    assert [(c.path, c.epoch, c.lr) for c in res.checkpoints] == [
        (str(p), k + 1, lr) for k, (p, lr) in enumerate(zip(paths, LRS))
    ]
    assert res.layers[0] == "relation.weight" and res.layers[-1] == "entity_bias" and len(res.layers) == 13
    np.testing.assert_allclose(res.scores, ref, rtol=0, atol=2e-5 * np.abs(ref).max())
    np.testing.assert_allclose(res.train_self, ref_train_self, rtol=2e-5)
    np.testing.assert_allclose(res.test_self, ref_test_self, rtol=2e-5)


def test_fixture_distinguishes_the_plausible_wrong_answers(checkpoints):
    """Each wrong formula the test above must reject gives a visibly different matrix here."""
    _, states = checkpoints
    right, _, _ = reference_influence(states, "train-loss")
    per_ckpt = [reference_influence([s], "train-loss", lrs=(1.0,))[0] for s in states]
    no_lr = per_ckpt[0] + per_ckpt[1]
    last_only = LRS[1] * per_ckpt[1]
    for wrong in (no_lr, last_only):
        assert np.abs(wrong - right).max() > 1e-2 * np.abs(right).max()
    assert math.isclose(float((LRS[0] * per_ckpt[0] + LRS[1] * per_ckpt[1]).sum()), float(right.sum()), rel_tol=1e-9)


def test_influence_streamed_to_disk_when_over_the_memory_budget(checkpoints, tmp_path):
    paths, states = checkpoints
    ref, _, _ = reference_influence(states, "score")
    opts = InfluenceOptions(
        loss="score", batch_size=4, memory_budget_bytes=len(TEST) * len(TRAIN) * 8 - 1, scratch_dir=str(tmp_path)
    )
    res = compute_influence(paths, TRAIN, TEST, opts, torch.device("cpu"))
    assert isinstance(res.scores, np.memmap) and res.scores.dtype == np.float32 and res.scores.shape == ref.shape
    np.testing.assert_allclose(res.scores, ref, rtol=0, atol=2e-5 * np.abs(ref).max())
    at_budget = InfluenceOptions(loss="score", memory_budget_bytes=len(TEST) * len(TRAIN) * 8)
    assert not isinstance(compute_influence(paths, TRAIN, TEST, at_budget, torch.device("cpu")).scores, np.memmap)
