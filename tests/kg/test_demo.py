"""`tracegraph demo --quick` end to end: the README's first command, on the reduced graph."""

import json

import pytest

from tests.conftest import run_cli


@pytest.mark.slow
def test_demo_quick_end_to_end(tmp_path):
    out = tmp_path / "demo"
    r = run_cli(["demo", "--quick", "-o", out])
    assert r.exit_code == 0, r.output
    page = (out / "report.html").read_text(encoding="utf-8")
    for section in (
        "Training",
        "recovery of the planted mechanisms",
        "Necessity of the explanations",
        "best-predicted test edges",
        "proponents",
        "opponents",
        "mechanism",
        "margin score",
        "competing answer",
        "How to read the boxes below",
        "head–tail walk",
        "data:image/png;base64,",
    ):
        assert section in page, section
    assert "http://" not in page and "https://" not in page  # self-contained
    fid = json.loads((out / "fidelity.json").read_text())
    assert set(fid) >= {"recovery", "recovery_other_loss", "necessity"}
    rec = fid["recovery"]
    assert set(rec["summary"]) == {
        "tracin",
        "tracin-margin",
        "tracin-margin-path",
        "tracin-cosine",
        "relatif",
        "tracin-path",
        "local-retrain",
        "random",
        "degree",
        "path",
    }
    assert set(fid["recovery_other_loss"]["summary"]) == {"tracin", "random", "degree", "path"}
    assert set(rec["summary"]["tracin"]) == {"mrr", "map", "hits@1", "hits@3", "hits@10", "recall@10"}
    assert rec["graded"] > 0 and rec["per_triple"]
    assert rec["influence"]["loss"] == "logit" and fid["recovery_other_loss"]["influence"]["loss"] == "score"
    # explain's default method finds mechanism edges better than a random order of the same
    # candidates. Measured on the quick demo, seed 0 (default vs random): MRR 0.309 / 0.083, MAP
    # 0.165 / 0.044, recall@10 0.187 / 0.042. Plain TracIn does not beat random here (MAP 0.035,
    # recall@10 0): on this small model its top proponents are other drugs' treats edges of the
    # same disease, which the model uses but the planted mechanism does not contain.
    s = {k: {m: v["mean"] for m, v in rec["summary"][k].items()} for k in ("tracin-margin-path", "random")}
    for m in ("map", "recall@10"):
        assert s["tracin-margin-path"][m] > 2 * s["random"][m], (m, s)
    nec = fid["necessity"]
    if nec["summary"]:  # the quick model may rank no test edge first; then the note says so
        assert set(nec["summary"]) == {"neighbour@4", "far@4", "tracin-margin-path@4", "path@4"}
        assert all(0 < v["triples_removed"] <= 4 * nec["n_facts"] for v in nec["summary"].values())
        for name, v in nec["summary"].items():  # what the report's necessity section reads
            assert len(v["delta_hits@1_ci95_first_seed"]) == 2 and 0 <= v["flipped"]["mean"] <= nec["n_facts"]
            assert ("above_far_hits@1" in v) == (name != "far@4"), name
            assert ("above_neighbour_hits@1" in v) == (name not in ("far@4", "neighbour@4")), name
        assert json.loads((out / "necessity" / "necessity.json").read_text())["summary"] == nec["summary"]
    else:
        assert "ranked first" in nec["note"]
    summary = json.loads((out / "demo_summary.json").read_text())
    assert set(summary["stage_seconds"]) == {
        "generate",
        "train",
        "evaluate",
        "filter",
        "explain",
        "grade",
        "necessity test",
        "report",
    }
    assert list((out / "explanations").glob("triple_*_tracin.csv"))


def _recovery(default=(0.6, 0.5), path=(0.4, 0.3)):
    figs = lambda mrr, map_: {
        "mrr": {"mean": mrr, "std": 0.1},
        "map": {"mean": map_, "std": 0.1},
        **{k: {"mean": 0.5, "std": 0.1} for k in ("hits@1", "hits@3", "hits@10", "recall@10")},
    }
    summ = {
        "tracin": figs(0.2, 0.2),
        "tracin-margin-path": figs(*default),
        "local-retrain": figs(0.7, 0.6),
        "random": figs(0.1, 0.1),
        "degree": figs(0.05, 0.05),
        "path": figs(*path),
    }
    return {
        "summary": summ,
        "graded": 1,
        "mean_candidates": 4.0,
        "mechanism_edge_coverage": 1.0,
        "influence": {"loss": "logit", "checkpoints": [{}]},
        "definition": {"candidates": "<c>", "relevant": "r", "ties": "t", "baselines": {"degree": "d", "path": "p"}},
    }


