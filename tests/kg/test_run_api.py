"""The run object (tracegraph.open_run / tracegraph.train), checked against first principles:
hand-parsed id maps, float64 scores of every entity, a naive filtered-rank loop and a float64
autograd TracIn over the saved checkpoints."""

import doctest
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import tracegraph
from tests.conftest import UMLS, run_cli
from tests.kg.earlier_conve import earlier_checkpoint
from tests.kg.umls_run import QUERY, all_scores, float64_model, labels_of, triples_of
from tracegraph.errors import TracegraphError
from tracegraph.kg.data.idmap import IdMap, UnknownLabelError

# ------------------------------------------------------------------ id maps and labels


def test_idmap_is_iterable_sized_and_names_close_labels(tmp_path):
    (tmp_path / "m.txt").write_text("b\t1\na\t0\nsteroid\t2\n")
    m = IdMap.read(tmp_path / "m.txt")
    assert list(m) == ["a", "b", "steroid"] and len(m) == 3 and "b" in m and "c" not in m
    assert m.ids(["steroid", "a"]).tolist() == [2, 0]
    with pytest.raises(KeyError) as e:  # still a KeyError for code that caught one
        m.id("steroids")
    assert isinstance(e.value, UnknownLabelError)
    assert str(e.value) == "label 'steroids' is not in the id map; closest: 'steroid'"
    assert str(m.unknown("zzz", "entity")) == "entity 'zzz' is not in the id map"


def test_top_level_api_is_lazy_and_complete():
    assert {"open_run", "train", "Run", "IdMap"} <= set(dir(tracegraph))
    with pytest.raises(AttributeError):
        tracegraph.no_such_thing


def test_train_rejects_unknown_settings(tmp_path):
    with pytest.raises(TracegraphError, match="epoch_count"):
        tracegraph.train(train=UMLS / "train.txt", output_dir=tmp_path / "r", epoch_count=3)


# ------------------------------------------------------------------ the run: against first principles


@pytest.mark.slow
def test_run_exposes_maps_config_and_checkpoints(run_dir):
    run = tracegraph.open_run(run_dir)
    assert list(run.entities) == labels_of(run_dir / "node_dict.txt")
    assert list(run.relations) == labels_of(run_dir / "rel_dict.txt")
    assert run.config["train"]["epochs"] == 2 and run.label_smoothing == pytest.approx(0.1)
    assert [(c.path.name, c.epoch, c.lr) for c in run.checkpoints] == [
        ("epoch_0001.pt", 1, 0.003),
        ("epoch_0002.pt", 2, 0.003),
    ]
    assert run.checkpoint.name == "best_model.pt"
    assert set(run.data_files) == {"train", "valid", "test"}


@pytest.mark.slow
def test_doctests_of_the_api(run_dir):
    import tracegraph.kg.api as api
    import tracegraph.kg.data.datasets as datasets
    import tracegraph.kg.run as run_module
    import tracegraph.kg.data.idmap as idmap

    for module in (api, run_module, idmap, datasets):
        res = doctest.testmod(module, extraglobs={"RUN_DIR": str(run_dir)}, optionflags=doctest.ELLIPSIS)
        assert res.attempted > 0 and res.failed == 0, module.__name__


