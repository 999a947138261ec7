"""The side-by-side statistics and pages against figures worked out by hand on a few facts."""

import json

import numpy as np
import pytest

from tracegraph.kg.explain import compare_page as CP
from tracegraph.kg.explain import compare_standing as ST
from tracegraph.kg.explain import compare_pairs as CPR
from tracegraph.kg.explain import compare_summary as CS
from tracegraph.kg.explain.necessity_summary import bootstrap_mean

TRAIN = np.array([[0, 0, 1], [0, 0, 2], [0, 0, 3], [1, 1, 2], [3, 1, 2], [4, 1, 2], [2, 2, 0], [4, 3, 5], [5, 3, 4]])


def test_relation_kinds_by_tails_per_head_and_heads_per_tail():
    # r0: 1 head, 3 tails -> 3 tails per head, 1 head per tail: 1-N; r1: 3 heads, 1 tail: N-1; r2: 1-1; r3: 1-1
    assert CS.relation_kinds(TRAIN) == {0: "1-N", 1: "N-1", 2: "1-1", 3: "1-1"}


def test_fact_groups_split_head_degree_and_margin_at_their_medians():
    facts = np.array([[0, 0, 4], [1, 1, 0], [4, 3, 0], [5, 9, 0]])
    # degrees: 0 -> 4, 1 -> 2, 4 -> 3, 5 -> 2; median of (4, 2, 3, 2) = 2.5
    g = CS.fact_groups(facts, TRAIN, np.array([0.1, 2.0, 0.5, 3.0]))  # median 1.25
    assert g["head_degree"] == ["> 2.5", "≤ 2.5", "> 2.5", "≤ 2.5"]
    assert g["relation_kind"] == ["1-N", "N-1", "1-1", "unseen"]
    assert g["margin"] == ["near tie", "confident", "near tie", "confident"]
    assert "margin" not in CS.fact_groups(facts, TRAIN)


def test_fact_groups_count_the_other_training_answers_of_each_facts_query():
    # (0, 0, ?) answers 1, 2, 3 in training; (1, 1, ?) answers 2; (4, 3, ?) answers 5; (2, 2, ?) answers 0
    facts = np.array([[0, 0, 4], [0, 0, 3], [1, 1, 0], [4, 3, 5], [5, 9, 0], [2, 2, 0]])
    # by hand: 3 others; 2 others (3 is the fact itself); 1; none (5 is the fact); none (unseen relation); none
    assert CS.fact_groups(facts, TRAIN, k=2)["answers"] == ["> 2", "1–2", "1–2", "none", "none", "none"]
    assert CS.fact_groups(facts, TRAIN, k=3)["answers"][0] == "1–3"
    assert "answers" not in CS.fact_groups(facts, TRAIN)
    # tables list them from none to more than k; other groupings by name
    assert CS.group_values("answers", ["> 2", "1–2", "none", "1–2"]) == ["none", "1–2", "> 2"]
    assert CS.group_values("margin", ["near tie", "confident"]) == ["confident", "near tie"]


def test_summary_changes_beyond_noise_and_far_and_groups_by_hand():
    before = np.ones(4)
    records = {
        "x": {
            "facts_removed": 7,
            "explanation_sizes": [2, 1, 0, 4],
            "seconds_per_explanation": 0.5,
            "retrain_seconds": 3,
            "ranks": {"original": [1, 2, 1, 4], "reduced": [3, 2, 1, 4]},
        },
        "noise": {
            "facts_removed": 0,
            "explanation_sizes": [0] * 4,
            "seconds_per_explanation": None,
            "retrain_seconds": 2,
            "ranks": {"original": [1, 1, 1, 2], "reduced": [1, 1, 1, 2]},
        },
        "far": {
            "facts_removed": 7,
            "explanation_sizes": [2, 1, 0, 4],
            "seconds_per_explanation": None,
            "retrain_seconds": 2,
            "ranks": {"original": [2, 1, 1, 1], "reduced": [2, 1, 1, 1]},
        },
    }
    groups = {"head_degree": ["a", "a", "b", "b"]}
    s = CS.summarize(records, before, groups, 50, 0)["x"]
    assert (s["facts_removed"], s["mean_size"], s["seconds_per_explanation"]) == (7, 1.75, 0.5)
    o, r = s["original"], s["reduced"]
    assert (o["hits@1"], o["fell"], r["hits@1"], r["fell"]) == (0.5, 2, 0.25, 3)
    assert o["mrr"] == pytest.approx((1 + 0.5 + 1 + 0.25) / 4) and o["change_mrr"] == pytest.approx(o["mrr"] - 1)
    assert o["change_hits@1"] == -0.5 and r["change_hits@1"] == -0.75
    # beyond noise, paired by fact: x's hits (1, 0, 1, 0) minus noise's (1, 1, 1, 0)
    m, lo, hi = bootstrap_mean(np.array([0.0, -1.0, 0.0, 0.0]), 50, 0)
    assert (o["beyond_noise_hits@1"], o["beyond_noise_hits@1_ci95"]) == (m, [lo, hi]) and m == -0.25
    # beyond far: x's hits (1, 0, 1, 0) minus far's (0, 1, 1, 1)
    m, lo, hi = bootstrap_mean(np.array([1.0, -1.0, 0.0, -1.0]), 50, 0)
    assert (o["beyond_far_hits@1"], o["beyond_far_hits@1_ci95"]) == (m, [lo, hi]) and m == -0.25
    assert s["groups"] == {"head_degree": {"a": -0.5, "b": -0.5}}
    both = CS.summarize(records, before, groups, 50, 0)
    for floor in ("noise", "far"):  # a floor is not measured against a floor
        assert not [k for k in both[floor]["original"] if k.startswith("beyond")]
    # an arm named in versus is a reference like the floors: x's hits (1, 0, 1, 0) minus far's (0, 1, 1, 1)
    vs = CS.summarize(records, before, groups, 50, 0, versus=("far", "x"))
    m, lo, hi = bootstrap_mean(np.array([1.0, -1.0, 0.0, -1.0]), 50, 0)
    assert (vs["x"]["original"]["beyond_far_hits@1"], vs["x"]["original"]["beyond_far_hits@1_ci95"]) == (m, [lo, hi])
    assert "beyond_x_hits@1" not in vs["x"]["original"] and "beyond_x_hits@1" not in vs["noise"]["reduced"]
    y = dict(records["x"], ranks={"original": [1, 1, 2, 2], "reduced": [1, 2, 2, 2]})
    vy = CS.summarize({**records, "y": y}, before, groups, 50, 0, versus=("x",))["y"]
    # y's hits minus x's: original (1, 1, 0, 0) - (1, 0, 1, 0); reduced (1, 0, 0, 0) - (0, 0, 1, 0)
    for f, diff in (("original", [0.0, 1.0, -1.0, 0.0]), ("reduced", [1.0, 0.0, -1.0, 0.0])):
        m, lo, hi = bootstrap_mean(np.array(diff), 50, 0)
        assert (vy[f]["beyond_x_hits@1"], vy[f]["beyond_x_hits@1_ci95"]) == (m, [lo, hi])


