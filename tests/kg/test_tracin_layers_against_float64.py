"""TracIn's pieces held to independent references, one by one (written against the mutants that
survived ``test_tracin_first_principles.py``; see docs/testing.md, "Mutation testing").

The reference for the factor engine is a float64 ConvE written here with ``torch.nn.functional``
from the state dict, both losses written out by hand, and one ``torch.autograd.grad`` per example
direction: the Gram matrix of those per-example gradients, restricted to one layer at a time, is
what ``influence(compute_factors(...), compute_factors(...))`` must return. Everything else
(layer selection, allocation, batch sizes, folding directions, the driver's bookkeeping) is
checked against numbers worked out by hand. Fast, CPU, deterministic.
"""

import functools
import gc
import math
import re

import numpy as np
import pytest
import torch

from tests.kg.conve_reference import direction_loss, scores
from tracegraph.errors import TracegraphError
from tracegraph.kg.explain.tracin.engine import (
    InfluenceOptions,
    _Accumulator,
    _alloc,
    _fold,
    auto_batch_size,
    compute_influence,
)
from tracegraph.kg.explain.tracin.factors import (
    PARAM_ORDER,
    ScoreGrad,
    compute_factors,
    example_loss,
    influence,
    select_layers,
)
from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.model.model_io import model_payload

N_ENT, N_REL, H, W = 6, 2, 2, 3
EPS = 0.3  # label smoothing, away from 0 and from the usual 0.1


def tiny(seed=0, reciprocal=True, bias=True, dtype=torch.float64) -> ConvE:
    torch.manual_seed(seed)
    m = (
        ConvE(
            ConvEConfig(
                num_entities=N_ENT,
                num_relations=N_REL,
                embedding_dim=H * W,
                embedding_height=H,
                embedding_width=W,
                output_channels=2,
                kernel_size=2,
                reciprocal=reciprocal,
                entity_bias=bias,
            )
        )
        .to(dtype)
        .eval()
    )
    with torch.no_grad():
        for p in m.parameters():  # BatchNorm affine, biases, entity bias: all away from their defaults
            p.add_(0.4 * torch.randn_like(p))
        for bn in (m.bn0, m.bn1, m.bn2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    return m


# ------------------------------------------------------------------ the independent reference


def ref_scores(s, h, r):
    return scores(s, h, r, H, W)


def ref_loss(s, h, r, t, loss, eps=EPS):
    return direction_loss(s, h, r, t, loss, eps, H, W)


def state(model):
    return {
        n: t.detach().double().clone().requires_grad_("running" not in n)
        for n, t in model.state_dict().items()
        if t.is_floating_point()
    }


def ref_grads(model, dirs, loss, layers, eps=EPS):
    """[len(dirs), P] per-direction gradients of the chosen parameters, one autograd call each."""
    full = _ref_grads(_key(model), tuple(dirs), loss, eps)
    return torch.cat([full[n] for n in layers], 1)


_MODELS: dict = {}


def _key(model):
    _MODELS[id(model)] = model
    return id(model)


@functools.lru_cache(maxsize=None)
def _ref_grads(key, dirs, loss, eps):
    s = state(_MODELS[key])
    names = list(s)
    rows = {n: [] for n in names if s[n].requires_grad}
    for h, r, t in dirs:
        g = torch.autograd.grad(ref_loss(s, h, r, t, loss, eps), [s[n] for n in rows])
        for n, x in zip(rows, g):
            rows[n].append(x.reshape(-1))
    return {n: torch.stack(v) for n, v in rows.items()}


def factors(model, dirs, loss, layers, eps=EPS):
    h, r, t = torch.tensor(dirs).T
    return compute_factors(model, h, r, t, loss, eps, layers)


# directions chosen so every cross term is live: shared heads (A0/B0, A2/B2), shared relations,
# a head of one side that is the tail of the other (A1's head 3 = B0's tail, B1's head 1 = A0's tail),
# a tail shared across sides (A1, B1: the one-hot score gradients meet),
# reciprocal relation rows (2, 3), a self-loop (B2)
DIRS_A = [(0, 0, 1), (3, 1, 2), (5, 3, 0)]
DIRS_B = [(0, 1, 3), (1, 0, 2), (5, 2, 5)]

SINGLE = [[n] for n in PARAM_ORDER]
COMBOS = [
    list(PARAM_ORDER),
    ["entity.weight", "entity_bias"],
    ["relation.weight", "fc.weight"],
    ["bn0.weight", "conv.weight", "bn2.bias"],
    ["conv.bias", "bn1.weight", "bn1.bias", "fc.bias", "bn2.weight", "bn0.bias"],
]


MODEL = tiny(2)


@pytest.fixture
def model():
    MODEL.eval()
    return MODEL


@pytest.mark.parametrize("loss", ["score", "train-loss", "logit"])
@pytest.mark.parametrize("layers", SINGLE + COMBOS, ids=lambda l: "+".join(l))
def test_gram_equals_per_example_autograd(model, loss, layers):
    ga, gb = ref_grads(model, DIRS_A, loss, layers), ref_grads(model, DIRS_B, loss, layers)
    want = (ga @ gb.T).numpy()
    assert np.abs(want).max() > 1e-4  # the layer contributes: not a comparison of zeros
    A, B = factors(model, DIRS_A, loss, layers), factors(model, DIRS_B, loss, layers)
    got = influence(A, B, layers)
    assert got.dtype == torch.float64 and got.shape == (3, 3)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12 * np.abs(want).max())
    # aligned pairs (a_i, b_i): the diagonal, and the self-influences ‖∇ℓ(a_i)‖²
    np.testing.assert_allclose(
        influence(A, B, layers, pairwise=False).numpy(), np.diag(want), rtol=1e-10, atol=1e-12 * np.abs(want).max()
    )
    np.testing.assert_allclose(influence(A, A, layers, False).numpy(), (ga * ga).sum(1).numpy(), rtol=1e-10)


@pytest.mark.parametrize("loss", ["score", "train-loss", "logit"])
def test_factors_of_a_model_without_entity_bias(loss):
    m = tiny(5, reciprocal=False, bias=False)
    layers = select_layers(m, "all")
    assert "entity_bias" not in layers
    dirs_a, dirs_b = [(0, 0, 1), (3, 1, 0), (2, 1, 3)], [(3, 0, 2), (0, 1, 3)]
    ga, gb = ref_grads(m, dirs_a, loss, layers), ref_grads(m, dirs_b, loss, layers)
    got = influence(factors(m, dirs_a, loss, layers), factors(m, dirs_b, loss, layers), layers)
    np.testing.assert_allclose(got.numpy(), (ga @ gb.T).numpy(), rtol=1e-10)


@pytest.mark.parametrize("loss", ["score", "train-loss", "logit"])
def test_factor_loss_and_slicing(model, loss):
    layers = list(PARAM_ORDER)
    A = factors(model, DIRS_A, loss, layers)
    s = state(model)
    want = [float(ref_loss(s, *d, loss).detach()) for d in DIRS_A]
    np.testing.assert_allclose(A.loss.numpy(), want, rtol=1e-12)
    assert len(A) == 3 and len(A[1:]) == 2 and len(A[:1]) == 1
    ga, gb = ref_grads(model, DIRS_A, loss, layers), ref_grads(model, DIRS_B, loss, layers)
    full = (ga @ gb.T).numpy()
    B = factors(model, DIRS_B, loss, layers)
    np.testing.assert_allclose(influence(A[1:], B[:2], layers).numpy(), full[1:, :2], rtol=1e-10)
    sub = A.g[1:]
    assert isinstance(sub, ScoreGrad)
    if loss in ("score", "logit"):  # one-hot: coefficient at the tail's column, nothing dense
        assert A.g.dense is None and sub.dense is None and sub.index.tolist() == [2, 0]
    else:
        assert A.g.coef is None and A.g.index is None and sub.dense.shape == (2, N_ENT)


def test_example_loss_by_hand(model):
    h, r, t = torch.tensor([0, 3, 5]), torch.tensor([0, 1, 3]), torch.tensor([1, 2, 0])
    s = state(model)
    for loss in ("score", "train-loss", "logit"):
        want = [float(ref_loss(s, int(a), int(b), int(c), loss, 0.25).detach()) for a, b, c in zip(h, r, t)]
        np.testing.assert_allclose(example_loss(model, h, r, t, loss, 0.25).detach().numpy(), want, rtol=1e-12)
    for fn in (
        lambda: example_loss(model, h, r, t, "mse", 0.1),
        lambda: compute_factors(model, h, r, t, "mse", 0.1, ["fc.weight"]),
    ):
        with pytest.raises(TracegraphError, match=re.escape("loss must be one of train-loss, score, logit, not 'mse'")):
            fn()


def test_compute_factors_puts_the_model_in_eval_mode(model):
    model.train()
    try:
        A = factors(model, DIRS_A, "score", ["bn2.weight"])
        assert not model.training
    finally:
        model.eval()
    ga = ref_grads(model, DIRS_A, "score", ["bn2.weight"])
    np.testing.assert_allclose(influence(A, A, ["bn2.weight"]).numpy(), (ga @ ga.T).numpy(), rtol=1e-10)


