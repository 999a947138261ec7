"""SGMP's chain geometry and geometry features against float64 references written here.

Held: bond lengths, bond angles (arccos of the normalised dot product) and the textbook dihedral
of several chains at once (three chains, so a cross product taken along the wrong axis of a
``[3, 3]`` block shows); the Gaussian basis's centres and width for a start other than 0 and for
one or two centres; the encoder's chain features as the Gaussian expansion (distance centres
0..cutoff, angle centres 0..π), the torsion's Fourier terms 1..⌊r/2⌋ (odd r too) and the
two-layer SiLU MLP, each written in numpy; ``suggest_cutoff`` against numpy's quantile of the
edge lengths walked node by node; ``EncoderConfig.to_dict`` by hand.
"""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tracegraph.trees.data import Tree, to_data
from tracegraph.trees.sgmp import EncoderConfig, GaussianBasis, SGMPEncoder, chain_geometry, suggest_cutoff

# 5 points in general position; 3 chains (a [3, 3] block of bond vectors)
POS = np.array([[0.0, 0.0, 0.0], [1.3, 0.2, -0.1], [1.9, 1.4, 0.3], [3.1, 1.1, 1.6], [2.2, -0.7, 2.4]])
CHAINS = [(0, 1, 2, 3), (1, 2, 3, 4), (4, 3, 2, 1)]


def _geometry_naive(pos, chains):
    """Lengths, angles and dihedral of each chain, one chain at a time in float64."""
    dist, ang, tors = [], [], []
    for i, j, k, p in chains:
        b1, b2, b3 = pos[j] - pos[i], pos[k] - pos[j], pos[p] - pos[k]
        dist.append([np.linalg.norm(b) for b in (b1, b2, b3)])
        angles = []
        for u, v in ((-b1, b2), (-b2, b3)):
            angles.append(math.acos(np.dot(u, v) / np.linalg.norm(u) / np.linalg.norm(v)))
        ang.append(angles)
        axis = b2 / np.linalg.norm(b2)
        v, w = -b1 - np.dot(-b1, axis) * axis, b3 - np.dot(b3, axis) * axis
        tors.append(math.atan2(np.dot(np.cross(axis, v), w), np.dot(v, w)))
    return np.array(dist), np.array(ang), np.array(tors)


def _silu(x):
    return x / (1 + np.exp(-x))


def _lin(layer, x):
    return x @ layer.weight.detach().double().numpy().T + layer.bias.detach().double().numpy()


def test_three_chains_at_once_match_each_chain_alone():
    paths = torch.tensor(CHAINS).t()
    dist, ang, tors = chain_geometry(torch.tensor(POS), paths)
    want_d, want_a, want_t = _geometry_naive(POS, CHAINS)
    assert dist.shape == (3, 3) and ang.shape == (3, 2) and tors.shape == (3,)
    np.testing.assert_allclose(dist.numpy(), want_d, rtol=1e-12)
    np.testing.assert_allclose(ang.numpy(), want_a, rtol=1e-10)
    np.testing.assert_allclose(tors.numpy(), want_t, rtol=1e-10)
    assert (np.abs(want_t) > 0.1).all()  # no chain is planar: every torsion has a sign to get right


@pytest.mark.parametrize("n_chains", [2, 4])
def test_any_number_of_chains_match_each_chain_alone(n_chains):
    rng = np.random.default_rng(n_chains)
    pos = rng.normal(size=(6, 3))
    chains = [tuple(rng.permutation(6)[:4]) for _ in range(n_chains)]
    got = chain_geometry(torch.tensor(pos), torch.tensor(chains).t())
    for g, w in zip(got, _geometry_naive(pos, chains)):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-10, atol=1e-12)


def test_gaussian_basis_starting_above_zero():
    g = GaussianBasis(1.0, 7.0, 4)  # centres 1, 3, 5, 7; spacing 2, gamma 1/4
    assert g.centres.tolist() == pytest.approx([1.0, 3.0, 5.0, 7.0])
    assert g(torch.tensor([3.0]))[0].tolist() == pytest.approx([math.exp(-1), 1.0, math.exp(-1), math.exp(-4)])