def test_margins_change_by_hand_and_pair_with_the_references_that_have_them():
    ranks = {"original": [1, 1, 1], "reduced": [1, 1, 1]}
    base = {"facts_removed": 3, "explanation_sizes": [1, 1, 1], "seconds_per_explanation": 0.1, "retrain_seconds": 1}
    records = {
        "ours": {**base, "ranks": ranks, "margins": [0.5, -1.0, 2.0]},
        "kelpie": {**base, "ranks": ranks, "margins": [1.5, 0.0, 2.0]},
        "noise": {**base, "ranks": ranks, "margins": [2.0, 1.0, 1.0]},
        "far": {**base, "ranks": ranks},  # a record from before margins were kept: no margin figures
    }
    before = [2.0, 1.0, 3.0]
    got = CS.summarize(records, np.ones(3), {}, 50, 0, versus=("kelpie",), margins=before)
    o = got["ours"]["original"]
    for key, diff in (
        ("change_margin", [-1.5, -2.0, -1.0]),  # after − before
        ("beyond_noise_margin", [-1.5, -2.0, 1.0]),  # ours' after − noise's after: the same before cancels
        ("beyond_kelpie_margin", [-1.0, -1.0, 0.0]),
    ):
        m, lo, hi = bootstrap_mean(np.array(diff), 50, 0)
        assert (o[key], o[f"{key}_ci95"]) == (m, [lo, hi])
    assert "beyond_far_margin" not in o and "change_margin" not in got["far"]["original"]
    assert "beyond_noise_margin" not in got["noise"]["original"]  # a floor is not held to a floor
    assert "change_margin" not in CS.summarize(records, np.ones(3), {}, 50, 0)["ours"]["original"]  # no before
    rows = CS.margin_table(got, ["kelpie"], str.upper)
    assert rows[:2] == ["| arm | Δ margin | beyond NOISE | beyond KELPIE |", "|---|---|---|---|"]
    assert rows[2] == f"| OURS | {CS.ci_cell(o, 'change_margin')} | {CS.ci_cell(o, 'beyond_noise_margin')} | " + (
        f"{CS.ci_cell(o, 'beyond_kelpie_margin')} |"
    )
    assert [r.split(" |")[0] for r in rows[3:]] == ["| KELPIE", "| NOISE"]
    assert CS.margin_table({"far": got["far"]}) == []
    res = results()
    res["datasets"]["umls"]["fact_sets"]["kelpie-facts"] = {"summary": {"tracin": got["ours"], "kelpie": got["kelpie"]}}
    page = ST.side_by_side_margins(res).splitlines()
    assert page[:4] == [ST.MARGINS_INTRO, "", "**UMLS**:", ""]
    assert page[4] == "| arm | Δ margin | beyond Kelpie |" and page[6].startswith("| TracIn top-k (`tracin`) | ")
    assert ST.side_by_side_margins(results()) == ""  # no retrain recorded its margins: nothing on the page
    md = CS.compare_markdown({**markdown_input(), "summary": got, "groups": {}})
    assert f"\n\n{CS.MARGIN_INTRO}\n\n" + "\n".join(CS.margin_table(got)) + "\n" in md
    assert CS.MARGIN_INTRO not in CS.compare_markdown(
        {**markdown_input(), "summary": {"far": got["far"]}, "groups": {}}
    )


def results():
    arm = {
        "facts_removed": 3,
        "mean_size": 1.5,
        "seconds_per_explanation": 0.25,
        "retrain_seconds": 1,
        "groups": {"head_degree": {"≤ 2": -0.5, "> 2": 0.0}},
    }
    for f, v in (("original", -0.5), ("reduced", -1.0)):
        arm[f] = {
            "change_hits@1": v,
            "change_hits@1_ci95": [v - 0.25, 0.0],
            "change_mrr": v / 2,
            "change_mrr_ci95": [v, 0.0],
            "beyond_noise_hits@1": 0.125,
            "beyond_noise_hits@1_ci95": [-0.5, 0.75],
            "beyond_far_hits@1": -0.25,
            "beyond_far_hits@1_ci95": [-1.0, 0.5],
            "beyond_kelpie_hits@1": v / 4,
            "beyond_kelpie_hits@1_ci95": [v / 2, 0.5],
        }
    return {
        "datasets": {
            "umls": {
                "test_both": {"mrr": 0.9},
                "fact_sets": {
                    "own-facts": {
                        "n_facts": 2,
                        "offered": 5,
                        "arms": ["noise", "tracin", "far", "kelpie", "local-retrain"],
                        "explained": {"tracin": 9.0, "local-retrain": 3.5},
                        "finished": ["tracin"],
                        "summary": {"tracin": arm},
                        "groups": {"head_degree": ["≤ 2", "> 2"]},
                    }
                },
            }
        }
    }


def markdown_input() -> dict:
    """What compare_markdown reads of a run: the results' one measured fact set."""
    fs = results()["datasets"]["umls"]["fact_sets"]["own-facts"]
    return {"model_dir": "runs/x", "n_facts": 2, "offered": 5, "summary": fs["summary"], "groups": fs["groups"]}


