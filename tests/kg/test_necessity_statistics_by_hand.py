"""The necessity test's statistics and report, held to references worked out here: the bootstrap
interval against the exact bootstrap distribution (every resample enumerated), float64 arithmetic
whatever the input dtype, seeds that make intervals reproducible, the edges of the rank-1 counts and
of the splits, the summary over seeds, and ``necessity.md`` written out by hand."""

import itertools

import numpy as np
import pytest

from tracegraph.kg.explain.necessity_summary import (
    across_seeds,
    add_above,
    add_margin_halves,
    add_split,
    bootstrap_mean,
    necessity_markdown,
    summarize_arm,
)

# --------------------------------------------------------------------------- bootstrap


def test_interval_bounds_are_the_2_5_and_97_5_percent_quantiles_of_the_exact_bootstrap():
    v = np.array([0.0, 1.0, 2.0, 4.0, 8.0])
    # all 5^5 equally likely resamples: their means are the exact bootstrap distribution
    means = np.array([sum(c) / 5 for c in itertools.product(v, repeat=5)])

    def quantile(q):  # the smallest mean whose cumulative share reaches q
        return min(x for x in set(means) if np.mean(means <= x) >= q)

    # 2.5 % falls inside the step at 0.8 (1.6 % .. 3.2 %), 97.5 % inside the one at 5.6 (96.4 % ..
    # 97.7 %); 100 000 resamples put the empirical quantiles on the same steps
    m, lo, hi = bootstrap_mean(v, 100_000, 0)
    assert (m, lo, hi) == (3.0, quantile(0.025), quantile(0.975)) == (3.0, 0.8, 5.6)


def test_one_fact_has_its_own_value_as_mean_and_both_bounds():
    assert bootstrap_mean(np.array([0.7]), 20, 0) == (0.7, 0.7, 0.7)


def test_every_fact_can_be_drawn_into_a_resample():
    # only fact 0 is nonzero: a resample of 4 misses it with probability (3/4)^4 ≈ 0.32, so the upper
    # bound is a resample holding it (at least 1/4); never drawing fact 0 would make every mean 0
    m, lo, hi = bootstrap_mean(np.array([1.0, 0.0, 0.0, 0.0]), 2000, 0)
    assert m == 0.25 and lo == 0.0 and hi >= 0.25


def test_float32_values_are_averaged_in_float64():
    # in float32, 1e8 + 1 == 1e8: the mean would be 0 instead of 1/3
    v = np.array([1e8, 1.0, -1e8], np.float32)
    assert bootstrap_mean(v, 10, 0)[0] == pytest.approx(1 / 3, rel=1e-12)


def test_the_same_seed_gives_the_same_intervals_everywhere():
    v = np.arange(20.0) ** 2
    assert bootstrap_mean(v, 50, 3) == bootstrap_mean(v, 50, 3)
    base, after = np.ones(20), np.arange(1.0, 21.0)
    s1, s2 = summarize_arm(base, after, 50, 3), summarize_arm(base, after, 50, 3)
    assert s1["delta_hits@1_ci95"] == s2["delta_hits@1_ci95"] and s1["delta_mrr_ci95"] == s2["delta_mrr_ci95"]
    assert s1["delta_mrr_ci95"][0] < s1["delta_mrr_ci95"][1]  # a real interval, not a constant

    def arms():
        far = [1.0] * 10 + [2.0] * 10
        arm = [float(i % 3 + 1) for i in range(20)]
        ref = {"reference": {"ranks": [1.0] * 20}}
        return ref | {
            "far@2": {"k": 2, "ranks": far},
            "neighbour@2": {"k": 2, "ranks": far},
            "m@2": {"k": 2, "ranks": arm},
        }

    a1, a2 = arms(), arms()
    add_above(a1, [2], 50, 3)
    add_above(a2, [2], 50, 3)
    assert a1["m@2"]["above_far_hits@1_ci95"] == a2["m@2"]["above_far_hits@1_ci95"]
    assert a1["m@2"]["above_far_hits@1_ci95"][0] < a1["m@2"]["above_far_hits@1_ci95"][1]


# --------------------------------------------------------------------------- one arm


def test_flipped_and_gained_count_only_the_first_place():
    # ranks 2 -> 3 and 3 -> 2 change neither count; 1 -> 2 is a flip, 2 -> 1 a gain
    s = summarize_arm(np.array([2.0, 3.0, 1.0, 2.0]), np.array([3.0, 2.0, 2.0, 1.0]), 20, 0)
    assert (s["flipped"], s["gained"]) == (1, 1)


