"""report/build.py by hand: a run's report assembled from its folder, with a stand-in run (its
config, data files, id maps and a recording ``evaluate``) instead of a trained model.

References: docs/report.md and the docstrings: where the test ranks come from (``--test``, else
``evaluation/ranks.csv``, else the run's test file, else a note) with each source's wording; which
explained triples get a rank or score from ranks.csv or ranked now, and when nothing is ranked now
(no training file, data files past 500 MiB — sparse files here — labels the run does not know);
the cards written out by hand; the sections in page order, each given the run's inputs (recorded
by stand-ins); the page's title, the ``.html`` rule and no file left by a failure.
"""

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.data.datafiles import record_data_files, resolve_data_files
from tracegraph.report import build as B
from tracegraph.report import drawing as D
from tracegraph.report import sections as S
from tracegraph.report.explanations import ExplainedTriple
from tracegraph.report.html import Section

MiB = 2**20


class FakeRun:
    """A run as the report reads it: folder, config, data files, id maps, labels and ``evaluate``."""

    def __init__(self, path, config=None, data_files=None, ranks=None, entities=("a", "b", "c"), relations=("r",)):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.config = config if config is not None else {}
        self.data_files = data_files if data_files is not None else {}
        self.entities, self.relations = list(entities), list(relations)
        self.labels = SimpleNamespace(relation_names={})
        self.ranks = ranks  # what evaluate returns, or an exception to raise
        self.calls = []

    def evaluate(self, test, *args, **kwargs):
        self.calls.append((test, args, kwargs))
        if isinstance(self.ranks, Exception):
            raise self.ranks
        return SimpleNamespace(ranks=self.ranks, metrics={})


def ranks_frame(rows, score=True):
    cols = ["head", "relation", "tail", "side", "rank"] + (["score"] if score else [])
    return pd.DataFrame(rows, columns=cols)


def triple(head="a", rel="r", tail="b", side="tail", rank=None, score=None, source="explain"):
    return ExplainedTriple(
        head,
        rel,
        tail,
        (head, rel, tail),
        pd.DataFrame(columns=["TrainHead", "TrainRel", "TrainTail", "TracInScore", "Role"]),
        Path("x.json"),
        side=side,
        rank=rank,
        rank_source=source if rank is not None else "",
        score=score,
    )


def state(t):
    return (t.rank, t.rank_source, t.score)


# ------------------------------------------------------------------ where the test ranks come from


def write_ranks_csv(run, text):
    d = run.path / "evaluation"
    d.mkdir(exist_ok=True)
    (d / "ranks.csv").write_text(text, encoding="utf-8")
    return d / "ranks.csv"


def test_a_test_file_given_is_ranked_now_before_any_saved_ranks(tmp_path):
    given = ranks_frame([("a", "r", "b", "tail", 1.0, 0.5)])
    run = FakeRun(tmp_path / "run", data_files={"test": "t.txt"}, ranks=given)
    write_ranks_csv(run, "head,relation,tail,side,rank\na,r,b,tail,3\n")
    ranks, source = B.test_ranks(run, "my<test>.txt")
    assert ranks is given and run.calls == [("my<test>.txt", (), {})]
    assert source == "computed now on <code>my&lt;test&gt;.txt</code>"


def test_saved_ranks_are_read_as_text_labels_and_beat_the_runs_test_file(tmp_path):
    run = FakeRun(tmp_path / "r&d", data_files={"test": "t.txt"})
    saved = write_ranks_csv(run, "head,relation,tail,side,rank,score\nNA,null,007,tail,2.5,1.25\n1,r,,head,1,-0.5\n")
    ranks, source = B.test_ranks(run)
    assert run.calls == []  # nothing ranked now
    assert ranks.to_dict("list") == {
        "head": ["NA", "1"],  # labels stay text: no NaN, no number
        "relation": ["null", "r"],
        "tail": ["007", ""],
        "side": ["tail", "head"],
        "rank": [2.5, 1.0],
        "score": [1.25, -0.5],
    }
    where = str(saved).replace("&", "&amp;")
    assert source == f"read from <code>{where}</code> (written by <code>tracegraph evaluate</code>)"
    assert B.test_ranks(run, None)[1] == source


