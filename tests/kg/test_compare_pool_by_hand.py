"""compare-pool: compare folders of one fact set pooled over retrain seeds, against per-fact means worked by hand."""

import json

import numpy as np
import pytest

from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.explain import compare_pool as P
from tracegraph.kg.explain.compare_standing import pooled_table
from tracegraph.kg.explain.compare_summary import MARGIN_INTRO, ci_cell, margin_table
from tracegraph.kg.explain.necessity_summary import bootstrap_mean
from tests.conftest import run_cli, run_cli_error

FACTS = [["a", "r", "b"], ["c", "r", "d"], ["e", "r", "f"], ["g", "r", "h"]]


def folder(d, seed, ranks, facts=FACTS):
    """A compare output folder: compare.json and one record per finished arm (original ranks; reduced all first)."""
    (d / "arms").mkdir(parents=True)
    (d / "compare.json").write_text(json.dumps({"facts": facts, "finished": list(ranks)}))
    for arm, r in ranks.items():
        rec = {"seed": seed + (arm == "noise"), "ranks": {"original": r, "reduced": [1] * len(r)}}
        (d / "arms" / f"{arm}.json").write_text(json.dumps(rec))
    return d


@pytest.fixture
def two(tmp_path):
    a = folder(tmp_path / "s42", 42, {"ours": [2, 1, 3, 1], "kelpie": [1, 1, 2, 1], "noise": [1, 1, 1, 2]})
    b = folder(
        tmp_path / "s43", 43, {"ours": [2, 4, 1, 1], "kelpie": [1, 1, 1, 1], "noise": [1, 2, 1, 1], "far": [1] * 4}
    )
    return [a, b]


def test_each_facts_outcome_is_averaged_over_the_folders_before_the_bootstrap(two):
    res = P.pool_folders(two, n_boot=200, seed=3, versus=["kelpie"])
    assert res["arms"] == ["ours", "kelpie", "noise"]  # far finished in one folder only
    assert res["seeds"] == {"ours": [42, 43], "kelpie": [42, 43], "noise": [43, 44]}
    # per fact, the share of the two retrains where it stayed first
    ours, kelpie, noise = [0, 0.5, 0.5, 1], [1, 1, 0.5, 1], [1, 0.5, 1, 0.5]
    o = res["summary"]["ours"]["original"]
    assert o["hits@1"] == pytest.approx(np.mean(ours))
    assert (o["change_hits@1"], *o["change_hits@1_ci95"]) == pytest.approx(bootstrap_mean(np.subtract(ours, 1), 200, 3))
    rr = [(1 / 2 + 1 / 2) / 2, (1 + 1 / 4) / 2, (1 / 3 + 1) / 2, 1]
    assert o["mrr"] == pytest.approx(np.mean(rr))
    assert (o["change_mrr"], *o["change_mrr_ci95"]) == pytest.approx(bootstrap_mean(np.subtract(rr, 1), 200, 3))
    beyond = np.subtract(ours, noise)
    assert (o["beyond_noise_hits@1"], *o["beyond_noise_hits@1_ci95"]) == pytest.approx(bootstrap_mean(beyond, 200, 3))
    assert o["beyond_kelpie_hits@1"] == pytest.approx(np.mean(np.subtract(ours, kelpie)))
    assert "beyond_far_hits@1" not in o  # far is not pooled: missing in one folder
    k = res["summary"]["kelpie"]["original"]
    assert "beyond_kelpie_hits@1" not in k and k["beyond_noise_hits@1"] == pytest.approx(
        np.mean(np.subtract(kelpie, noise))
    )
    assert not [key for key in res["summary"]["noise"]["original"] if key.startswith("beyond_")]  # a floor: none
    assert res["summary"]["ours"]["reduced"]["change_hits@1"] == 0.0  # every fact first under the reduced filter