def test_demo_recovery_table_marks_the_default_and_the_best_and_escapes_text():
    from tracegraph.kg.demo.report import recovery_section

    html = recovery_section({"recovery": _recovery()}).html
    rows = html.split("<tr")[2:]  # after the text and the header
    default = next(r for r in rows if "explain&#x27;s default" in r)
    assert default.startswith(' class="default"') and "0.600 ± 0.10" in default
    best = next(r for r in rows if "local retrain" in r)
    assert best.startswith(' class="best"')  # highest MRR, 0.7, bold
    assert "&lt;c&gt;" in html and "<c>" not in html


def _arm(d, above=None, above_neighbour=None):
    a = {
        "delta_hits@1": {"mean": d},
        "delta_mrr": {"mean": d / 2},
        "hits@1": {"mean": 1 - d},
        "mrr": {"mean": 1 - d / 2},
        "mean_rank": {"mean": 1 + d},
        "triples_removed": 8,
        "delta_hits@1_ci95_first_seed": [d - 0.1, d + 0.1],
    }
    a |= {"above_far_hits@1": {"mean": above}} if above is not None else {}
    if above_neighbour is not None:
        mean, ci = above_neighbour
        a |= {"above_neighbour_hits@1": {"mean": mean}, "above_neighbour_hits@1_ci95_first_seed": ci}
    return a


@pytest.mark.parametrize("default, path, ok", [((0.6, 0.5), (0.4, 0.3), True), ((0.439, 0.417), (0.453, 0.430), False)])
def test_demo_cards_compare_the_default_with_the_baselines_on_the_same_figures(default, path, ok):
    from tracegraph.kg.demo.report import headline_cards

    nec = {
        "n_facts": 8,
        "summary": {
            "neighbour@4": _arm(0.125, 0.0625),
            "far@4": _arm(0.0),
            "tracin-margin-path@4": _arm(0.625, 0.5, (0.5, [0.25, 0.75])),
            "path@4": _arm(0.25, 0.1875, (0.125, [-0.125, 0.375])),
        },
        "seeds": {
            "0": {
                "reference": {"ranks": [1] * 8},
                "far@4": {"ranks": [1] * 8},
                "neighbour@4": {"ranks": [1] * 7 + [2]},
                "path@4": {"ranks": [1] * 6 + [2, 2]},
                "tracin-margin-path@4": {"ranks": [2] * 5 + [1] * 3},
            }
        },
    }
    metrics = {"tail": {"mrr": 0.5, "hits@10": 0.9}}
    html = headline_cards(
        metrics, {"test": 8}, {"recovery": {"summary": _recovery(default, path)["summary"]}, "necessity": nec}
    ).html
    assert "best method" not in html  # the default is named, not the winner of another grading
    card = html[html.index("explain&#x27;s default, tracin-margin-path") :]
    cls = "ok" if ok else "bad"
    assert card.startswith(
        "explain&#x27;s default, tracin-margin-path: mechanism recovery MRR / MAP<b><span "
        f"class='{cls}'>{default[0]:.3f} / {default[1]:.3f}</span>"
    )
    assert f"baseline path: recovery MRR / MAP<b>{path[0]:.3f} / {path[1]:.3f}</b>" in html
    # green: the paired excess over neighbour clears zero, and the card says by how much
    assert "<span class='ok'>0.625</span> / 0.125 / 0.000 <span class='note'>0.500 (0.250 to 0.750) above" in html
    assert "flips <b>5 of 8</b>" in html and "same entities flips <b>1</b>" in html  # counted from the ranks


@pytest.mark.parametrize("ci, cls", [([0.05, 0.4], "ok"), ([-0.05, 0.4], "bad"), (None, "bad")])
def test_demo_necessity_card_is_green_only_when_the_lead_over_neighbour_clears_zero(ci, cls):
    from tracegraph.kg.demo.report import headline_cards

    default = _arm(0.5, 0.4) if ci is None else _arm(0.5, 0.4, (0.2, ci))  # 4 × neighbour's drop either way
    nec = {
        "n_facts": 8,
        "summary": {"neighbour@4": _arm(0.125, 0.1), "far@4": _arm(0.0), "tracin-margin-path@4": default},
    }
    html = headline_cards(
        {"tail": {"mrr": 0.5, "hits@10": 0.9}}, {"test": 8}, {"recovery": {"summary": {}}, "necessity": nec}
    ).html
    assert f"<span class='{cls}'>0.500</span> / 0.125 / 0.000" in html
    assert ("above neighbour" in html) == (ci is not None)
