"""The faithfulness page's side-by-side blocks and figure, from the committed results files.

The statistics themselves are kg/explain/compare_summary.py's; this module only lays them out.
"""

from __future__ import annotations

import json
from pathlib import Path

from tracegraph.kg.explain.compare_cells import (
    ARM_TITLES,
    DATASET_TITLES,
    figure_cell,
    per_dataset,
    versus_cell,
    arm_title,
    in_table_order,
)
from tracegraph.kg.explain.compare_pairs import joins_table, same_table, sizes_table
from tracegraph.kg.explain.compare_standing import (
    RELEASED_ARMS,
    pooled_table,
    released_agreement_table,
    released_table,
    side_by_side_margins,
    standing_table,
)
from tracegraph.kg.explain.compare_summary import contents_table, group_values

RANDOM = "random-head"
# the committed results files the faithfulness page and its figure are rendered from
PAGE_RESULTS = ("necessity_kelpie", "compare_umls", "local_refit_stability", "kelpie_released")


def load_page_results(directory: Path) -> dict[str, dict]:
    """The faithfulness page's results files (:data:`PAGE_RESULTS`) in ``directory``, by name."""
    return {n: json.loads((directory / f"{n}.json").read_text()) for n in PAGE_RESULTS}


def side_by_side_table(results: dict, fact_set: str = "kelpie-facts") -> str:
    """The faithfulness page's table, from ``benchmarks/results/necessity_kelpie.json``.

    Args:
        results: The results file's content.
        fact_set: ``kelpie-facts`` (Kelpie's 100 facts) or ``own-facts`` (100 of ours).

    Returns:
        Markdown: per dataset with a measured arm, a line on the facts and one row per planned arm (``not measured``
        where the arm has not finished; a method's seconds per explanation even then), with a
        column beyond Kelpie's arm, paired by fact, where the fact set has one, and beyond the random
        head facts where the run paired the arms with them (``--versus random-head``).
    """
    out = []
    for ds, d in results["datasets"].items():
        fs = d["fact_sets"].get(fact_set)
        if fs is None or not fs["finished"]:
            continue  # nothing measured: no table of "not measured" rows
        what = "Kelpie's" if fact_set == "kelpie-facts" else "the test set's"
        where = d if "machine" in d else results  # per dataset, or one machine for the whole file
        # a column beyond Kelpie's arm where there is one; beyond random head facts where the run paired them
        refs = {"kelpie": "Kelpie"} if "kelpie" in fs["arms"] else {}
        if any(f"beyond_{RANDOM}_hits@1" in s["original"] for s in fs["summary"].values()):
            refs[RANDOM] = "random head facts"
        out += [
            f"**{DATASET_TITLES.get(ds, ds)}**: {fs['n_facts']} of {what} {fs['offered']} facts ranked first by the "
            f"original model (test MRR {d['test_both']['mrr']:.3f}, both sides); {len(fs['finished'])} of "
            f"{len(fs['arms'])} arms measured"
            + (f" ({where['machine'].split(',')[0]}, commit {where['commit']})." if "machine" in where else ".")
            + added_arms_sentence(d.get("added_arms", []), fact_set),
            "",
            "| explanations | facts removed (per fact) | ΔH@1 original | ΔMRR original | ΔH@1 reduced | ΔMRR reduced "
            "| ΔH@1 beyond noise (original) | ΔH@1 beyond far (original) | "
            + "".join(f"ΔH@1 beyond {title} (original / reduced) | " for title in refs.values())
            + "s / explanation |",
            "|---|---|---|---|---|---|---|---|---|" + "---|" * len(refs),
        ]
        for arm in in_table_order(fs["arms"]):
            s = fs["summary"].get(arm)
            removed = "—" if s is None else f"{s['facts_removed']} ({s['mean_size']:.2f})"
            spe = fs.get("explained", {}).get(arm) if s is None else s["seconds_per_explanation"]
            out.append(
                f"| {arm_title(arm, (s or {}).get('retrain_of'))} | {removed} | {figure_cell(s, 'original', 'change_hits@1')} | "
                f"{figure_cell(s, 'original', 'change_mrr')} | {figure_cell(s, 'reduced', 'change_hits@1')} | "
                f"{figure_cell(s, 'reduced', 'change_mrr')} | {figure_cell(s, 'original', 'beyond_noise_hits@1')} | "
                f"{figure_cell(s, 'original', 'beyond_far_hits@1')} | "
                + "".join(f"{versus_cell(s, ref)} | " for ref in refs)
                + f"{'—' if spe is None else f'{spe:.2f}'} |"
            )
        out.append("")
    return "\n".join(out)


