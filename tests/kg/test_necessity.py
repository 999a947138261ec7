"""Explanation methods against brute-force references; the necessity test's arms and bookkeeping."""

import json

import numpy as np
import pytest
import torch

from tests.kg.references import one_mimic_margin
from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.explain.influence_parts import influence_parts
from tracegraph.kg.explain.methods import MethodOptions, method_keys_all
from tracegraph.kg.explain.local_retrain import LocalRefit, LocalRetrainOptions
from tracegraph.kg.model.model_io import build_model
from tracegraph.kg.explain.grading import choose_facts, fact_margins, fact_ranks, top_rows
from tracegraph.kg.explain.necessity import NecessityConfig, arm_rows, resolve_sides, run_necessity
from tracegraph.kg.explain.necessity_summary import (
    add_above,
    add_margin_halves,
    add_split,
    bootstrap_mean,
    summarize_arm,
)
from tracegraph.errors import TracegraphError
from tracegraph.kg.explain.tracin.factors import select_layers
from tracegraph.kg.explain.tracin.reference import autograd_gradients
from tracegraph.kg.model.train import TrainConfig, train
from tracegraph.kg.data.triples import KnownTails, encode_triples, read_labeled_triples, with_reciprocals
from tracegraph.runtime.checkpoints import load_checkpoint

TINY = dict(embedding_dim=12, embedding_height=3, embedding_width=4, output_channels=4)


@pytest.fixture(scope="module")
def tiny_umls(tmp_path_factory, umls_dir):
    """Three epochs of a tiny ConvE on UMLS, a checkpoint per epoch."""
    out = tmp_path_factory.mktemp("nec") / "run"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(
            TrainConfig(
                train=str(umls_dir / "train.txt"),
                test=str(umls_dir / "test.txt"),
                output_dir=str(out),
                epochs=3,
                batch_size=256,
                checkpoint_every=1,
                model=dict(TINY),
            )
        )
    finally:
        torch.set_num_threads(threads)
    return out


# --------------------------------------------------------------------------- influence-based methods


@pytest.mark.parametrize("loss", ["score", "train-loss"])
def test_cosine_and_relatif_equal_float64_brute_force(tiny_umls, umls_dir, loss):
    from tracegraph.kg.model.model_io import load_model

    lm = load_model(tiny_umls)
    train_ids = encode_triples(read_labeled_triples(umls_dir / "train.txt"), lm.entities, lm.relations)
    facts = encode_triples(read_labeled_triples(umls_dir / "test.txt"), lm.entities, lm.relations)[:3]
    subsets = [np.arange(0, 40), np.arange(30, 70), np.array([5, 500, 900])]
    ckpts = sorted((tiny_umls / "checkpoints").glob("epoch_*.pt"))
    opts = MethodOptions(loss=loss, label_smoothing=0.1)
    parts = influence_parts(ckpts, train_ids, facts, subsets, opts, torch.device("cpu"))
    # reference: full flattened per-triple gradients in float64, one backward per triple
    union = np.unique(np.concatenate(subsets))
    tracin = np.zeros((3, len(union)))
    cos = np.zeros((3, len(union)))
    self_inf = np.zeros(len(union))
    for p in ckpts:
        payload = load_checkpoint(p)
        model = build_model(payload, p).double().eval()
        lr = float(payload["lr"])
        layers = select_layers(model, "all")
        g_train = autograd_gradients(model, torch.as_tensor(train_ids[union]), loss, 0.1, layers).numpy()
        g_fact = autograd_gradients(model, torch.as_tensor(facts), loss, 0.1, layers).numpy()
        dots = g_fact @ g_train.T
        tracin += lr * dots
        cos += lr * dots / np.outer(np.linalg.norm(g_fact, axis=1), np.linalg.norm(g_train, axis=1))
        self_inf += lr * (g_train**2).sum(1)
    relatif = tracin / np.sqrt(self_inf)
    for j, rows in enumerate(subsets):
        pos = np.searchsorted(union, rows)
        for got, ref in (
            (parts.tracin[j], tracin[j, pos]),
            (parts.cosine[j], cos[j, pos]),
            (parts.relatif[j], relatif[j, pos]),
        ):
            np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4 * np.abs(ref).max())
    assert np.all(
        np.abs(np.concatenate(parts.cosine)) <= len(ckpts) * max(float(load_checkpoint(p)["lr"]) for p in ckpts) + 1e-9
    )


# --------------------------------------------------------------------------- local retrain


def test_local_retrain_equals_one_mimic_at_a_time_and_brute_force_greedy():
    torch.manual_seed(3)
    model = ConvE(ConvEConfig(num_entities=9, num_relations=3, **TINY)).double().eval()
    train_ids = np.array([[0, 0, 1], [0, 1, 2], [0, 1, 3], [4, 2, 0], [0, 2, 5], [1, 0, 6], [7, 1, 8], [6, 2, 0]])
    fact = (0, 0, 5)  # not a training triple; known: nothing else for filtering
    known = KnownTails([with_reciprocals(np.array([fact]), 3)], 6)
    opts = LocalRetrainOptions(candidates=4, k=2, steps=25, learning_rate=0.05, seed=1)
    refit = LocalRefit(model, train_ids, known, 0.1, opts, torch.device("cpu"))
    oriented, rows = refit.side(0, np.zeros(0, np.int64))
    # the head's triples, written with it first (reciprocal: (4, r2, 0) is (0, r2⁻¹, 4))
    assert sorted(map(tuple, oriented.tolist())) == sorted(
        [(0, 0, 1), (0, 1, 2), (0, 1, 3), (0, 5, 4), (0, 2, 5), (0, 5, 6)]
    )
    removals = [np.zeros(0, np.int64), np.array([1]), np.array([1, 2]), np.array([3, 0])]
    got = refit.margins(fact, oriented, rows, removals)
    pairs = list(zip(map(tuple, oriented.tolist()), rows.tolist()))
    ref = [one_mimic_margin(model, pairs, fact, set(x.tolist()), known, 0.1, 25, 0.05, refit.start) for x in removals]
    np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-9)

    # the search against a brute-force greedy on the naive margins (both sides: reciprocal model)
    cands = np.array([0, 1, 2, 3, 4, 7])  # rows touching head 0 or tail 5
    pre = np.array([0.5, 0.4, 0.3, 0.2, 0.1, 0.05])  # pre-ranking: the first 4 are searched
    keys, rec = refit.explain(fact, cands, pre, np.zeros(0, np.int64))
    tail_side = (5, 3, 0)
    o_t, r_t = refit.side(5, np.zeros(0, np.int64))
    sides = [
        (fact, list(zip(map(tuple, oriented.tolist()), rows.tolist()))),
        (tail_side, list(zip(map(tuple, o_t.tolist()), r_t.tolist()))),
    ]

    margins: dict = {}  # the naive refit depends only on the side and the side's removed rows

    def margin(q, pr, removed):
        key = (q, frozenset(row for _, row in pr if row in removed))
        if key not in margins:
            margins[key] = one_mimic_margin(model, pr, q, set(key[1]), known, 0.1, 25, 0.05, refit.start)
        return margins[key]

    def drop(removed):
        total = 0.0
        for q, pr in sides:
            if any(row in removed for _, row in pr):
                total += margin(q, pr, set()) - margin(q, pr, removed)
        return total

    searched = [0, 1, 2, 3]
    first = max(searched, key=lambda i: drop({int(cands[i])}))
    second = max([i for i in searched if i != first], key=lambda i: drop({int(cands[first]), int(cands[i])}))
    assert rec["chosen_rows"] == [int(cands[first]), int(cands[second])]
    order = np.argsort(-keys, kind="stable")
    assert order[:2].tolist() == [first, second]
    assert set(order[4:].tolist()) == {4, 5} and order[4] == 4  # not searched: pre-ranking order, below


