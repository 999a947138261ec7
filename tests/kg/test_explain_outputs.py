"""What a reader of explain's outputs relies on: roles, the folder rule, which checkpoints are
summed, and the Python API saying what the CLI says."""

from __future__ import annotations

import inspect
import json
import logging
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from tests.conftest import run_cli, run_cli_error

TRIPLES = [
    ("a", "r", "b"),
    ("b", "r", "c"),
    ("c", "s", "a"),
    ("a", "s", "d"),
    ("d", "r", "b"),
    ("c", "r", "d"),
    ("e", "s", "f"),
    ("f", "r", "a"),
]
TESTS = [("a", "r", "c"), ("e", "r", "d")]


@pytest.fixture(scope="module")
def run3(tmp_path_factory):
    """A 3-epoch run on 8 triples, a checkpoint every epoch; no validation set (no best_model.pt)."""
    from tracegraph.kg.model.train import TrainConfig, train

    d = tmp_path_factory.mktemp("run3")
    (d / "train.txt").write_text("".join("\t".join(t) + "\n" for t in TRIPLES))
    (d / "test.txt").write_text("".join("\t".join(t) + "\n" for t in TESTS))
    train(
        TrainConfig(
            train=str(d / "train.txt"),
            output_dir=str(d / "run"),
            epochs=3,
            batch_size=4,
            lr_decay=0.5,
            learning_rate=0.05,
            checkpoint_every=1,
            device="cpu",
            model=dict(embedding_dim=6, embedding_height=2, embedding_width=3, output_channels=2, kernel_size=2),
        )
    )
    return d


def _explain_args(run3, model_dir, out, *extra):
    """``explain`` of run3's test file against its training file, from ``model_dir`` into ``out``."""
    return [
        "explain",
        "--model-dir",
        model_dir,
        "--train",
        run3 / "train.txt",
        "--test-triples",
        run3 / "test.txt",
        "-o",
        out,
        *extra,
    ]


def _engine_scores(run_dir, checkpoints, test):
    """TracIn by the per-example autograd engine (the reference engine), logit loss, every training row."""
    from tracegraph.kg.data.idmap import IdMap
    from tracegraph.kg.explain.tracin.engine import InfluenceOptions, compute_influence

    ents, rels = IdMap.read(run_dir / "node_dict.txt", "e"), IdMap.read(run_dir / "rel_dict.txt", "r")
    enc = lambda ts: np.array([[ents.id(h), rels.id(r), ents.id(t)] for h, r, t in ts])  # noqa: E731
    res = compute_influence(
        checkpoints, enc(TRIPLES), enc([test]), InfluenceOptions(engine="autograd", loss="logit"), torch.device("cpu")
    )
    return {tr: float(v) for tr, v in zip(TRIPLES, res.scores[0])}


# ------------------------------------------------------------------ roles


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 3, 10])
def test_a_top_k_listing_holds_proponents_then_opponents_by_sign(seed, k):
    from tracegraph.kg.explain.tracin.rows import pick

    rng = np.random.default_rng(seed)
    score = rng.integers(-3, 4, 25).astype(float)  # ties and zeros
    if seed == 0:
        score = np.abs(score) + 1  # every row positive: no opponents at all
    order, roles = pick(score, None, k)
    pro = [int(i) for i, r in zip(order, roles) if r == "proponent"]
    opp = [int(i) for i, r in zip(order, roles) if r == "opponent"]
    # a naive sort of the full listing
    want_pro = [i for i in sorted(range(25), key=lambda i: (-score[i], i)) if score[i] > 0][:k]
    want_opp = [i for i in sorted(range(25), key=lambda i: (score[i], i)) if score[i] < 0][:k]
    assert pro == want_pro and opp == want_opp
    assert roles == ["proponent"] * len(pro) + ["opponent"] * len(opp)  # proponents first
    assert not set(pro) & set(opp) and len(pro) <= k and len(opp) <= k
    assert all(score[i] > 0 for i in pro) and all(score[i] < 0 for i in opp)
    assert [score[i] for i in pro] == sorted((score[i] for i in pro), reverse=True)
    assert [score[i] for i in opp] == sorted(score[i] for i in opp)
    if seed == 0:
        assert opp == []  # never the least positive proponents


