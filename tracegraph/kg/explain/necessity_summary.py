"""The necessity test's statistics and report.

ΔH@1 / ΔMRR with bootstrap intervals, the excess over the far and neighbour arms (paired by fact), ΔH@1 split
by margin half and by side, the spread over seeds, and ``necessity.md`` (the protocol itself:
kg/explain/necessity.py).
"""

from __future__ import annotations

import numpy as np

# the ΔH@1 splits of each arm: (mask name, its complement's name)
SPLITS = (("low_margin", "high_margin"), ("tail", "head"))


def bootstrap_mean(values: np.ndarray, n_boot: int, seed: int) -> tuple[float, float, float]:
    """The mean over facts and its bootstrap 95 % interval (resampling the facts).

    Args:
        values: One value per fact.
        n_boot: Bootstrap resamples.
        seed: Resampling seed.

    Returns:
        ``(mean, 2.5th percentile, 97.5th percentile)``; NaNs when there are no values.
    """
    v = np.asarray(values, np.float64)
    if v.size == 0:
        return float("nan"), float("nan"), float("nan")
    idx = np.random.default_rng(seed).integers(0, v.size, size=(n_boot, v.size))
    means = v[idx].mean(1)
    return float(v.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def put_mean(out: dict, key: str, values, n_boot: int, seed: int) -> None:
    """``out[key]``: the mean of ``values`` (one per fact), and ``out[key + "_ci95"]``: its bootstrap interval."""
    m, lo, hi = bootstrap_mean(values, n_boot, seed)
    out[key], out[f"{key}_ci95"] = m, [lo, hi]


def summarize_arm(base_ranks: np.ndarray, ranks: np.ndarray, n_boot: int, seed: int) -> dict:
    """Compare an arm's ranks after retraining with the reference's.

    The summary holds H@1, MRR and mean rank after, the drops in H@1 and MRR with bootstrap 95 %
    intervals, and how many facts lost (``flipped``) or gained (``gained``) the first place.

    Args:
        base_ranks: The facts' ranks under the reference retrain.
        ranks: The facts' ranks after the arm's retrain.
        n_boot: Bootstrap resamples.
        seed: Resampling seed.

    Returns:
        The summary.
    """
    b, a = np.asarray(base_ranks, np.float64), np.asarray(ranks, np.float64)
    out = {"hits@1": float(np.mean(a <= 1)), "mrr": float(np.mean(1 / a)), "mean_rank": float(np.mean(a))}
    out["flipped"], out["gained"] = int(np.sum((b <= 1) & (a > 1))), int(np.sum((b > 1) & (a <= 1)))
    for name, diff in (("delta_hits@1", (b <= 1).astype(float) - (a <= 1)), ("delta_mrr", 1 / b - 1 / a)):
        put_mean(out, name, diff, n_boot, seed)
    return out


FLOORS = ("far", "neighbour")  # the random arms every method arm is paired against, fact by fact


def add_above(arms: dict, ks: list[int], n_boot: int, seed: int) -> None:
    """Add every arm's H@1 drop minus each random floor's at the same k, paired by fact, in place.

    Per fact, the floor's hit after retraining minus the arm's (the reference cancels), bootstrapped
    over the facts: ``above_far_hits@1`` (what the removal did beyond a retrain's own noise; every
    arm but far) and ``above_neighbour_hits@1`` (whether the method chose better than as many random
    triples at the same entities; every method arm), each with its ``_ci95``.

    Args:
        arms: Arm name (``method@k``) to its summary, with ``ranks``; updated in place.
        ks: The removal sizes.
        n_boot: Bootstrap resamples.
        seed: Resampling seed.
    """
    for k in ks:
        for floor in FLOORS:
            floor_hit = (np.asarray(arms[f"{floor}@{k}"]["ranks"], np.float64) <= 1).astype(np.float64)
            skip = {f"{f}@{k}" for f in FLOORS[: FLOORS.index(floor) + 1]}  # neighbour above far, not far above it
            for name, a in arms.items():
                if name == "reference" or name in skip or a.get("k") != k:
                    continue
                put_mean(
                    a, f"above_{floor}_hits@1", floor_hit - (np.asarray(a["ranks"], np.float64) <= 1), n_boot, seed
                )


def removed_at_fact(removed: np.ndarray, facts: np.ndarray) -> float:
    """How many of an arm's removed triples touch a fact's head or tail, on average over the facts.

    Every fact's removals go at once, so on a small dense graph one fact's far draws can be another's
    neighbours.

    Args:
        removed: The arm's removed triples ``[m, 3]``.
        facts: The facts ``[n, 3]``.

    Returns:
        The mean count.
    """
    ends = removed[:, [0, 2]]
    return float(np.mean([np.isin(ends, (int(h), int(t))).any(1).sum() for h, _, t in facts]))


def add_split(arms: dict, mask: np.ndarray, names: tuple[str, str]) -> None:
    """Add every arm's H@1 drop on the facts in ``mask`` and on the rest, in place.

    The keys are ``delta_hits@1_<names[0]>`` and ``delta_hits@1_<names[1]>``; nothing is added
    when either part is empty.

    Args:
        arms: Arm name to its summary, with ``ranks`` (and a ``reference`` arm); updated in place.
        mask: Boolean, one entry per fact.
        names: The two parts' names.
    """
    mask = np.asarray(mask, bool)
    if mask.all() or not mask.any():
        return
    ref_hit = np.asarray(arms["reference"]["ranks"], np.float64) <= 1
    for name, a in arms.items():
        if name != "reference":
            hit = np.asarray(a["ranks"], np.float64) <= 1
            for part, sel in zip(names, (mask, ~mask)):
                a[f"delta_hits@1_{part}"] = float(ref_hit[sel].mean() - hit[sel].mean())


def add_margin_halves(arms: dict, margins: np.ndarray) -> None:
    """Add every arm's H@1 drop on the low-margin and the high-margin half of the facts, in place.

    This shows whether removals break confident predictions or only near-ties (which any retrain
    may flip). Nothing is added when a half is empty (all margins equal).

    Args:
        arms: Arm name to its summary; the reference arm gets the margins.
        margins: The reference model's margin per fact.
    """
    m = np.asarray(margins, np.float64)
    arms["reference"]["margins"] = m.tolist()
    add_split(arms, m <= np.median(m), SPLITS[0])


def across_seeds(per_seed: dict, arms: list[str], ks) -> dict:
    """Per arm and k: the mean and spread (min, max) over seeds of the H@1 and MRR drops and the rest.

    Args:
        per_seed: Seed to its arm summaries.
        arms: Arm names without ``@k``.
        ks: The removal sizes.

    Returns:
        ``"arm@k"`` to its summary over seeds.
    """
    out = {}
    for arm in arms:
        for k in ks:
            rows = [s[f"{arm}@{k}"] for s in per_seed.values()]
            entry = {}
            above = tuple(f"above_{f}_hits@1" for f in FLOORS if f"above_{f}_hits@1" in rows[0])
            splits = [
                f"delta_hits@1_{part}"
                for pair in SPLITS
                if all(f"delta_hits@1_{pair[0]}" in r for r in rows)
                for part in pair
            ]
            for key in (
                "delta_hits@1",
                "delta_mrr",
                "hits@1",
                "mrr",
                "mean_rank",
                "flipped",
                "gained",
                *above,
                *splits,
            ):
                v = [r[key] for r in rows]
                entry[key] = {"mean": float(np.mean(v)), "min": float(np.min(v)), "max": float(np.max(v))}
            for key in above:
                entry[f"{key}_ci95_first_seed"] = rows[0][f"{key}_ci95"]
            entry["triples_removed"] = rows[0]["triples_removed"]
            entry["removed_at_fact"] = float(np.mean([r["removed_at_fact"] for r in rows]))
            entry["delta_hits@1_ci95_first_seed"] = rows[0]["delta_hits@1_ci95"]
            entry["delta_mrr_ci95_first_seed"] = rows[0]["delta_mrr_ci95"]
            out[f"{arm}@{k}"] = entry
    return out


def necessity_markdown(res: dict) -> str:
    """The necessity report as a Markdown table, one row per arm and k.

    Args:
        res: The report from :func:`~tracegraph.kg.explain.necessity.run_necessity`.

    Returns:
        The Markdown text.
    """
    seeds = list(res["seeds"])
    lines = [
        f"## Necessity ({res['n_facts']} facts, seeds {', '.join(seeds)})",
        "",
        "Remove every fact's top-k explanation triples at once, retrain once, rank the facts again "
        "(docs/demo.md, 'Necessity').",
        "",
        "| arm | k | ΔH@1 (95 % CI, first seed) | above far (95 % CI) | above neighbour (95 % CI) "
        "| ΔH@1 low / high-margin half | ΔH@1 tail / head side | ΔMRR | H@1 after | mean rank after "
        "| removed (at each fact) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, e in res["summary"].items():
        arm, k = name.rsplit("@", 1)
        lo, hi = e["delta_hits@1_ci95_first_seed"]
        spread = "" if len(seeds) == 1 else f" [{e['delta_hits@1']['min']:.3f}, {e['delta_hits@1']['max']:.3f}]"
        above = " | ".join(_above(e, f) for f in FLOORS)
        halves, sides = (
            f"{e[f'delta_hits@1_{a}']['mean']:.3f} / {e[f'delta_hits@1_{b}']['mean']:.3f}"
            if f"delta_hits@1_{a}" in e
            else "—"
            for a, b in SPLITS
        )
        lines.append(
            f"| {arm} | {k} | {e['delta_hits@1']['mean']:.3f}{spread} ({lo:.3f}–{hi:.3f}) | {above} | {halves} | {sides} | "
            f"{e['delta_mrr']['mean']:.3f} | {e['hits@1']['mean']:.3f} | {e['mean_rank']['mean']:.2f} | "
            f"{e['triples_removed']} ({e['removed_at_fact']:.1f}) |"
        )
    return "\n".join(lines) + "\n"


def _above(e: dict, floor: str) -> str:
    """An arm's paired excess over a floor with its interval, for the Markdown table ("—" when it has none)."""
    key = f"above_{floor}_hits@1"
    if key not in e:
        return "—"
    lo, hi = e[f"{key}_ci95_first_seed"]
    return f"{e[key]['mean']:.3f} ({lo:.3f}–{hi:.3f})"
