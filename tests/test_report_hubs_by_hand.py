"""report/hubs.py by hand: is an explanation a mechanism or the degree of a hub?

Reference: a training graph built here whose degrees, hub threshold and each proponent's shared
entity are counted by hand in the comments (the rule of report/hubs.py's docstring), and the page
read back: the sentence's count, the entities it names and the cells tagged "hub".
"""

from pathlib import Path

import pandas as pd
import pytest

from tests.test_report_build_by_hand import FakeRun
from tracegraph.report import build as B
from tracegraph.report import drawing as D
from tracegraph.report import explained as X
from tracegraph.report.explanations import ExplainedTriple
from tracegraph.report.hubs import hub_graph, hub_threshold, popularity, shared_entity


def star(center, k):
    return [(center, "r", f"{center}{i}") for i in range(1, k + 1)]


# degrees, counted by hand: H 9 (D, T, Y1–Y7), T 8 (G, H, X1–X6), P 5, Q 5, D 3 (G, H, T2), G 2,
# every other entity 1. 30 entities: the top decile is the 3 best connected (H, T, then P or Q),
# the 3rd has degree 5 and the median is 1, so a hub has degree 5 or more: H, T, P and Q, not D.
GRAPH = [
    ("D", "targets", "G"),
    ("G", "assoc", "T"),
    ("D", "affects", "H"),
    ("H", "assoc", "T"),
    *[(f"X{i}", "treats", "T") for i in range(1, 7)],
    *[("H", "interacts", f"Y{i}") for i in range(1, 8)],
    ("D", "treats", "T2"),
    *star("P", 5),
    *star("Q", 5),
]
# each proponent of (D, treats, T) and its shared entity
PROPONENTS = [
    (("D", "targets", "G"), "G"),  # D–G–T, a two-edge walk: its middle, G (degree 2)
    (("G", "assoc", "T"), "G"),  # the same walk from the tail's end
    (("D", "affects", "H"), "H"),  # D–H–T through the hub H
    (("H", "assoc", "T"), "H"),
    (("X1", "treats", "T"), "T"),  # another drug that treats T: it shares T, a hub
    (("X2", "treats", "T"), "T"),
    (("D", "treats", "T2"), "D"),  # T2 is no neighbour of T: it shares the head D (degree 3)
    (("H", "interacts", "Y1"), None),  # touches neither end
]


def test_the_hub_threshold_is_the_top_deciles_degree_when_above_the_median():
    g = hub_graph(GRAPH, {"D", "T"})
    assert len(g.degree) == 30 and (g.degree["H"], g.degree["T"], g.degree["D"], g.degree["G"]) == (9, 8, 3, 2)
    assert g.threshold == 5 and [e for e in g.degree if g.is_hub(e)] == ["T", "H", "P", "Q"]
    assert g.neighbours == {"D": {"G", "H", "T2"}, "T": {"G", "H", "X1", "X2", "X3", "X4", "X5", "X6"}}
    assert hub_threshold([4] * 20) is None  # all alike: no hub
    assert hub_threshold([]) is None
    assert hub_threshold([9, 1, 1]) == 9  # ⌈0.3⌉ = the best one
    assert hub_threshold([9, 8, 1, 1, 1, 1, 1, 1, 1, 1, 1]) == 8  # 11 entities: ⌈1.1⌉ = the 2nd best
    assert hub_threshold([3, 3, 2, 2]) == 3  # ⌈0.4⌉ = the best, 3, above the median 2.5
    assert hub_threshold([3, 3, 3, 2]) is None  # the best, 3, is the median too
    assert hub_threshold([5, 1, 1, 1]) == 5
    assert hub_graph([("a", "r", "a")]).degree == {"a": 1}  # a loop counts once


def test_each_proponent_shares_the_entity_the_rule_names():
    g = hub_graph(GRAPH, {"D", "T"})
    assert [shared_entity(p, "D", "T", g) for p, _ in PROPONENTS] == [s for _, s in PROPONENTS]
    assert shared_entity(("D", "r", "T"), "D", "T", g) is None  # a direct edge
    assert shared_entity(("T", "r", "D"), "D", "T", g) is None