def test_the_pooled_page_word_for_word(two):
    res = P.pool_folders(two, n_boot=200, seed=3, versus=["kelpie"])
    md = P.pooled_markdown(res).splitlines()
    assert md[0] == "# Necessity, side by side, pooled over retrain seeds"
    assert md[2].startswith(f"4 facts; 2 compare folders: `{two[0]}`, `{two[1]}`. Each fact's outcome is averaged")
    assert md[4] == (
        "| arm | retrain seeds | ΔH@1 original | ΔMRR original | ΔH@1 reduced | ΔMRR reduced | "
        "beyond noise (original) | beyond kelpie (original) | beyond kelpie (reduced) |"
    )
    assert md[1] == md[3] == "" and md[5] == "| " + " | ".join(["---"] * 9) + " |"  # 6 columns and 3 paired
    assert md[2].endswith(
        "then bootstrapped over the facts (95 % intervals); Δ = after − before (negative: the predictions fell)."
    )

    def cell(x, key):  # a figure and its interval, as the table writes them
        lo, hi = x[f"{key}_ci95"]
        return f"{x[key]:+.2f} [{lo:+.2f}, {hi:+.2f}]"

    o, r = res["summary"]["ours"]["original"], res["summary"]["ours"]["reduced"]
    figures = [cell(o, "change_hits@1"), cell(o, "change_mrr"), cell(r, "change_hits@1"), cell(r, "change_mrr")]
    paired = [cell(o, "beyond_noise_hits@1"), cell(o, "beyond_kelpie_hits@1"), cell(r, "beyond_kelpie_hits@1")]
    assert md[6] == "| ours | 42, 43 | " + " | ".join(figures + paired) + " |"
    assert md[8].startswith("| noise | 43, 44 | ") and md[8].endswith("| — | — | — |")


def test_margins_are_pooled_per_fact_where_every_retrain_recorded_them(tmp_path):
    def with_margins(d, margins, before=None):
        for arm, m in margins.items():
            rec = json.loads((d / "arms" / f"{arm}.json").read_text())
            (d / "arms" / f"{arm}.json").write_text(json.dumps({**rec, "margins": m}))
        if before is not None:
            doc = json.loads((d / "compare.json").read_text())
            (d / "compare.json").write_text(json.dumps({**doc, "margins": before}))
        return d

    ranks = {"ours": [1, 1, 1, 1], "kelpie": [1, 1, 1, 1], "noise": [1, 1, 1, 1]}
    a = with_margins(
        folder(tmp_path / "a", 43, ranks),
        {"ours": [0.0, 1.0, 2.0, 3.0], "kelpie": [1.0, 1.0, 1.0, 1.0], "noise": [2.0, 2.0, 2.0, 2.0]},
        before=[3.0, 3.0, 3.0, 3.0],
    )
    b = with_margins(
        folder(tmp_path / "b", 44, ranks),
        {"ours": [2.0, 1.0, 0.0, 1.0], "kelpie": [1.0, 3.0, 1.0, 1.0], "noise": [2.0, 0.0, 2.0, 4.0]},
    )
    res = P.pool_folders([a, b], n_boot=200, seed=3, versus=["kelpie"])
    o = res["summary"]["ours"]["original"]
    ours, kelpie, noise = [1.0, 1.0, 1.0, 2.0], [1.0, 2.0, 1.0, 1.0], [2.0, 1.0, 2.0, 3.0]  # per fact, over a and b
    for key, values in (
        ("change_margin", np.subtract(ours, 3.0)),  # against the first folder's run margins
        ("beyond_noise_margin", np.subtract(ours, noise)),
        ("beyond_kelpie_margin", np.subtract(ours, kelpie)),
    ):
        assert (o[key], *o[f"{key}_ci95"]) == pytest.approx(bootstrap_mean(values, 200, 3))
    assert "beyond_noise_margin" not in res["summary"]["noise"]["original"]  # a floor: none
    md = P.pooled_markdown(res)
    tail = f"{MARGIN_INTRO} Each fact's margin is its mean over the folders whose retrains recorded it, of 2: "
    tail += "ours 2, kelpie 2, noise 2.\n\n" + "\n".join(margin_table(res["summary"], ["kelpie"])) + "\n"
    assert md.endswith(tail)
    assert "| ours | " + ci_cell(o, "change_margin") + " | " in md
    page = pooled_table({"datasets": {"fb15k-237-cpu": {"pooled": res}}})
    assert "pooled the same way over the retrains that recorded it (2 of the 2 seeds per arm):" in page
    assert "| arm | Δ margin | beyond noise floor | beyond Kelpie |" in page
    assert res["margin_folders"] == {"ours": 2, "kelpie": 2, "noise": 2}
    # a folder whose retrains kept no margins (c), one whose noise arm did not (d): each figure over the folders
    # that kept what it needs, the run's margins from any folder that has them
    c = folder(tmp_path / "c", 45, ranks)
    d = with_margins(folder(tmp_path / "d", 46, ranks), {"ours": [4.0, 4.0, 4.0, 4.0], "kelpie": [0.0] * 4})
    res = P.pool_folders([c, a, d], n_boot=200, seed=3, versus=["kelpie"])
    assert res["margin_folders"] == {"ours": 2, "kelpie": 2, "noise": 1}
    o = res["summary"]["ours"]["original"]
    for key, values in (
        ("change_margin", np.subtract([2.0, 2.5, 3.0, 3.5], 3.0)),  # ours over a and d, against a's run margins
        ("beyond_noise_margin", np.subtract([0.0, 1.0, 2.0, 3.0], 2.0)),  # over a only: d's noise kept none
        ("beyond_kelpie_margin", [1.5, 2.0, 2.5, 3.0]),  # over a and d
    ):
        assert (o[key], *o[f"{key}_ci95"]) == pytest.approx(bootstrap_mean(np.asarray(values), 200, 3))


