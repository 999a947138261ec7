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
    # the run's files, each once: the test file ranked is the run's own
    assert doc["filter"] == [str(data / f"{n}.txt") for n in ("train", "valid", "test")]
    assert doc["unseen"]["policy"] == "include"


def _known(*splits):
    """Known answers of every (head, relation) query, with the reversals: the brute force's filter."""
    known: dict = {}
    for h, r, t in (x for split in splits for x in split):
        known.setdefault((ENT[h], REL[r]), set()).add(ENT[t])
        known.setdefault((ENT[t], REL[r] + R), set()).add(ENT[h])
    return known


EXTRA = [("e5", "r0", "e0"), ("e5", "r0", "e1"), ("e1", "r1", "e0"), ("e0", "r1", "e4")]  # true, in no split


def test_filter_files_add_to_the_runs_train_valid_and_test_and_the_folder_can_be_chosen(run, data, tmp_path):
    from tests.conftest import run_cli
    from tests.kg.tiny_graph import write_triples

    extra = write_triples(tmp_path / "extra.txt", EXTRA)
    out = tmp_path / "elsewhere"
    res = run_cli(["evaluate", "--model-dir", run, "--filter", extra, "-o", out, "--top-k", "0", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    model = load_model(run / "best_model.pt").model.eval()
    queries = [(ENT[h], REL[r], ENT[t]) for h, r, t in TEST] + [(ENT[t], REL[r] + R, ENT[h]) for h, r, t in TEST]
    want = by_hand(model, queries, _known(TRIPLES, VALID, TEST, EXTRA))
    with open(out / "ranks.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(float(r["rank_optimistic"]), float(r["rank_pessimistic"])) for r in rows] == [w[:2] for w in want]
    # the filter files alone (what replacing the run's filter would rank) give other ranks here
    assert [w[:2] for w in by_hand(model, queries, _known(TEST, EXTRA))] != [w[:2] for w in want]
    doc = json.loads((out / "evaluation.json").read_text())
    rr = [1 / ((o + p) / 2) for o, p, _, _ in want]
    assert doc["metrics"]["both"]["mrr"] == pytest.approx(np.mean(rr))
    assert all(r["top_predictions"] == "" for r in rows)  # top-k 0: none listed


def test_evaluation_json_and_test_results_json_share_one_layout(run, data, tmp_path):
    """Training's test metrics and ``evaluate``'s of the same model, test file and filter: one layout,
    the same values, the metrics nested under ``metrics``, each filter file named once."""
    evaluate_files(run, data / "test.txt", [], tmp_path / "ev", 0, 256, 65536, "cpu")
    ev = json.loads((tmp_path / "ev" / "evaluation.json").read_text())
    tr = json.loads((run / "test_results.json").read_text())
    assert set(ev) == set(tr) == {"metrics", "checkpoint", "test", "filter", "unseen"}
    assert set(tr["metrics"]) == {"tail", "head", "both"} == set(ev["metrics"])
    assert tr["metrics"]["both"]["mrr"] == pytest.approx(ev["metrics"]["both"]["mrr"], rel=1e-6)
    assert tr["checkpoint"] == ev["checkpoint"] == str(run / "best_model.pt")
    assert tr["test"] == ev["test"] == str(data / "test.txt")
    assert tr["filter"] == ev["filter"] == [str(data / f"{n}.txt") for n in ("train", "valid", "test")]
    assert tr["unseen"]["policy"] == ev["unseen"]["policy"] == "include"


def test_label_triples_are_evaluated_like_a_file(run, data):
    store = RunStore(run)
    a = evaluate_store(store, data / "test.txt", top_k=0)
    b = evaluate_store(store, TEST, top_k=0)
    assert a.ranks.equals(b.ranks) and a.metrics == b.metrics and b.unseen is None
    assert a.checkpoint == run / "best_model.pt"
    assert repr(a).startswith(f"Evaluation(MRR {a.metrics['both']['mrr']:.4f}, Hits@1 ")
    assert repr(a).endswith(f"{len(TEST) * 2} ranks)")


def test_a_filter_holding_every_other_answer_ranks_each_answer_first(run, data, tmp_path):
    """A filter file naming, for each test query, every other entity as a true answer leaves only the
    answer to rank: rank 1 whatever the model scores, but only if the given files are the filter."""
    lines = []
    for h, r, t in TEST:
        lines += [f"{h}\t{r}\t{x}" for x in ENT if x != t] + [f"{x}\t{r}\t{t}" for x in ENT if x != h]
    f = tmp_path / "everything.txt"
    f.write_text("\n".join(lines) + "\n")
    summary = evaluate_files(RunStore(run), data / "test.txt", [f], tmp_path / "ev", 0, 256, 65536, "cpu")
    assert summary["metrics"]["both"]["mrr"] == 1.0
    ev = evaluate_store(RunStore(run), data / "test.txt", filter_triples=[f], top_k=0)
    assert ev.ranks["rank_pessimistic"].tolist() == [1] * 4


def test_an_evaluation_without_metrics_says_so():
    from tracegraph.kg.model.run_evaluation import Evaluation

    assert repr(Evaluation({}, None, None)) == "Evaluation(MRR nan, Hits@1 nan, Hits@10 nan, 0 ranks)"
    assert repr(Evaluation({"both": {"mrr": 0.5, "hits@1": 0.25, "hits@10": 1, "count": 4}}, None, None)) == (
        "Evaluation(MRR 0.5000, Hits@1 0.2500, Hits@10 1.0000, 4 ranks)"
    )


def test_a_run_without_data_files_warns_that_only_the_test_triples_filter(run, data, monkeypatch):
    from tests.conftest import log_lines

    store = RunStore(run)
    store.data_files = {}  # as an imported model has
    with log_lines() as seen:
        ev = evaluate_store(store, TEST, top_k=0)
    assert seen == [
        f"{run}: the run records no data files, so only the test triples are filtered (give the known true "
        "triples with --filter)"
    ]
    assert len(ev.ranks) == 4


@pytest.fixture(scope="module")
def unicode_run(tmp_path_factory):
    """A run whose id map holds 'zeta', which only its test file names, and a non-ASCII 'café'."""
    d = tmp_path_factory.mktemp("unicode")
    train_lines = ["a\tr\tb", "b\tr\tc", "c\tr\tcafé", "café\tr\ta", "a\ts\tc", "b\ts\tcafé"]
    (d / "train.txt").write_text("\n".join(train_lines) + "\n", encoding="utf-8")
    (d / "test.txt").write_text("a\tr\tcafé\nzeta\tr\tb\n", encoding="utf-8")
    train(cfg(d, d / "run", test=str(d / "test.txt"), unseen="include"))
    return d


def test_unseen_means_absent_from_the_training_file_with_or_without_filter_files(unicode_run):
    d = unicode_run
    store = RunStore(d / "run")
    assert "zeta" in store.entities.labels  # the id map knows it; the training file does not
    for filters in (None, [d / "train.txt"]):
        ev = evaluate_store(store, d / "test.txt", filter_triples=filters, top_k=0, unseen="drop")
        assert ev.unseen["policy"] == "drop" and set(ev.ranks["head"]) == {"a"}, filters
    ev = evaluate_store(store, d / "test.txt", top_k=0, unseen="include")
    assert set(ev.ranks["head"]) == {"a", "zeta"}


def test_top_answers_keep_non_ascii_names_and_four_decimals(unicode_run, tmp_path):
    d = unicode_run
    evaluate_files(d / "run", d / "test.txt", [], tmp_path / "ev", 3, 256, 65536, "cpu")
    text = (tmp_path / "ev" / "ranks.csv").read_text(encoding="utf-8")
    assert "café" in text and "\\u00e9" not in text
    with open(tmp_path / "ev" / "ranks.csv", newline="", encoding="utf-8") as f:
        tops = [json.loads(r["top_predictions"]) for r in csv.DictReader(f)]
    assert all(len(t) == 3 for t in tops)
    assert all(round(v, 4) == v and len(repr(v).split(".")[-1]) <= 4 for t in tops for _, v in t)


def test_the_unseen_policy_reaches_the_files(unicode_run, tmp_path):
    d = unicode_run
    summary = evaluate_files(d / "run", d / "test.txt", [], tmp_path / "ev", 0, 256, 65536, "cpu", unseen="drop")
    assert summary["unseen"]["policy"] == "drop"
    with open(tmp_path / "ev" / "ranks.csv", newline="", encoding="utf-8") as f:
        assert {r["head"] for r in csv.DictReader(f)} == {"a"}
    assert json.loads((tmp_path / "ev" / "evaluation.json").read_text())["unseen"]["policy"] == "drop"


def test_a_run_whose_training_file_is_gone_is_refused_until_one_is_given(data, tmp_path):
    import shutil

    from tracegraph.errors import DataError

    own = tmp_path / "data"
    shutil.copytree(data, own)
    train(cfg(own, tmp_path / "run", valid=str(own / "valid.txt"), test=str(own / "test.txt")))
    (own / "train.txt").unlink()  # filter files add to the run's: they cannot stand in for it
    with pytest.raises(DataError, match="the run's train file is missing"):
        evaluate_store(RunStore(tmp_path / "run"), own / "test.txt", filter_triples=[own / "valid.txt"], top_k=0)
    given = RunStore(tmp_path / "run", data_files={"train": data / "train.txt"})  # the same triples elsewhere
    ev = evaluate_store(given, own / "test.txt", top_k=0)
    assert len(ev.ranks) == 4 and given.data_files["train"] == data / "train.txt"
