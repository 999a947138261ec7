"""The side-by-side protocol's statistics and report (the protocol: kg/explain/compare.py).

Signs follow Kelpie's tables: Δ = after − before, so a prediction that falls gives a negative Δ.
"""

from __future__ import annotations

import numpy as np

from tracegraph.kg.explain.compare_pairs import (
    JOINS_INTRO,
    SAME_INTRO,
    SIZES_INTRO,
    joins,
    joins_table,
    same_table,
    sizes_table,
)
from tracegraph.kg.explain.necessity_summary import put_mean
from tracegraph.kg.explain.ranking import same_query

FILTERINGS = ("original", "reduced")
FLOORS = ("noise", "far")  # arms that measure what a retrain does without the explanations


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


def fact_groups(
    facts: np.ndarray, train_ids: np.ndarray, margins: np.ndarray | None = None, k: int | None = None
) -> dict[str, list[str]]:
    """Per fact, its group by head degree (halves at the median), relation kind, margin half and query answers.

    Args:
        facts: Graded facts ``[n, 3]``.
        train_ids: Training triples.
        margins: The run's lead of each fact's answer over its strongest filtered rival (logits);
            None leaves the margin groups out.
        k: The explanations' size budget: facts whose query (h, r, ?) has no other training
            answer, at most ``k`` (an explanation can remove them all) or more; None leaves
            this grouping out.

    Returns:
        ``{"head_degree": [...], "relation_kind": [...], "margin": [...], "answers": [...]}``, one
        label per fact.
    """
    deg = np.bincount(np.concatenate([train_ids[:, 0], train_ids[:, 2]]), minlength=int(facts.max(initial=0)) + 1)
    head_deg = deg[facts[:, 0]] if len(facts) else np.zeros(0, np.int64)
    median = float(np.median(head_deg)) if len(facts) else 0.0
    kinds = relation_kinds(train_ids)
    out = {
        "head_degree": [f"≤ {median:g}" if d <= median else f"> {median:g}" for d in head_deg],
        "relation_kind": [kinds.get(int(r), "unseen") for r in facts[:, 1]],
    }
    if margins is not None and len(margins):
        # near-ties flip on any retrain; a confident prediction only when its support goes
        m = float(np.median(margins))
        out["margin"] = ["near tie" if x <= m else "confident" for x in margins]
    if k is not None:
        # in a 1-N model the query's other answers label the sample the prediction is read from
        n = [int(same_query(train_ids, f).sum()) for f in facts]
        out["answers"] = ["none" if x == 0 else f"1–{k}" if x <= k else f"> {k}" for x in n]
    return out


def group_values(group: str, labels) -> list[str]:
    """A grouping's labels in table order: by name, the query-answers groups from none to more than k."""
    values = sorted(set(labels))
    if group == "answers":  # "none", "1–k", "> k"
        values.sort(key=lambda v: 0 if v == "none" else 2 if v.startswith(">") else 1)
    return values


def change(before: np.ndarray, after: np.ndarray, n_boot: int, seed: int) -> dict:
    """H@1 and MRR after, and their change (after − before) with bootstrap 95 % intervals."""
    b, a = np.asarray(before, np.float64), np.asarray(after, np.float64)
    out = {"hits@1": float(np.mean(a <= 1)), "mrr": float(np.mean(1 / a)), "fell": int(np.sum((b <= 1) & (a > 1)))}
    for name, diff in (("change_hits@1", (a <= 1).astype(float) - (b <= 1)), ("change_mrr", 1 / a - 1 / b)):
        put_mean(out, name, diff, n_boot, seed)
    return out