def test_compute_factors_under_no_grad(model):
    with torch.no_grad():
        A = factors(model, DIRS_A, "train-loss", ["conv.weight"])
    ga = ref_grads(model, DIRS_A, "train-loss", ["conv.weight"])
    np.testing.assert_allclose(influence(A, A, ["conv.weight"]).numpy(), (ga @ ga.T).numpy(), rtol=1e-10)


# ------------------------------------------------------------------ select_layers


def test_select_layers_by_hand():
    m, nb = tiny(0), tiny(0, bias=False)
    assert select_layers(m, "all") == PARAM_ORDER
    assert select_layers(nb, "all") == PARAM_ORDER[:-1]
    assert select_layers(m, "last:1") == ["entity_bias"]
    assert select_layers(m, "last:2") == ["entity.weight", "entity_bias"]
    assert select_layers(nb, "last:2") == ["bn2.bias", "entity.weight"]
    assert select_layers(m, "last:13") == PARAM_ORDER
    assert select_layers(m, " fc.weight , relation.weight,,") == ["relation.weight", "fc.weight"]
    assert select_layers(m, ["entity_bias", "bn0.weight"]) == ["bn0.weight", "entity_bias"]
    assert select_layers(m, "conv.bias") == ["conv.bias"]
    choose = "choose from: all, last:N, " + ", ".join(PARAM_ORDER)
    for spec, msg in [
        ("last:0", "layers last:N needs 1 <= N <= 13, got 'last:0'"),
        ("last:14", "layers last:N needs 1 <= N <= 13, got 'last:14'"),
        ("last:x", "layers last:N needs 1 <= N <= 13, got 'last:x'"),
        ("last:", "layers last:N needs 1 <= N <= 13, got 'last:'"),
        ("fc.weight,bogus", f"layers: unknown ['bogus']; {choose}"),
        ("Last:2", f"layers: unknown ['Last:2']; {choose}"),
        (" , ", f"layers: unknown []; {choose}"),
        ([], f"layers: unknown []; {choose}"),
    ]:
        with pytest.raises(TracegraphError) as e:
            select_layers(m, spec)
        assert str(e.value) == msg
    with pytest.raises(TracegraphError) as e:
        select_layers(nb, "entity_bias")
    assert str(e.value) == "layers: unknown ['entity_bias']; choose from: all, last:N, " + ", ".join(PARAM_ORDER[:-1])
    with pytest.raises(TracegraphError, match=re.escape("1 <= N <= 12, got 'last:13'")):
        select_layers(nb, "last:13")


# ------------------------------------------------------------------ the driver (engine.py)

TRAIN = np.array([[0, 0, 1], [3, 1, 2], [5, 1, 0], [1, 0, 3], [2, 1, 5]])
TEST = np.array([[0, 1, 3], [1, 0, 2], [5, 0, 5]])


def _payloads(reciprocal=True, lrs=(0.6, 0.15), bias=True):
    """Checkpoints as a reader returns them (float32 models, as trained), keyed by a fake path."""
    out = {}
    for k, lr in enumerate(lrs):
        m = tiny(20 + k, reciprocal=reciprocal, bias=bias, dtype=torch.float32)
        out[f"ck/epoch_{k + 1}.pt"] = (m, model_payload(m, k + 1, lr, {}))
    return out


def _triple_grads(model, triples, loss, layers, reciprocal=True, eps=EPS):
    fwd = ref_grads(model, [tuple(map(int, x)) for x in triples], loss, layers, eps)
    if not reciprocal:
        return fwd
    return fwd + ref_grads(model, [(int(t), int(r) + N_REL, int(h)) for h, r, t in triples], loss, layers, eps)


def _reference(payloads, loss, layers, reciprocal=True, eps=EPS):
    scores, tr, te = np.zeros((len(TEST), len(TRAIN))), np.zeros(len(TRAIN)), np.zeros(len(TEST))
    for m, p in payloads.values():
        a = _triple_grads(m, TRAIN, loss, layers, reciprocal, eps).numpy()
        b = _triple_grads(m, TEST, loss, layers, reciprocal, eps).numpy()
        scores += p["lr"] * b @ a.T
        tr += p["lr"] * (a * a).sum(1)
        te += p["lr"] * (b * b).sum(1)
    return scores, tr, te


class Reader:
    def __init__(self, payloads):
        self.payloads, self.calls = payloads, []

    def __call__(self, path, map_location):
        self.calls.append((path, map_location))
        return self.payloads[path]


class Progress:
    def __init__(self):
        self.calls = []

    def add_task(self, *a, **k):
        self.calls.append(("add", a, k))
        return "T"

    def update(self, *a, **k):
        self.calls.append(("update", a, k))

    def remove_task(self, *a, **k):
        self.calls.append(("remove", a, k))


def _run(payloads, progress=None, **kw):
    reader = Reader({p: pl for p, (_, pl) in payloads.items()})
    opts = InfluenceOptions(label_smoothing=EPS, **kw)
    res = compute_influence(list(payloads), TRAIN, TEST, opts, torch.device("cpu"), progress, read=reader)
    return res, reader


def _close(got, want):
    scale = np.abs(want).max()
    assert scale > 1e-3
    np.testing.assert_allclose(got, want, rtol=0, atol=3e-6 * scale)


@pytest.mark.parametrize("method", ["exact", "autograd"])
@pytest.mark.parametrize(
    "loss,layers,names",
    [
        ("train-loss", "all", PARAM_ORDER),
        ("score", "last:3", PARAM_ORDER[-3:]),
        ("train-loss", "fc.weight,relation.weight", ["relation.weight", "fc.weight"]),
    ],
)
def test_driver_against_reference_with_uneven_batches(method, loss, layers, names):
    pl = _payloads()
    want, want_tr, want_te = _reference(pl, loss, names)
    res, reader = _run(pl, engine=method, loss=loss, layers=layers, batch_size=2, test_batch_size=2)
    assert reader.calls == [(p, "cpu") for p in pl]  # each checkpoint read once, in order, to the CPU
    assert res.layers == names
    assert [(c.path, c.epoch, c.lr) for c in res.checkpoints] == [("ck/epoch_1.pt", 1, 0.6), ("ck/epoch_2.pt", 2, 0.15)]
    assert isinstance(res.scores, np.ndarray) and res.scores.dtype == np.float64 and res.scores.shape == (3, 5)
    _close(res.scores, want)
    _close(res.train_self, want_tr)
    _close(res.test_self, want_te)
    assert res.train_self.dtype == np.float64 and res.test_self.dtype == np.float64


def test_driver_without_reciprocal_relations_and_bias():
    pl = _payloads(reciprocal=False, bias=False, lrs=(0.3, 0.9))
    names = PARAM_ORDER[:-1]
    want, want_tr, want_te = _reference(pl, "score", names, reciprocal=False)
    res, _ = _run(pl, loss="score", batch_size=3, test_batch_size=2)
    _close(res.scores, want)
    _close(res.train_self, want_tr)
    _close(res.test_self, want_te)


def test_driver_progress_and_auto_batch_size():
    pl = _payloads()
    prog = Progress()
    res, _ = _run(pl, progress=prog, batch_size=2, test_batch_size=2)
    ups = [("update", ("T",), {"advance": 1, "info": f"checkpoint {k}/2"}) for k in (1, 2) for _ in range(3)]
    assert prog.calls == [("add", ("influence",), {"total": 6, "info": ""}), *ups, ("remove", ("T",), {})]
    prog = Progress()
    res2, _ = _run(pl, progress=prog)  # batch_size 0: 512 on the CPU, one batch per checkpoint
    assert prog.calls[0] == ("add", ("influence",), {"total": 2, "info": ""}) and len(prog.calls) == 4
    _close(res2.scores, res.scores)


def test_driver_refuses_a_checkpoint_without_learning_rate():
    pl = _payloads(lrs=(0.6,))
    path = list(pl)[0]
    del pl[path][1]["lr"]
    with pytest.raises(TracegraphError) as e:
        _run(pl)
    assert str(e.value) == f"{path}: checkpoint records no learning rate; TracIn needs η_k"
    pl[path][1]["lr"] = None
    with pytest.raises(TracegraphError, match="records no learning rate"):
        _run(pl)


def test_driver_checks_its_options_before_reading():
    pl = _payloads(lrs=(0.6,))
    for kw, msg in [
        (dict(engine="magic"), "engine must be one of exact, autograd, vmap, not 'magic'"),
        (dict(loss="mse"), "loss must be one of train-loss, score, logit, not 'mse'"),
    ]:
        reader = Reader({})
        with pytest.raises(TracegraphError) as e:
            compute_influence(list(pl), TRAIN, TEST, InfluenceOptions(**kw), torch.device("cpu"), read=reader)
        assert str(e.value) == msg and reader.calls == []


def test_driver_with_no_checkpoints():
    res = compute_influence([], TRAIN, TEST, InfluenceOptions(), torch.device("cpu"), read=Reader({}))
    assert res.checkpoints == [] and res.layers == []
    assert not res.scores.any() and res.scores.shape == (3, 5)
    assert res.train_self.tolist() == [0.0] * 5 and res.test_self.tolist() == [0.0] * 3


