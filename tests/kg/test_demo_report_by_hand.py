"""The demo's report pieces (kg/demo/report.py) by hand: every section written out word for word.

What it holds, and against what (hand-written HTML in each test, numbers chosen so that each one
formats one way only):

* the recovery table: a row per graded method in the summary's order, its label from the module's
  words (every method named), ``(--loss L)`` after the TracIn-like and RelatIF rows only and only
  when the loss is known, mean ± std cells to 3 and 2 decimals ("—" when missing), the default row
  green whatever its figures, the best row (highest MRR, then MAP, a missing figure counted as 0)
  bold, the other loss's TracIn row last, the text around the table with its data escaped;
* the headline cards: the test MRR on the tail side (both sides when the metrics have no tail),
  explain's default against the path and degree baselines (green only when strictly above both
  on MRR and MAP; random order is not a baseline here), the necessity card of the default arm at
  its largest k beside neighbour and far at that k (green when the default's ΔH@1 is positive and
  at least twice neighbour's, a negative neighbour counted as 0), the "no fact to test" card, the
  headline sentence (counted from the per-fact ranks by hand), the graph's counts;
* the settings and timing section: settings escaped, not right-aligned; seconds to one decimal,
  "—" for a stage not run, the total of the stages run;
* ``write_report``: with the run, the general report sections and the demo's own pieces replaced by
  recording stand-ins, what each is given (the run opened on its device only when a path is given,
  the necessity stand-in note, the explained section's title and intro word for word with the
  checkpoint count), and the page: title, subtitle, and the sections in the documented order with
  the demo's cards in place of the general ones and unknown sections left out.
"""

from pathlib import Path

import pytest

from tracegraph.kg.demo import report as demo_report
from tracegraph.kg.demo.report import demo_section, headline_cards, recovery_section, write_report
from tracegraph.report.html import Section

HEADER = (
    "<table><thead><tr><th>ranking</th><th>MRR</th><th>MAP</th><th>Hits@1</th><th>Hits@3</th><th>Hits@10</th>"
    "<th>Recall@10</th></tr></thead><tbody>"
)


def figs(mrr, map_, mrr_std=0.25, map_std=0.5):
    return {"mrr": {"mean": mrr, "std": mrr_std}, "map": {"mean": map_, "std": map_std}}


def recovery(summary, loss="logit", **kw):
    rec = {
        "summary": summary,
        "graded": 3,
        "mean_candidates": 12.4,
        "mechanism_edge_coverage": 0.875,
        "definition": {"candidates": "a<b", "relevant": "r&s", "ties": "t", "baselines": {"degree": "d", "path": "p"}},
    }
    if loss is not None:
        rec["influence"] = {"loss": loss}
    return rec | kw


def rows_of(html):
    """The table's body rows, as written."""
    body = html[html.index("<tbody>") + len("<tbody>") : html.index("</tbody>")]
    return [r + "</tr>" for r in body.split("</tr>")[:-1]]


def test_recovery_section_word_for_word():
    fid = {
        "recovery": recovery(
            {
                "tracin": figs(0.25, 0.5, 0.125, 0.0),
                "tracin-margin-path": figs(0.125, 0.0625),  # the default: green, though not the best
                "my-method": figs(0.5, 0.125),  # ties the best MRR, lower MAP
                "relatif": figs(0.5, 0.25),  # the best: highest MRR, then MAP
                "random": figs(None, 0.75, None, 0.125),  # a missing MRR counts as 0
            }
        ),
        "recovery_other_loss": {"summary": {"tracin": figs(0.375, 1.0, 0.0, 0.0)}, "influence": {"loss": "score"}},
    }
    expected = (
        "<h2>Explanation quality: recovery of the planted mechanisms</h2><p>For each of the 3 test edges, the "
        "candidates are the a&lt;b (12 on average); the relevant ones are r&amp;s. 87.5 % of the mechanism edges "
        "lie among the candidates. Mean ± std over test edges; ties t. Green: explain's default; bold: the "
        "highest MRR.</p>"
        + HEADER
        + '<tr><td>TracIn (--loss logit)</td><td class="num">0.250 ± 0.12</td><td class="num">0.500 ± 0.00</td></tr>'
        '<tr class="default"><td>margin within path shells (explain&#x27;s default) (--loss logit)</td>'
        '<td class="num">0.125 ± 0.25</td><td class="num">0.062 ± 0.50</td></tr>'
        '<tr><td>my-method</td><td class="num">0.500 ± 0.25</td><td class="num">0.125 ± 0.50</td></tr>'
        '<tr class="best"><td>RelatIF (--loss logit)</td><td class="num">0.500 ± 0.25</td>'
        '<td class="num">0.250 ± 0.50</td></tr>'
        '<tr><td>random order</td><td class="num">— ± —</td><td class="num">0.750 ± 0.12</td></tr>'
        '<tr><td>TracIn (--loss score), for comparison</td><td class="num">0.375 ± 0.00</td>'
        '<td class="num">1.000 ± 0.00</td></tr>'
        "</tbody></table><p class='note'>MRR: 1/rank of the first mechanism edge. Hits@k: a mechanism edge in the "
        "top k. Baselines: degree = d; paths = p.</p>"
    )
    section = recovery_section(fid)
    assert section.key == "recovery"
    assert section.html == expected


