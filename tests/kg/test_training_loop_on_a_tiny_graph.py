"""The training loop's observable contract, on a 10-triple graph in a few seconds (mutation testing of
kg/model/train.py and kg/model/training_files.py; docs/testing.md).

Every expectation is computed here, independently of the loop: losses as dense float64 BCE / CE
with label matrices built by hand (weights frozen with learning rate 0), valid/test MRR by brute-force
filtered ranking of the saved weights, learning rates by closed form, the files and their records,
the epoch at which early stopping must fire, and what ``--resume`` must carry over.
"""

import hashlib
import json
import math
import time
from dataclasses import asdict

import numpy as np
import pytest
import torch

from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.model.conve import ConvEConfig
from tracegraph.kg.model.train import TrainConfig, train
from tracegraph.runtime.distributed import rank_seed
from tests.kg.tiny_graph import (
    TINY,
    TRIPLES,
    VALID,
    TEST,
    ENT,
    R,
    write_triples,
    cfg,
    groups,
    dense_loss,
    initial_model,
    brute_mrr,
    read,
    load,
    adam_steps,
    spy_batches,
    rows_loss,
    scripted,
)

# ---------------------------------------------------------------- files, records, metrics of one run


def test_run_writes_its_files_records_and_metrics(data, tmp_path):
    out = tmp_path / "run"
    c = cfg(
        data,
        out,
        epochs=3,
        batch_size=6,
        lr_decay=0.5,
        checkpoint_every=2,
        eval_every=2,
        valid=str(data / "valid.txt"),
        test=str(data / "test.txt"),
    )
    t0 = time.perf_counter()
    summary = train(c)
    wall = time.perf_counter() - t0
    n = len(groups(TRIPLES, "kvsall"))  # 16 samples: batches of 6, 6, 4 -> 3 steps an epoch

    # history: epochs, the rate each epoch started with, valid only at eval_every and the last epoch
    hist = read(out / "training_history.json")
    assert [h["epoch"] for h in hist] == [1, 2, 3]
    assert [h["lr"] for h in hist] == pytest.approx([0.01, 0.005, 0.0025])
    assert ["valid" in h for h in hist] == [False, True, True]
    assert all(math.isfinite(h["loss"]) and h["loss"] > 0 and 0 <= h["seconds"] <= wall for h in hist)
    assert all("peak_memory_bytes" in h and "skipped_steps_total" not in h for h in hist)
    assert len({h["loss"] for h in hist}) == 3  # it learns: the loss moves

    # checkpoints: weights and lr every checkpoint_every epochs and the last; the full state of the
    # last epoch in the one rolling resume.pt
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["epoch_0002.pt", "epoch_0003.pt", "resume.pt"]
    run_id = read(out / "config.json")["run_id"]
    assert run_id
    for e in (2, 3):
        ck = load(out / "checkpoints" / f"epoch_{e:04d}.pt")
        assert set(ck) == {"model", "model_config", "epoch", "lr", "metrics", "run_id"}
        assert ck["epoch"] == e and ck["lr"] == pytest.approx(0.01 * 0.5 ** (e - 1)) and ck["run_id"] == run_id
        assert ck["metrics"] == hist[e - 1]
    ck, e = load(out / "checkpoints" / "resume.pt"), 3
    assert ck["epoch"] == e and ck["lr"] == pytest.approx(0.01 * 0.5 ** (e - 1)) and ck["run_id"] == run_id
    assert adam_steps(ck) == 3 * e
    assert ck["scheduler"]["last_epoch"] == e and ck["scheduler"]["gamma"] == 0.5
    assert ck["sampler_rng"].dtype == torch.uint8 and ck["sampler_rng"].numel() > 0 and ck["rng"]
    st = ck["state"]
    assert json.loads(st["history_json"]) == hist[:e]
    assert st["skipped_steps"] == 0
    assert st["best_mrr"] == max(h["valid"]["mrr"] for h in hist[:e] if "valid" in h)
    assert set(ck["optimizer"]) == {"state", "param_groups"}

    # valid MRR of epochs 2 and 3: brute force from those epochs' weights, filtered by train+valid+test
    known = TRIPLES + VALID + TEST
    for e in (2, 3):
        w = load(out / "checkpoints" / f"epoch_{e:04d}.pt")["model"]
        assert hist[e - 1]["valid"]["mrr"] == pytest.approx(brute_mrr(w, VALID, known), rel=1e-6)
        assert hist[e - 1]["valid"]["count"] == 2 * len(VALID)
    best_epoch = 2 if hist[1]["valid"]["mrr"] >= hist[2]["valid"]["mrr"] else 3
    best = load(out / "best_model.pt")
    assert best["epoch"] == best_epoch and best["run_id"] == run_id
    final = load(out / "final_model.pt")
    assert final["epoch"] == 3 and final["lr"] == pytest.approx(0.0025) and final["run_id"] == run_id
    assert final["metrics"] == hist[2]
    assert all(
        torch.equal(final["model"][k], v) for k, v in load(out / "checkpoints" / "epoch_0003.pt")["model"].items()
    )

    # test metrics: the best model's, brute force
    tr = read(out / "test_results.json")
    assert tr["checkpoint"] == str(out / "best_model.pt")
    assert tr["metrics"]["both"]["mrr"] == pytest.approx(brute_mrr(best["model"], TEST, known), rel=1e-6)
    m = tr["metrics"]
    assert m["both"]["count"] == 4 and m["head"]["count"] == 2 and m["tail"]["count"] == 2
    assert summary["test"]["both"] == m["both"]
    assert summary["epochs_run"] == 3 and summary["stopped_early"] is False and summary["skipped_steps"] == 0
    assert summary["best_valid_mrr"] == max(hist[1]["valid"]["mrr"], hist[2]["valid"]["mrr"])
    assert set(summary) == {"epochs_run", "stopped_early", "best_valid_mrr", "skipped_steps", "test"}

    # id maps and config.json
    assert (out / "node_dict.txt").read_text().split() == [x for e in ENT for x in (e, str(ENT[e]))]
    assert (out / "rel_dict.txt").read_text().split() == ["r0", "0", "r1", "1"]
    conf = read(out / "config.json")
    assert set(conf) == {"run_id", "train", "model", "resolved", "sizes", "unseen", "versions", "data_files"}
    for split in ("train", "valid", "test"):  # absolute path, path from the run dir, sha256 of the bytes
        f = data / f"{split}.txt"
        assert conf["data_files"][split] == {
            "path": str(f.resolve()),
            "relative": f"../../{data.name}/{split}.txt",
            "sha256": hashlib.sha256(f.read_bytes()).hexdigest(),
        }
    assert conf["train"] == json.loads(json.dumps(asdict(c)))
    assert conf["model"] == ConvEConfig(num_entities=6, num_relations=2, **TINY).to_dict()
    assert conf["resolved"] == {"device": "cpu", "precision": "fp32", "loss_impl": "standard", "patience": 10}
    assert conf["sizes"] == {
        "entities": 6,
        "relations": 2,
        "train_triples": 10,
        "valid_triples": 2,
        "test_triples": 2,
        "training_samples": n,
    }
    assert conf["unseen"] is None or isinstance(conf["unseen"], dict)
    import platform

    import tracegraph

    assert conf["versions"] == {
        "tracegraph": tracegraph.__version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def test_without_valid_or_test_no_evaluation_and_final_model_only(data, tmp_path):
    out = tmp_path / "bare"
    summary = train(cfg(data, out, epochs=2, batch_size=7, checkpoint_every=5))
    assert summary == {"epochs_run": 2, "stopped_early": False, "best_valid_mrr": -1.0, "skipped_steps": 0}
    assert not (out / "best_model.pt").exists() and not (out / "test_results.json").exists()
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        "epoch_0002.pt",
        "resume.pt",
    ]  # the last epoch only
    assert read(out / "config.json")["resolved"]["patience"] == 0
    assert all("valid" not in h for h in read(out / "training_history.json"))
    assert adam_steps(load(out / "checkpoints" / "resume.pt")) == 2 * 3  # 16 samples: 7, 7, 2


