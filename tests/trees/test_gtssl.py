import numpy as np
import pytest
import torch
from scipy.stats import wasserstein_distance
from torch_geometric.loader import DataLoader

from tracegraph.trees.cache import build_dataset
from tracegraph.trees.synthetic import synthetic_trees
from tracegraph.trees.gtssl import GTSSL, emd_1d, growth_targets, sample_order_pairs
from tracegraph.trees.sgmp import EncoderConfig, SGMPEncoder


@pytest.fixture(scope="module")
def batch():
    ds = build_dataset(synthetic_trees(2, seed=4, max_nodes=80))
    return next(iter(DataLoader(ds, batch_size=4)))


def _model(seed=0):
    torch.manual_seed(seed)
    return GTSSL(
        SGMPEncoder(EncoderConfig(hidden_channels=32, num_interactions=2, num_rbf=12, cutoff=2.0)), num_bins=12
    )


@pytest.mark.parametrize("seed", range(5))
def test_emd_matches_scipy_wasserstein(seed):
    rng = np.random.default_rng(seed)
    bins = 7 + seed
    width = 0.5 + seed
    centres = np.arange(bins) * width
    p, q = rng.random(bins), rng.random(bins)
    p, q = p / p.sum(), q / q.sum()
    ref = wasserstein_distance(centres, centres, p, q)
    got = emd_1d(torch.tensor(p), torch.tensor(q), width)
    assert float(got) == pytest.approx(ref, rel=1e-9)


def _ancestors(parent, v):
    out = set()
    while parent[v] != v:
        v = parent[v]
        out.add(v)
    return out


def test_order_pairs_are_true_ancestors_and_true_non_ancestors(batch):
    g = torch.Generator().manual_seed(0)
    anc, desc, u, v = sample_order_pairs(batch.parent, batch.depth, batch.batch, 3, g)
    parent = batch.parent.tolist()
    assert len(anc) == 3 * int((batch.depth > 0).sum())
    assert all(a in _ancestors(parent, d) for a, d in zip(anc.tolist(), desc.tolist()))
    assert len(u) > 0
    assert all(x != y and x not in _ancestors(parent, y) for x, y in zip(u.tolist(), v.tolist()))
    assert torch.equal(batch.batch[u], batch.batch[v])  # negatives stay within one tree
    # ancestors sampled at every distance, not just the parent
    assert (batch.depth[desc] - batch.depth[anc]).max() > 5


def _np_soft_hist(values, bins):
    centres = (np.arange(bins) + 0.5) / bins
    w = np.exp(-0.5 * ((np.clip(values, 0, 1)[:, None] - centres) * bins) ** 2)
    return (w / w.sum(1, keepdims=True)).mean(0)


def test_growth_targets_summarise_children(batch):
    # reference: loops over each node's children with numpy geometry
    cutoff, bins = 2.0, 12
    len_h, len_m, ang_h, ang_m = growth_targets(batch.pos, batch.parent, cutoff, bins)
    parent = batch.parent.numpy()
    pos = batch.pos.numpy().astype(float)
    is_root = parent == np.arange(len(parent))
    for n in range(len(parent)):
        kids = [c for c in np.flatnonzero(parent == n) if c != n]
        assert bool(len_m[n]) == bool(kids) and bool(ang_m[n]) == (bool(kids) and not is_root[n])
        if not kids:
            continue
        lengths = np.array([np.linalg.norm(pos[c] - pos[n]) for c in kids]) / cutoff
        assert np.allclose(len_h[n].numpy(), _np_soft_hist(lengths, bins), atol=1e-5)
        if not is_root[n]:
            a = pos[n] - pos[parent[n]]
            angs = np.array(
                [
                    np.arccos(
                        np.clip(np.dot(a, pos[c] - pos[n]) / np.linalg.norm(a) / np.linalg.norm(pos[c] - pos[n]), -1, 1)
                    )
                    for c in kids
                ]
            )
            assert np.allclose(ang_h[n].numpy(), _np_soft_hist(angs / np.pi, bins), atol=1e-4)
    # the targets are real data, not zeros: branch points have two children at distinct angles
    assert float(ang_h[ang_m].max(1).values.min()) > 0 and float(len_h[len_m].sum()) == pytest.approx(
        int(len_m.sum()), rel=1e-5
    )


@pytest.mark.parametrize("name", ["order", "growth"])
def test_each_loss_sends_gradient_to_the_encoder(batch, name):
    m = _model()
    m.losses(batch, torch.Generator().manual_seed(0))[name].backward()
    enc_grads = [p.grad for p in m.encoder.parameters()]
    assert all(g is not None for g in enc_grads[:2])  # the input embedding at least
    per_block = [sum(float(p.grad.abs().sum()) for p in b.parameters() if p.grad is not None) for b in m.encoder.blocks]
    assert all(s > 0 for s in per_block), per_block
    assert float(m.encoder.embed.weight.grad.abs().sum()) > 0


def test_embeddings_and_losses_stay_bounded_under_aggressive_training(batch):
    m = _model(1)
    opt = torch.optim.Adam(m.parameters(), lr=3e-2)
    g = torch.Generator().manual_seed(1)
    first = None
    for _ in range(40):
        ls = m.losses(batch, g)
        loss = ls["order"] + ls["growth"]
        first = first if first is not None else float(loss.detach())
        opt.zero_grad()
        loss.backward()
        opt.step()
    d = m.encoder.cfg.hidden_channels
    with torch.no_grad():
        h, _ = m.encoder.encode(batch)
        z = torch.sigmoid(m.order_head(h))
    assert torch.isfinite(h).all() and (z >= 0).all() and (z <= 1).all()
    # E(u, v) ≤ D by construction, so the order loss is ≤ D + margin; each of the four growth
    # EMD terms (lengths/angles × one/several children) is ≤ 1 on a [0, 1] grid
    assert float(ls["order"]) <= d + m.margin and float(ls["growth"]) <= 4.0
    assert float(loss) < first
