"""Where explain's default stands against Kelpie's explanations: the faithfulness page's verdict tables.

The standing table (the default beside Kelpie's, the floors, and the pooled figures where the
protocol ran at several retrain seeds), the pooled table and the margins block, rendered from
``benchmarks/results/necessity_kelpie.json`` like the rest of the page (``compare_page``).
"""

from __future__ import annotations

from tracegraph.kg.explain.compare_cells import (
    DATASET_TITLES,
    figure_cell,
    per_dataset,
    versus_cell,
    arm_title,
    in_table_order,
)
from tracegraph.kg.explain.compare_summary import FILTERINGS, margin_table

KELPIE_PAPER_SECONDS = {"fb15k-237": 34, "wn18rr": 28}
RELEASED_ARMS = ("kelpie", "data_poisoning", "criage", "k1")
KELPIE_DATASET_TITLES = {"fb15k-237": "FB15k-237", "wn18rr": "WN18RR"}


def standing_table(results: dict) -> str:
    """Explain's default against Kelpie's explanations on Kelpie's facts, one row per dataset with both measured.

    A dataset pooled over retrain seeds (``fidelity compare-pool``) gets a second row, the pooled figures.

    Args:
        results: ``benchmarks/results/necessity_kelpie.json``'s content.

    Returns:
        Markdown: a table (empty when no dataset has both arms finished).
    """
    from tracegraph.kg.explain.methods import DEFAULT_EXPLAINER

    rows = []
    for ds, d in results["datasets"].items():
        fs = d["fact_sets"].get("kelpie-facts") or {}
        ours, theirs = (fs.get("summary", {}).get(a) for a in (DEFAULT_EXPLAINER, "kelpie"))
        if ours is None or theirs is None:
            continue
        paper = KELPIE_PAPER_SECONDS.get(ds.removesuffix("-cpu"))
        seconds = f"{ours['seconds_per_explanation']:.2f}" + (f" ({paper})" if paper else "")
        rows.append(_standing_row(DATASET_TITLES.get(ds, ds), fs["n_facts"], fs["summary"], seconds))
        pooled = d.get("pooled") or {}
        if all(a in pooled.get("summary", {}) for a in (DEFAULT_EXPLAINER, "kelpie")):
            title = f"{DATASET_TITLES.get(ds, ds)}, pooled over {len(pooled['folders'])} retrain seeds"
            rows.append(_standing_row(title, pooled["n_facts"], pooled["summary"], seconds))
    if not rows:
        return ""
    head = (
        "| dataset | facts | default: ΔH@1 original / reduced | Kelpie's: ΔH@1 original / reduced "
        "| default − Kelpie's, paired | noise floor: ΔH@1 | default − noise floor, paired "
        "| default − far facts, paired | s / explanation (Kelpie's) |"
    )
    return "\n".join([head, "|---" * 9 + "|", *rows, ""])


def _standing_row(title: str, n_facts: int, summary: dict, seconds: str) -> str:
    from tracegraph.kg.explain.methods import DEFAULT_EXPLAINER

    ours, theirs, noise, far = (summary.get(a) for a in (DEFAULT_EXPLAINER, "kelpie", "noise", "far"))
    both = [" / ".join(figure_cell(x, f, "change_hits@1") for f in FILTERINGS) for x in (ours, theirs)]
    return (
        f"| {title} | {n_facts} | {both[0]} | {both[1]} | {versus_cell(ours, 'kelpie')} | "
        f"{figure_cell(noise, 'original', 'change_hits@1')} | "
        f"{figure_cell(ours if noise else None, 'original', 'beyond_noise_hits@1')} | "  # no floor yet: not measured
        f"{figure_cell(ours if far else None, 'original', 'beyond_far_hits@1')} | {seconds} |"
    )