def test_test_metrics_come_from_the_final_model_when_there_is_no_best(data, tmp_path):
    out = tmp_path / "nobest"
    train(cfg(data, out, epochs=2, batch_size=7, test=str(data / "test.txt")))
    tr = read(out / "test_results.json")
    assert tr["checkpoint"] == str(out / "final_model.pt")
    w = load(out / "final_model.pt")["model"]
    assert tr["metrics"]["both"]["mrr"] == pytest.approx(brute_mrr(w, TEST, TRIPLES + TEST), rel=1e-6)


# ---------------------------------------------------------------- the loss the loop optimises


@pytest.mark.parametrize(
    "mode,loss,impl,eps",
    [
        ("kvsall", "bce", "standard", 0.2),
        ("1vsall", "bce", "auto", 0.0),
        ("kvsall", "bce", "fused", 0.3),
        ("1vsall", "ce", "auto", 0.25),
    ],
)
def test_epoch_losses_with_frozen_weights_are_the_dense_loss(data, tmp_path, mode, loss, impl, eps):
    """One batch holds every sample: with rate 0 each epoch's loss is the dense loss of the initial model."""
    out = tmp_path / "frozen"
    train(
        cfg(data, out, epochs=2, learning_rate=0.0, training_mode=mode, loss=loss, loss_impl=impl, label_smoothing=eps)
    )
    expected = dense_loss(initial_model(), groups(TRIPLES, mode), eps, loss)
    hist = read(out / "training_history.json")
    assert [h["loss"] for h in hist] == pytest.approx([expected, expected], rel=1e-5)
    conf = read(out / "config.json")
    assert conf["resolved"]["loss_impl"] == ("fused" if impl == "fused" else "standard")
    assert conf["sizes"]["training_samples"] == len(groups(TRIPLES, mode))