def test_explain_files_carry_roles_rank_and_a_note_when_opponents_run_short(run3, tmp_path):
    o = tmp_path / "x"
    res = run_cli(_explain_args(run3, run3 / "run", o, "--top-k", "8", "--method", "tracin", "--device", "cpu"))
    assert res.exit_code == 0, res.stderr
    summary = json.loads((o / "summary.json").read_text())
    ref = _engine_scores(run3 / "run", sorted((run3 / "run" / "checkpoints").glob("epoch_*.pt")), TESTS[0])
    n_neg = sum(v < 0 for v in ref.values())
    entry = summary["triples"][0]
    meta = json.loads((o / entry["json"]).read_text())
    assert {k: entry[k] for k in ("index", "head", "relation", "tail")} == {
        "index": 0,
        "head": "a",
        "relation": "r",
        "tail": "c",
    }
    assert entry["rank"] == meta["test_triple"]["rank"] and 1 <= entry["rank"] <= 6
    assert entry["score"] == meta["test_triple"]["score"]
    roles = [row["Role"] for row in meta["rows"]]
    assert roles.count("opponent") == n_neg and roles.count("proponent") == 8 - n_neg
    assert ("opponents_note" in meta) == (n_neg < 8)


# ------------------------------------------------------------------ the output folder


def test_explain_refuses_a_used_output_folder_unless_told(run3, tmp_path):
    o = tmp_path / "used"
    o.mkdir()
    (o / "triple_007_old_one_tracin.csv").write_text("old\n")
    args = _explain_args(run3, run3 / "run", o, "--top-k", "2", "--device", "cpu")
    err = run_cli_error(args, o, contains="not empty")
    assert "use --overwrite" in err.stderr and "or --skip-existing" in err.stderr  # the CLI names its flags
    res = run_cli([*args, "--overwrite"])
    assert res.exit_code == 0, res.stderr
    names = sorted(p.name for p in o.iterdir())
    assert "triple_007_old_one_tracin.csv" not in names and len(names) == 5  # 2 × (csv, json) + summary.json
    # the same settings may add to the folder; another method may not
    assert run_cli([*args, "--skip-existing"]).exit_code == 0
    run_cli_error([*args, "--skip-existing", "--method", "tracin"], o, contains="--skip-existing would mix")


# ------------------------------------------------------------------ which checkpoints are summed


def test_a_checkpoint_file_as_model_dir_means_that_checkpoint_alone(run3, tmp_path, caplog):
    ck = run3 / "run" / "checkpoints" / "epoch_0002.pt"
    o = tmp_path / "one"
    with caplog.at_level(logging.INFO, logger="tracegraph"):
        res = run_cli(_explain_args(run3, ck, o, "--method", "tracin", "--device", "cpu", "--max-triples", "1"))
    assert res.exit_code == 0, res.stderr
    summary = json.loads((o / "summary.json").read_text())
    assert summary["checkpoints"] == [str(ck)]
    meta = json.loads((o / summary["triples"][0]["json"]).read_text())
    ref = _engine_scores(run3 / "run", [ck], TESTS[0])
    got = {(r["TrainHead"], r["TrainRel"], r["TrainTail"]): r["TracInScore"] for r in meta["rows"]}
    scale = max(abs(v) for v in ref.values())
    assert all(abs(got[t] - ref[t]) < 1e-5 * scale for t in TRIPLES)
    assert any(
        "TracIn sums 1 checkpoint" in r.getMessage() and "epoch_0002.pt" in r.getMessage() for r in caplog.records
    )


def test_explain_sums_checkpoints_up_to_the_best_models_epoch(run3, tmp_path, caplog):
    run = tmp_path / "early_stopped"
    shutil.copytree(run3 / "run", run)
    shutil.copyfile(run / "checkpoints" / "epoch_0002.pt", run / "best_model.pt")  # best at epoch 2 of 3
    assert torch.load(run / "best_model.pt", weights_only=True)["epoch"] == 2
    o = tmp_path / "best"
    with caplog.at_level(logging.INFO, logger="tracegraph"):
        res = run_cli(_explain_args(run3, run, o, "--method", "tracin", "--device", "cpu", "--max-triples", "1"))
    assert res.exit_code == 0, res.stderr
    summary = json.loads((o / "summary.json").read_text())
    want = [run / "checkpoints" / f"epoch_000{k}.pt" for k in (1, 2)]
    assert summary["checkpoints"] == [str(p) for p in want]
    assert any("TracIn sums 2 checkpoint(s), up to best_model.pt's epoch 2" in r.getMessage() for r in caplog.records)
    meta = json.loads((o / summary["triples"][0]["json"]).read_text())
    ref = _engine_scores(run, want, TESTS[0])
    scale = max(abs(v) for v in ref.values())
    assert all(
        abs(r["TracInScore"] - ref[(r["TrainHead"], r["TrainRel"], r["TrainTail"])]) < 1e-5 * scale
        for r in meta["rows"]
    )
    # --checkpoints all still means every epoch
    o2 = tmp_path / "all"
    assert (
        run_cli(
            _explain_args(
                run3, run, o2, "--method", "tracin", "--device", "cpu", "--max-triples", "1", "--checkpoints", "all"
            )
        ).exit_code
        == 0
    )
    assert len(json.loads((o2 / "summary.json").read_text())["checkpoints"]) == 3


