"""Ground-truth recovery (kg/explain/fidelity.py) by hand: the mechanisms file, the grades of each
ranking of a test triple's candidates, the coverage counts and the summary, the influence on the
candidates, and the checks' wiring on a hand-built context.

References: mechanisms files written here with the expected dictionaries and messages written out;
each method's order by Python's sort on its keys (TracIn, degree by a loop over the training
triples, walks by a breadth-first search written here) and RR, AP, Hits@k and Recall@10 computed by
a plain loop over that order; the random baseline against the permutations of a generator seeded as
documented, and against the exact expectation over every order (a 5-sigma margin); the engine
replaced by a stand-in whose scores are given.
"""

from itertools import combinations

import numpy as np
import pytest

from tests.kg.references import Bars, walk_lengths
from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.explain import fidelity as fid

HEADER = "test_head\ttest_relation\ttest_tail\tedge_head\tedge_relation\tedge_tail"


# --------------------------------------------------------------------------- the mechanisms file


def test_mechanisms_file_read_by_header_with_blank_rows_skipped(tmp_path):
    p = tmp_path / "m.tsv"
    p.write_text(
        "note\tedge_tail\tedge_relation\tedge_head\ttest_tail\ttest_relation\ttest_head\n"
        "x\tg\taffects\ta\tb\ttreats\ta\n"
        "\t\t\t\t\t\t\n"
        "  \t \t\t\t\t\t\n"
        "y\tb\tcauses\tg\tb\ttreats\ta\n"
        "z\tg\taffects\ta\tb\ttreats\ta\n"
        "\tc\tr\td\tf\ts\te\n",
        encoding="utf-8",
    )
    assert fid.read_mechanisms(p) == {
        ("a", "treats", "b"): {("a", "affects", "g"), ("g", "causes", "b")},
        ("e", "s", "f"): {("d", "r", "c")},
    }
    assert type(fid.read_mechanisms(p)) is dict


def test_mechanisms_file_refusals_word_for_word(tmp_path):
    with pytest.raises(DataError) as e:
        fid.read_mechanisms(tmp_path / "none.tsv")
    assert str(e.value) == f"{tmp_path / 'none.tsv'}: mechanisms file not found"
    p = tmp_path / "cols.tsv"
    p.write_text("test_head\ttest_relation\ttest_tail\tedge_head\n")
    with pytest.raises(DataError) as e:
        fid.read_mechanisms(p)
    assert str(e.value) == (
        f"{p}: mechanisms file needs the columns test_head, test_relation, test_tail, edge_head, edge_relation, "
        "edge_tail (tab-separated, with a header); missing edge_relation, edge_tail"
    )
    p.write_text("")
    with pytest.raises(DataError) as e:
        fid.read_mechanisms(p)
    assert str(e.value).endswith("missing test_head, test_relation, test_tail, edge_head, edge_relation, edge_tail")
    for bad in ("a\tr\tb\tc\t \td", "a\tr\tb\tc\td"):  # a blank field, a missing one
        p.write_text(f"{HEADER}\na\tr\tb\tc\tq\td\n{bad}\n")
        with pytest.raises(DataError) as e:
            fid.read_mechanisms(p)
        assert str(e.value) == f"{p}:3: empty field"


# --------------------------------------------------------------------------- recovery, by a loop


TRAIN = np.array(
    [
        [0, 0, 1],  # 0
        [1, 1, 2],  # 1
        [0, 2, 3],  # 2
        [3, 2, 4],  # 3
        [4, 1, 2],  # 4
        [5, 0, 6],  # 5
        [6, 1, 5],  # 6
        [5, 2, 6],  # 7
        [7, 0, 7],  # 8 a self-loop
        [0, 1, 8],  # 9
        [8, 0, 5],  # 10
    ]
)
E = 9


def loop_degree():
    d = np.zeros(E)
    for h, _, t in TRAIN:
        d[h] += 1
        if t != h:
            d[t] += 1
    return d


