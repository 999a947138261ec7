"""Training behaviour that a seeded rerun cannot fake.

- The first epoch's recorded loss equals a dense float64 BCE written out here, with the label
  matrix built by hand for the chosen training mode and label smoothing (one batch holds every
  sample and dropout is off, so that loss is the loss at the initial weights).
- ``--resume`` is a continuation: it keeps the interrupted run's history records, carries the
  optimizer's step count on, and starts from the checkpoint's weights (a perturbed checkpoint
  ends elsewhere than a fresh run).
- ``best_model.pt`` is the epoch with the best validation MRR, not the last one.
"""

import json

import pytest
import torch

import tracegraph.kg.model.train as train_module
from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.model.train import TrainConfig, train
from tracegraph.runtime.seeding import seed_everything

TINY = dict(
    embedding_dim=6,
    embedding_height=2,
    embedding_width=3,
    output_channels=2,
    kernel_size=2,
    input_dropout=0.0,
    feature_map_dropout=0.0,
    output_dropout=0.0,
)
# (e0, r0) and (e1, r0) have two tails each, so kvsall and 1vsall samples differ
TRIPLES = [
    ("e0", "r0", "e1"),
    ("e0", "r0", "e2"),
    ("e1", "r0", "e3"),
    ("e1", "r0", "e4"),
    ("e2", "r1", "e0"),
    ("e3", "r1", "e5"),
    ("e4", "r0", "e5"),
    ("e5", "r1", "e1"),
    ("e2", "r0", "e3"),
    ("e3", "r0", "e4"),
]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("kgtiny")
    (d / "train.txt").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in TRIPLES))
    (d / "valid.txt").write_text("e0\tr1\te3\ne4\tr1\te2\n")
    return d


def cfg(data, out, **kw):
    base = dict(
        train=str(data / "train.txt"),
        output_dir=str(out),
        valid=None,
        test=None,
        epochs=1,
        batch_size=1000,
        learning_rate=0.01,
        checkpoint_every=1,
        device="cpu",
        seed=3,
        model=dict(TINY),
    )
    base.update(kw)
    return TrainConfig(**base)


def dense_targets(mode: str, smoothing: float):
    """Samples (head, relation) and their label rows, from the triples and their reciprocals."""
    # ids as node_dict.txt / rel_dict.txt number them: sorted labels
    ent = {e: i for i, e in enumerate(sorted({x for h, _, t in TRIPLES for x in (h, t)}))}
    rel = {r: i for i, r in enumerate(sorted({r for _, r, _ in TRIPLES}))}
    R, N = len(rel), len(ent)
    directions = [(ent[h], rel[r], ent[t]) for h, r, t in TRIPLES] + [
        (ent[t], rel[r] + R, ent[h]) for h, r, t in TRIPLES
    ]
    if mode == "1vsall":
        groups = [((h, r), [t]) for h, r, t in directions]
    else:
        tails: dict = {}
        for h, r, t in directions:
            tails.setdefault((h, r), []).append(t)
        groups = list(tails.items())
    heads = torch.tensor([g[0][0] for g in groups])
    rels = torch.tensor([g[0][1] for g in groups])
    Y = torch.full((len(groups), N), smoothing / N, dtype=torch.float64)
    for i, (_, ts) in enumerate(groups):
        Y[i, ts] += 1 - smoothing
    return heads, rels, Y


@pytest.mark.parametrize("mode", ["kvsall", "1vsall"])
@pytest.mark.parametrize("smoothing", [0.0, 0.4])
def test_first_epoch_loss_is_the_dense_bce_of_the_chosen_mode_and_smoothing(data, tmp_path, mode, smoothing):
    out = tmp_path / "run"
    train(cfg(data, out, training_mode=mode, label_smoothing=smoothing))
    run = json.loads((out / "config.json").read_text())
    heads, rels, Y = dense_targets(mode, smoothing)
    assert run["sizes"]["training_samples"] == len(heads)
    # the initial model, as train() builds it: seed, then construct
    seed_everything(3)
    model = ConvE(ConvEConfig.from_dict(run["model"])).train()
    with torch.no_grad():
        s = model.score_all(heads, rels).double()
    expected = float((torch.log1p(torch.exp(s)) - Y * s).mean())  # BCE with logits, mean over B×N
    recorded = json.loads((out / "training_history.json").read_text())[0]["loss"]
    assert recorded == pytest.approx(expected, rel=1e-5)