def test_explain_warns_when_tracin_would_sum_a_single_checkpoint_nobody_named(run3, tmp_path, caplog):
    """Best model at epoch 1 of 3: the default sums epoch 1 alone, and says how to get more; a
    checkpoint named on purpose (--model-dir FILE) or several summed draw no warning."""
    import tracegraph

    run = tmp_path / "early"
    shutil.copytree(run3 / "run", run)
    shutil.copyfile(run / "checkpoints" / "epoch_0001.pt", run / "best_model.pt")
    warning = (
        "TracIn sums a single checkpoint (epoch_0001.pt): the influence is one gradient product at that point "
        "of training, not a sum along it. Train with --checkpoint-every K (K below the explained model's epoch) "
        "to save more checkpoints"
    )

    def warnings(model_dir, out, *extra):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="tracegraph"):
            res = run_cli(
                _explain_args(run3, model_dir, tmp_path / out, "--method", "tracin", "--max-triples", "1", *extra)
            )
        assert res.exit_code == 0, res.stderr
        return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]

    assert warnings(run, "default") == [warning]
    assert warnings(run, "all", "--checkpoints", "all") == []  # three summed
    assert warnings(run / "checkpoints" / "epoch_0001.pt", "named") == []  # the one asked for
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tracegraph"):
        tracegraph.TracIn(run, train=run3 / "train.txt", progress=False)
    assert [r.getMessage() for r in caplog.records] == [warning]


# ------------------------------------------------------------------ the Python API


def test_python_explain_takes_the_clis_method_names(run3):
    import tracegraph

    run = tracegraph.open_run(run3 / "run")
    why = run.explain([TESTS[0]], method="tracin-margin", top_k=2)
    assert why.columns[-2:].tolist() == ["MethodScore", "Role"]
    meta = why.attrs["explanations"][0]
    assert meta["method"] == "tracin-margin" and meta["engine"] == "exact" and "rival" in meta
    assert why.attrs["summary"]["triples"][0]["rival"]["tail"] == meta["rival"]["tail"]
    assert len(pd.concat([why, why])) == 2 * len(why)  # frames from explain combine like any other
    with pytest.raises(tracegraph.errors.TracegraphError, match="method must be one of"):
        run.explain([TESTS[0]], method="exact")  # the engine's name is not a method
    with pytest.raises(TypeError, match="explainer"):
        run.explain([TESTS[0]], explainer="tracin")  # a misspelt or retired parameter is named


def test_help_of_run_explain_lists_every_parameter():
    from tracegraph.kg.run import Run

    params = [p for p in inspect.signature(Run.explain).parameters if p != "self"]
    assert not any(p.kind == p.VAR_KEYWORD for p in inspect.signature(Run.explain).parameters.values())
    doc = inspect.getdoc(Run.explain)
    args = doc.split("Args:")[1].split("Returns:")[0]
    assert [p for p in params if p not in args] == []
    assert {"method", "engine", "loss", "layers", "side", "checkpoints", "top_k", "batch_size", "n_hops"} <= set(params)


