import json

import pytest
import torch

from tests.conftest import run_cli
from tracegraph.errors import TracegraphError
from tracegraph.trees.cache import build_dataset
from tracegraph.trees.synthetic import synthetic_trees
from tracegraph.trees.probe import linear_probe
from tracegraph.trees.train import DataConfig, TrainConfig, finetune, load_encoder, pretrain

ENC = dict(hidden_channels=16, num_interactions=2, num_rbf=8, cutoff=None)


@pytest.fixture(scope="module")
def tiny():
    return build_dataset(synthetic_trees(6, seed=0, max_nodes=40))


def _cfg(**kw):
    base = dict(data=DataConfig(None, 6, 40), encoder=dict(ENC), epochs=2, batch_size=4, seed=0)
    base.update(kw)
    return TrainConfig(**base)


def test_pretrain_writes_run_and_resume_continues_identically(tiny, tmp_path):
    full = pretrain(_cfg(epochs=3), tmp_path / "full", data=tiny)
    pretrain(_cfg(epochs=2), tmp_path / "part", data=tiny)
    cfg = json.loads((tmp_path / "part" / "config.json").read_text())
    assert cfg["encoder"]["cutoff"] > 0 and cfg["epochs"] == 2
    resumed = pretrain(_cfg(epochs=3), tmp_path / "part", resume=True, data=tiny)
    assert [h["epoch"] for h in resumed] == [1, 2, 3]
    assert resumed[-1]["loss"] == pytest.approx(full[-1]["loss"], rel=1e-5)
    a, b = load_encoder(tmp_path / "full" / "encoder.pt"), load_encoder(tmp_path / "part" / "encoder.pt")
    assert all(torch.allclose(x, y, atol=1e-6) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert all(h["peak_memory_bytes"] > 0 and h["seconds"] > 0 for h in full)
    with pytest.raises(TracegraphError, match="already holds a run"):
        pretrain(_cfg(), tmp_path / "full", data=tiny)


def test_bf16_accumulation_and_checkpointing_train(tiny, tmp_path):
    hist = pretrain(
        _cfg(
            epochs=1, precision="bf16", gradient_accumulation_steps=2, gradient_checkpointing=True, memory_cleanup=True
        ),
        tmp_path / "r",
        data=tiny,
    )
    assert torch.isfinite(torch.tensor([hist[0]["order"], hist[0]["growth"]])).all()


def test_finetune_with_frozen_encoder_changes_only_the_head(tiny, tmp_path):
    pretrain(_cfg(epochs=1), tmp_path / "pre", data=tiny)
    before = load_encoder(tmp_path / "pre" / "encoder.pt").state_dict()
    split = (tiny[:8], tiny[8:])
    hist = finetune(_cfg(epochs=2, freeze_encoder=True), tmp_path / "pre" / "encoder.pt", tmp_path / "ft", data=split)
    assert 0.0 <= hist[-1]["test_acc"] <= 1.0
    after = load_encoder(tmp_path / "ft" / "encoder.pt").state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    last = torch.load(tmp_path / "ft" / "last.pt", weights_only=True)
    assert any(k.startswith("head.") for k in last["model"])


def test_linear_probe_separates_separable_features():
    g = torch.Generator().manual_seed(0)
    y = torch.arange(200) % 2
    x = torch.randn(200, 5, generator=g)
    x[:, 0] += 3 * y
    assert linear_probe(x[:150], y[:150], x[150:], y[150:]) > 0.9
    assert linear_probe(torch.randn(150, 5, generator=g), y[:150], torch.randn(50, 5, generator=g), y[150:]) < 0.8


@pytest.mark.slow
def test_cli_pretrain_on_neurons_both_losses_decrease(neurons_dir, tmp_path):
    out = tmp_path / "run"
    args = [
        "trees",
        "pretrain",
        "--swc-dir",
        neurons_dir,
        "--num-trees",
        20,
        "--max-nodes",
        80,
        "--epochs",
        4,
        "--batch-size",
        4,
        "--hidden-channels",
        32,
        "--num-interactions",
        2,
        "--num-rbf",
        12,
        "--lr",
        3e-3,
        "--cache-dir",
        tmp_path / "cache",
        "-o",
        out,
    ]
    res = run_cli(args)
    assert res.exit_code == 0, res.output
    hist = json.loads((out / "history.json").read_text())
    assert len(hist) == 4
    assert hist[-1]["order"] < hist[0]["order"] and hist[-1]["growth"] < hist[0]["growth"]
    assert json.loads(res.stdout.strip().splitlines()[-1])["epoch"] == 4
    assert list((tmp_path / "cache").glob("paths-*.npz"))
    # finetune and probe consume the pretrained encoder from the CLI too
    res = run_cli(
        [
            "trees",
            "finetune",
            "--encoder",
            out / "encoder.pt",
            "--freeze-encoder",
            "--num-trees",
            6,
            "--max-nodes",
            40,
            "--epochs",
            1,
            "--batch-size",
            4,
            "-o",
            tmp_path / "ft",
        ]
    )
    assert res.exit_code == 0, res.output
    res = run_cli(["trees", "probe", "--encoder", out / "encoder.pt", "--seed", 0, "--num-trees", 8, "--max-nodes", 40])
    assert res.exit_code == 0, res.output
    row = json.loads(res.stdout.strip().splitlines()[-1])["seeds"][0]
    assert 0 <= row["pretrained"] <= 1 and 0 <= row["random"] <= 1


def test_cli_errors_are_one_line(tmp_path):
    res = run_cli(["trees", "pretrain", "--swc-dir", tmp_path, "-o", tmp_path / "o"])
    assert res.exit_code == 2 and "no *.swc files" in " ".join(res.output.split())
    res = run_cli(
        [
            "trees",
            "pretrain",
            "--precision",
            "fp16",
            "--device",
            "cpu",
            "--num-trees",
            2,
            "--max-nodes",
            20,
            "-o",
            tmp_path / "o2",
        ]
    )
    assert res.exit_code == 2 and "fp16" in res.output