def test_the_page_table_word_for_word():
    assert CP.side_by_side_table(results(), "own-facts").splitlines() == [
        "**UMLS**: 2 of the test set's 5 facts ranked first by the original model (test MRR 0.900, both sides); "
        "1 of 5 arms measured.",
        "",
        "| explanations | facts removed (per fact) | ΔH@1 original | ΔMRR original | ΔH@1 reduced | ΔMRR reduced "
        "| ΔH@1 beyond noise (original) | ΔH@1 beyond far (original) | ΔH@1 beyond Kelpie (original / reduced) "
        "| s / explanation |",
        "|---|---|---|---|---|---|---|---|---|---|",
        "| tracegraph `local-retrain` | — | not measured | not measured | not measured | not measured | not measured "
        "| not measured | not measured | 3.50 |",
        "| TracIn top-k (`tracin`) | 3 (1.50) | -0.50 [-0.75, +0.00] | -0.25 [-0.50, +0.00] | -1.00 [-1.25, +0.00] "
        "| -0.50 [-1.00, +0.00] | +0.12 [-0.50, +0.75] | -0.25 [-1.00, +0.50] "
        "| -0.12 [-0.25, +0.50] / -0.25 [-0.50, +0.50] | 0.25 |",
        "| Kelpie | — | not measured | not measured | not measured | not measured | not measured | not measured "
        "| not measured | — |",
        "| far facts: featuring neither end of a graded fact | — | not measured | not measured "
        "| not measured | not measured | not measured | not measured | not measured | — |",
        "| noise floor: another seed, nothing removed | — | not measured | not measured | not measured "
        "| not measured | not measured | not measured | not measured | — |",
    ]
    unpaired = results()  # a run compared without --versus kelpie: a dash, not a figure
    for f in ("original", "reduced"):
        del unpaired["datasets"]["umls"]["fact_sets"]["own-facts"]["summary"]["tracin"][f]["beyond_kelpie_hits@1"]
    row = next(r for r in CP.side_by_side_table(unpaired, "own-facts").splitlines() if r.startswith("| TracIn"))
    assert row.endswith("| -0.25 [-1.00, +0.50] | — | 0.25 |")
    alone = results()  # no Kelpie arm planned: no column beyond it
    alone["datasets"]["umls"]["fact_sets"]["own-facts"]["arms"].remove("kelpie")
    table = CP.side_by_side_table(alone, "own-facts")
    assert "beyond Kelpie" not in table and table.splitlines()[3] == "|---" * 9 + "|"
    assert CP.side_by_side_table(results(), "kelpie-facts") == ""
    planned_only = results()  # arms planned, none finished: no table of "not measured" rows
    planned_only["datasets"]["umls"]["fact_sets"]["own-facts"]["finished"] = []
    assert CP.side_by_side_table(planned_only, "own-facts") == ""
    versus_random = results()  # a run paired with the random head facts too (--versus random-head): one more column
    arm = versus_random["datasets"]["umls"]["fact_sets"]["own-facts"]["summary"]["tracin"]
    for f, v in (("original", -0.375), ("reduced", 0.25)):
        arm[f]["beyond_random-head_hits@1"], arm[f]["beyond_random-head_hits@1_ci95"] = v, [v - 0.5, v + 0.5]
    lines = CP.side_by_side_table(versus_random, "own-facts").splitlines()
    assert lines[2].endswith(
        "| ΔH@1 beyond Kelpie (original / reduced) | ΔH@1 beyond random head facts (original / reduced) | s / explanation |"
    )
    assert lines[3] == "|---" * 11 + "|"
    later = results()  # an arm added later from the filed folder: the line says which, when and where
    later["datasets"]["umls"]["added_arms"] = [
        {"fact_set": "own-facts", "arm": "tracin", "commit": "abc1234", "machine": "2 CPU cores (AMD EPYC), no GPU"},
        {"fact_set": "kelpie-facts", "arm": "kelpie", "commit": "def5678", "machine": "elsewhere"},
    ]
    assert (
        CP.side_by_side_table(later, "own-facts")
        .splitlines()[0]
        .endswith(
            "1 of 5 arms measured. Added later from the filed folder, without the run's weights (the same retrain): "
            "TracIn top-k (`tracin`) at commit abc1234, 2 CPU cores (AMD EPYC)."
        )
    )
    assert lines[5].endswith(
        "| -0.12 [-0.25, +0.50] / -0.25 [-0.50, +0.50] | -0.38 [-0.88, +0.12] / +0.25 [-0.25, +0.75] | 0.25 |"
    )
    assert lines[4].endswith("| not measured | not measured | 3.50 |")  # an arm not measured: in both columns


def test_the_page_groups_and_compare_md_word_for_word():
    assert CP.side_by_side_groups(results(), "own-facts").splitlines() == [
        "**UMLS**, ΔH@1 (original filtering) by group:",
        "",
        "| explanations | head degree > 2 (1 facts) | head degree ≤ 2 (1 facts) |",
        "|---|---|---|",
        "| TracIn top-k (`tracin`) | +0.00 | -0.50 |",
    ]
    md = CS.compare_markdown(markdown_input())
    assert md.startswith("# Necessity, side by side\n\nRun `runs/x`; 2 facts graded (5 offered;")
    assert (
        "| tracin | 3 | 1.50 | -0.50 [-0.75, +0.00] | -0.25 [-0.50, +0.00] | -1.00 [-1.25, +0.00] | "
        "-0.50 [-1.00, +0.00] | +0.12 [-0.50, +0.75] | -0.25 [-1.00, +0.50] | 0.250 |" in md
    )
    assert md.endswith("| arm | > 2 (1 facts) | ≤ 2 (1 facts) |\n|---|---|---|\n| tracin | +0.00 | -0.50 |\n")


