"""The side-by-side protocol's statistics and report (the protocol: kg/explain/compare.py).

Signs follow Kelpie's tables: Δ = after − before, so a prediction that falls gives a negative Δ.
"""

from __future__ import annotations

import numpy as np

from tracegraph.kg.explain.necessity_summary import bootstrap_mean

FILTERINGS = ("original", "reduced")


def relation_kinds(train_ids: np.ndarray) -> dict[int, str]:
    """Each relation's kind by its mean tails per head and heads per tail (1-1, 1-N, N-1, N-N at 1.5).

    Args:
        train_ids: Training triples ``[M, 3]``.

    Returns:
        Relation id -> ``"1-1"``, ``"1-N"``, ``"N-1"`` or ``"N-N"``.
    """
    out = {}
    for rel in np.unique(train_ids[:, 1]):
        t = train_ids[train_ids[:, 1] == rel]
        tph = len(t) / len(np.unique(t[:, 0]))
        hpt = len(t) / len(np.unique(t[:, 2]))
        out[int(rel)] = f"{'N' if hpt >= 1.5 else '1'}-{'N' if tph >= 1.5 else '1'}"
    return out


def fact_groups(facts: np.ndarray, train_ids: np.ndarray) -> dict[str, list[str]]:
    """Per fact, its group by head degree (halves at the median) and by relation kind.

    Args:
        facts: Graded facts ``[n, 3]``.
        train_ids: Training triples.

    Returns:
        ``{"head_degree": [...], "relation_kind": [...]}``, one label per fact.
    """
    deg = np.bincount(np.concatenate([train_ids[:, 0], train_ids[:, 2]]), minlength=int(facts.max(initial=0)) + 1)
    head_deg = deg[facts[:, 0]] if len(facts) else np.zeros(0, np.int64)
    median = float(np.median(head_deg)) if len(facts) else 0.0
    kinds = relation_kinds(train_ids)
    return {
        "head_degree": [f"≤ {median:g}" if d <= median else f"> {median:g}" for d in head_deg],
        "relation_kind": [kinds.get(int(r), "unseen") for r in facts[:, 1]],
    }


def change(before: np.ndarray, after: np.ndarray, n_boot: int, seed: int) -> dict:
    """H@1 and MRR after, and their change (after − before) with bootstrap 95 % intervals."""
    b, a = np.asarray(before, np.float64), np.asarray(after, np.float64)
    out = {"hits@1": float(np.mean(a <= 1)), "mrr": float(np.mean(1 / a)), "fell": int(np.sum((b <= 1) & (a > 1)))}
    for name, diff in (("change_hits@1", (a <= 1).astype(float) - (b <= 1)), ("change_mrr", 1 / a - 1 / b)):
        m, lo, hi = bootstrap_mean(diff, n_boot, seed)
        out[name], out[f"{name}_ci95"] = m, [lo, hi]
    return out


def summarize(records: dict[str, dict], before: np.ndarray, groups: dict, n_boot: int, seed: int) -> dict:
    """Per arm and filtering: H@1/MRR after, their change, the change beyond the noise arm's, per group.

    Args:
        records: Arm name -> its record (``arms/NAME.json``).
        before: The facts' ranks under the run.
        groups: :func:`fact_groups`.
        n_boot: Bootstrap resamples.
        seed: Resampling seed.

    Returns:
        Arm name -> summary.
    """
    noise = records.get("noise")
    out = {}
    for name, rec in records.items():
        s = {
            "facts_removed": rec["facts_removed"],
            "mean_size": float(np.mean(rec["explanation_sizes"] or [0])),
            "seconds_per_explanation": rec["seconds_per_explanation"],
            "retrain_seconds": rec["retrain_seconds"],
        }
        for f in FILTERINGS:
            after = np.asarray(rec["ranks"][f], np.float64)
            s[f] = change(before, after, n_boot, seed)
            if noise is not None and name != "noise":
                floor = np.asarray(noise["ranks"][f], np.float64) <= 1
                m, lo, hi = bootstrap_mean((after <= 1).astype(float) - floor, n_boot, seed)
                s[f]["beyond_noise_hits@1"], s[f]["beyond_noise_hits@1_ci95"] = m, [lo, hi]
        after = np.asarray(rec["ranks"]["original"], np.float64)
        s["groups"] = {
            g: {v: float(np.mean(after[np.asarray(labels) == v] <= 1) - 1) for v in sorted(set(labels))}
            for g, labels in groups.items()
        }
        out[name] = s
    return out


def _ci(x: dict, key: str) -> str:
    if key not in x:
        return "—"
    lo, hi = x[f"{key}_ci95"]
    return f"{x[key]:+.2f} [{lo:+.2f}, {hi:+.2f}]"


def compare_markdown(res: dict) -> str:
    """``compare.md``: the protocol, one row per finished arm, and where the facts resist."""
    lines = [
        "# Necessity, side by side",
        "",
        f"Run `{res['model_dir']}`; {res['n_facts']} facts graded ({res['offered']} offered; those the run ranks "
        "first, filtered, tail side). Each arm removes its explanations of all graded facts at once and "
        "retrains once; Δ = after − before (negative: the predictions fell), with bootstrap 95 % intervals. "
        "*original*: ranks filtered with the original known triples; *reduced*: with the arm's removals "
        "taken out of them (Kelpie's filter). *beyond noise*: ΔH@1 minus the noise arm's, paired by fact.",
        "",
        "| arm | facts removed | mean size | ΔH@1 original | ΔMRR original | ΔH@1 reduced | ΔMRR reduced "
        "| beyond noise (original) | s / explanation |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in res["summary"].items():
        o, r = s["original"], s["reduced"]
        spe = s["seconds_per_explanation"]
        lines.append(
            f"| {name} | {s['facts_removed']} | {s['mean_size']:.2f} | {_ci(o, 'change_hits@1')} | "
            f"{_ci(o, 'change_mrr')} | {_ci(r, 'change_hits@1')} | {_ci(r, 'change_mrr')} | "
            f"{_ci(o, 'beyond_noise_hits@1')} | {'—' if spe is None else f'{spe:.3f}'} |"
        )
    for g, title in (("head_degree", "head degree"), ("relation_kind", "relation kind")):
        values = sorted({v for s in res["summary"].values() for v in s["groups"][g]})
        counts = {v: res["groups"][g].count(v) for v in values}
        lines += [
            "",
            f"ΔH@1 (original filtering) by {title}:",
            "",
            "| arm | " + " | ".join(f"{v} ({counts[v]} facts)" for v in values) + " |",
            "|---|" + "---|" * len(values),
        ]
        for name, s in res["summary"].items():
            lines.append(
                f"| {name} | " + " | ".join(f"{s['groups'][g].get(v, float('nan')):+.2f}" for v in values) + " |"
            )
    return "\n".join(lines) + "\n"