def test_alloc_in_memory_up_to_the_budget_then_a_deleted_scratch_file(tmp_path):
    a = _alloc(3, 5, InfluenceOptions(memory_budget_bytes=120, scratch_dir=str(tmp_path)))
    assert type(a) is np.ndarray and a.dtype == np.float64 and a.shape == (3, 5) and not a.any()
    b = _alloc(3, 5, InfluenceOptions(memory_budget_bytes=119, scratch_dir=str(tmp_path)))
    assert isinstance(b, np.memmap) and b.dtype == np.float32 and b.shape == (3, 5) and not b.any()
    f = b.filename
    assert f is not None
    from pathlib import Path

    f = Path(f)
    assert f.parent == tmp_path and f.name.startswith("tracin_") and f.name.endswith(".f32")
    b[:] = 1.5
    assert float(b.sum()) == 22.5
    del b
    gc.collect()
    assert list(tmp_path.iterdir()) == []  # the scratch file does not outlive the array


def test_auto_batch_size_by_hand():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert auto_batch_size(10, cpu) == 512 and auto_batch_size(10**7, cpu) == 512
    # 2**29 bytes of [2·batch, N] float32 score gradients: 2**29 // (8 N), between 256 and 4096
    for n, want in [
        (0, 4096),
        (1, 4096),
        (2**14, 4096),
        (2**15, 2048),
        (3 * 2**15, 682),
        (2**17, 512),
        (2**18, 256),
        (10**7, 256),
    ]:
        got = auto_batch_size(n, cuda)
        assert got == want and type(got) is int, (n, got)


def test_accumulator_on_the_host():
    out = np.zeros((2, 4), np.float64)
    acc = _Accumulator(out, torch.device("cpu"), budget=10**9)
    assert acc.buf is None
    acc.add(slice(1, 3), torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float32))
    acc.add(slice(2, 4), torch.tensor([[0.5, 0.25], [1.0, 2.0]], dtype=torch.float32))
    assert acc.finish() is out
    assert out.tolist() == [[0, 1, 2.5, 0.25], [0, 3, 5, 2]]
    mm = np.zeros((1, 2), np.float32)
    acc = _Accumulator(mm, torch.device("cpu"), budget=10**9)
    acc.add(slice(0, 2), torch.tensor([[1e-8, 2.0]], dtype=torch.float64))
    assert acc.finish().dtype == np.float32 and mm.tolist() == [[np.float32(1e-8), 2.0]]


def test_accumulator_adds_in_the_scratch_arrays_precision():
    """Into a float32 (memmap) result, each block is rounded to float32 first, then added in float32:
    1 + (2⁻²⁴ + 2⁻⁵⁰) gives 1 that way (the block rounds to 2⁻²⁴, a tie, to even), 1 + 2⁻²³ if added in
    float64 and rounded once."""
    out = np.ones((1, 1), np.float32)
    x = 2.0**-24 + 2.0**-50
    _Accumulator(out, torch.device("cpu"), budget=0).add(slice(0, 1), torch.tensor([[x]], dtype=torch.float64))
    assert out[0, 0] == np.float32(1) + np.float32(x) == np.float32(1)


class _FakeCuda:
    type = "cuda"


def test_accumulator_on_a_device_when_it_fits(monkeypatch):
    """The device buffer path (GPU), with torch.zeros' device argument dropped so it runs on CPU."""
    zeros = torch.zeros
    seen = []

    def fake_zeros(*a, device=None, **k):
        seen.append((a, k, device))
        return zeros(*a, **k)

    monkeypatch.setattr(torch, "zeros", fake_zeros)
    T = 2 * 4096 + 5  # the host copy goes in 4096-row slabs: two whole ones and a partial one
    out = np.zeros((T, 2), np.float64)
    assert _Accumulator(out, _FakeCuda(), budget=T * 2 * 8 - 1).buf is None
    acc = _Accumulator(out, _FakeCuda(), budget=T * 2 * 8)
    assert acc.buf is not None and acc.buf.dtype == torch.float64 and tuple(acc.buf.shape) == (T, 2)
    assert isinstance(seen[-1][2], _FakeCuda)
    block = torch.arange(2 * T, dtype=torch.float32).view(T, 2)
    acc.add(slice(0, 2), block)
    acc.add(slice(1, 2), block[:, :1])
    assert not out.any()  # nothing reaches the host before finish
    res = acc.finish()
    assert res is out
    want = block.double().numpy().copy()
    want[:, 1] += block[:, 0].double().numpy()
    assert (out == want).all()


def test_fold_sums_the_two_directions_of_each_triple():
    block = torch.arange(24.0).view(4, 6)  # [2·n_a, 2·n_b], n_a = 2, n_b = 3
    assert _fold(block, 2, 3, False) is block
    want = block[:2, :3] + block[:2, 3:] + block[2:, :3] + block[2:, 3:]
    assert torch.equal(_fold(block, 2, 3, True), want)
    assert _fold(block, 2, 3, True).tolist() == [[30, 34, 38], [54, 58, 62]]


# ------------------------------------------------------------------ explain.py: rows, top-k, files

import csv  # noqa: E402
import json  # noqa: E402

from tracegraph.errors import DataError  # noqa: E402
from tracegraph.kg.data.labels import describe_edge_key  # noqa: E402
from tracegraph.kg.explain.tracin import explain as ex  # noqa: E402
from tracegraph.kg.explain.tracin import rows as rw  # noqa: E402
from tracegraph.kg.explain.tracin import sharding as sh  # noqa: E402
from tracegraph.kg.explain.tracin import influence as tracin_object  # noqa: E402
from tracegraph.kg.explain.tracin.influence import TracIn  # noqa: E402
from tracegraph.kg.explain.tracin.explain import CSV_HEADER, ExplainConfig, run_explain  # noqa: E402
from tracegraph.kg.outputs import explain_files, write_csv, write_explanations  # noqa: E402
from tracegraph.kg.explain.tracin.engine import InfluenceResult  # noqa: E402
from tracegraph.kg.model.model_io import build_model  # noqa: E402
from tracegraph.runtime.checkpoints import load_checkpoint  # noqa: E402

# six entities, two relations: the sizes the float64 reference above is written for
RUN_TRIPLES = [
    ("a", "r", "b"),
    ("b", "r", "c"),
    ("c", "s", "a"),
    ("a", "s", "d"),
    ("d", "r", "b"),
    ("c", "r", "d"),
    ("e", "s", "f"),
    ("f", "r", "a"),
]
RUN_TESTS = [("a", "r", "c"), ("zz", "r", "b"), ("b", "q", "c"), ("e", "r", "d"), ("c", "s", "f")]


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    from tracegraph.kg.model.train import TrainConfig, train

    d = tmp_path_factory.mktemp("tiny_run")
    (d / "train.txt").write_text("".join("\t".join(t) + "\n" for t in RUN_TRIPLES))
    (d / "test.txt").write_text("".join("\t".join(t) + "\n" for t in RUN_TESTS))
    train(
        TrainConfig(
            train=str(d / "train.txt"),
            output_dir=str(d / "run"),
            epochs=2,
            batch_size=4,
            lr_decay=0.5,
            learning_rate=0.05,
            checkpoint_every=1,
            label_smoothing=0.1,
            device="cpu",
            model=dict(embedding_dim=6, embedding_height=2, embedding_width=3, output_channels=2, kernel_size=2),
        )
    )
    train(
        TrainConfig(
            train=str(d / "train.txt"),
            output_dir=str(d / "other"),
            epochs=1,
            batch_size=4,
            device="cpu",
            model=dict(embedding_dim=6, embedding_height=2, embedding_width=3, output_channels=2, kernel_size=2),
        )
    )  # another run, for the one-run check
    (d / "names.txt").write_text("".join(f"Name {x}\t{i}\n" for i, x in enumerate("ab")))  # only ids 0, 1 named
    (d / "edges.json").write_text(json.dumps({json.dumps({"predicate": "P:r", "q": "up"}): "r"}))
    return d


def _explain_cfg(d, out, **settings) -> ExplainConfig:
    """An explain of the tiny run's test file on the CPU, written to ``out``.

    The file's lines 2 and 3 name an entity and a relation the run lacks: they are set aside.
    """
    return ExplainConfig(
        model_dir=str(d / "run"),
        train=str(d / "train.txt"),
        test_triples=str(d / "test.txt"),
        output_dir=str(out),
        device="cpu",
        **{"skip_unresolved": True, **settings},
    )


def _run_reference(run_dir, loss, eps, layers=PARAM_ORDER):
    """{(test labels, train labels): Σ_k η_k ⟨∇ℓ_test, ∇ℓ_train⟩}, self-influences, from the float64 reference."""
    from tracegraph.kg.model.model_io import list_epoch_checkpoints
    from tracegraph.kg.data.idmap import IdMap

    ents = IdMap.read(run_dir / "node_dict.txt", "e")
    rels = IdMap.read(run_dir / "rel_dict.txt", "r")
    assert len(ents) == N_ENT and len(rels) == N_REL
    enc = lambda ts: np.array([[ents.id(h), rels.id(r), ents.id(t)] for h, r, t in ts])  # noqa: E731
    tests = [t for t in RUN_TESTS if t[0] in ents and t[2] in ents and t[1] in rels]
    a_ids, b_ids = enc(RUN_TRIPLES), enc(tests)
    score, tself, trself = {}, {}, {}
    for p in list_epoch_checkpoints(run_dir):
        pl = load_checkpoint(p)
        m = build_model(pl, p).eval()
        a = _triple_grads(m, a_ids, loss, layers, eps=eps).numpy()
        b = _triple_grads(m, b_ids, loss, layers, eps=eps).numpy()
        for j, tt in enumerate(tests):
            tself[tt] = tself.get(tt, 0) + pl["lr"] * float(b[j] @ b[j])
            for i, tr in enumerate(RUN_TRIPLES):
                score[tt, tr] = score.get((tt, tr), 0) + pl["lr"] * float(b[j] @ a[i])
        for i, tr in enumerate(RUN_TRIPLES):
            trself[tr] = trself.get(tr, 0) + pl["lr"] * float(a[i] @ a[i])
    return score, tself, trself


