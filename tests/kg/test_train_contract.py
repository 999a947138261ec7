"""The rest of the training loop's contract on the 10-triple graph of test_training_loop_on_a_tiny_graph.py: every
error message word for word, the log lines, the math policy a run sets, ``--compile``, the padded
step that CUDA-graph replay uses (run here on CPU), and the fused objective's gradients.

Written against the mutants of kg/model/train.py and training_files.py that test_training_loop_on_a_tiny_graph.py
left alive (docs/testing.md): each test says what it holds, computed independently of the loop.
"""

import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import tracegraph.kg.model.train as train_module
import tracegraph.kg.model.objective as objective_module
from tracegraph.errors import DataError, TracegraphError
import tracegraph.kg.model.train_session as session_module
from tracegraph.kg.model.objective import TrainingObjective
from tracegraph.kg.model.train import train
from tests.kg.tiny_graph import TRIPLES, cfg, dense_loss, groups, initial_model, load, read, rows_loss, scripted


# ---------------------------------------------------------------- errors, word for word


@pytest.mark.parametrize("option,what", [("entity_map", "entity map"), ("relation_map", "relation map")])
def test_a_missing_id_map_is_named_with_its_path(data, tmp_path, option, what):
    missing = tmp_path / "missing.txt"
    with pytest.raises(DataError) as e:
        train(cfg(data, tmp_path / "out", **{option: str(missing)}))
    assert str(e.value) == f"{missing}: {what} not found"
    assert not (tmp_path / "out").exists()


def test_resume_errors_name_the_directory_and_the_config(data, tmp_path):
    out = tmp_path / "run"
    train(cfg(data, out, epochs=1))
    ck = out / "checkpoints" / "epoch_0001.pt"
    torch.save(dict(load(ck), run_id="someone-else"), ck)
    with pytest.raises(TracegraphError) as e:
        train(cfg(data, out, epochs=2, resume=True))
    assert str(e.value) == f"--resume: {ck} belongs to another run than {out / 'config.json'} records"
    ck.unlink()
    rolling = out / "checkpoints" / "resume.pt"
    torch.save(dict(load(rolling), run_id="someone-else"), rolling)
    with pytest.raises(TracegraphError) as e:
        train(cfg(data, out, epochs=2, resume=True))
    assert str(e.value) == f"--resume: {rolling} belongs to another run than {out / 'config.json'} records"
    rolling.unlink()
    with pytest.raises(TracegraphError) as e:
        train(cfg(data, out, epochs=2, resume=True))
    assert str(e.value) == f"--resume: no checkpoints in {out / 'checkpoints'}"


def test_a_non_finite_loss_stops_the_run_naming_epoch_step_and_rate(data, tmp_path, monkeypatch):
    """Batches of 4 (4 steps an epoch): the 7th step's loss is made infinite, i.e. epoch 2, step 3.
    Epoch 1's checkpoint stays; nothing of epoch 2 is written."""
    real, calls = TrainingObjective.forward, []

    def poisoned(self, *a, **k):
        calls.append(1)
        loss = real(self, *a, **k)
        return loss * float("inf") if len(calls) == 7 else loss

    monkeypatch.setattr(TrainingObjective, "forward", poisoned)
    out = tmp_path / "inf"
    with pytest.raises(TracegraphError) as e:
        train(cfg(data, out, epochs=3, batch_size=4, learning_rate=0.02))
    assert str(e.value) == (
        "loss became inf at epoch 2, step 3 (lr 0.02); nothing was saved for this epoch. "
        "Try a lower --learning-rate or --precision fp32."
    )
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["epoch_0001.pt", "resume.pt"]
    assert load(out / "checkpoints" / "resume.pt")["epoch"] == 1
    assert [h["epoch"] for h in read(out / "training_history.json")] == [1]


def test_exclusion_is_refused_under_torchrun_before_anything_is_read(data, tmp_path, monkeypatch):
    """A rank of a torchrun job (faked: the refusal comes before any collective call)."""
    rank = SimpleNamespace(device=torch.device("cpu"), active=True, rank=0, world_size=2, is_main=True)
    monkeypatch.setattr(session_module, "init_distributed", lambda device: rank)
    with pytest.raises(TracegraphError) as e:
        train(cfg(data, tmp_path / "out", exclude=str(tmp_path / "not-read.txt")))
    assert str(e.value) == (
        "excluding training triples (TrainConfig.exclude) runs in one process: "
        "torchrun's batch bookkeeping assumes whole batches"
    )
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- log lines and config.json


def test_log_lines_of_a_run_without_valid_and_with_the_standard_loss(data, tmp_path, logs):
    out = tmp_path / "log"
    train(cfg(data, out, epochs=2, loss_impl="standard", num_workers=4))
    text = logs()
    assert "--num-workers: batches are built on the training device, so no loader workers are needed" in text
    for h in read(out / "training_history.json"):
        line = next(t for t in text if t.startswith(f"epoch {h['epoch']}: "))
        assert re.fullmatch(rf"epoch {h['epoch']}: loss {h['loss']:.5f} \(\d+\.\ds, peak .+\)", line), line
    setup = next(t for t in text if t.startswith("ConvE: "))
    assert (
        setup == "ConvE: 6 entities, 2 relations, 10 train triples, 16 samples (kvsall), device cpu, "
        "precision fp32, loss standard"
    )