def test_relation_kinds_at_the_threshold_of_one_and_a_half():
    tph = np.array([[0, 0, 1], [0, 0, 2], [1, 0, 3]])  # 3 triples, 2 heads, 3 tails: 1.5 tails per head
    hpt = np.array([[0, 1, 5], [1, 1, 5], [2, 1, 6]])  # 3 triples, 3 heads, 2 tails: 1.5 heads per tail
    assert CS.relation_kinds(tph) == {0: "1-N"} and CS.relation_kinds(hpt) == {1: "N-1"}


def test_a_fact_whose_head_never_trained_has_degree_zero():
    g = CS.fact_groups(np.array([[9, 0, 1], [0, 0, 1]]), TRAIN)  # entity 9 is in no training triple
    assert g["head_degree"] == ["≤ 2", "> 2"]  # degrees 0 and 4, median 2


def test_change_counts_only_facts_that_were_first_and_its_intervals_use_the_seed():
    before, after = np.array([1, 2, 1, 3]), np.array([2, 1, 1, 3])
    c = CS.change(before, after, 40, 7)
    assert (c["fell"], c["hits@1"]) == (1, 0.5)  # the second fact rose to first; the fourth stayed third
    assert c["change_hits@1"] == 0.0 and c["change_mrr"] == pytest.approx(((0.5 - 1) + (1 - 0.5)) / 4)
    assert c["change_hits@1_ci95"] == list(bootstrap_mean(np.array([-1.0, 1.0, 0.0, 0.0]), 40, 7)[1:])


def test_an_arm_without_sizes_and_the_kelpie_wording():
    rec = {
        "facts_removed": 0,
        "explanation_sizes": [],
        "seconds_per_explanation": None,
        "retrain_seconds": 4.5,
        "ranks": {"original": [1.0], "reduced": [1.0]},
    }
    s = CS.summarize({"noise": rec}, np.ones(1), {}, 20, 0)["noise"]
    assert (s["mean_size"], s["retrain_seconds"], s["original"]["change_hits@1"]) == (0.0, 4.5, 0.0)
    res = results()
    res["datasets"]["umls"]["fact_sets"] = {"kelpie-facts": res["datasets"]["umls"]["fact_sets"]["own-facts"]}
    assert CP.side_by_side_table(res).startswith("**UMLS**: 2 of Kelpie's 5 facts ranked first")


def test_the_refit_stability_table_word_for_word():
    line = {
        "n_facts": 10,
        "budgets": {"60": {"seconds_per_fact": 5.04}, "240": {"seconds_per_fact": 21.25}},
        "pairs": {"60-240": {"same_set": 0.1, "jaccard": 0.345, "full_margin_mean_abs_change": 0.5}},
    }
    assert CP.stability_table({"datasets": {"fb15k-237-cpu": line, "toy": line}}).splitlines() == [
        "| dataset | facts | steps | identical sets | Jaccard of the sets | full mimic's margin moves by | s / fact |",
        "|---|---|---|---|---|---|---|",
        "| FB15k-237 on a CPU | 10 | 60 vs 240 | 0.10 | 0.34 | 0.50 | 5.0 / 21.2 |",
        "| toy | 10 | 60 vs 240 | 0.10 | 0.34 | 0.50 | 5.0 / 21.2 |",
    ]


def test_same_explanations_count_by_hand_where_two_arms_remove_the_same_set():
    removed = {
        "a": [[1, 2], [3], [4, 5], [], [7]],
        "d": [[5], [5], [5], [5], [5]],  # the same as no other arm's anywhere: no pair, and the pairs after it counted
        "b": [[2, 1], [3], [4], [], [7]],  # facts 0, 1 and 4 the same (order aside); fact 3 empty in both
        "c": [[9], [8], [6], [0], [7]],  # fact 4 the same as a's and b's
        "unfinished": [[1, 2], [3], [4, 5], [], [7]],
    }
    ranks = {"a": [1, 3, 1, 1, 2], "d": [1] * 5, "b": [2, 1, 1, 5, 1], "c": [1, 1, 1, 1, 1]}
    records = {n: {"ranks": {"original": r, "reduced": [1] * 5}} for n, r in ranks.items()}
    got = CPR.same_explanations(removed, records)
    # a, b on facts 0, 1, 4: fact 0 fell in b only, facts 1 and 4 in a only
    # a, c on fact 4: fell in a only; b, c on fact 4: fell in neither
    assert got == [
        {"arms": ["a", "b"], "facts": 3, "fell_in_both": 0, "fell_only_in": {"a": 2, "b": 1}},
        {"arms": ["a", "c"], "facts": 1, "fell_in_both": 0, "fell_only_in": {"a": 1, "c": 0}},
        {"arms": ["b", "c"], "facts": 1, "fell_in_both": 0, "fell_only_in": {"b": 0, "c": 0}},
    ]
    both = CPR.same_explanations({"a": removed["a"], "e": removed["a"]}, {**records, "e": records["a"]})
    assert both == [{"arms": ["a", "e"], "facts": 4, "fell_in_both": 2, "fell_only_in": {"a": 0, "e": 0}}]
    assert CPR.same_explanations({"a": removed["a"], "c": [[9], [8], [6], [0], [1]]}, records) == []


def test_same_explanation_tables_word_for_word():
    pairs = [{"arms": ["tracin", "kelpie"], "facts": 3, "fell_in_both": 1, "fell_only_in": {"tracin": 0, "kelpie": 2}}]
    res = results()
    res["datasets"]["umls"]["fact_sets"]["kelpie-facts"] = {"same_explanation": pairs}
    assert CP.side_by_side_same(res).splitlines() == [
        "**UMLS**:",
        "",
        "| arms | facts | fell in both | fell in the first only | fell in the second only |",
        "|---|---|---|---|---|",
        "| TracIn top-k (`tracin`); Kelpie | 3 | 1 | 0 | 2 |",
    ]
    assert CP.side_by_side_same(results()) == ""
    assert CP.side_by_side_same(res, min_facts=4) == "" and CP.side_by_side_same(
        res, min_facts=3
    ) == CP.side_by_side_same(res)
    base = markdown_input()
    md = CS.compare_markdown({**base, "same_explanation": pairs})
    assert md.endswith(
        f"\n\n{CPR.SAME_INTRO}\n\n| arms | facts | fell in both | fell in the first only | fell in the second only |\n"
        "|---|---|---|---|---|\n| tracin; kelpie | 3 | 1 | 0 | 2 |\n"
    )
    assert CPR.SAME_INTRO not in CS.compare_markdown({**base, "same_explanation": []})


