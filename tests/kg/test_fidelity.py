"""Explanation-quality metrics, baselines and removal bookkeeping (tracegraph/kg/explain/fidelity.py)."""

import json
from itertools import combinations
from math import isclose

import numpy as np
import pytest
import torch

from tests.conftest import run_cli, run_cli_error
from tracegraph.errors import DataError
from tracegraph.kg.explain import fidelity as fid
from tracegraph.kg.demo.synthetic import SyntheticConfig, generate, write
from tracegraph.kg.model.train import TrainConfig, train
from tracegraph.kg.data.triples import read_labeled_triples

TINY = dict(embedding_dim=16, embedding_height=4, embedding_width=4, output_channels=4)


# --------------------------------------------------------------------------- metrics


def test_ranking_metrics_hand_computed():
    m = fid.ranking_metrics([False, True, False, True])
    assert m["rr"] == 0.5
    assert isclose(m["ap"], (1 / 2 + 2 / 4) / 2)
    assert (m["hits@1"], m["hits@3"], m["hits@10"], m["recall@10"]) == (0.0, 1.0, 1.0, 1.0)

    m = fid.ranking_metrics([False, False, True, True, True])
    assert isclose(m["rr"], 1 / 3)
    assert isclose(m["ap"], (1 / 3 + 2 / 4 + 3 / 5) / 3)
    assert m["hits@1"] == 0.0 and m["hits@3"] == 1.0

    m = fid.ranking_metrics([True] + [False] * 20)
    assert m["rr"] == m["ap"] == m["hits@1"] == 1.0

    rel = [False] * 11 + [True, True]  # both beyond the top 10
    m = fid.ranking_metrics(rel)
    assert isclose(m["rr"], 1 / 12) and m["hits@10"] == 0.0 and m["recall@10"] == 0.0
    assert isclose(fid.ranking_metrics([False] * 9 + [True] + [False, True])["recall@10"], 0.5)

    assert fid.ranking_metrics([False, False]) == {
        "rr": 0.0,
        "ap": 0.0,
        "hits@1": 0.0,
        "hits@3": 0.0,
        "hits@10": 0.0,
        "recall@10": 0.0,
    }


def test_ranked_order_descending_with_tiebreak():
    a = np.array([1.0, 3.0, 3.0, 2.0])
    assert fid.ranked_order([a], np.array([0, 1, 0, 0])).tolist() == [2, 1, 3, 0]
    assert fid.ranked_order([a], np.array([0, 0, 1, 0])).tolist() == [1, 2, 3, 0]
    # secondary key breaks ties of the first before the random tie-break
    b = np.array([0.0, 1.0, 5.0, 0.0])
    assert fid.ranked_order([a, b], np.array([0, 0, 0, 0])).tolist() == [2, 1, 3, 0]


def test_random_expectation_is_analytical():
    n = 40
    assert isclose(fid.random_rr_expectation(n, 1), sum(1 / k for k in range(1, n + 1)) / n)
    # two relevant among 6: brute force over all placements
    brute = np.mean([1 / (min(c) + 1) for c in combinations(range(6), 2)])
    assert isclose(fid.random_rr_expectation(6, 2), brute)
    # the random baseline (mean over permutations) approaches it
    rel = np.zeros(n, bool)
    rel[7] = True
    perms = np.stack([np.random.default_rng(0).permutation(n) for _ in range(1)])
    rng = np.random.default_rng(1)
    perms = np.stack([rng.permutation(n) for _ in range(3000)])
    got = fid.expected_metrics([np.zeros(n)], rel, perms)["rr"]
    assert abs(got - fid.random_rr_expectation(n, 1)) < 0.01


def test_path_lengths_and_degrees():
    # h=0 - 1 - t=2 ; 1 - 3 - 4 (dead end) ; 0 - 5 - 6 - 2 (length 3)
    edges = np.array([[0, 1], [1, 2], [1, 3], [3, 4], [0, 5], [5, 6], [6, 2], [7, 8]])
    got = fid.path_lengths(edges, 0, 2)
    assert got[:3].tolist() == [2, 2, 4]  # 1-3: h-1-3 then 3..t = 1+1+2
    assert got[3] == 6  # 3-4: d(h,3)=2, +1, d(4,t)=3
    assert got[4:7].tolist() == [3, 3, 3]
    assert np.isinf(got[7])
    ids = np.array([[0, 0, 1], [1, 0, 2], [2, 1, 2], [0, 1, 2]])
    assert fid.degrees(ids, 4).tolist() == [2, 2, 3, 0]