# --------------------------------------------------------------------------- arms


def test_arms_never_remove_a_fact_and_random_arms_touch_as_defined():
    fact = (0, 0, 1)
    train_ids = np.array([[0, 0, 1], [0, 1, 2], [3, 0, 1], [2, 1, 3], [4, 0, 5], [5, 1, 6], [1, 2, 0], [6, 0, 4]])
    from tracegraph.kg.explain.methods import fact_rows

    assert fact_rows(train_ids, fact).tolist() == [0]
    cands = np.setdiff1d(np.flatnonzero(np.isin(train_ids[:, 0], (0, 1)) | np.isin(train_ids[:, 2], (0, 1))), [0])
    for index in range(20):
        nb = arm_rows("neighbour", train_ids, fact, np.arange(8), 3, seed=0, index=index)  # even if offered the fact
        far = arm_rows("far", train_ids, fact, cands, 3, seed=0, index=index)
        assert 0 not in nb and len(nb) == 3
        assert 0 not in far and not np.isin(train_ids[far][:, [0, 2]], (0, 1)).any() and len(far) == 3
        assert arm_rows("far", train_ids, fact, cands, 2, 0, index).tolist() == far[:2].tolist()  # k-prefixes
    keys = [np.array([9.0, 1.0, 2.0, -np.inf])]  # the method's top candidate ...
    rows = np.array([5, 1, 2, 0])
    keys[0][0] = -np.inf  # ... is the fact: never removed
    assert top_rows(keys, rows, 4, 0, 0).tolist() == [2, 1]


def test_choose_facts_bootstrap_and_summary():
    ranks = np.array([1.0, 2.0, 1.0, 1.0, 5.0, 1.0])
    assert choose_facts(ranks, 10, 0).tolist() == [0, 2, 3, 5]
    pick = choose_facts(ranks, 2, 0)
    assert len(pick) == 2 and set(pick) <= {0, 2, 3, 5} and pick.tolist() == sorted(pick.tolist())
    m, lo, hi = bootstrap_mean(np.array([0.0, 1.0, 1.0, 0.0]), 2000, 0)
    assert m == 0.5 and 0.0 <= lo < 0.5 < hi <= 1.0
    s = summarize_arm(np.array([1.0, 1.0, 1.0, 1.0]), np.array([1.0, 3.0, 1.0, 2.0]), 200, 0)
    assert s["hits@1"] == 0.5 and s["delta_hits@1"] == 0.5
    assert s["mrr"] == pytest.approx((1 + 1 / 3 + 1 + 1 / 2) / 4) and s["mean_rank"] == 1.75
    assert s["delta_mrr"] == pytest.approx(1 - s["mrr"])
    # counted by hand: facts 1 and 3 lose the first place; none of the four was below it
    assert (s["flipped"], s["gained"]) == (2, 0)
    s = summarize_arm(np.array([1.0, 2.0, 1.0]), np.array([3.0, 1.0, 1.0]), 200, 0)
    assert (s["flipped"], s["gained"]) == (1, 1) and s["delta_hits@1"] == 0.0


def test_above_the_random_floors_is_paired_by_fact():
    ref = np.ones(6)
    far = np.array([1.0, 1.0, 2.0, 1.0, 1.0, 3.0])  # loses facts 2 and 5
    nb = np.array([2.0, 1.0, 1.0, 1.0, 1.0, 1.0])  # loses fact 0
    arm = np.array([4.0, 1.0, 2.0, 9.0, 1.0, 3.0])  # loses 0, 2, 3, 5
    arms = {
        "reference": {"ranks": ref.tolist()},
        "far@4": dict(summarize_arm(ref, far, 200, 0), k=4, ranks=far.tolist()),
        "neighbour@4": dict(summarize_arm(ref, nb, 200, 0), k=4, ranks=nb.tolist()),
        "m@4": dict(summarize_arm(ref, arm, 200, 0), k=4, ranks=arm.tolist()),
        "m@2": dict(summarize_arm(ref, far, 200, 0), k=2, ranks=far.tolist()),
        "far@2": dict(summarize_arm(ref, far, 200, 0), k=2, ranks=far.tolist()),
        "neighbour@2": dict(summarize_arm(ref, far, 200, 0), k=2, ranks=far.tolist()),
    }
    add_above(arms, [2, 4], 2000, 0)
    a = arms["m@4"]
    assert (
        a["above_far_hits@1"]
        == pytest.approx(2 / 6)
        == pytest.approx(a["delta_hits@1"] - arms["far@4"]["delta_hits@1"])
    )
    # against neighbour: m loses 2, 3, 5 that neighbour keeps, neighbour loses nothing m keeps
    assert a["above_neighbour_hits@1"] == pytest.approx(3 / 6)
    # paired: the facts both lose cancel, so every resample's difference is 0, 1/6, … never negative
    lo, hi = a["above_far_hits@1_ci95"]
    assert 0.0 <= lo < 2 / 6 < hi <= 4 / 6
    lo, hi = a["above_neighbour_hits@1_ci95"]
    assert 0.0 <= lo < 3 / 6 < hi <= 1.0
    assert arms["m@2"]["above_far_hits@1"] == 0.0 and arms["m@2"]["above_far_hits@1_ci95"] == [0.0, 0.0]
    assert arms["neighbour@4"]["above_far_hits@1"] == pytest.approx(-1 / 6)  # neighbour against far, not itself
    assert "above_neighbour_hits@1" not in arms["neighbour@4"] and "above_neighbour_hits@1" not in arms["far@4"]
    assert "above_far_hits@1" not in arms["far@4"] and "above_far_hits@1" not in arms["reference"]