def added_arms_sentence(added: list[dict], fact_set: str) -> str:
    """What a table's line says of arms added later to the filed folder (``benchmarks/necessity_add_arm.py``)."""
    mine = [a for a in added if a["fact_set"] == fact_set]
    if not mine:
        return ""
    each = "; ".join(f"{arm_title(a['arm'])} at commit {a['commit']}, {a['machine'].split(',')[0]}" for a in mine)
    return f" Added later from the filed folder, without the run's weights (the same retrain): {each}."


# seconds per explanation in Kelpie's paper (ConvE, on a GPU): a published figure, set beside ours
def side_by_side_groups(results: dict, fact_set: str = "kelpie-facts") -> str:
    """Where the facts resist: ΔH@1 (original filtering) of every measured arm by head degree and relation kind.

    Args:
        results: The results file's content (``benchmarks/results/necessity_kelpie.json``).
        fact_set: ``kelpie-facts`` or ``own-facts``.

    Returns:
        Markdown: one table per dataset with a measured arm.
    """
    out = []
    for ds, d in results["datasets"].items():
        fs = d["fact_sets"].get(fact_set)
        if not fs or not fs["finished"]:
            continue
        name = {
            "head_degree": "head degree",
            "relation_kind": "relation",
            "margin": "margin",
            "answers": "other answers",
        }
        cols = [(g, v) for g in name if g in fs["groups"] for v in group_values(g, fs["groups"][g])]
        out += [
            f"**{DATASET_TITLES.get(ds, ds)}**, ΔH@1 (original filtering) by group:",
            "",
            "| explanations | "
            + " | ".join(f"{name[g]} {v} ({fs['groups'][g].count(v)} facts)" for g, v in cols)
            + " |",
            "|---|" + "---|" * len(cols),
        ]
        for arm in [a for a in ARM_TITLES if a in fs["summary"]]:
            g = fs["summary"][arm]["groups"]
            out.append(f"| {arm_title(arm)} | " + " | ".join(f"{g[k][v]:+.2f}" for k, v in cols) + " |")
        out.append("")
    return "\n".join(out)


def side_by_side_same(results: dict, fact_set: str = "kelpie-facts", min_facts: int = 1) -> str:
    """Per dataset, the facts two measured arms explain with the same removal set (:func:`same_explanations`).

    Args:
        results: The results file's content.
        fact_set: ``kelpie-facts`` or ``own-facts``.
        min_facts: Pairs sharing fewer facts are left out (a handful of facts says little).

    Returns:
        Markdown: one table per dataset with such a pair.
    """

    def table(fs: dict) -> list[str]:
        pairs = [p for p in fs.get("same_explanation", []) if p["facts"] >= min_facts]
        return same_table(pairs, arm_title) if pairs else []

    return per_dataset(results, fact_set, table)


