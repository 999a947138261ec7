"""report/explained.py and report/legend.py by hand: the explained test triples' section.

References: expected HTML written out here (tables through a small table writer of this file's
own); the tables read back and checked against the order and signs the page states (shell, then
score; which column is negative for every opponent); the sigmoid computed here with math.exp; the
inputs the drawing gets, recorded by a stand-in (node ids, names, edge kinds, ranks and the
competing answer worked out by hand); the legend checked against every header of the tables and
the colours the real drawing uses.
"""

import base64
import math
import re
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.colors as mcolors
from matplotlib.collections import LineCollection
import pandas as pd
import pytest

from tracegraph.report import drawing as D
from tracegraph.report import explained as X
from tracegraph.report.explanations import ExplainedTriple
from tracegraph.report.sections import training_section
from tests.report_html import PNG, Recorder, img, tbl


@pytest.fixture
def drawn(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(D, "subgraph", rec)
    return rec


class Tables(HTMLParser):
    """Every table of a fragment: header texts, then rows of cell texts; and the legend's terms."""

    def __init__(self, text):
        super().__init__()
        self.tables, self.terms, self._cell, self._dt = [], [], None, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "dt":
            self._dt = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(self._cell.strip())
            self._cell = None
        elif tag == "dt":
            self.terms.append(self._dt.strip())
            self._dt = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        if self._dt is not None:
            self._dt += data


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
HEADER = ["#", "head", "relation", "tail", "margin score", "head–tail walk", "TracIn, this answer alone"]
MARGIN_BLOCK = (
    '<div class="pred"><h3>Aspirin <span class="note">h1</span> — treats → Pain&lt;1&gt; <span class="note">t1</span></h3>'
    # σ(1.5) = 0.8176, σ(1.75) = 0.8520
    "<p class='sub'>filtered tail rank <b>2</b>; score 0.818 (sigmoid of the model's logit 1.50); "
    'competing answer <b>Ibuprofen <span class="note">t9</span></b>, the best-scored tail the model does not '
    "know to be true: score 0.852 (logit 1.75), lead over it -0.25 in logits.<br>"
    "Explained by tracin-margin-path, --loss margin, 3 checkpoints, 40 training triples ranked, top 5 kept each way.</p>"
    # positions among all the proponents (a, h1, f, g) and opponents (d, c), not only those shown
    "<p class='note'>3 mechanism edges: proponents #2, #3; opponents #1.</p>"
    "<p class='note'>File: <code>triple_0_tracin.csv</code></p>"
    "<h4>Top 2 proponents</h4>"
    "<p class='note'>Listed by head–tail walk first (shorter first; 2 counts a direct edge with the two-edge walks), "
    "then by margin score within each walk length, so the margin score falls within each group (a line marks where "
    "a group starts), not down the whole table.</p>"
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
        ["", "mark group"],  # walk 1 is shell 2, no walk the last shell: a new group
        num_from=4,
    )
    + "<h4>Top 2 opponents</h4>"
    "<p class='note'>Negative margin score: training on each narrowed the lead of Pain&lt;1&gt; over Ibuprofen. "
    "Their plain TracIn (the last column) can still be positive: training on them raised this answer's own score, "
    "but the competing answer's more. Most negative first.</p>"
    + tbl(  # the most negative method score first; no group lines among opponents
        HEADER,
        [
            ["1", "d", 'r4 <span class="tag">mechanism</span>', "e", "-4", "none", "7"],
            ["2", "c", "r3", 'Pain&lt;1&gt; <span class="note">t1</span>', "-1", "2", "-0.2"],
        ],
        ["mark", ""],
        num_from=4,
    )
    + "<p class='note'>Only 2 of the 6 training triples listed have a negative margin score.</p>"
    + img(PNG, "training triples around Aspirin and Pain&lt;1&gt;")
    + "</div>"
)


