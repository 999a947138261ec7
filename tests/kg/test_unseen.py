"""--unseen include|drop|error: valid/test entities that never occur in train."""

import csv
import json

import numpy as np
import pytest

from tests.conftest import run_cli, run_cli_error
from tests.kg.references import TINY, brute_force_ranks
from tracegraph.kg import load_model
from tracegraph.kg.model.train import TrainConfig, train
from tracegraph.kg.data.idmap import IdMap
from tracegraph.kg.data.triples import LabeledTriples
from tracegraph.kg.data.unseen import apply_policy

TRAIN = "".join(f"e{i}\tr{i % 3}\te{(i * 7 + 1) % 12}\n" for i in range(12))
VALID = "e1\tr0\te5\nnew1\tr1\te2\n"
TEST = "e2\tr1\te3\ne4\tr2\tnew2\nnew1\tr0\tnew2\ne5\tr0\te9\n"  # rows 2 and 3 (1-based) mention unseen ones


@pytest.fixture
def files(tmp_path):
    for name, text in (("train", TRAIN), ("valid", VALID), ("test", TEST)):
        (tmp_path / f"{name}.txt").write_text(text)
    return {k: tmp_path / f"{k}.txt" for k in ("train", "valid", "test")}


def _train(files, out, policy, epochs=2):
    cfg = TrainConfig(
        train=str(files["train"]),
        valid=str(files["valid"]),
        test=str(files["test"]),
        output_dir=str(out),
        epochs=epochs,
        batch_size=8,
        unseen=policy,
        model=dict(TINY),
    )
    return train(cfg)


def test_policy_counts_and_map_extension_by_hand():
    base = IdMap.from_labels(["a", "b", "c"])
    test = LabeledTriples(["a", "x", "b"], ["r", "r", "r"], ["b", "y", "x"], np.array([1, 2, 3]), "t.txt")
    ents, splits, rep = apply_policy(base, {"test": test}, "include")
    assert ents.labels == ["a", "b", "c", "x", "y"]  # train ids first and unchanged
    assert rep.entities == ["x", "y"] and rep.triples == {"test": 2} and len(splits["test"]) == 3
    ents, splits, rep = apply_policy(base, {"test": test}, "drop")
    assert ents == base and splits["test"].heads == ["a"] and splits["test"].lines.tolist() == [1]


@pytest.mark.slow
def test_include_ranks_unseen_entities_among_all(files, tmp_path):
    out = tmp_path / "run"
    _train(files, out, "include")
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["unseen"]["entities"] == 2 and cfg["unseen"]["triples"] == {"valid": 1, "test": 2}
    assert cfg["sizes"]["test_triples"] == 4
    lm = load_model(out)
    assert lm.entities.labels[-2:] == ["new1", "new2"]  # appended after the 12 training entities
    res = run_cli(["evaluate", "--model-dir", out, "--test", files["test"], "-o", tmp_path / "ev"])
    assert res.exit_code == 0, res.output
    ev = json.loads((tmp_path / "ev" / "evaluation.json").read_text())
    assert ev["unseen"]["entities"] == 2 and ev["metrics"]["tail"]["count"] == 4
    # the independent reference: score every entity, drop the other known tails, count by hand
    enc = lambda p: np.array(
        [
            [lm.entities.id(h), lm.relations.id(r), lm.entities.id(t)]  # noqa: E731
            for h, r, t in (ln.split("\t") for ln in p.read_text().splitlines())
        ]
    )
    test_ids = enc(files["test"])
    known = np.concatenate([enc(files["train"]), enc(files["valid"]), test_ids])
    ref = brute_force_ranks(lm.model, test_ids, known).mean(axis=1)
    with open(tmp_path / "ev" / "ranks.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["side"] == "tail"]
    assert [float(r["rank"]) for r in rows] == pytest.approx(ref.tolist())
    top = json.loads(rows[2]["top_predictions"])  # JSON pairs: ids with ':' stay whole
    assert len(top) == 10 and all(isinstance(e, str) and isinstance(s, float) for e, s in top)


@pytest.mark.slow
def test_drop_removes_and_counts(files, tmp_path):
    out = tmp_path / "run"
    _train(files, out, "drop", epochs=1)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["unseen"]["dropped"] and cfg["unseen"]["triples"] == {"valid": 1, "test": 2}
    assert cfg["sizes"]["valid_triples"] == 1 and cfg["sizes"]["test_triples"] == 2
    assert json.loads((out / "test_results.json").read_text())["metrics"]["tail"]["count"] == 2
    assert len(load_model(out).entities) == 12
    res = run_cli(["evaluate", "--model-dir", out, "--test", files["test"], "--unseen", "drop", "-o", tmp_path / "ev"])
    assert res.exit_code == 0, res.output
    ev = json.loads((tmp_path / "ev" / "evaluation.json").read_text())
    assert ev["metrics"]["tail"]["count"] == 2 and ev["unseen"]["triples"] == {"test": 2}
    # include cannot rank an entity this model has no row for: a clear refusal, nothing written
    run_cli_error(
        ["evaluate", "--model-dir", out, "--test", files["test"], "-o", tmp_path / "ev2"],
        tmp_path / "ev2",
        contains=f"{files['test']}:2: entity 'new2' is not in the model's id map",
    )


def test_error_keeps_todays_message_and_writes_nothing(files, tmp_path):
    out = tmp_path / "run"
    run_cli_error(
        [
            "train",
            "--train",
            files["train"],
            "--valid",
            files["valid"],
            "--test",
            files["test"],
            "--unseen",
            "error",
            "-o",
            out,
            "--epochs",
            "1",
        ],
        out,
        tmp_path,
        contains=f"{files['valid']}:2: entity 'new1' is not in the id map",
    )
    run_cli_error(
        ["train", "--train", files["train"], "--unseen", "sometimes", "-o", out],
        out,
        contains="--unseen must be one of include, drop, error",
    )