def grades(relevant_in_order):
    """RR, AP, Hits@1/3/10 and Recall@10 of a ranked list, by a loop."""
    pos = [i + 1 for i, x in enumerate(relevant_in_order) if x]
    return {
        "rr": 1 / pos[0],
        "ap": sum((n + 1) / p for n, p in enumerate(pos)) / len(pos),
        "hits@1": float(pos[0] <= 1),
        "hits@3": float(pos[0] <= 3),
        "hits@10": float(pos[0] <= 10),
        "recall@10": sum(p <= 10 for p in pos) / len(pos),
    }


def by_sort(keys, rel, perms):
    """Mean grades of the order by the keys (descending, the first most significant), ties broken by
    each permutation (the smaller draw first)."""
    rows = list(zip(*[list(map(float, k)) for k in keys]))
    runs = []
    for p in perms:
        order = sorted(range(len(rows)), key=lambda i: (*(-x for x in rows[i]), p[i]))
        runs.append(grades([rel[i] for i in order]))
    return {k: float(np.mean([g[k] for g in runs])) for k in runs[0]}


def approx_dict(d):
    return {k: pytest.approx(v, abs=1e-12) for k, v in d.items()}


def test_every_ranking_graded_against_a_loop_and_the_ungraded_listed():
    test = np.array([[0, 3, 2], [5, 1, 6], [7, 2, 0], [0, 0, 5]])
    subsets = [np.array([0, 1, 2, 3, 4, 9]), np.array([5, 6, 7, 10]), np.array([8, 0]), np.array([9, 10, 5])]
    relevant = [
        {(1, 1, 2), (0, 2, 3), (9, 9, 9)},  # one edge outside the candidates
        {(5, 2, 6)},
        {(3, 2, 4)},  # not among the candidates: listed, not graded
        set(),  # nothing known: listed, not graded
    ]
    scores = [np.array([0.3, 0.9, -0.1, 0.5, 0.2, 0.0]), np.array([0.4, -0.2, 0.1, 0.7]), np.zeros(2), np.ones(3)]
    extra = {"m": [[np.array([1.0, 2, 3, 4, 5, 6])], [np.array([4.0, 3, 2, 1])], [np.zeros(2)], [np.zeros(3)]]}
    labels = lambda h, r, t: [f"e{h}", f"r{r}", f"e{t}"]
    res = fid.ground_truth_recovery(
        test, subsets, scores, TRAIN, relevant, E, n_random=7, seed=3, labels=labels, extra=extra
    )
    deg = loop_degree()
    rng = np.random.default_rng(3)  # the random order: n_random permutations per graded triple, in order
    per = []
    for j in (0, 1):
        cand = TRAIN[subsets[j]]
        rel = [tuple(map(int, c)) in relevant[j] for c in cand]
        d = deg[cand[:, 0]] + deg[cand[:, 2]]
        walk = walk_lengths(cand, test[j, 0], test[j, 2])
        shell = np.where(np.isfinite(walk), walk, 1e9)
        perms = [rng.permutation(len(cand)) for _ in range(7)]
        want = {
            "tracin": by_sort([scores[j]], rel, perms),
            "m": by_sort(extra["m"][j], rel, perms),
            "random": by_sort([np.zeros(len(cand))], rel, perms),
            "degree": by_sort([d], rel, perms),
            "path": by_sort([-shell, d], rel, perms),
        }
        assert len(set(d.tolist())) < len(d)  # ties that the permutations break
        e = res["per_triple"][j]
        assert list(e["methods"]) == ["tracin", "m", "random", "degree", "path"]
        assert {m: approx_dict(v) for m, v in want.items()} == e["methods"]
        n_rel = sum(rel)
        exact = np.mean([1 / (min(c) + 1) for c in combinations(range(len(cand)), n_rel)])
        assert e["random_rr_exact"] == pytest.approx(exact, abs=1e-12)
        assert (e["index"], e["triple"], e["candidates"]) == (j, labels(*test[j]), len(cand))
        assert (e["mechanism_edges"], e["mechanism_edges_in_candidates"]) == (len(relevant[j]), n_rel)
        per.append(want)
    assert res["graded"] == 2 and len(res["per_triple"]) == 2
    assert res["not_graded"] == [
        {
            "index": 2,
            "triple": ["e7", "r2", "e0"],
            "candidates": 2,
            "mechanism_edges": 1,
            "mechanism_edges_in_candidates": 0,
            "reason": "no mechanism edge among the candidates",
        },
        {
            "index": 3,
            "triple": ["e0", "r0", "e5"],
            "candidates": 3,
            "mechanism_edges": 0,
            "mechanism_edges_in_candidates": 0,
            "reason": "no mechanism edges known",
        },
    ]
    assert res["mechanism_edge_coverage"] == pytest.approx((2 + 1 + 0 + 0) / (3 + 1 + 1 + 0))
    assert res["mean_candidates"] == (6 + 4) / 2
    names = {"rr": "mrr", "ap": "map", "hits@1": "hits@1", "hits@3": "hits@3", "hits@10": "hits@10"}
    names["recall@10"] = "recall@10"
    assert list(res["summary"]) == ["tracin", "m", "random", "degree", "path"]
    for m in res["summary"]:
        assert list(res["summary"][m]) == list(fid.METRICS)
        for key, name in names.items():
            vals = [per[0][m][key], per[1][m][key]]
            assert res["summary"][m][name] == {
                "mean": pytest.approx(np.mean(vals), abs=1e-12),
                "std": pytest.approx(np.std(vals), abs=1e-12),
            }
    assert res["definition"] == {
        "candidates": "training triples of the test triple's filtered subgraph",
        "relevant": "its mechanism edges, matched exactly as stored (head, relation, tail)",
        "mrr": "mean over test triples of 1 / rank of the first mechanism edge",
        "map": "mean average precision over the mechanism edges among the candidates",
        "hits@k": "share of test triples with a mechanism edge in the top k",
        "recall@10": "mean share of the (candidate) mechanism edges in the top 10",
        "ties": "broken at random; every figure is the mean over 7 permutations (seed 3)",
        "baselines": {
            "random": "random order",
            "degree": "sum of endpoint degrees in train, high first",
            "path": "shortest head-tail walk through the edge in the candidate graph, short first, then degree",
        },
    }