def _brute_force_side(model, known, fact, head: bool):
    """Every entity's score as the answer of the fact's query on one side, one triple at a time, and
    the mask of the entities left in its filtered ranking (the answer and the unknown ones)."""
    h, r, t = (int(x) for x in fact)
    R, N = model.config.num_relations, model.config.num_entities
    q_ent, q_rel, answer = (t, r + R, h) if head else (h, r, t)
    with torch.no_grad():
        scores = np.array(
            [
                float(model.score_triples(torch.tensor([q_ent]), torch.tensor([q_rel]), torch.tensor([e]))[0])
                for e in range(N)
            ]
        )
    keep = np.ones(N, bool)
    keep[known.tails_of(q_ent, q_rel)] = False
    keep[answer] = True
    return scores, keep, answer


@pytest.mark.parametrize("head", [False, True])
def test_fact_margins_equal_the_brute_force_filtered_runner_up(tiny_umls, umls_dir, head):
    from tracegraph.kg.model.model_io import load_model

    lm = load_model(tiny_umls)
    R = len(lm.relations)
    train_ids = encode_triples(read_labeled_triples(umls_dir / "train.txt"), lm.entities, lm.relations)
    facts = encode_triples(read_labeled_triples(umls_dir / "test.txt"), lm.entities, lm.relations)[:6]
    known0 = KnownTails([with_reciprocals(train_ids, R)], lm.model.config.num_relation_rows)
    # each fact's best-scored other answer is made known true, so an unfiltered rival would be it
    planted = []
    for f in facts:
        scores, _, answer = _brute_force_side(lm.model, known0, f, head)
        scores[answer] = -np.inf
        best = int(scores.argmax())
        planted.append((best, f[1], f[2]) if head else (f[0], f[1], best))
    known = KnownTails(
        [with_reciprocals(np.concatenate([train_ids, np.array(planted)]), R)], lm.model.config.num_relation_rows
    )
    side = np.full(len(facts), head)
    got = fact_margins(lm.model, facts, known, side)
    ranks = fact_ranks(lm.model, facts, side, known)
    for j, f in enumerate(facts):
        scores, keep, answer = _brute_force_side(lm.model, known, f, head)
        assert not keep[planted[j][0 if head else 2]]
        assert got[j] == pytest.approx(
            scores[answer] - scores[_brute_force_rival(lm.model, known, f, head)], rel=1e-5, abs=1e-5
        )
        greater, equal = (scores[keep] > scores[answer]).sum(), (scores[keep] == scores[answer]).sum() - 1
        assert ranks[j] == pytest.approx(1 + greater + equal / 2, abs=1.01 if equal else 1e-9)


def test_sides_resolve_and_need_reciprocal_relations():
    assert resolve_sides("auto", True) == ("tail", "head") and resolve_sides("auto", False) == ("tail",)
    assert resolve_sides("both", True) == ("tail", "head") and resolve_sides("head", True) == ("head",)
    assert resolve_sides("tail", False) == ("tail",)
    with pytest.raises(TracegraphError, match="reciprocal"):
        resolve_sides("both", False)
    with pytest.raises(TracegraphError, match="--sides must be one of"):
        resolve_sides("heads", True)


def test_side_split_weights_to_the_whole():
    arms = {"reference": {"ranks": [1.0] * 5}, "m@4": {"ranks": [2.0, 1.0, 1.0, 3.0, 1.0]}}
    tail = np.array([True, True, False, False, False])
    add_split(arms, tail, ("tail", "head"))
    assert arms["m@4"]["delta_hits@1_tail"] == pytest.approx(1 / 2) and arms["m@4"][
        "delta_hits@1_head"
    ] == pytest.approx(1 / 3)
    only_tail = {"reference": {"ranks": [1.0]}, "m@4": {"ranks": [2.0]}}
    add_split(only_tail, np.array([True]), ("tail", "head"))
    assert "delta_hits@1_tail" not in only_tail["m@4"]


def test_margin_halves_split_at_the_median():
    ref = np.ones(6)
    arms = {"reference": {"ranks": ref.tolist()}, "m@4": {"ranks": [2.0, 1.0, 3.0, 1.0, 1.0, 5.0]}}
    margins = np.array([0.1, 2.0, 0.3, 0.2, 3.0, 4.0])  # low half: facts 0, 2, 3; high: 1, 4, 5
    add_margin_halves(arms, margins)
    assert arms["m@4"]["delta_hits@1_low_margin"] == pytest.approx(2 / 3)  # facts 0 and 2 lost
    assert arms["m@4"]["delta_hits@1_high_margin"] == pytest.approx(1 / 3)  # fact 5 lost
    assert arms["reference"]["margins"] == margins.tolist()
    same = {"reference": {"ranks": [1.0, 1.0]}, "m@4": {"ranks": [2.0, 1.0]}}
    add_margin_halves(same, np.array([0.5, 0.5]))  # no high half: left out
    assert "delta_hits@1_low_margin" not in same["m@4"]