def test_gaussian_basis_of_two_centres_and_of_one():
    two = GaussianBasis(0.0, 2.0, 2)  # centres 0 and 2, spacing 2: gamma 1/4
    assert two(torch.tensor([1.0]))[0].tolist() == pytest.approx([math.exp(-0.25)] * 2)
    one = GaussianBasis(0.0, 3.0, 1)  # one centre at 0, width the whole range: gamma 1/9
    assert one.centres.tolist() == [0.0]
    assert one(torch.tensor([3.0]))[0].tolist() == pytest.approx([math.exp(-1)])


@pytest.mark.parametrize("num_rbf", [4, 5])
def test_chain_features_are_the_expansion_fed_through_a_silu_mlp(num_rbf):
    torch.manual_seed(0)
    cutoff = 1.5  # below some bond lengths here: those are clamped to the cutoff
    enc = SGMPEncoder(EncoderConfig(hidden_channels=6, num_interactions=1, num_rbf=num_rbf, cutoff=cutoff))
    with torch.no_grad():
        got = enc.chain_features(torch.tensor(POS, dtype=torch.float32), torch.tensor(CHAINS).t()).double().numpy()
    dist, ang, tors = _geometry_naive(POS, CHAINS)
    assert (dist > cutoff).any() and (dist < cutoff).any()
    dist = np.minimum(dist, cutoff)
    d_centres = np.array([cutoff * q / (num_rbf - 1) for q in range(num_rbf)])
    a_centres = np.array([math.pi * q / (num_rbf - 1) for q in range(num_rbf)])
    d_gamma, a_gamma = ((num_rbf - 1) / cutoff) ** 2, ((num_rbf - 1) / math.pi) ** 2
    rows = []
    for c in range(len(CHAINS)):
        row = [math.exp(-d_gamma * (dist[c, e] - mu) ** 2) for e in range(3) for mu in d_centres]
        row += [math.exp(-a_gamma * (ang[c, e] - mu) ** 2) for e in range(2) for mu in a_centres]
        harmonics = range(1, num_rbf // 2 + 1)
        row += [math.sin(m * tors[c]) for m in harmonics] + [math.cos(m * tors[c]) for m in harmonics]
        rows.append(row)
    feats = np.array(rows)
    want = _lin(enc.geom_mlp[2], _silu(_lin(enc.geom_mlp[0], feats)))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)  # the encoder's geometry runs in float32


def _edge_lengths_naive(trees):
    out = []
    for t in trees:
        for c in range(1, len(t.parent)):
            out.append(float(np.linalg.norm(t.pos[c] - t.pos[t.parent[c]])))
    return np.array(out)


def test_suggested_cutoff_is_five_quarters_of_an_edge_length_quantile():
    rng = np.random.default_rng(4)
    single = Tree(np.zeros((1, 3)), np.array([0]))  # no edge: left out
    pair = Tree(np.array([[0.0, 0, 0], [0, 0, 9.0]]), np.array([0, 0]))  # one long edge
    chain = Tree(np.cumsum(rng.normal(size=(7, 3)), axis=0), np.array([0, 0, 1, 2, 2, 4, 5]))
    trees = [single, pair, chain]
    data = [to_data(t) for t in trees]
    lengths = _edge_lengths_naive(trees)
    assert suggest_cutoff(data) == pytest.approx(1.25 * np.quantile(lengths, 0.99), rel=1e-6)
    assert suggest_cutoff(data, quantile=0.5) == pytest.approx(1.25 * np.quantile(lengths, 0.5), rel=1e-6)
    assert suggest_cutoff(data, quantile=1.0) == pytest.approx(1.25 * 9.0, rel=1e-6)


def test_suggested_cutoff_reads_only_the_first_million_edges():
    n = 1_000_002  # 1,000,001 edges: the last, ten times longer, is past the first million
    x = np.arange(n, dtype=np.float32)
    x[-1] = x[-2] + 10
    pos = torch.zeros(n, 3)
    pos[:, 0] = torch.from_numpy(x)
    parent = torch.cat([torch.zeros(1, dtype=torch.long), torch.arange(n - 1)])
    item = SimpleNamespace(pos=pos, parent=parent, num_nodes=n)
    assert suggest_cutoff([item], quantile=1.0) == pytest.approx(1.25)


def test_encoder_settings_as_a_plain_dictionary():
    cfg = EncoderConfig(hidden_channels=8, readout="sum")
    assert cfg.to_dict() == {
        "in_channels": 4,
        "hidden_channels": 8,
        "num_interactions": 3,
        "num_rbf": 20,
        "cutoff": 10.0,
        "readout": "sum",
        "second_node_messages": True,
    }