def summarize(
    records: dict[str, dict], before: np.ndarray, groups: dict, n_boot: int, seed: int, versus=(), margins=None
) -> dict:
    """Per arm and filtering: H@1/MRR after, their change, the change beyond each floor arm's, per group.

    The floors are the ``noise`` arm (another seed) and the ``far`` arm (unrelated facts removed,
    the run's seed); ``beyond_noise_hits@1`` and ``beyond_far_hits@1`` are ΔH@1 minus the floor's,
    paired by fact, for every other arm when the floor has finished. Each arm of ``versus`` (say
    Kelpie's) is a reference the same way: ``beyond_NAME_hits@1`` for every arm but the floors and itself.

    Args:
        records: Arm name -> its record (``arms/NAME.json``).
        before: The facts' ranks under the run.
        groups: :func:`fact_groups`.
        n_boot: Bootstrap resamples.
        seed: Resampling seed.
        versus: Arms every other arm is paired against, as against the floors.
        margins: The facts' margins over their strongest rival under the run; with them, an arm
            whose record holds its margins after gets ``change_margin`` (after − before, under the
            original filter) and ``beyond_NAME_margin`` against each reference that has them.

    Returns:
        Arm name -> summary.
    """
    refs = {name: records[name] for name in (*FLOORS, *versus) if name in records}
    out = {}
    for name, rec in records.items():
        s = {
            "facts_removed": rec["facts_removed"],
            "mean_size": float(np.mean(rec["explanation_sizes"] or [0])),
            "seconds_per_explanation": rec["seconds_per_explanation"],
            "retrain_seconds": rec["retrain_seconds"],
            **({"retrain_of": rec["retrain_of"]} if rec.get("retrain_of") else {}),
        }
        for f in FILTERINGS:
            after = np.asarray(rec["ranks"][f], np.float64)
            s[f] = change(before, after, n_boot, seed)
            for ref_name, ref in ({} if name in FLOORS else refs).items():  # a floor is not held to a floor
                if ref_name == name:
                    continue
                held = np.asarray(ref["ranks"][f], np.float64) <= 1
                put_mean(s[f], f"beyond_{ref_name}_hits@1", (after <= 1).astype(float) - held, n_boot, seed)
        if margins is not None and "margins" in rec:
            s["original"].update(_margin_changes(name, rec, refs, margins, n_boot, seed))
        after = np.asarray(rec["ranks"]["original"], np.float64)
        s["groups"] = {
            g: {v: float(np.mean(after[np.asarray(labels) == v] <= 1) - 1) for v in sorted(set(labels))}
            for g, labels in groups.items()
        }
        out[name] = s
    return out


def _margin_changes(name: str, rec: dict, refs: dict, margins, n_boot: int, seed: int) -> dict:
    """The arm's margin change (after − before) and its excess over each reference's, paired by fact."""
    after = np.asarray(rec["margins"], np.float64)
    out = {}
    pairs = [("change_margin", after - np.asarray(margins, np.float64))]
    pairs += [
        (f"beyond_{r}_margin", after - np.asarray(ref["margins"], np.float64))
        for r, ref in ({} if name in FLOORS else refs).items()
        if r != name and "margins" in ref
    ]
    for key, diff in pairs:
        put_mean(out, key, diff, n_boot, seed)
    return out


def explanation_contents(removed: dict[str, list], facts: np.ndarray, train_ids: np.ndarray, records: dict) -> dict:
    """Per finished explanation arm: what its explanations hold, and the falls only Kelpie's filter shows.

    Under the reduced filter a removed training fact (h, r, t′) is no longer a known answer of the
    query (h, r, ?), so t′ can outrank the true tail by itself; that needs no explanation of the
    fact's own, only a removal on its query. Counting both tells how much of an arm's reduced-filter
    drop that accounts for.

    Args:
        removed: Arm name -> per graded fact, the training rows its explanation removes.
        facts: The graded facts ``[n, 3]``.
        train_ids: Training triples ``[M, 3]`` (the rows index them).
        records: Arm name -> its finished record (``arms/NAME.json``).

    Returns:
        Arm name -> ``explained`` (facts with a non-empty explanation), ``head_tail`` (explanations
        holding a training fact that joins the fact's head and tail, either way round),
        ``query_answer`` (explanations holding another answer (h, r, t′) of the fact's query),
        ``unfiltered`` (facts whose query loses a known answer to the arm's removals, any fact's),
        ``fell`` (facts no longer first, original filter), ``fell_reduced_only`` (first under the
        original filter, not under the reduced one), ``head_kept`` (facts whose head keeps a training
        fact once the arm's removals, every fact's, are made: a head left with none learns nothing
        of itself, so its prediction falls without any explanation) with ``fell_where_head_kept``
        (of those, the facts the arm breaks) and, once a floor arm has finished,
        ``floors_keep`` (facts every finished floor keeps first: those the retrain's chaos alone
        leaves standing) with ``fell_where_floors_keep`` (of those, the facts the arm breaks).
    """
    floors = [np.asarray(records[f]["ranks"]["original"], np.float64) <= 1 for f in FLOORS if f in records]
    steady = np.logical_and.reduce(floors) if floors else None
    out = {}
    for name, rows in removed.items():
        if name not in records:
            continue
        held = [train_ids[np.asarray(r, np.int64)] for r in rows]
        gone_rows = np.unique(np.concatenate([np.asarray(r, np.int64) for r in rows] or [np.zeros(0, np.int64)]))
        gone, kept = train_ids[gone_rows], np.delete(train_ids, gone_rows, axis=0)
        original, reduced = (np.asarray(records[name]["ranks"][f], np.float64) > 1 for f in FILTERINGS)
        head_kept = np.isin(facts[:, 0], np.union1d(kept[:, 0], kept[:, 2]))
        out[name] = {
            "explained": sum(len(x) > 0 for x in held),
            "head_tail": sum(bool(np.any(joins(x, f))) for x, f in zip(held, facts, strict=True)),
            "query_answer": sum(bool(np.any(same_query(x, f))) for x, f in zip(held, facts, strict=True)),
            "unfiltered": sum(bool(np.any(same_query(gone, f))) for f in facts),
            "fell": int(original.sum()),
            "fell_reduced_only": int(np.sum(reduced & ~original)),
            "head_kept": int(head_kept.sum()),
            "fell_where_head_kept": int(np.sum(original & head_kept)),
        }
        if steady is not None:
            out[name].update(floors_keep=int(steady.sum()), fell_where_floors_keep=int(np.sum(original & steady)))
    return out


