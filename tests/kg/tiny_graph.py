"""A 10-triple graph and the float64 references the training-loop tests compare against: dense
BCE / CE with label matrices written out, brute-force filtered MRR, the run's files read back.

Fixtures built on it (``data``, ``logs``) live in ``tests/kg/conftest.py``."""

import json

import numpy as np
import torch

import tracegraph.kg.model.train as train_module
from tracegraph.kg.model.objective import TrainingObjective
from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.model.train import TrainConfig
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
VALID = [("e0", "r1", "e3"), ("e4", "r1", "e2")]
TEST = [("e1", "r1", "e4"), ("e5", "r0", "e2")]
ENT = {f"e{i}": i for i in range(6)}  # node_dict.txt numbers sorted labels
REL = {"r0": 0, "r1": 1}
R = 2


def write_triples(path, triples):
    path.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in triples))
    return str(path)


def cfg(data, out, **kw):
    base = dict(
        train=str(data / "train.txt"),
        output_dir=str(out),
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


def ids(triples):
    return [(ENT[h], REL[r], ENT[t]) for h, r, t in triples]


def groups(triples, mode, reciprocal=True):
    """Training samples (head, relation row) and their tails, from the triples (and their reciprocals)."""
    directions = [(h, r, t) for h, r, t in ids(triples)] + (
        [(t, r + R, h) for h, r, t in ids(triples)] if reciprocal else []
    )
    if mode == "1vsall":
        return [((h, r), [t]) for h, r, t in directions]
    tails: dict = {}
    for h, r, t in directions:
        tails.setdefault((h, r), []).append(t)
    return list(tails.items())


def dense_loss(model, gr, eps, loss="bce"):
    """Mean loss over the samples ``gr`` with the label matrix written out (float64)."""
    h = torch.tensor([g[0][0] for g in gr])
    r = torch.tensor([g[0][1] for g in gr])
    with torch.no_grad():
        s = model(h, r).double()
    N = s.shape[1]
    Y = torch.zeros_like(s)
    for i, (_, ts) in enumerate(gr):
        Y[i, ts] = 1.0
    if loss == "bce":
        Y = Y * (1 - eps) + eps / N
        return float((torch.log1p(torch.exp(s)) - Y * s).mean())
    P = Y / Y.sum(1, keepdim=True) * (1 - eps) + eps / N  # CE: the true tails share the mass
    return float(-(P * torch.log_softmax(s, 1)).sum(1).mean())


def initial_model(seed=3, **model):
    seed_everything(seed)
    return ConvE(ConvEConfig(num_entities=6, num_relations=2, **{**TINY, **model})).train()


def brute_mrr(weights, triples, known, reciprocal=True):
    """Filtered MRR of both sides (without reciprocal relations: of tails, filtered by the triples as
    written), ties counted as the mean of optimistic and pessimistic ranks."""
    m = ConvE(ConvEConfig(num_entities=6, num_relations=2, **dict(TINY, reciprocal=reciprocal)))
    m.load_state_dict(weights)
    m.eval()
    kt: dict = {}
    for h, r, t in ids(known):
        kt.setdefault((h, r), set()).add(t)
        if reciprocal:
            kt.setdefault((t, r + R), set()).add(h)
    rr = []
    for h, r, t in ids(triples):
        for q, rel, ans in ((h, r, t), (t, r + R, h))[: 2 if reciprocal else 1]:
            with torch.no_grad():
                s = m(torch.tensor([q]), torch.tensor([rel]))[0].double().numpy()
            s[[e for e in kt[(q, rel)] if e != ans]] = -np.inf
            g, e = int((s > s[ans]).sum()), int((s == s[ans]).sum()) - 1
            rr.append(1.0 / (1 + g + e / 2))
    return float(np.mean(rr))


def read(p):
    return json.loads(p.read_text())


def load(p):
    return torch.load(p, weights_only=True)


def adam_steps(ck) -> int:
    return int(max(float(st["step"]) for st in ck["optimizer"]["state"].values()))


def spy_batches(monkeypatch):
    """Record the (head, relation) rows of every training step, in the order the step saw them."""
    seen = []
    real = TrainingObjective.forward

    def spy(self, h, r, *a, **k):
        seen.append((h.clone(), r.clone()))
        return real(self, h, r, *a, **k)

    monkeypatch.setattr(TrainingObjective, "forward", spy)
    return seen


def rows_loss(model, h, r, tails, eps, loss="bce"):
    return dense_loss(model, [((int(a), int(b)), tails[(int(a), int(b))]) for a, b in zip(h, r)], eps, loss)


def scripted(monkeypatch, mrrs):
    plan = iter(mrrs)
    monkeypatch.setattr(train_module, "_evaluate", lambda *a, **k: ({"both": {"mrr": next(plan), "hits@10": 0.0}}, []))
