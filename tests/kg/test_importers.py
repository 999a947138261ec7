"""`tracegraph import pykeen|checkpoint`: imported models score exactly like the originals.

PyKEEN is in the ``dev`` extra, so these tests always run in CI (no importorskip).
"""

from __future__ import annotations

import argparse
import csv
import json

import numpy as np
import pytest
import torch
from torch import nn

from tests.conftest import run_cli, run_cli_error
from tests.kg.earlier_conve import earlier_checkpoint
from tracegraph.kg.model.model_io import load_model

ATOL = 1e-5


# --------------------------------------------------------------------------- PyKEEN


@pytest.fixture(scope="module")
def pykeen_run(umls_dir, tmp_path_factory):
    """A small PyKEEN ConvE trained for one epoch on UMLS (LCWA, inverse triples), saved as PyKEEN does."""
    from pykeen.models import ConvE as PKConvE
    from pykeen.training import LCWATrainingLoop
    from pykeen.triples import TriplesFactory

    d = tmp_path_factory.mktemp("pykeen")
    tf = TriplesFactory.from_path(umls_dir / "train.txt", create_inverse_triples=True)
    model = PKConvE(
        triples_factory=tf, embedding_dim=32, embedding_height=4, embedding_width=8, output_channels=4, random_seed=0
    )
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    LCWATrainingLoop(model=model, triples_factory=tf, optimizer=opt).train(
        triples_factory=tf, num_epochs=2, batch_size=256, use_tqdm=False, label_smoothing=0.1
    )
    model.eval()
    torch.save(model, d / "trained_model.pkl")  # what PipelineResult.save_model does
    torch.save(model.state_dict(), d / "state_dict.pt")
    tf.to_path_binary(d / "training_triples")
    return d, model, tf


def _pykeen_all_scores(model, num_entities, num_relation_rows):
    """PyKEEN's own score_t for every (head, internal relation row) -> [rows, N, N] (row, head, tail)."""
    h = torch.arange(num_entities)
    with torch.no_grad():
        return torch.stack(
            [model.score_t(torch.stack([h, torch.full_like(h, r)], 1)) for r in range(num_relation_rows)]
        )


def _ours_all_scores(model, num_entities, rows):
    h = torch.arange(num_entities)
    with torch.no_grad():
        return torch.stack([model.score_all(h, torch.full_like(h, r)) for r in rows])