def pooled_table(results: dict) -> str:
    """Kelpie's facts pooled over retrain seeds (``fidelity compare-pool``), per dataset that has them.

    Args:
        results: ``benchmarks/results/necessity_kelpie.json``'s content.

    Returns:
        Markdown: a sentence and one table per dataset with a pooled run; empty when none has one.
    """
    out = []
    for ds, d in results["datasets"].items():
        pooled = d.get("pooled")
        if not pooled:
            continue
        title = DATASET_TITLES.get(ds, ds)
        out += [
            f"**{title}**, {pooled['n_facts']} facts, each fact's outcome averaged over {len(pooled['folders'])} "
            "retrain seeds, then bootstrapped over the facts:",
            "",
            "| explanations | retrain seeds | ΔH@1 original | ΔH@1 reduced | ΔH@1 beyond noise (original) "
            "| ΔH@1 beyond Kelpie (original / reduced) |",
            "|---|---|---|---|---|---|",
        ]
        for arm in in_table_order(pooled["summary"]):
            s = pooled["summary"][arm]
            seeds = ", ".join(str(x) for x in pooled["seeds"][arm])
            out.append(
                f"| {arm_title(arm)} | {seeds} | {figure_cell(s, 'original', 'change_hits@1')} | "
                f"{figure_cell(s, 'reduced', 'change_hits@1')} | {figure_cell(s, 'original', 'beyond_noise_hits@1')} | "
                f"{versus_cell(s, 'kelpie')} |"
            )
        if margins := margin_table(pooled["summary"], ["kelpie"], arm_title, _ref_title):
            lo, hi = min(pooled["margin_folders"].values()), max(pooled["margin_folders"].values())
            out += [
                "",
                "The margin over the strongest rival, pooled the same way over the retrains that recorded it "
                f"({lo if lo == hi else f'{lo}–{hi}'} of the {len(pooled['folders'])} seeds per arm):",
                "",
                *margins,
            ]
        out.append("")
    return "\n".join(out)


def side_by_side_margins(results: dict, fact_set: str = "kelpie-facts") -> str:
    """Per dataset, the change in each arm's margin over the rival, paired with the floors and Kelpie's (where kept)."""
    tables = per_dataset(
        results, fact_set, lambda fs: margin_table(fs.get("summary", {}), ["kelpie"], arm_title, _ref_title)
    )
    return f"{MARGINS_INTRO}\n\n{tables}" if tables else ""


MARGINS_INTRO = (
    "Each arm's change in the margin over the strongest rival (logits, original filter), after − before, and its "
    "excess over the floors' and Kelpie's, paired by fact, for the retrains that recorded their margins:"
)


def _ref_title(arm: str) -> str:
    """A reference arm as a column heading names it."""
    return {"noise": "noise floor", "far": "far facts"}.get(arm) or arm_title(arm)


def released_table(released: dict, results: dict) -> str:
    """Kelpie's released figures beside the same explanations through our retrain, on the same facts.

    Args:
        released: ``benchmarks/results/kelpie_released.json`` (``benchmarks/kelpie_released.py``).
        results: ``benchmarks/results/necessity_kelpie.json``, whose series' arms give our retrain's rows.

    Returns:
        Markdown: per dataset, a row for Kelpie's 100 facts, then per filed series the facts our
        model ranks first under Kelpie's retrain and under ours; ΔH@1 under the reduced filter
        (Kelpie's). Empty when the file holds no dataset.
    """
    rows = []
    for ds, d in released["datasets"].items():
        name = KELPIE_DATASET_TITLES.get(ds, ds)
        rows.append(_released_row(f"{name}: Kelpie's {d['n_facts']} facts", "Kelpie's", d["arms"]))
        for series, g in d["graded"].items():
            ours = results["datasets"][series]["fact_sets"]["kelpie-facts"]["summary"]
            title = f"{DATASET_TITLES.get(series, series)}: the {g['n_facts']} our model ranks first"
            rows += [_released_row(title, "Kelpie's", g["arms"]), _released_row("", "ours", ours)]
    if not rows:
        return ""
    head = "| facts | model and retrain | " + " | ".join(arm_title(a) for a in RELEASED_ARMS) + " |"
    return "\n".join([head, "|---" * (2 + len(RELEASED_ARMS)) + "|", *rows, ""])


def _released_row(title: str, whose: str, arms: dict) -> str:
    cells = [figure_cell(arms.get(a), "reduced", "change_hits@1") for a in RELEASED_ARMS]
    return f"| {title} | {whose} | " + " | ".join(cells) + " |"


def released_agreement_table(released: dict) -> str:
    """Fact by fact, whether Kelpie's retrain and ours broke the same predictions with the same explanations.

    Args:
        released: ``benchmarks/results/kelpie_released.json``.

    Returns:
        Markdown: one row per filed series and explanations our retrain ran (reduced filter, both
        retrains); empty when there is none.
    """
    rows = []
    for d in released["datasets"].values():
        for series, g in d["graded"].items():
            for arm in RELEASED_ARMS:
                if x := g.get("agreement", {}).get(arm):
                    title = f"{DATASET_TITLES.get(series, series)} ({g['n_facts']} facts)"
                    rows.append(
                        f"| {title} | {arm_title(arm)} | {x['both']} | {x['theirs_only']} | {x['ours_only']} | "
                        f"{x['neither']} |"
                    )
    if not rows:
        return ""
    head = "| facts | explanations | fell in both retrains | in Kelpie's only | in ours only | stood in both |"
    return "\n".join([head, "|---" * 6 + "|", *rows, ""])