@pytest.mark.parametrize(
    ("header", "missing"),
    [
        ("head,relation,tail,score", "rank, side"),
        ("relation,tail,side,rank", "head"),
        ("head,tail,side,rank", "relation"),
    ],
)
def test_saved_ranks_without_a_needed_column_are_refused_naming_the_file(tmp_path, header, missing):
    run = FakeRun(tmp_path / "run")
    saved = write_ranks_csv(run, header + "\n")
    with pytest.raises(DataError) as err:
        B.test_ranks(run)
    assert str(err.value) == f"{saved}: not a ranks.csv of `tracegraph evaluate`: no column {missing}"


def test_without_saved_ranks_the_runs_test_file_is_ranked_else_a_note(tmp_path):
    got = ranks_frame([("a", "r", "b", "tail", 1.0, 0.5)])
    run = FakeRun(tmp_path / "run", data_files={"train": "tr.txt", "test": "/data/t&1.txt"}, ranks=got)
    ranks, source = B.test_ranks(run)
    assert ranks is got and run.calls == [("/data/t&1.txt", (), {})]
    assert source == "computed now on the run's test file <code>/data/t&amp;1.txt</code>"
    for files in ({}, {"train": "tr.txt"}, {"test": None}, {"test": ""}):
        run = FakeRun(tmp_path / "run", data_files=files, ranks=got)
        assert B.test_ranks(run) == (
            None,
            "The run records no test file that still exists and none was given: pass <code>--test FILE</code>.",
        )
        assert run.calls == []


# ------------------------------------------------------------------ ranks and scores of explained triples


def data_files(tmp_path, sizes):
    files = {}
    for name, size in sizes.items():
        p = tmp_path / f"{name}.txt"
        with open(p, "wb"):
            pass
        os.truncate(p, size)  # sparse: the size is recorded, nothing is written
        files[name] = str(p)
    return files


def test_ranks_csv_fills_missing_ranks_and_scores_on_the_explained_side(tmp_path):
    run = FakeRun(tmp_path / "run")  # no training file: nothing is ranked now
    ranks = ranks_frame(
        [
            (1, "r", "b", "tail", 4.0, 0.75),  # ids read as numbers still match the labels
            ("1", "r", "b", "head", 9.0, -1.0),
            ("c", "r", "a", "tail", 2.0, 0.25),
            ("a", "r", "c", "tail", 5.0, 3.0),
        ]
    )
    plain, head_side, known_score, known_rank, absent = (
        triple("1", "r", "b"),
        triple("1", "r", "b", side="head"),
        triple("c", "r", "a", score=9.5),
        triple("a", "r", "c", rank=1.0),
        triple("b", "r", "a"),
    )
    B.fill_ranks(run, [plain, head_side, known_score, known_rank, absent], ranks)
    assert state(plain) == (4.0, "ranks.csv", 0.75) and type(plain.score) is float
    assert state(head_side) == (9.0, "ranks.csv", -1.0)
    assert state(known_score) == (2.0, "ranks.csv", 9.5)  # a recorded score is kept
    assert state(known_rank) == (1.0, "explain", None)  # a recorded rank is kept
    assert state(absent) == (None, "", None) and run.calls == []
    no_score = triple("c", "r", "a")
    B.fill_ranks(run, [no_score], ranks_frame([("c", "r", "a", "tail", 2.0)], score=False))
    assert state(no_score) == (2.0, "ranks.csv", None)
    B.fill_ranks(run, [absent], None)
    assert state(absent) == (None, "", None)