def test_recovery_labels_of_every_method_and_the_loss_only_after_influence_methods():
    names = {
        "tracin": "TracIn",
        "tracin-cosine": "TracIn-cosine",
        "relatif": "RelatIF",
        "tracin-margin": "TracIn margin against the rival",
        "tracin-path": "TracIn within path shells",
        "tracin-margin-path": "margin within path shells (explain&#x27;s default)",
        "local-retrain": "local retrain (Kelpie-style)",
        "random": "random order",
        "degree": "degree",
        "path": "short head–tail paths",
        "x<y": "x&lt;y",  # a method without words: its own name, escaped
    }
    with_loss = {"tracin", "tracin-cosine", "relatif", "tracin-margin", "tracin-path", "tracin-margin-path"}
    summary = {m: figs(0.5, 0.5) for m in names}
    for loss, suffix in (("score", " (--loss score)"), ("", ""), (None, "")):
        rows = rows_of(recovery_section({"recovery": recovery(summary, loss=loss)}).html)
        labels = [r[r.index("<td>") + 4 : r.index("</td>")] for r in rows]
        assert labels == [w + (suffix if m in with_loss else "") for m, w in names.items()], loss
        # no other-loss row without recovery_other_loss
        assert len(rows) == len(names)


def test_recovery_best_row_is_the_default_row_when_the_default_leads():
    fid = {"recovery": recovery({"path": figs(0.25, 0.25), "tracin-margin-path": figs(0.5, 0.25)})}
    rows = rows_of(recovery_section(fid).html)
    assert [r[: r.index(">") + 1] for r in rows] == ["<tr>", '<tr class="default">']


def test_recovery_best_by_map_when_the_mrr_ties_and_missing_map_counts_as_zero():
    fid = {
        "recovery": recovery(
            {"a": figs(0.5, None), "b": figs(0.5, 0.0625), "c": figs(0.25, 1.0), "d": figs(0.5, 0.03125)}
        )
    }
    rows = rows_of(recovery_section(fid).html)
    assert [r[: r.index(">") + 1] for r in rows] == ["<tr>", '<tr class="best">', "<tr>", "<tr>"]


def test_recovery_columns_follow_the_summary_order_of_its_first_method():
    summary = {"x": {"map": {"mean": 0.25, "std": 0.0}, "mrr": {"mean": 0.75, "std": 0.0}}}
    rows = rows_of(recovery_section({"recovery": recovery(summary)}).html)
    assert rows == [
        '<tr class="best"><td>x</td><td class="num">0.250 ± 0.00</td><td class="num">0.750 ± 0.00</td></tr>'
    ]


# ------------------------------------------------------------------ headline cards


def card(title, value):
    return f'<div class="card">{title}<b>{value}</b></div>'


def arm(d, above_neighbour=None):
    """A necessity summary entry: its ΔH@1, and its paired excess over neighbour with the interval when given."""
    a = {"delta_hits@1": {"mean": d}}
    if above_neighbour is not None:
        mean, ci = above_neighbour
        a |= {"above_neighbour_hits@1": {"mean": mean}, "above_neighbour_hits@1_ci95_first_seed": ci}
    return a