@pytest.mark.slow
def test_score_and_predict_match_float64_scores(run_dir):
    run = tracegraph.open_run(run_dir)
    ents, rels = labels_of(run_dir / "node_dict.txt"), labels_of(run_dir / "rel_dict.txt")
    ref_model, _ = float64_model(run_dir / "best_model.pt")
    h, r = ents.index(QUERY[0]), rels.index(QUERY[1])
    ref = all_scores(ref_model, h, r)

    scored = run.score(pd.DataFrame([QUERY], columns=["head", "relation", "tail"]))
    s = ref[ents.index(QUERY[2])]
    assert scored.iloc[0]["score"] == pytest.approx(s, rel=1e-5, abs=1e-6)
    assert scored.iloc[0]["probability"] == pytest.approx(1 / (1 + np.exp(-s)), rel=1e-5)

    top = run.predict(QUERY[0], QUERY[1], k=5)
    assert top["rank"].tolist() == [1, 2, 3, 4, 5]
    for tail, score in zip(top["tail"], top["score"]):
        assert score == pytest.approx(ref[ents.index(tail)], rel=1e-5, abs=1e-6)
    np.testing.assert_allclose(top["score"], np.sort(ref)[::-1][:5], rtol=1e-5, atol=1e-6)

    known = {t for hh, rr, t in triples_of(UMLS / "train.txt") if (hh, rr) == QUERY[:2]}
    fresh = run.predict([QUERY[0], QUERY[0]], QUERY[1], k=3, exclude_train=True)
    assert len(fresh) == 6 and not set(fresh["tail"]) & known
    allowed = np.array([e not in known for e in ents])
    np.testing.assert_allclose(fresh["score"][:3], np.sort(ref[allowed])[::-1][:3], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_evaluate_matches_a_naive_filtered_rank_loop(run_dir):
    run = tracegraph.open_run(run_dir)
    ents, rels = labels_of(run_dir / "node_dict.txt"), labels_of(run_dir / "rel_dict.txt")
    ref_model, _ = float64_model(run_dir / "best_model.pt")
    every = {t for f in ("train", "valid", "test") for t in triples_of(UMLS / f"{f}.txt")}
    test = triples_of(UMLS / "test.txt")[:12]
    ev = run.evaluate(test, top_k=3)
    assert ev.ranks.columns.tolist() == [
        "head",
        "relation",
        "tail",
        "side",
        "rank",
        "rank_optimistic",
        "rank_pessimistic",
        "score",
        "top_predictions",
    ]
    R = len(rels)
    for side in ("tail", "head"):
        got = ev.ranks[ev.ranks["side"] == side]["rank"].to_numpy()
        for (h, r, t), rank in zip(test, got):
            q, a = (h, t) if side == "tail" else (t, h)
            rid = rels.index(r) + (0 if side == "tail" else R)  # the reciprocal relation ranks heads
            scores = all_scores(ref_model, ents.index(q), rid)
            others = [
                e
                for e in range(len(ents))
                if e != ents.index(a) and ((q, r, ents[e]) if side == "tail" else (ents[e], r, q)) not in every
            ]
            sa, so = scores[ents.index(a)], scores[others]
            # realistic rank, with a 1e-5 band for float32 vs float64 near-ties
            assert 1 + (so > sa + 1e-5).sum() <= rank <= 1 + (so > sa - 1e-5).sum() + (abs(so - sa) <= 1e-5).sum()
    mrr = float(np.mean(1 / ev.ranks["rank"]))
    assert ev.metrics["both"]["mrr"] == pytest.approx(mrr) and ev.metrics["both"]["count"] == 24


@pytest.mark.slow
def test_explain_matches_float64_autograd_tracin(run_dir):
    run = tracegraph.open_run(run_dir)
    ents, rels = labels_of(run_dir / "node_dict.txt"), labels_of(run_dir / "rel_dict.txt")
    why = run.explain([QUERY], top_k=3, loss="score", method="tracin")
    pro, opp = why[why.Role == "proponent"], why[why.Role == "opponent"]
    assert len(pro) == 3 and len(opp) <= 3 and list(why.Role) == ["proponent"] * 3 + ["opponent"] * len(opp)
    assert pro["TracInScore"].is_monotonic_decreasing and (pro["TracInScore"] > 0).all()
    assert opp["TracInScore"].is_monotonic_increasing and (opp["TracInScore"] < 0).all()
    assert set(zip(why.TestHead, why.TestRel, why.TestTail)) == {QUERY}

    def grad(model, triple):  # ℓ = softplus(−s) summed over both directions (reciprocal relations)
        h, r, t = (torch.tensor([x]) for x in (ents.index(triple[0]), rels.index(triple[1]), ents.index(triple[2])))
        loss = (
            torch.nn.functional.softplus(-model.score_triples(h, r, t))
            + torch.nn.functional.softplus(-model.score_triples(t, r + len(rels), h))
        ).sum()
        return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, list(model.parameters()))])

    ref_scores, ref_self = np.zeros(len(why)), np.zeros(len(why))
    best_epoch = torch.load(run_dir / "best_model.pt", weights_only=True)["epoch"]  # TracIn sums up to the model's
    for ckpt in sorted((run_dir / "checkpoints").glob("epoch_*.pt"))[:best_epoch]:
        model, lr = float64_model(ckpt)
        g_test = grad(model, QUERY)
        for i, row in enumerate(why.itertuples()):
            g = grad(model, (row.TrainHead, row.TrainRel, row.TrainTail))
            ref_scores[i] += lr * float(g @ g_test)
            ref_self[i] += lr * float(g @ g)
    scale = np.abs(ref_scores).max()
    np.testing.assert_allclose(why["TracInScore"], ref_scores, rtol=1e-4, atol=1e-4 * scale)
    np.testing.assert_allclose(why["SelfInfluence"], ref_self, rtol=1e-4)


@pytest.mark.slow
def test_each_checkpoint_is_loaded_once(run_dir, monkeypatch):
    import tracegraph.kg.model.store as run_module  # where checkpoints are read

    loads = []
    real = run_module.load_checkpoint
    monkeypatch.setattr(run_module, "load_checkpoint", lambda p, **kw: loads.append(Path(p).name) or real(p, **kw))
    run = tracegraph.open_run(run_dir)
    assert loads == []  # opening reads no weights
    run.predict(*QUERY[:2], k=2)
    run.evaluate([QUERY])
    run.explain([QUERY], top_k=2, loss="score")
    run.explain([QUERY], top_k=2, n_hops=1)
    assert sorted(loads) == ["best_model.pt", "epoch_0001.pt", "epoch_0002.pt"]


