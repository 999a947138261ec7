"""The ``Run`` object (kg/run.py) by hand, on a run folder written here (id maps, ``config.json`` with a
hashed training file, a tiny random ConvE's checkpoints; no training): each method's defaults and
arguments as its docstring states them, reaching the function that does the work (replaced by a
recorder); scores and probabilities against the model's own full score row and a float64 sigmoid;
``explain``'s configuration, label check, neighbourhood filter, logging, output files and frame.

References: the documented defaults written out here, ``ExplainConfig`` and ``FilterOptions`` built
by hand, ids from the id maps written here, scores from ``score_all`` of the same model.
"""

import hashlib
import json
import logging
import math
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tests.kg.test_explanation_methods_by_hand import tiny_model
from tracegraph.errors import TracegraphError
from tracegraph.kg import run as run_module
from tracegraph.kg.data import labels as labels_module
from tracegraph.kg.explain.neighborhood import FilterOptions, GraphIndex
from tracegraph.kg.explain.tracin.explain import ExplainConfig
from tracegraph.kg.model.model_io import model_payload
from tracegraph.kg.run import Run
from tracegraph.runtime.checkpoints import save_checkpoint

ENTS = ["a", "b", "c", "d", "e", "f", "g"]  # tiny_model's 7 entities
RELS = ["likes", "knows"]
TRAIN = [("a", "likes", "b"), ("b", "knows", "c"), ("c", "likes", "d"), ("g", "knows", "a")]


def write_run(tmp_path, with_train=True, epochs=(1, 2)):
    """A run folder as ``tracegraph train`` leaves it: id maps, config.json, best model, epoch checkpoints."""
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "node_dict.txt").write_text("".join(f"{e}\t{i}\n" for i, e in enumerate(ENTS)))
    (run / "rel_dict.txt").write_text("".join(f"{r}\t{i}\n" for i, r in enumerate(RELS)))
    save_checkpoint(run / "best_model.pt", model_payload(tiny_model(5), 2, 0.01, {}))
    for e in epochs:
        save_checkpoint(run / "checkpoints" / f"epoch_{e:04d}.pt", model_payload(tiny_model(e), e, 0.01, {}))
    config = {"train": {"seed": 0}}
    if with_train:
        train = tmp_path / "train.txt"
        train.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in TRAIN))
        sha = hashlib.sha256(train.read_bytes()).hexdigest()
        config["data_files"] = {"train": {"path": str(train), "relative": "../train.txt", "sha256": sha}}
    (run / "config.json").write_text(json.dumps(config))
    return run


@pytest.fixture
def run(tmp_path):
    return Run(write_run(tmp_path))


# --- score -------------------------------------------------------------------------------------


def test_scores_are_the_models_logits_and_probabilities_their_sigmoid_in_float32(run):
    triples = [("a", "likes", "b"), ("g", "knows", "c"), ("c", "knows", "c")]
    got = run.score(triples)
    assert got.columns.tolist() == ["head", "relation", "tail", "score", "probability"]
    assert got[["head", "relation", "tail"]].values.tolist() == [list(t) for t in triples]
    model = tiny_model(5)  # best_model.pt's weights
    for row, (h, r, t) in zip(got.itertuples(), triples):
        with torch.no_grad():
            want = model.score_all(torch.tensor([ENTS.index(h)]), torch.tensor([RELS.index(r)]))[0, ENTS.index(t)]
        assert row.score == pytest.approx(float(want), rel=1e-5, abs=1e-6)
        assert row.score == float(np.float32(row.score))  # the model's float32 logit, unrounded
        assert row.probability == pytest.approx(1 / (1 + math.exp(-row.score)), rel=1e-6)
        assert row.probability == float(np.float32(row.probability))  # computed in float32, as the score
    assert got["score"].dtype == np.float64 and got["probability"].dtype == np.float64
    assert {type(v) for v in got["score"].tolist()} == {float}


def test_the_probability_is_the_logistic_function_as_a_python_float():
    assert run_module._sigmoid(np.float32(0.0)) == 0.5
    assert run_module._sigmoid(np.float32(2.0)) == pytest.approx(0.8807970779778823, rel=1e-7)
    assert run_module._sigmoid(np.float32(-3.0)) == pytest.approx(0.04742587317756678, rel=1e-6)
    assert type(run_module._sigmoid(np.float32(1.0))) is float


def test_scoring_nothing_gives_an_empty_frame_and_unknown_labels_are_refused(run):
    empty = run.score([])
    assert empty.columns.tolist() == ["head", "relation", "tail", "score", "probability"] and len(empty) == 0
    with pytest.raises(TracegraphError, match="entity 'zz' is not in the id map"):
        run.score([("a", "likes", "zz")])


