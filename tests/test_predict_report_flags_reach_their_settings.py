"""Every option of `tracegraph predict` and `tracegraph report` reaches the setting it names.

Both commands open the run (`Run`) and hand it, with their settings, to one function:
`predict_command` and `report_run`. Here the run is a fake that keeps what it was opened with, and
both functions are recording stand-ins (no model is loaded, nothing is ranked or drawn); each
option, given alone on top of the required ones, must change its own settings and no other, to the
value its help promises (tests/flag_tables.py). The tables are written from the options' help, not
read from the code; an option added without a row fails.
"""

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.flag_tables import FakeRun, misrouted, options_of, plain, stand_in, tabled


# option as typed, the value typed (a tuple: the option repeated once per value), where it lands
# ("run.X": what the run was opened with), the value expected
PREDICT = [
    ("--model-dir", "run-dir", "run.path", "run-dir"),
    ("--head", "aspirin", "head", "aspirin"),
    ("--tail", "fever", "tail", "fever"),
    ("--relation", "treats", "relation", "treats"),
    ("--query", "aspirin treats", "query", ["aspirin", "treats"]),  # HEAD RELATION: two values after one flag
    ("--query-file", "queries.tsv", "query_file", "queries.tsv"),
    ("--triples", "triples.tsv", "triples", "triples.tsv"),
    ("--top-k", "3", "top_k", 3),
    ("--exclude-train", None, "exclude_train", True),
    ("--train", "train.txt", "run.train", "train.txt"),  # the training file --exclude-train reads
    ("--output", "answers.json", "output", "answers.json"),
    ("--device", "cpu", "run.device", "cpu"),
]
REPORT = [
    ("--explanations", ("expl-a", "expl-b"), "explanations", ["expl-a", "expl-b"]),
    ("--necessity", "necessity.json", "necessity", "necessity.json"),
    ("--test", "test.txt", "test", "test.txt"),
    ("--output", "page.html", "output", "page.html"),
    ("--top", "12", "n_pro", 12),  # rows of each proponent table ...
    ("--top", "12", "n_opp", 6),  # ... and half as many opponents
    ("--device", "cpu", "run.device", "cpu"),
]


@pytest.fixture
def seen(monkeypatch, tmp_path):
    """The arguments ``predict_command`` and ``report_run`` were handed, by their parameter names."""
    import tracegraph.kg.predictions as predictions
    import tracegraph.kg.run as run_module
    import tracegraph.report as report

    got = {}
    monkeypatch.setattr(run_module, "Run", FakeRun)
    stand_in(monkeypatch, predictions, "predict_command", got, "predict")
    stand_in(monkeypatch, report, "report_run", got, "report", Path("page.html"))
    monkeypatch.chdir(tmp_path)  # the paths typed are relative: nothing can land in the checkout
    (tmp_path / "run-dir").mkdir()  # report checks that RUN and --test exist before opening them
    (tmp_path / "test.txt").write_text("a\tr\tb\n")
    return got


def _landed(got, where):
    run = got["run"]  # the run predict_command and report_run were handed, opened by the command
    if where == "run.train":
        return plain(run.data_files.get("train"))
    return plain(getattr(run, where[4:]) if where.startswith("run.") else got[where])


def _invoke(seen, key, base):
    def invoke(extra):
        # the arguments as a shell splits them: --query's "HEAD RELATION" is two of them
        res = run_cli([*base, *" ".join(extra).split()])
        assert res.exit_code == 0, res.output
        return seen[key]

    return invoke


@pytest.mark.parametrize(
    "command,table,elsewhere",
    [
        ("predict", PREDICT, set()),
        ("report", REPORT, {"run_dir"}),  # RUN, the argument, not an option: its own test below
    ],
)
def test_every_option_is_in_its_table(command, table, elsewhere):
    assert options_of(command) - elsewhere == tabled(table)


def test_each_predict_option_alone_changes_its_own_settings(seen):
    invoke = _invoke(seen, "predict", ["predict", "--model-dir", "run-dir"])
    assert misrouted(PREDICT, invoke, _landed, fixed={"--model-dir"}) == {}


def test_each_report_option_alone_changes_its_own_settings(seen):
    assert misrouted(REPORT, _invoke(seen, "report", ["report", "run-dir"]), _landed) == {}


def test_report_opens_run_and_writes_run_report_html_by_default(seen):
    got = _invoke(seen, "report", ["report", "run-dir"])([])
    assert (plain(got["run"].path), plain(got["output"])) == ("run-dir", str(Path("run-dir", "report.html")))


@pytest.mark.parametrize("top,opponents", [("3", 5), ("9", 5), ("10", 5), ("30", 15)])
def test_report_shows_half_as_many_opponents_as_top_but_at_least_five(seen, top, opponents):
    got = _invoke(seen, "report", ["report", "run-dir", "--top", top])([])
    assert (got["n_pro"], got["n_opp"]) == (int(top), opponents)