def test_pykeen_pickled_model_scores_equal_score_t(pykeen_run, tmp_path):
    d, pk, tf = pykeen_run
    out = tmp_path / "imported"
    res = run_cli(
        [
            "import",
            "pykeen",
            d / "trained_model.pkl",
            "--triples-factory-dir",
            d / "training_triples",
            "--output-dir",
            out,
            "--trust-pickle",
            "--lr",
            "0.01",
            "--label-smoothing",
            "0.1",
        ]
    )
    assert res.exit_code == 0, res.output
    lm = load_model(out)
    c = lm.model.config
    R = tf.real_num_relations
    assert (c.reciprocal, c.entity_bias, c.concat_axis, c.embedding_height, c.embedding_width) == (
        True,
        True,
        "height",
        4,
        8,
    )
    assert lm.entities.labels == [lab for lab, _ in sorted(tf.entity_to_id.items(), key=lambda kv: kv[1])]
    assert lm.relations.labels == [lab for lab, _ in sorted(tf.relation_to_id.items(), key=lambda kv: kv[1])]
    assert lm.lr == pytest.approx(0.01)
    theirs = _pykeen_all_scores(pk, tf.num_entities, 2 * R)  # PyKEEN rows: r -> 2r, r⁻¹ -> 2r+1
    ours = _ours_all_scores(lm.model, tf.num_entities, [r // 2 + (R if r % 2 else 0) for r in range(2 * R)])
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)
    # PyKEEN's head prediction (through the inverse relation) equals ours through the reciprocal
    t = torch.arange(tf.num_entities)
    with torch.no_grad():
        for r in range(R):
            pk_h = pk.predict_h(torch.stack([torch.full_like(t, r), t], 1))
            torch.testing.assert_close(lm.model.score_all(t, torch.full_like(t, R + r)), pk_h, atol=ATOL, rtol=0)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["source"]["format"] == "pykeen" and cfg["train"]["label_smoothing"] == 0.1
    assert not any("base.pth" in n for n in cfg["source"]["notes"])  # inverse flag read from the factory
    assert (out / "train.txt").is_file() and (out / "best_model.pt").is_file()


def test_pykeen_pickle_refused_without_trust(pykeen_run, tmp_path):
    d, _, _ = pykeen_run
    run_cli_error(
        [
            "import",
            "pykeen",
            d / "trained_model.pkl",
            "--triples-factory-dir",
            d / "training_triples",
            "--output-dir",
            tmp_path / "x",
        ],
        tmp_path / "x",
        d,
        contains="--trust-pickle",
    )


def test_pykeen_state_dict_imports_safely(pykeen_run, tmp_path):
    d, pk, tf = pykeen_run
    R = tf.real_num_relations
    theirs = _pykeen_all_scores(pk, tf.num_entities, 2 * R)
    rows = [r // 2 + (R if r % 2 else 0) for r in range(2 * R)]
    # image shape inferred from the weights
    res = run_cli(
        [
            "import",
            "pykeen",
            d / "state_dict.pt",
            "--triples-factory-dir",
            d / "training_triples",
            "--output-dir",
            tmp_path / "a",
        ]
    )
    assert res.exit_code == 0, res.output
    assert "lr set to 1.0" in res.output
    lm = load_model(tmp_path / "a")
    assert lm.lr == 1.0
    torch.testing.assert_close(_ours_all_scores(lm.model, tf.num_entities, rows), theirs, atol=ATOL, rtol=0)
    # hyper-parameters from a JSON (pipeline-config style nesting), id maps as node_dict/rel_dict files
    hp = tmp_path / "hp.json"
    hp.write_text(
        json.dumps(
            {
                "pipeline": {
                    "model_kwargs": {
                        "embedding_height": 4,
                        "embedding_width": 8,
                        "input_dropout": 0.2,
                        "feature_map_dropout": 0.2,
                        "output_dropout": 0.3,
                    },
                    "optimizer_kwargs": {"lr": 0.01},
                }
            }
        )
    )
    lm0 = load_model(tmp_path / "a")
    res = run_cli(
        [
            "import",
            "pykeen",
            d / "state_dict.pt",
            "--entity-to-id",
            tmp_path / "a" / "node_dict.txt",
            "--relation-to-id",
            tmp_path / "a" / "rel_dict.txt",
            "--hyperparameters",
            hp,
            "--output-dir",
            tmp_path / "b",
        ]
    )
    assert res.exit_code == 0, res.output
    lm = load_model(tmp_path / "b")
    assert lm.lr == pytest.approx(0.01) and lm0.relations == lm.relations
    torch.testing.assert_close(_ours_all_scores(lm.model, tf.num_entities, rows), theirs, atol=ATOL, rtol=0)


def test_pykeen_without_inverse_triples(umls_dir, tmp_path):
    from pykeen.models import ConvE as PKConvE
    from pykeen.triples import TriplesFactory

    tf = TriplesFactory.from_path(umls_dir / "train.txt", create_inverse_triples=False)
    pk = PKConvE(
        triples_factory=tf,
        embedding_dim=12,
        embedding_height=3,
        embedding_width=4,
        output_channels=2,
        kernel_width=2,
        kernel_height=2,
        random_seed=1,
    )
    with torch.no_grad():  # non-trivial BatchNorm statistics and bias
        for m in pk.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.normal_()
                m.running_var.uniform_(0.5, 2.0)
        pk.entity_representations[1]._embeddings.weight.normal_()
    pk.eval()
    torch.save(pk.state_dict(), tmp_path / "sd.pt")
    tf.to_path_binary(tmp_path / "tt")
    args = [
        "import",
        "pykeen",
        tmp_path / "sd.pt",
        "--triples-factory-dir",
        tmp_path / "tt",
        "--output-dir",
        tmp_path / "m",
    ]
    res = run_cli(args)  # d=12 with a 2×2 kernel: 3×4 and 4×3 images both fit the weights
    assert res.exit_code == 2 and "--hyperparameters" in res.output
    (tmp_path / "hp.json").write_text(json.dumps({"embedding_height": 3, "embedding_width": 4}))
    res = run_cli(args + ["--hyperparameters", tmp_path / "hp.json"])
    assert res.exit_code == 0, res.output
    lm = load_model(tmp_path / "m")
    assert not lm.model.config.reciprocal and lm.model.config.kernel_size == 2
    R = tf.num_relations
    theirs = _pykeen_all_scores(pk, tf.num_entities, R)
    torch.testing.assert_close(_ours_all_scores(lm.model, tf.num_entities, range(R)), theirs, atol=ATOL, rtol=0)


def test_evaluate_and_predict_on_imported_pykeen(pykeen_run, tmp_path, umls_dir):
    d, _, _ = pykeen_run
    out = tmp_path / "imported"
    assert (
        run_cli(
            [
                "import",
                "pykeen",
                d / "trained_model.pkl",
                "--triples-factory-dir",
                d / "training_triples",
                "--output-dir",
                out,
                "--trust-pickle",
            ]
        ).exit_code
        == 0
    )
    res = run_cli(
        [
            "evaluate",
            "--model-dir",
            out,
            "--test",
            umls_dir / "test.txt",
            "--output-dir",
            tmp_path / "ev",
            "--device",
            "cpu",
        ]
    )
    assert res.exit_code == 0, res.output
    ev = json.loads((tmp_path / "ev" / "evaluation.json").read_text())
    assert 0.0 < ev["metrics"]["both"]["mrr"] <= 1.0
    h, r, _ = (umls_dir / "test.txt").read_text().splitlines()[0].split("\t")
    res = run_cli(["predict", "--model-dir", out, "--query", h, r, "--top-k", "3", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert len([ln for ln in res.output.splitlines() if ln.strip()]) >= 3


# --------------------------------------------------------------------------- earlier format


@pytest.mark.parametrize("reciprocal", [False, True])
def test_earlier_checkpoint_scores_equal_reference(tmp_path, reciprocal):
    n_ent, n_rel = 40, 6
    ref, f = earlier_checkpoint(tmp_path, n_ent, n_rel, rows=2 * n_rel if reciprocal else None)
    out = tmp_path / "imported"
    res = run_cli(
        [
            "import",
            "checkpoint",
            f,
            "--entity-to-id",
            tmp_path / "node_dict.txt",
            "--relation-to-id",
            tmp_path / "rel_dict.txt",
            "--output-dir",
            out,
        ]
    )
    assert res.exit_code == 0, res.output
    lm = load_model(out)
    c = lm.model.config
    assert (c.concat_axis, c.entity_bias, c.reciprocal) == ("width", False, reciprocal)
    assert lm.lr == pytest.approx(0.003) and lm.epoch == 7
    h = torch.arange(n_ent)
    with torch.no_grad():
        for r in range(c.num_relation_rows):
            rr = torch.full_like(h, r)
            torch.testing.assert_close(lm.model.score_all(h, rr), ref(h, rr), atol=ATOL, rtol=0)


def test_earlier_checkpoint_never_unpickles_without_trust(tmp_path):
    ref, _ = earlier_checkpoint(tmp_path)
    f = tmp_path / "pickled.pt"
    torch.save(
        {
            "model_state_dict": ref.state_dict(),
            "model_config": {
                "num_entities": 40,
                "num_relations": 6,
                "embedding_dim": 24,
                "embedding_height": 4,
                "embedding_width": 6,
            },
            "args": argparse.Namespace(seed=1),
        },
        f,
    )
    args = [
        "import",
        "checkpoint",
        f,
        "--entity-to-id",
        tmp_path / "node_dict.txt",
        "--relation-to-id",
        tmp_path / "rel_dict.txt",
        "--output-dir",
        tmp_path / "o",
    ]
    run_cli_error(args, tmp_path / "o", f, contains="--trust-pickle")
    res = run_cli(args + ["--trust-pickle"])
    assert res.exit_code == 0, res.output
    assert "lr set to 1.0" in res.output


def test_import_help_mentions_trust_pickle():
    for sub in ("pykeen", "checkpoint"):
        res = run_cli(["import", sub, "--help"])
        assert res.exit_code == 0 and "--trust-pickle" in res.output


# --------------------------------------------------------------------------- explain on an imported model


def _scores(csv_dir):
    out = {}
    for p in sorted(csv_dir.glob("*_tracin.csv")):
        with open(p, newline="") as f:
            for row in csv.DictReader(f):
                out[(p.name, row["TrainHead"], row["TrainRel"], row["TrainTail"])] = float(row["TracInScore"])
    return out


def test_explain_exact_equals_autograd_on_imported(pykeen_run, tmp_path, umls_dir):
    d, _, _ = pykeen_run
    out = tmp_path / "imported"
    assert (
        run_cli(
            [
                "import",
                "pykeen",
                d / "trained_model.pkl",
                "--triples-factory-dir",
                d / "training_triples",
                "--output-dir",
                out,
                "--trust-pickle",
                "--lr",
                "0.01",
                "--label-smoothing",
                "0.1",
            ]
        ).exit_code
        == 0
    )
    train = tmp_path / "train_small.txt"
    train.write_text("\n".join((umls_dir / "train.txt").read_text().splitlines()[:60]) + "\n")
    test = tmp_path / "test_small.txt"
    test.write_text("\n".join((umls_dir / "test.txt").read_text().splitlines()[:2]) + "\n")
    res = {}
    for method in ("exact", "autograd"):
        r = run_cli(
            [
                "explain",
                "--model-dir",
                out,
                "--train",
                train,
                "--test-triples",
                test,
                "--output-dir",
                tmp_path / method,
                "--method",
                method,
                "--device",
                "cpu",
            ]
        )
        assert r.exit_code == 0, r.output
        res[method] = _scores(tmp_path / method)
    assert res["exact"].keys() == res["autograd"].keys() and len(res["exact"]) == 2 * 60
    a = np.array([res["autograd"][k] for k in sorted(res["autograd"])])
    e = np.array([res["exact"][k] for k in sorted(res["autograd"])])
    np.testing.assert_allclose(e, a, rtol=1e-4, atol=1e-4 * np.abs(a).max())