def _filtered_tail_ranks(checkpoint, tests, known_triples):
    """{test: (filtered realistic tail rank, logit)} by a naive loop over every tail in float64:
    the other known tails of (h, r) are left out, ties count half."""
    from tracegraph.kg.data.idmap import IdMap

    run_dir = checkpoint.parent
    ents, rels = IdMap.read(run_dir / "node_dict.txt", "e"), IdMap.read(run_dir / "rel_dict.txt", "r")
    pl = load_checkpoint(checkpoint)
    m = build_model(pl, checkpoint).double().eval()
    out = {}
    for h, r, t in tests:
        with torch.no_grad():
            s = m.score_all(torch.tensor([ents.id(h)]), torch.tensor([rels.id(r)]))[0].tolist()
        others = {ents.id(c) for a, b, c in known_triples if a == h and b == r and c != t}
        st = s[ents.id(t)]
        rest = [v for e, v in enumerate(s) if e != ents.id(t) and e not in others]
        out[(h, r, t)] = (1 + sum(v > st for v in rest) + sum(v == st for v in rest) / 2, st)
    return out


def _naive_picks(score, k):
    """A top-k listing by hand: the k highest positive scores (descending, ties by position), then
    the k most negative (ascending, ties by position)."""
    n = len(score)
    pro = [i for i in sorted(range(n), key=lambda i: (-score[i], i)) if score[i] > 0][:k]
    opp = [i for i in sorted(range(n), key=lambda i: (score[i], i)) if score[i] < 0][:k]
    return pro + opp


def _read_csv(p):
    with open(p, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def test_run_explain_files_against_the_reference(tiny_run, tmp_path, caplog):
    d = tiny_run
    out = tmp_path / "o" / "deeper"  # made with its parents
    cfg = _explain_cfg(
        d,
        out,
        node_name_dict=str(d / "names.txt"),
        edge_map=str(d / "edges.json"),
        method="tracin",
        loss="score",
        skip_unresolved=True,
    )
    with caplog.at_level("WARNING", logger="tracegraph"):
        result = run_explain(cfg)
    assert not out.exists()  # records only: the writer writes
    write_explanations(result, out)
    summary = result.summary
    collected = [[x if isinstance(x, str) else float(x) for x in r] for r in result.frame().itertuples(index=False)]
    unresolved = [
        {"line": 2, "question": ["zz", "r", "b"], "reason": "entity 'zz' is not in the id map"},
        {"line": 3, "question": ["b", "q", "c"], "reason": "relation 'q' is not in the id map"},
    ]
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        f"skipped question on line {u['line']} {u['question']}: {u['reason']}" for u in unresolved
    ]
    score, tself, trself = _run_reference(d / "run", "score", 0.1)
    ckpts = sorted(str(p) for p in (d / "run" / "checkpoints").glob("epoch_*.pt"))
    assert len(ckpts) == 2
    explained = [(0, RUN_TESTS[0]), (3, RUN_TESTS[3]), (4, RUN_TESTS[4])]
    names = [f"triple_{i:03d}_{t[0]}_{t[2]}" for i, t in explained]
    assert summary["files"] == [f for n in names for f in (f"{n}_tracin.csv", f"{n}_tracin.json")]
    assert sorted(p.name for p in out.iterdir()) == sorted(summary["files"] + ["summary.json", "unresolved.tsv"])
    assert (out / "unresolved.tsv").read_text().splitlines() == ["line\tquestion\treason"] + [
        f"{u['line']}\t{' | '.join(u['question'])}\t{u['reason']}" for u in unresolved
    ]
    assert json.loads((out / "summary.json").read_text()) == summary
    elapsed = summary.pop("elapsed_seconds")
    assert isinstance(elapsed, float) and 0 < elapsed < 600
    ranked = _filtered_tail_ranks(d / "run" / "final_model.pt", [t for _, t in explained], RUN_TRIPLES)
    assert summary.pop("triples") == [
        {
            "index": i,
            "head": t[0],
            "relation": t[1],
            "tail": t[2],
            "rank": ranked[t][0],
            "score": pytest.approx(ranked[t][1], rel=1e-5, abs=1e-6),
            "rival": None,
            "csv": f"{n}_tracin.csv",
            "json": f"{n}_tracin.json",
        }
        for (i, t), n in zip(explained, names)
    ]
    assert summary.pop("side") == "tail" and summary.pop("top_k") is None
    assert summary == {
        "requested": 5,
        "explained": 3,
        "skipped_existing": 0,
        "failed": 0,
        "failures": [],
        "unresolved": unresolved,
        "files": summary["files"],
        "method": "tracin",
        "engine": "exact",
        "loss": "score",
        "layers": PARAM_ORDER,
        "checkpoints": ckpts,
        "training_triples": 8,
        "union_of_ranked_training_triples": 8,
        "device": "cpu",
    }
    name_of = {"a": "Name a", "b": "Name b"}
    rel_of = {"r": "P:r (q=up)", "s": "s"}
    assert rel_of["r"] == describe_edge_key(json.dumps({"predicate": "P:r", "q": "up"}))
    # the run's entity ids: names.txt names ids 0 and 1, whichever labels they are
    from tracegraph.kg.data.idmap import IdMap

    labels = IdMap.read(d / "run" / "node_dict.txt", "e").labels
    name_of = {lab: (f"Name {'ab'[i]}" if i < 2 else lab) for i, lab in enumerate(labels)}
    all_rows = []
    for (i, tt), n in zip(explained, names):
        header, body = _read_csv(out / f"{n}_tracin.csv")
        assert header == CSV_HEADER + ["Role"] and len(body) == 8
        assert [r[-1] for r in body] == ["opponent" if float(r[12]) < 0 else "proponent" for r in body]
        got_scores = [float(r[12]) for r in body]
        assert got_scores == sorted(got_scores, reverse=True)
        want = {tr: score[tt, tr] for tr in RUN_TRIPLES}
        scale = max(abs(v) for v in want.values())
        assert scale > 1e-6
        for r in body:
            h, rl, t = tt
            assert r[:6] == [h, name_of[h], rl, rel_of[rl], t, name_of[t]]
            tr = (r[6], r[8], r[10])
            assert r[7] == name_of[tr[0]] and r[9] == rel_of[tr[1]] and r[11] == name_of[tr[2]]
            assert abs(float(r[12]) - want[tr]) < 1e-4 * scale
            assert abs(float(r[13]) - trself[tr]) < 1e-4 * max(trself.values())
        assert sorted((r[6], r[8], r[10]) for r in body) == sorted(RUN_TRIPLES)
        meta = json.loads((out / f"{n}_tracin.json").read_text())
        rows = meta.pop("rows")
        assert [[row[k] for k in CSV_HEADER] for row in rows] == [r[:12] + [float(x) for x in r[12:-1]] for r in body]
        assert repr(rows[0]["TracInScore"]) == body[0][12]  # written exactly
        tsi = meta.pop("test_self_influence")
        assert abs(tsi - tself[tt]) < 1e-4 * tself[tt]
        assert meta["test_triple"].pop("rank") == ranked[tt][0]
        assert meta["test_triple"].pop("score") == pytest.approx(ranked[tt][1], rel=1e-5, abs=1e-6)
        assert meta == {
            "test_triple": {"index": i, "head": tt[0], "relation": tt[1], "tail": tt[2]},
            "method": "tracin",
            "side": "tail",
            "engine": "exact",
            "loss": "score",
            "label_smoothing": 0.1,
            "layers": PARAM_ORDER,
            "checkpoints": [
                {"path": p, "epoch": k + 1, "lr": lr} for k, (p, lr) in enumerate(zip(ckpts, meta["learning_rates"]))
            ],
            "learning_rates": meta["learning_rates"],
            "training_triples_ranked": 8,
            "top_k": None,
        }
        assert len(meta["learning_rates"]) == 2 and meta["learning_rates"][1] == pytest.approx(
            0.5 * meta["learning_rates"][0]
        )
        all_rows += [r[:12] + [float(x) for x in r[12:-1]] + [r[-1]] for r in body]
    assert collected == all_rows