CONTENTS_COLUMNS = (
    ("explained", "facts explained"),
    ("head_tail", "holding a fact joining head and tail"),
    ("query_answer", "holding another answer (h, r, t′)"),
    ("unfiltered", "queries losing a known answer to the removals"),
    ("fell", "fell (original)"),
    ("fell_reduced_only", "fell under the reduced filter only"),
    ("fell_where_head_kept", "fell where the head keeps a training fact"),
    ("fell_where_floors_keep", "fell where the floors keep it first"),
)


def contents_table(contents: dict, title) -> list[str]:
    """:func:`explanation_contents` as markdown rows, each arm named by ``title(arm)``."""
    out = [
        "| explanations | " + " | ".join(h for _, h in CONTENTS_COLUMNS) + " |",
        "|---|" + "---|" * len(CONTENTS_COLUMNS),
    ]
    for name, c in contents.items():
        out.append(f"| {title(name)} | " + " | ".join(_count(c, k) for k, _ in CONTENTS_COLUMNS) + " |")
    return out


_OUT_OF = {"fell_where_floors_keep": "floors_keep", "fell_where_head_kept": "head_kept"}


def _count(c: dict, key: str) -> str:
    # out of the facts the floors keep first / whose head keeps a fact; a dash before any floor, or in an older summary
    if key in _OUT_OF:
        return f"{c[key]} of {c[_OUT_OF[key]]}" if key in c else "—"
    return str(c[key])


def facts_tsv(facts: list, groups: dict, records: dict) -> str:
    """``facts.tsv``: one row per graded fact, its groups and every finished arm's rank after, per filtering.

    Every graded fact was ranked first before (tail side, filtered), so the ranks after are the
    whole story per prediction; the explanations are in ``explanations/``.

    Args:
        facts: The graded facts as label triples.
        groups: :func:`fact_groups`.
        records: Arm name -> its finished record (``arms/NAME.json``).

    Returns:
        Tab-separated text with a header line.
    """
    header = ["head", "relation", "tail", *groups, *(f"{a} {f}" for a in records for f in FILTERINGS)]
    lines = ["\t".join(header)]
    for i, fact in enumerate(facts):
        ranks = [f"{records[a]['ranks'][f][i]:g}" for a in records for f in FILTERINGS]
        lines.append("\t".join([*fact, *(groups[g][i] for g in groups), *ranks]))
    return "\n".join(lines) + "\n"


def ci_cell(x: dict, key: str) -> str:
    """A figure and its 95 % interval, ``-0.27 [-0.38, -0.18]``; ``—`` where ``x`` has no such figure."""
    if key not in x:
        return "—"
    lo, hi = x[f"{key}_ci95"]
    return f"{x[key]:+.2f} [{lo:+.2f}, {hi:+.2f}]"


