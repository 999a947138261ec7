"""Every option of `evaluate`, `explain`, `filter` and `tune` reaches the setting it names.

What each command hands on (the run it opens, the settings object, the filter options, the
driver's arguments) is recorded by stand-ins and checked against tables written from the options'
help: each option, given alone, must change its own setting and no other (tests/flag_tables.py);
an option added without a row fails.
"""

import json

import pytest

from tests.conftest import run_cli
from tests.flag_tables import FakeRun, misrouted, options_of, plain, stand_in, tabled


@pytest.fixture
def seen(monkeypatch):
    import tracegraph.kg.explain.tracin.explain as explain_module
    import tracegraph.kg.model.tune as tune_module
    import tracegraph.kg.outputs as outputs
    import tracegraph.kg.run as run_module

    import torch

    got = {"threads": 0}
    FakeRun.opened = []
    monkeypatch.setattr(torch, "set_num_threads", lambda n: got.__setitem__("threads", n))
    monkeypatch.setattr(run_module, "Run", FakeRun)

    def fake_explain(cfg, subsets=None, run=None, questions=None):
        got["explain"] = cfg
        summary = dict.fromkeys(("explained", "requested", "failed", "skipped_existing", "elapsed_seconds"), 0)
        return {**summary, "unresolved": []}

    def fake_tune(cfg):
        got["tune"] = cfg
        return {"best_trial": 0, "best_valid_mrr": 0.0, "best_preset": "p"}

    stand_in(monkeypatch, outputs, "evaluate_files", got, "evaluate", {"metrics": {}, "output_dir": "x"})
    monkeypatch.setattr(outputs, "explain_files", fake_explain)
    monkeypatch.setattr(outputs, "prepare_output_dir", lambda *a: None)
    monkeypatch.setattr(explain_module, "explain_questions", lambda cfg, run: [])
    monkeypatch.setattr(tune_module, "tune", fake_tune)
    return got


def args_of(table, files) -> list[str]:
    out = []
    for option, value, *_ in table:
        out += [option] if value is None else [option, files.get(value, value)]
    return [str(a) for a in out]


@pytest.fixture
def files(tmp_path):
    """Input files the options name, by the word the tables use for them."""
    out = {w: tmp_path / f"{w}.txt" for w in ("TRAIN", "VALID", "TEST", "FILTER", "NAMES", "EDGEMAP", "SPACE")}
    for f in out.values():
        f.write_text("a\tr\tb\n")
    out["OUT"] = tmp_path / "out"
    return out


# option, value typed (a word of `files` for a file), where it lands, value expected (a word of `files` for a file)
EVALUATE = [
    ("--test", "TEST", "test", "TEST"),
    ("--unseen", "drop", "unseen", "drop"),
    ("--train", "TRAIN", "run.train", "TRAIN"),
    ("--valid", "VALID", "run.valid", "VALID"),
    ("--filter", "FILTER", "filter_files", ["FILTER"]),
    ("--output-dir", "OUT", "output_dir", "OUT"),
    ("--top-k", "3", "top_k", 3),
    ("--batch-size", "32", "batch_size", 32),
    ("--entity-chunk", "7", "entity_chunk", 7),
    ("--device", "cpu", "device", "cpu"),
]
EXPLAIN = [
    ("--train", "TRAIN", "train", "TRAIN"),
    ("--output-dir", "OUT", "output_dir", "OUT"),
    ("--checkpoints", "best", "checkpoints", ["best"]),
    ("--method", "tracin-margin", "method", "tracin-margin"),
    ("--engine", "vmap", "engine", "vmap"),
    ("--loss", "train-loss", "loss", "train-loss"),
    ("--layers", "last", "layers", "last"),
    ("--side", "head", "side", "head"),
    ("--top-k", "5", "top_k", 5),
    ("--batch-size", "16", "batch_size", 16),
    ("--precision", "bf16", "precision", "bf16"),
    ("--device", "cpu", "device", "cpu"),
    ("--devices", "cpu,cpu", "devices", ["cpu", "cpu"]),
    ("--node-name-dict", "NAMES", "node_name_dict", "NAMES"),
    ("--edge-map", "EDGEMAP", "edge_map", "EDGEMAP"),
    ("--start-index", "2", "start_index", 2),
    ("--max-triples", "9", "max_triples", 9),
    ("--skip-existing", None, "skip_existing", True),
    ("--skip-unresolved", None, "skip_unresolved", True),
    ("--label-smoothing", "0.05", "label_smoothing", 0.05),
    ("--num-threads", "3", "torch threads", 3),  # this process's, not a setting of the explanation
]
# the filter options, as `filter` and `explain --n-hops` pass them on (FilterOptions' field names)
FILTER = [
    ("--n-hops", "3", "n_hops", 3),
    ("--min-degree", "4", "min_degree", 4),
    ("--no-preserve-test-edges", None, "preserve_test_edges", False),
    ("--strict-hop-constraint", None, "strict_hop", True),
    ("--path-filtering", None, "path_filtering", True),
    ("--max-total-path-length", "5", "max_path_length", 5),
    ("--strict-path-filtering", None, "strict_path", True),
    ("--save-edges-only", None, "edges_only", True),
]
TUNE = [
    ("--train", "TRAIN", "train", "TRAIN"),
    ("--valid", "VALID", "valid", "VALID"),
    ("--search-space", "SPACE", "search_space", "SPACE"),
    ("--output-dir", "OUT", "output_dir", "OUT"),
    ("--test", "TEST", "test", "TEST"),
    ("--preset", "umls", "preset", "umls"),
    ("--trials", "3", "trials", 3),
    ("--timeout", "60", "timeout", 60.0),
    ("--devices", "cpu,cuda:1", "devices", ["cpu", "cuda:1"]),
    ("--study-name", "mine", "study_name", "mine"),
    ("--storage", "sqlite:///s.db", "storage", "sqlite:///s.db"),
    ("--seed", "5", "seed", 5),
    ("--num-threads", "2", "num_threads", 2),
]