def test_run_explain_top_k_subsets_and_window(tiny_run, tmp_path):
    d = tiny_run
    from tracegraph.kg.data.idmap import IdMap

    ents = IdMap.read(d / "run" / "node_dict.txt", "e")
    calls = []

    def subsets(h, t):
        calls.append((h, t))
        if ents.labels[h] == "c":
            return []  # nothing around this one
        return [0, 2, 3, 5, 7] if ents.labels[h] == "e" else [1, 2]

    out = tmp_path / "k"
    out.mkdir()  # an existing output folder is fine
    summary = explain_files(
        _explain_cfg(
            d,
            out,
            top_k=2,
            loss="train-loss",
            label_smoothing=0.3,
            start_index=2,
            max_triples=3,
            method="tracin",
            skip_unresolved=True,
        ),
        train_subsets=subsets,
    )
    assert summary["requested"] == 3 and summary["explained"] == 1 and summary["failed"] == 1
    assert summary["unresolved"] == [
        {"line": 3, "question": ["b", "q", "c"], "reason": "relation 'q' is not in the id map"}
    ]  # the window's questions only: line 2's unknown entity lies before start_index
    assert summary["failures"] == [
        {"index": 4, "triple": ["c", "s", "f"], "reason": "the filtered training graph around this triple is empty"},
    ]
    assert summary["union_of_ranked_training_triples"] == 5 and summary["loss"] == "train-loss"
    assert summary["files"] == ["triple_003_e_d_tracin.csv", "triple_003_e_d_tracin.json"]
    assert [(ents.labels[h], ents.labels[t]) for h, t in calls] == [("e", "d"), ("c", "f")]
    score, _, trself = _run_reference(d / "run", "train-loss", 0.3)
    tt = ("e", "r", "d")
    cand = [RUN_TRIPLES[i] for i in (0, 2, 3, 5, 7)]
    order = sorted(cand, key=lambda tr: -score[tt, tr])
    pro = [tr for tr in order if score[tt, tr] > 0][:2]
    opp = sorted((tr for tr in cand if score[tt, tr] < 0), key=lambda tr: score[tt, tr])[:2]
    _, body = _read_csv(out / "triple_003_e_d_tracin.csv")
    assert [(r[6], r[8], r[10]) for r in body] == pro + opp  # proponents, then opponents (most negative first)
    assert [r[-1] for r in body] == ["proponent"] * len(pro) + ["opponent"] * len(opp)
    for r in body:
        assert abs(float(r[12]) - score[tt, (r[6], r[8], r[10])]) < 1e-4 * max(abs(score[tt, c]) for c in cand)
    meta = json.loads((out / "triple_003_e_d_tracin.json").read_text())
    assert meta["training_triples_ranked"] == 5 and meta["top_k"] == 2 and meta["label_smoothing"] == 0.3
    assert meta["loss"] == "train-loss" and len(meta["rows"]) == len(pro) + len(opp)
    # the second run skips the finished triple and writes nothing new for it
    before = (out / "triple_003_e_d_tracin.csv").read_bytes()
    s2 = explain_files(
        _explain_cfg(
            d,
            out,
            start_index=3,
            max_triples=1,
            skip_existing=True,
        )
    )
    assert s2["skipped_existing"] == 1 and s2["explained"] == 0 and s2["requested"] == 1 and s2["files"] == []
    assert s2["layers"] == "all" and s2["union_of_ranked_training_triples"] == 0
    assert (out / "triple_003_e_d_tracin.csv").read_bytes() == before


def test_run_explain_on_two_cpu_devices_equals_one(tiny_run, tmp_path):
    d = tiny_run
    kw = dict(
        model_dir=str(d / "run"),
        train=str(d / "train.txt"),
        test_triples=str(d / "test.txt"),
        device="cpu",
        top_k=1,
        layers="last:2",
        skip_unresolved=True,
    )
    one = explain_files(ExplainConfig(output_dir=str(tmp_path / "one"), **kw))
    two = explain_files(ExplainConfig(output_dir=str(tmp_path / "two"), devices=["cpu", "cpu"], **kw))
    assert two["devices"] == ["cpu", "cpu"] and "devices" not in one and one["layers"] == PARAM_ORDER[-2:]
    for f in one["files"]:
        if f.endswith(".csv"):
            assert _read_csv(tmp_path / "one" / f) == _read_csv(tmp_path / "two" / f)
    with pytest.raises(TracegraphError, match="method relatif runs in one process on one device"):
        explain_files(ExplainConfig(output_dir=str(tmp_path / "three"), devices=["cpu", "cpu"], method="relatif", **kw))
    with pytest.raises(TracegraphError, match="method must be one of .*, not 'tfidf'"):
        explain_files(ExplainConfig(output_dir=str(tmp_path / "three"), devices=["cpu", "cpu"], method="tfidf", **kw))


@pytest.mark.parametrize("devices", [None, ["cpu", "cpu"]])
def test_explain_scores_are_the_tracin_objects_on_the_same_candidates(tiny_run, devices):
    """explain scores through a TracIn object: its TracInScore and SelfInfluence columns are, bit for
    bit, ``TracIn(run, ...)``'s influence and self-influence with the same settings (a non-default
    loss, smoothing and layers, so an option explain failed to hand over would show); with the
    test triples split over two devices, the same to fp32 rounding."""
    import tracegraph

    d = tiny_run
    settings = dict(loss="train-loss", label_smoothing=0.3, layers="last:2")
    result = run_explain(
        ExplainConfig(
            model_dir=str(d / "run"),
            train=str(d / "train.txt"),
            method="tracin",
            test_triples=str(d / "test.txt"),
            device="cpu",
            devices=devices,
            skip_unresolved=True,
            **settings,
        )
    )
    tracin = tracegraph.TracIn(tracegraph.open_run(d / "run"), train=str(d / "train.txt"), progress=False, **settings)
    explained = [RUN_TESTS[i] for i in (0, 3, 4)]  # the others name labels the run does not know
    want = tracin.influence(explained)
    want_self = tracin.self_influence()
    assert [e.meta["test_triple"]["index"] for e in result.explanations] == [0, 3, 4]
    for j, e in enumerate(result.explanations):
        rows = e.rows
        got = {
            (h, r, t): (s, si)
            for h, r, t, s, si in zip(
                rows["TrainHead"], rows["TrainRel"], rows["TrainTail"], rows["TracInScore"], rows["SelfInfluence"]
            )
        }
        assert len(got) == len(RUN_TRIPLES)
        for i, tr in enumerate(RUN_TRIPLES):
            if devices is None:  # the same call: the same bits
                assert got[tr] == (want[j, i], want_self[i]), (explained[j], tr)
            else:  # fp32 products over other test-batch shapes: equal to rounding
                assert got[tr] == (pytest.approx(want[j, i], rel=1e-6), pytest.approx(want_self[i], rel=1e-6))
    assert result.summary["layers"] == PARAM_ORDER[-2:]


def test_influence_over_devices_stacks_test_shards(tiny_run):
    from tracegraph.kg.model.model_io import list_epoch_checkpoints

    ck = list_epoch_checkpoints(tiny_run / "run")
    train_rows, test_ids = np.array([[0, 0, 1], [2, 1, 3], [4, 0, 5]]), np.array([[1, 0, 2], [3, 1, 4], [5, 0, 0]])
    opts = InfluenceOptions(loss="score", batch_size=2)
    whole = compute_influence(ck, train_rows, test_ids, opts, torch.device("cpu"))
    cpu = torch.device("cpu")
    for devs in ([cpu, cpu], [cpu, cpu, cpu, cpu, cpu]):  # more devices than test triples: some go unused
        res = sh._influence_over_devices(
            devs, TracIn.from_parts(None, train_rows, ck, opts), np.arange(3), test_ids, None
        )
        assert res.scores.shape == (3, 3) and type(res.scores) is np.ndarray
        # fp32 sums over other test-batch shapes: equal to rounding
        np.testing.assert_allclose(res.scores, whole.scores, rtol=1e-6)
        np.testing.assert_allclose(res.test_self, whole.test_self, rtol=1e-6)
        np.testing.assert_allclose(res.train_self, whole.train_self, rtol=1e-6)
        assert res.layers == whole.layers and res.checkpoints == whole.checkpoints
    small = InfluenceOptions(loss="score", batch_size=2, memory_budget_bytes=0, scratch_dir=None)
    res = sh._influence_over_devices(
        [cpu, cpu], TracIn.from_parts(None, train_rows, ck, small), np.arange(3), test_ids, None
    )
    assert isinstance(res.scores, np.memmap)
    np.testing.assert_allclose(res.scores, whole.scores, rtol=1e-6)


class _Ctx:
    def __init__(self, rank, world):
        self.rank, self.world_size = rank, world