@pytest.mark.parametrize("mode", ["kvsall", "1vsall"])
def test_epoch_loss_is_the_mean_of_its_batch_losses(data, tmp_path, monkeypatch, mode):
    """Batches of 6 (BatchNorm normalises each batch on its own): the epoch's loss is the mean of the
    dense losses of the batches the steps saw, and every sample is in one batch of each epoch."""
    seen = spy_batches(monkeypatch)
    out = tmp_path / "batches"
    train(cfg(data, out, epochs=2, batch_size=6, learning_rate=0.0, training_mode=mode, label_smoothing=0.1))
    gr = groups(TRIPLES, mode)
    n, steps = len(gr), math.ceil(len(gr) / 6)
    assert len(seen) == 2 * steps
    hist = read(out / "training_history.json")
    for e in (1, 2):
        batch = seen[(e - 1) * steps : e * steps]
        pairs = sorted((int(a), int(b)) for h, r in batch for a, b in zip(h, r))
        assert pairs == sorted(g[0] for g in gr) and len(pairs) == n
        if mode == "kvsall":
            tails = dict(gr)
            m = initial_model()
            expected = np.mean([rows_loss(m, h, r, tails, 0.1) for h, r in batch])
            assert hist[e - 1]["loss"] == pytest.approx(expected, rel=1e-5)
    assert adam_steps(load(out / "checkpoints" / "resume.pt")) == 2 * steps


def test_dropout_masks_are_seeded_per_epoch_and_batch(data, tmp_path, monkeypatch):
    """Rate 0, batches of 8: each step's loss is the dense loss under the masks of
    rank_seed(seed, epoch, batch number), whatever ran before it."""
    drop = dict(input_dropout=0.3, feature_map_dropout=0.3, output_dropout=0.3)
    seen = spy_batches(monkeypatch)
    out = tmp_path / "drop"
    train(cfg(data, out, epochs=2, batch_size=8, learning_rate=0.0, label_smoothing=0.1, model={**TINY, **drop}))
    hist = read(out / "training_history.json")
    tails = dict(groups(TRIPLES, "kvsall"))
    for e in (1, 2):
        m, losses = initial_model(**drop), []
        for i, (h, r) in enumerate(seen[2 * (e - 1) : 2 * e]):
            torch.manual_seed(rank_seed(3, e, i))
            losses.append(rows_loss(m, h, r, tails, 0.1))
        assert hist[e - 1]["loss"] == pytest.approx(np.mean(losses), rel=1e-5)


def test_a_last_batch_of_one_is_skipped(data, tmp_path):
    out = tmp_path / "one"
    train(cfg(data, out, epochs=1, batch_size=15))  # 16 samples: 15 + 1, and BatchNorm cannot take the one
    assert adam_steps(load(out / "checkpoints" / "resume.pt")) == 1
    out2 = tmp_path / "two"
    train(cfg(data, out2, epochs=1, batch_size=14))  # 14 + 2: both steps
    assert adam_steps(load(out2 / "checkpoints" / "resume.pt")) == 2