def test_scores_need_no_gradient(run, monkeypatch):
    calls = []
    real = type(run.model).score_triples

    def spy(self, *a):
        calls.append(torch.is_grad_enabled())
        return real(self, *a)

    monkeypatch.setattr(type(run.model), "score_triples", spy)
    run.score([("a", "likes", "b")])
    assert calls == [False]


def test_scores_are_computed_on_the_runs_device(tmp_path, monkeypatch):
    # the meta device stands for a GPU: tensors can be made there without one
    run = Run(write_run(tmp_path), device=torch.device("meta"))
    seen = []

    class RecordingModel:
        def score_triples(self, h, r, t):
            seen.append([(x.device.type, tuple(x.shape)) for x in (h, r, t)])  # meta tensors hold no values
            return torch.tensor([0.0, 2.0])

    monkeypatch.setattr(Run, "model", property(lambda self: RecordingModel()))
    got = run.score([("a", "likes", "b"), ("g", "knows", "c")])
    assert seen == [[("meta", (2,))] * 3]
    assert got[["head", "relation", "tail"]].values.tolist() == [["a", "likes", "b"], ["g", "knows", "c"]]
    assert got["score"].tolist() == [0.0, 2.0]


# --- predict, evaluate, labels, report: handed on with the documented defaults -------------------


class Recorder:
    def __init__(self, result="result"):
        self.calls, self.result = [], result

    def __call__(self, *args, **kw):
        self.calls.append((args, kw))
        return self.result


def test_predict_hands_its_query_to_predict_frame(run, monkeypatch):
    from tracegraph.kg import predictions

    rec = Recorder()
    monkeypatch.setattr(predictions, "predict_frame", rec)
    assert run.predict("a", "likes") == "result"
    assert run.predict(["a"], ["knows"], 3, True, tail="b") == "result"
    assert run.predict(relation="likes", tail="c") == "result"
    assert rec.calls == [
        ((run,), {"head": "a", "relation": "likes", "tail": None, "k": 10, "exclude_train": False}),
        ((run,), {"head": ["a"], "relation": ["knows"], "tail": "b", "k": 3, "exclude_train": True}),
        ((run,), {"head": None, "relation": "likes", "tail": "c", "k": 10, "exclude_train": False}),
    ]


