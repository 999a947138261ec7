"""LR schedules, early stopping, the softmax loss, embedding dropout and presets."""

import hashlib
import inspect
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import run_cli
from tracegraph.errors import DataError
from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.model.loss import Targets
from tracegraph.kg.model.presets import apply_preset, load_preset, shipped_presets
from tracegraph.kg.model.schedules import DEFAULT_PATIENCE, LRSchedule, make_optimizer, resolve_patience
from tracegraph.kg.model.softmax_loss import ce_1n
from tracegraph.kg.model.train import TrainConfig, train

TINY = dict(embedding_dim=12, embedding_height=3, embedding_width=4, output_channels=4)
PRESETS = Path(__file__).resolve().parents[2] / "tracegraph" / "kg" / "model" / "presets"


def _cfg(umls_dir, out, **kw):
    base = dict(
        train=str(umls_dir / "train.txt"),
        valid=str(umls_dir / "valid.txt"),
        test=None,
        output_dir=str(out),
        epochs=3,
        batch_size=256,
        checkpoint_every=1,
        model=dict(TINY),
    )
    base.update(kw)
    return TrainConfig(**base)


# ---- the softmax cross-entropy loss


def test_ce_matches_dense_float64_reference():
    torch.manual_seed(0)
    B, N, eps = 5, 11, 0.1
    scores = torch.randn(B, N, dtype=torch.float64, requires_grad=True)
    # samples with 1, 2 and 3 true tails
    bi = torch.tensor([0, 1, 1, 2, 3, 3, 3, 4])
    ti = torch.tensor([2, 0, 5, 7, 1, 4, 9, 10])
    y = torch.full((B, N), eps / N, dtype=torch.float64)
    for b, t in zip(bi.tolist(), ti.tolist()):
        y[b, t] += (1 - eps) / int((bi == b).sum())
    assert torch.allclose(y.sum(1), torch.ones(B, dtype=torch.float64))
    ref = -(y * torch.log_softmax(scores, 1)).sum(1).mean()
    got = ce_1n(scores, Targets(bi, ti), eps)
    assert got.item() == pytest.approx(ref.item(), rel=1e-12)
    (g_ref,) = torch.autograd.grad(ref, scores)
    (g,) = torch.autograd.grad(got, scores)
    assert torch.allclose(g, g_ref, atol=1e-14)


# ---- schedules


def _lrs(kind, n_epochs, mrrs=None, **kw):
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    s = LRSchedule(opt, kind, epochs=n_epochs, **kw)
    out = []
    for e in range(n_epochs):
        out.append(opt.param_groups[0]["lr"])
        opt.step()  # no gradients: changes nothing, as a real epoch would before the schedule steps
        s.after_epoch()
        if mrrs is not None:
            s.after_evaluation(mrrs[e])
    return out


def test_step_and_cosine_follow_their_closed_forms():
    assert _lrs("step", 7, step_size=3, factor=0.1) == pytest.approx([1, 1, 1, 0.1, 0.1, 0.1, 0.01])
    T, lo = 6, 0.2
    want = [lo + (1 - lo) * (1 + math.cos(math.pi * e / T)) / 2 for e in range(T)]
    assert _lrs("cosine", T, min_lr=lo) == pytest.approx(want)
    assert _lrs("none", 3, lr_decay=0.5) == pytest.approx([1, 0.5, 0.25])


def naive_plateau(mrrs, factor, patience, threshold):
    """Lower the rate after more than `patience` evaluations without a relative gain > threshold."""
    lr, best, bad, out = 1.0, -math.inf, 0, []
    for m in mrrs:
        out.append(lr)
        if m > best * (1 + threshold):
            best, bad = m, 0
        else:
            bad += 1
        if bad > patience:
            lr, bad = lr * factor, 0
    return out


def test_plateau_matches_a_naive_reference():
    rng = np.random.default_rng(3)
    mrrs = list(np.maximum.accumulate(rng.uniform(0.1, 0.5, 30)) * rng.choice([1.0, 0.9], 30))
    got = _lrs("plateau", 30, mrrs, factor=0.5, patience=2, threshold=1e-3)
    assert got == pytest.approx(naive_plateau(mrrs, 0.5, 2, 1e-3))
    assert min(got) < 1.0  # it fired


