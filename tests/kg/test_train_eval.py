import json

import numpy as np
import pytest
import torch

from tests.conftest import run_cli, run_cli_error
from tests.kg.references import TINY, brute_force_ranks
from tracegraph.errors import TracegraphError
from tracegraph.kg import load_model
from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.model.evaluate import evaluate, rank_queries
from tracegraph.kg.data.triples import KnownTails, with_reciprocals
from tracegraph.kg.model.train import TrainConfig, train


@pytest.mark.parametrize("chunk", [7, 1000])
def test_filtered_ranks_match_bruteforce(chunk):
    torch.manual_seed(0)
    m = ConvE(ConvEConfig(num_entities=40, num_relations=3, **TINY)).eval()
    with torch.no_grad():
        # exact ties in any arithmetic (any chunking): entities 30..39 score exactly their bias
        m.entity.weight[30:] = 0.0
        m.entity_bias[30:] = 0.25
    rng = np.random.default_rng(0)
    filt = rng.integers(0, [40, 3, 40], size=(300, 3))
    filt[:20, 2] = rng.integers(30, 40, 20)
    test = filt[rng.choice(300, 60, replace=False)]
    known = KnownTails([filt], 6)
    rk = rank_queries(m, test[:, 0], test[:, 1], test[:, 2], known, entity_chunk=chunk, batch_size=16, top_k=5)
    ref = brute_force_ranks(m, test, filt)
    np.testing.assert_array_equal(rk.optimistic, ref[:, 0])
    np.testing.assert_array_equal(rk.pessimistic, ref[:, 1])
    assert (rk.pessimistic > rk.optimistic).any()  # the tie case is exercised
    # top-k: the highest filtered scores, in order
    with torch.no_grad():
        S = m.score_all(torch.as_tensor(test[:, 0]), torch.as_tensor(test[:, 1]))
    assert np.all(np.diff(rk.topk_scores, axis=1) <= 0)
    np.testing.assert_allclose(
        rk.topk_scores[:, 0],
        np.maximum([S[i, rk.topk_ids[i, 0]].item() for i in range(60)], rk.topk_scores[:, 0]),
        rtol=1e-6,
    )


def test_head_side_uses_reciprocal(tmp_path):
    torch.manual_seed(1)
    m = ConvE(ConvEConfig(num_entities=20, num_relations=2, **TINY)).eval()
    trip = np.array([[1, 0, 2], [3, 1, 4]])
    res, sides = evaluate(m, trip, KnownTails([with_reciprocals(trip, 2)], 4))
    ref = brute_force_ranks(m, np.array([[2, 2, 1], [4, 3, 3]]), with_reciprocals(trip, 2))
    np.testing.assert_array_equal(sides[1].optimistic, ref[:, 0])
    assert res["both"]["count"] == 4


def small_cfg(umls_dir, out, **kw):
    base = dict(
        train=str(umls_dir / "train.txt"),
        valid=str(umls_dir / "valid.txt"),
        test=str(umls_dir / "test.txt"),
        output_dir=str(out),
        epochs=3,
        batch_size=256,
        checkpoint_every=1,
        model=dict(TINY),
    )
    base.update(kw)
    return TrainConfig(**base)


@pytest.mark.parametrize("mode", ["kvsall", "1vsall"])
def test_resume_gives_identical_weights(umls_dir, tmp_path, mode):
    quarter, seen, kept = tmp_path / "train.txt", set(), []  # every 4th line, and each label's first
    for i, line in enumerate((umls_dir / "train.txt").read_text().splitlines()):
        h, r, t = line.split("\t")
        if i % 4 == 0 or {h, t, "rel:" + r} - seen:
            kept.append(line)
            seen |= {h, t, "rel:" + r}
    quarter.write_text("\n".join(kept) + "\n")
    full = tmp_path / "full"
    train(small_cfg(umls_dir, full, epochs=3, training_mode=mode, train=str(quarter)))
    part = tmp_path / "part"
    train(small_cfg(umls_dir, part, epochs=1, training_mode=mode, train=str(quarter)))  # "interrupted" after epoch 1
    train(small_cfg(umls_dir, part, epochs=3, training_mode=mode, resume=True, train=str(quarter)))
    a = torch.load(full / "final_model.pt", weights_only=True)["model"]
    b = torch.load(part / "final_model.pt", weights_only=True)["model"]
    for k in a:
        assert torch.equal(a[k], b[k]), k
    ha = json.loads((full / "training_history.json").read_text())
    hb = json.loads((part / "training_history.json").read_text())
    assert [h["loss"] for h in ha] == [h["loss"] for h in hb]