def test_ground_truth_recovery_small():
    train_ids = np.array([[0, 0, 1], [1, 1, 2], [0, 2, 3], [3, 2, 4], [4, 1, 2], [5, 0, 6]])
    test = np.array([[0, 3, 2]])
    subsets = [np.array([0, 1, 2, 3, 4, 5])]
    relevant = [{(0, 0, 1), (1, 1, 2)}]
    perfect = [np.array([5.0, 4.0, 1.0, 0.5, 0.2, 0.1])]
    res = fid.ground_truth_recovery(test, subsets, perfect, train_ids, relevant, 7, n_random=10)
    s = res["summary"]
    assert s["tracin"]["mrr"]["mean"] == 1.0 and s["tracin"]["map"]["mean"] == 1.0
    assert s["path"]["mrr"]["mean"] == 1.0  # the two relevant edges form the only length-2 path
    assert 0 < s["random"]["mrr"]["mean"] < 1
    assert res["graded"] == 1 and res["mechanism_edge_coverage"] == 1.0
    worst = [perfect[0][::-1].copy()]
    res = fid.ground_truth_recovery(test, subsets, worst, train_ids, relevant, 7, n_random=10)
    assert isclose(res["summary"]["tracin"]["mrr"]["mean"], 1 / 5)
    # no relevant edge among the candidates: listed, not graded
    res = fid.ground_truth_recovery(test, [np.array([2, 3])], [np.array([1.0, 0.0])], train_ids, relevant, 7)
    assert res["graded"] == 0 and len(res["not_graded"]) == 1


def test_read_mechanisms(tmp_path):
    p = tmp_path / "m.tsv"
    p.write_text(
        "test_head\ttest_relation\ttest_tail\tedge_head\tedge_relation\tedge_tail\n"
        "a\ttreats\tb\ta\taffects\tg\na\ttreats\tb\tg\tcauses\tb\n\n"
    )
    assert fid.read_mechanisms(p) == {("a", "treats", "b"): {("a", "affects", "g"), ("g", "causes", "b")}}
    (tmp_path / "bad.tsv").write_text("h\tr\tt\n")
    with pytest.raises(DataError, match="missing"):
        fid.read_mechanisms(tmp_path / "bad.tsv")


def test_select_correct():
    ranks = np.array([3.0, 1.0, 1.0, 2.0, 1.0])
    scores = np.array([9.0, 1.0, 5.0, 9.0, 3.0])
    assert fid.select_correct(ranks, scores, 1, 5) == [2, 4, 1]
    assert fid.select_correct(ranks, scores, 2, 2) == [2, 4]


# --------------------------------------------------------------------------- removal bookkeeping


def test_write_without_and_random_neighbours(tmp_path):
    src = tmp_path / "train.txt"
    src.write_text("a\tr\tb\n\nb\tr\tc\nc\tr\td\nd\tr\ta\ne\tr\tf\n")
    n = fid.write_without(src, np.array([1, 3]), tmp_path / "out" / "train.txt")
    lt = read_labeled_triples(tmp_path / "out" / "train.txt")
    assert n == 3 and list(zip(lt.heads, lt.tails)) == [("a", "b"), ("c", "d"), ("e", "f")]
    ids = np.array([[0, 0, 1], [1, 0, 2], [2, 0, 3], [3, 0, 0], [4, 0, 5]])
    assert fid.neighbour_rows(ids, 0, 2).tolist() == [0, 1, 2, 3]
    a = fid.random_neighbour_rows(ids, 0, 2, 2, seed=0, index=3, draw=0)
    assert len(a) == 2 and set(a) <= {0, 1, 2, 3}
    assert a.tolist() == fid.random_neighbour_rows(ids, 0, 2, 2, seed=0, index=3, draw=0).tolist()
    assert len(fid.random_neighbour_rows(ids, 0, 2, 10, seed=0, index=3, draw=0)) == 4  # fewer than k exist


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("fid")
    cfg = SyntheticConfig.quick(
        n_drugs=20,
        n_genes=40,
        n_pathways=8,
        n_diseases=15,
        n_phenotypes=15,
        n_modules=3,
        n_test=4,
        n_valid_treats=2,
        n_valid_other=10,
    )
    write(generate(cfg, seed=1), root / "data")
    d = root / "data"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(
            TrainConfig(
                train=str(d / "train.txt"),
                valid=str(d / "valid.txt"),
                test=str(d / "test.txt"),
                entity_map=str(d / "node_dict.txt"),
                relation_map=str(d / "rel_dict.txt"),
                output_dir=str(root / "run"),
                epochs=3,
                checkpoint_every=1,
                eval_every=3,
                model=dict(TINY),
            )
        )
    finally:
        torch.set_num_threads(threads)
    return root


