"""trees/train.py's loop and runs by hand: one AdamW step per accumulated group against a float64 AdamW
written out here (learning rate, decoupled weight decay, the last short group), each epoch's record as
the mean of its batches, the refusals word for word, the model back in training mode after an
evaluation, cleanup per batch, the log line, what each file of a run holds and what a resume reads
back; pretraining's loss as the weighted sum of its parts, the derived cutoff against 1.25 times the
0.99 quantile of the edge lengths computed with numpy, seeded runs repeating; fine-tuning's class count,
test accuracy against a loop over single trees, checkpoints that load back (an encoder from ``last.pt``
too, as ``load_encoder`` documents), and ``predict``'s order. The config's defaults are the CLI's.

References: AdamW's update rule and the mean of batches written out here in float64; numpy's quantile;
per-tree loops; the CLI's option defaults; the messages as the code's docstrings and docs/trees.md state.
"""

import json
import re
import time

import numpy as np
import pytest
import torch
from torch import nn

import tracegraph.trees.train as tt
from tests.conftest import log_lines, run_cli
from tracegraph.errors import DataError, TracegraphError
from tracegraph.trees.cache import build_dataset
from tracegraph.trees.synthetic import synthetic_trees
from tracegraph.trees.inputs import DataConfig
from tracegraph.trees.train import (
    Classifier,
    TrainConfig,
    _Runner,
    finetune,
    load_classifier,
    load_encoder,
    make_encoder,
    predict,
    pretrain,
)

ENC = dict(hidden_channels=8, num_interactions=1, num_rbf=4)


@pytest.fixture(scope="module")
def ten():
    return build_dataset(synthetic_trees(5, seed=0, max_nodes=10))


def cfg(**kw):
    base = dict(data=DataConfig(None, 2, 10), encoder=dict(ENC), epochs=1, batch_size=4, device="cpu", seed=0)
    base.update(kw)
    return TrainConfig(**base)


class Toy(nn.Module):
    """A real (tiny) encoder to satisfy the run files, and two float64 weights the toy loss reads."""

    def __init__(self):
        super().__init__()
        self.encoder = make_encoder(dict(ENC, cutoff=1.0))
        self.w = nn.Parameter(torch.tensor([1.0, -2.0], dtype=torch.float64))


def toy_loss(model, seen=None):
    def step(batch):  # d loss / d w_i = graphs in the batch
        if seen is not None:
            seen.append((batch.num_graphs, model.training))
        n = float(batch.num_graphs)
        return {"loss": (model.w * n).sum(), "n": torch.tensor(n)}

    return step


def adamw_by_hand(w, grads, lr, wd, b1=0.9, b2=0.999, eps=1e-8):
    w, m, v = np.array(w, float), 0.0, 0.0
    for t, g in enumerate(grads, start=1):
        w = w * (1 - lr * wd)  # decoupled weight decay first
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        w = w - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    return w


@pytest.mark.parametrize(
    "accum,grads",
    [
        (1, [4, 4, 2]),  # batches of 4, 4, 2 trees; one step each
        (2, [4, 1]),  # (4 + 4) / 2, then the short last group alone: 2 / 2
        (3, [10 / 3]),  # all three batches, each loss divided by 3
        (4, [10 / 4]),  # more than the epoch has: one step at the last batch
    ],
)
def test_one_adamw_step_per_accumulated_group(ten, tmp_path, accum, grads):
    model = Toy()
    runner = _Runner(cfg(lr=0.1, weight_decay=0.5, gradient_accumulation_steps=accum), model, tmp_path, "pretrain")
    (rec,) = runner.fit(ten, toy_loss(model))
    assert model.w.detach().numpy() == pytest.approx(adamw_by_hand([1.0, -2.0], grads, 0.1, 0.5), abs=1e-12)
    assert rec["epoch"] == 1 and rec["n"] == pytest.approx(10 / 3)