def test_an_explained_triple_word_for_word_with_marks_rival_and_both_tables(drawn):
    t = margin_triple()
    got = X.explained_section(
        [t], marks={t.triple: MARKED, ("x", "y", "z"): {("a", "r1", "b")}}, mark_label="mechanism", n_pro=2
    )
    assert got.key == "explanations"
    intro = (
        "<h2>Explained test triples</h2><p>Ranked by tracin-margin-path (<code>tracegraph explain</code>). "
        "<b>Proponents</b> support the prediction and <b>opponents</b> work against it: the sign of the first "
        "score column decides (positive: proponent, negative: opponent). The legend says what each score, colour "
        "and line is.</p><div class='legend'>"
    )
    assert got.html.startswith(intro) and got.html.endswith(MARGIN_BLOCK)
    between = got.html[len(intro) : -len(MARGIN_BLOCK)]
    assert between.endswith("</div><p class='note'>Hubs not checked: the run's training file is not at hand.</p>")


def test_the_drawings_legend_counts_the_rows_the_tables_show(drawn):
    t = margin_triple()  # 4 proponents, 2 opponents
    X.explained_section([t], n_pro=10, n_opp=5)
    X.explained_section([t], n_pro=3, n_opp=1)
    assert [(k["n_pro"], k["n_opp"]) for _, k in drawn.calls] == [(4, 2), (3, 1)]


# ------------------------------------------------------------------ order, signs, score, competing answer


def walk_triple(method="tracin-margin-path"):
    """Proponents whose margin rises from one walk shell to the next: the table cannot be descending."""
    rows = pd.DataFrame(
        [
            ("h", "r", "m1", 2.0, 2.0, 9.0, "proponent"),
            ("m2", "r", "t", 1.0, 1.0, 0.5, "proponent"),  # a direct edge (walk 1) shares shell 2
            ("x1", "r", "t", 3.0, 9.0, 5.0, "proponent"),
            ("x2", "r", "t", 3.0, 8.0, 4.0, "proponent"),
            ("y", "r", "z", 4.0, 20.0, 2.0, "proponent"),
            ("q", "r", "t9", 2.0, -3.0, 6.0, "opponent"),  # helps the competitor: plain TracIn positive
            ("h", "r", "w", 3.0, -1.0, -2.0, "opponent"),
        ],
        columns=["TrainHead", "TrainRel", "TrainTail", "HeadTailWalk", "MethodScore", "TracInScore", "Role"],
    )
    return ExplainedTriple(
        "h", "treats", "t", ("h", "treats", "t"), rows, Path("w.json"), method=method, rival={"tail": "t9"}
    )


def body_rows(html, heading):
    """The rows of the table after ``heading`` (cell texts), and the note just before it."""
    part = html.split(heading)[1]
    note = part.split("<p class='note'>")[1].split("</p>")[0]
    return Tables(part.split("</table>")[0] + "</table>").tables[0], note


def test_proponents_are_in_the_stated_order_walk_shell_then_score(drawn):
    html = X.explained_section([walk_triple()]).html
    table, note = body_rows(html, "<h4>Top 5 proponents</h4>")
    header, rows = table[0], table[1:]
    score, walk = header.index("margin score"), header.index("head–tail walk")
    assert note.startswith("Listed by head–tail walk first (shorter first; 2 counts a direct edge")
    assert "then by margin score within each walk length" in note
    keys = [(max(float(r[walk]), 2.0), -float(r[score])) for r in rows]  # shell: walk 1 counts as 2
    assert keys == sorted(keys)  # the order the note states
    scores = [float(r[score]) for r in rows]
    assert scores != sorted(scores, reverse=True)  # and the scores alone do not descend: the note is needed
    # a line above each row that starts a new shell (rows 3 and 5), none above the first
    pro = html.split("<h4>Top 5 proponents</h4>")[1].split("</table>")[0]
    starts = [i for i, tr in enumerate(pro.split("<tr")[2:]) if tr.startswith(' class="group"')]
    assert starts == [2, 4]


def test_without_walk_shells_the_table_says_largest_score_first_and_is_so(drawn):
    t = walk_triple("tracin-margin")
    t.rows = t.rows.drop(columns="HeadTailWalk")
    t.rows = pd.concat([t.rows[t.rows.Role == "proponent"].sort_values("MethodScore", ascending=False), t.rows[5:]])
    html = X.explained_section([t]).html
    table, note = body_rows(html, "<h4>Top 5 proponents</h4>")
    assert note == "Largest margin score first."
    scores = [float(r[table[0].index("margin score")]) for r in table[1:]]
    assert scores == sorted(scores, reverse=True) and 'class="group"' not in html