def test_config_records_the_entities_unseen_in_train(data, tmp_path, logs):
    """'e9' appears only in valid: the default policy (include) ranks it and config.json says so."""
    valid = tmp_path / "valid.txt"
    valid.write_text("e0\tr1\te3\ne9\tr0\te1\n")
    out = tmp_path / "unseen"
    train(cfg(data, out, valid=str(valid)))
    assert read(out / "config.json")["unseen"] == {
        "policy": "include",
        "entities": 1,
        "entity_labels": ["e9"],
        "entities_per_split": {"valid": 1},
        "triples": {"valid": 1},
        "dropped": False,
    }
    assert (
        "1 entities unseen in train, 1 in valid (1 triple): included (never a training positive) and "
        "ranked among all entities" in logs()
    )


# ---------------------------------------------------------------- what a run switches on


def test_use_mixed_precision_is_the_best_half_precision_of_the_device(data, tmp_path, logs):
    """The --use-mixed-precision alias: bf16 on CPU, in config.json and in the setup line."""
    out = tmp_path / "amp"
    train(cfg(data, out, use_mixed_precision=True))
    assert read(out / "config.json")["resolved"]["precision"] == "bf16"
    assert any(t.startswith("ConvE: ") and ", precision bf16, " in t for t in logs())


@pytest.mark.parametrize("deterministic", [True, False])
def test_the_run_sets_its_math_policy_and_restores_it(data, tmp_path, monkeypatch, deterministic):
    seen, real = [], train_module._train

    def spy(c, *callbacks):
        seen.append((torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark))
        return real(c, *callbacks)

    monkeypatch.setattr(train_module, "_train", spy)
    before = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark)
    train(cfg(data, tmp_path / "det", deterministic=deterministic))
    # deterministic: deterministic kernels, no cuDNN autotuning; otherwise cuDNN times its algorithms
    assert seen == [(True, False)] if deterministic else seen == [(before[0], True)]
    assert (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark) == before