COUNTS = {"entities": 40, "relations": 5, "train": 300, "test": 8}
GRAPH = (
    "<p>40 entities, 5 relations, 300 training triples; 8 held-out <code>treats</code> edges, each planted by a "
    "mechanism path of 2–4 edges that stays in the training graph.</p>"
)
METRICS = {"both": {"mrr": 0.125, "hits@10": 0.25}, "tail": {"mrr": 0.5, "hits@10": 0.75}}
TAIL_CARD = card("test MRR, tail side (drug treats ?)", "0.500 <span class='note'>Hits@10 0.750</span>")


def test_headline_cards_word_for_word_with_the_necessity_sentence():
    rec = {
        "tracin-margin-path": figs(0.5, 0.375),
        "path": figs(0.25, 0.25),
        "degree": figs(0.125, 0.125),
        "random": figs(0.75, 0.75),  # random order is no headline baseline
    }
    nec = {
        "n_facts": 8,
        "summary": {
            "neighbour@2": arm(0.0),
            "tracin-margin-path@2": arm(0.0),
            "path@4": arm(0.5),
            # the default at its largest k; green: its excess over neighbour clears zero
            "tracin-margin-path@4": arm(0.5, (0.25, [0.125, 0.375])),
            "neighbour@4": arm(0.25),
            "far@4": arm(0.125),
        },
        "seeds": {
            "0": {
                "reference": {"ranks": [1, 1, 1, 1, 1, 1, 1, 2]},
                "tracin-margin-path@4": {"ranks": [2, 3, 1, 1, 1, 1, 1, 5]},  # 2 flipped (the last was not first)
                "neighbour@4": {"ranks": [1, 1, 4, 1, 1, 1, 1, 1]},  # 1
                "far@4": {"ranks": [1, 1, 1, 1, 1, 1, 1, 1]},  # 0
            }
        },
    }
    section = headline_cards(METRICS, COUNTS, {"recovery": {"summary": rec}, "necessity": nec})
    expected = (
        "<div class='cards'>"
        + TAIL_CARD
        + card(
            "explain&#x27;s default, tracin-margin-path: mechanism recovery MRR / MAP",
            "<span class='ok'>0.500 / 0.375</span>",
        )
        + card("baseline path: recovery MRR / MAP", "0.250 / 0.250")
        + card("baseline degree: recovery MRR / MAP", "0.125 / 0.125")
        + card(
            "necessity ΔH@1 (8 facts): tracin-margin-path / neighbour / far",
            "<span class='ok'>0.500</span> / 0.250 / 0.125 "
            "<span class='note'>0.250 (0.125 to 0.375) above neighbour</span>",
        )
        + "</div><p class='headline'>Removing the 4 training triples that <b>tracin-margin-path</b> names for each "
        "of the 8 predictions (all at once, then retraining) flips <b>2 of 8</b>: the model no longer ranks them "
        "first. Removing 4 random triples at the same entities flips <b>1</b>; 4 random triples elsewhere in the "
        "graph flip <b>0</b>. That is more than the random triples at the same entities, paired fact by fact "
        "beyond the 95 % interval: the explanations name triples these predictions rest on.</p>" + GRAPH
    )
    assert section.key == "cards"
    assert section.html == expected


@pytest.mark.parametrize(
    "default, path, degree, ok",
    [
        ((0.5, 0.5), (0.25, 0.25), (0.25, 0.25), True),
        ((0.5, 0.5), (0.25, 0.25), (0.25, 0.5), False),  # a tie on MAP is no win
        ((0.5, 0.5), (0.5, 0.25), None, False),  # a tie on MRR is no win
        ((0.5, 0.5), (0.25, 0.75), None, False),
        ((0.25, 0.75), (0.5, 0.5), None, False),  # MRR against MRR, MAP against MAP
        ((0.5, 0.5), None, (0.75, 0.25), False),
        ((None, None), None, None, True),  # no baseline graded: nothing beats the default
        ((0.5, None), (0.25, None), None, False),  # missing MAPs count as 0 and tie
    ],
)
def test_default_card_is_green_only_strictly_above_every_graded_baseline(default, path, degree, ok):
    rec = {"tracin-margin-path": figs(*default)}
    if path:
        rec["path"] = figs(*path)
    if degree:
        rec["degree"] = figs(*degree)
    html = headline_cards(METRICS, COUNTS, {"recovery": {"summary": rec}}).html
    d = " / ".join(f"{x or 0:.3f}" for x in default)  # a missing figure shows as 0 on the cards
    dflt = card(
        "explain&#x27;s default, tracin-margin-path: mechanism recovery MRR / MAP",
        f"<span class='{'ok' if ok else 'bad'}'>{d}</span>",
    )
    base = "".join(
        card(f"baseline {m}: recovery MRR / MAP", f"{x[0] or 0:.3f} / {x[1] or 0:.3f}")
        for m, x in (("path", path), ("degree", degree))
        if x
    )
    assert html == "<div class='cards'>" + TAIL_CARD + dflt + base + "</div>" + GRAPH