@pytest.mark.parametrize("top_k", [None, 1, 2])
def test_influence_over_ranks_merges_shards_like_one_process(tiny_run, monkeypatch, top_k):
    """torchrun's merge, with the gather done by hand: every rank's shard, then rank 0's picks."""
    from tracegraph.kg.model.model_io import list_epoch_checkpoints

    ck = list_epoch_checkpoints(tiny_run / "run")
    train_ids = np.array([[0, 0, 1], [1, 0, 2], [2, 1, 0], [0, 1, 3], [3, 0, 1], [2, 0, 3], [4, 1, 5], [5, 0, 0]])
    union = np.array([0, 1, 2, 3, 5, 6, 7])
    cols_of = [np.array([0, 1, 2, 3, 4, 5, 6]), np.array([1, 4, 6]), np.array([5])]
    test_ids = np.array([[1, 0, 2], [3, 1, 4], [5, 0, 0]])
    opts = InfluenceOptions(loss="score", batch_size=2)
    whole = compute_influence(ck, train_ids[union], test_ids, opts, torch.device("cpu"))
    mine = {}
    for rank in (1, 2, 0):
        monkeypatch.setattr(
            sh,
            "gather_to_main",
            lambda m, rank=rank: (mine.__setitem__(rank, m), None)[1] if rank else [m, mine[1], mine[2]],
        )
        res, picks = sh._influence_over_ranks(
            _Ctx(rank, 3), TracIn.from_parts(None, train_ids, ck, opts), union, cols_of, test_ids, None, top_k
        )
        assert (picks is None) == (rank != 0)
    assert res.scores.shape == (3, 2)  # rank 0: batches [0, 1) -> rows 0, 1
    for j, cols in enumerate(cols_of):
        pos, sc, si, key = picks[j]
        assert key is None  # plain TracIn: no margin column
        want_sc = whole.scores[j, cols]
        if top_k is not None and 2 * top_k < len(cols):
            keep = set(_naive_picks(want_sc, top_k))
            assert set(pos.tolist()) >= keep  # every global proponent and opponent reached rank 0
        else:
            assert pos.tolist() == list(range(len(cols)))
        assert pos.tolist() == sorted(pos.tolist())
        np.testing.assert_array_equal(sc, want_sc[pos])
        np.testing.assert_array_equal(si, whole.train_self[cols][pos])


def test_resolve_checkpoint_list(tiny_run, tmp_path, caplog):
    run = tiny_run / "run"
    epochs = sorted((run / "checkpoints").glob("epoch_*.pt"))
    assert ex.resolve_checkpoint_list(run, None) == epochs == ex.resolve_checkpoint_list(run, ["all"])
    assert ex.resolve_checkpoint_list(run, ["final", str(epochs[0]), "final"]) == [
        run / "final_model.pt",
        epochs[0],
        run / "final_model.pt",
    ]
    assert not (run / "best_model.pt").exists()  # trained without a validation set
    bare = tmp_path / "bare"
    bare.mkdir()
    for f in ("final_model.pt", "node_dict.txt", "rel_dict.txt", "config.json"):
        if (run / f).exists():
            (bare / f).write_bytes((run / f).read_bytes())
    with caplog.at_level("WARNING"):
        got = ex.resolve_checkpoint_list(bare, ["all"])
    assert len(got) == 1 and got[0].name in ("best_model.pt", "final_model.pt")
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        "no checkpoints/epoch_*.pt: using the single final/best model"
    ]
    with pytest.raises(DataError) as e:
        ex.resolve_checkpoint_list(bare, ["best"])
    assert "--checkpoints best: best_model.pt not found" in str(e.value) and "bare" in str(e.value)
    with pytest.raises(DataError) as e:
        ex.resolve_checkpoint_list(bare, [str(bare / "nope.pt")])
    assert str(e.value) == f"{bare / 'nope.pt'}: checkpoint not found"
    with pytest.raises(DataError):
        ex.resolve_checkpoint_list(bare, [str(bare)])  # a folder is not a checkpoint file


def test_rows_order_top_k_and_method_column():
    labels, rels = ["e0", "e1", "e2"], ["r0", "r1"]
    names, rnames = ["N0", "N1", "N2"], ["R0", "R1"]
    scores = np.array([0.5, -1.0, 2.0, 0.5, 0.0])
    self_inf = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    train = np.array([[0, 0, 1], [1, 1, 2], [2, 0, 0], [0, 1, 2], [1, 0, 1]])
    head = ["e2", "N2", "r1", "R1", "e0", "N0"]
    rows = rw._rows(scores, self_inf, train, (2, 1, 0), None, labels, rels, names, rnames)
    # descending, ties in input order (rows 0 and 3 both score 0.5)
    assert [r[12] for r in rows] == [2.0, 0.5, 0.5, 0.0, -1.0] and [r[13] for r in rows] == [3.0, 1.0, 4.0, 5.0, 2.0]
    assert rows[0] == head + ["e2", "N2", "r0", "R0", "e0", "N0", 2.0, 3.0, "proponent"]
    assert all(len(r) == 15 and r[:6] == head for r in rows)
    assert all(type(x) is float for r in rows for x in r[12:-1])
    assert [r[-1] for r in rows] == ["proponent"] * 4 + ["opponent"]  # the negative one; zero is not against
    top = rw._rows(scores, self_inf, train, (2, 1, 0), 2, labels, rels, names, rnames)
    # 2 positive proponents, then the one negative row: a zero or weak proponent never fills the opponents
    assert [r[13] for r in top] == [3.0, 1.0, 2.0] and [r[-1] for r in top] == ["proponent"] * 2 + ["opponent"]
    assert [r[12] for r in rw._rows(scores, self_inf, train, (2, 1, 0), 3, labels, rels, names, rnames)] == [
        2.0,
        0.5,
        0.5,
        -1.0,
    ]
    method = np.array([0.0, 9.0, 1.0, 1.0, -3.0])
    m = rw._rows(scores, self_inf, train, (2, 1, 0), 1, labels, rels, names, rnames, method)
    assert [r[12:] for r in m] == [[-1.0, 2.0, 9.0, "proponent"], [0.0, 5.0, -3.0, "opponent"]]


def test_write_csv_writes_floats_exactly(tmp_path):
    p = tmp_path / "x.csv"
    row = [f"c{i}" for i in range(12)] + [0.1 + 0.2, -1e-300]
    write_csv(p, [row, row[:12] + [1.0, 2.5]], CSV_HEADER)
    text = p.read_bytes().decode("utf-8")
    assert text.splitlines()[0] == ",".join(CSV_HEADER)
    assert text.splitlines()[1] == ",".join(row[:12]) + ",0.30000000000000004,-1e-300"
    assert "\r\n" in text  # the csv module's line ends, no blank lines between rows (newline="")
    assert "\r\r\n" not in text and len(text.splitlines()) == 3
    write_csv(p, [row[:12] + [1.0, 2.0, 3.0]], [*CSV_HEADER, "MethodScore"])
    assert p.read_text().splitlines() == [",".join(CSV_HEADER) + ",MethodScore", ",".join(row[:12]) + ",1.0,2.0,3.0"]
    write_csv(p, [row[:12] + [1.0, 2.0, "opponent"]], [*CSV_HEADER, "Role"])  # the Role is text, not a float
    assert p.read_text().splitlines()[1] == ",".join(row[:12]) + ",1.0,2.0,opponent"
    q = tmp_path / "u.csv"
    write_csv(q, [["é"] * 12 + [1.0, 1.0]], CSV_HEADER)
    assert q.read_bytes().decode("utf-8").splitlines()[1].startswith("é,é")


def test_names_and_relation_names(tmp_path):
    nd = tmp_path / "n.txt"
    nd.write_text("Alpha\t0\nGamma\t2\n")
    assert rw._names(str(nd), ["a", "b", "c"]) == ["Alpha", "b", "Gamma"]
    assert rw._names(None, ["a", "b"]) == ["a", "b"] and rw._names("", ["a"]) == ["a"]
    em = tmp_path / "e.json"
    em.write_text(json.dumps({json.dumps({"predicate": "biolink:x", "k": "v"}): "r1", "plain": "r2"}))
    assert rw._rel_names(str(em), ["r0", "r1", "r2"]) == ["r0", "biolink:x (k=v)", "plain"]
    assert rw._rel_names(None, ["r0"]) == ["r0"] and rw._rel_names("", ["r0"]) == ["r0"]
    labels = ["a"]
    assert rw._names(None, labels) is not labels and rw._rel_names(None, labels) is not labels


def test_run_explain_with_another_method_orders_by_its_score(tiny_run, tmp_path):
    """--method relatif: rows ordered by TracIn / ‖∇ℓ_train‖ (Σ_k η_k over checkpoints), a MethodScore column."""
    d = tiny_run
    out = tmp_path / "m"
    summary = explain_files(
        _explain_cfg(
            d,
            out,
            method="relatif",
            loss="score",
            max_triples=1,
        )
    )
    assert summary["method"] == "relatif" and summary["engine"] == "exact" and summary["explained"] == 1
    score, _, trself = _run_reference(d / "run", "score", 0.1)
    tt = RUN_TESTS[0]
    header, body = _read_csv(out / "triple_000_a_c_tracin.csv")
    assert header == [*CSV_HEADER, "MethodScore", "Role"] and len(body) == 8
    method = [float(r[14]) for r in body]
    assert [r[15] for r in body] == ["opponent" if m < 0 else "proponent" for m in method]  # by the method's sign
    assert method == sorted(method, reverse=True)
    scale = max(abs(v) for v in score.values())
    for r in body:
        tr = (r[6], r[8], r[10])
        assert abs(float(r[12]) - score[tt, tr]) < 1e-4 * scale
        assert abs(float(r[14]) - score[tt, tr] / math.sqrt(trself[tr])) < 1e-4 * scale / math.sqrt(
            min(trself.values())
        )
    meta = json.loads((out / "triple_000_a_c_tracin.json").read_text())
    assert meta["method"] == "relatif" and list(meta["rows"][0]) == [*CSV_HEADER, "MethodScore", "Role"]