def test_an_epochs_record_is_the_mean_of_its_batches(ten, tmp_path):
    model, seen = Toy(), []
    c = cfg(epochs=2, lr=0.1, weight_decay=0.0)
    with log_lines() as lines:
        hist = _Runner(c, model, tmp_path, "pretrain").fit(ten, toy_loss(model, seen))
    assert [n for n, _ in seen] == [4, 4, 2, 4, 4, 2] and all(training for _, training in seen)
    # batch i's loss is (w0 + w1) · n_i with the weights after the i steps before it
    ns = [4, 4, 2, 4, 4, 2]
    losses = [adamw_by_hand([1.0, -2.0], ns[:i], 0.1, 0.0).sum() * ns[i] for i in range(6)]
    assert hist[0]["loss"] == pytest.approx(np.mean(losses[:3]), abs=1e-12)
    assert hist[1]["loss"] == pytest.approx(np.mean(losses[3:]), abs=1e-12)
    assert [set(h) for h in hist] == [{"epoch", "loss", "n", "seconds", "peak_memory_bytes"}] * 2
    assert [h["epoch"] for h in hist] == [1, 2] and all(h["seconds"] > 0 and h["peak_memory_bytes"] > 0 for h in hist)
    assert json.loads((tmp_path / "history.json").read_text()) == hist
    assert len(lines) == 2
    for h, line in zip(hist, lines):
        m = re.fullmatch(r"pretrain epoch (\d): loss (\S+)  n (\S+)  (\d+\.\d)s  peak memory (\d+\.\d) [KMGT]iB", line)
        assert m, line
        assert (int(m[1]), m[2], m[3]) == (h["epoch"], f"{h['loss']:.4f}", "3.3333")
        assert m[4] == f"{h['seconds']:.1f}"


def test_each_epoch_shuffles_by_the_seed_and_a_lone_batch_is_its_own_mean(ten, tmp_path):
    def orders(seed, out):
        model, seen = Toy(), []

        def step(batch):
            seen.append(batch.pos[:, 0].sum().item())  # identifies the trees in the batch
            return toy_loss(model)(batch)

        _Runner(cfg(epochs=2, seed=seed), model, out, "pretrain").fit(ten, step)
        return seen[:3], seen[3:]

    first, second = orders(0, tmp_path / "a")
    assert first != second  # a new order every epoch
    assert orders(0, tmp_path / "b") == (first, second)  # the same seed, the same orders
    other = orders(1, tmp_path / "c")
    assert other != (first, second) and other[0] != other[1]  # another seed: other orders, new each epoch too
    model = Toy()
    t0 = time.perf_counter()
    (rec,) = _Runner(cfg(batch_size=64), model, tmp_path / "d", "pretrain").fit(ten, toy_loss(model))
    assert rec["loss"] == pytest.approx(-10.0) and rec["n"] == 10.0  # one batch of all 10: (1 − 2) · 10
    assert 0 < rec["seconds"] <= time.perf_counter() - t0


def test_an_evaluation_joins_the_record_and_training_mode_comes_back(ten, tmp_path):
    model, seen = Toy(), []

    def evaluate():
        model.eval()
        return {"test_acc": 0.25}

    c = cfg(epochs=2, gradient_checkpointing=True, memory_cleanup=True)
    runner = _Runner(c, model, tmp_path, "finetune")
    calls = []
    old = tt.cleanup
    tt.cleanup = lambda device: calls.append(device.type)
    try:
        hist = runner.fit(ten, toy_loss(model, seen), evaluate)
    finally:
        tt.cleanup = old
    assert [h["test_acc"] for h in hist] == [0.25, 0.25] and all(training for _, training in seen)
    assert model.encoder.gradient_checkpointing is True
    assert calls == ["cpu"] * 6  # once after every batch
    model2 = Toy()
    _Runner(cfg(), model2, tmp_path / "b", "pretrain").fit(ten, toy_loss(model2))
    assert model2.encoder.gradient_checkpointing is False