def test_cards_without_the_default_without_a_tail_side_and_without_necessity():
    metrics = {"both": {"mrr": 0.125, "hits@10": 0.25}}
    html = headline_cards(metrics, {"test": 3}, {"recovery": {"summary": {"degree": figs(0.25, 0.125)}}}).html
    assert html == (
        "<div class='cards'>"
        + card("test MRR, both side (drug treats ?)", "0.125 <span class='note'>Hits@10 0.250</span>")
        + card("baseline degree: recovery MRR / MAP", "0.250 / 0.125")
        + "</div><p>None entities, None relations, None training triples; 3 held-out <code>treats</code> edges, "
        "each planted by a mechanism path of 2–4 edges that stays in the training graph.</p>"
    )


def test_necessity_card_says_no_fact_to_test_when_only_a_note():
    for nec in ({"note": "no test triple ranked first", "summary": {}}, {"note": "x"}):
        html = headline_cards(METRICS, COUNTS, {"recovery": {"summary": {}}, "necessity": nec}).html
        assert html == (
            "<div class='cards'>"
            + TAIL_CARD
            + card("necessity ΔH@1", "— <span class='note'>no fact to test (below)</span>")
            + "</div>"
            + GRAPH
        )
    for nec in (None, {}, {"summary": {}}, {"summary": {"neighbour@4": arm(0.5), "far@4": arm(0.25)}}):
        html = headline_cards(METRICS, COUNTS, {"recovery": {"summary": {}}, "necessity": nec}).html
        assert html == "<div class='cards'>" + TAIL_CARD + "</div>" + GRAPH, nec


@pytest.mark.parametrize(
    "ours, neighbour, far, value",
    [
        ((0.5, [0.1, 0.4]), 0.25, 0.0, "<span class='ok'>0.500</span> / 0.250 / 0.000"),  # the excess clears 0
        ((0.5, [0.0, 0.4]), 0.25, 0.0, "<span class='bad'>0.500</span> / 0.250 / 0.000"),  # it touches 0
        ((0.5, None), 0.0, 0.0, "<span class='bad'>0.500</span> / 0.000 / 0.000"),  # no excess measured
        ((0.25, [0.05, 0.5]), -0.5, None, "<span class='ok'>0.250</span> / -0.500 / —"),
        ((0.25, [0.05, 0.5]), None, 0.125, "<span class='ok'>0.250</span> / — / 0.125"),  # no neighbour arm
        ((0.25, [0.05, 0.5]), "no ΔH@1", "no ΔH@1", "<span class='ok'>0.250</span> / — / —"),
        ((0.0, [0.05, 0.5]), -0.25, 0.0, "<span class='bad'>0.000</span> / -0.250 / 0.000"),  # nothing flipped
        ((-0.125, None), None, None, "<span class='bad'>-0.125</span> / — / —"),
    ],
)
def test_necessity_card_against_neighbour_at_the_same_k(ours, neighbour, far, value):
    # no default arm: the first method arm, at its own k; the other k's random arms are not read
    d, ci = ours
    summary = {"neighbour@2": arm(0.0), "far@2": arm(0.0), "path@3": arm(d, (0.2, ci) if ci else None)}
    summary["path@2"] = arm(1.0, (1.0, [1.0, 1.0]))
    for name, x in (("neighbour@3", neighbour), ("far@3", far)):
        if x == "no ΔH@1":
            summary[name] = {"triples_removed": 4}
        elif x is not None:
            summary[name] = arm(x)
    nec = {"n_facts": 5, "summary": summary}  # no per-fact ranks: no sentence
    html = headline_cards(METRICS, COUNTS, {"recovery": {"summary": {}}, "necessity": nec}).html
    note = f" <span class='note'>0.200 ({ci[0]:.3f} to {ci[1]:.3f}) above neighbour</span>" if ci else ""
    assert html == (
        "<div class='cards'>"
        + TAIL_CARD
        + card("necessity ΔH@1 (5 facts): path / neighbour / far", value + note)
        + "</div>"
        + GRAPH
    )