def side_by_side_sizes(
    results: dict, fact_set: str = "kelpie-facts", versus: str = "kelpie", key: str = "sizes"
) -> str:
    """Per dataset, each measured arm against ``versus`` by explanation size (:func:`sizes_versus`).

    Args:
        results: The results file's content.
        fact_set: ``kelpie-facts`` or ``own-facts``.
        versus: The ``--versus`` arm the others are set against.
        key: ``sizes``, or ``joins`` for which explanation holds a fact joining head and tail
            (:func:`joins_versus`).

    Returns:
        Markdown: one table per dataset whose run counted them, arms in table order; an arm that is
        another arm's retrain (the same removals) is left out, its rows being that arm's, and so is a
        joining-fact split where neither explanation holds such a fact.
    """
    rows = {"sizes": sizes_table, "joins": joins_table}[key]

    def table(fs: dict) -> list[str]:
        twins = {a for a, s in fs.get("summary", {}).items() if s.get("retrain_of")}
        pairs = {
            p["arms"][0]: p
            for p in fs.get(key, [])
            if p["arms"][1] == versus and p["arms"][0] not in twins and not _uniform(p, key)
        }
        return rows([pairs[a] for a in in_table_order(pairs)], arm_title) if pairs else []

    return per_dataset(results, fact_set, table)


def _uniform(pair: dict, key: str) -> bool:
    """A joining-fact split where neither explanation joins head and tail anywhere: it tells nothing."""
    return key == "joins" and all(pair[g]["facts"] == 0 for g in ("both", "first", "second"))


def side_by_side_contents(results: dict, fact_set: str = "kelpie-facts") -> str:
    """Per dataset, what each measured arm's explanations hold (:func:`explanation_contents`).

    Args:
        results: The results file's content.
        fact_set: ``kelpie-facts`` or ``own-facts``.

    Returns:
        Markdown: one table per dataset whose run counted them, arms in table order.
    """

    def table(fs: dict) -> list[str]:
        contents = fs.get("contents", {})
        return contents_table({a: contents[a] for a in in_table_order(contents)}, arm_title) if contents else []

    return per_dataset(results, fact_set, table)


def stability_table(results: dict) -> str:
    """How much ``local-retrain``'s choice moves with its refits' step budget, per dataset.

    Args:
        results: ``benchmarks/results/local_refit_stability.json`` (per dataset, one line of
            ``benchmarks/local_refit_stability.py``).

    Returns:
        Markdown: one row per dataset and pair of step budgets.
    """
    out = [
        "| dataset | facts | steps | identical sets | Jaccard of the sets | full mimic's margin moves by | s / fact |",
        "|---|---|---|---|---|---|---|",
    ]
    for ds, line in results["datasets"].items():
        for pair, x in line["pairs"].items():
            a, b = pair.split("-")
            secs = " / ".join(f"{line['budgets'][s]['seconds_per_fact']:.1f}" for s in (a, b))
            out.append(
                f"| {DATASET_TITLES.get(ds, ds)} | {line['n_facts']} | {a} vs {b} | {x['same_set']:.2f} | "
                f"{x['jaccard']:.2f} | {x['full_margin_mean_abs_change']:.2f} | {secs} |"
            )
    return "\n".join(out) + "\n"