def test_sizes_versus_counts_by_hand_the_facts_by_explanation_size_and_the_falls():
    removed = {
        "kelpie": [[1], [2, 3], [4, 5], [], [6, 7]],
        "ours": [[1, 2], [3, 4], [5], [8], [9, 10]],  # larger, same, smaller, larger, same
        "unfinished": [[1], [2], [3], [4], [5]],
    }
    ranks = {"kelpie": [2, 1, 3, 1, 1], "ours": [2, 2, 1, 4, 5]}
    records = {n: {"ranks": {"original": r, "reduced": [1] * 5}} for n, r in ranks.items()}
    # facts 1, 4 the same size: ours broke both, kelpie neither; 0, 3 ours larger: both fell at 0,
    # ours alone at 3; 2 ours smaller: kelpie fell
    want = {
        "arms": ["ours", "kelpie"],
        "same": {"facts": 2, "fell": {"ours": 2, "kelpie": 0}},
        "larger": {"facts": 2, "fell": {"ours": 2, "kelpie": 1}},
        "smaller": {"facts": 1, "fell": {"ours": 0, "kelpie": 1}},
    }
    assert CPR.sizes_versus(removed, records, ["kelpie", "absent"]) == [want]
    assert CPR.sizes_versus(removed, records, []) == []
    rows = CPR.sizes_table([want, {**want, "smaller": {"facts": 0, "fell": {"ours": 0, "kelpie": 0}}}], str.upper)
    assert rows == [
        "| arms | explanations | facts | fell (first) | fell (second) |",
        "|---|---|---|---|---|",
        "| OURS; KELPIE | the same size | 2 | 2 | 0 |",
        "| OURS; KELPIE | the first larger | 2 | 2 | 1 |",
        "| OURS; KELPIE | the first smaller | 1 | 0 | 1 |",
        "| OURS; KELPIE | the same size | 2 | 2 | 0 |",
        "| OURS; KELPIE | the first larger | 2 | 2 | 1 |",  # no fact smaller: no row
    ]
    res = results()
    as_tracin = json.loads(json.dumps(want).replace('"ours"', '"tracin"'))
    fs = res["datasets"]["umls"]["fact_sets"]["kelpie-facts"] = {"sizes": [as_tracin]}
    assert CP.side_by_side_sizes(res).splitlines()[:5] == [
        "**UMLS**:",
        "",
        "| arms | explanations | facts | fell (first) | fell (second) |",
        "|---|---|---|---|---|",
        "| TracIn top-k (`tracin`); Kelpie | the same size | 2 | 2 | 0 |",
    ]
    assert CP.side_by_side_sizes(res, versus="random-head") == ""
    fs["summary"] = {"tracin": {"retrain_of": "tracin-path"}}  # another arm's retrain: its rows are that arm's
    assert CP.side_by_side_sizes(res) == ""
    del fs["summary"]
    fs["sizes"] = []
    assert CP.side_by_side_sizes(res) == ""
    md = CS.compare_markdown({**markdown_input(), "sizes": [want]})
    assert md.endswith(f"\n\n{CPR.SIZES_INTRO}\n\n" + "\n".join(CPR.sizes_table([want], str)) + "\n")
    assert CPR.SIZES_INTRO not in CS.compare_markdown({**markdown_input(), "sizes": []})


def test_joins_versus_counts_by_hand_which_explanation_holds_a_fact_joining_head_and_tail():
    facts = np.array([[0, 0, 1], [2, 0, 3], [4, 1, 5], [6, 1, 7]])
    train = np.array([[1, 0, 0], [2, 1, 3], [4, 0, 9], [5, 1, 4], [6, 0, 8], [7, 1, 6], [0, 0, 9], [9, 0, 3]])
    # row 0 joins fact 0 (reversed), 1 joins fact 1, 3 joins fact 2 (reversed), 5 joins fact 3 (reversed)
    removed = {
        "kelpie": [[0], [7], [3, 2], []],  # joins at facts 0 and 2; no explanation of fact 3
        "ours": [[0, 6], [1], [2], [4]],  # joins at facts 0 and 1
    }
    ranks = {"kelpie": [2, 1, 1, 3], "ours": [2, 5, 1, 1]}
    records = {n: {"ranks": {"original": r, "reduced": [1] * 4}} for n, r in ranks.items()}
    want = {
        "arms": ["ours", "kelpie"],
        "both": {"facts": 1, "fell": {"ours": 1, "kelpie": 1}},  # fact 0
        "first": {"facts": 1, "fell": {"ours": 1, "kelpie": 0}},  # fact 1
        "second": {"facts": 1, "fell": {"ours": 0, "kelpie": 0}},  # fact 2
        "neither": {"facts": 1, "fell": {"ours": 0, "kelpie": 1}},  # fact 3
    }
    assert CPR.joins_versus(removed, facts, train, records, ["kelpie"]) == [want]
    assert CPR.joins_table([want], str.upper) == [
        "| arms | a fact joining head and tail in | facts | fell (first) | fell (second) |",
        "|---|---|---|---|---|",
        "| OURS; KELPIE | both | 1 | 1 | 1 |",
        "| OURS; KELPIE | the first only | 1 | 1 | 0 |",
        "| OURS; KELPIE | the second only | 1 | 0 | 0 |",
        "| OURS; KELPIE | neither | 1 | 0 | 1 |",
    ]
    res = results()
    res["datasets"]["umls"]["fact_sets"]["kelpie-facts"] = {
        "joins": [json.loads(json.dumps(want).replace('"ours"', '"tracin"'))]
    }
    assert CP.side_by_side_sizes(res, key="joins").splitlines()[2:5] == [
        "| arms | a fact joining head and tail in | facts | fell (first) | fell (second) |",
        "|---|---|---|---|---|",
        "| TracIn top-k (`tracin`); Kelpie | both | 1 | 1 | 1 |",
    ]
    zero = {"facts": 0, "fell": {"tracin": 0, "kelpie": 0}}
    res["datasets"]["umls"]["fact_sets"]["kelpie-facts"]["joins"][0] = {
        "arms": ["tracin", "kelpie"],
        **dict.fromkeys(("both", "first", "second"), zero),
        "neither": {"facts": 4, "fell": {"tracin": 1, "kelpie": 2}},
    }
    assert CP.side_by_side_sizes(res, key="joins") == ""  # no explanation joins head and tail: nothing to split
    md = CS.compare_markdown({**markdown_input(), "joins": [want]})
    assert md.endswith(f"\n\n{CPR.JOINS_INTRO}\n\n" + "\n".join(CPR.joins_table([want], str)) + "\n")