def test_every_opponent_is_negative_in_the_column_the_page_names(drawn):
    for t in (
        walk_triple(),
        walk_triple("tracin-margin"),
        ExplainedTriple("h", "r", "t", ("h", "r", "t"), signed_rows(2, 3), Path("e.json")),
    ):
        html = X.explained_section([t]).html
        table, note = body_rows(html, "opponents</h4>")
        named = re.match(r"Negative (.+?): ", note).group(1)
        col = table[0].index(named)  # the column the note names is in the table
        assert all(float(r[col]) < 0 for r in table[1:]), (t.method, named)
        tracin = [float(r[-1]) for r in table[1:]]
        # a positive plain TracIn beside a negative margin is said so, and only then
        assert (max(tracin) > 0) == ("can still be positive" in note), t.method
        assert ("raised this answer's own score, but the competing answer's more" in note) == (max(tracin) > 0)


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


def summary(t):
    return X.explained_section([t]).html.split("<p class='sub'>")[1].split(".<br>")[0]


@pytest.mark.parametrize("logit", [-0.5, 0.0, 1.5, 3.12, -800.0, 800.0])
def test_the_score_is_the_sigmoid_of_the_logit_and_says_so(drawn, logit):
    t = ExplainedTriple("h", "r", "t", ("h", "r", "t"), tracin_rows(0), Path("e.json"), score=logit)
    p = 0.0 if logit < -700 else 1.0 if logit > 700 else sigmoid(logit)  # exp(800) overflows math.exp
    assert summary(t) == (f"filtered tail rank <b>—</b>; score {p:.3f} (sigmoid of the model's logit {logit:.2f})")
    assert "σ" not in X.explained_section([t]).html


def test_the_competing_answer_is_named_with_its_score_and_drawn(drawn):
    t = margin_triple()
    line = summary(t)
    assert 'competing answer <b>Ibuprofen <span class="note">t9</span></b>, the best-scored tail the model' in line
    assert f"score {sigmoid(1.75):.3f} (logit 1.75), lead over it -0.25 in logits" in line
    drawn.calls.clear()
    X.explained_section([t], n_pro=2)
    ((args, kwargs),) = drawn.calls
    labels = args[3]
    assert labels[kwargs["rival"]] == "Ibuprofen"  # the rival is a node of its own, passed as the competitor
    by_id = {"Aspirin": args[0], "Pain<1>": args[1]}
    assert kwargs["rival"] not in by_id.values()
    # a head-side prediction's competitor is a head
    u = margin_triple()
    u.side, u.rival = "head", {"head": "h7", "head_name": "Naproxen", "logit": 0.0, "logit_margin": 1.0}
    assert "competing answer <b>Naproxen" in summary(u) and "the best-scored head the model" in summary(u)


# ------------------------------------------------------------------ the drawing's inputs


def test_the_drawing_gets_node_ids_names_edge_kinds_and_the_rest_as_context(drawn):
    t = margin_triple()
    X.explained_section([t], marks={t.triple: MARKED}, mark_label="mechanism", n_pro=2, n_opp=5)
    ((args, kwargs),) = drawn.calls
    # ids by first appearance: head, tail, then each row's head and tail in file order, the competitor last
    names = {0: "Aspirin", 1: "Pain<1>", 2: "Alpha", 3: "B&B", 4: "c", 5: "d", 6: "e", 7: "f", 8: "g", 9: "Ibuprofen"}
    edges = [
        (2, 3, 0, "proponent"),  # proponents shown, ranked from 0 (the strongest)
        (0, 4, 1, "marked+proponent"),
        (5, 6, 99, "opponent"),  # opponents shown, most negative first (marked or not)
        (4, 1, 99, "opponent"),
        (7, 8, 99, "marked"),  # a marked proponent past the table
    ]
    assert args == (0, 1, edges, names, [(8, 2)])  # the rest: grey context; every name short enough
    assert kwargs == {"mark_label": "mechanism edge", "n_pro": 2, "n_opp": 2, "rival": 9}  # its 2 opponents