def test_a_non_finite_loss_stops_the_run_naming_epoch_and_batch(ten, tmp_path):
    model, count = Toy(), [0]

    def step(batch):
        count[0] += 1
        bad = float("nan") if count[0] == 2 else 1.0
        return {"loss": model.w.sum() * 0 + 1.0, "aux": torch.tensor(bad)}

    with pytest.raises(TracegraphError) as e:
        _Runner(cfg(), model, tmp_path, "pretrain").fit(ten, step)
    assert str(e.value) == "non-finite loss at epoch 1, batch 2: {'loss': 2.0, 'aux': nan}"


def test_accumulation_below_one_is_refused(tmp_path):
    for bad in (0, -1):
        with pytest.raises(TracegraphError) as e:
            _Runner(cfg(gradient_accumulation_steps=bad), Toy(), tmp_path, "pretrain")
        assert str(e.value) == "--gradient-accumulation-steps must be >= 1"


def test_the_run_files_hold_what_a_resume_reads(ten, tmp_path):
    model = Toy()
    runner = _Runner(cfg(epochs=2), model, tmp_path, "pretrain")
    runner.fit(ten, toy_loss(model))
    last = torch.load(tmp_path / "last.pt", weights_only=True)
    assert set(last) == {"kind", "epoch", "model", "optimizer", "scaler", "rng", "encoder_config"}
    assert (last["kind"], last["epoch"]) == ("pretrain", 1) and torch.equal(last["model"]["w"], model.w.detach())
    assert last["encoder_config"] == model.encoder.cfg.to_dict()
    enc = torch.load(tmp_path / "encoder.pt", weights_only=True)
    assert set(enc) == {"encoder_config", "encoder"} and enc["encoder"].keys() == model.encoder.state_dict().keys()
    # a resume takes the weights, optimiser state and epoch, and the history up to that epoch
    hist = json.loads((tmp_path / "history.json").read_text())
    (tmp_path / "history.json").write_text(json.dumps(hist + [{"epoch": 3}]))
    again = Toy()
    r2 = _Runner(cfg(epochs=2), again, tmp_path, "pretrain")
    r2.resume()
    assert r2.start_epoch == 2 and r2.history == hist and torch.equal(again.w, model.w)
    assert int(r2.opt.state[again.w]["step"]) == 6  # two epochs of three steps
    assert r2.fit(ten, toy_loss(again)) == hist  # nothing left to do
    (tmp_path / "history.json").unlink()
    r3 = _Runner(cfg(epochs=2), Toy(), tmp_path, "pretrain")
    r3.resume()
    assert r3.history == []
    with pytest.raises(DataError) as e:
        _Runner(cfg(), Toy(), tmp_path, "finetune").resume()
    assert str(e.value) == f"{tmp_path / 'last.pt'}: checkpoint is from 'pretrain', not 'finetune'"


def test_run_folders_are_refused_word_for_word(ten, tmp_path):
    with pytest.raises(TracegraphError) as e:
        pretrain(cfg(), tmp_path / "new", resume=True, data=ten)
    assert str(e.value) == f"--resume: no checkpoint in {tmp_path / 'new'}"
    run = tmp_path / "runs" / "a" / "run"  # folders on the way are made
    pretrain(cfg(), run, data=ten)
    with pytest.raises(TracegraphError) as e:
        pretrain(cfg(), run, data=ten)
    assert str(e.value) == f"{run} already holds a run; pass --resume or choose another --output-dir"


# ---------------------------------------------------------------------------------- pretraining