@pytest.mark.slow
def test_necessity_end_to_end(tiny_umls, umls_dir, tmp_path):
    from tracegraph.runtime.progress import make_progress

    out = tmp_path / "nec"
    with make_progress() as progress:
        res = run_necessity(
            NecessityConfig(
                model_dir=str(tiny_umls),
                train=str(umls_dir / "train.txt"),
                output_dir=str(out),
                n=1000,
                ks=[1, 2],
                methods=["tracin", "degree"],
                bootstrap=50,
                device="cpu",
                checkpoints=["final"],
            ),
            progress=progress,
        )
    assert [(t.description, t.total, t.completed) for t in progress.tasks] == [("retrain", 8, 8)]  # 4 arms × 2 k
    # every (test triple, side) the run ranks first, found by scoring every entity at once
    from tracegraph.kg.model.model_io import load_model

    lm = load_model(tiny_umls)
    R = len(lm.relations)
    filt = np.concatenate(
        [
            encode_triples(read_labeled_triples(umls_dir / f), lm.entities, lm.relations)
            for f in ("train.txt", "test.txt")
        ]
    )  # the run's filter (tiny_umls has no valid file)
    known = KnownTails([with_reciprocals(filt, R)], lm.model.config.num_relation_rows)
    test_ids = encode_triples(read_labeled_triples(umls_dir / "test.txt"), lm.entities, lm.relations)
    e, r = lm.entities.labels, lm.relations.labels
    first = set()
    for side, q, ans, shift in (("tail", 0, 2, 0), ("head", 2, 0, R)):  # the head side asks (t, r⁻¹ = r + R, ?)
        rels = test_ids[:, 1] + shift
        with torch.no_grad():
            scores = lm.model.eval().score_all(torch.as_tensor(test_ids[:, q]), torch.as_tensor(rels)).numpy()
        for j, (x, y, z) in enumerate(test_ids):
            others = np.setdiff1d(
                np.arange(scores.shape[1]), [*known.tails_of(int(test_ids[j, q]), int(rels[j])), test_ids[j, ans]]
            )
            if (scores[j, others] < scores[j, test_ids[j, ans]]).all():
                first.add((e[x], r[y], e[z], side))
    assert {(*f, s) for f, s in zip(res["facts"], res["fact_sides"])} == first  # n is above their number
    n = res["n_facts"]
    assert n == len(first) and all(r == 1.0 for r in res["base_ranks"])
    head = np.array(res["fact_sides"]) == "head"
    assert head.any() and not head.all()  # a reciprocal run: facts on both sides
    assert (
        res["environment"]["torch_threads"] == torch.get_num_threads() and res["environment"]["explain_device"] == "cpu"
    )
    arms = res["seeds"]["0"]
    assert set(arms) == {"reference", *(f"{a}@{k}" for a in ("tracin", "degree", "neighbour", "far") for k in (1, 2))}
    lt = read_labeled_triples(umls_dir / "train.txt")
    train_set = set(zip(lt.heads, lt.relations, lt.tails))
    facts = {tuple(f) for f in res["facts"]}
    for name, arm in arms.items():
        if name == "reference":
            continue
        ex = read_labeled_triples(out / "retrains" / f"seed0_{name.replace('@', '_k')}" / "excluded.txt")
        removed = set(zip(ex.heads, ex.relations, ex.tails))
        assert removed <= train_set and not removed & facts
        assert 1 <= arm["triples_removed"] == len(removed) <= n * arm["k"]
        ends = [(f[0], f[2]) for f in res["facts"]]
        touching = [any(h in e or t in e for e in ends) for h, _, t in removed]
        # at each fact: the removed triples touching its head or tail, by a plain count
        assert arm["removed_at_fact"] == pytest.approx(
            np.mean([sum(h in e or t in e for h, _, t in removed) for e in ends])
        )
        if not name.startswith("far"):  # explanations and neighbour draws: candidates touch their fact
            assert all(touching)
        rc = json.loads((out / "retrains" / f"seed0_{name.replace('@', '_k')}" / "run" / "config.json").read_text())
        assert rc["train"]["exclude"].endswith("excluded.txt") and rc["train"]["seed"] == 0
    # far: k triples per fact touching neither of *its* ends (they may touch another fact's)
    ex = read_labeled_triples(out / "retrains" / "seed0_far_k2" / "excluded.txt")
    far = set(zip(ex.heads, ex.relations, ex.tails))
    per_fact_ok = [sum(h not in e and t not in e for h, _, t in far) >= 2 for e in ends]
    assert all(per_fact_ok)
    assert (out / "necessity.md").read_text().count("|") > 20
    for k in (1, 2):  # above far: the arm's ΔH@1 minus far's, per fact
        for name in ("tracin", "degree", "neighbour"):
            a = arms[f"{name}@{k}"]
            assert a["above_far_hits@1"] == pytest.approx(a["delta_hits@1"] - arms[f"far@{k}"]["delta_hits@1"])
        assert "above_far_hits@1" not in arms[f"far@{k}"]
    margins = np.array(arms["reference"]["margins"])
    assert margins.shape == (n,) and (margins > 0).all()  # ranked first by the run: ahead of every rival
    for name, a in arms.items():  # each split's ΔH@1, weighted by its parts' sizes, is the whole ΔH@1
        if name == "reference":
            continue
        for part, mask in (("low_margin", margins <= np.median(margins)), ("tail", ~head)):
            if f"delta_hits@1_{part}" in a:
                other = "high_margin" if part == "low_margin" else "head"
                n_part = mask.sum()
                assert (
                    n_part * a[f"delta_hits@1_{part}"] + (len(mask) - n_part) * a[f"delta_hits@1_{other}"]
                ) / n == pytest.approx(a["delta_hits@1"])
        assert "delta_hits@1_tail" in a


@pytest.mark.slow
def test_cli_necessity_prints_the_arms_not_the_retrains_epochs(tiny_umls, umls_dir, tmp_path):
    from tests.conftest import run_cli

    out = tmp_path / "cli"
    res = run_cli(
        [
            "fidelity",
            "necessity",
            "--model-dir",
            tiny_umls,
            "--train",
            umls_dir / "train.txt",
            "--n",
            "2",
            "--k",
            "1",
            "--method",
            "degree",
            "--bootstrap",
            "20",
            "--device",
            "cpu",
            "-o",
            out,
        ]
    )
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert [ln.split(":")[0] for ln in lines[:3]] == ["neighbour@1", "far@1", "degree@1"]
    assert "above far" in lines[0] and "above far" not in lines[1] and "above far" in lines[2]
    # the three retrains ran (their runs are on disk) without a line per epoch: one bar over them instead
    assert len(list((out / "retrains").glob("seed0_*_k1/run/config.json"))) == 3
    assert "epoch 1:" not in res.stderr and "necessity seed 0 degree k=1" in res.stderr
    assert json.loads((out / "necessity.json").read_text())["summary"].keys() == {"neighbour@1", "far@1", "degree@1"}