def test_pooling_resamples_a_thousand_times_with_seed_0_unless_told(two):
    assert P.pool_folders(two) == P.pool_folders(two, n_boot=1000, seed=0)
    assert P.pool_folders(two) != P.pool_folders(two, n_boot=20, seed=0)  # so the settings show in the intervals
    assert P.pool_folders(two) != P.pool_folders(two, n_boot=1000, seed=1)


def test_pooling_refuses_other_facts_a_folder_that_is_no_compare_output_and_a_single_folder(tmp_path, two):
    other = folder(tmp_path / "other", 44, {"ours": [1, 1, 1]}, facts=FACTS[:3])
    with pytest.raises(DataError) as e:
        P.pool_folders([two[0], other])
    assert str(e.value) == f"{other}: it grades other facts than {two[0]} (pool folders of one fact set)"
    with pytest.raises(DataError) as e:
        P.pool_folders([two[0], tmp_path])
    assert str(e.value) == f"{tmp_path}: not a `fidelity compare` output folder (no compare.json)"
    with pytest.raises(TracegraphError, match="at least two compare folders to pool, not 1"):
        P.pool_folders(two[:1])


def test_compare_pool_command_writes_pooled_json_and_md_with_its_options(tmp_path, two):
    out = tmp_path / "pooled"
    res = run_cli(
        ["fidelity", "compare-pool", *two, "-o", out, "--versus", "kelpie", "--bootstrap", "50", "--seed", "9"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "pooled.json").read_text())
    assert doc == json.loads(json.dumps(P.pool_folders(two, n_boot=50, seed=9, versus=["kelpie"])))
    assert (out / "pooled.md").read_text() == P.pooled_markdown(doc)
    assert "ours: ΔH@1 -0.500 over 2 folders" in res.output and "4 facts, 3 arms pooled" in res.output
    without = run_cli(["fidelity", "compare-pool", *two, "-o", tmp_path / "plain", "--bootstrap", "50", "--seed", "9"])
    assert without.exit_code == 0
    assert (
        "beyond_kelpie_hits@1"
        not in json.loads((tmp_path / "plain" / "pooled.json").read_text())["summary"]["ours"]["original"]
    )
    run_cli_error(["fidelity", "compare-pool", two[0], tmp_path, "-o", tmp_path / "bad"], contains="no compare.json")
    assert not (tmp_path / "bad").exists()