def test_excluded_triples_leave_the_targets(data, tmp_path):
    """kvsall, one batch, rate 0: the loss over the samples that remain, with the excluded tails gone."""
    gone = [("e0", "r0", "e1"), ("e5", "r1", "e1")]
    ex = write_triples(tmp_path / "ex.txt", gone)
    out = tmp_path / "ex"
    train(cfg(data, out, epochs=1, learning_rate=0.0, label_smoothing=0.1, exclude=ex))
    kept = [t for t in TRIPLES if t not in gone]
    expected = dense_loss(initial_model(), groups(kept, "kvsall"), 0.1)
    assert read(out / "training_history.json")[0]["loss"] == pytest.approx(expected, rel=1e-5)
    with pytest.raises(DataError, match="not a training triple"):
        train(cfg(data, tmp_path / "ex2", exclude=write_triples(tmp_path / "bad.txt", [("e0", "r1", "e1")])))


@pytest.mark.parametrize("bs,fused", [(2**24, False), (2**24 + 1, True)])
def test_auto_loss_goes_fused_above_512_MiB_of_logits(tmp_path, bs, fused):
    """batch × entities × 4 bytes > 512 MiB: 2**24 × 8 × 4 is exactly 512 MiB."""
    write_triples(tmp_path / "t.txt", [(f"a{i}", "r", f"a{(i + 1) % 8}") for i in range(8)])
    out = tmp_path / "auto"
    train(
        TrainConfig(
            train=str(tmp_path / "t.txt"), output_dir=str(out), epochs=1, batch_size=bs, device="cpu", model=dict(TINY)
        )
    )
    assert read(out / "config.json")["resolved"]["loss_impl"] == ("fused" if fused else "standard")


# ---------------------------------------------------------------- evaluation, early stopping, resume


@pytest.mark.parametrize(
    "mrrs,patience,min_epochs,stop",
    [
        ([0.3, 0.5, 0.5, 0.4, 0.9, 0.9], 2, 0, 4),  # an equal MRR is no improvement
        ([0.5, 0.4, 0.3, 0.2, 0.1, 0.9], 2, 5, 5),  # not before min_epochs
        ([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], 1, 0, None),
        ([0.5, 0.4, 0.6, 0.5, 0.45, 0.9], 2, 0, 5),  # an improvement resets the count
    ],
)
def test_early_stopping_epoch(data, tmp_path, monkeypatch, mrrs, patience, min_epochs, stop):
    scripted(monkeypatch, mrrs)
    seen, epochs = [], []
    out = tmp_path / "es"
    s = train(
        cfg(data, out, epochs=6, batch_size=7, valid=str(data / "valid.txt"), patience=patience, min_epochs=min_epochs),
        on_evaluation=lambda e, m: seen.append((e, m)),
        on_epoch=lambda e, n, record: epochs.append((e, n, record)),
    )
    last = stop or 6
    assert s["stopped_early"] is (stop is not None) and s["epochs_run"] == last
    assert seen == list(zip(range(1, last + 1), mrrs[:last]))
    assert s["best_valid_mrr"] == max(mrrs[:last])
    assert [h["valid"]["mrr"] for h in read(out / "training_history.json")] == mrrs[:last]
    # after each epoch, up to the one that stopped the run: its number, of how many, its history record
    assert [(e, n) for e, n, _ in epochs] == [(e, 6) for e in range(1, last + 1)]
    assert [json.loads(json.dumps(r)) for _, _, r in epochs] == read(out / "training_history.json")
    best_epoch = 1 + mrrs.index(max(mrrs[:last]))
    assert load(out / "best_model.pt")["epoch"] == best_epoch
    assert load(out / "final_model.pt")["epoch"] == last
    assert read(out / "config.json")["resolved"]["patience"] == patience


def test_resume_carries_best_and_bad_evaluations_on(data, tmp_path, monkeypatch):
    kw = dict(batch_size=7, valid=str(data / "valid.txt"), patience=2)
    out = tmp_path / "r"
    scripted(monkeypatch, [0.5, 0.4])
    train(cfg(data, out, epochs=2, **kw))
    before = read(out / "training_history.json")
    scripted(monkeypatch, [0.3, 0.2, 0.1, 0.1])
    seen = []
    s = train(cfg(data, out, epochs=6, resume=True, **kw), on_evaluation=lambda e, m: seen.append(e))
    # one bad evaluation came from the checkpoint: the next one stops the run, at epoch 3
    assert seen == [3] and s["epochs_run"] == 3 and s["stopped_early"]
    assert s["best_valid_mrr"] == 0.5
    after = read(out / "training_history.json")
    assert after[:2] == before and [h["epoch"] for h in after] == [1, 2, 3]
    assert load(out / "best_model.pt")["epoch"] == 1
    assert adam_steps(load(out / "checkpoints" / "resume.pt")) == 3 * 3  # 16 samples in batches of 7


