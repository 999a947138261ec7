"""The linear probe against an independent fit of the same objective (scipy's L-BFGS on the
float64 cross-entropy + L2 of standardised features, written out here), its invariance to each
feature's units, the embeddings it reads against one tree encoded at a time, and the probe study's
per-seed protocol and aggregates worked out from its rows; `embed`'s wiring through recording
stand-ins: the encoder frozen in eval mode and moved to the device asked, every batch moved there,
gradients off, trees in order with their labels."""

import json

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from tracegraph.runtime.seeding import seed_everything
from tracegraph.trees.inputs import DataConfig, labelled_split
from tracegraph.trees.probe import embed, linear_probe, linear_probe_predict, probe, probe_study, probe_synthetic
from tracegraph.trees.train import load_encoder, make_encoder


def _reference_predict(xtr, ytr, xte, c, l2):
    """Multinomial logistic regression, L2 on the weights only, on features standardised by the
    training mean and (n - 1) spread; fitted by scipy to a tight tolerance."""
    xtr, xte, y = xtr.double().numpy(), xte.double().numpy(), ytr.numpy()
    mu, sd = xtr.mean(0), xtr.std(0, ddof=1)
    ztr, zte = (xtr - mu) / sd, (xte - mu) / sd
    n, d = ztr.shape

    def f(theta):
        w, b = theta[: c * d].reshape(c, d), theta[c * d :]
        logits = ztr @ w.T + b
        m = logits.max(1, keepdims=True)
        lse = m[:, 0] + np.log(np.exp(logits - m).sum(1))
        p = np.exp(logits - lse[:, None])
        loss = np.mean(lse - logits[np.arange(n), y]) + l2 * (w**2).sum()
        g = p.copy()
        g[np.arange(n), y] -= 1
        g /= n
        return loss, np.concatenate([(g.T @ ztr + 2 * l2 * w).ravel(), g.sum(0)])

    res = minimize(
        f, np.zeros(c * d + c), jac=True, method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 5000}
    )
    w, b = res.x[: c * d].reshape(c, d), res.x[c * d :]
    return torch.from_numpy((zte @ w.T + b).argmax(1))