def test_compile_wraps_the_objective_every_step_goes_through(data, tmp_path, monkeypatch):
    """torch.compile replaced by a counting pass-through: same weights as a plain run, all 8 steps
    (2 epochs of 4 batches) through the compiled callable."""
    compiled, steps = [], []

    def fake_compile(module):
        compiled.append(module)
        return lambda *a, **k: (steps.append(1), module(*a, **k))[1]

    monkeypatch.setattr(torch, "compile", fake_compile)
    train(cfg(data, tmp_path / "c", epochs=2, batch_size=4, compile=True))
    train(cfg(data, tmp_path / "p", epochs=2, batch_size=4))
    assert len(compiled) == 1 and isinstance(compiled[0], TrainingObjective) and len(steps) == 8
    a, b = load(tmp_path / "c" / "final_model.pt")["model"], load(tmp_path / "p" / "final_model.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


# ---------------------------------------------------------------- the step and the objective


@pytest.mark.parametrize("impl", ["standard", "fused"])
def test_a_padded_step_is_the_unpadded_step(data, tmp_path, impl):
    """CUDA-graph replay pads a batch's targets to a fixed capacity with weight-0 rows (run on CPU
    here): the step's loss must be the dense loss of the batch, padded or not."""
    s = session_module.build_session(
        cfg(data, tmp_path / "pad", learning_rate=0.0, label_smoothing=0.1, loss_impl=impl)
    )
    s.step = s.objective
    run_step = train_module._step_function(s)
    index = torch.arange(5)
    n = s.store.target_count(s.store.epoch([list(range(5))])[0])
    h, r = s.store.heads_relations(index)
    expected = rows_loss(initial_model(), h, r, dict(groups(TRIPLES, "kvsall")), 0.1)
    assert float(run_step(index, n, padded=False)) == pytest.approx(expected, rel=1e-5)
    assert float(run_step(index, n + 7, padded=True)) == pytest.approx(expected, rel=1e-5)


def test_the_fused_objective_has_the_standard_loss_and_gradients(data, monkeypatch):
    """With a non-zero entity bias: the fused loss equals the dense reference and every gradient
    equals the standard objective's; in both the head lookup shares the loss's one dL/dE buffer (the
    memory protocol of test_loss_paths.py, here as the objective wires it; the standard objective on
    a CPU keeps its logits in stored_bce_1n)."""
    handed = []
    real_lookup = objective_module.tied_lookup

    def lookup(weight, index, sink):
        out = real_lookup(weight, index, sink)
        out.register_hook(lambda g: handed.append(sink.get("grad")))  # after the loss's backward
        return out

    monkeypatch.setattr(objective_module, "tied_lookup", lookup)
    model = initial_model().double()
    with torch.no_grad():
        model.entity_bias.copy_(torch.linspace(-1, 1, 6, dtype=torch.float64))
    gr = groups(TRIPLES, "kvsall")
    h = torch.tensor([g[0][0] for g in gr])
    r = torch.tensor([g[0][1] for g in gr])
    row = torch.tensor([i for i, g in enumerate(gr) for _ in g[1]])
    tails = torch.tensor([t for g in gr for t in g[1]])
    grads = {}
    for fused in (False, True):
        model.zero_grad()  # no dropout in TINY: both objectives see the same forward
        loss = TrainingObjective(model, fused, chunk=4, label_smoothing=0.2)(h, r, row, tails)
        loss.backward()
        grads[fused] = {k: p.grad.clone() for k, p in model.named_parameters()}
        assert loss.item() == pytest.approx(dense_loss(model, gr, 0.2), rel=1e-10)
    for k, g in grads[False].items():
        np.testing.assert_allclose(grads[True][k].numpy(), g.numpy(), rtol=1e-9, atol=1e-12, err_msg=k)
    assert grads[True]["entity_bias"].abs().sum() > 0 and grads[True]["entity.weight"][h].abs().sum() > 0
    assert len(handed) == 2 and all(g is not None and g.shape == model.entity.weight.shape for g in handed)


# ---------------------------------------------------------------- options that change only how, or when


def test_gradient_checkpointing_recomputes_the_encoder_and_changes_nothing_else(data, tmp_path, monkeypatch):
    import tracegraph.kg.model.conve as conve

    calls, real = [], conve.checkpoint
    monkeypatch.setattr(conve, "checkpoint", lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    train(cfg(data, tmp_path / "ck", epochs=2, batch_size=4, gradient_checkpointing=True))
    assert len(calls) == 8  # every training step (2 epochs x 4 batches), none in evaluation
    calls.clear()
    train(cfg(data, tmp_path / "plain", epochs=2, batch_size=4))
    assert calls == []
    a, b = load(tmp_path / "ck" / "final_model.pt")["model"], load(tmp_path / "plain" / "final_model.pt")["model"]
    assert all(torch.allclose(a[k].float(), b[k].float(), rtol=1e-6, atol=1e-7) for k in a)


def test_weight_decay_reaches_the_optimizer(data, tmp_path):
    """Adam's coupled L2: the run keeps the optimizer's weight_decay (checkpointed state) and ends
    elsewhere than the same run without it."""
    train(cfg(data, tmp_path / "wd", epochs=1, weight_decay=0.5))
    train(cfg(data, tmp_path / "no", epochs=1))
    ck = load(tmp_path / "wd" / "checkpoints" / "resume.pt")
    assert [g["weight_decay"] for g in ck["optimizer"]["param_groups"]] == [0.5]
    a, b = load(tmp_path / "wd" / "final_model.pt")["model"], load(tmp_path / "no" / "final_model.pt")["model"]
    assert not torch.allclose(a["entity.weight"], b["entity.weight"])


def test_plateau_schedule_halves_the_rate_after_lr_patience_flat_evaluations(data, tmp_path, monkeypatch):
    """ReduceLROnPlateau (mode max) on the scripted valid MRRs 0.5, 0.4, 0.4, 0.6, 0.6 with
    --lr-patience 1: the third evaluation is the second without improvement, so epoch 4 runs at half rate."""
    scripted(monkeypatch, [0.5, 0.4, 0.4, 0.6, 0.6])
    out = tmp_path / "plateau"
    train(
        cfg(
            data,
            out,
            epochs=5,
            valid=str(data / "valid.txt"),
            lr_scheduler="plateau",
            lr_factor=0.5,
            lr_patience=1,
            patience=0,
        )
    )
    assert [h["lr"] for h in read(out / "training_history.json")] == [0.01, 0.01, 0.01, 0.005, 0.005]


def test_overwrite_replaces_a_finished_run(data, tmp_path):
    out = tmp_path / "run"
    train(cfg(data, out, epochs=2))
    first = read(out / "config.json")["run_id"]
    s = train(cfg(data, out, epochs=1, overwrite=True))
    assert s["epochs_run"] == 1 and read(out / "config.json")["run_id"] != first
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["epoch_0001.pt", "resume.pt"]


def test_log_lines_of_test_metrics_resume_and_early_stopping(data, tmp_path, monkeypatch, logs):
    out = tmp_path / "run"
    train(cfg(data, out, epochs=1, test=str(data / "test.txt")))
    res = read(out / "test_results.json")["metrics"]["both"]
    assert f"test: MRR {res['mrr']:.4f}, Hits@10 {res['hits@10']:.4f}" in logs()
    train(cfg(data, out, epochs=2, resume=True, test=str(data / "test.txt")))
    assert f"resuming after epoch 1 from {out / 'checkpoints' / 'resume.pt'}" in logs()
    scripted(monkeypatch, [0.5, 0.4, 0.4])
    train(cfg(data, tmp_path / "es", epochs=3, valid=str(data / "valid.txt"), patience=2))
    assert "early stopping: no valid MRR improvement in 2 evaluations" in logs()