def test_recovery_without_labels_extra_or_graded_triples():
    test = np.array([[0, 3, 2]])
    res = fid.ground_truth_recovery(test, [np.array([0, 1])], [np.array([1.0, 0.0])], TRAIN, [{(1, 1, 2)}], E)
    e = res["per_triple"][0]
    assert e["triple"] == [0, 3, 2] and list(e["methods"]) == ["tracin", "random", "degree", "path"]
    assert e["methods"]["tracin"]["rr"] == 0.5 and e["methods"]["tracin"]["ap"] == 0.5
    assert res["definition"]["ties"].endswith("mean over 20 permutations (seed 0)")
    assert res["mechanism_edge_coverage"] == 1.0  # one edge, among the candidates
    none = fid.ground_truth_recovery(test, [np.array([0])], [np.array([1.0])], TRAIN, [{(1, 1, 2)}], E)
    assert none["graded"] == 0 and none["mean_candidates"] == 0.0 and none["per_triple"] == []
    assert none["summary"]["tracin"]["mrr"] == {"mean": None, "std": None}
    assert none["mechanism_edge_coverage"] == 0.0
    empty = fid.ground_truth_recovery(np.zeros((0, 3), np.int64), [], [], TRAIN, [], E)
    assert empty["mechanism_edge_coverage"] == 0.0 and empty["graded"] == 0  # no edges at all: 0 / max(0, 1)


def test_random_baseline_is_the_exact_expectation_within_its_margin():
    test = np.array([[0, 3, 2]])
    rows = np.arange(len(TRAIN))
    relevant = [{(1, 1, 2), (3, 2, 4)}]
    n = 3000
    res = fid.ground_truth_recovery(test, [rows], [np.zeros(len(rows))], TRAIN, relevant, E, n_random=n, seed=1)
    got = res["per_triple"][0]["methods"]["random"]["rr"]
    # every placement of the 2 relevant among 11: E[1 / first]
    exact = np.mean([1 / (min(c) + 1) for c in combinations(range(11), 2)])
    assert res["per_triple"][0]["random_rr_exact"] == pytest.approx(exact, abs=1e-12)
    assert abs(got - exact) < 5 * 0.5 / np.sqrt(n)  # RR in [0, 1]: sd at most 1/2