def test_explain_method_relatif_is_tracin_over_root_self_influence(tiny_umls, umls_dir, tmp_path):
    import csv

    from tests.conftest import run_cli

    (tmp_path / "t.txt").write_text("".join((umls_dir / "test.txt").read_text().splitlines(True)[:2]))
    base = [
        "explain",
        "--model-dir",
        tiny_umls,
        "--train",
        umls_dir / "train.txt",
        "--test-triples",
        tmp_path / "t.txt",
        "--device",
        "cpu",
        "--checkpoints",
        "final",
        "--n-hops",
        "1",
    ]
    r = run_cli(base + ["-o", tmp_path / "rel", "--method", "relatif", "--loss", "score"])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(open(next((tmp_path / "rel").glob("triple_000_*.csv")))))
    got = np.array([float(x["MethodScore"]) for x in rows])
    ref = np.array([float(x["TracInScore"]) / np.sqrt(float(x["SelfInfluence"])) for x in rows])
    np.testing.assert_allclose(got, ref, rtol=1e-4)
    assert np.all(np.diff(got) <= 0)  # ordered by the method
    old = run_cli(base + ["-o", tmp_path / "old", "--method", "exact"])  # the option's earlier meaning
    assert old.exit_code == 0, old.output
    header = next(csv.reader(open(next((tmp_path / "old").glob("triple_000_*.csv")))))
    assert header[-2:] == ["SelfInfluence", "Role"]
    bad = run_cli(base + ["-o", tmp_path / "bad", "--method", "magic"])
    assert bad.exit_code == 2 and "--method must be among" in bad.output


def networkx_walks(cand: np.ndarray, fact) -> np.ndarray:
    """Per candidate (u, r, v): the shortest head–tail walk through it in the candidate graph
    (networkx BFS), min(d(h,u) + 1 + d(v,t), d(h,v) + 1 + d(u,t)); inf when there is none."""
    import networkx as nx

    g = nx.Graph()
    g.add_edges_from((int(u), int(v)) for u, _, v in cand if u != v)
    dh = nx.single_source_shortest_path_length(g, int(fact[0])) if int(fact[0]) in g else {}
    dt = nx.single_source_shortest_path_length(g, int(fact[2])) if int(fact[2]) in g else {}
    d = lambda dist, x: dist.get(int(x), np.inf)
    return np.array([min(d(dh, u) + 1 + d(dt, v), d(dh, v) + 1 + d(dt, u)) for u, _, v in cand])


def test_path_lengths_equal_networkx_on_random_graphs():
    """ranking.path_lengths (scipy BFS) against networkx on random multigraphs with self-loops,
    isolated heads/tails and head == tail."""
    from tracegraph.kg.explain.ranking import path_lengths

    rng = np.random.default_rng(0)
    for _ in range(60):
        n = int(rng.integers(2, 30))
        cand = np.stack([rng.integers(0, n, 50), np.zeros(50, np.int64), rng.integers(0, n, 50)], 1)[
            : rng.integers(1, 50)
        ]
        fact = (int(rng.integers(0, n + 2)), 0, int(rng.integers(0, n + 2)))  # n, n+1: not in the graph
        np.testing.assert_array_equal(path_lengths(cand[:, [0, 2]], fact[0], fact[2]), networkx_walks(cand, fact))


def test_tracin_path_orders_by_networkx_path_shell_then_tracin(tiny_umls, umls_dir):
    """tracin-path: candidates on a shorter head–tail path (networkx BFS on the candidate graph)
    come first; within a shell, higher TracIn first; the fact itself last."""

    from tracegraph.kg.explain.ranking import ranked_order
    from tracegraph.kg.model.model_io import load_model

    lm = load_model(tiny_umls)
    train_ids = encode_triples(read_labeled_triples(umls_dir / "train.txt"), lm.entities, lm.relations)
    facts = encode_triples(read_labeled_triples(umls_dir / "test.txt"), lm.entities, lm.relations)[:2]
    subsets = [
        np.flatnonzero(np.isin(train_ids[:, 0], f[[0, 2]]) | np.isin(train_ids[:, 2], f[[0, 2]]))[:60] for f in facts
    ]
    ckpts = sorted((tiny_umls / "checkpoints").glob("epoch_*.pt"))
    keys = method_keys_all(
        ["tracin-path", "tracin"],
        model=lm.model,
        checkpoints=ckpts,
        train_ids=train_ids,
        facts=facts,
        subsets=subsets,
        known=None,
        opts=MethodOptions(),
        device=torch.device("cpu"),
    )
    for j, (f, rows) in enumerate(zip(facts, subsets)):
        shell = networkx_walks(train_ids[rows], f)
        tracin = np.asarray(keys["tracin"][j][0])
        got = ranked_order(keys["tracin-path"][j], np.arange(len(rows)))
        # expected: finite shells ascending, then no path; inside, TracIn descending
        exp = sorted(range(len(rows)), key=lambda i: (np.isneginf(tracin[i]), shell[i], -tracin[i], i))
        assert np.isfinite(shell).any() and len(set(shell[np.isfinite(shell)])) > 1  # the test sees several shells
        assert list(got) == exp


def _margin_reference(run_dir, train_ids, facts, rivals, rows, loss):
    """[facts, rows] Σ_k η_k ⟨g_train, g(fact)⟩ and the same with g(fact) − g(rival), float64, one
    backward per triple (the reference engine)."""
    ckpts = sorted((run_dir / "checkpoints").glob("epoch_*.pt"))
    tracin, margin = np.zeros((len(facts), len(rows))), np.zeros((len(facts), len(rows)))
    for p in ckpts:
        payload = load_checkpoint(p)
        model = build_model(payload, p).double().eval()
        layers = select_layers(model, "all")
        g_train = autograd_gradients(model, torch.as_tensor(train_ids[rows]), loss, 0.1, layers).numpy()
        g_fact = autograd_gradients(model, torch.as_tensor(facts), loss, 0.1, layers).numpy()
        g_rival = autograd_gradients(model, torch.as_tensor(rivals), loss, 0.1, layers).numpy()
        tracin += float(payload["lr"]) * g_fact @ g_train.T
        margin += float(payload["lr"]) * (g_fact - g_rival) @ g_train.T
    return tracin, margin