def test_resume_ends_with_the_uninterrupted_weights_and_losses(data, tmp_path):
    drop = dict(input_dropout=0.2, feature_map_dropout=0.2, output_dropout=0.2)
    kw = dict(batch_size=5, lr_decay=0.7, model={**TINY, **drop})
    full, part = tmp_path / "full", tmp_path / "part"
    train(cfg(data, full, epochs=3, **kw))
    train(cfg(data, part, epochs=1, **kw))
    train(cfg(data, part, epochs=3, resume=True, **kw))
    a, b = load(full / "final_model.pt"), load(part / "final_model.pt")
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert b["lr"] == pytest.approx(0.01 * 0.7**2)  # decayed twice
    ha, hb = read(full / "training_history.json"), read(part / "training_history.json")
    assert [h["loss"] for h in ha] == [h["loss"] for h in hb] and [h["lr"] for h in hb] == pytest.approx(
        [0.01, 0.007, 0.0049]
    )
    assert b["run_id"] == read(part / "config.json")["run_id"]


def test_resume_refusals(data, tmp_path):
    out = tmp_path / "ref"
    train(cfg(data, out, epochs=1))
    with pytest.raises(TracegraphError, match="--output-channels was 2 in this run, now 3"):
        train(cfg(data, out, epochs=2, resume=True, model={**TINY, "output_channels": 3}))
    for ck in (out / "checkpoints" / "epoch_0001.pt", out / "checkpoints" / "resume.pt"):
        payload = load(ck)
        torch.save(dict(payload, run_id="someone-else"), ck)
        with pytest.raises(TracegraphError, match="belongs to another run than .*config.json"):
            train(cfg(data, out, epochs=2, resume=True))
        ck.unlink()
    with pytest.raises(TracegraphError, match=r"--resume: no checkpoints in .*checkpoints"):
        train(cfg(data, out, epochs=2, resume=True))
    with pytest.raises(TracegraphError, match="is not empty"):
        train(cfg(data, out, epochs=2))


def test_resume_of_a_checkpoint_without_run_id_is_accepted(data, tmp_path):
    """A run from before run ids and before resume.pt: its epoch checkpoint held the full state."""
    out = tmp_path / "old"
    train(cfg(data, out, epochs=1))
    ck, rolling = out / "checkpoints" / "epoch_0001.pt", out / "checkpoints" / "resume.pt"
    payload = load(rolling)
    del payload["run_id"]
    torch.save(payload, ck)
    rolling.unlink()
    s = train(cfg(data, out, epochs=2, resume=True))
    assert s["epochs_run"] == 2 and [h["epoch"] for h in read(out / "training_history.json")] == [1, 2]


@pytest.mark.parametrize(
    "kw,message",
    [
        (dict(training_mode="kvsall2"), "--training-mode must be kvsall or 1vsall"),
        (dict(loss="mse"), "--loss must be one of bce, ce, not 'mse'"),
        (dict(loss="ce", loss_impl="fused"), "--loss ce has no fused implementation; use --loss-impl standard or auto"),
    ],
)
def test_option_errors_before_anything_is_written(data, tmp_path, kw, message):
    out = tmp_path / "bad"
    with pytest.raises(TracegraphError) as e:
        train(cfg(data, out, **kw))
    assert str(e.value) == message
    assert not out.exists()


def test_filter_triples_are_filtered_out_of_the_valid_ranking(data, tmp_path):
    """--filter-triples (tune passes its test file): known true, so they never outrank a valid answer."""
    extra = [("e0", "r1", e) for e in ("e0", "e1", "e2", "e4", "e5")] + [("e1", "r1", "e2"), ("e3", "r1", "e2")]
    out = tmp_path / "filt"
    train(
        cfg(
            data,
            out,
            epochs=1,
            valid=str(data / "valid.txt"),
            filter_triples=[write_triples(tmp_path / "x.txt", extra)],
        )
    )
    w = load(out / "final_model.pt")["model"]
    mrr = read(out / "training_history.json")[0]["valid"]["mrr"]
    assert mrr == pytest.approx(brute_mrr(w, VALID, TRIPLES + VALID + extra), rel=1e-6)
    assert mrr != pytest.approx(brute_mrr(w, VALID, TRIPLES + VALID), rel=1e-3)  # the extra triples matter