def test_tracin_object_influence_top_k_and_self_influence(run3):
    import tracegraph
    from tracegraph.kg.data.idmap import IdMap
    from tracegraph.kg.explain.tracin.engine import InfluenceOptions, compute_influence

    tracin = tracegraph.TracIn(tracegraph.open_run(run3 / "run"), loss="logit", engine="exact", progress=False)
    got = tracin.influence(TESTS)
    assert got.shape == (len(TESTS), len(TRIPLES))
    ckpts = sorted((run3 / "run" / "checkpoints").glob("epoch_*.pt"))  # no best_model.pt: every epoch
    for j, t in enumerate(TESTS):
        ref = _engine_scores(run3 / "run", ckpts, t)
        scale = max(abs(v) for v in ref.values())
        assert np.abs(got[j] - [ref[tr] for tr in TRIPLES]).max() < 1e-5 * scale
    ents, rels = IdMap.read(run3 / "run" / "node_dict.txt", "e"), IdMap.read(run3 / "run" / "rel_dict.txt", "r")
    ids = np.array([[ents.id(h), rels.id(r), ents.id(t)] for h, r, t in TRIPLES])
    ref_self = compute_influence(
        ckpts, ids, ids[:1], InfluenceOptions(engine="autograd", loss="logit"), torch.device("cpu")
    ).train_self
    np.testing.assert_allclose(tracin.self_influence(), ref_self, rtol=1e-5)
    top = tracin.top_k(TESTS[0], k=2)
    s = got[0]
    want = [i for i in sorted(range(len(s)), key=lambda i: (-s[i], i)) if s[i] > 0][:2] + [
        i for i in sorted(range(len(s)), key=lambda i: (s[i], i)) if s[i] < 0
    ][:2]
    assert list(zip(top["head"], top["relation"], top["tail"])) == [TRIPLES[i] for i in want]
    assert top["role"].tolist() == ["proponent" if s[i] > 0 else "opponent" for i in want]


def test_python_train_takes_the_clis_settings_flat(run3, tmp_path):
    import tracegraph

    assert {"embedding_dim", "output_channels", "learning_rate", "epochs"} <= set(
        inspect.signature(tracegraph.train).parameters
    )
    run = tracegraph.train(
        train=run3 / "train.txt",
        output_dir=tmp_path / "flat",
        epochs=1,
        batch_size=4,
        embedding_dim=8,
        embedding_height=2,
        embedding_width=4,
        output_channels=2,
        kernel_size=2,
        device="cpu",
        quiet=True,
    )
    c = run.model.config
    assert (c.embedding_dim, c.embedding_height, c.embedding_width, c.output_channels, c.kernel_size) == (8, 2, 4, 2, 2)
    with pytest.raises(tracegraph.errors.TracegraphError, match="embeding_dim"):
        tracegraph.train(train=run3 / "train.txt", output_dir=tmp_path / "typo", embeding_dim=8)


def test_label_columns_come_from_the_runs_recorded_name_files(run3, tmp_path):
    """A run trained on a KGX folder (node_dict.txt beside node_name_dict.txt and edge_map.json)
    names its entities and relations in explain's _label columns without --node-name-dict."""
    from tracegraph.kg.data.labels import record_label_files
    from tracegraph.kg.data.idmap import IdMap

    run = tmp_path / "named_run"
    shutil.copytree(run3 / "run", run)
    data = tmp_path / "kgx"
    data.mkdir()
    ents = IdMap.read(run / "node_dict.txt", "e")
    shutil.copyfile(run / "node_dict.txt", data / "node_dict.txt")
    (data / "node_name_dict.txt").write_text("".join(f"Name of {lab}\t{i}\n" for i, lab in enumerate(ents.labels)))
    (data / "edge_map.json").write_text(json.dumps({json.dumps({"predicate": "P:r"}): "r"}))
    shutil.copyfile(run3 / "train.txt", data / "train.txt")
    cfg = json.loads((run / "config.json").read_text())
    cfg["label_files"] = record_label_files(data / "train.txt", run)  # what train records beside its data
    (run / "config.json").write_text(json.dumps(cfg))
    import tracegraph

    why = tracegraph.open_run(run).explain([TESTS[0]], method="tracin", train=run3 / "train.txt", quiet=True)
    assert set(why["TrainHead_label"]) == {f"Name of {h}" for h in why["TrainHead"]}
    assert set(why["TestRel_label"]) == {"P:r"}
    assert set(why["TrainRel_label"]) == {"P:r" if r == "r" else r for r in why["TrainRel"]}


@pytest.mark.parametrize("side, first", [("tail", ("a", "r", "b")), ("head", ("b", "r", "c"))])
def test_tracin_margin_query_lists_the_answers_of_the_explained_sides_query_first(run3, side, first):
    """(a, r, c): on the tail side (a, r, ?) has the training answer b; on the head side (?, r, c) has b."""
    import tracegraph

    why = tracegraph.open_run(run3 / "run").explain([TESTS[0]], method="tracin-margin-query", side=side)
    assert tuple(why[["TrainHead", "TrainRel", "TrainTail"]].iloc[0]) == first
    assert set(why["Role"]) == {"proponent"}  # a rank, not an influence: no opponents