def test_triples_still_lacking_a_rank_or_score_are_ranked_now_with_the_run(tmp_path):
    now = ranks_frame(
        [
            ("a", "r", "b", "tail", 3.0, 1.5),
            ("a", "r", "b", "head", 7.0, -2.0),
            ("c", "r", "a", "tail", 6.0, 0.5),
            ("a", "r", "c", "tail", 8.0, 4.0),
        ]
    )
    run = FakeRun(tmp_path / "run", data_files=data_files(tmp_path, {"train": 10, "test": 5}), ranks=now)
    unranked, head_side, scored, ranked, from_csv, not_listed = (
        triple("a", "r", "b"),
        triple("a", "r", "b", side="head"),
        triple("c", "r", "a", score=0.125),
        triple("a", "r", "c", rank=2.0),
        triple("b", "r", "c"),
        triple("b", "r", "a"),
    )
    csv = ranks_frame([("b", "r", "c", "tail", 1.0, 0.0)])
    B.fill_ranks(run, [unranked, head_side, scored, ranked, from_csv, not_listed], csv)
    assert run.calls == [
        ([("a", "r", "b"), ("a", "r", "b"), ("c", "r", "a"), ("a", "r", "c"), ("b", "r", "a")], (), {"top_k": 0})
    ]
    assert state(unranked) == (3.0, "computed", 1.5) and type(unranked.rank) is float
    assert state(head_side) == (7.0, "computed", -2.0)
    assert state(scored) == (6.0, "computed", 0.125)
    assert state(ranked) == (2.0, "explain", 4.0)
    assert state(from_csv) == (1.0, "ranks.csv", 0.0)
    assert state(not_listed) == (None, "", None)


def test_nothing_is_ranked_now_without_a_training_file_past_500_mib_or_when_nothing_lacks(tmp_path):
    now = ranks_frame([("a", "r", "b", "tail", 3.0, 1.5)])
    cases = [
        ({"test": 10}, False),
        ({"train": 0, "test": 10}, False),  # an empty name is no training file either
        ({"train": 300 * MiB, "valid": 100 * MiB, "test": 100 * MiB}, True),  # 500 MiB exactly: read
        ({"train": 300 * MiB, "valid": 100 * MiB, "test": 100 * MiB + 1}, False),  # one byte more: not
    ]
    for i, (sizes, ranked_now) in enumerate(cases):
        d = tmp_path / str(i)
        d.mkdir()
        files = data_files(d, sizes)
        if sizes.get("train") == 0:
            files["train"] = ""
        run = FakeRun(d / "run", data_files=files, ranks=now)
        t = triple()
        B.fill_ranks(run, [t], None)
        assert (len(run.calls), state(t)) == ((1, (3.0, "computed", 1.5)) if ranked_now else (0, (None, "", None))), (
            sizes
        )
    run = FakeRun(tmp_path / "run", data_files=data_files(tmp_path, {"train": 10}), ranks=now)
    done = triple(rank=1.0, score=0.5)
    B.fill_ranks(run, [done], None)
    assert run.calls == [] and state(done) == (1.0, "explain", 0.5)


@pytest.mark.parametrize("error", [TracegraphError("entity 'zz' is not in the id map"), KeyError("zz")])
def test_labels_the_run_does_not_know_leave_a_dash(tmp_path, error):
    run = FakeRun(tmp_path / "run", data_files=data_files(tmp_path, {"train": 10}), ranks=error)
    t = triple("zz", "r", "b")
    B.fill_ranks(run, [t], None)
    assert len(run.calls) == 1 and state(t) == (None, "", None)
    run.ranks = ValueError("a bug, not a label")
    with pytest.raises(ValueError, match="a bug"):
        B.fill_ranks(run, [t], None)


# ------------------------------------------------------------------ cards


def nec_doc():
    stats = {"delta_hits@1": {"mean": 0.4}}
    return {
        "summary": {
            "tracin-margin-path@2": {"delta_hits@1": {"mean": 0.9}},
            "tracin-margin-path@4": stats,
            "neighbour@4": {"delta_hits@1": {"mean": 0.125}},
            "neighbour@2": {"delta_hits@1": {"mean": 0.7}},
            "far@2": {"delta_hits@1": {"mean": 0.6}},
        },
        "seeds": {},
        "n_facts": 3,
    }