# --------------------------------------------------------------------------- influence on the candidates


def test_influence_on_candidates_reads_each_triples_columns_of_one_pass(monkeypatch):
    from types import SimpleNamespace as NS

    import tracegraph.kg.explain.tracin.influence as influence

    calls = []
    scores = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]], np.float32)

    class Stub:
        @staticmethod
        def from_parts(store, train_ids, checkpoints, options, *, device=None, read=None):
            calls.append((store, train_ids, checkpoints, options, device, read))
            return Stub()

        def result(self, test_ids, rows, *, progress=None):
            calls.append((test_ids.tolist(), rows.tolist(), progress))
            return NS(scores=scores)

    monkeypatch.setattr(influence, "TracIn", Stub)
    test = np.array([[0, 3, 2], [5, 1, 6]])
    reader, bar, opts = object(), object(), object()
    per, res = fid.influence_on_candidates(
        ["c.pt"], TRAIN, test, [np.array([7, 2]), np.array([9, 2, 4])], opts, "dev", bar, reader
    )
    assert calls[0] == (None, TRAIN, ["c.pt"], opts, "dev", reader)
    assert calls[1] == ([[0, 3, 2], [5, 1, 6]], [2, 4, 7, 9], bar)  # the union, once
    assert [p.tolist() for p in per] == [[3.0, 1.0], [8.0, 5.0, 6.0]] and res.scores is scores
    assert all(p.dtype == np.float64 for p in per)
    for subsets in ([np.zeros(0, np.int64)], []):
        with pytest.raises(TracegraphError) as e:
            fid.influence_on_candidates([], TRAIN, test[:1], subsets, opts, "dev")
        assert str(e.value) == "no candidate training triples for any test triple"


# --------------------------------------------------------------------------- the checks on a hand-built context


class Labels:
    def __init__(self, n, prefix):
        self.labels = [f"{prefix}{i}" for i in range(n)]

    def __len__(self):
        return len(self.labels)


def hand_context(**cfg):
    from types import SimpleNamespace as NS

    lm = NS(entities=Labels(E, "e"), relations=Labels(4, "r"), model=None)
    c = fid.FidelityConfig("m", "train.txt", "test.txt", "mech.tsv", "out", n_random=5, seed=2, n_hops=3, **cfg)
    ctx = fid.FidelityContext(
        c,
        lm,
        TRAIN,
        np.array([[0, 3, 2]]),
        [np.array([0, 1, 2])],
        [{(1, 1, 2)}],
        None,
        filter_seconds=1.5,
        scores=[np.array([0.1, 0.5, 0.2])],
    )
    ctx.influence_options = {"method": "exact"}
    return ctx


def test_recovery_reports_the_settings_and_labels():
    ctx = hand_context(min_degree=4)
    assert ctx.labels(0, 3, 8) == ["e0", "r3", "e8"]
    out = fid.recovery(ctx)
    want = fid.ground_truth_recovery(
        ctx.test_ids, ctx.subsets, ctx.scores, TRAIN, ctx.relevant, E, n_random=5, seed=2, labels=ctx.labels
    )
    assert out["influence"] == {"method": "exact"}
    assert out["filter"] == {"n_hops": 3, "min_degree": 4, "seconds": 1.5}
    assert {k: v for k, v in out.items() if k not in ("influence", "filter")} == want
    assert out["per_triple"][0]["triple"] == ["e0", "r3", "e2"]
    assert out["per_triple"][0]["methods"]["tracin"]["rr"] == 1.0  # (1, 1, 2) has the highest score
    ctx.extra_keys = {"m": [[np.array([3.0, 2.0, 1.0])]]}
    assert fid.recovery(ctx)["per_triple"][0]["methods"]["m"]["rr"] == 0.5


def test_removal_without_a_well_ranked_triple_retrains_nothing():
    from tracegraph.kg.explain.removal import RemovalOptions

    ctx = hand_context(removal_options=RemovalOptions(max_rank=2.0, n_triples=3))
    ctx.ranks, ctx.model_scores = np.array([3.0]), np.array([0.1])
    out = fid.removal(ctx)
    assert out == {
        "options": {**RemovalOptions(max_rank=2.0, n_triples=3).__dict__},
        "graded": 0,
        "retrains": 0,
        "note": "no test triple has a filtered tail rank <= 2.0 under the final model",
    }


