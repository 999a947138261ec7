"""The necessity test's statistics, by simulation with fixed seeds: which facts it draws (rank-1
facts only, without replacement, uniformly), what its random arms draw from (by brute force),
and that its interval labelled 95 % covers a known mean 95 % of the time, 2.5 % missed each side."""

import numpy as np
import pytest

from tracegraph.kg.explain.grading import choose_facts
from tracegraph.kg.explain.necessity import arm_rows
from tracegraph.kg.explain.necessity_summary import across_seeds, bootstrap_mean, removed_at_fact, summarize_arm

# --------------------------------------------------------------------------- which facts


def test_facts_are_rank_one_drawn_without_replacement_in_file_order():
    ranks = np.array([1.0, 1.5, 1.0, 2.0, 1.0, 1.0, 7.0, 1.0, 1.0, 1.0, 0.5])  # 0.5: still "first"
    first = [i for i, r in enumerate(ranks) if r <= 1.0]  # the counting loop
    assert choose_facts(ranks, 100, 0).tolist() == first  # fewer than n: all of them
    assert choose_facts(ranks, len(first), 0).tolist() == first
    for seed in range(200):
        pick = choose_facts(ranks, 4, seed).tolist()
        assert len(pick) == len(set(pick)) == 4  # never repeats
        assert set(pick) <= set(first) and pick == sorted(pick)
    assert choose_facts(ranks, 4, 3).tolist() == choose_facts(ranks, 4, 3).tolist()  # seeded


def test_every_rank_one_fact_is_equally_likely_to_be_drawn():
    ranks = np.ones(10)
    ranks[[2, 7]] = 3.0  # 8 eligible facts, 3 drawn: each with probability 3/8
    seeds = 4000
    counts = np.zeros(10)
    for seed in range(seeds):
        counts[choose_facts(ranks, 3, seed)] += 1
    assert counts[[2, 7]].sum() == 0
    p = 3 / 8
    # 6 binomial standard deviations (0.046): numpy's own draws over seeds 0..3999 reach 4.9 for one
    # position; a draw that favours some facts (the first n, or with replacement) is far outside
    margin = 6 * np.sqrt(p * (1 - p) / seeds)
    assert np.all(np.abs(counts[ranks <= 1] / seeds - p) < margin), counts / seeds


# --------------------------------------------------------------------------- random arms


TRAIN = np.array(
    [
        [0, 0, 1],
        [0, 1, 2],
        [3, 0, 1],
        [2, 1, 3],
        [4, 0, 5],
        [5, 1, 6],
        [1, 2, 0],
        [6, 0, 4],
        [7, 1, 8],
        [8, 0, 9],
        [2, 2, 2],
        [0, 0, 1],
    ]
)  # the fact (0, 0, 1) twice: rows 0 and 11


def test_far_arm_draws_from_exactly_the_rows_not_touching_the_fact():
    fact = (0, 0, 1)
    far_pool = {i for i, (h, _, t) in enumerate(TRAIN) if h not in (0, 1) and t not in (0, 1)}  # the loop
    for index in range(10):
        everything = arm_rows("far", TRAIN, fact, np.arange(len(TRAIN)), 50, seed=1, index=index)
        assert sorted(everything.tolist()) == sorted(far_pool)  # k above the pool: the whole pool, once each


def test_neighbour_arm_draws_from_its_candidates_never_the_fact_without_repeats():
    fact = (0, 0, 1)
    cands = np.array([0, 1, 2, 6, 11])  # offered the fact's own rows 0 and 11: never drawn
    for index in range(10):
        rows = arm_rows("neighbour", TRAIN, fact, cands, 50, seed=2, index=index)
        assert sorted(rows.tolist()) == [1, 2, 6]
    seen = set()
    for index in range(60):
        rows = arm_rows("neighbour", TRAIN, fact, cands, 2, seed=2, index=index)
        assert len(set(rows.tolist())) == 2
        seen.update(rows.tolist())
        # the k-draw is a prefix of the larger draw for the same fact (nested arms across k)
        assert rows.tolist() == arm_rows("neighbour", TRAIN, fact, cands, 3, 2, index)[:2].tolist()
    assert seen == {1, 2, 6}  # every candidate gets drawn at some fact position


# --------------------------------------------------------------------------- the interval