def _want(want, files):
    if isinstance(want, list):
        return [str(files[w]) if w in files else w for w in want]
    return str(files[want]) if isinstance(want, str) and want in files else want


def _table(table, files):
    """The table with its file words as the paths of ``files``."""
    return [(o, None if v is None else str(files.get(v, v)), w, _want(want, files)) for o, v, w, want in table]


@pytest.mark.parametrize(
    "command,table,elsewhere",
    [
        ("evaluate", EVALUATE, {"--model-dir", "--dataset"}),  # the run itself; a dataset's split files
        # the questions: their own tests; --overwrite: tests/kg/test_explain_outputs.py
        ("explain", EXPLAIN + FILTER, {"--model-dir", "--dataset", "--test-triples", "--overwrite"}),
        # the inputs and output (checked by the filter's tests), --cache: tests/kg/test_neighborhood*.py
        ("filter", FILTER, {"--train", "--dataset", "--test-triples", "--output", "--cache"}),
        ("tune", TUNE, set()),
    ],
)
def test_every_option_is_in_its_table(command, table, elsewhere):
    assert options_of(command) - elsewhere == tabled(table)


def test_each_evaluate_option_alone_changes_its_own_setting(seen, files, tmp_path):
    def invoke(extra):
        assert run_cli(["evaluate", "--model-dir", tmp_path, "--test", files["TEST"], *extra]).exit_code == 0
        run = FakeRun.opened[-1]
        assert seen["evaluate"]["model_dir"] is run
        return {**seen["evaluate"], "run.train": run.data_files["train"], "run.valid": run.data_files["valid"]}

    assert misrouted(_table(EVALUATE, files), invoke, lambda got, w: plain(got[w]), fixed={"--test"}) == {}


def test_each_explain_option_alone_changes_its_own_setting(seen, files, tmp_path):
    base = ["explain", "--model-dir", tmp_path, "--test-triples", files["TEST"], "--n-hops", "2"]
    base += ["--train", files["TRAIN"], "-o", files["OUT"]]

    def invoke(extra):
        seen["threads"] = 0
        res = run_cli([*base, *extra])
        assert res.exit_code == 0, res.output
        ((train, opts),) = FakeRun.opened[-1].subsets_asked
        return seen["explain"], opts, seen["threads"]

    def landed(got, where):
        return got[2] if where == "torch threads" else plain(getattr(got[0], where))

    fixed = {"--train", "--output-dir"}
    assert misrouted(_table(EXPLAIN, files), invoke, landed, fixed) == {}
    filter_rows = _table([r for r in FILTER if r[0] != "--n-hops"], files)
    assert misrouted(filter_rows, invoke, lambda got, w: getattr(got[1], w)) == {}
    n_hops = _table([r for r in FILTER if r[0] == "--n-hops"], files)
    assert invoke(["--n-hops", n_hops[0][1]])[1].n_hops == n_hops[0][3]


def test_each_filter_option_alone_changes_the_filter_written_in_the_summary(tmp_path):
    train = tmp_path / "train.txt"
    train.write_text("a\tr\tb\nb\tr\tc\nc\tr\td\na\tr\tc\n")
    tests = tmp_path / "tests.txt"
    tests.write_text("a\tr\td\nb\tr\td\n")
    runs = iter(range(100))

    def invoke(extra):
        out = tmp_path / f"f{next(runs)}"
        assert run_cli(["filter", "--train", train, "--test-triples", tests, "-o", out, *extra]).exit_code == 0
        return json.loads((out / "filter_summary.json").read_text())["options"]

    assert misrouted(FILTER, invoke, lambda got, w: got[w]) == {}


def test_each_tune_option_alone_changes_its_own_setting(seen, files):
    required = [r for r in TUNE if r[0] in ("--train", "--valid", "--search-space", "--output-dir")]
    table = _table(TUNE, files)

    def invoke(extra):
        res = run_cli(["tune", *args_of(required, files), *extra])
        assert res.exit_code == 0, res.output
        return seen["tune"]

    fixed = {r[0] for r in required}
    assert misrouted(table, invoke, lambda got, w: plain(getattr(got, w)), fixed) == {}
