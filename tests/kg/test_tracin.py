"""TracIn: the exact factor engine against brute-force autograd, on a small model trained on UMLS."""

import csv
import json

import numpy as np
import pytest
import torch

from tests.conftest import run_cli
from tests.kg.references import TINY, assert_rel_close
from tracegraph.kg.model.model_io import list_epoch_checkpoints, load_model
from tracegraph.kg.explain.tracin.engine import InfluenceOptions, compute_influence
from tracegraph.kg.explain.tracin.explain import CSV_HEADER
from tracegraph.kg.model.train import TrainConfig, train
from tracegraph.kg.data.triples import encode_triples, read_labeled_triples


@pytest.fixture(scope="module")
def trained(umls_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("tracin_run")
    # lr decay so the three checkpoints carry different learning rates
    train(
        TrainConfig(
            train=str(umls_dir / "train.txt"),
            output_dir=str(out),
            epochs=3,
            batch_size=256,
            lr_decay=0.5,
            checkpoint_every=1,
            model=dict(TINY),
        )
    )
    lm = load_model(out)
    ids = encode_triples(read_labeled_triples(umls_dir / "train.txt"), lm.entities, lm.relations)
    rng = np.random.default_rng(0)
    train_ids = ids[rng.choice(len(ids), 120, replace=False)]
    test_ids = encode_triples(read_labeled_triples(umls_dir / "test.txt"), lm.entities, lm.relations)[:4]
    # a test triple sharing its head with a training triple (tied-embedding cross terms), and one
    # whose tail is a training triple's head (reciprocal direction's head)
    test_ids = np.concatenate(
        [
            test_ids,
            [[train_ids[0, 0], train_ids[5, 1], train_ids[7, 2]]],
            [[train_ids[9, 2], train_ids[9, 1], train_ids[3, 0]]],
        ]
    )
    assert (test_ids[:, 0][:, None] == train_ids[:, 0][None, :]).any(1).sum() >= 1
    return out, train_ids, test_ids


def influence(out, train_ids, test_ids, ckpts, **kw):
    opts = InfluenceOptions(label_smoothing=0.1, batch_size=50, test_batch_size=4, **kw)
    return compute_influence(ckpts, train_ids, test_ids, opts, torch.device("cpu"))


@pytest.mark.parametrize("loss", ["train-loss", "score", "logit"])
@pytest.mark.parametrize("layers", ["all", "last:2", "last:5", "fc.weight,relation.weight,conv.weight"])
@pytest.mark.parametrize("n_ckpt", [1, 3])
def test_exact_equals_autograd(trained, loss, layers, n_ckpt):
    out, train_ids, test_ids = trained
    ckpts = list_epoch_checkpoints(out)[-n_ckpt:]
    assert len(ckpts) == n_ckpt
    ex = influence(out, train_ids, test_ids, ckpts, engine="exact", loss=loss, layers=layers)
    ref = influence(out, train_ids, test_ids, ckpts, engine="autograd", loss=loss, layers=layers)
    assert_rel_close(ex.scores, ref.scores)
    assert_rel_close(ex.train_self, ref.train_self)
    assert_rel_close(ex.test_self, ref.test_self)
    if n_ckpt == 3:
        assert len({c.lr for c in ex.checkpoints}) == 3  # η_k really differ and are used


def test_vmap_equals_autograd(trained):
    out, train_ids, test_ids = trained
    ckpts = list_epoch_checkpoints(out)
    for loss in ("train-loss", "score"):
        v = influence(out, train_ids[:40], test_ids, ckpts, engine="vmap", loss=loss)
        ref = influence(out, train_ids[:40], test_ids, ckpts, engine="autograd", loss=loss)
        assert_rel_close(v.scores, ref.scores, 1e-5)


def test_memmap_path_equals_in_memory(trained, tmp_path):
    out, train_ids, test_ids = trained
    ckpts = list_epoch_checkpoints(out)[-1:]
    a = influence(out, train_ids, test_ids, ckpts)
    b = influence(out, train_ids, test_ids, ckpts, memory_budget_bytes=0, scratch_dir=str(tmp_path))
    assert isinstance(b.scores, np.memmap)
    assert_rel_close(b.scores, a.scores, 1e-6)


def label_files(trained, tmp_path, n_test: int):
    """The fixture's training rows and its first ``n_test`` test triples as label files."""
    out, train_ids, test_ids = trained
    lm = load_model(out)
    E, R = lm.entities.labels, lm.relations.labels
    lines = lambda ids: "".join(f"{E[h]}\t{R[r]}\t{E[t]}\n" for h, r, t in ids)
    train_f, test_f = tmp_path / "train.txt", tmp_path / "test.txt"
    train_f.write_text(lines(train_ids))
    test_f.write_text(lines(test_ids[:n_test]))
    return E, R, train_f, test_f


@pytest.mark.slow
def test_cli_explain_rankings_match_reference(trained, umls_dir, tmp_path):
    out, train_ids, test_ids = trained
    E, R, train_f, test_f = label_files(trained, tmp_path, 2)
    test_f.write_text(test_f.read_text() + "nope\tisa\tsteroid\n")
    names = tmp_path / "names.txt"
    names.write_text("".join(f"Name of {lab}\t{i}\n" for i, lab in enumerate(E)))
    o = tmp_path / "explain"
    res = run_cli(
        [
            "explain",
            "--model-dir",
            out,
            "--train",
            train_f,
            "--test-triples",
            test_f,
            "-o",
            o,
            "--top-k",
            "5",
            "--node-name-dict",
            names,
            "--batch-size",
            "33",
            "--method",
            "tracin",
            "--loss",
            "score",
            "--skip-unresolved",
        ]
    )
    assert res.exit_code == 0, res.stderr
    summary = json.loads((o / "summary.json").read_text())
    assert summary["explained"] == 2 and summary["failed"] == 0
    assert "nope" in summary["unresolved"][0]["reason"] and summary["unresolved"][0]["line"] == 3
    # the score convention, two flags away: tracin with the score convention (docs/explaining.md)
    ref = influence(out, train_ids, test_ids[:2], list_epoch_checkpoints(out), engine="autograd", loss="score")
    for j in range(2):
        name = f"triple_{j:03d}_{E[test_ids[j, 0]]}_{E[test_ids[j, 2]]}".replace(":", "_")
        with open(o / f"{name}_tracin.csv") as f:
            rows = list(csv.reader(f))
        assert rows[0] == CSV_HEADER + ["Role"]
        body = rows[1:]
        s = ref.scores[j]
        pro = [i for i in np.argsort(-s, kind="stable") if s[i] > 0][:5]  # by hand: 5 positive, descending
        opp = [i for i in np.argsort(s, kind="stable") if s[i] < 0][:5]  # then 5 negative, ascending
        assert len(pro) == 5 and len(opp) == 5  # this triple has both (else the test would not test opponents)
        want = [tuple(E[x] if k != 1 else R[x] for k, x in enumerate(train_ids[i])) for i in pro + opp]
        got = [(r[6], r[8], r[10]) for r in body]
        assert got == want and [r[-1] for r in body] == ["proponent"] * 5 + ["opponent"] * 5
        assert body[0][7] == f"Name of {body[0][6]}"
        scores = [float(r[12]) for r in body]
        np.testing.assert_allclose(scores, s[pro + opp], rtol=1e-4)
        meta = json.loads((o / f"{name}_tracin.json").read_text())
        assert meta["method"] == "tracin" and meta["engine"] == "exact" and meta["loss"] == "score"
        assert len(meta["learning_rates"]) == 3 and len(meta["rows"]) == 10
    # --skip-existing leaves finished triples alone
    before = (o / "summary.json").read_bytes()
    res = run_cli(
        [
            "explain",
            "--model-dir",
            out,
            "--train",
            train_f,
            "--test-triples",
            test_f,
            "-o",
            o,
            "--skip-existing",
            "--skip-unresolved",
        ]
    )
    assert res.exit_code == 2 and (o / "summary.json").read_bytes() == before  # other method and loss: refused
    assert res.stderr.count("\n") == 1 and "--skip-existing would mix two explanation runs" in res.stderr
    res = run_cli(
        [
            "explain",
            "--model-dir",
            out,
            "--train",
            train_f,
            "--test-triples",
            test_f,
            "-o",
            o,
            "--skip-existing",
            "--top-k",
            "5",
            "--method",
            "tracin",
            "--loss",
            "score",
            "--skip-unresolved",
        ]
    )
    assert res.exit_code == 0, res.stderr
    assert json.loads((o / "summary.json").read_text())["skipped_existing"] == 2


def test_loss_train_loss_alone_is_the_earlier_codebase_convention(trained, tmp_path):
    """One flag away: `--loss train-loss` without --method ranks by plain TracIn over the
    1-N training loss (autograd reference); a named method keeps its own ordering."""
    out, train_ids, test_ids = trained
    E, R, train_f, test_f = label_files(trained, tmp_path, 1)
    ref = influence(out, train_ids, test_ids[:1], list_epoch_checkpoints(out), engine="autograd", loss="train-loss")
    name = f"triple_000_{E[test_ids[0, 0]]}_{E[test_ids[0, 2]]}".replace(":", "_")
    for extra, method in (([], "tracin"), (["--method", "tracin-margin"], "tracin-margin")):
        o = tmp_path / method
        res = run_cli(
            [
                "explain",
                "--model-dir",
                out,
                "--train",
                train_f,
                "--test-triples",
                test_f,
                "-o",
                o,
                "--loss",
                "train-loss",
                *extra,
            ]
        )
        assert res.exit_code == 0, res.stderr
        meta = json.loads((o / f"{name}_tracin.json").read_text())
        assert meta["method"] == method and meta["loss"] == "train-loss"
        with open(o / f"{name}_tracin.csv") as f:
            header, *body = list(csv.reader(f))
        got = [(r[6], r[8], r[10]) for r in body]
        want = [tuple(E[x] if k != 1 else R[x] for k, x in enumerate(train_ids[i])) for i in np.argsort(-ref.scores[0])]
        if method == "tracin":
            assert header == CSV_HEADER + ["Role"] and got == want
            np.testing.assert_allclose([float(r[12]) for r in body], np.sort(ref.scores[0])[::-1], rtol=1e-4)
        else:
            assert header != CSV_HEADER and got != want  # MethodScore column, the margin's own order


@pytest.mark.slow
def test_cli_explain_with_filtering_ranks_exactly_the_filtered_rows(trained, tmp_path):
    from tracegraph.kg.explain.neighborhood import FilterOptions, GraphIndex

    out, train_ids, test_ids = trained
    E, R, train_f, test_f = label_files(trained, tmp_path, 3)
    res = run_cli(
        [
            "explain",
            "--model-dir",
            out,
            "--train",
            train_f,
            "--test-triples",
            test_f,
            "-o",
            tmp_path / "f",
            "--n-hops",
            "1",
            "--min-degree",
            "3",
            "--loss",
            "score",
        ]
    )
    assert res.exit_code == 0, res.stderr
    ref = influence(out, train_ids, test_ids[:3], list_epoch_checkpoints(out), engine="exact", loss="score")
    index = GraphIndex.build(train_ids, len(E))
    explained = 0
    for j, (h, r, t) in enumerate(test_ids[:3]):
        rows = index.filter(h, t, FilterOptions(n_hops=1, min_degree=3)).triple_rows
        name = f"triple_{j:03d}_{E[h]}_{E[t]}".replace(":", "_")
        if len(rows) == 0:  # nothing to rank: recorded as a failure, no file written
            summary = json.loads((tmp_path / "f" / "summary.json").read_text())
            assert any(f["index"] == j and "empty" in f["reason"] for f in summary["failures"])
            assert not (tmp_path / "f" / f"{name}_tracin.csv").exists()
            continue
        explained += 1
        with open(tmp_path / "f" / f"{name}_tracin.csv") as f:
            body = list(csv.reader(f))[1:]
        got = sorted((r_[6], r_[8], r_[10], round(float(r_[12]), 6)) for r_ in body)
        want = sorted(
            (E[train_ids[i, 0]], R[train_ids[i, 1]], E[train_ids[i, 2]], round(float(ref.scores[j, i]), 6))
            for i in rows
        )
        assert len(rows) < len(train_ids) and got == want
    assert explained >= 1