def _coverage(n_boot: int, reps: int, n: int, seed: int):
    """Facts' ΔH@1 values are -1, 0 or 1; mean 0.1 by construction."""
    rng = np.random.default_rng(seed)
    below = above = 0
    for r in range(reps):
        x = rng.choice([-1.0, 0.0, 1.0], size=n, p=[0.2, 0.5, 0.3])
        m, lo, hi = bootstrap_mean(x, n_boot, r)
        assert m == pytest.approx(x.mean())
        below += 0.1 < lo
        above += 0.1 > hi
    return below / reps, above / reps


def test_the_95_percent_interval_covers_a_known_mean_95_percent_of_the_time():
    reps = 1000
    miss_low, miss_high = _coverage(n_boot=400, reps=reps, n=80, seed=0)
    cover = 1 - miss_low - miss_high
    # binomial margins, 3 standard deviations: 95 % ± 2.1 points; each tail 2.5 % ± 1.5 points
    assert abs(cover - 0.95) < 3 * np.sqrt(0.95 * 0.05 / reps), cover
    for tail in (miss_low, miss_high):
        assert abs(tail - 0.025) < 3 * np.sqrt(0.025 * 0.975 / reps), (miss_low, miss_high)


def test_interval_of_no_facts_and_of_constant_values():
    assert all(np.isnan(bootstrap_mean(np.array([]), 10, 0)))
    assert bootstrap_mean(np.full(7, 0.25), 50, 0) == (0.25, 0.25, 0.25)


# --------------------------------------------------------------------------- summaries by hand


def test_arm_summary_signs_and_values_by_hand():
    base = np.array([1.0, 1.0, 2.0, 4.0])
    after = np.array([2.0, 1.0, 1.0, 4.0])
    s = summarize_arm(base, after, 100, 0)
    # ΔH@1 = H@1 before − after = 2/4 − 2/4 = 0; ΔMRR = (1 + 1 + 1/2 + 1/4)/4 − (1/2 + 1 + 1 + 1/4)/4 = 0
    assert s["delta_hits@1"] == 0.0 and s["delta_mrr"] == pytest.approx(0.0)
    s = summarize_arm(base, np.array([3.0, 1.0, 2.0, 4.0]), 100, 0)  # only fact 0 lost its rank 1
    assert s["delta_hits@1"] == pytest.approx(0.25) and s["delta_mrr"] == pytest.approx((1 - 1 / 3) / 4)
    assert s["hits@1"] == 0.25 and s["mean_rank"] == pytest.approx(2.5)


def test_removed_triples_at_each_fact_by_hand():
    removed = np.array([[0, 0, 5], [6, 1, 1], [7, 0, 8], [2, 0, 9]])
    facts = np.array([[0, 0, 1], [2, 1, 3]])
    # fact (0, 1): rows 0 and 1 touch it -> 2; fact (2, 3): row 3 -> 1; mean 1.5
    assert removed_at_fact(removed, facts) == 1.5


def test_across_seeds_mean_min_max_by_hand():
    def arm(d, mrr, flipped):
        return {
            "delta_hits@1": d,
            "delta_mrr": mrr,
            "hits@1": 1 - d,
            "mrr": 0.5,
            "mean_rank": 2.0,
            "flipped": flipped,
            "gained": 0,
            "triples_removed": 3,
            "removed_at_fact": 1.0,
            "delta_hits@1_ci95": [d - 0.1, d + 0.1],
            "delta_mrr_ci95": [mrr - 0.1, mrr + 0.1],
        }

    per_seed = {"0": {"far@1": arm(0.1, 0.2, 1)}, "1": {"far@1": arm(0.3, 0.0, 3)}, "2": {"far@1": arm(0.2, 0.1, 2)}}
    e = across_seeds(per_seed, ["far"], [1])["far@1"]
    assert e["flipped"] == pytest.approx({"mean": 2.0, "min": 1.0, "max": 3.0})
    assert e["delta_hits@1"] == pytest.approx({"mean": 0.2, "min": 0.1, "max": 0.3})
    assert e["delta_mrr"] == pytest.approx({"mean": 0.1, "min": 0.0, "max": 0.2})
    assert e["delta_hits@1_ci95_first_seed"] == pytest.approx([0.0, 0.2])
