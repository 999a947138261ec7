"""benchmarks/kelpie_released.py: Kelpie's released ranks recomputed as ΔH@1 and ΔMRR, on all its facts and on
each filed series' graded facts, against a naive count over files written out by hand."""

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.append(str(BENCH))  # the script imports the ones beside it, as when run from the command line

import kelpie_released as kr  # noqa: E402

# per dataset: (fact, explanation, rank before, rank after) for the four explainers' files
ROWS = {
    "fb15k237": [
        (("a", "r", "b"), "a|s|x;a|s|y", 1, 3),
        (("c", "r", "d"), "c|s|x", 1, 1),
        (("e", "r", "f"), "e|s|x", 1, 2),
    ],
    "wn18rr": [(("g", "r", "h"), "g|s|x", 1, 1), (("i", "r", "j"), "i|s|x;i|s|y;j|s|i", 1, 4)],
}


def anchors(tmp_path: Path, bad: str | None = None) -> Path:
    d = tmp_path / "anchors"
    d.mkdir()
    for name, rows in ROWS.items():
        for arm in kr.EXPLAINERS:
            lines = ["head\trelation\ttail\texplanation\trank_before\trank_after"]
            lines += ["\t".join([*f, e, str(b), str(a)]) for f, e, b, a in rows]
            if bad and arm == "k1" and name == "wn18rr":
                lines[2] = lines[2].rsplit("\t", 1)[0] + f"\t{bad}"
            (d / f"conve_{name}_necessary_{arm}.tsv").write_text("\n".join(lines) + "\n")
    return d


def filed(tmp_path: Path, graded: dict[str, list]) -> Path:
    """A filed series folder per name, its graded facts and Kelpie's arm's ranks through our retrain in its
    facts.tsv, and the index naming them (one series unmeasured)."""
    d = tmp_path / "necessity_kelpie"
    index = {"datasets": {}}
    for series, facts in graded.items():
        (d / series / "kelpie-facts").mkdir(parents=True)
        rows = ["head\trelation\ttail\tkelpie original\tkelpie reduced"]
        rows += ["\t".join([*f, "1", str(ours)]) for f, ours in facts]
        (d / series / "kelpie-facts" / "facts.tsv").write_text("\n".join(rows) + "\n")
        index["datasets"][series] = {"fact_sets": {"kelpie-facts": {"summary": {"kelpie": {}}}}}
    index["datasets"]["wn18rr"] = {"fact_sets": {"kelpie-facts": {"summary": {}}}}  # nothing measured: left out
    (tmp_path / "necessity_kelpie.json").write_text(json.dumps(index))
    return d


def test_released_figures_are_the_naive_hits_and_reciprocal_ranks_on_all_facts_and_on_the_graded_ones(tmp_path):
    out = tmp_path / "released.json"
    # the graded facts with Kelpie's explanations' rank through our retrain (reduced filter)
    graded = {"fb15k-237-cpu": [(("e", "r", "f"), 1), (("a", "r", "b"), 1.5)], "wn18rr-cpu": [(("i", "r", "j"), 1)]}
    assert kr.main([str(anchors(tmp_path)), "--filed", str(filed(tmp_path, graded)), "-o", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["command"].startswith("python benchmarks/kelpie_released.py") and got["commit"] and got["machine"]
    for ds, name in kr.DATASETS.items():
        d = got["datasets"][ds]
        rows = ROWS[name]
        assert d["n_facts"] == len(rows) and set(d["arms"]) == set(kr.EXPLAINERS)
        k = d["arms"]["kelpie"]
        assert k["facts_removed"] == sum(len(e.split(";")) for _, e, _, _ in rows)
        assert k["reduced"]["change_hits@1"] == pytest.approx(sum((a == 1) - 1 for *_, a in rows) / len(rows))
        assert k["reduced"]["change_mrr"] == pytest.approx(sum(1 / a - 1 for *_, a in rows) / len(rows))
        assert k["reduced"]["fell"] == sum(a > 1 for *_, a in rows)
    assert set(got["datasets"]["wn18rr"]["graded"]) == {"wn18rr-cpu"}  # the unmeasured series is left out
    cpu = got["datasets"]["fb15k-237"]["graded"]["fb15k-237-cpu"]
    assert cpu["n_facts"] == 2
    assert cpu["arms"]["k1"]["reduced"]["change_hits@1"] == pytest.approx(-1.0)  # both graded facts fell
    assert cpu["arms"]["k1"]["reduced"]["change_mrr"] == pytest.approx((1 / 2 - 1 + 1 / 3 - 1) / 2)
    assert got["datasets"]["wn18rr"]["graded"]["wn18rr-cpu"]["arms"]["criage"]["facts_removed"] == 3
    # fact by fact against our retrain: (e,r,f) fell in Kelpie's only (2 vs 1), (a,r,b) in both (3 vs a tie, 1.5)
    assert cpu["agreement"] == {"kelpie": {"both": 1, "theirs_only": 1, "ours_only": 0, "neither": 0}}
    wn = got["datasets"]["wn18rr"]["graded"]["wn18rr-cpu"]["agreement"]
    assert wn == {"kelpie": {"both": 0, "theirs_only": 1, "ours_only": 0, "neither": 0}}  # (i,r,j): 4 vs 1


@pytest.mark.parametrize(
    "bad, graded, message",
    [
        ("x", {}, "conve_wn18rr_necessary_k1.tsv:3: rank_before and rank_after must be whole numbers"),
        (None, {"wn18rr-cpu": [(("z", "r", "z"), 1)]}, "1 graded facts are not in Kelpie's files"),
    ],
)
def test_bad_input_is_one_error_line_and_nothing_written(tmp_path, capsys, bad, graded, message):
    out = tmp_path / "released.json"
    assert kr.main([str(anchors(tmp_path, bad)), "--filed", str(filed(tmp_path, graded)), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]
    assert not out.exists()


def test_a_file_without_the_rank_columns_is_named(tmp_path, capsys):
    d = anchors(tmp_path)
    (d / "conve_fb15k237_necessary_criage.tsv").write_text("head\trelation\ttail\texplanation\na\tr\tb\ta|s|x\n")
    assert kr.main([str(d), "--filed", str(filed(tmp_path, {})), "-o", str(tmp_path / "o.json")]) == 2
    assert (
        "conve_fb15k237_necessary_criage.tsv: the first line must name the columns rank_before"
        in capsys.readouterr().err
    )