def test_removal_test_removes_exactly_those_triples(tiny_run):
    d = tiny_run / "data"
    cfg = fid.FidelityConfig(
        model_dir=str(tiny_run / "run"),
        train=str(d / "train.txt"),
        test=str(d / "test.txt"),
        mechanisms=str(d / "mechanisms.tsv"),
        output_dir=str(tiny_run / "fid"),
        device="cpu",
        removal_options=fid.RemovalOptions(k=3, n_triples=1, max_rank=1e9, random_draws=1),
    )
    ctx = fid.prepare(cfg)
    fid.compute_tracin(ctx)
    fid.rank_test(ctx)
    from tracegraph.runtime.progress import make_progress

    with make_progress() as progress:
        res = fid.removal(ctx, progress=progress)
    assert [(t.description, t.total, t.completed) for t in progress.tasks] == [("retrain", 2, 2)]  # 1 triple × 2 arms
    assert res["graded"] == 1 and res["retrains"] == 2
    case = res["per_triple"][0]
    original = read_labeled_triples(d / "train.txt")
    orig = list(zip(original.heads, original.relations, original.tails))
    j = case["index"]
    top3 = ctx.subsets[j][np.argsort(-ctx.scores[j], kind="stable")][:3]
    for arm in case["arms"]:
        sub = (
            tiny_run
            / "fid"
            / "removal"
            / f"triple_{j:03d}"
            / ("proponents" if arm["arm"] == "proponents" else "random_0")
        )
        lt = read_labeled_triples(sub / "train.txt")
        kept = list(zip(lt.heads, lt.relations, lt.tails))
        removed = [tuple(x) for x in arm["removed"]]
        assert len(kept) == len(orig) - 3 == arm["training_triples"]
        assert not set(removed) & set(kept)
        assert sorted(kept + removed) == sorted(orig)
        # the retrain used the run's config on the reduced file, same seed
        rc = json.loads((sub / "run" / "config.json").read_text())["train"]
        assert rc["train"] == str(d / "train.txt") and rc["seed"] == 0 and rc["epochs"] == 3
        ex = read_labeled_triples(rc["exclude"])  # the full file, the removed triples masked out
        assert sorted(zip(ex.heads, ex.relations, ex.tails)) == sorted(removed)
        if arm["arm"] == "proponents":
            assert sorted(arm["removed_rows"]) == sorted(top3.tolist())
        else:
            h, _, t = ctx.test_ids[j]
            assert all(h in (x[0], x[2]) or t in (x[0], x[2]) for x in ctx.train_ids[arm["removed_rows"]])
        assert isclose(arm["delta_rr"], 1 / case["base_rank"] - 1 / arm["rank"])
    assert not list((tiny_run / "fid" / "removal").rglob("*.pt"))  # models deleted unless kept


def test_fidelity_cli(tiny_run):
    d = tiny_run / "data"
    out = tiny_run / "cli"
    r = run_cli(
        [
            "fidelity",
            "recovery",
            "--model-dir",
            tiny_run / "run",
            "--train",
            d / "train.txt",
            "--test",
            d / "test.txt",
            "--mechanisms",
            d / "mechanisms.tsv",
            "-o",
            out,
            "--no-removal",
            "--device",
            "cpu",
        ]
    )
    assert r.exit_code == 0, r.output
    res = json.loads((out / "fidelity.json").read_text())
    assert set(res["recovery"]["summary"]) == {"tracin", "random", "degree", "path"}
    assert set(res["recovery"]["summary"]["tracin"]) == set(fid.METRICS)
    assert res["recovery"]["influence"]["loss"] == "logit"  # the default convention
    assert res["recovery"]["per_triple"] and "removal" not in res
    run_cli_error(
        [
            "fidelity",
            "recovery",
            "--model-dir",
            tiny_run / "run",
            "--train",
            d / "train.txt",
            "--test",
            d / "test.txt",
            "--mechanisms",
            d / "train.txt",
            "-o",
            out,
        ],
        out,
        tiny_run / "run",
    )