def test_half_or_more_hub_triples_is_mostly_popularity():
    g = hub_graph(GRAPH, {"D", "T"})
    top = [p for p, _ in PROPONENTS]
    pop = popularity(top, "D", "T", g)
    assert pop.shared == [None, None, "H", "H", "T", "T", None, None]  # G and D are not hubs
    assert (pop.hub_triples, pop.mostly, pop.threshold) == (4, True, 5)  # 4 of 8: half
    assert (pop.head_hub, pop.tail_hub) == (None, 8)
    few = popularity([top[i] for i in (0, 1, 6, 7, 2)], "D", "T", g)
    assert (few.hub_triples, few.mostly) == (1, False)  # 1 of 5
    assert popularity(top, "D", "T", None) is None
    assert popularity([], "D", "T", g) is None
    assert popularity(top, "D", "T", hub_graph([("a", "r", "b"), ("c", "r", "d")], {"D"})) is None  # no hub


def triple(rows):
    frame = pd.DataFrame(
        [(*p, 10.0 - i, 1.0, "proponent") for i, p in enumerate(rows)],
        columns=["TrainHead", "TrainRel", "TrainTail", "TracInScore", "SelfInfluence", "Role"],
    )
    return ExplainedTriple("D", "treats", "T", ("D", "treats", "T"), frame, Path("e.json"))


@pytest.fixture
def no_drawing(monkeypatch):
    monkeypatch.setattr(D, "subgraph", lambda *a, **k: b"png")


def hub_cells(html):
    """Per proponent row, the cell (1 head, 3 tail) holding a hub tag and the tag's title, or None."""
    table = html.split("proponents</h4>")[1].split("</table>")[0]
    out = []
    for row in table.split("<tr")[2:]:
        cells = row.split("<td")[1:]
        tagged = [(i, c.split('title="')[1].split('"')[0]) for i, c in enumerate(cells) if 'class="hub"' in c]
        out.append(tagged[0] if tagged else None)
    return out


def test_the_page_says_mostly_popularity_and_tags_each_hub_where_it_stands(no_drawing):
    g = hub_graph(GRAPH, {"D", "T"})
    html = X.explained_section([triple([p for p, _ in PROPONENTS])], graph=g).html
    assert (
        "<p class='popular'><b>Mostly popularity, not a mechanism.</b> 4 of the top 8 proponents reach this "
        "prediction through a hub (H, T): an entity in the top 10 % of the training graph by degree, in 5 or more "
        "training triples." in html
    )
    assert hub_cells(html) == [
        None,
        None,
        (3, "in 9 training triples"),  # (D, affects, H): H in the tail cell
        (1, "in 9 training triples"),  # (H, assoc, T): H in the head cell
        (3, "in 8 training triples"),  # (X1, treats, T): T
        (3, "in 8 training triples"),
        None,
        None,
    ]
    assert "Hubs not checked" not in html and "is itself a hub" not in html  # T is already named


def test_a_mechanism_is_not_called_popularity_and_a_hub_answer_is_said(no_drawing):
    g = hub_graph(GRAPH, {"D", "T"})
    top = [p for p, _ in PROPONENTS]
    html = X.explained_section([triple([top[i] for i in (0, 1, 6, 7, 2)])], graph=g).html
    assert "class='popular'" not in html
    assert (
        "<p class='note'>1 of the top 5 proponents reach this prediction through a hub (H): an entity in the top "
        "10 % of the training graph by degree, in 5 or more training triples. The tail T is itself a hub, in 8 "
        "training triples.</p>" in html
    )
    assert sum(c is not None for c in hub_cells(html)) == 1
    unchecked = X.explained_section([triple(top)]).html
    assert "<p class='note'>Hubs not checked: the run's training file is not at hand.</p>" in unchecked
    assert 'class="hub"' not in unchecked and "through a hub" not in unchecked


def test_the_run_report_reads_the_training_file_for_the_hub_check(tmp_path, monkeypatch):
    train = tmp_path / "train.txt"
    train.write_text("".join("\t".join(t) + "\n" for t in GRAPH))
    run = FakeRun(tmp_path / "run", data_files={"train": str(train)})
    g = B.training_graph(run, [triple([])])
    assert g.degree == hub_graph(GRAPH).degree and g.threshold == 5 and set(g.neighbours) == {"D", "T"}
    assert B.training_graph(run, []) is None  # nothing explained: nothing read
    assert B.training_graph(FakeRun(tmp_path / "r2"), [triple([])]) is None  # no training file
    monkeypatch.setattr(B, "MAX_FILTER_BYTES", train.stat().st_size - 1)
    assert B.training_graph(run, [triple([])]) is None  # too large to read for a picture