def test_pretraining_loss_is_the_weighted_sum_and_the_cutoff_comes_from_the_data(ten, tmp_path):
    ten = [d.clone() for d in ten]
    for k, d in enumerate(ten):  # edge lengths 1 + k/10, not cfg.data's synthetic unit steps
        d.pos = d.pos * (1 + k / 10)
    hist = pretrain(cfg(epochs=2, order_weight=0.3, growth_weight=2.0), tmp_path, data=ten)
    for h in hist:
        assert h["loss"] == pytest.approx(0.3 * h["order"] + 2.0 * h["growth"], rel=1e-6)
    lengths = np.concatenate([np.linalg.norm(d.pos[1:].numpy() - d.pos[d.parent[1:]].numpy(), axis=1) for d in ten])
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["encoder"]["cutoff"] == pytest.approx(1.25 * np.quantile(lengths, 0.99), rel=1e-6)
    assert {k: written["encoder"][k] for k in ENC} == ENC and written["encoder"]["in_channels"] == 4
    assert (written["order_weight"], written["growth_weight"], written["epochs"]) == (0.3, 2.0, 2)
    assert load_encoder(tmp_path / "encoder.pt").cfg.cutoff == written["encoder"]["cutoff"]


def test_a_seeded_pretraining_repeats_and_reads_its_data_config(tmp_path):
    a = pretrain(cfg(seed=3), tmp_path / "a")  # data=None: cfg.data's synthetic trees
    b = pretrain(cfg(seed=3), tmp_path / "b")
    assert [h["loss"] for h in a] == [h["loss"] for h in b]
    c = pretrain(cfg(seed=4), tmp_path / "c")
    assert a[0]["loss"] != c[0]["loss"]


def test_the_encoder_of_a_pretraining_last_pt_loads(ten, tmp_path):
    # load_encoder's docstring: "the encoder of a pretraining run's encoder.pt (or last.pt)"
    pretrain(cfg(), tmp_path, data=ten)
    a, b = load_encoder(tmp_path / "encoder.pt"), load_encoder(tmp_path / "last.pt")
    assert a.cfg == b.cfg and all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    config, weights = a.cfg.to_dict(), a.state_dict()
    for bad in (
        {"weights": 1},
        {"encoder_config": config},
        {"encoder": weights},
        {"encoder_config": config, "model": {}},
    ):
        torch.save(bad, tmp_path / "other.pt")
        with pytest.raises(DataError) as e:
            load_encoder(tmp_path / "other.pt")
        assert (
            str(e.value) == f"{tmp_path / 'other.pt'}: not an encoder checkpoint (expected encoder_config and encoder)"
        )


def test_make_encoder_derives_or_keeps_the_cutoff(ten):
    spec = dict(ENC)
    with pytest.raises(TracegraphError) as e:
        make_encoder(spec)
    assert str(e.value) == "encoder cutoff unknown: give --cutoff or data to derive it from"
    assert make_encoder(dict(ENC, cutoff=2.5), ten).cfg.cutoff == 2.5
    assert make_encoder(dict(ENC, cutoff=2.5, in_channels=7)).cfg.in_channels == 7
    assert make_encoder(spec, ten).cfg.in_channels == 4 and spec == ENC  # the caller's dict left alone


def test_the_config_round_trips_and_its_defaults_are_the_clis(monkeypatch, tmp_path):
    c = cfg(lr=0.01, weight_decay=0.1, freeze_encoder=True)
    back = TrainConfig.from_dict(json.loads(json.dumps(c.to_dict())))
    assert back == c and isinstance(back.data, DataConfig)
    seen = {}

    def capture(config, out, *a, **kw):
        seen["cfg"] = config
        raise SystemExit(0)

    monkeypatch.setattr(tt, "pretrain", capture)
    run_cli(["trees", "pretrain", "-o", tmp_path / "o"])
    cli, lib = seen["cfg"], TrainConfig()
    fields = ["epochs", "batch_size", "lr", "precision", "device", "gradient_accumulation_steps"]
    fields += ["gradient_checkpointing", "memory_cleanup", "seed", "order_weight", "growth_weight"]
    assert {f: getattr(cli, f) for f in fields} == {f: getattr(lib, f) for f in fields}
    assert (lib.epochs, lib.batch_size, lib.lr, lib.weight_decay) == (10, 32, 1e-3, 0.0)
    assert (lib.order_weight, lib.growth_weight) == (0.2, 1.0)  # docs/design.md: order loss weight 0.2


# ---------------------------------------------------------------------------------- fine-tuning