def test_schedule_and_optimizer_errors():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    with pytest.raises(Exception, match="--lr-scheduler"):
        LRSchedule(opt, "linear")
    with pytest.raises(Exception, match="--lr-decay"):
        LRSchedule(opt, "cosine", lr_decay=0.9)
    m = torch.nn.Linear(2, 2)
    o = make_optimizer(m, 0.01, torch.device("cpu"), "adagrad", weight_decay=1e-4)
    assert isinstance(o, torch.optim.Adagrad) and o.param_groups[0]["weight_decay"] == 1e-4


def test_checkpoints_record_the_scheduled_rate(umls_dir, tmp_path):
    """TracIn's η_k: the lr stored per epoch is the one the epoch trained with."""
    lr0, T = 0.01, 4
    train(_cfg(umls_dir, tmp_path / "cos", epochs=T, learning_rate=lr0, lr_scheduler="cosine", lr_min=0.001))
    want = [0.001 + (lr0 - 0.001) * (1 + math.cos(math.pi * e / T)) / 2 for e in range(T)]
    got = [
        torch.load(tmp_path / "cos" / "checkpoints" / f"epoch_{e:04d}.pt", weights_only=True)["lr"]
        for e in range(1, T + 1)
    ]
    assert got == pytest.approx(want)
    # plateau: a 1000-fold relative gain never happens after the first evaluation (epoch 1); with
    # patience 0 every later evaluation halves the rate of the next epoch
    train(
        _cfg(
            umls_dir,
            tmp_path / "pl",
            epochs=4,
            learning_rate=lr0,
            lr_scheduler="plateau",
            lr_patience=0,
            lr_threshold=1000.0,
            lr_factor=0.5,
            patience=0,
        )
    )
    hist = json.loads((tmp_path / "pl" / "training_history.json").read_text())
    assert [h["lr"] for h in hist] == pytest.approx([lr0, lr0, lr0 / 2, lr0 / 4])
    ck = torch.load(tmp_path / "pl" / "checkpoints" / "epoch_0004.pt", weights_only=True)
    assert ck["lr"] == pytest.approx(lr0 / 4)