def test_zero_epochs_saves_the_initial_model_as_epoch_zero(data, tmp_path):
    out = tmp_path / "zero"
    s = train(cfg(data, out, epochs=0, learning_rate=0.02))
    assert s == {"epochs_run": 0, "stopped_early": False, "best_valid_mrr": -1.0, "skipped_steps": 0}
    final = load(out / "final_model.pt")
    assert final["epoch"] == 0 and final["lr"] == 0.02 and final["metrics"] == {"epoch": 0, "lr": 0.02}
    init = initial_model().state_dict()
    assert all(torch.equal(final["model"][k], init[k]) for k in init)
    assert not (out / "checkpoints").exists() or not list((out / "checkpoints").iterdir())


def test_given_id_maps_number_the_run(data, tmp_path):
    """--entity-map / --relation-map: the run uses (and writes back) the given ids, not sorted labels."""
    emap = tmp_path / "ents.txt"
    emap.write_text("".join(f"e{i}\t{5 - i}\n" for i in range(6)))
    rmap = tmp_path / "rels.txt"
    rmap.write_text("r1\t0\nr0\t1\n")
    out = tmp_path / "maps"
    train(cfg(data, out, entity_map=str(emap), relation_map=str(rmap)))
    assert (out / "node_dict.txt").read_text().split() == [x for i in range(5, -1, -1) for x in (f"e{i}", str(5 - i))]
    assert (out / "rel_dict.txt").read_text().split() == ["r1", "0", "r0", "1"]
    with pytest.raises(DataError, match="entity map"):
        train(cfg(data, tmp_path / "nomap", entity_map=str(tmp_path / "missing.txt")))


def test_log_lines_report_each_epoch_and_the_setup(data, tmp_path, logs):
    train(cfg(data, tmp_path / "log", epochs=2, valid=str(data / "valid.txt"), loss_impl="fused"))
    hist = read(tmp_path / "log" / "training_history.json")
    text = logs()
    for h in hist:
        assert any(
            t.startswith(f"epoch {h['epoch']}: loss {h['loss']:.5f} valid MRR {h['valid']['mrr']:.4f} (") for t in text
        ), text
    assert any(
        t.startswith("ConvE: 6 entities, 2 relations, 10 train triples, 16 samples (kvsall)")
        and t.endswith("loss fused")
        for t in text
    ), text


@pytest.mark.parametrize("mode", ["kvsall", "1vsall"])
def test_a_run_without_reciprocal_relations_trains_on_the_forward_samples_only(data, tmp_path, mode):
    """reciprocal=False: R relation rows, the samples of the triples as written (no (t, r⁻¹, h)),
    and with rate 0 each epoch's loss is their dense loss (float64, labels written out)."""
    out = tmp_path / "fwd"
    train(
        cfg(
            data,
            out,
            epochs=2,
            learning_rate=0.0,
            training_mode=mode,
            label_smoothing=0.1,
            model=dict(TINY, reciprocal=False),
        )
    )
    gr = groups(TRIPLES, mode, reciprocal=False)
    model = initial_model(reciprocal=False)
    assert model.relation.weight.shape[0] == R
    expected = dense_loss(model, gr, 0.1)
    assert [h["loss"] for h in read(out / "training_history.json")] == pytest.approx([expected, expected], rel=1e-5)
    assert read(out / "config.json")["sizes"]["training_samples"] == len(gr)
    assert load(out / "final_model.pt")["model"]["relation.weight"].shape[0] == R


def test_validation_of_a_run_without_reciprocal_relations_filters_forward_triples(data, tmp_path):
    """reciprocal=False: validation ranks tails only, filtered by the train/valid/test triples as
    written; reciprocal rows (t, r+R, h) in that filter would collide with the keys of (t+1, r)."""
    out = tmp_path / "fwdval"
    train(
        cfg(
            data,
            out,
            epochs=1,
            valid=str(data / "valid.txt"),
            test=str(data / "test.txt"),
            model=dict(TINY, reciprocal=False),
        )
    )
    expected = brute_mrr(load(out / "final_model.pt")["model"], VALID, TRIPLES + VALID + TEST, reciprocal=False)
    assert read(out / "training_history.json")[-1]["valid"]["mrr"] == pytest.approx(expected, rel=1e-6)
