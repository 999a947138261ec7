"""GT-SSL losses on trees small enough to compute by hand, and a pretraining resume that a
seeded rerun cannot imitate.

The heads are replaced by modules that return chosen outputs, so the order embedding z and the
growth logits are known numbers; the encoder is a stub. What is checked is how ``GTSSL.losses``
combines them: which node is "upper" in a pair, the margin term of non-ancestor pairs, and which
half of the growth logits predicts which histogram. The pair sampling, the growth targets and the
losses also run with the meta device as the caller's default device: they must compute on their
inputs' device (the CPU) and give what the same call gives without that default.
"""

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn
from torch_geometric.loader import DataLoader

from tracegraph.trees.cache import build_dataset
from tracegraph.trees.synthetic import synthetic_trees
from tracegraph.trees.gtssl import GTSSL, growth_targets, sample_order_pairs
from tracegraph.trees.train import DataConfig, TrainConfig, pretrain


class StubEncoder(nn.Module):
    def __init__(self, cutoff=1.0):
        super().__init__()
        self.cfg = SimpleNamespace(hidden_channels=4, cutoff=cutoff)
        self.w = nn.Parameter(torch.zeros(()))

    def forward(self, x, pos, paths, batch, num_graphs):
        return torch.zeros(len(x), 4, device=x.device) + self.w, None


class Fixed(nn.Module):
    """A head whose output is a given [nodes, k] tensor, whatever its input."""

    def __init__(self, out: torch.Tensor):
        super().__init__()
        self.out = out

    def forward(self, h):
        return self.out + 0 * h.sum()


def tree(parent, pos=None):
    parent = torch.tensor(parent)
    n = len(parent)
    depth = torch.zeros(n, dtype=torch.long)
    for v in range(n):  # parents come first
        depth[v] = 0 if parent[v] == v else depth[parent[v]] + 1
    pos = torch.tensor(pos, dtype=torch.float32) if pos is not None else torch.zeros(n, 3)
    return SimpleNamespace(x=torch.zeros(n, 1), pos=pos, paths=None, parent=parent, depth=depth, num_nodes=n)


def order_model(z, num_samples=8):
    z = np.asarray(z, dtype=np.float64)
    m = GTSSL(StubEncoder(), order_dim=z.shape[1], num_bins=4, margin=1.0, num_samples=num_samples)
    m.order_head = Fixed(torch.logit(torch.tensor(z, dtype=torch.float32)))
    return m


def test_order_loss_on_two_nodes_by_hand():
    # root 0 above child 1. E(upper, lower) = ‖max(0, z_lower − z_upper)‖²
    z = [[0.9, 0.2], [0.3, 0.4]]
    out = order_model(z).losses(tree([0, 0]), torch.Generator().manual_seed(0))
    # ancestor pair (0, 1): max(0, z1 − z0) = (0, 0.2)           -> 0.04
    # the only non-ancestor pair (u=1, v=0): max(0, z0 − z1) = (0.6, 0) -> E = 0.36, margin term 1 − 0.36
    assert float(out["order_pos"]) == pytest.approx(0.04, abs=1e-5)
    assert float(out["order_neg"]) == pytest.approx(0.64, abs=1e-5)
    assert float(out["order"]) == pytest.approx(0.68, abs=1e-5)


def test_order_loss_on_a_three_node_chain_matches_float64_formula():
    z = np.array([[0.9, 0.7, 0.2], [0.6, 0.8, 0.1], [0.3, 0.1, 0.5]])
    t = tree([0, 0, 1])
    out = order_model(z, num_samples=16).losses(t, torch.Generator().manual_seed(5))
    # the same draws, then the loss written out in float64
    anc, desc, u, v = sample_order_pairs(
        t.parent, t.depth, torch.zeros(3, dtype=torch.long), 16, torch.Generator().manual_seed(5)
    )
    assert {tuple(p) for p in zip(anc.tolist(), desc.tolist())} == {(0, 1), (0, 2), (1, 2)}
    assert {tuple(p) for p in zip(u.tolist(), v.tolist())} <= {(1, 0), (2, 0), (2, 1)} and len(u) > 0

    def E(upper, lower):
        return float((np.maximum(0.0, z[lower] - z[upper]) ** 2).sum())

    pos = np.mean([E(a, d) for a, d in zip(anc.tolist(), desc.tolist())])
    neg = np.mean([max(0.0, 1.0 - E(a, b)) for a, b in zip(u.tolist(), v.tolist())])
    assert float(out["order_pos"]) == pytest.approx(pos, abs=1e-5)
    assert float(out["order_neg"]) == pytest.approx(neg, abs=1e-5)
    assert float(out["order"]) == pytest.approx(pos + neg, abs=1e-5)


@pytest.fixture(scope="module")
def forest():
    ds = build_dataset(synthetic_trees(2, seed=4, max_nodes=60))
    b = next(iter(DataLoader(ds, batch_size=2)))
    return SimpleNamespace(
        x=b.x,
        pos=b.pos,
        paths=None,
        parent=b.parent,
        depth=b.depth,
        num_nodes=b.num_nodes,
        batch=b.batch,
        num_graphs=b.num_graphs,
    )


