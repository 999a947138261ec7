"""How the SGMP encoder wires its blocks, sums and readout, against the float64 loop of
``test_sgmp_aggregation_by_hand`` and hand-counted calls.

Held: the encoder without second-node messages, and a block with the default settings (second-node
messages on), equal the float64 loop; chains grouped by their first node (and only those, at
least one chain) are summed with ``torch.segment_reduce``, with or without gradient
checkpointing, and every order gives the loop's values; each block runs once per training step,
twice only when checkpointing is on in training with gradients (recomputed in backward), and
checkpointed gradients equal plain ones under ``torch.autograd.grad`` too (non-reentrant); a block
given float32 states under bf16 autocast keeps them float32 and close; the readout of one tree is
one row, of no nodes one zero row, of a one-node tree in a batch that node, with trailing empty
trees when ``num_graphs`` says so; ``encode`` reads x, pos, paths, batch and num_graphs from the
data (each optional but the first three) and a batch of two trees equals each tree encoded alone.
"""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch

from tests.trees.test_sgmp_aggregation_by_hand import PATHS, _layer_norm, _lin, _np, naive_block
from tracegraph.trees.data import to_data
from tracegraph.trees.synthetic import synthetic_trees
from tracegraph.trees.sgmp import EncoderConfig, InteractionBlock, SGMPEncoder


def _encoder(seed=1, **kw):
    torch.manual_seed(seed)
    cfg = dict(in_channels=4, hidden_channels=6, num_interactions=2, num_rbf=4, cutoff=3.0)
    return SGMPEncoder(EncoderConfig(**{**cfg, **kw})).double()


def _inputs(seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(5, 4, generator=g, dtype=torch.float64), torch.randn(5, 3, generator=g, dtype=torch.float64)


def _loop_encoder(enc, x, pos, chains, second_node):
    pt = torch.tensor(chains, dtype=torch.long).reshape(-1, 4).t()
    with torch.no_grad():
        geom = _np(enc.chain_features(pos, pt))
    h = _lin(enc.embed, _np(x))
    for block in enc.blocks:
        h = naive_block(block, h, geom, chains, second_node)
    return _layer_norm(enc.out_norm, h)


def test_encoder_without_second_node_messages_equals_the_loop():
    enc = _encoder(second_node_messages=False).eval()
    x, pos = _inputs()
    with torch.no_grad():
        nodes, graph = enc(x, pos, torch.tensor(PATHS).t())
    want = _loop_encoder(enc, x, pos, PATHS, second_node=False)
    np.testing.assert_allclose(_np(nodes), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(_np(graph), want.mean(0, keepdims=True), rtol=1e-6, atol=1e-6)


def test_a_block_by_default_also_averages_at_the_second_node():
    torch.manual_seed(0)
    block = InteractionBlock(6).double()
    h, geom = torch.randn(5, 6, dtype=torch.float64), torch.randn(5, 6, dtype=torch.float64)
    count = torch.tensor([sum(ch[0] == v for ch in PATHS) for v in range(5)])
    count_j = torch.tensor([sum(ch[1] == v for ch in PATHS) for v in range(5)])
    with torch.no_grad():
        got = block(h, geom, torch.tensor(PATHS).t(), count, count_j, sorted_by_source=True)
    np.testing.assert_allclose(_np(got), naive_block(block, _np(h), _np(geom), PATHS, True), rtol=1e-10)


# orders of PATHS (first nodes 0,0,0,1,2) and whether their first nodes never decrease
ORDERS = {
    "grouped with repeats": ([0, 1, 2, 3, 4], True),
    "shuffled": ([3, 0, 4, 2, 1], False),
    "first nodes 0,0,2,1,0": ([0, 1, 4, 3, 2], False),
    "one chain": ([3], True),
    "no chain": ([], False),
}


@pytest.fixture
def segment_sums(monkeypatch):
    calls = []
    real = torch.segment_reduce

    def counting(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(torch, "segment_reduce", counting)
    return calls


@pytest.mark.parametrize("name", list(ORDERS))
def test_chains_grouped_by_first_node_are_summed_by_segments(name, segment_sums):
    order, grouped = ORDERS[name]
    chains = [PATHS[q] for q in order]
    enc = _encoder().eval()
    x, pos = _inputs()
    with torch.no_grad():
        nodes, _ = enc(x, pos, torch.tensor(chains, dtype=torch.long).reshape(-1, 4).t())
    assert len(segment_sums) == (len(enc.blocks) if grouped else 0)
    np.testing.assert_allclose(_np(nodes), _loop_encoder(enc, x, pos, chains, True), rtol=1e-6, atol=1e-6)


def test_checkpointed_blocks_still_sum_grouped_chains_by_segments(segment_sums):
    enc = _encoder().train()
    enc.gradient_checkpointing = True
    x, pos = _inputs()
    enc(x, pos, torch.tensor(PATHS).t())[1].sum().backward()
    assert len(segment_sums) == 2 * len(enc.blocks)  # forward, then recomputed in backward


def _block_runs(enc, train, grad):
    runs = []  # counted as each block starts: a recomputation may stop before its end
    hooks = [b.register_forward_pre_hook(lambda *_: runs.append(1)) for b in enc.blocks]
    enc.train(train)
    x, pos = _inputs()
    with torch.set_grad_enabled(grad):
        g = enc(x, pos, torch.tensor(PATHS).t())[1]
        if grad:
            g.pow(2).sum().backward()
    for hk in hooks:
        hk.remove()
    return len(runs)


def test_blocks_are_recomputed_only_when_checkpointing_a_training_step():
    enc = _encoder()
    assert _block_runs(enc, train=True, grad=True) == 2  # the default: activations kept
    enc.gradient_checkpointing = True
    assert _block_runs(enc, train=True, grad=True) == 4  # each block again in backward
    assert _block_runs(enc, train=False, grad=True) == 2  # eval: nothing checkpointed
    assert _block_runs(enc, train=True, grad=False) == 2  # no graph: nothing to recompute


def test_checkpointed_gradients_equal_plain_ones_under_autograd_grad():
    x, pos = _inputs()
    grads = []
    for ck in (False, True):
        enc = _encoder(seed=3).train()
        enc.gradient_checkpointing = ck
        loss = enc(x, pos, torch.tensor(PATHS).t())[1].pow(2).sum()
        grads.append(torch.autograd.grad(loss, list(enc.parameters()), allow_unused=True))
    for a, b in zip(*grads):
        assert (a is None) == (b is None)
        if a is not None:
            assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)


def test_a_block_keeps_float32_states_under_bf16_autocast():
    torch.manual_seed(0)
    block = InteractionBlock(8)
    h, geom = torch.randn(5, 8), torch.randn(5, 8)
    count = torch.tensor([sum(ch[0] == v for ch in PATHS) for v in range(5)])
    count_j = torch.tensor([sum(ch[1] == v for ch in PATHS) for v in range(5)])
    pt = torch.tensor(PATHS).t()
    with torch.no_grad():
        ref = block(h, geom, pt, count, count_j, True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = block(h, geom, pt, count, count_j, True)
    assert low.dtype == torch.float32
    assert float((low - ref).abs().max()) < 4 * 2**-8 * float(ref.abs().max())  # bf16: 8 significant bits


def test_readout_shapes_one_tree_no_nodes_and_a_lone_node():
    enc = SGMPEncoder(EncoderConfig(hidden_channels=2, num_interactions=1, num_rbf=4))
    h = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 9.0]])
    assert enc.readout(h).tolist() == [[3.0, 5.0]]  # one tree: one row, the mean
    assert enc.readout(torch.zeros(0, 2)).tolist() == [[0.0, 0.0]]
    batch = torch.tensor([0, 0, 1])  # tree 1 is one node: its mean is that node
    assert enc.readout(h, batch).tolist() == [[2.0, 3.0], [5.0, 9.0]]