def test_explanation_contents_count_by_hand_what_each_explanation_holds():
    # facts (0, 0, 4) and (1, 1, 3); TRAIN's rows: 0-2 answer (0, 0, ?) with tails 1-3, row 3 is (1, 1, 2),
    # row 6 (2, 2, 0) joins nothing graded, row 4 (3, 1, 2) neither; a fact joining 1 and 3 is added as row 9
    train = np.vstack([TRAIN, [[3, 0, 1]]])
    facts = np.array([[0, 0, 4], [1, 1, 3]])
    removed = {
        "a": [[0, 6], [9]],  # fact 0: another answer (row 0); fact 1: (3, 0, 1) joins its tail and head
        "b": [[6], [3]],  # fact 0: nothing of its own; fact 1: (1, 1, 2) answers its query with another tail
        "c": [[], [4]],  # fact 0 unexplained; (3, 1, 2) shares fact 1's relation, not its head
        "unfinished": [[0], [3]],
    }
    ranks = {"a": ([1, 2], [3, 2]), "b": ([1, 1], [1, 4]), "c": ([1, 1], [1, 1])}
    records = {n: {"ranks": {"original": o, "reduced": r}} for n, (o, r) in ranks.items()}
    got = CS.explanation_contents(removed, facts, train, records)
    assert got == {
        "a": {
            "explained": 2,
            "head_tail": 1,
            "query_answer": 1,
            "unfiltered": 1,
            "fell": 1,
            "fell_reduced_only": 1,
            "head_kept": 2,
            "fell_where_head_kept": 1,
        },
        # b's (1, 1, 2) un-filters fact 1's query only; (0, 0, ?) keeps its answers
        "b": {
            "explained": 2,
            "head_tail": 0,
            "query_answer": 1,
            "unfiltered": 1,
            "fell": 0,
            "fell_reduced_only": 1,
            "head_kept": 2,
            "fell_where_head_kept": 0,
        },
        "c": {
            "explained": 1,
            "head_tail": 0,
            "query_answer": 0,
            "unfiltered": 0,
            "fell": 0,
            "fell_reduced_only": 0,
            "head_kept": 2,
            "fell_where_head_kept": 0,
        },
    }
    # with the floors finished: the facts both keep first (here fact 1: noise breaks fact 0), and the arm's falls there
    floors = {"noise": {"ranks": {"original": [2, 1]}}, "far": {"ranks": {"original": [1, 1]}}}
    with_floors = CS.explanation_contents(removed, facts, train, {**records, **floors})
    assert {n: (c["floors_keep"], c["fell_where_floors_keep"]) for n, c in with_floors.items()} == {
        "a": (1, 1),  # a broke fact 1, which both floors keep first
        "b": (1, 0),
        "c": (1, 0),
    }
    only_far = CS.explanation_contents(
        {"a": removed["a"]},
        facts,
        train,
        {"a": {"ranks": {"original": [1, 2], "reduced": [1, 2]}}, "far": floors["far"]},
    )["a"]
    assert (only_far["floors_keep"], only_far["fell_where_floors_keep"]) == (2, 1)  # one finished floor is enough
    both_fell = CS.explanation_contents(
        {"a": removed["a"]}, facts, train, {"a": {"ranks": {"original": [3, 2], "reduced": [3, 2]}}, **floors}
    )["a"]
    assert (both_fell["fell"], both_fell["fell_where_floors_keep"]) == (
        2,
        1,
    )  # fact 0 fell under noise too: not counted
    # a removal made for one fact un-filters another fact's query: "unfiltered" counts it, "query_answer" does not
    shared = CS.explanation_contents({"d": [[], [1]]}, facts, train, {"d": records["c"]})["d"]
    assert (shared["query_answer"], shared["unfiltered"]) == (0, 1)
    # a head left with no training fact: entity 0 features in rows 0, 1, 2 and 6, entity 1 in rows 0, 3 and 9;
    # the arm's removals count together, whichever fact's explanation each belongs to
    bare = {"e": [[0, 1, 2, 6], []], "f": [[0, 3], [9]], "g": [[0, 1, 2], [3]]}
    fell_first = {"ranks": {"original": [2, 1], "reduced": [2, 1]}}  # fact 0 (head 0) fell, fact 1 (head 1) stayed
    got = CS.explanation_contents(bare, facts, train, {n: fell_first for n in bare})
    assert {n: (c["head_kept"], c["fell_where_head_kept"]) for n, c in got.items()} == {
        "e": (1, 0),  # head 0 bare: its fall is not counted
        "f": (1, 1),  # head 1 bare; head 0 keeps rows 1, 2 and 6
        "g": (2, 1),  # g leaves row 6 to 0, row 9 to 1
    }