def test_nan_loss_stops_without_checkpoint(umls_dir, tmp_path, monkeypatch):
    from tracegraph.kg.model.objective import TrainingObjective

    calls = {"n": 0}
    real = TrainingObjective.forward  # whichever loss implementation the step takes

    def sometimes_nan(self, *a, **k):
        calls["n"] += 1
        loss = real(self, *a, **k)
        return loss * float("nan") if calls["n"] > 25 else loss

    monkeypatch.setattr(TrainingObjective, "forward", sometimes_nan)
    out = tmp_path / "nan"
    with pytest.raises(TracegraphError, match="loss became nan"):
        train(small_cfg(umls_dir, out, epochs=5))
    for p in (out / "checkpoints").glob("*.pt"):
        sd = torch.load(p, weights_only=True)["model"]
        assert all(torch.isfinite(v).all() for v in sd.values() if v.is_floating_point())
    assert not (out / "final_model.pt").exists()


def test_fused_and_standard_training_agree(umls_dir, tmp_path):
    """Same data, same seed: the two loss implementations give the same epoch losses (exact
    gradient equality per step is tested in test_loss.py; Adam then amplifies float noise in
    near-zero gradients, so weights are not compared)."""
    losses = {}
    for impl in ("standard", "fused"):
        train(small_cfg(umls_dir, tmp_path / impl, epochs=2, loss_impl=impl, test=None, valid=None))
        losses[impl] = [h["loss"] for h in json.loads((tmp_path / impl / "training_history.json").read_text())]
    np.testing.assert_allclose(losses["standard"], losses["fused"], rtol=1e-4)


@pytest.mark.slow
def test_cli_train_evaluate_predict(umls_dir, tmp_path):
    out = tmp_path / "run"
    res = run_cli(
        [
            "train",
            "--train",
            umls_dir / "train.txt",
            "--valid",
            umls_dir / "valid.txt",
            "--test",
            umls_dir / "test.txt",
            "--output-dir",
            out,
            "--epochs",
            "2",
            "--embedding-dim",
            "12",
            "--embedding-height",
            "3",
            "--embedding-width",
            "4",
            "--output-channels",
            "4",
            "--precision",
            "bf16",
        ]
    )
    assert res.exit_code == 0, res.stderr
    for f in (
        "config.json",
        "best_model.pt",
        "final_model.pt",
        "training_history.json",
        "test_results.json",
        "node_dict.txt",
        "rel_dict.txt",
        "checkpoints/epoch_0002.pt",
        "checkpoints/resume.pt",
    ):
        assert (out / f).exists(), f
    assert not (out / "checkpoints/epoch_0001.pt").exists()  # --checkpoint-every 10 by default: the last epoch only
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["sizes"]["train_triples"] == 5216 and cfg["resolved"]["precision"] == "bf16"
    ck = torch.load(out / "checkpoints/epoch_0002.pt", weights_only=True)
    assert ck["epoch"] == 2 and ck["lr"] == pytest.approx(0.003)
    lm = load_model(out)
    assert lm.model.training is False and len(lm.entities) == 135
    assert lm.model.score_all(torch.tensor([0]), torch.tensor([0])).shape == (1, 135)
    res = run_cli(["evaluate", "--model-dir", out, "--test", umls_dir / "test.txt", "-o", tmp_path / "ev"])
    assert res.exit_code == 0, res.stderr
    ev = json.loads((tmp_path / "ev" / "evaluation.json").read_text())
    tr = json.loads((out / "test_results.json").read_text())
    assert ev["metrics"]["both"]["mrr"] == pytest.approx(tr["metrics"]["both"]["mrr"])
    res = run_cli(["predict", "--model-dir", out, "--query", "acquired_abnormality", "location_of", "--top-k", "3"])
    assert res.exit_code == 0 and len(res.stdout.strip().splitlines()) == 4
    run_cli_error(["predict", "--model-dir", out, "--query", "nope", "location_of"], out, contains="'nope'")


def test_early_stopping_on_valid_mrr(umls_dir, tmp_path):
    # lr 0: valid MRR never improves after the first evaluation, so patience 2 stops at epoch 3
    s = train(small_cfg(umls_dir, tmp_path / "es", epochs=10, learning_rate=0.0, patience=2, test=None))
    assert s["stopped_early"] and s["epochs_run"] == 3
    assert (tmp_path / "es" / "best_model.pt").exists() and (tmp_path / "es" / "final_model.pt").exists()