def test_names_cut_in_the_drawing_are_distinct_and_listed_in_full_under_it(drawn):
    long = ["hepatic fibrosis type 2", "hepatic fibrosis type 3", "Pathway: immune response 1"]
    rows = pd.DataFrame(
        [("h", "r", f"n{i}", "h", "r", name, 1.0 / (i + 1), "proponent") for i, name in enumerate(long)],
        columns=[*COLS, "TracInScore", "Role"],
    )
    t = ExplainedTriple("h", "r", "t", ("Velotinib", "r", "a disease whose name is long enough"), rows, Path("e.json"))
    html = X.explained_section([t]).html
    ((args, _),) = drawn.calls
    labels = args[3]
    assert len(set(labels.values())) == len(labels)
    assert [labels[k] for k in (2, 3, 4)] == ["hepatic fi…is type 2", "hepatic fi…is type 3", "Pathway: i…esponse 1"]
    assert labels[1] == "a disease whose name is long enough"  # the ends keep up to 36 characters
    key = html.split("Names cut short in the drawing:</p><ul class='keys'>")[1].split("</ul>")[0]
    assert key == "".join(
        f"<li><b>{short}</b>: {full}</li>"
        for short, full in zip(["hepatic fi…is type 2", "hepatic fi…is type 3", "Pathway: i…esponse 1"], long)
    )


def tracin_rows(n, score=1.0):
    return pd.DataFrame(
        [(f"u{i}", "r", f"v{i}", score / (i + 1), "proponent") for i in range(n)],
        columns=["TrainHead", "TrainRel", "TrainTail", "TracInScore", "Role"],
    )


def test_context_is_the_first_300_of_the_rest_in_the_files_order(drawn):
    t = ExplainedTriple("h", "r", "t", ("h", "r", "t"), tracin_rows(312), Path("w.json"))
    X.explained_section([t], n_pro=10, n_opp=5)
    ((args, kwargs),) = drawn.calls
    head, tail, edges, names, context = args
    assert (head, tail) == (0, 1) and [e[2:] for e in edges] == [(k, "proponent") for k in range(10)]
    assert edges[0][:2] == (2, 3) and names[2] == "u0" and names[3] == "v0"
    assert context == [(2 + 2 * i, 3 + 2 * i) for i in range(10, 310)]
    assert kwargs == {"mark_label": "marked edge", "n_pro": 10, "n_opp": 0, "rival": None}  # no opponent


# ------------------------------------------------------------------ the legend