def _brute_force_rival(model, known, fact, head=False) -> int:
    """The best-scored answer of the fact's query on one side that is neither its answer nor known true."""
    scores, keep, answer = _brute_force_side(model, known, fact, head)
    keep[answer] = False
    return int(np.flatnonzero(keep)[scores[keep].argmax()])


@pytest.mark.parametrize("loss,head", [("score", False), ("logit", False), ("logit", True)])
def test_tracin_margin_equals_float64_brute_force_against_the_filtered_rival(tiny_umls, umls_dir, loss, head):
    """tracin-margin = Σ_k η_k ⟨g_train, g(h,r,t) − g(rival)⟩, the rival (h,r,t*) with t* the best-scored
    tail that is neither t nor a known true tail — on the head side (h*,r,t), h* the best answer to
    (t, r⁻¹, ?) — found here by scoring every entity one triple at a time."""
    from tracegraph.kg.explain.rivals import competitors
    from tracegraph.kg.model.model_io import load_model

    lm = load_model(tiny_umls)
    train_ids = encode_triples(read_labeled_triples(umls_dir / "train.txt"), lm.entities, lm.relations)
    facts = encode_triples(read_labeled_triples(umls_dir / "test.txt"), lm.entities, lm.relations)[:3]
    known = KnownTails([with_reciprocals(train_ids, len(lm.relations))], lm.model.config.num_relation_rows)
    side = np.full(len(facts), head)
    rivals = competitors(lm.model, facts, known, side)
    for f, rival in zip(facts, rivals):
        want = f.copy()
        want[0 if head else 2] = _brute_force_rival(lm.model, known, f, head)
        assert list(rival) == list(want)
    subsets = [np.arange(0, 30), np.arange(20, 50), np.array([7, 300, 800])]
    ckpts = sorted((tiny_umls / "checkpoints").glob("epoch_*.pt"))
    keys = method_keys_all(
        ["tracin-margin"],
        model=lm.model,
        checkpoints=ckpts,
        train_ids=train_ids,
        facts=facts,
        subsets=subsets,
        known=known,
        opts=MethodOptions(loss=loss),
        device=torch.device("cpu"),
        head_side=side,
    )
    union = np.unique(np.concatenate(subsets))
    _, ref = _margin_reference(tiny_umls, train_ids, facts, rivals, union, loss)
    for j, rows in enumerate(subsets):
        want = ref[j, np.searchsorted(union, rows)]
        np.testing.assert_allclose(keys["tracin-margin"][j][0], want, rtol=0, atol=1e-4 * np.abs(want).max())


def test_one_default_method_everywhere():
    """The CLI repeats the default as literals (it imports no torch before parsing)."""
    from tracegraph.cli.explain import DEFAULT_METHOD
    from tracegraph.cli.necessity import necessity_cmd as necessity
    from tracegraph.kg.explain.methods import DEFAULT_EXPLAINER
    from tracegraph.kg.explain.tracin.explain import ExplainConfig
    from tracegraph.kg.demo.pipeline import Preset
    import inspect

    assert DEFAULT_EXPLAINER == "tracin-margin-path" == DEFAULT_METHOD
    from tracegraph.kg.explain.methods import default_method

    assert ExplainConfig("m", "t", "x", "o").method is None  # resolved by run_explain from the loss
    assert (
        default_method("logit") == default_method("score") == DEFAULT_EXPLAINER
        and default_method("train-loss") == "tracin"
    )
    assert (
        NecessityConfig("m", "t", "o").methods == [DEFAULT_EXPLAINER]
        and Preset().necessity_methods[0] == DEFAULT_EXPLAINER
    )
    assert inspect.signature(necessity).parameters["method"].default.default == DEFAULT_EXPLAINER


def test_tracin_margin_path_orders_by_networkx_shell_then_brute_force_margin(tiny_umls, umls_dir):
    """tracin-margin-path: shells of the networkx head–tail walk with a direct edge counted as a
    two-edge walk (no walk last), the float64 brute-force margin inside each; the fact itself last."""
    from tracegraph.kg.explain.ranking import ranked_order
    from tracegraph.kg.explain.rivals import competitors
    from tracegraph.kg.model.model_io import load_model

    lm = load_model(tiny_umls)
    train_ids = encode_triples(read_labeled_triples(umls_dir / "train.txt"), lm.entities, lm.relations)
    facts = encode_triples(read_labeled_triples(umls_dir / "test.txt"), lm.entities, lm.relations)
    direct = lambda f: np.isin(train_ids[:, [0, 2]], f[[0, 2]]).all(1) & (train_ids[:, 0] != train_ids[:, 2])
    facts = facts[[j for j, f in enumerate(facts) if direct(f).sum() >= 2][:3]]  # facts with direct head–tail edges
    known = KnownTails([with_reciprocals(train_ids, len(lm.relations))], lm.model.config.num_relation_rows)
    # candidates touching the fact (the necessity test's) plus far rows, and the fact itself where it is a training row
    subsets = [
        np.unique(
            np.concatenate(
                [
                    np.flatnonzero(np.isin(train_ids[:, 0], f[[0, 2]]) | np.isin(train_ids[:, 2], f[[0, 2]]))[:40],
                    np.arange(100, 130),
                ]
            )
        )
        for f in facts
    ]
    ckpts = sorted((tiny_umls / "checkpoints").glob("epoch_*.pt"))
    keys = method_keys_all(
        ["tracin-margin-path"],
        model=lm.model,
        checkpoints=ckpts,
        train_ids=train_ids,
        facts=facts,
        subsets=subsets,
        known=known,
        opts=MethodOptions(),
        device=torch.device("cpu"),
    )
    union = np.unique(np.concatenate(subsets))
    _, ref = _margin_reference(tiny_umls, train_ids, facts, competitors(lm.model, facts, known), union, "logit")
    seen, merged_differs = set(), False
    for j, (f, rows) in enumerate(zip(facts, subsets)):
        walk = networkx_walks(train_ids[rows], f)
        shell = np.where(np.isfinite(walk), np.maximum(walk, 2), np.inf)
        margin = ref[j, np.searchsorted(union, rows)]
        is_fact = (train_ids[rows] == f).all(1)
        got = ranked_order(keys["tracin-margin-path"][j], np.arange(len(rows)))
        exp = sorted(range(len(rows)), key=lambda i: (is_fact[i], shell[i], -margin[i], i))
        assert list(got) == exp
        seen |= set(shell.tolist())
        unmerged = sorted(range(len(rows)), key=lambda i: (is_fact[i], walk[i], -margin[i], i))
        merged_differs = merged_differs or unmerged != exp
    assert {2.0, 3.0} <= seen and len(seen) >= 3 and merged_differs  # direct edges do not simply come first


