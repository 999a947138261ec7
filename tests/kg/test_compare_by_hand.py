"""`fidelity compare` against by-hand references on the 10-triple graph.

The references: the facts graded are those a brute-force filtered rank puts first; each arm's
retrain is a plain `train` of the run's config without the facts the explanations file names (same
seed), ranked by brute force under the original known triples and under those minus the removals;
the noise arm is the full graph with the run's seed + 1.
"""

import dataclasses
import json

import numpy as np
import pytest

from tests.conftest import run_cli, run_cli_error
from tests.kg.test_necessity_by_hand import brute_side, id_set, ids_of
from tests.kg.tiny_graph import TEST, TRIPLES, VALID, cfg, write_triples
from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.explain import compare as cmp
from tracegraph.kg.explain.compare_arms import far_rows
from tracegraph.kg.explain.explanation_tsv import ExplanationTable, read_explanation_table, write_explanation_table
from tracegraph.kg.model.model_io import load_model
from tracegraph.kg.model.train import train

SEED = 3
EPOCHS = 40  # enough for the tiny model to rank several facts first


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("compare_by_hand")
    write_triples(d / "train.txt", TRIPLES)
    write_triples(d / "valid.txt", VALID)
    write_triples(d / "test.txt", TEST)
    train(
        cfg(
            d,
            d / "run",
            epochs=EPOCHS,
            learning_rate=0.05,
            valid=str(d / "valid.txt"),
            test=str(d / "test.txt"),
            patience=0,
        )
    )
    return d


def brute_first(lm, d, triples) -> list:
    known = id_set(lm, d / "train.txt", d / "valid.txt", d / "test.txt")
    return [f for f, x in zip(triples, ids_of(lm, triples)) if brute_side(lm.model, known, x, False)[0] == 1.0]


def explanations_file(path, triples, pick):
    """A Kelpie-layout file: each fact explained by the training facts featuring its head that ``pick`` keeps."""
    rows = [[t for t in TRIPLES if f[0] in (t[0], t[2]) and t != f and pick(t)] for f in triples]
    write_explanation_table(path, ExplanationTable(list(triples), rows), {"rank_before": [1] * len(triples)})
    return rows


