"""GT-SSL's growth loss through its real head, against a float64 computation by hand (issue #18).

The head is Linear → SiLU → Linear (module doc: "a head predicts both histograms from the node's
embedding"); the targets are soft histograms of the children's lengths and branching angles,
averaged within the nodes with one child and within the nodes with several (roots included:
a root's child count must not include its self-parent). Everything expected here is numpy
float64 written from those definitions, not from the implementation's tensors.
"""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from tracegraph.trees.gtssl import GTSSL, emd_1d, sample_order_pairs

HID, B, CUTOFF = 5, 6, 2.0


class FixedEncoder(nn.Module):
    """Returns the given node embeddings (and checks it is handed the tree)."""

    def __init__(self, h):
        super().__init__()
        self.cfg = SimpleNamespace(hidden_channels=HID, cutoff=CUTOFF)
        self.h = torch.as_tensor(h, dtype=torch.float32)

    def forward(self, x, pos, paths, batch, num_graphs):
        assert len(x) == len(self.h)
        return self.h.clone(), None


def _soft_hist(v):
    c = (np.arange(B) + 0.5) / B
    w = np.exp(-0.5 * ((np.clip(v, 0, 1) - c) * B) ** 2)
    return w / w.sum()


def _emd(p, q):
    return np.abs(np.cumsum(p) - np.cumsum(q))[:-1].sum() / B


def _silu(x):
    return x / (1 + np.exp(-x))


def _expected_growth(m, h, parent, pos, act=_silu, root_as_branch_point=False):
    W1, b1, W2, b2 = (p.detach().double().numpy() for p in m.growth_head.parameters())  # Linear, Linear
    logits = act(h @ W1.T + b1) @ W2.T + b2
    pl = np.exp(logits[:, :B]) / np.exp(logits[:, :B]).sum(1, keepdims=True)
    pa = np.exp(logits[:, B:]) / np.exp(logits[:, B:]).sum(1, keepdims=True)
    n = len(parent)
    kids = {v: [c for c in range(n) if parent[c] == v and c != v] for v in range(n)}
    total = 0.0
    for kind in ("length", "angle"):
        per_group = {1: [], 2: []}
        for v in range(n):
            if not kids[v]:
                continue
            if kind == "length":
                target = np.mean([_soft_hist(np.linalg.norm(pos[c] - pos[v]) / CUTOFF) for c in kids[v]], 0)
                pred = pl[v]
            else:
                if parent[v] == v:  # a root has no parent segment: no angle target
                    continue
                a = pos[v] - pos[parent[v]]
                target = np.mean(
                    [
                        _soft_hist(
                            math.atan2(np.linalg.norm(np.cross(a, pos[c] - pos[v])), float(a @ (pos[c] - pos[v])))
                            / math.pi
                        )
                        for c in kids[v]
                    ],
                    0,
                )
                pred = pa[v]
            one = len(kids[v]) == 1 and not (root_as_branch_point and parent[v] == v)
            per_group[1 if one else 2].append(_emd(pred, target))
        total += sum(np.mean(g) for g in per_group.values() if g)
    return total


# root 0 has exactly one child (1); 1 branches into 2 and 3; 2 has one child 4; 3 two children 5, 6
PARENT = [0, 0, 1, 1, 2, 3, 3]
POS = np.array(
    [[0, 0, 0], [0.9, 0.1, 0], [1.3, 0.8, 0.2], [1.5, -0.6, 0.1], [1.2, 1.9, 0.9], [2.6, -0.2, -0.4], [1.9, -1.7, 0.5]],
    dtype=np.float64,
)


def _tree():
    n = len(PARENT)
    depth = [0] * n
    for v in range(n):
        depth[v] = 0 if PARENT[v] == v else depth[PARENT[v]] + 1
    return SimpleNamespace(
        x=torch.zeros(n, 1),
        pos=torch.tensor(POS, dtype=torch.float32),
        paths=None,
        parent=torch.tensor(PARENT),
        depth=torch.tensor(depth),
        num_nodes=n,
    )


def test_growth_loss_through_the_real_head_matches_float64_by_hand():
    torch.manual_seed(3)
    h = np.random.default_rng(1).normal(scale=1.5, size=(len(PARENT), HID))
    m = GTSSL(FixedEncoder(h), order_dim=3, num_bins=B)
    with torch.no_grad():  # away from the defaults, and large enough that SiLU is far from linear
        for p in m.growth_head.parameters():
            p.mul_(3.0)
    got = float(m.losses(_tree(), torch.Generator().manual_seed(0))["growth"].detach())
    want = _expected_growth(m, h, PARENT, POS)
    assert got == pytest.approx(want, rel=1e-5, abs=1e-7)

    # the fixture tells the alternatives apart: no hidden non-linearity, or the one-child root
    # counted with the branch points, give other numbers (so the comparison above can fail)
    assert abs(_expected_growth(m, h, PARENT, POS, act=lambda x: x) - want) > 1e-2
    assert abs(_expected_growth(m, h, PARENT, POS, root_as_branch_point=True) - want) > 1e-2


def test_growth_head_is_linear_silu_linear_of_the_hidden_width():
    m = GTSSL(FixedEncoder(np.zeros((1, HID))), num_bins=B)
    shapes = [tuple(p.shape) for p in m.growth_head.parameters()]
    assert shapes == [(HID, HID), (HID,), (2 * B, HID), (2 * B,)]
    x = torch.randn(4, HID, dtype=torch.float64) * 3
    W1, b1, W2, b2 = (p.detach().double() for p in m.growth_head.parameters())
    out = m.growth_head.double()(x).detach().numpy()
    by_hand = _silu((x @ W1.T + b1).numpy()) @ W2.numpy().T + b2.numpy()
    np.testing.assert_allclose(out, by_hand, rtol=1e-12, atol=1e-12)


def test_documented_defaults():
    """GTSSL's 16 bins (so a 32-wide growth head), emd_1d's unit bin width, two samples per node."""
    m = GTSSL(FixedEncoder(np.zeros((1, HID))))
    assert m.num_bins == 16 and m.growth_head[-1].out_features == 32
    assert (m.margin, m.num_samples) == (1.0, 2)
    p, q = torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 0.0, 1.0])
    assert float(emd_1d(p, q)) == pytest.approx(2.0)  # the mass moves two bins of width 1
    # a two-node tree: the child gets one ancestor pair per sample, two by default
    anc, desc, _, _ = sample_order_pairs(
        torch.tensor([0, 0]),
        torch.tensor([0, 1]),
        torch.zeros(2, dtype=torch.long),
        generator=torch.Generator().manual_seed(0),
    )
    assert anc.tolist() == [0, 0] and desc.tolist() == [1, 1]
