import numpy as np
import pytest
import torch

from tracegraph.trees.cache import build_dataset
from tracegraph.trees.data import Tree, to_data
from tracegraph.trees.synthetic import synthetic_trees
from tracegraph.trees.sgmp import EncoderConfig, SGMPEncoder, chain_geometry


def _encoder(seed=0, **kw):
    torch.manual_seed(seed)
    return SGMPEncoder(EncoderConfig(hidden_channels=32, num_interactions=2, num_rbf=12, cutoff=2.0, **kw)).eval()


def _tree():
    return synthetic_trees(1, seed=5, max_nodes=60)[0]


def _rotation(rng, det=1.0):
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    if np.linalg.det(q) * det < 0:
        q[:, 0] = -q[:, 0]
    return q


def _embed(enc, tree):
    d = to_data(tree)
    with torch.no_grad():
        return enc(d.x, d.pos, d.paths)


@pytest.mark.parametrize("second_node", [True, False])
def test_rotation_and_translation_invariant(second_node):
    enc, t, rng = _encoder(second_node_messages=second_node), _tree(), np.random.default_rng(0)
    h0, g0 = _embed(enc, t)
    for _ in range(3):
        moved = Tree(t.pos @ _rotation(rng).T + rng.normal(size=3) * 5, t.parent)
        h1, g1 = _embed(enc, moved)
        assert torch.allclose(h0, h1, atol=2e-4) and torch.allclose(g0, g1, atol=1e-4)


def test_mirror_image_flips_torsion_and_changes_output():
    enc, t = _encoder(), _tree()
    mirrored = Tree(t.pos * np.array([-1.0, 1.0, 1.0]), t.parent)
    d0, d1 = to_data(t), to_data(mirrored)
    (dist0, ang0, tor0), (dist1, ang1, tor1) = chain_geometry(d0.pos, d0.paths), chain_geometry(d1.pos, d1.paths)
    assert torch.allclose(dist0, dist1, atol=1e-5) and torch.allclose(ang0, ang1, atol=1e-5)
    assert torch.allclose(tor0, -tor1, atol=1e-4)
    assert (tor0.abs() > 0.1).any()
    g0, g1 = _embed(enc, t)[1], _embed(enc, mirrored)[1]
    assert (g0 - g1).abs().max() > 1e-3


def test_torsion_matches_textbook_dihedral():
    rng = np.random.default_rng(1)
    pts = rng.normal(size=(4, 3))
    b0, b1, b2 = pts[0] - pts[1], pts[2] - pts[1], pts[3] - pts[2]
    b1n = b1 / np.linalg.norm(b1)
    v, w = b0 - b0.dot(b1n) * b1n, b2 - b2.dot(b1n) * b1n  # projections onto the plane ⟂ b1
    ref = np.arctan2(np.cross(b1n, v).dot(w), v.dot(w))
    _, ang, tor = chain_geometry(torch.tensor(pts, dtype=torch.float64), torch.tensor([[0], [1], [2], [3]]))
    assert float(tor[0]) == pytest.approx(ref, abs=1e-9)
    cos_ref = np.dot(pts[0] - pts[1], pts[2] - pts[1]) / np.linalg.norm(pts[0] - pts[1]) / np.linalg.norm(b1)
    assert float(ang[0, 0]) == pytest.approx(np.arccos(cos_ref), abs=1e-9)


@pytest.mark.parametrize("second_node", [True, False])
def test_permutation_of_nodes_does_not_change_output(second_node):
    enc, t = _encoder(second_node_messages=second_node), _tree()
    d = to_data(t)
    perm = torch.from_numpy(np.random.default_rng(2).permutation(t.num_nodes))
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(len(perm))
    from tracegraph.trees.paths import enumerate_paths

    ei = inv[d.edge_index]  # node v becomes inv[v]
    paths = enumerate_paths(ei, t.num_nodes)
    with torch.no_grad():
        h0, g0 = enc(d.x, d.pos, d.paths)
        h1, g1 = enc(d.x[perm], d.pos[perm], paths)
    assert torch.allclose(g0, g1, atol=1e-5)
    assert torch.allclose(h0[perm], h1, atol=1e-5)


def test_gradient_checkpointing_gives_same_values_and_gradients():
    ds = build_dataset(synthetic_trees(2, seed=0, max_nodes=50))
    from torch_geometric.loader import DataLoader

    b = next(iter(DataLoader(ds, batch_size=4)))
    grads = []
    for ck in (False, True):
        enc = _encoder(seed=3).train()
        enc.gradient_checkpointing = ck
        h, g = enc.encode(b)
        g.pow(2).sum().backward()
        grads.append((g.detach(), [p.grad.clone() for p in enc.parameters()]))
    assert torch.allclose(grads[0][0], grads[1][0], atol=1e-6)
    assert all(torch.allclose(a, c, atol=1e-5) for a, c in zip(grads[0][1], grads[1][1]))


def test_bf16_autocast_on_cpu_is_finite_and_close():
    enc, t = _encoder(), _tree()
    d = to_data(t)
    with torch.no_grad():
        ref = enc(d.x, d.pos, d.paths)[1]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = enc(d.x, d.pos, d.paths)[1].float()
    assert torch.isfinite(low).all()
    # bf16 keeps 8 significant bits (unit roundoff 2⁻⁸ ≈ 0.0039). Measured over 6 encoder seeds ×
    # 3 trees (2 shared CPU cores): max error 0.0025–0.0072 of max |output|, 0.0045 here; the bound is
    # 4 roundoffs. Nonzero: autocast did run in bf16.
    err = float((low - ref).abs().max())
    assert 0 < err < 4 * 2**-8 * float(ref.abs().max())


def test_sum_readout_is_sum_of_node_embeddings():
    enc = _encoder(readout="sum")
    h, g = _embed(enc, _tree())
    assert torch.allclose(g[0], h.sum(0), atol=1e-4)


def test_chain_order_does_not_matter_and_tiny_trees_work():
    # sorted chains take the segment-sum path, shuffled ones the index_add path: same result
    enc, t = _encoder(), _tree()
    d = to_data(t)
    shuffled = d.paths[:, torch.randperm(d.paths.shape[1], generator=torch.Generator().manual_seed(0))]
    with torch.no_grad():
        assert torch.allclose(enc(d.x, d.pos, d.paths)[0], enc(d.x, d.pos, shuffled)[0], atol=1e-5)
        tiny = to_data(Tree(np.array([[0.0, 0, 0], [1, 0, 0], [1, 1, 0]]), np.array([0, 0, 1])))
        assert tiny.paths.shape[1] == 0 and torch.isfinite(enc(tiny.x, tiny.pos, tiny.paths)[1]).all()