def test_explanation_contents_tables_word_for_word():
    contents = {
        "tracin": {
            "explained": 2,
            "head_tail": 1,
            "query_answer": 1,
            "unfiltered": 2,
            "fell": 1,
            "fell_reduced_only": 0,
            "head_kept": 2,
            "fell_where_head_kept": 1,
        },
        "kelpie": {
            "explained": 1,
            "head_tail": 0,
            "query_answer": 1,
            "unfiltered": 1,
            "fell": 0,
            "fell_reduced_only": 1,
        },
    }
    contents["tracin"].update(floors_keep=2, fell_where_floors_keep=1)  # kelpie's summarised before any floor
    res = results()
    res["datasets"]["umls"]["fact_sets"]["kelpie-facts"] = {"contents": contents}
    header = (
        "| explanations | facts explained | holding a fact joining head and tail | holding another answer (h, r, t′) "
        "| queries losing a known answer to the removals | fell (original) | fell under the reduced filter only "
        "| fell where the head keeps a training fact | fell where the floors keep it first |"
    )
    assert CP.side_by_side_contents(res).splitlines() == [
        "**UMLS**:",
        "",
        header,
        "|---|---|---|---|---|---|---|---|---|",
        "| TracIn top-k (`tracin`) | 2 | 1 | 1 | 2 | 1 | 0 | 1 of 2 | 1 of 2 |",
        "| Kelpie | 1 | 0 | 1 | 1 | 0 | 1 | — | — |",  # summarised before heads and floors were counted
    ]
    assert CP.side_by_side_contents(results()) == ""
    base = markdown_input()
    md = CS.compare_markdown({**base, "contents": contents})
    assert md.endswith(
        f"\n\n{CS.CONTENTS_INTRO}\n\n{header}\n|---|---|---|---|---|---|---|---|---|\n"
        "| tracin | 2 | 1 | 1 | 2 | 1 | 0 | 1 of 2 | 1 of 2 |\n| kelpie | 1 | 0 | 1 | 1 | 0 | 1 | — | — |\n"
    )
    assert CS.CONTENTS_INTRO not in CS.compare_markdown({**base, "contents": {}})


def test_facts_tsv_lists_each_fact_its_groups_and_every_arms_ranks_word_for_word():
    facts = [["a", "r", "b"], ["c", "r", "d"]]
    groups = {"head_degree": ["≤ 2", "> 2"], "margin": ["near tie", "confident"]}
    records = {
        "kelpie": {"ranks": {"original": [1, 3.5], "reduced": [2, 7]}},
        "noise": {"ranks": {"original": [1, 1], "reduced": [1, 1]}},
    }
    assert CS.facts_tsv(facts, groups, records).split("\n") == [
        "head\trelation\ttail\thead_degree\tmargin\tkelpie original\tkelpie reduced\tnoise original\tnoise reduced",
        "a\tr\tb\t≤ 2\tnear tie\t1\t2\t1\t1",
        "c\tr\td\t> 2\tconfident\t3.5\t7\t1\t1",
        "",
    ]
    assert CS.facts_tsv(facts, {}, {}).split("\n") == ["head\trelation\ttail", "a\tr\tb", "c\tr\td", ""]


def test_the_standing_table_sets_the_default_beside_kelpie_word_for_word():
    res = results()
    arm = res["datasets"]["umls"]["fact_sets"]["own-facts"]["summary"]["tracin"]
    kelpie = {f: {"change_hits@1": -0.25, "change_hits@1_ci95": [-0.5, 0.0]} for f in ("original", "reduced")}
    fs = {"n_facts": 7, "summary": {"tracin-margin-path": arm, "kelpie": kelpie}}
    res["datasets"] = {"wn18rr-cpu": {"fact_sets": {"kelpie-facts": fs}}, "other": {"fact_sets": {}}}
    head = (
        "| dataset | facts | default: ΔH@1 original / reduced | Kelpie's: ΔH@1 original / reduced "
        "| default − Kelpie's, paired | noise floor: ΔH@1 | default − noise floor, paired "
        "| default − far facts, paired | s / explanation (Kelpie's) |"
    )
    mine = "| WN18RR on a CPU | 7 | -0.50 [-0.75, +0.00] / -1.00 [-1.25, +0.00] | -0.25 [-0.50, +0.00] / -0.25 [-0.50, +0.00] "
    versus = "| -0.12 [-0.25, +0.50] / -0.25 [-0.50, +0.50] "
    assert ST.standing_table(res).splitlines() == [
        head,
        "|---|---|---|---|---|---|---|---|---|",
        mine + versus + "| not measured | not measured | not measured | 0.25 (28) |",  # no floor yet
    ]
    fs["summary"]["noise"] = kelpie
    assert ST.standing_table(res).splitlines()[2] == (
        mine + versus + "| -0.25 [-0.50, +0.00] | +0.12 [-0.50, +0.75] | not measured | 0.25 (28) |"
    )
    fs["summary"]["far"] = kelpie
    assert ST.standing_table(res).splitlines()[2] == (
        mine + versus + "| -0.25 [-0.50, +0.00] | +0.12 [-0.50, +0.75] | -0.25 [-1.00, +0.50] | 0.25 (28) |"
    )
    del fs["summary"]["far"]

    def pooled_arm(change, beyond_kelpie=None, beyond_noise=None):
        out = {}
        for f, d in (("original", 0.0), ("reduced", -0.05)):
            out[f] = {"change_hits@1": change + d, "change_hits@1_ci95": [change + d - 0.1, change + d + 0.1]}
            for key, m in (("beyond_kelpie_hits@1", beyond_kelpie), ("beyond_noise_hits@1", beyond_noise)):
                if m is not None:
                    out[f] |= {key: m + d, f"{key}_ci95": [m + d - 0.1, m + d + 0.1]}
        return out

    pooled = {"tracin-margin-path": pooled_arm(-0.6, -0.2, -0.4), "kelpie": pooled_arm(-0.4), "noise": pooled_arm(-0.2)}
    res["datasets"]["wn18rr-cpu"]["pooled"] = {"folders": ["a", "b"], "n_facts": 6, "summary": pooled}
    assert ST.standing_table(res).splitlines()[3] == (
        "| WN18RR on a CPU, pooled over 2 retrain seeds | 6 | -0.60 [-0.70, -0.50] / -0.65 [-0.75, -0.55] "
        "| -0.40 [-0.50, -0.30] / -0.45 [-0.55, -0.35] | -0.20 [-0.30, -0.10] / -0.25 [-0.35, -0.15] "
        "| -0.20 [-0.30, -0.10] | -0.40 [-0.50, -0.30] | not measured | 0.25 (28) |"
    )
    del fs["summary"]["kelpie"]  # the default alone: nothing to stand against
    assert ST.standing_table(res) == ""