def test_fidelity_config_defaults():
    c = fid.FidelityConfig("m", "t", "x", "mech", "o")
    assert (c.filter_files, c.checkpoints, c.loss, c.layers, c.label_smoothing) == (None, None, "logit", "all", None)
    assert (c.n_hops, c.min_degree, c.n_random, c.seed, c.removal, c.device, c.methods) == (
        2,
        2,
        20,
        0,
        True,
        "auto",
        ["tracin"],
    )
    assert c.methods is not fid.FidelityConfig("m", "t", "x", "mech", "o").methods
    assert fid.BASELINES == ("random", "degree", "path")
    assert fid.METRICS == ("mrr", "map", "hits@1", "hits@3", "hits@10", "recall@10")


def test_removal_grades_the_best_ranked_with_their_candidates_by_tracin(monkeypatch):
    """The removal test's cases by hand: the test triples ranked within ``max_rank`` (best first, at most
    ``n_triples``), each with its candidates ordered by TracIn, high first and ties in candidate order;
    the ranks computed when missing, one bar over every retrain (one per case and random draw)."""
    from tracegraph.kg.explain.removal import RemovalOptions

    opts = RemovalOptions(max_rank=2.0, n_triples=2, random_draws=2)
    ctx = hand_context(removal_options=opts)
    ctx.test_ids = np.array([[0, 3, 2], [5, 1, 6], [7, 2, 0]])
    many = np.array([0.3, 0.9, -1.0, 0.5, 0.3, 0.9, 0.5, -1.0] * 8)  # ties enough for an unstable sort to show
    ctx.subsets = [np.array([0, 1, 2]), np.array([5, 6, 7, 10]), 100 + np.arange(64)]
    ctx.relevant = [{(1, 1, 2)}, set(), {(3, 2, 4)}]
    ctx.scores = [np.array([0.1, 0.5, 0.2]), np.array([0.3, 0.9, 0.3, -1.0]), many]
    ctx.known = object()
    ctx.lm.model = object()
    ranked = []
    monkeypatch.setattr(
        fid, "tail_ranks", lambda m, t, k: ranked.append((m, t.tolist(), k)) or (np.array([2.0, 1.0, 1.5]), np.zeros(3))
    )
    seen = {}

    def fake_removal_test(run_dir, train, train_ids, cases, known, out, o, *, labels, on_retrain):
        seen.update(run_dir=run_dir, train=train, train_ids=train_ids, cases=cases, known=known, out=out, o=o)
        seen.update(labels=labels(0, 3, 2))
        on_retrain("x")
        return {"graded": len(cases)}

    monkeypatch.setattr(fid, "removal_test", fake_removal_test)
    bars = Bars()
    assert fid.removal(ctx, progress=bars) == {"graded": 2}
    assert ranked == [(ctx.lm.model, ctx.test_ids.tolist(), ctx.known)]  # ranks were missing
    cases = seen["cases"]
    assert [c.index for c in cases] == [1, 2]  # rank 1, then 1.5; rank 2.0 is the third
    assert [c.triple for c in cases] == [(5, 1, 6), (7, 2, 0)] and all(type(x) is int for x in cases[0].triple)
    by_hand = [100 + i for i in sorted(range(64), key=lambda i: (-many[i], i))]  # ties in candidate order
    assert [c.proponent_rows.tolist() for c in cases] == [[6, 5, 7, 10], by_hand]  # 0.3 tie: row 5 before 7
    assert [c.relevant for c in cases] == [set(), {(3, 2, 4)}]
    assert (seen["run_dir"], seen["train"], seen["train_ids"] is TRAIN, seen["known"] is ctx.known) == (
        "m",
        "train.txt",
        True,
        True,
    )
    assert seen["out"] == fid.Path("out") / "removal" and seen["o"] is opts and seen["labels"] == ["e0", "r3", "e2"]
    assert bars.tasks == [("retrain", 2 * (1 + 2), "")] and bars.steps == [(0, 1, "x")]
    ranked.clear()
    fid.removal(ctx)  # ranks known now: not recomputed; no display
    assert ranked == []