def test_the_legend_explains_every_column_of_every_table_and_each_tag(drawn):
    plain = ExplainedTriple("p", "r", "q", ("p", "r", "q"), signed_rows(2, 1), Path("e.json"))
    cosine = walk_triple("tracin-cosine")
    cosine.rows = cosine.rows.drop(columns="HeadTailWalk")
    triples = [margin_triple(), plain, cosine]
    html = X.explained_section(triples, marks={triples[0].triple: MARKED}, mark_label="mechanism").html
    parsed = Tables(html)
    terms = {part for term in parsed.terms for part in ([term] if term.startswith("TracIn") else term.split(", "))}
    headers = {h for table in parsed.tables for h in table[0]}
    assert headers == {
        "#",
        "head",
        "relation",
        "tail",
        "margin score",
        "head–tail walk",
        "TracIn, this answer alone",
        "TracIn",
        "cosine score",
    }
    assert headers <= terms, headers - terms
    legend = html.split("<div class='legend'>")[1].split("</div>")[0]
    dd = {k: unescape(v) for k, v in re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", legend)}
    assert "Its sign makes the row's role" in dd["margin score"] and "Its sign makes the row's role" in dd["TracIn"]
    assert "An opponent can have a positive one" in dd["TracIn, this answer alone"]
    assert {"score", "rank", "competing answer", "hub", "mechanism", "a line between rows"} <= terms
    assert "not a standard deviation" in dd["score"]


def test_the_legend_has_no_entry_for_what_the_page_does_not_show(drawn):
    plain = ExplainedTriple("p", "r", "q", ("p", "r", "q"), signed_rows(2, 1), Path("e.json"))
    terms = set(Tables(X.explained_section([plain]).html).terms)
    assert not terms & {"competing answer", "a line between rows", "marked", "margin score"}


def test_the_legends_swatches_are_the_colours_the_drawing_uses(monkeypatch):
    t = margin_triple()
    figures = []
    monkeypatch.setattr(D, "subgraph", lambda *a, **k: figures.append(D.figure(*a, **k)) or PNG)
    html = X.explained_section([t], marks={t.triple: MARKED}, n_pro=2).html
    legend = html.split("<h4>The drawing</h4>")[1]
    swatches = {mcolors.to_hex(c) for c in re.findall(r"(?:background|solid|dashed|dotted) (#[0-9a-f]{6})", legend)}
    swatches |= {mcolors.to_hex(c) for c in re.findall(r"background:(#[0-9a-f]{6})", legend)}
    ((fig, _, _),) = figures
    ax = fig.axes[0]
    drawn_lines = {mcolors.to_hex(line.get_color()) for line in ax.get_lines()}
    drawn_lines |= {
        mcolors.to_hex(c) for coll in ax.collections if isinstance(coll, LineCollection) for c in coll.get_edgecolor()
    }
    # the head, the tail and the competitor are scatters of one point; plain nodes are described in words
    big = {
        mcolors.to_hex(c.get_facecolor()[0])
        for c in ax.collections
        if not isinstance(c, LineCollection) and len(c.get_offsets()) == 1
    }
    assert swatches == drawn_lines | big


# ------------------------------------------------------------------ the rest of the section


def test_a_tracin_triple_without_opponents_rank_from_the_metrics_and_no_score(drawn):
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
    got = X.explained_section([t, u], marks={t.triple: {("q", "r", "q")}}, title="Why <these>", intro="<i>mine</i>")
    block_t = (
        '<div class="pred"><h3>h — r → t</h3>'
        "<p class='sub'>filtered tail rank <b>2.5</b> (from the test metrics); score —.<br>Explained by tracin.</p>"
        "<p class='note'>1 marked edges: none listed.</p>"
        "<p class='note'>File: <code>triple_3_tracin.csv</code></p><h4>Top 2 proponents</h4>"
        "<p class='note'>Largest TracIn first.</p>"
        + tbl(
            ["#", "head", "relation", "tail", "TracIn"],
            [["1", "u0", "r", "v0", "0.5"], ["2", "u1", "r", "v1", "0.25"]],
            num_from=4,
        )
        + "<h4>Top 0 opponents</h4><p class='note'>None of the 2 training triples listed works against this "
        "prediction: its TracIn is positive for every one.</p>" + img(PNG, "training triples around h and t") + "</div>"
    )
    block_u = (  # nothing listed: no tables, no drawing; σ(-2) = 0.119
        '<div class="pred"><h3>x — r → y</h3>'
        "<p class='sub'>filtered head rank <b>3</b> (computed now); score 0.119 (sigmoid of the model's logit -2.00); "
        "competing answer <b>?</b>, the best-scored head the model does not know to be true: score — (logit —), "
        "lead over it — in logits.<br>Explained by a&lt;b, 1 checkpoint, 0 training triples ranked.</p>"
        "<p class='note'>File: <code>e.csv</code></p><h4>Top 0 proponents</h4><p class='note'>No proponent listed.</p>"
        "<h4>Top 0 opponents</h4><p class='note'>None of the 0 training triples listed works against this "
        "prediction: its TracIn is positive for every one.</p></div>"
    )
    assert got.html.startswith("<h2>Why &lt;these&gt;</h2><p><i>mine</i></p><div class='legend'>")
    assert got.html.endswith(f"{block_t}{block_u}")
    assert len(drawn.calls) == 1
    # the general paragraph names every method once, sorted, escaped
    general = X.explained_section([u, t, u]).html
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
def test_rank_shown_whole_with_one_decimal_or_as_a_dash(drawn, rank, source, shown):
    t = ExplainedTriple("h", "r", "t", ("h", "r", "t"), tracin_rows(0), Path("e.json"), rank=rank, rank_source=source)
    assert f"filtered tail rank {shown}; score —.<br>" in X.explained_section([t]).html


def test_a_method_score_file_whose_opponents_all_fit_and_a_rival_named_by_id(drawn):
    rows = pd.DataFrame(
        [("a", "r", "b", 2.0, 0.1, "proponent"), ("c", "r", "d", -1.0, 0.3, "opponent")],
        columns=["TrainHead", "TrainRel", "TrainTail", "MethodScore", "TracInScore", "Role"],
    )
    t = ExplainedTriple(
        "h", "r", "t", ("h", "r", "t"), rows, Path("e.json"), method="tracin-margin", rival={"tail": "z", "logit": 3}
    )
    html = X.explained_section([t], n_opp=1).html
    assert "; competing answer <b>z</b>, the best-scored tail the model does not know to be true: score 0.953 " in html
    assert "(logit 3.00), lead over it — in logits.<br>Explained by tracin-margin.</p>" in html
    assert (
        tbl(
            ["#", "head", "relation", "tail", "margin score", "TracIn, this answer alone"],
            [["1", "c", "r", "d", "-1", "0.3"]],
            num_from=4,
        )
        in html.split("<h4>Top 1 opponents</h4>")[1]
    )
    assert "Only" not in html and "</table><img" in html  # as many opponents as the table shows: no note
    none = X.explained_section([ExplainedTriple("h", "r", "t", ("h", "r", "t"), rows[:1], Path("e.json"))]).html
    assert "None of the 1 training triples listed works against this prediction: its tracin score is positive" in none


def test_the_pictures_drawn_are_png_files():
    t = margin_triple()
    html = X.explained_section([t], marks={t.triple: MARKED}, n_pro=2).html
    html += training_section([{"epoch": 1, "loss": 1.0, "valid": {"mrr": 0.1}}, {"epoch": 2, "loss": 0.5}]).html
    pngs = [base64.b64decode(s.split('"')[0]) for s in html.split('src="data:image/png;base64,')[1:]]
    assert len(pngs) == 2 and all(p.startswith(b"\x89PNG\r\n\x1a\n") and p[12:16] == b"IHDR" for p in pngs)


def signed_rows(n_pro, n_opp):
    rows = [(f"p{i}", "r", f"q{i}", 10.0 - i, "proponent") for i in range(n_pro)]
    rows += [(f"o{i}", "r", f"s{i}", -1.0 - i, "opponent") for i in range(n_opp)]
    return pd.DataFrame(rows, columns=["TrainHead", "TrainRel", "TrainTail", "TracInScore", "Role"])


def test_by_default_tables_show_10_proponents_and_the_5_most_negative_opponents(drawn):
    t = ExplainedTriple("h", "r", "t", ("h", "r", "t"), signed_rows(12, 7), Path("e.json"))
    html = X.explained_section([t]).html
    pro = html.split("<h4>Top 10 proponents</h4>")[1].split("</table>")[0]
    opp = html.split("<h4>Top 5 opponents</h4>")[1].split("</table>")[0]
    assert [c.split("</td>")[0] for c in pro.split("<tr><td>")[1:]] == [str(k) for k in range(1, 11)]
    assert pro.count("<tr>") == 11 and "<td>p9</td>" in pro and "<td>p10</td>" not in pro
    assert opp.count("<tr>") == 6 and "<td>o6</td><td>r</td><td>s6</td>" in opp.split("</tr>")[1]  # -7.0 first
    assert "<td>o2</td>" in opp and "<td>o1</td>" not in opp
    assert "Only" not in html
    args, kwargs = drawn.calls[0]
    assert kwargs == {"mark_label": "marked edge", "n_pro": 10, "n_opp": 5, "rival": None}
    assert len(args[2]) == 15 and len(args[4]) == 4  # 10 + 5 drawn; 2 proponents and 2 opponents as context


def test_few_negative_tracin_scores_are_named_as_such(drawn):
    t = ExplainedTriple("h", "r", "t", ("h", "r", "t"), signed_rows(2, 1), Path("e.json"))
    html = X.explained_section([t]).html
    assert "</table><p class='note'>Only 1 of the 3 training triples listed have a negative TracIn.</p><img" in html