def test_the_pooled_table_word_for_word_and_empty_without_a_pooled_run():
    res = results()
    assert ST.pooled_table(res) == ""
    arm = res["datasets"]["umls"]["fact_sets"]["own-facts"]["summary"]["tracin"]
    res["datasets"]["umls"]["pooled"] = {
        "folders": ["a", "b", "c"],
        "n_facts": 5,
        "seeds": {"kelpie": [42, 43, 44], "tracin": [42, 43, 44]},
        "summary": {"kelpie": arm, "tracin": arm},  # table order: TracIn before Kelpie
    }
    assert ST.pooled_table(res).splitlines() == [
        "**UMLS**, 5 facts, each fact's outcome averaged over 3 retrain seeds, then bootstrapped over the facts:",
        "",
        "| explanations | retrain seeds | ΔH@1 original | ΔH@1 reduced | ΔH@1 beyond noise (original) "
        "| ΔH@1 beyond Kelpie (original / reduced) |",
        "|---|---|---|---|---|---|",
        "| TracIn top-k (`tracin`) | 42, 43, 44 | -0.50 [-0.75, +0.00] | -1.00 [-1.25, +0.00] | +0.12 [-0.50, +0.75] "
        "| -0.12 [-0.25, +0.50] / -0.25 [-0.50, +0.50] |",
        "| Kelpie | 42, 43, 44 | -0.50 [-0.75, +0.00] | -1.00 [-1.25, +0.00] | +0.12 [-0.50, +0.75] "
        "| -0.12 [-0.25, +0.50] / -0.25 [-0.50, +0.50] |",
    ]


def test_our_own_facts_of_the_side_by_side_file_follow_kelpies_on_the_page_and_in_the_figure():
    own = results()  # a side-by-side file holding our own facts only (a run filed under its own name)
    empty = {"datasets": {}}
    files = {"necessity_kelpie": own, "compare_umls": empty, "local_refit_stability": empty, "kelpie_released": empty}
    block = CP.page_blocks(files)[("<!-- side-by-side:kelpie-facts -->", "<!-- /side-by-side -->")]
    assert block == CP.side_by_side_table(own, "own-facts") != ""
    assert list(CP.page_panels(files)) == ["UMLS: 2 test facts ranked first"]


def released(change: float, facts: int = 2) -> dict:
    cell = {"change_hits@1": change, "change_hits@1_ci95": [change - 0.25, 0.0]}
    return {"facts_removed": facts, "reduced": cell}


def released_file() -> dict:
    # Kelpie's released figures: all its facts, then the 2 of them the filed series "umls" graded
    return {
        "datasets": {
            "umls": {
                "n_facts": 4,
                "arms": {"kelpie": released(-0.75), "data_poisoning": released(-0.5), "criage": released(0.0)},
                "graded": {
                    "umls": {
                        "n_facts": 2,
                        "arms": {"kelpie": released(-0.5), "k1": released(-1.0)},
                        "agreement": {"kelpie": {"both": 1, "theirs_only": 0, "ours_only": 1, "neither": 0}},
                    }
                },
            }
        }
    }


def test_kelpies_released_figures_sit_above_the_same_explanations_through_our_retrain_on_the_same_facts():
    ours = results()
    ours["datasets"]["umls"]["fact_sets"]["kelpie-facts"] = ours["datasets"]["umls"]["fact_sets"].pop("own-facts")
    through_ours = {"reduced": {"change_hits@1": -0.25, "change_hits@1_ci95": [-0.5, 0.0]}}
    ours["datasets"]["umls"]["fact_sets"]["kelpie-facts"]["summary"] = {"kelpie": through_ours}
    assert ST.released_table(released_file(), ours).splitlines() == [
        "| facts | model and retrain | Kelpie | Data Poisoning | CRIAGE | K1 |",
        "|---|---|---|---|---|---|",
        "| umls: Kelpie's 4 facts | Kelpie's | -0.75 [-1.00, +0.00] | -0.50 [-0.75, +0.00] | +0.00 [-0.25, +0.00] "
        "| not measured |",
        "| UMLS: the 2 our model ranks first | Kelpie's | -0.50 [-0.75, +0.00] | not measured | not measured "
        "| -1.00 [-1.25, +0.00] |",
        "|  | ours | -0.25 [-0.50, +0.00] | not measured | not measured | not measured |",
    ]
    assert ST.released_table({"datasets": {}}, ours) == ""


def test_the_figure_marks_kelpies_released_figure_on_the_panels_of_its_graded_facts_only():
    ours = results()
    fs = ours["datasets"]["umls"]["fact_sets"]
    fs["kelpie-facts"] = dict(fs["own-facts"], summary={"kelpie": {}, "tracin": {}})
    files = {"necessity_kelpie": ours, "compare_umls": {"datasets": {}}, "kelpie_released": released_file()}
    panels = CP.page_panels(files)
    assert list(panels) == ["UMLS: 2 of Kelpie's facts ranked first", "UMLS: 2 test facts ranked first"]
    # only the arms the panel measured, and only on the panel of Kelpie's facts
    assert CP.page_marks(files) == {"UMLS: 2 of Kelpie's facts ranked first": {"kelpie": -0.5}}
    files["kelpie_released"]["datasets"]["umls"]["graded"] = {}
    assert CP.page_marks(files) == {}


def test_the_fact_by_fact_agreement_of_the_two_retrains_is_one_row_per_series_and_arm_our_retrain_ran():
    assert ST.released_agreement_table(released_file()).splitlines() == [
        "| facts | explanations | fell in both retrains | in Kelpie's only | in ours only | stood in both |",
        "|---|---|---|---|---|---|",
        "| UMLS (2 facts) | Kelpie | 1 | 0 | 1 | 0 |",
    ]
    assert ST.released_agreement_table({"datasets": {}}) == ""