def card(title, value):
    return f'<div class="card">{title}<b>{value}</b></div>'


def test_cards_sizes_from_the_config_metrics_explained_count_and_necessity(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "training_curves", lambda *a, **k: b"png")
    monkeypatch.setattr(D, "subgraph", lambda *a, **k: b"png")
    monkeypatch.setattr(B, "necessity_section", lambda *a: Section("necessity", ""))
    run = FakeRun(
        tmp_path / "run",
        config={"sizes": {"entities": "<5>", "relations": 2, "train_triples": 40}},
        entities=["x"] * 7,
    )
    write_ranks_csv(run, "head,relation,tail,side,rank\na,r,b,tail,1\na,r,b,head,4\nc,r,a,tail,20\n")
    explained = tmp_path / "why"
    explained.mkdir()
    for i, (h, t) in enumerate([("a", "b"), ("c", "a")]):
        doc = {"test_triple": {"head": h, "relation": "r", "tail": t, "rank": 1, "score": 0.5}, "rows": []}
        (explained / f"triple_{i}_tracin.json").write_text(json.dumps(doc))
    cards = B.report_sections(run, explanations=[explained], necessity=nec_doc())[0]
    assert cards.key == "cards"
    # MRR (1 + 1/4 + 1/20) / 3 = 0.4333; Hits@10 2 of 3
    assert (
        cards.html
        == "<div class='cards'>"
        + "".join(
            [
                card("entities", "&lt;5&gt;"),
                card("relations", "2"),
                card("training triples", "40"),
                card("test MRR / Hits@10 (both sides)", "0.433 / 0.667"),
                card("explained test triples", "2"),
                card(  # the necessity module's card: no excess over neighbour given, so not green
                    "necessity ΔH@1 (3 facts): tracin-margin-path / neighbour / far",
                    "<span class='bad'>0.400</span> / 0.125 / —",
                ),
            ]
        )
        + "</div>"
    )


def test_cards_of_a_bare_run_count_its_id_maps(tmp_path):
    run = FakeRun(tmp_path / "run", config={"sizes": {}}, entities=["x"] * 7, relations=["r", "s"])
    assert B._cards(run, None, [], None).html == (
        "<div class='cards'>" + card("entities", "7") + card("relations", "2") + "</div>"
    )
    assert B._cards(run, ranks_frame([]), [], {"summary": {"far@1": {}, "neighbour@1": {}}}).html == (
        "<div class='cards'>" + card("entities", "7") + card("relations", "2") + "</div>"
    )
    one = {"summary": {"path@3": {"delta_hits@1": {"mean": -0.5}}, "far@3": {"delta_hits@1": {"mean": 0.25}}}}
    assert B._cards(FakeRun(tmp_path / "r2"), None, [], one).html.endswith(
        card("necessity ΔH@1: path / neighbour / far", "<span class='bad'>-0.500</span> / — / 0.250") + "</div>"
    )


# ------------------------------------------------------------------ the sections and the page


class Stand:
    """Stands in for one section function: records its arguments, returns a marked section."""

    def __init__(self, key, calls):
        self.key, self.calls = key, calls

    def __call__(self, *args, **kwargs):
        self.calls.append((self.key, args, kwargs))
        return Section(self.key, f"<{self.key}>")


@pytest.fixture
def stands(monkeypatch):
    calls = []
    for fn, key in [
        ("training_section", "training"),
        ("metrics_section", "metrics"),
        ("explained_section", "explanations"),
        ("necessity_section", "necessity"),
        ("settings_section", "settings"),
    ]:
        monkeypatch.setattr(B, fn, Stand(key, calls))
    return calls