def test_the_two_modes_and_smoothings_give_different_reference_losses():
    """The test above can tell each wrong setting apart: the references differ."""
    seed_everything(0)
    m = ConvE(ConvEConfig(num_entities=6, num_relations=2, **TINY)).train()
    vals = set()
    for mode in ("kvsall", "1vsall"):
        for eps in (0.0, 0.4):
            h, r, Y = dense_targets(mode, eps)
            with torch.no_grad():
                s = m.score_all(h, r).double()
            vals.add(round(float((torch.log1p(torch.exp(s)) - Y * s).mean()), 6))
    assert len(vals) == 4


def _adam_steps(ckpt) -> int:
    return int(max(float(st["step"]) for st in ckpt["optimizer"]["state"].values()))


def test_resume_continues_history_optimizer_and_weights_of_the_checkpoint(data, tmp_path):
    kw = dict(batch_size=4, valid=str(data / "valid.txt"))
    fresh = tmp_path / "fresh"
    train(cfg(data, fresh, epochs=4, **kw))
    part = tmp_path / "part"
    train(cfg(data, part, epochs=2, **kw))
    before = json.loads((part / "training_history.json").read_text())
    ck_path = part / "checkpoints" / "resume.pt"  # the full state of epoch 2: what --resume reads
    ck = torch.load(ck_path, weights_only=True)
    steps_per_epoch = _adam_steps(ck) // 2
    assert steps_per_epoch > 1
    # perturb what only a resume reads: weights, the optimizer's step count
    ck["model"]["entity.weight"] += 0.5
    for st in ck["optimizer"]["state"].values():
        st["step"] += 100
    torch.save(ck, ck_path)

    train(cfg(data, part, epochs=4, resume=True, **kw))
    after = json.loads((part / "training_history.json").read_text())
    assert [h["epoch"] for h in after] == [1, 2, 3, 4]
    assert after[:2] == before  # the interrupted run's records, timings included, not a rerun's
    assert _adam_steps(torch.load(part / "checkpoints" / "resume.pt", weights_only=True)) == 100 + 4 * steps_per_epoch
    a = torch.load(fresh / "final_model.pt", weights_only=True)["model"]["entity.weight"]
    b = torch.load(part / "final_model.pt", weights_only=True)["model"]["entity.weight"]
    assert (a - b).abs().max() > 0.1  # started from the perturbed weights


def test_best_model_is_the_epoch_with_the_best_valid_mrr(data, tmp_path, monkeypatch):
    planned = iter([0.2, 0.5, 0.3, 0.4])  # best at epoch 2, and not the last epoch

    def scripted_evaluate(ctx, model, triples, known, **kw):
        return {"both": {"mrr": next(planned), "hits@10": 0.0}}, []

    monkeypatch.setattr(train_module, "_evaluate", scripted_evaluate)
    out = tmp_path / "best"
    summary = train(cfg(data, out, epochs=4, batch_size=4, valid=str(data / "valid.txt")))
    assert summary["best_valid_mrr"] == 0.5
    best = torch.load(out / "best_model.pt", weights_only=True)
    assert best["epoch"] == 2
    epoch2 = torch.load(out / "checkpoints" / "epoch_0002.pt", weights_only=True)["model"]
    final = torch.load(out / "final_model.pt", weights_only=True)["model"]
    assert all(torch.equal(best["model"][k], epoch2[k]) for k in epoch2)
    assert not torch.equal(best["model"]["entity.weight"], final["entity.weight"])
