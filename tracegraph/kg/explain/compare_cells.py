"""Names and cells shared by the faithfulness page's tables: arm and dataset titles, row order, figure cells."""

from __future__ import annotations

from tracegraph.kg.explain.compare_summary import FILTERINGS, ci_cell

# the faithfulness page's rows: arm name -> what the reader sees, in table order
ARM_TITLES = {
    "local-retrain": "tracegraph `local-retrain`",
    "local-newton": "tracegraph `local-newton`",
    "tracin-margin-path": "tracegraph `tracin-margin-path`",
    "tracin-margin": "tracegraph `tracin-margin`",
    "tracin-path": "tracegraph `tracin-path`",
    "tracin-margin-query": "tracegraph `tracin-margin-query`",
    "tracin": "TracIn top-k (`tracin`)",
    "kelpie": "Kelpie",
    "data_poisoning": "Data Poisoning",
    "criage": "CRIAGE",
    "k1": "K1",
    "random-head": "random head facts",
    "random-head-tail": "random head or tail facts",
    "far": "far facts: featuring neither end of a graded fact",
    "noise": "noise floor: another seed, nothing removed",
}
DATASET_TITLES = {
    "fb15k-237": "FB15k-237 on a GPU",
    "wn18rr": "WN18RR on a GPU",
    "umls": "UMLS",
    "fb15k-237-cpu": "FB15k-237 on a CPU",
    "wn18rr-cpu": "WN18RR on a CPU",
    # our own facts, from a run of their own (a lent GPU's call holds one dataset's fact set)
    "fb15k-237-own": "FB15k-237 on a GPU, our own facts' run",
    "wn18rr-own": "WN18RR on a GPU, our own facts' run",
    "fb15k-237-cpu-own": "FB15k-237 on a CPU, our own facts' run",
    "wn18rr-cpu-own": "WN18RR on a CPU, our own facts' run",
}


def in_table_order(arms) -> list[str]:
    """``arms`` in the page's row order (:data:`ARM_TITLES`), any other arm after them as given."""
    order = list(ARM_TITLES)

    def place(a: str) -> float:  # a method cut to another arm's sizes right below the method
        method, cut, _ = a.partition("@")
        return order.index(method) + 0.5 * bool(cut) if method in order else len(order)

    return sorted(arms, key=place)


def arm_title(arm: str, retrain_of: str | None = None) -> str:
    """An arm's row title on the page; explain's default method says so, and an arm that is another's retrain too."""
    from tracegraph.kg.explain.methods import DEFAULT_EXPLAINER

    method, _, like = arm.partition("@")  # METHOD@NAME: the method's explanations cut to NAME's sizes
    title = ARM_TITLES.get(method, method) + (", explain's default" if method == DEFAULT_EXPLAINER else "")
    title += f", cut to {ARM_TITLES.get(like, like)}'s sizes" if like else ""
    return f"{title} (the same removals as {ARM_TITLES.get(retrain_of, retrain_of)})" if retrain_of else title


def figure_cell(s: dict | None, filtering: str, key: str) -> str:
    """An arm's figure under a filtering with its interval; ``not measured`` for an arm not finished."""
    return "not measured" if s is None else ci_cell(s[filtering], key)


def versus_cell(s: dict | None, ref: str) -> str:
    """ΔH@1 beyond the ``ref`` arm, original / reduced (``—`` where the run did not pair them)."""
    if s is None:
        return "not measured"
    cells = [figure_cell(s, f, f"beyond_{ref}_hits@1") for f in FILTERINGS]
    return "—" if cells == ["—", "—"] else " / ".join(cells)


def per_dataset(results: dict, fact_set: str, table) -> str:
    """One titled table per dataset, ``table(that dataset's fact set)`` (no rows: the dataset left out)."""
    out = []
    for ds, d in results["datasets"].items():
        rows = table(d["fact_sets"].get(fact_set, {}))
        if rows:
            out += [f"**{DATASET_TITLES.get(ds, ds)}**:", "", *rows, ""]
    return "\n".join(out)