def test_resume_restores_the_plateau_state(umls_dir, tmp_path):
    kw = dict(learning_rate=0.01, lr_scheduler="plateau", lr_patience=1, lr_threshold=1000.0, patience=0)
    train(_cfg(umls_dir, tmp_path / "full", epochs=4, **kw))
    train(_cfg(umls_dir, tmp_path / "part", epochs=2, **kw))
    train(_cfg(umls_dir, tmp_path / "part", epochs=4, resume=True, **kw))
    lrs = [
        [h["lr"] for h in json.loads((tmp_path / d / "training_history.json").read_text())] for d in ("full", "part")
    ]
    assert lrs[0] == lrs[1] == pytest.approx([0.01, 0.01, 0.01, 0.005])  # the bad-evaluation count survived
    a = torch.load(tmp_path / "full" / "final_model.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "part" / "final_model.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


# ---- early stopping


def test_early_stopping_is_on_by_default_with_valid(umls_dir, tmp_path):
    assert resolve_patience(None, True) == DEFAULT_PATIENCE and resolve_patience(None, False) == 0
    # lr 0: only the first evaluation improves, so the default patience stops after 1 + 10 epochs
    s = train(_cfg(umls_dir, tmp_path / "es", epochs=30, learning_rate=0.0))
    assert s["stopped_early"] and s["epochs_run"] == 1 + DEFAULT_PATIENCE
    assert json.loads((tmp_path / "es" / "config.json").read_text())["resolved"]["patience"] == DEFAULT_PATIENCE
    s = train(_cfg(umls_dir, tmp_path / "min", epochs=30, learning_rate=0.0, patience=2, min_epochs=6))
    assert s["stopped_early"] and s["epochs_run"] == 6


# ---- embedding dropout


def test_relation_dropout_one_equals_a_zero_relation_embedding():
    cfg = dict(num_entities=9, num_relations=2, input_dropout=0.0, feature_map_dropout=0.0, output_dropout=0.0, **TINY)
    torch.manual_seed(0)
    a = ConvE(ConvEConfig(relation_dropout=1.0, **cfg)).train()
    b = ConvE(ConvEConfig(**cfg)).train()
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        b.relation.weight.zero_()
    h, r = torch.tensor([0, 3, 5, 8]), torch.tensor([0, 1, 2, 3])
    assert torch.allclose(a(h, r), b(h, r), atol=1e-6)
    assert not torch.allclose(a.eval()(h, r), b.eval()(h, r))  # eval mode: no dropout


# ---- presets


def test_shipped_presets_parse_and_hash_their_bytes():
    names = shipped_presets()
    assert {"conve-paper", "fb15k-237", "wn18rr", "umls"} <= set(names)
    for name in names:
        p = load_preset(name)
        assert p.sha256 == hashlib.sha256((PRESETS / f"{name}.json").read_bytes()).hexdigest()
        s = p.settings
        assert s["embedding_height"] * s["embedding_width"] == s["embedding_dim"], name


def test_conve_paper_preset_is_the_cli_defaults():
    """Paper-default runs stay reproducible: the preset is the defaults as they were before early
    stopping became the default (patience 0: train every epoch)."""
    from tracegraph.cli.kg import train_cmd

    defaults = {
        n: p.default.default
        for n, p in inspect.signature(train_cmd).parameters.items()
        if hasattr(p.default, "default")
    }
    settings = load_preset("conve-paper").settings
    assert settings.pop("patience") == 0 and defaults["patience"] is None
    for key, value in settings.items():
        assert defaults[key] == value, key


def test_explicit_settings_win_over_the_preset(tmp_path):
    cfg = TrainConfig(train="t", output_dir="o", learning_rate=0.5, model={"input_dropout": 0.4})
    p = load_preset("fb15k-237")
    got = apply_preset(cfg, p, explicit={"learning_rate", "input_dropout"})
    assert got.learning_rate == 0.5 and got.model["input_dropout"] == 0.4
    assert got.optimizer == "adagrad" and got.model["embedding_dim"] == 288 and got.loss == "ce"
    assert got.preset == "fb15k-237" and got.preset_sha256 == p.sha256


def test_bad_preset_file_names_file_and_line(tmp_path, monkeypatch):
    f = tmp_path / "p.json"
    f.write_text('{"format": "tracegraph-preset", "version": 1,\n "settings": {\n  "learning_rat": 0.1}}\n')
    with pytest.raises(DataError, match=r"p\.json:3: unknown setting 'learning_rat'"):
        load_preset(str(f))
    f.write_text('{"format": "tracegraph-preset", "version": 1,\n "settings": {"epochs": "ten"}}\n')
    with pytest.raises(DataError, match=r"p\.json:2: setting 'epochs'"):
        load_preset(str(f))
    with pytest.raises(Exception, match="unknown preset 'nope'"):
        load_preset("nope")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "umls").mkdir()  # a data folder named like the preset
    assert load_preset("umls").name == "umls"


@pytest.mark.slow
def test_cli_preset_with_override_records_name_and_hash(umls_dir, tmp_path):
    out = tmp_path / "run"
    res = run_cli(
        [
            "train",
            "--train",
            umls_dir / "train.txt",
            "--valid",
            umls_dir / "valid.txt",
            "-o",
            out,
            "--preset",
            "umls",
            "--epochs",
            "2",
            "--learning-rate",
            "0.01",
            "--embedding-dim",
            "12",
            "--embedding-height",
            "3",
            "--embedding-width",
            "4",
            "--output-channels",
            "4",
            "--device",
            "cpu",
        ]
    )
    assert res.exit_code == 0, res.stderr
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["train"]["preset"] == "umls"
    assert cfg["train"]["preset_sha256"] == hashlib.sha256((PRESETS / "umls.json").read_bytes()).hexdigest()
    assert cfg["train"]["epochs"] == 2 and cfg["train"]["learning_rate"] == 0.01  # explicit flags win
    assert cfg["train"]["lr_scheduler"] == "plateau" and cfg["model"]["embedding_dim"] == 12  # the rest: preset
    res = run_cli(
        ["train", "--train", umls_dir / "train.txt", "-o", tmp_path / "x", "--preset", tmp_path / "missing.json"]
    )
    assert res.exit_code == 2 and "missing.json" in res.stderr