def test_float32_ranks_give_float64_reciprocals():
    # float32(1/3) = 0.3333333432...: a float32 reciprocal would miss these by ~1e-8
    s = summarize_arm(np.array([3.0], np.float32), np.array([1.0], np.float32), 10, 0)
    assert s["delta_mrr"] == pytest.approx(1 / 3 - 1, rel=1e-12, abs=0)
    s = summarize_arm(np.array([1.0], np.float32), np.array([3.0], np.float32), 10, 0)
    assert s["mrr"] == pytest.approx(1 / 3, rel=1e-12, abs=0)
    assert s["delta_mrr"] == pytest.approx(1 - 1 / 3, rel=1e-12, abs=0)


# --------------------------------------------------------------------------- splits


def test_split_reads_the_reference_hits_and_leaves_the_reference_alone():
    # reference: facts 0, 1 at rank 1, fact 2 at rank 2 (no hit); the arm loses fact 0
    arms = {"reference": {"ranks": [1.0, 1.0, 2.0]}, "m@4": {"ranks": [2.0, 1.0, 2.0]}}
    add_split(arms, np.array([True, False, False]), ("tail", "head"))
    assert arms["m@4"]["delta_hits@1_tail"] == 1.0  # fact 0: 1 - 0
    assert arms["m@4"]["delta_hits@1_head"] == 0.0  # facts 1, 2: (1 + 0)/2 - (1 + 0)/2
    assert set(arms["reference"]) == {"ranks"}


def test_split_mask_may_be_given_as_zeros_and_ones():
    arms = {"reference": {"ranks": [1.0] * 4}, "m@4": {"ranks": [1.0, 1.0, 1.0, 2.0]}}
    add_split(arms, [1, 0, 0, 1], ("tail", "head"))  # facts 0, 3 on the tail side; fact 3 lost
    assert arms["m@4"]["delta_hits@1_tail"] == 0.5 and arms["m@4"]["delta_hits@1_head"] == 0.0


def test_a_margin_equal_to_the_median_is_in_the_low_half():
    # odd count: the median 0.5 is fact 1's own margin, so the low half is facts 0 and 1
    arms = {"reference": {"ranks": [1.0] * 3}, "m@4": {"ranks": [1.0, 2.0, 1.0]}}
    add_margin_halves(arms, np.array([0.1, 0.5, 0.9]))
    assert arms["m@4"]["delta_hits@1_low_margin"] == 0.5 and arms["m@4"]["delta_hits@1_high_margin"] == 0.0


def test_adjacent_float32_margins_still_split_in_two():
    # two neighbouring float32 numbers: their float64 midpoint lies strictly between them (the
    # float32 one rounds up to the larger, which would put both facts in the low half)
    a = np.float32(1 + 2**-23)
    b = np.nextafter(a, np.float32(2))
    arms = {"reference": {"ranks": [1.0, 1.0]}, "m@4": {"ranks": [2.0, 1.0]}}
    add_margin_halves(arms, np.array([a, b], np.float32))
    assert arms["m@4"]["delta_hits@1_low_margin"] == 1.0 and arms["m@4"]["delta_hits@1_high_margin"] == 0.0


# --------------------------------------------------------------------------- over seeds


def _seed_arm(d, ci, above_ci, removed, at_fact):
    return {
        "delta_hits@1": d,
        "delta_mrr": d / 2,
        "hits@1": 1 - d,
        "mrr": 0.5,
        "mean_rank": 2.0,
        "flipped": 1,
        "gained": 0,
        "triples_removed": removed,
        "removed_at_fact": at_fact,
        "delta_hits@1_ci95": ci,
        "delta_mrr_ci95": ci,
        "above_far_hits@1": d / 4,
        "above_far_hits@1_ci95": above_ci,
    }


def test_one_seed_summary_carries_its_own_intervals_and_counts():
    out = across_seeds({"7": {"m@2": _seed_arm(0.5, [0.25, 0.75], [0.0, 0.5], 6, 1.5)}}, ["m"], [2])["m@2"]
    assert out["delta_hits@1"] == {"mean": 0.5, "min": 0.5, "max": 0.5}
    assert out["above_far_hits@1"] == {"mean": 0.125, "min": 0.125, "max": 0.125}
    assert out["above_far_hits@1_ci95_first_seed"] == [0.0, 0.5]
    assert (out["triples_removed"], out["removed_at_fact"]) == (6, 1.5)


def test_summary_takes_the_first_seeds_intervals_and_the_mean_removed_at_fact():
    per_seed = {
        "0": {"m@2": _seed_arm(0.5, [0.25, 0.75], [0.0, 0.5], 6, 1.0)},
        "1": {"m@2": _seed_arm(0.25, [0.0, 0.5], [0.1, 0.2], 8, 2.0)},
    }
    out = across_seeds(per_seed, ["m"], [2])["m@2"]
    assert out["above_far_hits@1_ci95_first_seed"] == [0.0, 0.5]
    assert out["triples_removed"] == 6  # the first seed's count
    assert out["removed_at_fact"] == 1.5  # (1 + 2) / 2