def _overlapping(seed, n=60, scale=(1.0, 1.0)):
    """Three classes that overlap (no separating plane, so the optimum is finite) in 2-D."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.tensor([[0.0, 0.0], [1.5, 0.5], [0.5, 1.5]])
    y = torch.arange(n) % 3
    x = centres[y] + torch.randn(n, 2, generator=g)
    return x * torch.tensor(scale), y


def test_predictions_equal_an_independent_fit_of_the_same_objective():
    xtr, ytr = _overlapping(0)
    xte = torch.cartesian_prod(torch.linspace(-2, 3, 15), torch.linspace(-2, 3, 15))
    for l2 in (1e-3, 0.5):
        got = linear_probe_predict(xtr, ytr, xte, 3, l2=l2)
        want = _reference_predict(xtr, ytr, xte, 3, l2)
        assert (got == want).float().mean() >= 0.99  # a grid point on the boundary may go either way
        assert len(set(want.tolist())) == 3


def test_predictions_do_not_depend_on_each_features_units():
    xtr, ytr = _overlapping(1, n=45)
    xte = torch.cartesian_prod(torch.linspace(-2, 3, 11), torch.linspace(-2, 3, 11))
    base = linear_probe_predict(xtr, ytr, xte, 3, l2=0.5)
    for s in ([2.0**-10, 2.0**-10], [1.0, 2.0**10], [2.0**8, 2.0**-6]):  # powers of two: exact
        s = torch.tensor(s)
        assert torch.equal(linear_probe_predict(xtr * s, ytr, xte * s, 3, l2=0.5), base)


def test_features_with_a_small_spread_still_count():
    xtr, ytr = _overlapping(2, n=45, scale=(0.01, 0.01))  # spread ~0.01: informative all the same
    xte, yte = _overlapping(3, n=45, scale=(0.01, 0.01))
    want = _reference_predict(xtr, ytr, xte, 3, 1e-3)
    assert torch.equal(linear_probe_predict(xtr, ytr, xte, 3), want)
    assert linear_probe(xtr, ytr, xte, yte) == pytest.approx(float((want == yte).float().mean()))


def test_probe_accuracy_follows_its_iteration_and_l2_settings():
    xtr, ytr = _overlapping(4, n=60)
    xte, yte = _overlapping(5, n=60)
    for iters, l2 in ((1, 1e-3), (300, 2.0)):
        torch.manual_seed(0)  # the same starting weights for both (what one iteration leaves depends on them)
        pred = linear_probe_predict(xtr, ytr, xte, 3, l2=l2, iters=iters)
        torch.manual_seed(0)
        assert linear_probe(xtr, ytr, xte, yte, l2=l2, iters=iters) == float((pred == yte).float().mean())
    # one L-BFGS iteration is not the fit: some predictions differ from the converged ones
    torch.manual_seed(0)
    once = linear_probe_predict(xtr, ytr, xte, 3, iters=1)
    assert not torch.equal(once, linear_probe_predict(xtr, ytr, xte, 3))


@pytest.fixture(scope="module")
def labelled():
    return labelled_split(DataConfig(None, 6, 30, seed=3))


def test_embeddings_are_each_tree_encoded_on_its_own(labelled):
    train, test = labelled
    torch.manual_seed(0)
    enc = make_encoder({"cutoff": 5.0})
    x, y = embed(enc, train, batch_size=4)
    with torch.no_grad():
        one = [enc.encode(t)[1].float() for t in train]
    assert torch.allclose(x, torch.cat(one), atol=1e-5) and y.tolist() == [int(t.y) for t in train]
    xte, yte = embed(enc, test)
    assert probe(enc, train, test) == linear_probe(x, y, xte, yte)


class RecordingEncoder:
    """Stands in for the encoder: records its mode, device and batches; each tree's embedding is its
    node count, so the expected rows can be counted from the data directly."""

    def __init__(self):
        self.calls = []

    def eval(self):
        self.calls.append("eval")
        return self

    def to(self, device):
        self.calls.append(("to", device))
        return self

    def encode(self, b):
        self.calls.append(("encode", b.num_graphs, torch.is_grad_enabled()))
        return None, torch.bincount(b.batch, minlength=b.num_graphs).double()[:, None]


def test_embed_moves_the_encoder_and_every_batch_to_the_device_asked(labelled, monkeypatch):
    import tracegraph.trees.probe as probe_module

    train, _ = labelled
    moved = []

    class Recorded:  # a batch whose move to a device is recorded (it stays on the CPU)
        def __init__(self, b):
            self.b = b

        def to(self, device):
            moved.append(device)
            return self.b

    real = probe_module.make_loader
    monkeypatch.setattr(probe_module, "make_loader", lambda *a, **k: [Recorded(b) for b in real(*a, **k)])
    enc = RecordingEncoder()
    x, y = embed(enc, train, batch_size=4, device="cuda:1")
    assert enc.calls[:2] == ["eval", ("to", "cuda:1")]
    assert enc.calls[2:] == [("encode", 4, False), ("encode", len(train) - 4, False)]
    assert moved == ["cuda:1", "cuda:1"]
    assert x.dtype == torch.float32 and x[:, 0].tolist() == [float(t.num_nodes) for t in train]
    assert y.tolist() == [int(t.y) for t in train]


def test_probe_study_pretrains_probes_and_summarises_each_seed(tmp_path, labelled):
    torch.set_num_threads(1)
    res = probe_study(
        [0, 1],
        tmp_path,
        pretrain_trees=4,
        labelled_trees=8,
        max_nodes=30,
        epochs=1,
        batch_size=3,
        encoder={"hidden_channels": 8, "cutoff": 5.0},
        lr=0.01,
    )
    rows = res["seeds"]
    assert [r["seed"] for r in rows] == [0, 1]
    pre = [r["pretrained"] for r in rows]
    rnd = [r["random"] for r in rows]
    assert res["pretrained_mean"] == pytest.approx(sum(pre) / 2)
    assert res["pretrained_std"] == pytest.approx(abs(pre[0] - pre[1]) / 2)  # population spread of two
    assert res["random_mean"] == pytest.approx(sum(rnd) / 2)
    assert res["random_std"] == pytest.approx(abs(rnd[0] - rnd[1]) / 2)
    gains = [100 * (a - b) for a, b in zip(pre, rnd)]
    assert gains[0] != gains[1]  # (on these settings) so the spread is no zero that any formula gives
    assert res["gain_points_mean"] == pytest.approx(sum(gains) / 2)
    assert res["gain_points_std"] == pytest.approx(abs(gains[0] - gains[1]) / 2)
    for seed, row in zip((0, 1), rows):
        out = tmp_path / f"seed-{seed}"
        cfg = json.loads((out / "config.json").read_text())
        assert (cfg["epochs"], cfg["batch_size"], cfg["seed"], cfg["lr"]) == (1, 3, seed, 0.01)
        assert (cfg["data"]["num_trees"], cfg["data"]["max_nodes"], cfg["data"]["seed"]) == (4, 30, 1000 + seed)
        assert cfg["encoder"]["hidden_channels"] == 8
        train, test = labelled_split(DataConfig(None, 8, 30, seed=2000 + seed))
        enc = load_encoder(out / "encoder.pt")
        assert enc.cfg.hidden_channels == 8
        assert row["pretrained"] == probe(enc, train, test)
        seed_everything(seed)
        rand = make_encoder(enc.cfg.to_dict())  # the same configuration, cutoff included
        assert row["random"] == probe(rand, train, test)


@pytest.mark.parametrize("compare_random", [True, False])
def test_probe_synthetic_probes_the_encoder_and_its_random_twin_on_each_seeds_trees(tmp_path, compare_random):
    from tracegraph.trees.train import TrainConfig, pretrain

    torch.set_num_threads(1)
    cfg = TrainConfig(data=DataConfig(None, 4, 30, seed=5), encoder={"hidden_channels": 8}, epochs=1, batch_size=3)
    pretrain(cfg, tmp_path / "pre")
    res = probe_synthetic(tmp_path / "pre" / "encoder.pt", [3, 4], 8, 30, compare_random)
    rows = []
    for seed in (3, 4):
        train, test = labelled_split(DataConfig(None, 8, 30, seed=2000 + seed))
        enc = load_encoder(tmp_path / "pre" / "encoder.pt")
        row = {"seed": seed, "pretrained": probe(enc, train, test)}
        if compare_random:
            seed_everything(seed)
            row["random"] = probe(make_encoder(enc.cfg.to_dict()), train, test)  # the same configuration
        rows.append(row)
    assert res["seeds"] == rows
    pre = [r["pretrained"] for r in rows]
    assert (res["pretrained_mean"], res["pretrained_std"]) == pytest.approx((np.mean(pre), np.std(pre)))
    assert ("random_mean" in res) == compare_random