@pytest.mark.parametrize("explainer,side", [(None, "tail"), ("tracin-margin", "tail"), (None, "head")])
def test_explain_default_is_the_logit_margin_against_brute_force(tiny_umls, umls_dir, tmp_path, explainer, side):
    """tracin-margin (--loss logit): TracInScore is the fact's own TracIn, MethodScore its margin
    over the rival filtered by the run's train/valid/test files, rows sorted by MethodScore; with
    --top-k the k strongest positive margins and the k most negative. `explain`'s default,
    tracin-margin-path: the same scores, HeadTailWalk = the networkx walk, rows sorted by shell then
    margin; with --top-k the first k positive margins of that order and the k most negative. --side head: the rival is the
    best filtered head h* of (t, r⁻¹, ?), the margin TracIn(h,r,t) − TracIn(h*,r,t)."""
    import csv

    from tracegraph.kg.explain.tracin.explain import ExplainConfig
    from tracegraph.kg.outputs import explain_files
    from tracegraph.kg.model.model_io import load_model

    lm = load_model(tiny_umls)
    all_lines = (umls_dir / "train.txt").read_text().splitlines()
    tests = (umls_dir / "test.txt").read_text().splitlines()[:2]
    ends = {x for line in tests for x in line.split("\t")[::2]}
    near = [line for line in all_lines if set(line.split("\t")[::2]) & ends][::8]  # head–tail walks to shell
    lines = list(dict.fromkeys(all_lines[::50] + near))  # about 160 training triples
    (tmp_path / "train.txt").write_text("\n".join(lines) + "\n")
    (tmp_path / "test.txt").write_text("\n".join(tests) + "\n")
    full_train = encode_triples(read_labeled_triples(umls_dir / "train.txt"), lm.entities, lm.relations)
    train_ids = encode_triples(read_labeled_triples(tmp_path / "train.txt"), lm.entities, lm.relations)
    facts = encode_triples(read_labeled_triples(tmp_path / "test.txt"), lm.entities, lm.relations)
    # the run's filter: its train and test files (tiny_umls has no valid file)
    filt = np.concatenate(
        [full_train, encode_triples(read_labeled_triples(umls_dir / "test.txt"), lm.entities, lm.relations)]
    )
    rivals = facts.copy()
    known = KnownTails([with_reciprocals(filt, len(lm.relations))], lm.model.config.num_relation_rows)
    head = side == "head"
    rivals[:, 0 if head else 2] = [_brute_force_rival(lm.model, known, f, head) for f in facts]
    tracin, margin = _margin_reference(tiny_umls, train_ids, facts, rivals, np.arange(len(train_ids)), "logit")
    extra = ({} if explainer is None else {"method": explainer}) | ({"side": side} if head else {})
    for top_k in (None, 3):
        out = tmp_path / f"out{top_k}"
        summary = explain_files(
            ExplainConfig(
                model_dir=str(tiny_umls),
                train=str(tmp_path / "train.txt"),
                test_triples=str(tmp_path / "test.txt"),
                output_dir=str(out),
                top_k=top_k,
                device="cpu",
                batch_size=32,
                **extra,
            )
        )
        assert summary["method"] == (explainer or "tracin-margin-path") and summary["loss"] == "logit"
        assert summary["explained"] == 2
        for j, path in enumerate(sorted(out.glob("*_tracin.csv"))):
            with open(path, newline="") as f:
                rows = list(csv.reader(f))
            walked = explainer is None
            assert rows[0][14:] == (["MethodScore", "HeadTailWalk", "Role"] if walked else ["MethodScore", "Role"])
            ids = [(lm.entities.id(r[6]), lm.relations.id(r[8]), lm.entities.id(r[10])) for r in rows[1:]]
            col = [next(i for i, x in enumerate(map(tuple, train_ids.tolist())) if x == tri) for tri in ids]
            got_m, got_t = np.array([float(r[14]) for r in rows[1:]]), np.array([float(r[12]) for r in rows[1:]])
            scale = np.abs(margin[j]).max()
            np.testing.assert_allclose(got_m, margin[j, col], rtol=0, atol=1e-4 * scale)
            np.testing.assert_allclose(got_t, tracin[j, col], rtol=0, atol=1e-4 * np.abs(tracin[j]).max())
            by_margin = sorted(range(len(train_ids)), key=lambda i: (-margin[j, i], i))
            # with --top-k: the first k of the order with a positive margin, then the k most negative
            against = sorted((i for i in range(len(train_ids)) if margin[j, i] < 0), key=lambda i: (margin[j, i], i))
            if not walked:
                want = (
                    by_margin if top_k is None else [i for i in by_margin if margin[j, i] > 0][:top_k] + against[:top_k]
                )
            else:
                walk = networkx_walks(train_ids, facts[j])
                assert [float(r[15]) for r in rows[1:]] == walk[col].tolist()
                shell = np.where(np.isfinite(walk), np.maximum(walk, 2), np.inf)
                order = sorted(range(len(train_ids)), key=lambda i: (shell[i], -margin[j, i], i))
                assert len(set(shell[np.isfinite(shell)])) > 1 and order[: top_k or 20] != by_margin[: top_k or 20]
                want = order if top_k is None else [i for i in order if margin[j, i] > 0][:top_k] + against[:top_k]
            assert col == want
            assert [r[-1] for r in rows[1:]] == ["opponent" if margin[j, i] < 0 else "proponent" for i in want]
            # the JSON names what the margin is taken against: the brute-force rival and both logits
            meta = json.loads(path.with_suffix(".json").read_text())
            scores, _, answer = _brute_force_side(lm.model, known, facts[j], head)
            rival = int(rivals[j, 0 if head else 2])
            s_fact, s_rival = scores[answer], scores[rival]
            assert meta["side"] == side and meta["rival"]["side"] == side
            assert meta["rival"][side] == lm.entities.labels[rival]
            assert meta["rival"]["logit"] == pytest.approx(s_rival, abs=1e-5)
            assert meta["rival"]["logit_margin"] == pytest.approx(s_fact - s_rival, abs=1e-5)
    if explainer is None and not head:  # a filtered subgraph per test triple: walks inside it, not the whole graph
        sub = {tuple(f[[0, 2]]): np.flatnonzero(np.isin(train_ids[:, [0, 2]], f[[0, 2]]).any(1))[::2] for f in facts}
        explain_files(
            ExplainConfig(
                model_dir=str(tiny_umls),
                train=str(tmp_path / "train.txt"),
                test_triples=str(tmp_path / "test.txt"),
                output_dir=str(tmp_path / "sub"),
                device="cpu",
                batch_size=32,
            ),
            lambda h, t: sub[(h, t)],
        )
        for f, path in zip(facts, sorted((tmp_path / "sub").glob("*_tracin.csv"))):
            rows = list(csv.reader(open(path, newline="")))[1:]
            ids = [(lm.entities.id(r[6]), lm.relations.id(r[8]), lm.entities.id(r[10])) for r in rows]
            cand = train_ids[sub[tuple(f[[0, 2]])]]
            walk = dict(zip(map(tuple, cand.tolist()), networkx_walks(cand, f)))
            assert len(rows) == len(cand) and [float(r[15]) for r in rows] == [walk[x] for x in ids]