@pytest.mark.parametrize("top_k", [0, -1])
def test_run_explain_refuses_top_k_below_one(tiny_run, tmp_path, top_k):
    """Regression: top_k=0 (Python API; the CLI has min=1) used to write every training triple."""
    d = tiny_run
    with pytest.raises(TracegraphError) as e:
        explain_files(
            ExplainConfig(
                model_dir=str(d / "run"),
                train=str(d / "train.txt"),
                test_triples=str(d / "test.txt"),
                output_dir=str(tmp_path / "z"),
                top_k=top_k,
            )
        )
    assert str(e.value) == f"top_k must be at least 1, not {top_k}"  # the Python parameter; the CLI says --top-k
    assert not (tmp_path / "z").exists()


def test_run_explain_refuses_checkpoints_of_another_run(tiny_run, tmp_path):
    d = tiny_run
    other = sorted((d / "other" / "checkpoints").glob("epoch_*.pt"))[0]
    with pytest.raises(TracegraphError, match="belongs to another run"):
        explain_files(_explain_cfg(d, tmp_path / "z", checkpoints=[str(other)]))
    assert not (tmp_path / "z").exists()


def test_driver_reads_three_checkpoints_once_each_in_order():
    """The next checkpoint is read while the current one is scored: with three, a wrong prefetch
    index reads one twice and pairs a path with another checkpoint's weights."""
    pl = _payloads(lrs=(0.6, 0.15, 0.3))
    want, want_tr, want_te = _reference(pl, "score", PARAM_ORDER[-2:])
    res, reader = _run(pl, loss="score", layers="last:2", batch_size=2, test_batch_size=2)
    assert reader.calls == [(p, "cpu") for p in pl]
    assert [(c.path, c.epoch, c.lr) for c in res.checkpoints] == [
        (f"ck/epoch_{k}.pt", k, lr) for k, lr in zip((1, 2, 3), (0.6, 0.15, 0.3))
    ]
    _close(res.scores, want)
    _close(res.train_self, want_tr)
    _close(res.test_self, want_te)


def test_driver_names_the_checkpoint_it_cannot_read_and_reports_no_progress_without_checkpoints():
    pl = _payloads(lrs=(0.6,))
    path = list(pl)[0]
    del pl[path][1]["model"]
    with pytest.raises(DataError) as e:
        _run(pl)
    assert "epoch_1.pt" in str(e.value)
    prog = Progress()
    compute_influence([], TRAIN, TEST, InfluenceOptions(), torch.device("cpu"), prog, read=Reader({}))
    assert prog.calls == []