@pytest.mark.slow
def test_cli_files_equal_the_api_frames(run_dir, tmp_path):
    run = tracegraph.open_run(run_dir)
    test = triples_of(UMLS / "test.txt")[:4]
    (tmp_path / "q.txt").write_text("".join("\t".join(t) + "\n" for t in test))
    read = dict(keep_default_na=False)  # labels like "NA" stay strings

    assert (
        run_cli(
            [
                "predict",
                "--model-dir",
                run_dir,
                "--query",
                *QUERY[:2],
                "--top-k",
                4,
                "--device",
                "cpu",
                "-o",
                tmp_path / "p.csv",
            ]
        ).exit_code
        == 0
    )
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "p.csv", **read), run.predict(*QUERY[:2], k=4), check_dtype=False
    )
    assert (
        run_cli(
            [
                "predict",
                "--model-dir",
                run_dir,
                "--triples",
                tmp_path / "q.txt",
                "--device",
                "cpu",
                "-o",
                tmp_path / "s.csv",
            ]
        ).exit_code
        == 0
    )
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "s.csv", **read), run.score(tmp_path / "q.txt"), check_dtype=False
    )
    assert (
        run_cli(
            ["evaluate", "--model-dir", run_dir, "--test", tmp_path / "q.txt", "--device", "cpu", "-o", tmp_path / "ev"]
        ).exit_code
        == 0
    )
    ranks = run.evaluate(tmp_path / "q.txt").ranks
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "ev" / "ranks.csv", **read).drop(columns="score"),
        ranks.drop(columns="score"),
        check_dtype=False,
    )
    assert (
        run_cli(
            [
                "explain",
                "--model-dir",
                run_dir,
                "--train",
                UMLS / "train.txt",
                "--test-triples",
                tmp_path / "q.txt",
                "-o",
                tmp_path / "ex",
                "--top-k",
                2,
                "--device",
                "cpu",
            ]
        ).exit_code
        == 0
    )
    files = sorted((tmp_path / "ex").glob("*_tracin.csv"))
    from_cli = pd.concat([pd.read_csv(f, **read) for f in files], ignore_index=True)
    pd.testing.assert_frame_equal(from_cli, run.explain(tmp_path / "q.txt", top_k=2), check_dtype=False)


@pytest.mark.slow
def test_unknown_labels_are_one_line_errors(run_dir):
    run = tracegraph.open_run(run_dir)
    with pytest.raises(UnknownLabelError, match="relation 'interacts' .*closest: 'interacts_with'"):
        run.score([("steroid", "interacts", "eicosanoid")])
    with pytest.raises(UnknownLabelError, match="entity 'steroids'"):
        run.explain([("steroids", "interacts_with", "eicosanoid")])
    res = run_cli(["predict", "--model-dir", run_dir, "--query", "steroids", "interacts_with", "--device", "cpu"])
    assert res.exit_code == 2
    assert "entity 'steroids' is not in the id map; closest: 'steroid'" in res.output


def test_import_checkpoint_returns_a_run_that_scores_like_the_source(tmp_path):
    ref, f = earlier_checkpoint(tmp_path, n_ent=30, n_rel=4)
    run = tracegraph.import_checkpoint(f, tmp_path / "imported", tmp_path / "node_dict.txt", tmp_path / "rel_dict.txt")
    assert isinstance(run, tracegraph.Run) and run.config["imported"] is True
    assert [(c.epoch, c.lr) for c in run.checkpoints] == [(7, pytest.approx(0.003))]
    with torch.no_grad():
        expected = ref(torch.tensor([3]), torch.tensor([2]))[0].numpy()
    top = run.predict("E3", "R2", k=30)
    np.testing.assert_allclose(top["score"], np.sort(expected)[::-1], atol=1e-5)
    assert top["tail"].tolist() == [f"E{i}" for i in np.argsort(-expected, kind="stable")]


def test_conve_given_labels_says_what_to_use_instead():
    from tracegraph.kg.model.conve import ConvE, ConvEConfig

    model = ConvE(
        ConvEConfig(num_entities=5, num_relations=2, embedding_dim=8, embedding_height=2, embedding_width=4)
    ).eval()
    with pytest.raises(TypeError, match="run.predict"):
        model.score_all(["steroid"], ["interacts_with"])
    assert model.score_all(torch.tensor([0]), torch.tensor([1])).shape == (1, 5)


@pytest.mark.parametrize(
    "setting,value,least", [("checkpoint_every", 0, 1), ("eval_every", 0, 1), ("batch_size", 0, 1), ("epochs", -1, 0)]
)
def test_train_refuses_a_count_below_its_bound_naming_the_parameter(tmp_path, setting, value, least):
    with pytest.raises(TracegraphError, match=f"{setting} must be a whole number of at least {least}"):
        tracegraph.train(train=UMLS / "train.txt", output_dir=tmp_path / "r", quiet=True, **{setting: value})
    assert not (tmp_path / "r" / "config.json").exists()  # refused before anything is written
