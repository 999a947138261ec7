"""``tracegraph evaluate``'s files (kg/model/run_evaluation.py) on a run of the 10-triple graph,
against ranks counted by hand: ``ranks.csv`` row by row (tail side, then head side through the
inverse relation; realistic, optimistic and pessimistic ranks; the answer's score; the filtered top
answers), ``evaluation.json`` (metrics, checkpoint, filter files), and where they go.

Reference: every entity scored for each query with the model's own scoring, the other known answers
(train, valid and test, with their reversals) removed, and greater/equal scores counted in a loop.
"""

import csv
import json

import numpy as np
import pytest
import torch

from tests.kg.tiny_graph import ENT, REL, TEST, TRIPLES, VALID, R, cfg
from tracegraph.kg.model.model_io import load_model
from tracegraph.kg.model.run_evaluation import RANKS_COLUMNS, evaluate_files, evaluate_store
from tracegraph.kg.model.store import RunStore
from tracegraph.kg.model.train import train

LABEL = {i: e for e, i in ENT.items()}


@pytest.fixture(scope="module")
def run(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("evaluation") / "run"
    train(cfg(data, out, epochs=3, valid=str(data / "valid.txt"), test=str(data / "test.txt")))
    return out


def by_hand(model, queries, known):
    """(optimistic, pessimistic, score, [(label, score) of the two best filtered answers]) per (h, r, answer)."""
    out = []
    with torch.no_grad():
        for h, r, a in queries:
            s = model.score_all(torch.tensor([h]), torch.tensor([r]))[0].double().numpy()
            s[[e for e in known.get((h, r), ()) if e != a]] = -np.inf
            greater, equal = int((s > s[a]).sum()), int((s == s[a]).sum()) - 1
            top = sorted(range(len(s)), key=lambda e: -s[e])[:2]
            out.append((1 + greater, 1 + greater + equal, s[a], [(LABEL[e], s[e]) for e in top]))
    return out


def test_ranks_csv_and_evaluation_json_against_ranks_counted_by_hand(run, data):
    summary = evaluate_files(run, data / "test.txt", [], None, 2, 256, 65536, "cpu")
    out = run / "evaluation"
    assert summary["output_dir"] == str(out)
    model = load_model(run / "best_model.pt").model.eval()
    known: dict = {}
    for h, r, t in TRIPLES + VALID + TEST:
        known.setdefault((ENT[h], REL[r]), set()).add(ENT[t])
        known.setdefault((ENT[t], REL[r] + R), set()).add(ENT[h])
    tail_q = [(ENT[h], REL[r], ENT[t]) for h, r, t in TEST]
    head_q = [(ENT[t], REL[r] + R, ENT[h]) for h, r, t in TEST]
    want = by_hand(model, tail_q, known) + by_hand(model, head_q, known)
    with open(out / "ranks.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == RANKS_COLUMNS
    assert [r[:4] for r in rows[1:]] == [[*t, "tail"] for t in map(list, TEST)] + [
        [*t, "head"] for t in map(list, TEST)
    ]
    for row, (opt, pes, score, top) in zip(rows[1:], want):
        assert (float(row[5]), float(row[6])) == (opt, pes) and float(row[4]) == (opt + pes) / 2
        assert row[7] == f"{score:.6f}" or abs(float(row[7]) - score) < 2e-6  # six decimals, float32 scores
        got_top = json.loads(row[8])
        assert [e for e, _ in got_top] == [e for e, _ in top]
        assert all(v == pytest.approx(round(s, 4), abs=1e-4) for (_, v), (_, s) in zip(got_top, top))
    doc = json.loads((out / "evaluation.json").read_text())
    rr = [1 / ((o + p) / 2) for o, p, _, _ in want]
    assert doc["metrics"]["both"]["mrr"] == pytest.approx(np.mean(rr))
    assert doc["metrics"]["tail"]["mrr"] == pytest.approx(np.mean(rr[:2]))
    assert doc["metrics"]["head"]["mrr"] == pytest.approx(np.mean(rr[2:]))
    assert doc["checkpoint"] == str(run / "best_model.pt") and doc["test"] == str(data / "test.txt")
    assert sorted(doc["filter"][:-1]) == sorted(str(data / f"{n}.txt") for n in ("train", "valid", "test"))
    assert doc["filter"][-1] == str(data / "test.txt") and doc["unseen"]["policy"] == "include"


def test_given_filter_files_replace_the_runs_and_the_folder_can_be_chosen(run, data, tmp_path):
    out = tmp_path / "elsewhere"
    evaluate_files(run, data / "test.txt", [data / "train.txt"], out, 0, 1, 2, "cpu")
    doc = json.loads((out / "evaluation.json").read_text())
    assert doc["filter"] == [str(data / "train.txt"), str(data / "test.txt")]
    model = load_model(run / "best_model.pt").model.eval()
    known: dict = {}
    for h, r, t in TRIPLES + TEST:  # valid is no longer known
        known.setdefault((ENT[h], REL[r]), set()).add(ENT[t])
        known.setdefault((ENT[t], REL[r] + R), set()).add(ENT[h])
    want = by_hand(model, [(ENT[h], REL[r], ENT[t]) for h, r, t in TEST], known)
    with open(out / "ranks.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(float(r["rank_optimistic"]), float(r["rank_pessimistic"])) for r in rows[:2]] == [w[:2] for w in want]
    assert all(r["top_predictions"] == "" for r in rows)  # top-k 0: none listed


def test_label_triples_are_evaluated_like_a_file(run, data):
    store = RunStore(run)
    a = evaluate_store(store, data / "test.txt", top_k=0)
    b = evaluate_store(store, TEST, top_k=0)
    assert a.ranks.equals(b.ranks) and a.metrics == b.metrics and b.unseen is None
    assert a.checkpoint == run / "best_model.pt"
    assert repr(a).startswith(f"Evaluation(MRR {a.metrics['both']['mrr']:.4f}, Hits@1 ")
    assert repr(a).endswith(f"{len(TEST) * 2} ranks)")
