"""report/sections.py by hand: the settings, training, test-metrics and explained-triple sections
of the run report, against the HTML written out here and the promises of docs/report.md.

References: expected HTML fragments written out by hand (tables through a small table writer of
this file's own), metrics of hand-made ranks in exact fractions, the inputs the pictures are drawn
from recorded by stand-ins for the plotting functions (node ids, edge kinds and ranks worked out by
hand); one test draws the real pictures and checks only that they are PNG files.
"""

import base64
import math
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest

from tracegraph.report import sections as S
from tracegraph.report.explanations import ExplainedTriple

PNG = b"\x89PNG\r\n\x1a\nstand-in"


def img(png: bytes, alt: str) -> str:
    return f'<img alt="{alt}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def tbl(header, rows, classes=None, num_from=1):
    """The report's table layout, written independently: header cells, then numbers right-aligned."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = ""
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if classes and classes[i] else ""
        cells = "".join(f'<td class="num">{c}</td>' if j >= num_from else f"<td>{c}</td>" for j, c in enumerate(row))
        body += f"<tr{cls}>{cells}</tr>"
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class Recorder:
    """Stands in for a plotting function: records each call, returns fixed PNG bytes."""

    def __init__(self):
        self.calls = []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return PNG


@pytest.fixture
def drawings(monkeypatch):
    rec = {"subgraph": Recorder(), "training_curves": Recorder()}
    for name, r in rec.items():
        monkeypatch.setattr(S, name, r)
    return rec


# ------------------------------------------------------------------ settings


def test_settings_list_every_setting_with_nested_keys_joined_by_dots():
    config = {
        "train": {"epochs": 3, "model": {"embedding_dim": 200}, "optimizer": None, "note": "<b>&"},
        "model": {"embedding_dim": 200, "sub": {"k": 1}},
        "demo": {"model": "kept"},  # only train.model repeats the model's settings
        "empty": {},
        "a<b": None,
        "edge": "z" * 140,
        "long": "y" * 141,
        "sha256": "f96c80343eca191c177f95cfa9" + "0" * 38,
    }
    got = S.settings_section(config, extra={"cli": {"device": "cpu"}, "train": {"epochs": 9}})
    items = [
        ("train.epochs", "9"),  # extra settings replace recorded ones in place
        ("train.optimizer", "—"),
        ("train.note", "&lt;b&gt;&amp;"),
        ("model.embedding_dim", "200"),
        ("model.sub.k", "1"),
        ("demo.model", "kept"),
        ("empty", "{}"),
        ("a&lt;b", "—"),
        # 140 characters are shown whole; a token of 24 characters or more may break anywhere
        ("edge", '<span class="long">' + "z" * 140 + "</span>"),
        # longer values are cut to 140 in the middle (70 + … + 69), the whole value in the title
        ("long", f'<span title="{"y" * 141}"><span class="long">{"y" * 70}…{"y" * 69}</span></span>'),
        ("sha256", '<span class="long">f96c80343eca191c177f95cfa9' + "0" * 38 + "</span>"),
        ("cli.device", "cpu"),
    ]
    assert got.key == "settings"
    assert got.html == (
        "<h2>Settings</h2><p class='note'>From the run's <code>config.json</code>.</p><div class='settings'>"
        + "".join(f"<div><span>{k}</span> {v}</div>" for k, v in items)
        + "</div>"
    )


def test_settings_of_a_run_without_config_say_so_and_extra_settings_alone_are_listed():
    none = "<h2>Settings</h2><p class='note'>This run has no config.json.</p>"
    assert S.settings_section({}).html == none and S.settings_section({}, extra={}).html == none
    assert S.settings_section({}).key == "settings"
    only = S.settings_section({}, extra={"seed": 4})
    assert only.html.endswith("<div class='settings'><div><span>seed</span> 4</div></div>")
    assert S.settings_section({"train": "odd"}).html.endswith("<div><span>train</span> odd</div></div>")


# ------------------------------------------------------------------ training


FULL = {
    "model": {
        "embedding_dim": 200,
        "embedding_height": 10,
        "embedding_width": 20,
        "output_channels": 32,
        "reciprocal": True,
    },
    "train": {
        "epochs": 3,
        "batch_size": 128,
        "optimizer": "adam",
        "learning_rate": 0.003,
        "loss": "b<c&e",
        "training_mode": "1vsAll",
        "label_smoothing": 0.1,
        "seed": 7,
    },
    "source": {"format": "kgx"},
}
FULL_LINE = (
    "<p class='note'>ConvE, embeddings 200 (10×20), 32 channels, reciprocal relations; 3 epochs, batch 128, "
    "adam at learning rate 0.003, loss b&lt;c&amp;e, 1vsAll, label smoothing 0.1, seed 7; imported from kgx.</p>"
)


def test_training_counts_epochs_and_seconds_and_shows_the_best_valid_mrr(drawings):
    history = [
        {"epoch": 1, "loss": 0.9, "seconds": 1.25, "valid": {"mrr": 0.35}},
        {"epoch": 2, "loss": 0.5, "seconds": None, "valid": None},
        {"epoch": 3, "loss": 0.4, "valid": {"mrr": 0.2}},
        {"epoch": 4, "loss": 0.3, "seconds": 2.0, "valid": {"hits@1": 0.1}},
    ]
    got = S.training_section(history, "training loss (bce)", FULL)
    assert got.key == "training"
    assert got.html == (
        f"<h2>Training</h2>{FULL_LINE}{img(PNG, 'training curves')}"
        "<p>4 epochs recorded, 3 s of training; best valid MRR 0.350.</p>"  # 3.25 s; missing seconds count 0
    )
    assert drawings["training_curves"].calls == [((history, "training loss (bce)"), {})]


def test_training_without_validation_or_history_says_so(drawings):
    history = [{"epoch": 1, "loss": 2.0, "seconds": 0.6}, {"epoch": 2, "loss": 1.0, "seconds": 0.9, "valid": {}}]
    got = S.training_section(history)
    assert got.html == (
        f"<h2>Training</h2>{img(PNG, 'training curves')}<p>2 epochs recorded, 2 s of training; no validation recorded.</p>"
    )
    assert drawings["training_curves"].calls == [((history, "training loss"), {})]
    empty = S.training_section([], "x", {"train": {"seed": 1}})
    assert empty.key == "training"
    assert empty.html == (
        "<h2>Training</h2><p class='note'>seed 1.</p><p class='note'>This run records no training history "
        "(an imported model, or one trained elsewhere).</p>"
    )
    assert len(drawings["training_curves"].calls) == 1  # nothing drawn without history


@pytest.mark.parametrize(
    ("config", "line"),
    [
        ({}, ""),
        ({"train": None, "model": None, "source": None}, ""),
        # a phrase needs every one of its settings; reciprocal only when true; seed is read from train
        (
            {
                "model": {"embedding_dim": 8, "embedding_height": 2, "reciprocal": False, "seed": 3},
                "train": {"optimizer": "sgd", "learning_rate": None, "epochs": 0},
            },
            "<p class='note'>0 epochs.</p>",
        ),
        ({"source": {"format": "pykeen"}}, "<p class='note'>imported from pykeen.</p>"),
        ({"model": {"output_channels": 4}, "source": {}}, "<p class='note'>4 channels.</p>"),
        (
            {"model": {"reciprocal": True}, "train": {"label_smoothing": 0.0, "training_mode": "KvsAll"}},
            "<p class='note'>reciprocal relations; KvsAll, label smoothing 0.0.</p>",
        ),
    ],
)
def test_the_settings_line_names_only_what_the_run_records(config, line):
    html = S.training_section([], config=config).html
    assert html == f"<h2>Training</h2>{line}<p class='note'>This run records no training history " + (
        "(an imported model, or one trained elsewhere).</p>"
    )


# ------------------------------------------------------------------ test metrics


def ranks_frame(rows):
    return pd.DataFrame(rows, columns=["head", "relation", "tail", "side", "rank"])


RANKS = ranks_frame(
    [
        ("a", "r1", "b", "tail", 1),
        ("a", "r1", "b", "head", 4),
        ("c", "r1", "d", "tail", 2),
        ("e", "r0", "f", "tail", 1),
        ("e", "r0", "f", "head", 1),
        ("g", "r0", "h", "head", 10),
        ("i", "a<b", "j", "head", 11),
    ]
)


def naive(ranks):
    """MRR, MR, Hits@1/3/10 in exact fractions."""
    n = len(ranks)
    return {
        "count": n,
        "mrr": sum(Fraction(1) / Fraction(r) for r in ranks) / n,
        "mr": Fraction(sum(Fraction(r) for r in ranks)) / n,
        **{f"hits@{k}": Fraction(sum(Fraction(r) <= k for r in ranks), n) for k in (1, 3, 10)},
    }


def test_side_metrics_per_side_and_over_both_against_exact_fractions():
    got = S.side_metrics(RANKS)
    assert list(got) == ["tail", "head", "both"]
    want = {"tail": naive([1, 2, 1]), "head": naive([4, 1, 10, 11]), "both": naive([1, 4, 2, 1, 1, 10, 11])}
    for side in want:
        assert list(got[side]) == ["count", "mrr", "mr", "hits@1", "hits@3", "hits@10"]
        assert got[side]["count"] == want[side]["count"] and isinstance(got[side]["count"], int)
        for k in ("mrr", "mr", "hits@1", "hits@3", "hits@10"):
            assert got[side][k] == pytest.approx(float(want[side][k]), abs=1e-15), (side, k)
            assert type(got[side][k]) is float
    # by hand: a mean rank of 3.5 is outside Hits@3; 3 is inside; a side without ranks is left out
    one = S.side_metrics(ranks_frame([("a", "r", "b", "tail", 3.5), ("a", "r", "c", "tail", 3)]))
    assert list(one) == ["tail", "both"]
    assert one["tail"] == {
        "count": 2,
        "mrr": (1 / 3.5 + 1 / 3) / 2,
        "mr": 3.25,
        "hits@1": 0.0,
        "hits@3": 0.5,
        "hits@10": 1.0,
    }


def f3(x):
    return f"{float(x):.3f}"


def test_metrics_section_overall_per_side_and_per_relation_most_frequent_first():
    got = S.metrics_section(RANKS, "read from <code>ranks.csv</code>", {"r1": "treats", "r0": "r0"})
    sides = [("tail", [1, 2, 1]), ("head", [4, 1, 10, 11]), ("both", [1, 4, 2, 1, 1, 10, 11])]
    overall = []
    for s, r in sides:
        m = naive(r)
        overall.append(
            [
                s,
                str(m["count"]),
                f3(m["mrr"]),
                f"{float(m['mr']):.1f}",
                f3(m["hits@1"]),
                f3(m["hits@3"]),
                f3(m["hits@10"]),
            ]
        )
    assert overall[2] == ["both", "7", "0.563", "4.3", "0.429", "0.571", "0.857"]  # by hand
    per = [  # r0 and r1 both have 3 ranks: by name; a<b has 1
        ["r0", "1", "1.000", "0.550", "0.667", "1.000"],  # rank 10 is inside Hits@10
        ["treats (r1)", "2", "0.750", "0.250", "0.333", "1.000"],
        ["a&lt;b", "1", "—", "0.091", "0.000", "0.000"],  # no tail ranks: its count of ranks
    ]
    assert got.key == "metrics"
    assert got.html == (
        "<h2>Test metrics</h2><p>Filtered ranks (ties: mean rank), read from <code>ranks.csv</code>.</p>"
        + tbl(["side", "ranks", "MRR", "MR", "Hits@1", "Hits@3", "Hits@10"], overall)
        + "<h3>Per relation</h3>"
        + tbl(["relation", "test triples", "MRR tail", "MRR head", "Hits@1", "Hits@10"], per)
    )


def test_metrics_without_ranks_show_only_the_note_on_their_source():
    for ranks in (None, ranks_frame([])):
        got = S.metrics_section(ranks, "The run records no test file: pass <code>--test FILE</code>.")
        assert got.key == "metrics"
        assert got.html == (
            "<h2>Test metrics</h2><p class='note'>The run records no test file: pass <code>--test FILE</code>.</p>"
        )


def per_relation_names(html):
    body = html.split("<h3>Per relation</h3>")[1]
    return [row.split("</td>")[0] for row in body.split("<tr><td>")[1:]]


def test_per_relation_rows_stop_at_the_60_most_frequent_and_say_so():
    rows = [("a", f"r{i:02d}", "b", "tail", 1) for i in range(61)] + [("a", "zz", "c", "tail", 2)] * 2
    got = S.metrics_section(ranks_frame(rows), "x")
    assert per_relation_names(got.html) == ["zz"] + [f"r{i:02d}" for i in range(59)]
    assert got.html.endswith(
        "</table><p class='note'>The 60 most frequent of 62 relations; ranks.csv has them all.</p>"
    )
    head_only = [("a", f"r{i:02d}", "b", "head", 1) for i in range(60)] + [("c", "r00", "d", "head", 1)]
    sixty = S.metrics_section(ranks_frame(head_only), "x")
    assert per_relation_names(sixty.html) == [f"r{i:02d}" for i in range(60)]
    assert sixty.html.endswith("</tbody></table>")
    per = sixty.html.split("<h3>Per relation</h3>")[1]
    assert '<tbody><tr><td>r00</td><td class="num">2</td>' in per  # head ranks only: the count of its ranks


# ------------------------------------------------------------------ explained test triples

COLS = ["TrainHead", "TrainRel", "TrainTail", "TrainHead_label", "TrainRel_label", "TrainTail_label"]


def margin_triple(source=Path("/runs/x/why/triple_0_tracin.json")):
    rows = pd.DataFrame(
        [
            ("a", "r1", "b", "Alpha", "r1", "B&B", 3.0, 1.0, 0.5, "proponent"),
            ("h1", "r2", "c", "Aspirin", "rel two", "c", 2.0, math.inf, 0.000123456, "proponent"),
            ("c", "r3", "t1", "c", "r3", "Pain<1>", -1.0, 2.0, -0.2, "opponent"),
            ("d", "r4", "e", "d", "r4", "e", -4.0, math.nan, 7.0, "opponent"),
            ("f", "r5", "g", "f", "r5", "g", 1.0, 3.0, 0.1, "proponent"),
            ("g", "r6", "a", "g", "r6", "Alpha", 0.5, 4.0, 0.01, "proponent"),
        ],
        columns=[*COLS, "MethodScore", "HeadTailWalk", "TracInScore", "Role"],
    )
    return ExplainedTriple(
        head="h1",
        relation="treats",
        tail="t1",
        names=("Aspirin", "treats", "Pain<1>"),
        rows=rows,
        source=source,
        method="tracin-margin-path",
        loss="margin",
        side="tail",
        rank=2.0,
        rank_source="explain",
        score=1.5,
        rival={"tail": "t9", "tail_name": "Ibuprofen", "logit": 1.75, "logit_margin": -0.25},
        meta={"checkpoints": ["e1", "e2", "e3"], "training_triples_ranked": 40, "top_k": 5},
    )


MARKED = {("h1", "r2", "c"), ("d", "r4", "e"), ("f", "r5", "g")}
HEADER = ["#", "head", "relation", "tail", "tracin-margin-path score", "head–tail walk", "TracIn"]
MARGIN_BLOCK = (
    '<div class="pred"><h3>Aspirin <span class="note">h1</span> — treats → Pain&lt;1&gt; <span class="note">t1</span></h3>'
    "<p class='sub'>filtered tail rank <b>2</b>; score 1.50 (σ = 0.818); "
    'rival Ibuprofen <span class="note">t9</span> (score 1.75, margin -0.25).<br>'
    "Explained by tracin-margin-path, --loss margin, 3 checkpoints, 40 training triples ranked, top 5 kept each way.</p>"
    # positions among all the proponents (a, h1, f, g) and opponents (d, c), not only those shown
    "<p class='note'>3 mechanism edges: proponents #2, #3; opponents #1.</p>"
    "<p class='note'>File: <code>triple_0_tracin.csv</code></p>"
    "<h4>Top 2 proponents</h4>"
    + tbl(
        HEADER,
        [
            ["1", 'Alpha <span class="note">a</span>', "r1", 'B&amp;B <span class="note">b</span>', "3", "1", "0.5"],
            [
                "2",
                'Aspirin <span class="note">h1</span>',
                'rel two <span class="note">r2</span> <span class="tag">mechanism</span>',
                "c",
                "2",
                "none",
                "0.0001235",
            ],
        ],
        ["", "mark"],
        num_from=4,
    )
    + "<h4>Top 2 opponents</h4>"
    + tbl(  # the most negative method score first
        HEADER,
        [
            ["1", "d", 'r4 <span class="tag">mechanism</span>', "e", "-4", "none", "7"],
            ["2", "c", "r3", 'Pain&lt;1&gt; <span class="note">t1</span>', "-1", "2", "-0.2"],
        ],
        ["mark", ""],
        num_from=4,
    )
    + "<p class='note'>Only 2 of the 6 training triples listed have a negative tracin-margin-path score.</p>"
    + img(PNG, "training triples around Aspirin and Pain&lt;1&gt;")
    + "</div>"
)


def test_an_explained_triple_word_for_word_with_marks_rival_and_both_tables(drawings):
    t = margin_triple()
    got = S.explained_section(
        [t], marks={t.triple: MARKED, ("x", "y", "z"): {("a", "r1", "b")}}, mark_label="mechanism", n_pro=2
    )
    assert got.key == "explanations"
    assert got.html == (
        "<h2>Explained test triples</h2><p>Ranked by tracin-margin-path (<code>tracegraph explain</code>). "
        "<b>Proponents</b> support the prediction (positive score: training on them made it more likely); "
        "<b>opponents</b> work against it (negative score).</p>" + MARGIN_BLOCK
    )


def test_the_drawing_gets_node_ids_names_edge_kinds_and_the_rest_as_context(drawings):
    t = margin_triple()
    S.explained_section([t], marks={t.triple: MARKED}, mark_label="mechanism", n_pro=2, n_opp=5)
    ((args, kwargs),) = drawings["subgraph"].calls
    # ids by first appearance: head, tail, then each row's head and tail in file order
    names = {0: "Aspirin", 1: "Pain<1>", 2: "Alpha", 3: "B&B", 4: "c", 5: "d", 6: "e", 7: "f", 8: "g"}
    edges = [
        (2, 3, 0, "proponent"),  # proponents shown, ranked from 0 (the strongest)
        (0, 4, 1, "marked+proponent"),
        (5, 6, 99, "opponent"),  # opponents shown, most negative first (marked or not)
        (4, 1, 99, "opponent"),
        (7, 8, 99, "marked"),  # a marked proponent past the table
    ]
    assert args == (0, 1, edges, names, [(8, 2)])  # the rest: grey context
    assert kwargs == {"mark_label": "mechanism edge", "n_pro": 2, "n_opp": 5}


def tracin_rows(n, score=1.0):
    return pd.DataFrame(
        [(f"u{i}", "r", f"v{i}", score / (i + 1), "proponent") for i in range(n)],
        columns=["TrainHead", "TrainRel", "TrainTail", "TracInScore", "Role"],
    )


def test_context_is_the_first_300_of_the_rest_in_the_files_order(drawings):
    t = ExplainedTriple("h", "r", "t", ("h", "r", "t"), tracin_rows(312), Path("w.json"))
    S.explained_section([t], n_pro=10, n_opp=5)
    ((args, kwargs),) = drawings["subgraph"].calls
    head, tail, edges, names, context = args
    assert (head, tail) == (0, 1) and [e[2:] for e in edges] == [(k, "proponent") for k in range(10)]
    assert edges[0][:2] == (2, 3) and names[2] == "u0" and names[3] == "v0"
    assert context == [(2 + 2 * i, 3 + 2 * i) for i in range(10, 310)]
    assert kwargs == {"mark_label": "marked edge", "n_pro": 10, "n_opp": 5}


def test_a_tracin_triple_without_opponents_rank_from_the_metrics_and_no_score(drawings):
    t = ExplainedTriple(
        "h",
        "r",
        "t",
        ("h", "r", "t"),
        tracin_rows(2, 0.5),
        Path("/d/triple_3_tracin.json"),
        rank=2.5,
        rank_source="ranks.csv",
    )
    u = ExplainedTriple(
        "x",
        "r",
        "y",
        ("x", "r", "y"),
        tracin_rows(0),
        Path("e.json"),
        method="a<b",
        side="head",
        rank=3.0,
        rank_source="computed",
        score=-2.0,
        rival={"logit": None},
        meta={"checkpoints": ["only"], "training_triples_ranked": 0, "top_k": 0},
    )
    got = S.explained_section([t, u], marks={t.triple: {("q", "r", "q")}}, title="Why <these>", intro="<i>mine</i>")
    block_t = (
        '<div class="pred"><h3>h — r → t</h3>'
        "<p class='sub'>filtered tail rank <b>2.5</b> (from the test metrics); score —.<br>Explained by tracin.</p>"
        "<p class='note'>1 marked edges: none listed.</p>"
        "<p class='note'>File: <code>triple_3_tracin.csv</code></p><h4>Top 2 proponents</h4>"
        + tbl(
            ["#", "head", "relation", "tail", "TracIn"],
            [["1", "u0", "r", "v0", "0.5"], ["2", "u1", "r", "v1", "0.25"]],
            num_from=4,
        )
        + "<h4>Top 0 opponents</h4><p class='note'>None of the 2 training triples listed works against this "
        "prediction: TracIn is positive for every one.</p>" + img(PNG, "training triples around h and t") + "</div>"
    )
    block_u = (  # nothing listed: no tables, no drawing; σ(-2) = 0.119
        '<div class="pred"><h3>x — r → y</h3>'
        "<p class='sub'>filtered head rank <b>3</b> (computed now); score -2.00 (σ = 0.119); rival ? (score —, margin —)."
        "<br>Explained by a&lt;b, 1 checkpoint, 0 training triples ranked.</p>"
        "<p class='note'>File: <code>e.csv</code></p><h4>Top 0 proponents</h4><p class='note'>No proponent listed.</p>"
        "<h4>Top 0 opponents</h4><p class='note'>None of the 0 training triples listed works against this "
        "prediction: TracIn is positive for every one.</p></div>"
    )
    assert got.html == f"<h2>Why &lt;these&gt;</h2><p><i>mine</i></p>{block_t}{block_u}"
    assert len(drawings["subgraph"].calls) == 1
    # the general paragraph names every method once, sorted, escaped
    general = S.explained_section([u, t, u]).html
    assert general.startswith("<h2>Explained test triples</h2><p>Ranked by a&lt;b, tracin (<code>tracegraph")


@pytest.mark.parametrize(
    ("rank", "source", "shown"),
    [
        (None, "", "<b>—</b>"),
        (7.0, "elsewhere", "<b>7</b>"),
        (12.25, "explain", "<b>12.2</b>"),
        (math.inf, "explain", "<b>∞</b>"),
    ],
)
def test_rank_shown_whole_with_one_decimal_or_as_a_dash(drawings, rank, source, shown):
    t = ExplainedTriple("h", "r", "t", ("h", "r", "t"), tracin_rows(0), Path("e.json"), rank=rank, rank_source=source)
    assert f"filtered tail rank {shown}; score —.<br>" in S.explained_section([t]).html


def test_a_very_negative_or_positive_score_has_a_probability_near_0_or_1(drawings):
    def line(score):
        t = ExplainedTriple("h", "r", "t", ("h", "r", "t"), tracin_rows(0), Path("e.json"), score=score)
        return S.explained_section([t]).html.split("<p class='sub'>")[1].split(".<br>")[0]

    assert line(-800.0) == "filtered tail rank <b>—</b>; score -800.00 (σ = 0.000)"  # exp(800) overflows
    assert line(800.0) == "filtered tail rank <b>—</b>; score 800.00 (σ = 1.000)"
    assert line(0.0) == "filtered tail rank <b>—</b>; score 0.00 (σ = 0.500)"
    assert line(-0.5) == "filtered tail rank <b>—</b>; score -0.50 (σ = 0.378)"  # 1 / (1 + e^0.5)


def test_a_method_score_file_whose_opponents_all_fit_and_a_rival_named_by_id(drawings):
    rows = pd.DataFrame(
        [("a", "r", "b", 2.0, 0.1, "proponent"), ("c", "r", "d", -1.0, 0.3, "opponent")],
        columns=["TrainHead", "TrainRel", "TrainTail", "MethodScore", "TracInScore", "Role"],
    )
    t = ExplainedTriple(
        "h", "r", "t", ("h", "r", "t"), rows, Path("e.json"), method="tracin-margin", rival={"tail": "z", "logit": 3}
    )
    html = S.explained_section([t], n_opp=1).html
    assert "; rival z (score 3.00, margin —).<br>Explained by tracin-margin.</p>" in html
    assert (
        "<h4>Top 1 opponents</h4>"
        + tbl(
            ["#", "head", "relation", "tail", "tracin-margin score", "TracIn"],
            [["1", "c", "r", "d", "-1", "0.3"]],
            num_from=4,
        )
        in html
    )
    assert "Only" not in html and "</table><img" in html  # as many opponents as the table shows: no note
    none = S.explained_section([ExplainedTriple("h", "r", "t", ("h", "r", "t"), rows[:1], Path("e.json"))]).html
    assert "None of the 1 training triples listed works against this prediction: its score is positive" in none


def test_the_pictures_drawn_are_png_files():
    t = margin_triple()
    html = S.explained_section([t], marks={t.triple: MARKED}, n_pro=2).html
    html += S.training_section([{"epoch": 1, "loss": 1.0, "valid": {"mrr": 0.1}}, {"epoch": 2, "loss": 0.5}]).html
    pngs = [base64.b64decode(s.split('"')[0]) for s in html.split('src="data:image/png;base64,')[1:]]
    assert len(pngs) == 2 and all(p.startswith(b"\x89PNG\r\n\x1a\n") and p[12:16] == b"IHDR" for p in pngs)


def test_ranks_read_as_text_give_the_same_metrics():
    text = RANKS.astype(str)  # e.g. a ranks.csv read with dtype=str
    assert text["rank"].tolist()[:2] == ["1", "4"]
    assert S.side_metrics(text) == S.side_metrics(RANKS)
    assert S.metrics_section(text, "x", {"r1": "treats"}).html == S.metrics_section(RANKS, "x", {"r1": "treats"}).html


def test_a_relation_ranked_on_one_side_only_shows_a_dash_without_a_warning():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "mean of empty slice" on the console
        html = S.metrics_section(ranks_frame([("a", "r", "b", "head", 2)]), "x").html
    assert '<tr><td>r</td><td class="num">1</td><td class="num">—</td><td class="num">0.500</td>' in html


def signed_rows(n_pro, n_opp):
    rows = [(f"p{i}", "r", f"q{i}", 10.0 - i, "proponent") for i in range(n_pro)]
    rows += [(f"o{i}", "r", f"s{i}", -1.0 - i, "opponent") for i in range(n_opp)]
    return pd.DataFrame(rows, columns=["TrainHead", "TrainRel", "TrainTail", "TracInScore", "Role"])


def test_by_default_tables_show_10_proponents_and_the_5_most_negative_opponents(drawings):
    t = ExplainedTriple("h", "r", "t", ("h", "r", "t"), signed_rows(12, 7), Path("e.json"))
    html = S.explained_section([t]).html
    pro = html.split("<h4>Top 10 proponents</h4>")[1].split("</table>")[0]
    opp = html.split("<h4>Top 5 opponents</h4>")[1].split("</table>")[0]
    assert [c.split("</td>")[0] for c in pro.split("<tr><td>")[1:]] == [str(k) for k in range(1, 11)]
    assert pro.count("<tr>") == 11 and "<td>p9</td>" in pro and "<td>p10</td>" not in pro
    assert opp.count("<tr>") == 6 and "<td>o6</td><td>r</td><td>s6</td>" in opp.split("</tr>")[1]  # -7.0 first
    assert "<td>o2</td>" in opp and "<td>o1</td>" not in opp
    assert "Only" not in html
    args, kwargs = drawings["subgraph"].calls[0]
    assert kwargs == {"mark_label": "marked edge", "n_pro": 10, "n_opp": 5}
    assert len(args[2]) == 15 and len(args[4]) == 4  # 10 + 5 drawn; 2 proponents and 2 opponents as context


def test_few_negative_tracin_scores_are_named_as_such(drawings):
    t = ExplainedTriple("h", "r", "t", ("h", "r", "t"), signed_rows(2, 1), Path("e.json"))
    html = S.explained_section([t]).html
    assert "</table><p class='note'>Only 1 of the 3 training triples listed have a negative TracIn.</p><img" in html