# --------------------------------------------------------------------------- necessity.md


HEADER = (
    "| arm | k | ΔH@1 (95 % CI, first seed) | above far (95 % CI) | above neighbour (95 % CI) "
    "| ΔH@1 low / high-margin half | ΔH@1 tail / head side | ΔMRR | H@1 after | mean rank after "
    "| removed (at each fact) |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|\n"
)
INTRO = (
    "Remove every fact's top-k explanation triples at once, retrain once, rank the facts again "
    "(docs/demo.md, 'Necessity').\n\n"
)


def _stat(mean, lo=None, hi=None):
    return {"mean": mean, "min": mean if lo is None else lo, "max": mean if hi is None else hi}


def _summary_entry(**extra):
    e = {
        "delta_hits@1": _stat(0.25, 0.125, 0.375),
        "delta_hits@1_ci95_first_seed": [0.05, 0.45],
        "delta_mrr": _stat(0.125),
        "hits@1": _stat(0.5),
        "mean_rank": _stat(2.25),
        "triples_removed": 12,
        "removed_at_fact": 1.5,
    }
    e.update(extra)
    return e


def test_necessity_markdown_written_out_by_hand():
    res = {
        "n_facts": 3,
        "seeds": {"0": {}, "1": {}},
        "summary": {
            "tracin-margin@4": _summary_entry(
                **{
                    "above_far_hits@1": _stat(0.125),
                    "above_far_hits@1_ci95_first_seed": [0.0, 0.25],
                    "above_neighbour_hits@1": _stat(-0.25),
                    "above_neighbour_hits@1_ci95_first_seed": [-0.5, 0.0],
                    "delta_hits@1_low_margin": _stat(0.5),
                    "delta_hits@1_high_margin": _stat(0.0),
                    "delta_hits@1_tail": _stat(0.3),
                    "delta_hits@1_head": _stat(0.2),
                }
            ),
            "far@4": _summary_entry(
                **{
                    "delta_hits@1": _stat(0.1, 0.0, 0.2),
                    "delta_hits@1_ci95_first_seed": [-0.1, 0.3],
                    "delta_mrr": _stat(0.05),
                    "hits@1": _stat(0.75),
                    "mean_rank": _stat(1.5),
                    "removed_at_fact": 0.5,
                }
            ),
        },
    }
    assert necessity_markdown(res) == (
        "## Necessity (3 facts, seeds 0, 1)\n\n"
        + INTRO
        + HEADER
        + "| tracin-margin | 4 | 0.250 [0.125, 0.375] (0.050–0.450) | 0.125 (0.000–0.250) | -0.250 (-0.500–0.000) "
        "| 0.500 / 0.000 | 0.300 / 0.200 | 0.125 | 0.500 | 2.25 | 12 (1.5) |\n"
        "| far | 4 | 0.100 [0.000, 0.200] (-0.100–0.300) | — | — | — | — | 0.050 | 0.750 | 1.50 | 12 (0.5) |\n"
    )


def test_necessity_markdown_of_one_seed_has_no_spread():
    res = {
        "n_facts": 2,
        "seeds": {"5": {}},
        "summary": {
            "neighbour@1": _summary_entry(**{"delta_hits@1_tail": _stat(1.0), "delta_hits@1_head": _stat(0.0)})
        },
    }
    assert necessity_markdown(res) == (
        "## Necessity (2 facts, seeds 5)\n\n"
        + INTRO
        + HEADER
        + "| neighbour | 1 | 0.250 (0.050–0.450) | — | — | — | 1.000 / 0.000 | 0.125 | 0.500 | 2.25 | 12 (1.5) |\n"
    )


def test_cli_summary_lines_say_each_arms_excess_over_the_floors_it_has():
    from tracegraph.cli.necessity import res_lines

    entry = _summary_entry(**{"above_far_hits@1": _stat(0.125), "above_neighbour_hits@1": _stat(-0.25)})
    far = _summary_entry(**{"delta_hits@1": _stat(0.1), "triples_removed": 8})
    neighbour = _summary_entry(**{"above_far_hits@1": _stat(0.05)})
    got = res_lines({"summary": {"m@4": entry, "neighbour@4": neighbour, "far@4": far}})
    assert got.splitlines() == [
        "m@4: ΔH@1 0.250 (+0.125 above far, -0.250 above neighbour), ΔMRR 0.125, 12 removed",
        "neighbour@4: ΔH@1 0.250 (+0.050 above far), ΔMRR 0.125, 12 removed",
        "far@4: ΔH@1 0.100, ΔMRR 0.125, 8 removed",
    ]