def compare_markdown(res: dict) -> str:
    """``compare.md``: the protocol, one row per finished arm, and where the facts resist."""
    versus = [v for v in res.get("config", {}).get("versus", []) if v in res["summary"]]
    lines = [
        "# Necessity, side by side",
        "",
        f"Run `{res['model_dir']}`; {res['n_facts']} facts graded ({res['offered']} offered; those the run ranks "
        "first, filtered, tail side). Each arm removes its explanations of all graded facts at once and "
        "retrains once; Δ = after − before (negative: the predictions fell), with bootstrap 95 % intervals. "
        "*original*: ranks filtered with the original known triples; *reduced*: with the arm's removals "
        "taken out of them (Kelpie's filter). *beyond noise*, *beyond far*"
        + "".join(f", *beyond {v}*" for v in versus)
        + ": ΔH@1 minus that arm's, paired by fact.",
        "",
        "| arm | facts removed | mean size | ΔH@1 original | ΔMRR original | ΔH@1 reduced | ΔMRR reduced "
        "| beyond noise (original) | beyond far (original) | "
        + "".join(f"beyond {v} (original) | beyond {v} (reduced) | " for v in versus)
        + "s / explanation |",
        "|---|---|---|---|---|---|---|---|---|" + "---|---|" * len(versus) + "---|",
    ]
    for name, s in res["summary"].items():
        o, r = s["original"], s["reduced"]
        spe = s["seconds_per_explanation"]
        shown = f"{name} (the retrain of {s['retrain_of']})" if s.get("retrain_of") else name
        lines.append(
            f"| {shown} | {s['facts_removed']} | {s['mean_size']:.2f} | {ci_cell(o, 'change_hits@1')} | "
            f"{ci_cell(o, 'change_mrr')} | {ci_cell(r, 'change_hits@1')} | {ci_cell(r, 'change_mrr')} | "
            f"{ci_cell(o, 'beyond_noise_hits@1')} | {ci_cell(o, 'beyond_far_hits@1')} | "
            + "".join(f"{ci_cell(o, f'beyond_{v}_hits@1')} | {ci_cell(r, f'beyond_{v}_hits@1')} | " for v in versus)
            + f"{'—' if spe is None else f'{spe:.3f}'} |"
        )
    if margins := margin_table(res["summary"], versus):
        lines += ["", MARGIN_INTRO, "", *margins]
    titles = {
        "head_degree": "head degree",
        "relation_kind": "relation kind",
        "margin": "margin half (the run's lead over the rival)",
        "answers": "the query's other training answers (h, r, t′)",
    }
    for g, title in ((g, t) for g, t in titles.items() if g in res["groups"]):
        values = group_values(g, [v for s in res["summary"].values() for v in s["groups"][g]])
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
    if res.get("same_explanation"):
        lines += ["", SAME_INTRO, "", *same_table(res["same_explanation"], str)]
    if res.get("sizes"):
        lines += ["", SIZES_INTRO, "", *sizes_table(res["sizes"], str)]
    if res.get("joins"):
        lines += ["", JOINS_INTRO, "", *joins_table(res["joins"], str)]
    if res.get("contents"):
        lines += ["", CONTENTS_INTRO, "", *contents_table(res["contents"], str)]
    return "\n".join(lines) + "\n"


MARGIN_INTRO = (
    "The margin over the strongest rival (logits; original filter), after − before, and beyond the floors' and "
    "the reference arms' margins, paired by fact: a continuous reading of the same predictions, which a "
    "retrain's chaos moves both ways and a removal that matters lowers."
)


def margin_table(summary: dict, versus=(), title=str, ref_title=None) -> list[str]:
    """The margin table's rows: the arms whose records hold their margins after (none: no rows).

    Args:
        summary: Arm name -> its summary (:func:`summarize`).
        versus: The reference arms, paired with after the floors.
        title: Arm name -> how the table names it.
        ref_title: Arm name -> how a column heading names it; None: as ``title``.
    """
    rows = {n: s["original"] for n, s in summary.items() if "change_margin" in s["original"]}
    if not rows:
        return []
    refs = [r for r in (*FLOORS, *versus) if r in rows]
    out = ["| " + " | ".join(["arm", "Δ margin", *(f"beyond {(ref_title or title)(r)}" for r in refs)]) + " |"]
    out += ["|---|---|" + "---|" * len(refs)]
    for name, o in rows.items():
        cells = [ci_cell(o, "change_margin"), *(ci_cell(o, f"beyond_{r}_margin") for r in refs)]
        out.append("| " + " | ".join([title(name), *cells]) + " |")
    return out


CONTENTS_INTRO = (
    "What each arm's explanations hold, counted over the graded facts, and the facts that fall only under "
    "the reduced filter (where a removed answer (h, r, t′) is no longer filtered)."
)