def test_evaluate_hands_its_options_to_evaluate_store(run, monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(run_module, "evaluate_store", rec)
    assert run.evaluate("test.txt") == "result"
    assert run.evaluate([("a", "likes", "b")], ["f.txt"], 2, 8, 4, "drop") == "result"
    assert rec.calls == [
        (
            (run, "test.txt", None),
            {"top_k": 10, "batch_size": 256, "entity_chunk": 65536, "unseen": "include"},
        ),
        ((run, [("a", "likes", "b")], ["f.txt"]), {"top_k": 2, "batch_size": 8, "entity_chunk": 4, "unseen": "drop"}),
    ]


def test_labels_come_from_the_run_folder_once(run, monkeypatch):
    rec = Recorder(result=object())
    monkeypatch.setattr(labels_module, "run_labels", rec)
    first = run.labels
    assert run.labels is first is rec.result and len(rec.calls) == 1
    (args, kw) = rec.calls[0]
    assert args[0] == run.path and args[1] == {"train": {"seed": 0}, "data_files": run.config["data_files"]}
    assert args[2].labels == ENTS and kw == {}


def test_report_hands_everything_to_report_run(run, monkeypatch):
    rec = Recorder(result=Path("r.html"))
    monkeypatch.setitem(sys.modules, "tracegraph.report", types.SimpleNamespace(report_run=rec))
    assert run.report("r.html") == Path("r.html")
    run.report("s.html", ["x"], "n.json", "t.txt", n_pro=3, n_opp=1)
    assert rec.calls == [
        ((run, "r.html"), {"explanations": (), "necessity": None, "test": None}),
        ((run, "s.html"), {"explanations": ["x"], "necessity": "n.json", "test": "t.txt", "n_pro": 3, "n_opp": 1}),
    ]


# --- explain -----------------------------------------------------------------------------------


class FakeResult:
    summary = {"failures": [], "seconds": 1.5}
    explanations = [types.SimpleNamespace(meta={"index": 0}), types.SimpleNamespace(meta={"index": 1})]

    def frame(self):
        return pd.DataFrame({"TrainHead": ["a"], "Role": ["proponent"]})


@pytest.fixture
def explain(monkeypatch):
    """run_explain, the output-folder functions and the logging switches replaced by one recorder."""
    log = []

    def run_explain(cfg, subsets, **kw):
        log.append(("run_explain", cfg, subsets, kw))
        return FakeResult()

    class Silenced:
        def __enter__(self):
            log.append("quiet on")

        def __exit__(self, *exc):
            log.append("quiet off")

    monkeypatch.setattr(run_module, "run_explain", run_explain)
    monkeypatch.setattr(run_module, "silenced", Silenced)
    monkeypatch.setattr(run_module, "setup_logging", lambda: log.append("logging"))
    monkeypatch.setattr(run_module, "prepare_output_dir", lambda *a: log.append(("prepare", *a)))
    monkeypatch.setattr(run_module, "write_explanations", lambda *a: log.append(("write", *a)))
    return log


def test_explain_defaults_rank_the_runs_training_file_for_the_labels_given(run, tmp_path, explain):
    frame = run.explain([("a", "likes", "b"), ("g", "knows", "c")])
    assert explain == [
        "logging",
        (
            "run_explain",
            ExplainConfig(
                model_dir=str(run.path),
                train=str(tmp_path / "train.txt"),
                test_triples=[("a", "likes", "b"), ("g", "knows", "c")],
                output_dir=None,
                checkpoints=None,
                engine="exact",
                method=None,
                loss="logit",
                layers="all",
                top_k=None,
                batch_size=0,
                precision="fp32",
                device="cpu",
                label_smoothing=None,
                node_name_dict=None,
                edge_map=None,
                side="tail",
            ),
            None,
            {"run": run, "questions": explain[1][3]["questions"]},
        ),
    ]
    # the questions, resolved before run_explain: every one, in order
    assert explain[1][3]["questions"].labels == [("a", "likes", "b"), ("g", "knows", "c")]
    assert frame.equals(FakeResult().frame())
    assert frame.attrs == {"summary": FakeResult.summary, "explanations": [{"index": 0}, {"index": 1}]}


def test_explain_passes_every_option_and_writes_files_when_asked(tmp_path, explain, monkeypatch):
    run = Run(write_run(tmp_path) / "checkpoints" / "epoch_0002.pt")  # one checkpoint: that one explained
    monkeypatch.setattr(run, "training_subsets", lambda train, opts: ("subsets of", train, opts.n_hops))
    (tmp_path / "test.txt").write_text("a\tlikes\tb\n")
    (tmp_path / "other.txt").write_text("a\tlikes\tc\n")
    out = tmp_path / "out"
    frame = run.explain(
        tmp_path / "test.txt",
        tmp_path / "other.txt",
        method="tracin",
        engine="vmap",
        loss="train-loss",
        layers="last:2",
        side="head",
        checkpoints=["all"],
        top_k=4,
        batch_size=16,
        precision="bf16",
        label_smoothing=0.1,
        node_name_dict=tmp_path / "names.txt",
        edge_map=tmp_path / "edges.json",
        n_hops=2,
        output_dir=out,
        overwrite=True,
        quiet=True,
    )
    cfg = ExplainConfig(
        model_dir=str(tmp_path / "run" / "checkpoints" / "epoch_0002.pt"),
        train=str(tmp_path / "other.txt"),
        test_triples=tmp_path / "test.txt",  # a file is handed on as given, read by run_explain
        output_dir=str(out),
        checkpoints=["all"],
        engine="vmap",
        method="tracin",
        loss="train-loss",
        layers="last:2",
        top_k=4,
        batch_size=16,
        precision="bf16",
        device="cpu",
        label_smoothing=0.1,
        node_name_dict=str(tmp_path / "names.txt"),
        edge_map=str(tmp_path / "edges.json"),
        side="head",
        filter_files=[str(tmp_path / "other.txt")],  # the training file given is the filter's too
    )
    questions = explain[2][3]["questions"]
    assert explain[:4] == [
        ("prepare", out, cfg, True),
        "quiet on",
        ("run_explain", cfg, ("subsets of", tmp_path / "other.txt", 2), {"run": run, "questions": questions}),
        "quiet off",
    ]
    assert questions.labels == [("a", "likes", "b")] and questions.source == str(tmp_path / "test.txt")
    assert explain[4][0] == "write" and isinstance(explain[4][1], FakeResult) and explain[4][2] == out
    assert len(explain) == 5 and frame.attrs["summary"] == FakeResult.summary
    assert type(explain[2][1].test_triples) is type(tmp_path)
    monkeypatch.chdir(tmp_path)
    run.explain("test.txt", "other.txt", output_dir=str(out))
    assert explain[5] == ("prepare", str(out), explain[7][1], False)  # not overwriting unless asked


def test_explain_refuses_an_unknown_label_before_any_work(run, explain):
    with pytest.raises(TracegraphError, match="entity 'zz' is not in the id map"):
        run.explain([("a", "likes", "zz")])
    with pytest.raises(TracegraphError, match="relation 'hates' is not in the id map"):
        run.explain([("a", "hates", "b")])
    assert explain == []


def test_explain_reads_label_triples_in_every_accepted_form(run, explain):
    run.explain(pd.DataFrame({"tail": ["b"], "head": ["a"], "relation": ["likes"]}))
    run.explain((("g", "knows", "c"),))
    assert explain[1][1].test_triples == [("a", "likes", "b")]
    assert explain[3][1].test_triples == [("g", "knows", "c")]


def test_explain_without_a_training_file_asks_for_one(tmp_path, explain):
    run = Run(write_run(tmp_path, with_train=False))
    with pytest.raises(TracegraphError) as e:
        run.explain([("a", "likes", "b")])
    assert str(e.value) == f"{run.path}: the run records no training file that still exists; pass train="
    (tmp_path / "mine.txt").write_text("a\tlikes\tb\n")
    run.explain([("a", "likes", "b")], train=tmp_path / "mine.txt")
    assert explain[-1][1].train == str(tmp_path / "mine.txt")
    assert explain[-1][1].filter_files == [str(tmp_path / "mine.txt")]


def test_explain_filters_each_test_triples_neighbourhood_when_asked(run, tmp_path, explain, monkeypatch):
    asked = []
    monkeypatch.setattr(run, "training_subsets", lambda train, opts: asked.append((train, opts)) or "subsets")
    run.explain([("a", "likes", "b")], n_hops=1)
    run.explain(
        [("a", "likes", "b")],
        n_hops=3,
        min_degree=5,
        preserve_test_edges=False,
        strict_hop=True,
        path_filtering=True,
        max_path_length=4,
        strict_path=True,
        edges_only=True,
    )
    train = tmp_path / "train.txt"
    assert asked == [
        (
            train,
            FilterOptions(
                n_hops=1,
                min_degree=2,
                preserve_test_edges=True,
                strict_hop=False,
                path_filtering=False,
                max_path_length=3,
                strict_path=False,
                edges_only=False,
            ),
        ),
        (
            train,
            FilterOptions(
                n_hops=3,
                min_degree=5,
                preserve_test_edges=False,
                strict_hop=True,
                path_filtering=True,
                max_path_length=4,
                strict_path=True,
                edges_only=True,
            ),
        ),
    ]
    assert explain[1][2] == "subsets" and explain[3][2] == "subsets"
    run.explain([("a", "likes", "b")], n_hops=0)  # 0 hops is a filter too
    assert len(asked) == 3 and asked[-1][1].n_hops == 0


def test_training_subsets_index_the_file_once_and_filter_per_pair(run, tmp_path, monkeypatch):
    built, filtered = [], []

    class Index:
        def filter(self, h, t, opts):
            filtered.append((h, t, opts))
            return types.SimpleNamespace(triple_rows=[h, t])

    def load_or_build(*args):
        built.append(args)
        return Index()

    monkeypatch.setattr(GraphIndex, "load_or_build", load_or_build)
    train = tmp_path / "train.txt"
    opts = FilterOptions(n_hops=1)
    subsets = run.training_subsets(train, opts)
    assert subsets(0, 3) == [0, 3] and subsets(2, 1) == [2, 1]
    ((path, ids, n),) = built
    ids_by_hand = [[ENTS.index(h), RELS.index(r), ENTS.index(t)] for h, r, t in TRAIN]
    assert path == train and ids.tolist() == ids_by_hand and n == 7
    assert filtered == [(0, 3, opts), (2, 1, opts)]


def test_explain_logs_unless_quiet(run, explain, caplog):
    # the real switches: quiet=True runs with the tracegraph logger silenced
    levels = []
    explain_recorder = run_module.run_explain

    def run_explain(cfg, subsets, **kw):
        levels.append(logging.getLogger("tracegraph").isEnabledFor(logging.INFO))
        return explain_recorder(cfg, subsets, **kw)

    from tracegraph.runtime import progress

    run_module.run_explain = run_explain
    try:
        run_module.silenced, run_module.setup_logging = progress.quiet, progress.setup_logging
        run.explain([("a", "likes", "b")], quiet=True)
        run.explain([("a", "likes", "b")])
    finally:
        run_module.run_explain = explain_recorder
    assert levels == [False, True]