# --------------------------------------------------------------------------- the driver on a 2-epoch run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from tests.kg.tiny_graph import TEST, TRIPLES, VALID, cfg, write_triples
    from tracegraph.kg.model.train import train

    d = tmp_path_factory.mktemp("fidelity_by_hand")
    write_triples(d / "train.txt", TRIPLES)
    write_triples(d / "valid.txt", VALID)
    write_triples(d / "test.txt", TEST)
    train(cfg(d, d / "run", epochs=2, valid=str(d / "valid.txt"), test=str(d / "test.txt"), label_smoothing=0.2))
    (d / "mech.tsv").write_text(
        f"{HEADER}\n"
        "e1\tr1\te4\te1\tr0\te3\n"
        "e1\tr1\te4\te3\tr0\te4\n"
        "e1\tr1\te4\teX\tr0\te4\n"  # an unknown entity: dropped
        "e1\tr1\te4\te1\trX\te3\n"  # an unknown relation: dropped
        "e5\tr0\te2\te2\tr1\te0\n"
        "e9\tr0\te2\te2\tr1\te0\n",  # not a test triple
        encoding="utf-8",
    )
    return d


def fid_config(run, **kw):
    base = dict(
        model_dir=str(run / "run"),
        train=str(run / "train.txt"),
        test=str(run / "test.txt"),
        mechanisms=str(run / "mech.tsv"),
        output_dir=str(run / "out"),
        device="cpu",
        removal=False,
    )
    return fid.FidelityConfig(**{**base, **kw})


def brute_tail_rank(model, known: set, h, r, t):
    import torch

    with torch.no_grad():
        s = model.score_all(torch.tensor([h]), torch.tensor([r]))[0].double().numpy()
    others = [e for e in range(len(s)) if e != t and (h, r, e) not in known]
    return 1 + sum(s[e] > s[t] for e in others) + 0.5 * sum(s[e] == s[t] for e in others), float(s[t])


def test_prepare_reads_the_run_the_mechanisms_and_filters_each_test_triple(run):
    from tracegraph.kg.explain.neighborhood import FilterOptions, GraphIndex

    import time

    t0 = time.perf_counter()
    ctx = fid.prepare(fid_config(run, filter_files=[str(run / "valid.txt")], n_hops=2, min_degree=3))
    wall = time.perf_counter() - t0
    ent = {f"e{i}": i for i in range(6)}
    assert ctx.train_ids.tolist()[:2] == [[0, 0, 1], [0, 0, 2]] and ctx.test_ids.tolist() == [[1, 1, 4], [5, 0, 2]]
    assert ctx.relevant == [{(ent["e1"], 0, ent["e3"]), (ent["e3"], 0, ent["e4"])}, {(ent["e2"], 1, ent["e0"])}]
    index = GraphIndex.load_or_build(
        run / "train.txt", ctx.train_ids, 6
    )  # the neighbourhood filter's own tests hold it
    narrow = fid.prepare(fid_config(run, n_hops=1))
    wide = fid.prepare(fid_config(run))
    for c, o in (
        (ctx, FilterOptions(n_hops=2, min_degree=3)),
        (narrow, FilterOptions(n_hops=1)),
        (wide, FilterOptions()),
    ):
        for (h, _, t), rows in zip(c.test_ids, c.subsets):
            assert rows.tolist() == index.filter(int(h), int(t), o).triple_rows.tolist()
    assert len({tuple(map(len, c.subsets)) for c in (ctx, narrow, wide)}) == 3  # each option reaches the filter
    # the filter: the files named and the test file, not the run's training file
    assert ctx.known.tails_of(0, 1).tolist() == [3] and ctx.known.tails_of(1, 1).tolist() == [4]  # valid, test
    assert ctx.known.tails_of(0, 0).tolist() == [] and wide.known.tails_of(0, 0).tolist() == [1, 2]  # train: run's
    assert 0 < ctx.filter_seconds <= wall and ctx.scores == [] and ctx.ranks is None
    assert str(ctx.lm.checkpoint).endswith("final_model.pt")
    import shutil

    shutil.copytree(run / "run", run / "nofinal", dirs_exist_ok=True)
    (run / "nofinal" / "final_model.pt").unlink(missing_ok=True)
    assert fid.Path(fid.prepare(fid_config(run, model_dir=str(run / "nofinal"))).lm.checkpoint).name == "best_model.pt"
    (run / "none.tsv").write_text(f"{HEADER}\ne0\tr0\te1\te0\tr0\te2\n")
    with pytest.raises(DataError) as e:
        fid.prepare(fid_config(run, mechanisms=str(run / "none.tsv")))
    assert str(e.value) == (
        f"{run / 'none.tsv'}: none of the test triples has mechanism edges in the mechanisms file "
        "(columns test_head/test_relation/test_tail must match the test file)"
    )