def relabel(data, labels):
    out = []
    for d, y in zip(data, labels):
        d = d.clone()
        d.y = torch.tensor([y])
        out.append(d)
    return out


def test_finetuning_counts_classes_and_scores_the_test_trees(ten, tmp_path):
    train, test = relabel(ten[:7], [0, 2, 0, 2, 0, 2, 0]), relabel(ten[7:], [2, 0, 0])
    hist = finetune(cfg(epochs=2, batch_size=3), None, tmp_path / "ft", data=(train, test))
    model = load_classifier(tmp_path / "ft" / "last.pt")
    assert model.head[2].out_features == 3 and model.head[0].in_features == 8  # largest label 2, plus one
    assert isinstance(model.head[1], nn.SiLU) and model.head[0].out_features == 8
    from torch_geometric.data import Batch

    with torch.no_grad():
        right = [int(model(Batch.from_data_list([d])).argmax()) == int(d.y) for d in test]
    assert hist[-1]["test_acc"] == pytest.approx(sum(right) / 3)
    assert set(hist[-1]) == {"epoch", "loss", "train_acc", "seconds", "peak_memory_bytes", "test_acc"}
    assert 0 <= hist[-1]["train_acc"] <= 1
    written = json.loads((tmp_path / "ft" / "config.json").read_text())
    assert written["encoder"]["cutoff"] > 0  # a fresh encoder's cutoff from the training trees
    finetune(cfg(), None, tmp_path / "five", data=(train, test), num_classes=5)
    assert load_classifier(tmp_path / "five" / "last.pt").head[2].out_features == 5


def test_training_accuracy_of_one_batch_and_the_configs_own_split(ten, tmp_path):
    train, test = relabel(ten[:7], [0, 1, 1, 1, 0, 1, 1]), relabel(ten[7:], [1, 0, 0])
    # learning rate 0: the saved classifier is the one that scored the (single) training batch
    (rec,) = finetune(cfg(lr=0.0, batch_size=64), None, tmp_path / "a", data=(train, test))
    model = load_classifier(tmp_path / "a" / "last.pt")
    from torch_geometric.data import Batch

    with torch.no_grad():
        right = [int(model(Batch.from_data_list([d])).argmax()) == int(d.y) for d in train]
    assert rec["train_acc"] == pytest.approx(sum(right) / 7)
    hist = finetune(cfg(), None, tmp_path / "b")  # data=None: cfg.data's synthetic labelled split
    assert 0 <= hist[0]["test_acc"] <= 1 and load_classifier(tmp_path / "b" / "last.pt").head[2].out_features == 2


def test_a_fine_tuning_resume_on_a_pretraining_run_leaves_it_alone(ten, tmp_path):
    pretrain(cfg(), tmp_path, data=ten)
    before = (tmp_path / "config.json").read_text()
    with pytest.raises(DataError, match="checkpoint is from 'pretrain', not 'finetune'"):
        finetune(cfg(epochs=2), None, tmp_path, resume=True, data=(ten[:5], ten[5:]))
    assert (tmp_path / "config.json").read_text() == before
    with pytest.raises(DataError) as e:
        load_classifier(tmp_path / "last.pt")
    assert str(e.value) == f"{tmp_path / 'last.pt'}: not a fine-tuning checkpoint (kind 'pretrain')"
    with pytest.raises(DataError, match=r"\(kind None\)"):
        load_classifier(tmp_path / "encoder.pt")


def test_predict_keeps_the_order_whatever_the_batch(ten):
    torch.manual_seed(0)
    model = Classifier(make_encoder(dict(ENC, cutoff=1.5)), 4)
    from torch_geometric.data import Batch

    with torch.no_grad():
        one_by_one = [int(model(Batch.from_data_list([d])).argmax()) for d in ten]
    for bs in (1, 3, 64):
        got = predict(model, ten, batch_size=bs)
        assert got.tolist() == one_by_one and got.dtype == np.int64
    assert not model.training
    empty = predict(model, [])
    assert empty.shape == (0,) and empty.dtype == np.int64