def explanation_dir(path, head="a"):
    path.mkdir(parents=True)
    doc = {"test_triple": {"head": head, "relation": "r", "tail": "b"}, "rows": []}
    (path / "triple_0_tracin.json").write_text(json.dumps(doc))
    return path


def test_sections_in_page_order_each_given_the_runs_inputs(tmp_path, stands):
    config = {"train": {"loss": "bce", "epochs": 2}, "sizes": {"entities": 3, "relations": 1}}
    run = FakeRun(tmp_path / "run", config=config, data_files={"train": "", "test": "t.txt"})
    run.labels.relation_names = {"r": "treats"}
    history = [{"epoch": 1, "loss": 0.5}, {"epoch": 2, "loss": 0.25}]
    (run.path / "training_history.json").write_text(json.dumps(history))
    write_ranks_csv(run, "head,relation,tail,side,rank,score\nc,r,a,tail,2,0.5\na,r,b,tail,3,1.5\n")
    one, two = explanation_dir(tmp_path / "e1"), explanation_dir(tmp_path / "e2", head="c")
    nec_dir = tmp_path / "nec"
    nec_dir.mkdir()
    (nec_dir / "necessity.json").write_text(json.dumps(nec_doc()))
    marks = {("a", "r", "b"): {("a", "r", "c")}}
    got = B.report_sections(
        run,
        explanations=[one, two],
        necessity=nec_dir,
        marks=marks,
        mark_label="mechanism",
        n_pro=7,
        n_opp=3,
        explained_title="Five edges",
        explained_intro="<p>why</p>",
    )
    assert [s.key for s in got] == ["cards", "training", "metrics", "explanations", "necessity", "settings"]
    assert [s.html for s in got[1:]] == ["<training>", "<metrics>", "<explanations>", "<necessity>", "<settings>"]
    (_, t_args, t_kw), (_, m_args, m_kw), (_, x_args, x_kw), (_, n_args, n_kw), (_, s_args, s_kw) = stands
    assert (t_args, t_kw) == ((history, "training loss (bce)", config), {})
    ranks, source, names = m_args
    assert ranks[["head", "rank"]].values.tolist() == [["c", 2.0], ["a", 3.0]] and m_kw == {}
    assert source.startswith("read from <code>") and names == {"r": "treats"}
    triples = x_args[0]
    assert [(t.triple, t.rank, t.rank_source, t.score) for t in triples] == [
        (("a", "r", "b"), 3.0, "ranks.csv", 1.5),  # each directory's triples in the order given
        (("c", "r", "b"), None, "", None),  # not in ranks.csv; no training file to rank it now
    ]
    assert x_kw == {
        "marks": marks,
        "mark_label": "mechanism",
        "n_pro": 7,
        "n_opp": 3,
        "title": "Five edges",
        "intro": "<p>why</p>",
        "graph": None,  # no training file: no hub check
    }
    assert n_args == (nec_doc(), str(nec_dir)) and n_kw == {}
    assert s_args == (config,) and s_kw == {}
    assert run.calls == []


def test_a_bare_run_gets_cards_training_metrics_and_settings(tmp_path, stands):
    run = FakeRun(tmp_path / "run", config={"train": {"epochs": 1}})
    got = B.report_sections(run)
    assert [s.key for s in got] == ["cards", "training", "metrics", "settings"]
    (_, t_args, _), (_, m_args, _), (_, s_args, _) = stands
    assert t_args == ([], "training loss", {"train": {"epochs": 1}})  # no history file, no loss recorded
    assert m_args == (
        None,
        "The run records no test file that still exists and none was given: pass <code>--test FILE</code>.",
        {},
    )
    assert s_args == ({"train": {"epochs": 1}},)
    stands.clear()
    nec = nec_doc()
    got = B.report_sections(FakeRun(tmp_path / "r2", config={"train": None}), necessity=nec)
    assert [s.key for s in got] == ["cards", "training", "metrics", "necessity", "settings"]
    assert stands[0][1][1] == "training loss" and stands[2][1] == (nec, "")  # a dict: no file named