def test_tracin_methods_and_ranks_on_the_prepared_candidates(run, monkeypatch):
    import time

    import torch

    from tracegraph.kg.data.triples import KnownTails

    from tracegraph.kg.explain import methods
    from tracegraph.kg.explain.tracin.influence import TracIn

    ctx = fid.prepare(fid_config(run, loss="score", layers="last:2"))
    fid.compute_tracin(ctx)
    t = TracIn(run / "run", loss="score", layers="last:2", label_smoothing=0.2, device="cpu", progress=False)
    for j, rows in enumerate(ctx.subsets):  # TracIn's own tests hold it to first principles
        want = np.asarray(t.result(ctx.test_ids[j : j + 1], rows).scores[0], np.float64)
        np.testing.assert_allclose(ctx.scores[j], want, rtol=1e-5, atol=1e-9)
        assert ctx.scores[j].dtype == np.float64
    o = ctx.influence_options
    assert (o["method"], o["loss"], o["label_smoothing"]) == ("exact", "score", 0.2)
    assert o["layers"] == ["entity.weight", "entity_bias"]
    assert [(fid.Path(c["path"]).name, c["epoch"], c["lr"]) for c in o["checkpoints"]] == [
        ("epoch_0001.pt", 1, pytest.approx(0.01)),
        ("epoch_0002.pt", 2, pytest.approx(0.01)),
    ]
    one = fid.prepare(fid_config(run, checkpoints=["final"], label_smoothing=0.05, loss="train-loss"))
    passed = []
    real_ioc = fid.influence_on_candidates
    monkeypatch.setattr(
        fid, "influence_on_candidates", lambda *a: passed.append(a[6:]) or real_ioc(*a[:6], None, *a[7:])
    )
    bar = object()
    fid.compute_tracin(one, bar)
    assert passed == [(bar, one.lm.read_checkpoint)]  # the store's cached reader
    t1 = TracIn(
        run / "run", checkpoints=["final"], loss="train-loss", label_smoothing=0.05, device="cpu", progress=False
    )
    for j, rows in enumerate(one.subsets):
        want = np.asarray(t1.result(one.test_ids[j : j + 1], rows).scores[0], np.float64)
        np.testing.assert_allclose(one.scores[j], want, rtol=1e-5, atol=1e-9)
    assert [fid.Path(c["path"]).name for c in one.influence_options["checkpoints"]] == ["final_model.pt"]
    assert (one.influence_options["label_smoothing"], one.influence_options["loss"]) == (0.05, "train-loss")
    # the other methods: computed once on the same candidates, with the same settings
    seen = []
    real = methods.method_keys_all
    monkeypatch.setattr(methods, "method_keys_all", lambda m, **kw: seen.append((m, kw)) or real(m, **kw))
    fid.compute_methods(ctx, ["tracin", "degree", "path", "random"])  # nothing beyond TracIn and the baselines
    assert seen == [] and not hasattr(ctx, "extra_keys")
    seen.clear()
    monkeypatch.setattr(
        methods, "method_keys_all", lambda m, **kw: seen.append((m, kw)) or real(m, **{**kw, "progress": None})
    )
    t0 = time.perf_counter()
    fid.compute_methods(ctx, ["tracin", "tracin-margin", "degree", "relatif"], progress=bar)
    wall = time.perf_counter() - t0
    ((asked, kw),) = seen
    assert asked == ["tracin-margin", "relatif"] and list(ctx.extra_keys) == ["tracin-margin", "relatif"]
    assert kw["model"] is ctx.lm.model and kw["train_ids"] is ctx.train_ids and kw["facts"] is ctx.test_ids
    assert kw["subsets"] is ctx.subsets and kw["known"] is ctx.known and kw["device"] == torch.device("cpu")
    assert (kw["opts"].loss, kw["opts"].layers, kw["opts"].label_smoothing) == ("score", "last:2", 0.2)
    assert [fid.Path(p).name for p in kw["checkpoints"]] == ["epoch_0001.pt", "epoch_0002.pt"]
    assert 0 < ctx.extra_seconds <= wall and kw["progress"] is bar
    fid.compute_methods(one, ["local-retrain"])
    assert seen[-1][1]["opts"].label_smoothing == 0.05 and [fid.Path(p).name for p in seen[-1][1]["checkpoints"]] == [
        "final_model.pt"
    ]
    assert list(one.extra_keys) == ["local-retrain"]
    # the filtered tail ranks and scores under the final model, against scoring every entity
    fid.rank_test(ctx)
    known_all = KnownTails([np.array([[h, r, e] for h, r, _ in ctx.test_ids for e in range(6)])], 4)
    plain = fid.FidelityContext(ctx.cfg, ctx.lm, ctx.train_ids, ctx.test_ids, ctx.subsets, ctx.relevant, known_all)
    fid.rank_test(plain)
    assert plain.ranks.tolist() == [1.0, 1.0]  # every other answer known: the answer first
    known = set()
    for f in ("train.txt", "valid.txt", "test.txt"):
        for line in (run / f).read_text().splitlines():
            h, r, t = line.split("\t")
            known.add((int(h[1:]), int(r[1:]), int(t[1:])))
    for j, (h, r, t) in enumerate(ctx.test_ids):
        rank, score = brute_tail_rank(ctx.lm.model, known, int(h), int(r), int(t))
        assert ctx.ranks[j] == rank and ctx.model_scores[j] == pytest.approx(score, abs=1e-6)