def _emd(p, q):
    """1-D EMD on a shared grid of width 1/B, float64: Σ |CDF_p − CDF_q| / B."""
    return np.abs(np.cumsum(p, -1) - np.cumsum(q, -1))[..., :-1].sum(-1) / p.shape[-1]


def test_growth_heads_predict_their_own_histograms(forest):
    """Length logits that reproduce the length targets and uniform angle logits: the loss is
    exactly the angle head's distance from uniform (and the length head's share is zero)."""
    B, cutoff = 8, 2.0
    len_t, len_m, ang_t, ang_m = growth_targets(forest.pos, forest.parent, cutoff, B)
    logits = torch.cat([torch.log(len_t.clamp(min=1e-30)), torch.zeros_like(ang_t)], 1)
    m = GTSSL(StubEncoder(cutoff), order_dim=3, num_bins=B)
    m.growth_head = Fixed(logits)
    got = float(m.losses(forest, torch.Generator().manual_seed(0))["growth"])

    n = forest.num_nodes
    kids = np.bincount(forest.parent.numpy(), minlength=n) - (forest.parent.numpy() == np.arange(n))
    uniform = np.full(B, 1.0 / B)
    ang, am = ang_t.double().numpy(), ang_m.numpy()
    expected = sum(_emd(uniform[None], ang[am & grp]).mean() for grp in (kids == 1, kids >= 2) if (am & grp).any())
    assert expected > 0.01
    assert got == pytest.approx(expected, rel=1e-4, abs=1e-6)
    # the fixture tells the heads apart: length and angle targets differ where both exist
    both = (len_m & ang_m).numpy()
    assert np.abs(len_t.numpy()[both] - ang_t.numpy()[both]).max() > 0.05


def _adamw_steps(ck) -> int:
    return int(max(float(s["step"]) for s in ck["optimizer"]["state"].values()))


def test_pretrain_resume_continues_the_checkpoint_not_a_rerun(tmp_path):
    data = build_dataset(synthetic_trees(4, seed=0, max_nodes=30))
    enc = dict(hidden_channels=8, num_interactions=1, num_rbf=4, cutoff=None)
    cfg = lambda epochs: TrainConfig(
        data=DataConfig(None, 4, 30), encoder=dict(enc), epochs=epochs, batch_size=2, seed=0
    )
    pretrain(cfg(3), tmp_path / "fresh", data=data)
    part = tmp_path / "part"
    pretrain(cfg(2), part, data=data)
    before = json.loads((part / "history.json").read_text())
    ck = torch.load(part / "last.pt", weights_only=True)
    steps_per_epoch = _adamw_steps(ck) // 2
    for k, v in ck["model"].items():  # what only a resume reads: weights and optimizer step count
        if k.startswith("encoder.") and v.is_floating_point():
            v += 0.3
    for s in ck["optimizer"]["state"].values():
        s["step"] += 100
    torch.save(ck, part / "last.pt")

    hist = pretrain(cfg(3), part, resume=True, data=data)
    assert [h["epoch"] for h in hist] == [1, 2, 3]
    assert hist[:2] == before  # the interrupted run's records (timings included), not a rerun's
    assert _adamw_steps(torch.load(part / "last.pt", weights_only=True)) == 100 + 3 * steps_per_epoch
    a = torch.load(tmp_path / "fresh" / "encoder.pt", weights_only=True)["encoder"]
    b = torch.load(part / "encoder.pt", weights_only=True)["encoder"]
    assert max(float((a[k] - b[k]).abs().max()) for k in a if a[k].is_floating_point()) > 0.1


def test_soft_histogram_and_emd_by_hand():
    from tracegraph.trees.gtssl import emd_1d, soft_histogram

    # values outside [0, 1] count as the nearest end; any leading shape; float32 whatever the default
    h = soft_histogram(torch.tensor([[-0.3, 1.7], [0.0, 1.0]], dtype=torch.float64), 4)
    assert h.shape == (2, 2, 4) and h.dtype == torch.float32
    torch.testing.assert_close(h[0], h[1])
    torch.testing.assert_close(h.sum(-1), torch.ones(2, 2))
    # value 0: bin centres 1/8, 3/8, 5/8, 7/8 at distances 0.5, 1.5, 2.5, 3.5 bin widths
    w = np.exp(-0.5 * np.array([0.5, 1.5, 2.5, 3.5]) ** 2)
    np.testing.assert_allclose(h[1, 0].numpy(), w / w.sum(), rtol=1e-6)
    assert soft_histogram(torch.zeros(3, device="meta"), 4).device.type == "meta"
    # all mass moved by two bins: EMD 2 (default bin width 1), or 2·0.25
    p, q = torch.tensor([1.0, 0, 0, 0]), torch.tensor([0, 0, 1.0, 0])
    assert float(emd_1d(p, q)) == 2.0 and float(emd_1d(p, q, 0.25)) == 0.5