def test_the_page_is_titled_by_the_run_and_written_only_as_html(tmp_path, stands):
    run = FakeRun(tmp_path / "runs" / "umls<1>")
    for name in ("report.html", "R.HTM", "x.htm"):
        out = B.report_run(run, tmp_path / name, n_pro=4, n_opp=6)
        assert out == tmp_path / name
        page = out.read_text(encoding="utf-8")
        assert "<title>tracegraph report: umls&lt;1&gt;</title>" in page
        assert (
            f"<h1>tracegraph report: umls&lt;1&gt;</h1><p class='sub'>ConvE link prediction run {tmp_path}/runs/umls&lt;1&gt;</p>"
            in page
        )
        assert "<training><metrics><settings></body>" in page
    for name in ("report.txt", "report", "report.html.gz"):
        with pytest.raises(TracegraphError) as err:
            B.report_run(run, tmp_path / name)
        assert str(err.value) == f"-o {tmp_path / name}: the report is one HTML file; name it .html"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["R.HTM", "report.html", "runs", "x.htm"]


def test_n_pro_and_n_opp_reach_the_explained_tables(tmp_path, stands):
    run = FakeRun(tmp_path / "run")
    B.report_run(run, tmp_path / "r.html", explanations=[explanation_dir(tmp_path / "e")], n_pro=4, n_opp=6)
    (kw,) = [k for key, _, k in stands if key == "explanations"]
    assert (kw["n_pro"], kw["n_opp"], kw["marks"], kw["mark_label"]) == (4, 6, None, "marked")
    assert (kw["title"], kw["intro"]) == ("Explained test triples", "")
    stands.clear()
    B.report_run(run, tmp_path / "r.html", explanations=[explanation_dir(tmp_path / "f")])
    (kw,) = [k for key, _, k in stands if key == "explanations"]
    assert (kw["n_pro"], kw["n_opp"]) == (10, 5)


def test_a_report_with_a_bad_input_stops_and_leaves_no_file(tmp_path):
    run = FakeRun(tmp_path / "run")
    with pytest.raises(DataError, match="not a directory"):
        B.report_run(run, tmp_path / "a.html", explanations=[tmp_path / "missing"])
    with pytest.raises(DataError, match="necessity.json not found"):
        B.report_run(run, tmp_path / "a.html", necessity=tmp_path / "missing")
    write_ranks_csv(run, "head,side\n")
    with pytest.raises(DataError, match="no column rank, relation, tail"):
        B.report_run(run, tmp_path / "a.html")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_whole_page_shows_the_filled_rank_the_history_and_the_settings(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "training_curves", lambda *a, **k: b"png")
    monkeypatch.setattr(D, "subgraph", lambda *a, **k: b"png")
    run = FakeRun(tmp_path / "run", config={"train": {"loss": "bce", "seed": 3}})
    (run.path / "training_history.json").write_text(json.dumps([{"epoch": 1, "loss": 0.5, "seconds": 2}]))
    write_ranks_csv(run, "head,relation,tail,side,rank,score\na,r,b,tail,3,1.5\n")
    page = B.report_run(run, tmp_path / "r.html", explanations=[explanation_dir(tmp_path / "e")]).read_text()
    # the score is the sigmoid of the logit 1.5: 1 / (1 + e^-1.5) = 0.8176
    assert (
        "filtered tail rank <b>3</b> (from the test metrics); score 0.818 (sigmoid of the model's logit 1.50)" in page
    )
    assert "<p>1 epochs recorded, 2 s of training; no validation recorded.</p>" in page
    assert "<div><span>train.seed</span> 3</div>" in page


class RecordedRun(FakeRun):
    """A run whose data files are recorded with their hashes and found as a real run finds them."""

    @property
    def data_files(self):
        return resolve_data_files(self.path, self.config)

    @data_files.setter
    def data_files(self, value):
        pass