def test_head_side_needs_reciprocal_relations(umls_dir, tmp_path):
    """`explain --side head` and `fidelity necessity --sides head|both` on a run without reciprocal
    relations stop with a one-line error before any work; a side that is no side, too."""
    from tracegraph.kg.explain.tracin.explain import ExplainConfig
    from tracegraph.kg.outputs import explain_files

    run = tmp_path / "run"
    train(
        TrainConfig(
            train=str(umls_dir / "train.txt"),
            test=str(umls_dir / "test.txt"),
            output_dir=str(run),
            epochs=1,
            batch_size=512,
            model=dict(TINY, reciprocal=False),
        )
    )
    common = dict(model_dir=str(run), train=str(umls_dir / "train.txt"), device="cpu")
    with pytest.raises(TracegraphError, match="side head needs a model with reciprocal relations"):
        explain_files(
            ExplainConfig(
                **common, test_triples=str(umls_dir / "test.txt"), output_dir=str(tmp_path / "x"), side="head"
            )
        )
    with pytest.raises(TracegraphError, match="side must be tail or head"):
        explain_files(
            ExplainConfig(
                **common, test_triples=str(umls_dir / "test.txt"), output_dir=str(tmp_path / "x"), side="both"
            )
        )
    for sides in ("head", "both"):
        with pytest.raises(TracegraphError, match=f"--sides {sides}: head-side facts need a model with reciprocal"):
            run_necessity(NecessityConfig(**common, output_dir=str(tmp_path / "n"), sides=sides))
    assert not (tmp_path / "x").exists() and not (tmp_path / "n").exists()


def test_summary_over_seeds_carries_counts_intervals_and_the_excess_over_the_floors():
    from tracegraph.kg.explain.necessity_summary import across_seeds

    ref = np.ones(4)
    per_seed = {}
    for seed, (far, arm) in {"0": ([1.0, 1, 1, 2], [3.0, 2, 1, 2]), "1": ([1.0, 1, 1, 1], [5.0, 1, 1, 1])}.items():
        far, arm = np.array(far), np.array(arm)
        arms = {
            "reference": {"ranks": ref.tolist()},
            "far@4": dict(
                summarize_arm(ref, far, 200, 0), k=4, ranks=far.tolist(), triples_removed=8, removed_at_fact=0.0
            ),
            "neighbour@4": dict(
                summarize_arm(ref, ref, 200, 0), k=4, ranks=ref.tolist(), triples_removed=8, removed_at_fact=1.0
            ),
            "m@4": dict(
                summarize_arm(ref, arm, 200, 0), k=4, ranks=arm.tolist(), triples_removed=8, removed_at_fact=2.0
            ),
        }
        add_above(arms, [4], 200, 0)
        per_seed[seed] = arms
    out = across_seeds(per_seed, ["far", "neighbour", "m"], [4])
    m = out["m@4"]
    # seed 0: m loses facts 0, 1, 3, far loses 3 (above far 2/4); seed 1: m loses 0, far none (1/4)
    assert m["flipped"] == {"mean": 2.0, "min": 1.0, "max": 3.0}
    assert m["above_far_hits@1"]["mean"] == pytest.approx(3 / 8)
    assert m["delta_hits@1_ci95_first_seed"] == per_seed["0"]["m@4"]["delta_hits@1_ci95"]
    assert m["delta_mrr_ci95_first_seed"] == per_seed["0"]["m@4"]["delta_mrr_ci95"]
    lo, hi = m["above_far_hits@1_ci95_first_seed"]
    assert 0.0 <= lo < 0.5 < hi <= 1.0  # per fact 1, 1, 0, 0: never negative
    assert "above_far_hits@1" not in out["far@4"] and out["far@4"]["flipped"]["max"] == 1.0
    # neighbour loses nothing: above it, m's excess is its whole drop (3/4 and 1/4)
    assert m["above_neighbour_hits@1"]["mean"] == pytest.approx(m["delta_hits@1"]["mean"]) == pytest.approx(0.5)
    assert m["above_neighbour_hits@1_ci95_first_seed"] == per_seed["0"]["m@4"]["above_neighbour_hits@1_ci95"]
    assert "above_neighbour_hits@1" not in out["neighbour@4"] and "above_far_hits@1" in out["neighbour@4"]