# ------------------------------------------------------------------ settings and timing


def test_demo_section_word_for_word():
    settings = {"graph": "quick", "seed": 0, "model": {"d": 32}, "necessity": "k=4, a<b"}
    seconds = {"generate": 1.24, "train": 2.0, "necessity test": None, "report": 0.0}
    expected = (
        "<h2>The demo's settings and timing</h2><div class='two'><div>"
        "<table><thead><tr><th>setting</th><th>value</th></tr></thead><tbody>"
        "<tr><td>graph</td><td>quick</td></tr><tr><td>seed</td><td>0</td></tr>"
        "<tr><td>model</td><td>{&#x27;d&#x27;: 32}</td></tr><tr><td>necessity</td><td>k=4, a&lt;b</td></tr>"
        "</tbody></table></div><div>"
        "<table><thead><tr><th>stage</th><th>seconds</th></tr></thead><tbody>"
        '<tr><td>generate</td><td class="num">1.2</td></tr><tr><td>train</td><td class="num">2.0</td></tr>'
        '<tr><td>necessity test</td><td class="num">—</td></tr><tr><td>report</td><td class="num">0.0</td></tr>'
        '<tr><td>total (before report)</td><td class="num">3.2</td></tr>'
        "</tbody></table></div></div>"
    )
    section = demo_section(settings, seconds)
    assert section.key == "demo"
    assert section.html == expected


# ------------------------------------------------------------------ write_report's wiring


class Recorder:
    """Stand-ins for the run, the general sections and the demo's own sections, recording their calls."""

    def __init__(
        self, monkeypatch, general_keys=("settings", "cards", "training", "metrics", "unresolved", "explanations")
    ):
        self.calls = []
        self.general_keys = general_keys
        rec = self

        class FakeRun:
            def __init__(self, *args, **kw):
                rec.calls.append(("Run", args, kw))

        self.FakeRun = FakeRun
        monkeypatch.setattr(demo_report, "Run", FakeRun)
        monkeypatch.setattr(demo_report, "report_sections", self.report_sections)
        for name, key in (("headline_cards", "cards"), ("recovery_section", "recovery"), ("demo_section", "demo")):
            monkeypatch.setattr(demo_report, name, self.piece(name, key))

    def report_sections(self, *args, **kw):
        self.calls.append(("report_sections", args, kw))
        keys = list(self.general_keys)
        if kw.get("necessity") is not None:
            keys.append("necessity")
        return [Section(k, f"<general {k}>") for k in keys + ["extra"]]

    def piece(self, name, key):
        def make(*args, **kw):
            self.calls.append((name, args, kw))
            return Section(key, f"<demo {key}>")

        return make


SUBTITLE = (
    "<h1>tracegraph demo</h1><p class='sub'>ConvE link prediction on a synthetic biomedical graph with planted "
    "drug mechanisms, explained with exact TracIn and graded against the ground truth.</p>"
)


def intro(loss, ck):
    return (
        "Each edge is explained by <code>tracegraph explain</code>'s default method, <b>tracin-margin-path</b> "
        f"(--loss {loss}, all layers{ck}), over its filtered subgraph: rows are ordered by the shortest "
        "drug–disease walk through the triple (its shell: 2 for a direct edge or a two-edge walk, then 3, 4, …), "
        "then by the margin score against the competing answer (the best-scored disease the model does not know "
        "to be true). Plain TracIn is the last column. Rows tagged <span class='tag'>mechanism</span> are planted "
        "ground-truth edges."
    )


def body(path):
    page = Path(path).read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>tracegraph demo</title>")
    return page[page.index("<body>") + len("<body>") : page.index("</body>")]