class Recorder:
    """Stands in for the retrainer: records each call, returns the run's own model."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def run(self, name, excluded, seed):
        self.calls.append((name, sorted(excluded), seed))
        return self.model, 0.0


def test_graded_facts_are_those_brute_force_ranks_first(run):
    lm = load_model(run / "run" / "final_model.pt")
    offered = TRIPLES + TEST + VALID
    write_triples(run / "offered.txt", offered)
    out = run / "graded"
    res = cmp.run_compare(
        cmp.CompareConfig(model_dir=str(run / "run"), output_dir=str(out), facts=str(run / "offered.txt"), n=100),
        explain_only=True,
    )
    assert [tuple(f) for f in res["facts"]] == brute_first(lm, run, offered)
    assert res["offered"] == len(offered) and res["finished"] == []


def test_each_arm_removes_by_hand_sets_and_ranks_under_both_filterings(run, monkeypatch):
    lm = load_model(run / "run" / "final_model.pt")
    facts = brute_first(lm, run, TRIPLES + TEST + VALID)
    assert len(facts) >= 3  # the check needs facts to grade
    expl = explanations_file(run / "ext.tsv", facts, lambda t: t[1] == "r0")
    rec = Recorder(lm.model)
    monkeypatch.setattr("tracegraph.kg.explain.retrain.Retrainer", lambda *a, **k: rec)
    out = run / "arms_out"
    res = cmp.run_compare(
        cmp.CompareConfig(model_dir=str(run / "run"), output_dir=str(out), explanations={"ext": str(run / "ext.tsv")})
    )
    calls = {name: (excl, seed) for name, excl, seed in rec.calls}
    want = sorted({t for rows in expl for t in rows})
    assert calls["ext"] == (want, SEED)
    assert calls["noise"] == ([], SEED + 1)
    ends = {f[0] for f in facts} | {f[2] for f in facts}
    assert calls["far"][1] == SEED and not [t for t in calls["far"][0] if {t[0], t[2]} & ends]
    # random head facts: as many per fact as ext's explanation, each featuring the fact's head, never the fact
    rand = json.loads((out / "arms" / "random-head.json").read_text())
    assert rand["explanation_sizes"] == [len(r) for r in expl]
    assert all(any(f[0] in (t[0], t[2]) for f in facts) for t in calls["random-head"][0])
    train_ids = ids_of(lm, TRIPLES)
    for f in ids_of(lm, facts):  # a fact's candidates feature its head and are never the fact itself
        rows = train_ids[cmp.candidate_rows(train_ids, f, "head")]
        assert all(f[0] in (h, t) for h, _, t in rows) and not any((rows == f).all(1))
    # ranks: the returned model under the original known triples, and under those minus the removals
    files = (run / "train.txt", run / "valid.txt", run / "test.txt")
    known = id_set(lm, *files)
    removed = id_set(lm, *[write_triples(run / "removed.txt", want) and run / "removed.txt"])
    arm = json.loads((out / "arms" / "ext.json").read_text())
    fact_ids = ids_of(lm, facts)
    assert arm["ranks"]["original"] == [brute_side(lm.model, known, f, False)[0] for f in fact_ids]
    assert arm["ranks"]["reduced"] == [brute_side(lm.model, known - removed, f, False)[0] for f in fact_ids]
    # margin halves: the run's lead over its best filtered rival, by brute force, split at the median
    lead = np.array([brute_side(lm.model, known, f, False)[1] for f in fact_ids])
    assert res["groups"]["margin"] == ["near tie" if x <= np.median(lead) else "confident" for x in lead]
    s = res["summary"]["ext"]
    assert s["reduced"]["change_hits@1"] == pytest.approx(np.mean(np.array(arm["ranks"]["reduced"]) <= 1) - 1)
    assert s["facts_removed"] == len(want)


def test_versus_pairs_every_other_arm_with_the_named_arm_fact_by_fact(run, monkeypatch):
    lm = load_model(run / "run" / "final_model.pt")
    facts = brute_first(lm, run, TRIPLES + TEST + VALID)
    explanations_file(run / "vs.tsv", facts, lambda t: t[1] == "r0")
    monkeypatch.setattr("tracegraph.kg.explain.retrain.Retrainer", lambda *a, **k: Recorder(lm.model))
    out = run / "versus"
    c = cmp.CompareConfig(
        model_dir=str(run / "run"), output_dir=str(out), explanations={"ext": str(run / "vs.tsv")}, versus=["ext"]
    )
    res = cmp.run_compare(c)
    arms = {a: json.loads((out / "arms" / f"{a}.json").read_text())["ranks"] for a in ("ext", "random-head")}
    for f in ("original", "reduced"):  # the random arm's hits minus ext's, fact by fact
        diff = (np.array(arms["random-head"][f]) <= 1).astype(float) - (np.array(arms["ext"][f]) <= 1)
        got = res["summary"]["random-head"][f]
        assert got["beyond_ext_hits@1"] == pytest.approx(diff.mean())
        assert "beyond_ext_hits@1" not in res["summary"]["ext"][f]  # not against itself
        assert "beyond_ext_hits@1" not in res["summary"]["noise"][f]  # nor a floor against it
    assert "beyond_far_hits@1" in res["summary"]["ext"]["original"]  # the reference itself against the floors
    md = (out / "compare.md").read_text()
    assert "| beyond ext (original) | beyond ext (reduced) |" in md and "*beyond ext*" in md
    with pytest.raises(TracegraphError) as e:
        cmp.run_compare(dataclasses.replace(c, versus=["zz"]), explain_only=True)
    assert str(e.value).startswith("--versus zz: no such arm (arms: ext, random-head, far, noise)")
    # --explain-only retrains nothing and summarises the finished arms anew, here without the pairing
    monkeypatch.setattr("tracegraph.kg.explain.retrain.Retrainer", lambda *a, **k: None)  # a retrain would fail
    (out / "compare.json").unlink()
    again = cmp.run_compare(dataclasses.replace(c, versus=[]), explain_only=True)
    assert again["finished"] == res["finished"] == ["ext", "random-head", "far", "noise"]
    assert "beyond_ext_hits@1" not in again["summary"]["random-head"]["original"]
    assert json.loads((out / "compare.json").read_text())["summary"] == again["summary"]


def test_compare_counts_the_facts_two_explanation_arms_remove_the_same_set_for(run, monkeypatch):
    lm = load_model(run / "run" / "final_model.pt")
    facts = brute_first(lm, run, TRIPLES + TEST + VALID)
    ext = explanations_file(run / "same_a.tsv", facts, lambda t: t[1] == "r0")
    twin = explanations_file(run / "same_b.tsv", facts, lambda t: t[1] == "r0" or t == ("e2", "r1", "e0"))
    same = sum(1 for a, b in zip(ext, twin) if a and sorted(a) == sorted(b))
    assert 0 < same < len(facts)  # the check needs both kinds of fact
    monkeypatch.setattr("tracegraph.kg.explain.retrain.Retrainer", lambda *a, **k: Recorder(lm.model))
    files = {"ext": str(run / "same_a.tsv"), "twin": str(run / "same_b.tsv")}
    res = cmp.run_compare(
        cmp.CompareConfig(model_dir=str(run / "run"), output_dir=str(run / "same"), explanations=files, versus=["ext"])
    )
    # the returned model is the run's own: every fact stays first in both arms; random and floor arms are not paired
    assert res["same_explanation"] == [
        {"arms": ["ext", "twin"], "facts": same, "fell_in_both": 0, "fell_only_in": {"ext": 0, "twin": 0}}
    ]
    assert "fell in the first only" in (run / "same" / "compare.md").read_text()
    # by size against --versus ext, from the files' label triples: the twin adds a fact to some explanations,
    # the random arm copies ext's sizes; nothing falls with the run's own model
    larger = sum(len(b) > len(a) for a, b in zip(ext, twin))
    assert larger > 0
    none = {"ext": 0}
    assert res["sizes"] == [
        {
            "arms": ["twin", "ext"],
            "same": {"facts": len(facts) - larger, "fell": {"twin": 0, **none}},
            "larger": {"facts": larger, "fell": {"twin": 0, **none}},
            "smaller": {"facts": 0, "fell": {"twin": 0, **none}},
        },
        {
            "arms": ["random-head", "ext"],
            "same": {"facts": len(facts), "fell": {"random-head": 0, **none}},
            "larger": {"facts": 0, "fell": {"random-head": 0, **none}},
            "smaller": {"facts": 0, "fell": {"random-head": 0, **none}},
        },
    ]
    assert "the first larger" in (run / "same" / "compare.md").read_text()


def test_compare_counts_what_each_explanation_holds_against_its_labels(run, monkeypatch):
    """compare.json's contents: per explanation arm, counted from the file's label triples by hand."""
    lm = load_model(run / "run" / "final_model.pt")
    facts = brute_first(lm, run, TRIPLES + TEST + VALID)
    rows = explanations_file(run / "contents.tsv", facts, lambda t: True)  # every training fact at the head
    monkeypatch.setattr("tracegraph.kg.explain.retrain.Retrainer", lambda *a, **k: Recorder(lm.model))
    res = cmp.run_compare(
        cmp.CompareConfig(
            model_dir=str(run / "run"),
            output_dir=str(run / "contents"),
            explanations={"ext": str(run / "contents.tsv")},
        )
    )
    gone = {t for r in rows for t in r}
    joins = [any({t[0], t[2]} == {f[0], f[2]} for t in r) for f, r in zip(facts, rows)]
    answers = [any(t[:2] == f[:2] and t[2] != f[2] for t in r) for f, r in zip(facts, rows)]
    rec = json.loads((run / "contents" / "arms" / "ext.json").read_text())["ranks"]
    o, r = (np.asarray(rec[k]) > 1 for k in ("original", "reduced"))
    assert res["contents"]["ext"] == {
        "explained": sum(map(bool, rows)),
        "head_tail": sum(joins),
        "query_answer": sum(answers),
        "unfiltered": sum(any(t[:2] == f[:2] and t[2] != f[2] for t in gone) for f in facts),
        "fell": 0,  # the run's own model: every graded fact stays first under the original filter
        "fell_reduced_only": int(np.sum(r & ~o)),
        "head_kept": sum(any(f[0] in (t[0], t[2]) for t in set(TRIPLES) - gone) for f in facts),
        "fell_where_head_kept": 0,
        "floors_keep": len(facts),  # the floors retrained to the run's own model too: every fact stays first
        "fell_where_floors_keep": 0,
    }
    assert 0 < sum(joins) and 0 < sum(answers)  # the check needs both kinds of explanation
    assert set(res["contents"]) == {"ext", "random-head"}  # explanation and random arms; not far or noise
    assert "holding another answer (h, r, t′)" in (run / "contents" / "compare.md").read_text()
    # facts.tsv: a row per graded fact, in compare.json's order, with each finished arm's ranks after
    rows = [line.split("\t") for line in (run / "contents" / "facts.tsv").read_text().splitlines()]
    assert rows[0][:3] == ["head", "relation", "tail"] and "ext reduced" in rows[0]
    assert [tuple(r[:3]) for r in rows[1:]] == [tuple(f) for f in res["facts"]]
    col = rows[0].index("ext reduced")
    assert [float(r[col]) for r in rows[1:]] == rec["reduced"]


def test_far_rows_avoid_every_graded_end_are_disjoint_seeded_and_sized_as_asked():
    rng = np.random.default_rng(0)
    train_ids = np.stack([rng.integers(0, 30, 400), rng.integers(0, 4, 400), rng.integers(0, 30, 400)], 1)
    facts = np.array([[0, 1, 2], [3, 0, 4], [0, 2, 5]])
    sizes = [4, 0, 3]
    rows = far_rows(train_ids, facts, sizes, seed=7)
    pool = [i for i, (h, _, t) in enumerate(train_ids) if h not in (0, 2, 3, 4, 5) and t not in (0, 2, 3, 4, 5)]
    assert [len(r) for r in rows] == sizes
    flat = np.concatenate(rows)
    assert set(flat) <= set(pool) and len(set(flat)) == len(flat)  # far from every fact, disjoint across facts
    assert all((a == b).all() for a, b in zip(rows, far_rows(train_ids, facts, sizes, seed=7)))
    assert not all((a == b).all() for a, b in zip(rows, far_rows(train_ids, facts, sizes, seed=8)))
    short = far_rows(train_ids, facts, [len(pool) - 1, 5], seed=7)  # the pool runs out on the second
    assert [len(r) for r in short] == [len(pool) - 1, 1]


def test_finished_arms_are_skipped_and_changed_removals_retrained(run, monkeypatch):
    lm = load_model(run / "run" / "final_model.pt")
    facts = brute_first(lm, run, TRIPLES + TEST + VALID)
    explanations_file(run / "a.tsv", facts, lambda t: t[1] == "r1")
    rec = Recorder(lm.model)
    monkeypatch.setattr("tracegraph.kg.explain.retrain.Retrainer", lambda *a, **k: rec)
    c = cmp.CompareConfig(
        model_dir=str(run / "run"), output_dir=str(run / "again"), explanations={"a": str(run / "a.tsv")}, arms=["a"]
    )
    cmp.run_compare(c)
    cmp.run_compare(c)
    assert [n for n, _, _ in rec.calls] == ["a"]
    explanations_file(run / "a.tsv", facts, lambda t: t[1] == "r0")  # other removals: retrained
    cmp.run_compare(c)
    assert [n for n, _, _ in rec.calls] == ["a", "a"]


def test_real_retrain_of_an_arm_equals_training_without_its_facts(run):
    lm = load_model(run / "run" / "final_model.pt")
    facts = brute_first(lm, run, TRIPLES + TEST + VALID)
    expl = explanations_file(run / "real.tsv", facts, lambda t: t[1] == "r0")
    out = run / "real"
    res = run_cli(
        [
            "fidelity",
            "compare",
            "--model-dir",
            run / "run",
            "-o",
            out,
            "--explanations",
            f"k={run / 'real.tsv'}",
            "--arm",
            "k",
            "--device",
            "cpu",
            "--keep-models",
        ]
    )
    assert res.exit_code == 0, res.output
    removed = sorted({t for rows in expl for t in rows})
    write_triples(run / "real_removed.txt", removed)
    train(
        cfg(
            run,
            run / "by_hand",
            epochs=EPOCHS,
            learning_rate=0.05,
            valid=str(run / "valid.txt"),
            patience=0,
            exclude=str(run / "real_removed.txt"),
        )
    )
    ref = load_model(run / "by_hand" / "final_model.pt")
    known = id_set(lm, run / "train.txt", run / "valid.txt", run / "test.txt")
    arm = json.loads((out / "arms" / "k.json").read_text())
    assert arm["ranks"]["original"] == [brute_side(ref.model, known, f, False)[0] for f in ids_of(lm, facts)]
    kept = load_model(out / "retrains" / "k" / "run" / "final_model.pt")  # --keep-models: the arm's own weights
    assert arm["ranks"]["original"] == [brute_side(kept.model, known, f, False)[0] for f in ids_of(lm, facts)]
    # the margins over the strongest unfiltered rival, after (the arm's weights) and their change from the run's
    after = [brute_side(kept.model, known, f, False)[1] for f in ids_of(lm, facts)]
    before = [brute_side(lm.model, known, f, False)[1] for f in ids_of(lm, facts)]
    assert arm["margins"] == pytest.approx(after, abs=1e-4)
    summary = json.loads((out / "compare.json").read_text())["summary"]["k"]["original"]
    assert summary["change_margin"] == pytest.approx(np.mean(np.subtract(after, before)), abs=1e-4)
    md = (out / "compare.md").read_text()  # only the finished arm: its row, margins, the four group tables, contents
    assert md.count("\n| k |") == 7 and "| noise |" not in md and res.stdout.count("ΔH@1") == 1
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # the figure of the finished arm
    # the query-answers groups with the default k = 4, counted here from the training file
    train_triples = [tuple(t) for t in TRIPLES]
    others = [sum(1 for h, r, t in train_triples if (h, r) == (f[0], f[1]) and t != f[2]) for f in facts]
    want = ["none" if n == 0 else "1–4" if n <= 4 else "> 4" for n in others]
    assert json.loads((out / "compare.json").read_text())["groups"]["answers"] == want


def test_malformed_explanations_file_is_one_error_line_naming_file_and_line(run):
    bad = run / "bad.tsv"
    bad.write_text("head\trelation\ttail\texplanation\ne0\tr0\te1\te0|r0\n")
    run_cli_error(
        ["fidelity", "compare", "--model-dir", run / "run", "-o", run / "bad_out", "--explanations", f"x={bad}"],
        run / "bad_out",
        contains=f"{bad}:2",
    )


@pytest.mark.parametrize("name", ["noise", "far", "random-head", "degree"])
def test_an_explanations_name_taken_by_another_arm_is_refused(run, name):
    lm = load_model(run / "run" / "final_model.pt")
    explanations_file(run / "named.tsv", brute_first(lm, run, TRIPLES + TEST + VALID), lambda t: True)
    out = run / f"clash_{name}"
    run_cli_error(
        ["fidelity", "compare", "--model-dir", run / "run", "-o", out, "--explanations", f"{name}={run / 'named.tsv'}"]
        + ["--method", "degree"],
        out,
        contains=f"--explanations name '{name}' is taken by another arm",
    )


@pytest.mark.parametrize(
    "flag, want",
    [("--arm", "tracin, random-head, far, noise"), ("--versus", "tracin, random-head"), ("--random-like", "tracin")],
)
def test_an_unknown_arm_name_is_refused_before_any_explanation_is_computed(run, flag, want, monkeypatch):
    def explaining(*a, **k):
        raise AssertionError("explained before the arm names were checked")

    monkeypatch.setitem(cmp.build_arms.__globals__, "method_arms", explaining)
    out = run / f"unknown_{flag[2:]}"
    run_cli_error(
        ["fidelity", "compare", "--model-dir", run / "run", "-o", out, "--method", "tracin", flag, "nosuch"],
        out,
        contains=f"{flag} nosuch: no such arm (arms: {want}",
    )


def test_explanation_fact_outside_the_training_set_is_refused_with_its_line(run):
    path = run / "stranger.tsv"
    path.write_text("head\trelation\ttail\texplanation\ne1\tr1\te4\te0|r1|e5\n")
    lm = load_model(run / "run" / "final_model.pt")
    with pytest.raises(DataError, match=r"stranger.tsv:2: .*not a training triple"):
        cmp.table_rows(read_explanation_table(path), [("e1", "r1", "e4")], lm, {})


def test_explanations_table_round_trips_and_names_missing_columns(tmp_path):
    t = ExplanationTable([("a", "r", "b"), ("c", "r", "d")], [[("a", "s", "x"), ("y", "s", "a")], []])
    write_explanation_table(tmp_path / "t.tsv", t, {"score": [0.5, 1.0]})
    back = read_explanation_table(tmp_path / "t.tsv")
    assert back.facts == t.facts and back.explanations == t.explanations and back.lines == [2, 3]
    (tmp_path / "h.tsv").write_text("head\trelation\ttail\na\tr\tb\n")
    with pytest.raises(DataError, match=r"h.tsv:1: .*missing: explanation"):
        read_explanation_table(tmp_path / "h.tsv")


def test_every_flag_reaches_the_settings(run, monkeypatch):
    seen = {}

    def fake(cfg, explain_only=False, progress=None):
        seen.update(cfg=cfg, explain_only=explain_only)
        return {"summary": {}, "n_facts": 0, "finished": [], "arms": []}

    monkeypatch.setattr("tracegraph.kg.explain.compare.run_compare", fake)
    args = [
        "fidelity",
        "compare",
        "--model-dir",
        run / "run",
        "-o",
        run / "flags",
        "--explanations",
        "a=x.tsv",
        "--explanations",
        "y.tsv",
        "--method",
        "tracin",
        "--method",
        "degree",
        "--facts",
        run / "test.txt",
        "--n",
        "7",
        "--k",
        "3",
        "--candidates",
        "head-tail",
        "--random-like",
        "a",
        "--noise-seed",
        "9",
        "--retrain-seed",
        "21",
        "--versus",
        "a",
        "--versus",
        "y",
        "--versus",
        "a",
        "--arm",
        "a",
        "--arm",
        "noise",
        "--explain-only",
        "--bootstrap",
        "20",
        "--seed",
        "5",
        "--local-candidates",
        "11",
        "--local-steps",
        "13",
        "--device",
        "cpu",
        "--num-threads",
        "1",
        "--keep-models",
    ]
    assert run_cli(args).exit_code == 0
    assert not (run / "flags" / "compare.png").exists()  # no finished arm, no figure
    c = seen["cfg"]
    assert c.explanations == {"a": "x.tsv", "y": "y.tsv"} and c.methods == ["tracin", "degree"]
    assert (c.facts, c.n, c.k, c.candidates, c.random_like) == (str(run / "test.txt"), 7, 3, "head-tail", "a")
    assert (c.noise_seed, c.arms, seen["explain_only"], c.bootstrap, c.seed) == (9, ["a", "noise"], True, 20, 5)
    assert c.versus == ["a", "y"] and c.retrain_seed == 21
    assert (c.local.candidates, c.local.steps, c.local.k, c.local.seed, c.device) == (11, 13, 3, 5, "cpu")
    assert c.keep_models


def test_method_arms_take_k_candidates_of_the_scope_and_random_copies_their_sizes(run, monkeypatch):
    lm = load_model(run / "run" / "final_model.pt")
    rec = Recorder(lm.model)
    monkeypatch.setattr("tracegraph.kg.explain.retrain.Retrainer", lambda *a, **k: rec)
    far_asked = []

    def recorded(train_ids, facts, sizes, seed):
        far_asked.append((list(sizes), seed))
        return far_rows(train_ids, facts, sizes, seed)

    monkeypatch.setattr("tracegraph.kg.explain.compare_arms.far_rows", recorded)
    write_triples(run / "facts.txt", TRIPLES + TEST)
    out = run / "methods"
    c = cmp.CompareConfig(
        model_dir=str(run / "run"),
        output_dir=str(out),
        facts=str(run / "facts.txt"),
        methods=["degree"],
        k=2,
        candidates="head-tail",
        random_like="degree",
        noise_seed=11,
    )
    res = cmp.run_compare(c)
    facts = [tuple(f) for f in res["facts"]]
    table = read_explanation_table(out / "explanations" / "degree.tsv")
    for f, expl in zip(facts, table.explanations):
        pool = [t for t in TRIPLES if {f[0], f[2]} & {t[0], t[2]} and t != f]
        assert len(expl) == min(2, len(pool)) and set(expl) <= set(pool)
    calls = {name: (excl, seed) for name, excl, seed in rec.calls}
    assert calls["noise"][1] == 11 and "random-head-tail" in calls
    rand = json.loads((out / "arms" / "random-head-tail.json").read_text())
    assert rand["explanation_sizes"] == [len(e) for e in table.explanations]
    # --random-like sizes the far arm too (its draws: test_far_rows_avoid_every_graded_end_…)
    assert far_asked == [(rand["explanation_sizes"], c.seed)] and calls["far"][1] == SEED


def test_retrain_seed_reaches_every_removal_arms_retrain_and_the_noise_arm_takes_the_next(run, monkeypatch):
    lm = load_model(run / "run" / "final_model.pt")
    rec = Recorder(lm.model)
    monkeypatch.setattr("tracegraph.kg.explain.retrain.Retrainer", lambda *a, **k: rec)
    write_triples(run / "facts.txt", TRIPLES + TEST)
    base = dict(model_dir=str(run / "run"), facts=str(run / "facts.txt"), methods=["degree"])
    res = cmp.run_compare(cmp.CompareConfig(**base, output_dir=str(run / "seed7"), retrain_seed=7))
    want = {"degree": 7, "random-head": 7, "far": 7, "noise": 8}  # the run's seed is SEED, not 7
    # a random arm removing what degree removes is that retrain (not run again): its record still says the seed
    assert {name: seed for name, _, seed in rec.calls}.items() <= want.items() and len(rec.calls) >= 3
    assert {a: json.loads((run / "seed7" / "arms" / f"{a}.json").read_text())["seed"] for a in want} == want
    rec.calls.clear()
    again = cmp.run_compare(cmp.CompareConfig(**base, output_dir=str(run / "seed-run")))
    default = {"degree": SEED, "random-head": SEED, "far": SEED, "noise": SEED + 1}
    assert {name: seed for name, _, seed in rec.calls}.items() <= default.items() and len(rec.calls) >= 3
    # the explanations are the run's whatever the retrain seed: the same removals in both folders
    assert [
        json.loads((run / d / "arms" / "degree.json").read_text())["facts_removed"] for d in ("seed7", "seed-run")
    ] == [
        res["summary"]["degree"]["facts_removed"],
        again["summary"]["degree"]["facts_removed"],
    ]
    assert (run / "seed7" / "explanations" / "degree.tsv").read_text() == (
        run / "seed-run" / "explanations" / "degree.tsv"
    ).read_text()


def test_method_explanations_are_reused_only_for_the_same_facts_and_settings(run, monkeypatch):
    write_triples(run / "facts.txt", TRIPLES + TEST)
    calls = []
    real = cmp.build_arms.__globals__["method_arms"]

    def counting(store, cfg, methods, *a):
        calls.append(list(methods))
        return real(store, cfg, methods, *a)

    monkeypatch.setitem(cmp.build_arms.__globals__, "method_arms", counting)
    base = dict(model_dir=str(run / "run"), output_dir=str(run / "cache"), facts=str(run / "facts.txt"))
    cmp.run_compare(cmp.CompareConfig(**base, methods=["degree", "tracin"]), explain_only=True)
    cmp.run_compare(cmp.CompareConfig(**base, methods=["degree", "tracin"]), explain_only=True)
    cmp.run_compare(cmp.CompareConfig(**base, methods=["degree", "tracin"], k=2), explain_only=True)
    assert calls == [["degree", "tracin"], ["degree", "tracin"]]  # the second run reused; another k explains again


def test_an_arm_removing_what_a_finished_arm_removed_with_its_seed_takes_its_retrain(run, monkeypatch):
    lm = load_model(run / "run" / "final_model.pt")
    facts = brute_first(lm, run, TRIPLES + TEST + VALID)
    explanations_file(run / "tw_a.tsv", facts, lambda t: t[1] == "r1")
    explanations_file(run / "tw_copy.tsv", facts, lambda t: t[1] == "r1")
    explanations_file(run / "tw_b.tsv", facts, lambda t: t[1] == "r0")
    rec = Recorder(lm.model)
    monkeypatch.setattr("tracegraph.kg.explain.retrain.Retrainer", lambda *a, **k: rec)
    files = {n: str(run / f"tw_{n}.tsv") for n in ("a", "copy", "b")}
    c = cmp.CompareConfig(model_dir=str(run / "run"), output_dir=str(run / "twins"), explanations=files)
    res = cmp.run_compare(dataclasses.replace(c, arms=["a", "copy", "b"]))
    assert [n for n, _, _ in rec.calls] == ["a", "b"]  # copy removes what a removed, with the same seed
    arms = {n: json.loads((run / "twins" / "arms" / f"{n}.json").read_text()) for n in ("a", "copy", "b")}
    assert arms["copy"]["retrain_of"] == "a" and arms["copy"]["ranks"] == arms["a"]["ranks"]
    assert "retrain_of" not in arms["a"] and "retrain_of" not in arms["b"]
    assert res["summary"]["copy"]["retrain_of"] == "a" and "retrain_of" not in res["summary"]["b"]
    md = (run / "twins" / "compare.md").read_text()
    assert "| copy (the retrain of a) |" in md and "| a |" in md and "| b |" in md
    # a later file alike is taken without a retrain even when asked to retrain nothing
    explanations_file(run / "tw_late.tsv", facts, lambda t: t[1] == "r1")
    monkeypatch.setattr("tracegraph.kg.explain.retrain.Retrainer", lambda *a, **k: None)  # a retrain would fail
    late = cmp.run_compare(
        dataclasses.replace(c, explanations={**files, "late": str(run / "tw_late.tsv")}), explain_only=True
    )
    assert late["summary"]["late"]["retrain_of"] == "a"  # the first finished twin, not the copy of it


def test_twin_record_needs_the_same_removals_and_the_same_seed():
    from tracegraph.kg.explain.compare_arms import Arm, twin_record

    rows = [np.array([3, 1]), np.array([1, 7])]
    arms = {
        "x": Arm("x", "file", rows, 5),
        "regrouped": Arm("regrouped", "method", [np.array([1]), np.array([3, 7])], 5),  # same union, other facts
        "other_seed": Arm("other_seed", "file", rows, 6),
        "fewer": Arm("fewer", "file", [np.array([1]), np.array([7])], 5),
    }
    records = {"x": {"name": "x", "ranks": {"original": [1, 2]}, "explanation_sizes": [2, 2]}}
    got = twin_record(arms, records, "regrouped", [("a", "r", "b"), ("c", "r", "d")])
    assert got["retrain_of"] == "x" and got["ranks"] == records["x"]["ranks"] and got["explanation_sizes"] == [1, 2]
    assert got["kind"] == "method" and got["name"] == "regrouped"
    assert twin_record(arms, records, "other_seed", []) is None and twin_record(arms, records, "fewer", []) is None
    # a record that is itself another's retrain is never named: the chain ends at the arm that ran
    arms["copy"] = Arm("copy", "file", rows, 5)
    chained = {"copy": {**records["x"], "name": "copy", "retrain_of": "x"}, **records}
    assert twin_record(arms, chained, "regrouped", [])["retrain_of"] == "x"


def tracin_reference(run, facts, loss: str, layers: str, k: int = 1) -> list[set]:
    """Each fact's ``k`` head facts of largest TracIn, by autograd: Σ over the run's checkpoints of
    lr · ⟨∇ℓ(candidate), ∇ℓ(fact)⟩ restricted to ``layers``, with ℓ the ``loss`` convention."""
    import torch

    from tracegraph.kg.explain.tracin.checkpoints import resolve_checkpoint_list
    from tracegraph.kg.explain.tracin.factors import select_layers
    from tracegraph.kg.explain.tracin.reference import autograd_gradients
    from tracegraph.kg.model.model_io import build_model

    lm = load_model(run / "run" / "final_model.pt")
    checkpoints = []  # (lr, model), read once for every fact
    for path in resolve_checkpoint_list(run / "run", None):
        payload = torch.load(path, weights_only=True)
        checkpoints.append((float(payload["lr"]), build_model(payload, path).eval()))
    out = []
    for f in facts:
        cands = [t for t in TRIPLES if f[0] in (t[0], t[2]) and t != f]
        ids = torch.as_tensor(ids_of(lm, [*cands, f]))
        score = np.zeros(len(cands))
        for lr, model in checkpoints:
            g = autograd_gradients(model, ids, loss, 0.1, select_layers(model, layers))
            score += lr * (g[:-1] @ g[-1]).double().numpy()
        order = np.argsort(-score)
        assert len(cands) <= k or score[order[k - 1]] - score[order[k]] > 1e-9  # no tie at the cut
        out.append({cands[i] for i in order[:k]})
    return out


@pytest.mark.parametrize("loss, layers", [("score", "all"), ("logit", "fc.weight")])
def test_the_methods_loss_and_layers_reach_tracins_explanations(run, loss, layers):
    write_triples(run / "facts.txt", TRIPLES + TEST)
    out = run / f"tracin-{loss}-{layers}"
    base = dict(model_dir=str(run / "run"), facts=str(run / "facts.txt"), methods=["tracin"], k=1)
    res = cmp.run_compare(cmp.CompareConfig(**base, output_dir=str(out), loss=loss, layers=layers), explain_only=True)
    facts = [tuple(f) for f in res["facts"]]
    got = [set(e) for e in read_explanation_table(out / "explanations" / "tracin.tsv").explanations]
    assert got == tracin_reference(run, facts, loss, layers)
    assert got != tracin_reference(run, facts, "logit", "all")  # the settings change what is chosen


def test_size_like_cuts_each_methods_explanations_to_the_files_sizes_fact_by_fact(run, monkeypatch):
    lm = load_model(run / "run" / "final_model.pt")
    facts = brute_first(lm, run, TRIPLES + TEST + VALID)
    # explanations of 0 to 3 facts: the first (j mod 4) training facts featuring the fact's head
    ext = [rows[: j % 4] for j, rows in enumerate(explanations_file(run / "x.tsv", facts, lambda t: True))]
    write_explanation_table(run / "x.tsv", ExplanationTable(list(facts), ext), {"rank_before": [1] * len(facts)})
    rec = Recorder(lm.model)
    monkeypatch.setattr("tracegraph.kg.explain.retrain.Retrainer", lambda *a, **k: rec)
    base = dict(model_dir=str(run / "run"), explanations={"x": str(run / "x.tsv")}, methods=["degree"], k=2)
    res = cmp.run_compare(cmp.CompareConfig(**base, output_dir=str(run / "sized"), size_like="x"))
    assert res["arms"][:3] == ["x", "degree", "degree@x"]
    cut = read_explanation_table(run / "sized" / "explanations" / "degree@x.tsv").explanations
    # the reference: the method's own top-n at k = n, where n is the file's size for the fact (at most k)
    top = {}
    for n in (1, 2):
        out = run / f"sized-k{n}"
        cmp.run_compare(cmp.CompareConfig(**{**base, "k": n}, output_dir=str(out)), explain_only=True)
        top[n] = read_explanation_table(out / "explanations" / "degree.tsv").explanations
    want = [[] if not e else top[min(2, len(e))][j] for j, e in enumerate(ext)]
    assert [sorted(c) for c in cut] == [sorted(w) for w in want]
    assert {len(e) for e in ext} >= {0, 1, 2, 3}  # the cut is tested at every size, and at k below the file's
    calls = {name: excl for name, excl, _ in rec.calls}
    record = json.loads((run / "sized" / "arms" / "degree@x.json").read_text())
    retrained = record.get("retrain_of") or "degree@x"  # an arm removing what another removed takes its retrain
    assert calls[retrained] == sorted({t for c in cut for t in c})
    assert "| degree@x |" in cmp.compare_markdown(res)
    # a rerun reads both arms back from explanations/ (empty explanations too) instead of explaining again
    calls = []
    monkeypatch.setitem(cmp.build_arms.__globals__, "method_arms", lambda *a, **k: calls.append(a) or [])
    again = cmp.run_compare(cmp.CompareConfig(**base, output_dir=str(run / "sized"), size_like="x"), explain_only=True)
    assert calls == [] and again["arms"] == res["arms"]
    assert read_explanation_table(run / "sized" / "explanations" / "degree@x.tsv").explanations == cut


def test_a_method_cut_to_an_arms_sizes_is_titled_so_and_sits_below_the_method_on_the_page():
    from tracegraph.kg.explain.compare_cells import arm_title, in_table_order

    cut = "tracin-margin-path@kelpie"
    assert arm_title(cut) == "tracegraph `tracin-margin-path`, explain's default, cut to Kelpie's sizes"
    assert in_table_order(["noise", cut, "kelpie", "tracin-margin", "tracin-margin-path"]) == [
        "tracin-margin-path",
        cut,
        "tracin-margin",
        "kelpie",
        "noise",
    ]


def test_size_like_must_name_an_explanations_file(run):
    with pytest.raises(TracegraphError, match="--size-like degree: no such arm"):
        cmp.run_compare(
            cmp.CompareConfig(
                model_dir=str(run / "run"), output_dir=str(run / "bad"), methods=["degree"], size_like="degree"
            )
        )