def test_rows_with_many_ties_keep_the_input_order():
    """Ties (here 40 of each score) are listed in training-file order: a stable sort, whatever the length."""
    n = 80
    scores = np.array([1.0, 0.0] * (n // 2))
    train = np.array([[i % 3, i % 2, (i + 1) % 3] for i in range(n)])
    rows = rw._rows(
        scores,
        np.arange(n, dtype=np.float64),
        train,
        (0, 0, 1),
        None,
        ["a", "b", "c"],
        ["p", "q"],
        ["a", "b", "c"],
        ["p", "q"],
    )
    assert [r[13] for r in rows] == [float(i) for i in range(0, n, 2)] + [float(i) for i in range(1, n, 2)]
    by_method = rw._rows(
        np.zeros(n),
        np.arange(n, dtype=np.float64),
        train,
        (0, 0, 1),
        5,
        ["a", "b", "c"],
        ["p", "q"],
        ["a", "b", "c"],
        ["p", "q"],
        scores,
    )
    assert [r[13] for r in by_method] == [0.0, 2.0, 4.0, 6.0, 8.0]  # zeros are not opponents
    signed = rw._rows(
        np.zeros(n),
        np.arange(n, dtype=np.float64),
        train,
        (0, 0, 1),
        5,
        ["a", "b", "c"],
        ["p", "q"],
        ["a", "b", "c"],
        ["p", "q"],
        np.array([1.0, -1.0] * (n // 2)),
    )
    assert [r[13] for r in signed] == [0.0, 2.0, 4.0, 6.0, 8.0, 1.0, 3.0, 5.0, 7.0, 9.0]


def test_run_explain_skips_only_what_it_is_told_and_goes_on(tiny_run, tmp_path):
    d = tiny_run
    out = tmp_path / "s"
    kw = dict(
        model_dir=str(d / "run"),
        train=str(d / "train.txt"),
        test_triples=str(d / "test.txt"),
        output_dir=str(out),
        device="cpu",
        layers="last:2",
        skip_unresolved=True,
    )
    first = explain_files(ExplainConfig(start_index=3, max_triples=1, **kw))
    assert first["files"] == ["triple_003_e_d_tracin.csv", "triple_003_e_d_tracin.json"]
    # an existing file is rewritten unless skip_existing, and a skipped triple does not stop the next one
    again = explain_files(ExplainConfig(start_index=3, max_triples=1, **kw))
    assert again["explained"] == 1 and again["skipped_existing"] == 0
    both = explain_files(ExplainConfig(start_index=3, max_triples=2, skip_existing=True, **kw))
    assert both["skipped_existing"] == 1 and both["explained"] == 1
    assert both["files"] == ["triple_004_c_f_tracin.csv", "triple_004_c_f_tracin.json"]


def test_run_explain_reasons_and_an_empty_subgraph_first(tiny_run, tmp_path):
    d = tiny_run
    from tracegraph.kg.data.idmap import IdMap

    ents = IdMap.read(d / "run" / "node_dict.txt", "e")
    bad = tmp_path / "bad.txt"
    bad.write_text("zz\tq\tqq\n")
    s = explain_files(
        ExplainConfig(
            model_dir=str(d / "run"),
            train=str(d / "train.txt"),
            test_triples=str(bad),
            output_dir=str(tmp_path / "b"),
            device="cpu",
            skip_unresolved=True,
        )
    )
    assert s["failures"] == [] and s["explained"] == 0
    assert s["unresolved"] == [
        {
            "line": 1,
            "question": ["zz", "q", "qq"],
            "reason": "entity 'zz' is not in the id map; relation 'q' is not in the id map; "
            "entity 'qq' is not in the id map",
        }
    ]
    s = explain_files(
        _explain_cfg(
            d,
            tmp_path / "e",
            max_triples=4,
            layers="last:2",
        ),
        train_subsets=lambda h, t: [] if ents.labels[h] == "a" else [0, 1],
    )
    assert s["explained"] == 1 and s["files"][0] == "triple_003_e_d_tracin.csv"
    assert s["failures"][-1] == {
        "index": 0,
        "triple": ["a", "r", "c"],
        "reason": "the filtered training graph around this triple is empty",
    }


def test_run_explain_passes_loss_layers_and_smoothing_to_the_method(tiny_run, tmp_path):
    """relatif with train-loss, two layers, smoothing 0.3, on one listed device: its score is
    TracIn / ‖∇ℓ_train‖ computed with those same settings."""
    d = tiny_run
    out = tmp_path / "m2"
    summary = explain_files(
        _explain_cfg(
            d,
            out,
            method="relatif",
            max_triples=1,
            loss="train-loss",
            layers="last:2",
            label_smoothing=0.3,
            devices=["cpu"],
        )
    )
    assert summary["devices"] == ["cpu"] and summary["explained"] == 1
    score, _, trself = _run_reference(d / "run", "train-loss", 0.3, PARAM_ORDER[-2:])
    tt = RUN_TESTS[0]
    _, body = _read_csv(out / "triple_000_a_c_tracin.csv")
    want = {tr: score[tt, tr] / math.sqrt(trself[tr]) for tr in RUN_TRIPLES}
    scale = max(abs(v) for v in want.values())
    for r in body:
        tr = (r[6], r[8], r[10])
        assert abs(float(r[12]) - score[tt, tr]) < 1e-4 * max(abs(v) for v in score.values())
        assert abs(float(r[14]) - want[tr]) < 1e-4 * scale


@pytest.mark.parametrize("fn", ["autograd_gradients", "vmap_gradients"])
def test_reference_gradients_of_no_triples(fn):
    from tracegraph.kg.explain.tracin import reference

    m = tiny(1, dtype=torch.float32)
    layers = ["conv.weight", "entity_bias"]
    g = getattr(reference, fn)(m, torch.zeros(0, 3, dtype=torch.long), "score", 0.1, layers)
    assert tuple(g.shape) == (0, 2 * 2 * 2 + N_ENT)  # conv: 2 channels × 2×2 kernel; entity bias: one per entity
    res = compute_influence(
        list(_payloads(lrs=(0.5,))),
        TRAIN,
        np.zeros((0, 3), np.int64),
        InfluenceOptions(engine=fn.split("_")[0], layers="last:2"),
        torch.device("cpu"),
        read=Reader({p: pl for p, (_, pl) in _payloads(lrs=(0.5,)).items()}),
    )
    assert res.scores.shape == (0, 5) and res.test_self.shape == (0,)


# ---- issue #18: explain.py's torchrun pre-selection under ties, --devices under torchrun, the
# seeds of the random baseline, the filter index local-retrain reads


@pytest.mark.parametrize("top_k", [3, 7])
def test_influence_over_ranks_keeps_the_single_process_picks_under_ties(monkeypatch, top_k):
    """Each rank keeps its own top-k / bottom-k of a tied shard; rank 0 must then hold the rows one
    process picks: the first k rows (column order) of the highest scores and the last k of the
    lowest, ties broken by column (brute force with Python's sort, not numpy's)."""
    n = 64
    sc = np.zeros(n)
    sc[:20] = 5.0  # a tied top group longer than k and than a shard's share of it
    sc[40:] = -5.0  # a tied bottom group
    sc[20:40] = np.linspace(1, -1, 20)
    train_ids = np.array([[i, 0, i] for i in range(n)])  # row i says which column it is
    union = np.arange(n)

    def fake_compute(checkpoints, rows, test_ids, opts, device, progress=None, read=None):
        c = rows[:, 0]
        return InfluenceResult(np.stack([sc[c], -sc[c]]), c * 10.0, np.zeros(2), [], ["x"])

    monkeypatch.setattr(tracin_object, "compute_influence", fake_compute)  # what TracIn.result calls
    cols_of = [np.arange(n), np.arange(n)]
    mine = {}
    for rank in (1, 0):
        monkeypatch.setattr(
            sh, "gather_to_main", lambda m, rank=rank: (mine.__setitem__(rank, m), None)[1] if rank else [m, mine[1]]
        )
        tracin = TracIn.from_parts(None, train_ids, [], InfluenceOptions(batch_size=8))
        res, picks = sh._influence_over_ranks(
            _Ctx(rank, 2), tracin, union, cols_of, np.zeros((2, 3), np.int64), None, top_k
        )
    for j, s in enumerate((sc, -sc)):
        want = set(_naive_picks(s, top_k))  # by hand: positives descending, negatives ascending
        pos, got_sc, got_self, key = picks[j]
        assert key is None
        assert want <= set(pos.tolist()), (j, sorted(want - set(pos.tolist())))
        assert pos.tolist() == sorted(pos.tolist())
        np.testing.assert_array_equal(got_sc, s[pos])
        np.testing.assert_array_equal(got_self, pos * 10.0)
        # and the rows _rows then writes are the single-process ones, in its order
        one = rw._rows(
            s,
            np.zeros(n),
            train_ids,
            (0, 0, 0),
            top_k,
            [str(i) for i in range(n)],
            ["r"],
            [str(i) for i in range(n)],
            ["r"],
        )
        merged = rw._rows(
            got_sc,
            got_self,
            train_ids[pos],
            (0, 0, 0),
            top_k,
            [str(i) for i in range(n)],
            ["r"],
            [str(i) for i in range(n)],
            ["r"],
        )
        assert [r[6] for r in merged] == [r[6] for r in one] == [str(i) for i in _naive_picks(s, top_k)]


def test_run_explain_refuses_devices_under_torchrun(tiny_run, tmp_path, monkeypatch):
    """--devices shards test triples in one process; under torchrun it is refused before anything runs."""
    from tracegraph.runtime.distributed import init_distributed

    real = init_distributed("cpu")

    class Active:
        active, rank, world_size, is_main, device = True, 0, 2, True, real.device

    monkeypatch.setattr(ex, "init_distributed", lambda device: Active())
    d = tiny_run
    with pytest.raises(TracegraphError) as e:
        explain_files(
            ExplainConfig(
                model_dir=str(d / "run"),
                train=str(d / "train.txt"),
                test_triples=str(d / "test.txt"),
                output_dir=str(tmp_path / "z"),
                devices=["cpu", "cpu"],
            )
        )
    assert str(e.value) == ("devices is for one process on one node; under torchrun every rank uses its own device")
    assert not (tmp_path / "z").exists()


def _method_column(out, name):
    _, body = _read_csv(out / name)
    return [(r[6], r[8], r[10], float(r[14])) for r in body]


def test_run_explain_random_baseline_is_seeded_per_test_triple(tiny_run, tmp_path):
    """--method random: a random order of the candidates, the same on every run (fixed seeds) and
    drawn separately for each test triple (two test triples with the same 8 candidates get
    different orders; the chance that two independent permutations of 8 agree is 1/40320)."""
    d = tiny_run
    cfg = lambda o: _explain_cfg(d, tmp_path / o, method="random")
    first, again = explain_files(cfg("a")), explain_files(cfg("b"))
    assert first["explained"] == again["explained"] == 3
    names = [f for f in first["files"] if f.endswith(".csv")]
    orders = []
    for name in names:
        rows = _method_column(tmp_path / "a", name)
        assert rows == _method_column(tmp_path / "b", name)  # reproducible
        assert sorted(r[3] for r in rows) == [-float(k) for k in range(8, 0, -1)]  # minus the rank position
        assert [r[3] for r in rows] == sorted((r[3] for r in rows), reverse=True)
        orders.append([r[:3] for r in rows])
    assert len({tuple(o) for o in orders}) == len(orders)  # one permutation per test triple


def test_run_explain_local_retrain_filters_the_runs_known_tails(tiny_run, tmp_path):
    """--method local-retrain reads the filter index (the run's training file): its MethodScore column
    equals methods.method_keys_all given a KnownTails built here from the training file by hand."""
    from tracegraph.kg.data.idmap import IdMap
    from tracegraph.kg.data.triples import KnownTails, with_reciprocals
    from tracegraph.kg.explain.methods import MethodOptions, method_keys_all
    from tracegraph.kg.model.model_io import list_epoch_checkpoints, load_model

    d = tiny_run
    out = tmp_path / "lr"
    summary = explain_files(
        _explain_cfg(
            d,
            out,
            method="local-retrain",
            max_triples=1,
        )
    )
    assert summary["explained"] == 1
    ents, rels = IdMap.read(d / "run" / "node_dict.txt", "e"), IdMap.read(d / "run" / "rel_dict.txt", "r")
    ids = np.array([[ents.id(h), rels.id(r), ents.id(t)] for h, r, t in RUN_TRIPLES])
    known = KnownTails([with_reciprocals(ids, len(rels))], 2 * len(rels))
    fact = np.array([[ents.id("a"), rels.id("r"), ents.id("c")]])
    lm = load_model(d / "run" / "final_model.pt")
    keys = method_keys_all(
        ["local-retrain"],
        model=lm.model,
        checkpoints=list_epoch_checkpoints(d / "run"),
        train_ids=ids,
        facts=fact,
        subsets=[np.arange(len(ids))],
        known=known,
        opts=MethodOptions(label_smoothing=0.1),
        device=torch.device("cpu"),
    )["local-retrain"][0]
    want = {RUN_TRIPLES[i]: v for i, v in enumerate(np.asarray(keys[0], np.float64))}
    got = _method_column(out, "triple_000_a_c_tracin.csv")
    assert len(got) == 8
    for h, r, t, v in got:
        assert v == pytest.approx(want[h, r, t], rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("top_k", [3, 7])
def test_influence_over_ranks_selects_tracin_margin_rows_by_the_margin(monkeypatch, top_k):
    """tracin-margin under torchrun: the rival is the extra test row; each rank keeps its top-k /
    bottom-k by TracIn(test) − TracIn(rival), not by TracIn(test), and rank 0 writes the rows one
    process writes (brute force: Python's sort on (−margin, column))."""
    n = 64
    rng = np.random.default_rng(5)
    sc = rng.integers(-4, 5, n).astype(float)  # ties inside and across shards
    rival = rng.integers(-4, 5, n).astype(float)
    margin = sc - rival
    assert (
        sorted(range(n), key=lambda i: (-margin[i], i))[:top_k] != sorted(range(n), key=lambda i: (-sc[i], i))[:top_k]
    )
    train_ids = np.array([[i, 0, i] for i in range(n)])

    def fake_compute(checkpoints, rows, test_ids, opts, device, progress=None, read=None):
        c = rows[:, 0]
        assert len(test_ids) == 2  # the test triple, then its rival
        return InfluenceResult(np.stack([sc[c], rival[c]]), c * 10.0, np.zeros(2), [], ["x"])

    monkeypatch.setattr(tracin_object, "compute_influence", fake_compute)  # what TracIn.result calls
    mine = {}
    for rank in (1, 0):
        monkeypatch.setattr(
            sh, "gather_to_main", lambda m, rank=rank: (mine.__setitem__(rank, m), None)[1] if rank else [m, mine[1]]
        )
        tracin = TracIn.from_parts(None, train_ids, [], InfluenceOptions(batch_size=8))
        res, picks = sh._influence_over_ranks(
            _Ctx(rank, 2), tracin, np.arange(n), [np.arange(n)], np.zeros((2, 3), np.int64), None, top_k
        )
    assert len(picks) == 1
    pos, got_sc, got_self, key = picks[0]
    by_margin = _naive_picks(margin, top_k)
    assert set(by_margin) <= set(pos.tolist())
    np.testing.assert_array_equal(got_sc, sc[pos])
    np.testing.assert_array_equal(key, margin[pos])
    labels = [str(i) for i in range(n)]
    one = rw._rows(sc, np.zeros(n), train_ids, (0, 0, 0), top_k, labels, ["r"], labels, ["r"], margin)
    merged = rw._rows(got_sc, got_self, train_ids[pos], (0, 0, 0), top_k, labels, ["r"], labels, ["r"], key)
    assert [r[6] for r in merged] == [r[6] for r in one] == [str(i) for i in by_margin]
    assert [r[-2] for r in merged] == [float(margin[i]) for i in by_margin]
