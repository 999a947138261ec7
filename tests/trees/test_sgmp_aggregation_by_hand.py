"""SGMP's message aggregation against a float64 loop written here: each chain i→j→k→p carries
σ(A h_j + B h_k + C h_p) ⊙ W g; node n averages the messages of the chains that *start* at n and,
separately, of the chains whose *second* node is n; the residual update reads [u, both means]."""

import math

import numpy as np
import pytest
import torch

from tracegraph.trees.sgmp import EncoderConfig, GaussianBasis, InteractionBlock, SGMPEncoder, chain_geometry

# 5 nodes; chains chosen so counts differ per node: node 0 starts 3 chains, node 1 starts 1,
# node 4 starts none; as second node: 1 (twice), 2 (once), 3 (once), 0 (once)
PATHS = [(0, 1, 2, 3), (0, 1, 3, 2), (0, 2, 1, 0), (1, 3, 2, 4), (2, 0, 1, 3)]


def _np(t):
    return t.detach().double().numpy()


def _silu(x):
    return x / (1 + np.exp(-x))


def _lin(layer, x):
    return x @ _np(layer.weight).T + _np(layer.bias)


def _layer_norm(ln, x):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + ln.eps) * _np(ln.weight) + _np(ln.bias)


def naive_block(block, h, geom, paths, second_node):
    """One interaction block, a loop over chains and nodes in float64."""
    n, hid = h.shape
    u = _layer_norm(block.norm, h)
    proj = _lin(block.node_proj, u)
    a, b, c = proj[:, :hid], proj[:, hid : 2 * hid], proj[:, 2 * hid :]
    msgs = [_silu(a[j] + b[k] + c[p]) * _lin(block.filter, geom[q]) for q, (i, j, k, p) in enumerate(paths)]
    agg, agg_j = np.zeros((n, hid)), np.zeros((n, hid))
    for node in range(n):
        from_here = [m for m, ch in zip(msgs, paths) if ch[0] == node]
        through = [m for m, ch in zip(msgs, paths) if ch[1] == node]
        if from_here:
            agg[node] = np.mean(from_here, axis=0)
        if through:
            agg_j[node] = np.mean(through, axis=0)
    x = np.concatenate([u, agg, agg_j] if second_node else [u, agg], axis=1)
    l1, l2 = block.update[0], block.update[2]
    return h + _lin(l2, _silu(_lin(l1, x)))


@pytest.mark.parametrize("second_node", [True, False])
@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_block_equals_the_float64_loop(second_node, order):
    torch.manual_seed(0)
    hid = 6
    block = InteractionBlock(hid, second_node).double()
    paths = list(PATHS) if order == "sorted" else [PATHS[q] for q in (3, 0, 4, 2, 1)]
    h = torch.randn(5, hid, dtype=torch.float64)
    geom = torch.randn(len(paths), hid, dtype=torch.float64)
    pt = torch.tensor(paths, dtype=torch.long).t()
    count = torch.tensor([sum(ch[0] == v for ch in paths) for v in range(5)])
    count_j = torch.tensor([sum(ch[1] == v for ch in paths) for v in range(5)])
    with torch.no_grad():
        got = block(h, geom, pt, count, count_j, sorted_by_source=order == "sorted")
    want = naive_block(block, _np(h), _np(geom), paths, second_node)
    np.testing.assert_allclose(_np(got), want, rtol=1e-10, atol=1e-12)


def test_encoder_passes_each_block_the_chain_counts_of_first_and_second_nodes():
    torch.manual_seed(1)
    enc = (
        SGMPEncoder(EncoderConfig(in_channels=4, hidden_channels=6, num_interactions=2, num_rbf=4, cutoff=3.0))
        .double()
        .eval()
    )
    x = torch.randn(5, 4, dtype=torch.float64)
    pos = torch.randn(5, 3, dtype=torch.float64)
    pt = torch.tensor(PATHS, dtype=torch.long).t()
    with torch.no_grad():
        nodes, graph = enc(x, pos, pt)
        h = _lin(enc.embed, _np(x))
        geom = _np(enc.chain_features(pos, pt))
    for block in enc.blocks:
        h = naive_block(block, h, geom, PATHS, True)
    h = _layer_norm(enc.out_norm, h)
    np.testing.assert_allclose(_np(nodes), h, rtol=1e-6, atol=1e-6)  # geometry runs in float32
    np.testing.assert_allclose(_np(graph)[0], h.mean(0), rtol=1e-6, atol=1e-6)  # mean readout


def test_mean_and_sum_readout_per_graph_by_hand():
    enc = SGMPEncoder(EncoderConfig(hidden_channels=2, num_interactions=1, num_rbf=4))
    h = torch.tensor([[1.0, 2.0], [3.0, 4.0], [10.0, 0.0], [5.0, 5.0], [0.0, 1.0]])
    batch = torch.tensor([0, 0, 1, 0, 1])
    np.testing.assert_allclose(
        enc.readout(h, batch, 3).numpy(), [[3.0, 11 / 3], [5.0, 0.5], [0.0, 0.0]], rtol=1e-6
    )  # 2: empty
    enc.cfg.readout = "sum"
    assert enc.readout(h, batch).tolist() == [[9.0, 11.0], [10.0, 1.0]]


def test_chain_geometry_of_a_unit_staircase_by_hand():
    pos = torch.tensor([[0.0, 0, 0], [2, 0, 0], [2, 1, 0], [2, 1, 3]])
    dist, ang, tors = chain_geometry(pos, torch.tensor([[0], [1], [2], [3]]))
    assert dist[0].tolist() == pytest.approx([2.0, 1.0, 3.0])
    assert ang[0].tolist() == pytest.approx([math.pi / 2, math.pi / 2])
    assert abs(float(tors[0])) == pytest.approx(math.pi / 2)
    pos2 = torch.tensor([[0.0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 1, 0]])  # straight then a 45° bend
    _, ang2, _ = chain_geometry(pos2, torch.tensor([[0], [1], [2], [3]]))
    assert ang2[0].tolist() == pytest.approx([math.pi, 3 * math.pi / 4])


def test_gaussian_basis_width_is_the_centre_spacing():
    g = GaussianBasis(0.0, 6.0, 4)  # centres 0, 2, 4, 6; gamma = 1 / spacing² = 1/4
    out = g(torch.tensor([2.0, 3.0]))
    assert out[0].tolist() == pytest.approx([math.exp(-1), 1.0, math.exp(-1), math.exp(-4)])
    assert out[1].tolist() == pytest.approx([math.exp(-2.25), math.exp(-0.25), math.exp(-0.25), math.exp(-2.25)])