def test_forward_keeps_trailing_empty_trees_of_num_graphs():
    enc = _encoder().eval()
    x, pos = _inputs()
    batch = torch.tensor([0, 0, 0, 1, 1])
    with torch.no_grad():
        nodes, graph = enc(x, pos, torch.tensor(PATHS).t(), batch, 3)
    h = _np(nodes)
    np.testing.assert_allclose(_np(graph), [h[:3].mean(0), h[3:].mean(0), np.zeros(6)], rtol=1e-12, atol=1e-12)


def test_encode_reads_batch_and_num_graphs_from_the_data():
    enc = _encoder().eval()
    x, pos = _inputs()
    pt = torch.tensor(PATHS).t()
    batch = torch.tensor([0, 0, 0, 1, 1])
    with torch.no_grad():
        want = enc(x, pos, pt, batch, 3)
        got = enc.encode(SimpleNamespace(x=x, pos=pos, paths=pt, batch=batch, num_graphs=3))
        alone = enc.encode(SimpleNamespace(x=x, pos=pos, paths=pt))  # no batch, no num_graphs: one tree
        one = enc(x, pos, pt)
    assert got[1].shape == (3, 6) and torch.equal(got[1], want[1]) and torch.equal(got[0], want[0])
    assert alone[1].shape == (1, 6) and torch.equal(alone[1], one[1])


def test_a_batch_of_two_trees_encodes_like_each_tree_alone():
    enc = _encoder(seed=2).float().eval()
    trees = synthetic_trees(1, seed=3, max_nodes=25)
    data = [to_data(t) for t in trees]
    with torch.no_grad():
        nodes, graph = enc.encode(Batch.from_data_list(data))
        singles = [enc.encode(d) for d in data]
    assert graph.shape == (len(data), 6)
    for q, (n_q, g_q) in enumerate(singles):
        assert torch.allclose(graph[q], g_q[0], atol=1e-5)
    assert torch.allclose(nodes, torch.cat([n for n, _ in singles]), atol=1e-5)