def test_write_report_opens_the_run_passes_each_piece_its_part_and_orders_the_page(monkeypatch, tmp_path):
    rec = Recorder(monkeypatch)
    nec = {"n_facts": 2, "summary": {"x@1": {}}}
    fidelity = {"recovery": {"influence": {"loss": "lo<g"}}, "necessity": nec}
    marks = {("a", "treats", "b"): {("a", "r", "c")}}
    kw = dict(
        explanations=tmp_path / "expl",
        metrics={"tail": {}},
        counts={"test": 2},
        fidelity=fidelity,
        marks=marks,
        settings={"s": 1},
        stage_seconds={"train": 1.0},
    )
    out = write_report(str(tmp_path / "page.html"), run=str(tmp_path / "run" / "final_model.pt"), device="meta", **kw)
    assert out == tmp_path / "page.html" and isinstance(out, Path)
    assert [c[0] for c in rec.calls] == ["Run", "report_sections", "headline_cards", "recovery_section", "demo_section"]
    assert rec.calls[0][1:] == ((str(tmp_path / "run" / "final_model.pt"), "meta"), {})
    (run,), general_kw = rec.calls[1][1:]
    assert isinstance(run, rec.FakeRun)
    assert general_kw == dict(
        explanations=[tmp_path / "expl"],
        necessity=nec,
        marks=marks,
        mark_label="mechanism",
        explained_title="The best-predicted test edges, explained",
        explained_intro=intro("lo&lt;g", ""),
    )
    assert rec.calls[2][1:] == (({"tail": {}}, {"test": 2}, fidelity), {})
    assert rec.calls[3][1:] == ((fidelity,), {})
    assert rec.calls[4][1:] == (({"s": 1}, {"train": 1.0}), {})
    # the documented order; the demo's cards replace the general ones; a section of no known key is left out
    assert body(out) == SUBTITLE + (
        "<demo cards><general training><general metrics><demo recovery><general necessity>"
        "<general explanations><general unresolved><demo demo><general settings>"
    )


@pytest.mark.parametrize("n_checkpoints, ck", [(3, ", 3 checkpoints"), (1, ", 1 checkpoints"), (0, ""), (None, "")])
def test_write_report_names_the_checkpoint_count_in_the_intro(monkeypatch, tmp_path, n_checkpoints, ck):
    rec = Recorder(monkeypatch)
    fidelity = {"recovery": {"influence": {"loss": "score"}}, "necessity": {"summary": {}}}
    write_report(
        tmp_path / "p.html",
        run=tmp_path / "m.pt",
        explanations="e",
        metrics={},
        counts={},
        fidelity=fidelity,
        marks={},
        settings={},
        stage_seconds={},
        n_checkpoints=n_checkpoints,
    )
    assert rec.calls[0][1:] == ((tmp_path / "m.pt", "cpu"), {})  # a Path opened too, on the CPU by default
    assert rec.calls[1][2]["explained_intro"] == intro("score", ck)
    assert rec.calls[1][2]["necessity"] == {"summary": {}}


@pytest.mark.parametrize("fidelity_nec", ["absent", None, {}])
def test_write_report_without_necessity_gives_the_general_report_a_note(monkeypatch, tmp_path, fidelity_nec):
    rec = Recorder(monkeypatch, general_keys=("metrics",))
    fidelity = {"recovery": {"influence": {"loss": "logit"}}}
    if fidelity_nec != "absent":
        fidelity["necessity"] = fidelity_nec
    run = object()  # an opened run is passed on as it is
    out = write_report(
        tmp_path / "p.html",
        run=run,
        explanations="e",
        metrics={},
        counts={},
        fidelity=fidelity,
        marks={},
        settings={},
        stage_seconds={},
    )
    assert [c[0] for c in rec.calls] == ["report_sections", "headline_cards", "recovery_section", "demo_section"]
    assert rec.calls[0][1] == (run,)
    assert rec.calls[0][2]["necessity"] == {"note": "no necessity test", "summary": {}}
    assert rec.calls[1][1][2] is fidelity  # the cards read the fidelity report as given
    assert body(out) == SUBTITLE + "<demo cards><general metrics><demo recovery><general necessity><demo demo>"