def test_order_pairs_cover_every_ancestor_and_every_non_ancestor():
    """0 → {1, 2}, 1 → 3. With many draws every true pair shows up, shallower cousins included."""
    t = tree([0, 0, 0, 1])
    anc, desc, u, v = sample_order_pairs(
        t.parent, t.depth, torch.zeros(4, dtype=torch.long), 200, torch.Generator().manual_seed(1)
    )
    assert set(zip(anc.tolist(), desc.tolist())) == {(0, 1), (0, 2), (1, 3), (0, 3)}
    assert set(zip(u.tolist(), v.tolist())) == {(1, 0), (2, 0), (3, 0), (2, 1), (3, 1), (1, 2), (3, 2), (2, 3)}


def test_order_loss_pairs_stay_within_each_tree_of_a_batch():
    """Two three-node chains in one batch: the loss must draw its pairs per tree."""
    z = np.array([[0.9, 0.7], [0.6, 0.8], [0.3, 0.1], [0.2, 0.9], [0.8, 0.2], [0.5, 0.5]])
    t = tree([0, 0, 1, 3, 3, 4])
    t.batch = torch.tensor([0, 0, 0, 1, 1, 1])
    m = order_model(z, num_samples=6)
    assert (GTSSL(StubEncoder()).margin, GTSSL(StubEncoder()).num_samples) == (1.0, 2)  # the documented defaults
    out = m.losses(t, torch.Generator().manual_seed(2))
    anc, desc, u, v = sample_order_pairs(t.parent, t.depth, t.batch, 6, torch.Generator().manual_seed(2))
    assert torch.equal(t.batch[u], t.batch[v]) and torch.equal(t.batch[anc], t.batch[desc])

    def E(upper, lower):
        return float((np.maximum(0.0, z[lower] - z[upper]) ** 2).sum())

    neg = np.mean([max(0.0, 1.0 - E(a, b)) for a, b in zip(u.tolist(), v.tolist())])
    assert float(out["order_neg"]) == pytest.approx(neg, abs=1e-5)


def test_a_single_node_has_no_pairs_and_zero_order_loss():
    out = order_model([[0.4, 0.6]]).losses(tree([0]), torch.Generator().manual_seed(0))
    assert set(out) == {"order", "order_pos", "order_neg", "growth", "order_z_max"}
    assert float(out["order"]) == 0.0 and float(out["order_pos"]) == 0.0 and float(out["order_neg"]) == 0.0
    assert float(out["order_z_max"]) == pytest.approx(0.6)


def _branching_tree():
    """0 → {1, 4}, 1 → {2, 3}: node 1 has a parent segment and two children, node 0 one more child."""
    return tree([0, 0, 1, 1, 0], [[0, 0, 0], [1, 0, 0], [2, 0, 0], [1, 1, 0], [0, 0, 1]])


def test_order_pairs_are_drawn_on_the_inputs_device_whatever_the_default_device():
    """A caller who set another default device (the meta device stands in for a GPU) still gets
    the pairs on the inputs' device, and the same draws as without that default."""
    t = tree([0, 0, 1, 3, 3, 4])
    batch = torch.tensor([0, 0, 0, 1, 1, 1])
    want = sample_order_pairs(t.parent, t.depth, batch, 6, torch.Generator().manual_seed(3))
    gen = torch.Generator().manual_seed(3)
    with torch.device("meta"):
        got = sample_order_pairs(t.parent, t.depth, batch, 6, gen)
    assert all(g.device.type == "cpu" for g in got)
    for g, w in zip(got, want):
        assert torch.equal(g, w)
    assert len(want[0]) > 0 and len(want[2]) > 0


def test_growth_targets_are_computed_on_the_inputs_device_whatever_the_default_device():
    t = _branching_tree()
    want = growth_targets(t.pos, t.parent, 2.0, 4)
    with torch.device("meta"):
        got = growth_targets(t.pos, t.parent, 2.0, 4)
    assert all(g.device.type == "cpu" for g in got)
    for g, w in zip(got, want):
        assert torch.equal(g, w)
    assert want[1].tolist() == [True, True, False, False, False]  # nodes 0 and 1 have children
    assert want[3].tolist() == [False, True, False, False, False]  # only node 1 has a parent segment


def test_losses_are_computed_on_the_inputs_device_whatever_the_default_device():
    """No batch vector (one tree): the losses build their own on the inputs' device."""
    t = _branching_tree()
    torch.manual_seed(0)
    m = order_model([[0.9, 0.7], [0.6, 0.8], [0.3, 0.1], [0.2, 0.9], [0.8, 0.2]], num_samples=4)
    want = m.losses(t, torch.Generator().manual_seed(1))
    gen = torch.Generator().manual_seed(1)
    with torch.device("meta"):
        got = m.losses(t, gen)
    assert set(got) == set(want)
    for k in want:
        assert got[k].device.type == "cpu", k
        assert torch.equal(got[k], want[k]), k
    assert float(want["growth"]) > 0 and float(want["order_pos"]) > 0