def test_run_fidelity_writes_the_report(run, tmp_path, monkeypatch):
    import json

    from tracegraph.kg.explain.removal import RemovalOptions

    import time

    cfg = fid_config(run, output_dir=str(tmp_path / "o"), methods=["tracin", "relatif"], n_random=4, seed=1)
    t0 = time.perf_counter()
    res = fid.run_fidelity(cfg)
    wall = time.perf_counter() - t0
    assert list(res) == ["model_dir", "train", "test", "mechanisms", "recovery", "seconds"]
    assert (res["model_dir"], res["train"], res["test"], res["mechanisms"]) == (
        str(run / "run"),
        str(run / "train.txt"),
        str(run / "test.txt"),
        str(run / "mech.tsv"),
    )
    rec = res["recovery"]
    assert rec["filter"]["n_hops"] == 2 and rec["influence"]["loss"] == "logit" and rec["graded"] >= 1
    assert list(rec["summary"]) == ["tracin", "relatif", "random", "degree", "path"]
    assert rec["definition"]["ties"].endswith("mean over 4 permutations (seed 1)")
    assert json.loads((tmp_path / "o" / "fidelity.json").read_text()) == json.loads(json.dumps(res))
    assert 0 < res["seconds"] <= wall
    far = fid_config(run, output_dir=str(tmp_path / "r"), removal=True, removal_options=RemovalOptions(max_rank=0.5))
    displays = []
    for name in ("compute_tracin", "compute_methods", "removal"):
        real_fn = getattr(fid, name)
        monkeypatch.setattr(
            fid,
            name,
            lambda *a, _f=real_fn, _n=name, **k: (
                displays.append((_n, a[-1] if _n != "removal" else k["progress"])) or _f(*a, **k)
            ),
        )
    out = fid.run_fidelity(far)
    assert out["removal"]["graded"] == 0 and out["removal"]["note"].endswith("<= 0.5 under the final model")
    assert [n for n, _ in displays] == ["compute_tracin", "compute_methods", "removal"]
    assert all(d is not None and hasattr(d, "add_task") for _, d in displays)  # each given a display
    assert displays[0][1] is displays[1][1] and displays[2][1] is not displays[0][1]  # the retrains get their own