def moved_run(tmp_path, ranks=None):
    """A run trained on files that were deleted since (``data_files`` then raises DataError)."""
    files = {}
    for name in ("train", "test"):
        files[name] = tmp_path / f"{name}.txt"
        files[name].write_text("a\tr\tb\n")
    run = RecordedRun(tmp_path / "run", ranks=ranks)
    run.config = {"data_files": record_data_files(files, run.path)}
    assert set(run.data_files) == {"train", "test"}
    for p in files.values():
        p.unlink()
    with pytest.raises(DataError, match="is missing"):
        run.data_files
    return run


def test_a_run_whose_data_files_are_gone_reports_from_what_it_recorded(tmp_path, stands):
    run = moved_run(tmp_path, ranks=ranks_frame([("a", "r", "b", "tail", 1.0, 0.5)]))
    write_ranks_csv(run, "head,relation,tail,side,rank,score\na,r,b,tail,3,1.5\n")
    done = triple(rank=2.0, score=0.5)
    B.fill_ranks(run, [done], B.test_ranks(run)[0])  # nothing to rank now: the data files are not needed
    assert state(done) == (2.0, "explain", 0.5)
    missing = triple("b", "r", "a")
    B.fill_ranks(run, [missing], None)  # ranked now only "when its data files exist": else "—"
    assert state(missing) == (None, "", None) and run.calls == []
    B.report_run(run, tmp_path / "r.html")
    assert (tmp_path / "r.html").is_file()
    (run.path / "evaluation" / "ranks.csv").unlink()
    assert B.test_ranks(run) == (  # the recorded test file no longer exists
        None,
        "The run records no test file that still exists and none was given: pass <code>--test FILE</code>.",
    )


def test_saved_ranks_keep_labels_that_look_like_numbers(tmp_path):
    run = FakeRun(tmp_path / "run")
    write_ranks_csv(run, "head,relation,tail,side,rank,score\n007,08,1.50,tail,2,0.5\n10,20,30,head,1,0.25\n")
    ranks, _ = B.test_ranks(run)
    assert ranks[["head", "relation", "tail"]].values.tolist() == [["007", "08", "1.50"], ["10", "20", "30"]]
    t = triple("007", "08", "1.50")
    B.fill_ranks(run, [t], ranks)
    assert state(t) == (2.0, "ranks.csv", 0.5)


def test_a_test_file_given_reaches_the_metrics_of_the_page(tmp_path, stands):
    given = ranks_frame([("a", "r", "b", "tail", 1.0, 0.5)])
    run = FakeRun(tmp_path / "run", ranks=given)
    write_ranks_csv(run, "head,relation,tail,side,rank\na,r,b,tail,3\n")
    B.report_run(run, tmp_path / "r.html", test="picked.txt")
    assert run.calls == [("picked.txt", (), {})]
    (m_args,) = [a for key, a, _ in stands if key == "metrics"]
    assert m_args[0] is given and m_args[1] == "computed now on <code>picked.txt</code>"


def test_report_sections_show_10_proponents_and_5_opponents_by_default(tmp_path, stands):
    B.report_sections(FakeRun(tmp_path / "run"), explanations=[explanation_dir(tmp_path / "e")])
    (kw,) = [k for key, _, k in stands if key == "explanations"]
    assert (kw["n_pro"], kw["n_opp"]) == (10, 5)


def test_the_necessity_card_splits_k_from_the_last_at_sign(tmp_path):
    nec = {
        "summary": {
            "my@method@3": {"delta_hits@1": {"mean": 0.5}},
            "neighbour@3": {"delta_hits@1": {"mean": 0.25}},
            "far@3": {"delta_hits@1": {"mean": 0.0}},
        }
    }
    assert B._cards(FakeRun(tmp_path / "run"), None, [], nec).html.endswith(
        card("necessity ΔH@1: my@method / neighbour / far", "<span class='bad'>0.500</span> / 0.250 / 0.000") + "</div>"
    )