def page_blocks(results: dict[str, dict]) -> dict[tuple[str, str], str]:
    """The faithfulness page's generated blocks: (start marker, end marker) -> markdown.

    Args:
        results: ``benchmarks/results/NAME.json`` contents by NAME (:data:`PAGE_RESULTS`).

    Returns:
        The blocks.
    """
    kelpie, umls = results["necessity_kelpie"], results["compare_umls"]
    return {
        ("<!-- refit-stability -->", "<!-- /refit-stability -->"): stability_table(results["local_refit_stability"]),
        ("<!-- standing:kelpie-facts -->", "<!-- /standing -->"): standing_table(kelpie),
        ("<!-- released:kelpie-facts -->", "<!-- /released -->"): released_table(results["kelpie_released"], kelpie),
        ("<!-- released-agreement:kelpie-facts -->", "<!-- /released-agreement -->"): released_agreement_table(
            results["kelpie_released"]
        ),
        # our own facts' tables follow Kelpie's, each titled by its facts
        ("<!-- side-by-side:kelpie-facts -->", "<!-- /side-by-side -->"): side_by_side_table(kelpie)
        + side_by_side_table(kelpie, "own-facts"),
        ("<!-- pooled:kelpie-facts -->", "<!-- /pooled -->"): pooled_table(kelpie),
        ("<!-- side-by-side-groups:kelpie-facts -->", "<!-- /side-by-side-groups -->"): side_by_side_groups(kelpie),
        ("<!-- same-explanation:kelpie-facts -->", "<!-- /same-explanation -->"): side_by_side_same(
            kelpie, min_facts=10
        ),
        ("<!-- explanation-contents:kelpie-facts -->", "<!-- /explanation-contents -->"): side_by_side_contents(kelpie),
        ("<!-- sizes:kelpie-facts -->", "<!-- /sizes -->"): side_by_side_sizes(kelpie),
        ("<!-- joins:kelpie-facts -->", "<!-- /joins -->"): side_by_side_sizes(kelpie, key="joins"),
        ("<!-- margins:kelpie-facts -->", "<!-- /margins -->"): side_by_side_margins(kelpie),
        ("<!-- same-explanation:umls -->", "<!-- /same-explanation:umls -->"): side_by_side_same(umls, "own-facts", 10),
        ("<!-- side-by-side:umls -->", "<!-- /side-by-side:umls -->"): side_by_side_table(umls, "own-facts"),
    }


def _panels(results: dict[str, dict]):
    """Each figure panel: (its title, the series' name, its fact set, its summary), in page order."""
    for name, fact_set in (
        ("necessity_kelpie", "kelpie-facts"),
        ("necessity_kelpie", "own-facts"),
        ("compare_umls", "own-facts"),
    ):
        res = results[name]
        for ds, d in res["datasets"].items():
            fs = d["fact_sets"].get(fact_set)
            if not fs or not fs["summary"]:
                continue
            where = d if "machine" in d else res
            whose = "of Kelpie's" if fact_set == "kelpie-facts" else "test"
            machine = where.get("machine", "").split(",")[0].split(" (")[0]
            on = f" ({machine})" if machine else ""
            title = DATASET_TITLES.get(ds, ds)
            yield f"{title}: {fs['n_facts']} {whose} facts ranked first{on}", ds, fact_set, fs["summary"]
            pooled = d.get("pooled") if fact_set == "kelpie-facts" else None
            if pooled and pooled["summary"]:
                seeds = max(len(v) for v in pooled["seeds"].values())
                title = f"{title}: the same {pooled['n_facts']} facts, pooled over {seeds} retrain seeds{on}"
                yield title, ds, fact_set, pooled["summary"]


def page_panels(results: dict[str, dict]) -> dict[str, dict]:
    """The faithfulness page's figure: one panel per dataset with a measured arm, as its tables.

    Args:
        results: ``benchmarks/results/NAME.json`` contents by NAME (``necessity_kelpie``,
            ``compare_umls``).

    Returns:
        Panel title (dataset, facts, machine) -> that fact set's summary, arm -> its figures; a
        dataset run at several retrain seeds gets a second panel, its pooled summary.
    """
    return {title: summary for title, _, _, summary in _panels(results)}


def page_marks(results: dict[str, dict]) -> dict[str, dict[str, float]]:
    """Kelpie's released ΔH@1 (its model and retrain, reduced filter) on each panel's facts, for the figure.

    Args:
        results: As :func:`page_panels`, with ``kelpie_released``.

    Returns:
        Panel title -> arm -> the released ΔH@1 on that panel's graded facts, for the panels of
        Kelpie's facts whose series the released file graded.
    """
    graded = {s: g for d in results["kelpie_released"]["datasets"].values() for s, g in d["graded"].items()}
    out = {}
    for title, ds, fact_set, summary in _panels(results):
        if fact_set == "kelpie-facts" and ds in graded:
            arms = graded[ds]["arms"]
            out[title] = {a: arms[a]["reduced"]["change_hits@1"] for a in RELEASED_ARMS if a in summary}
    return out
