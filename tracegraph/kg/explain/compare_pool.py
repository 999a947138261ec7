"""The side-by-side protocol pooled over retrain seeds: each fact's outcome averaged over several compare folders.

One retrain per arm leaves an arm's ΔH@1 to the retrain's chaos: a fact near a tie falls or stands
by chance, and on a large graph that chance is as large as what four removed facts do. Running
``fidelity compare`` again with ``--retrain-seed`` (same run, same facts, other retrains, each in
its own folder) and pooling the folders averages each fact's outcome over the seeds before the
bootstrap over facts, as before: the intervals narrow with the seeds.

Signs are compare's: Δ = after − before, a prediction that falls gives a negative Δ.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.explain.compare_summary import FILTERINGS, FLOORS, MARGIN_INTRO, ci_cell, margin_table
from tracegraph.kg.explain.necessity_summary import put_mean
from tracegraph.runtime.checkpoints import read_json


def read_folder(folder: Path) -> tuple[list, dict[str, dict], list | None]:
    """A compare folder's graded facts (labels), its finished arms' records in table order, and the run's margins."""
    path = folder / "compare.json"
    if not path.is_file():
        raise DataError("not a `fidelity compare` output folder (no compare.json)", folder)
    res = read_json(path)
    records = {a: read_json(folder / "arms" / f"{a}.json") for a in res["finished"]}
    return [tuple(f) for f in res["facts"]], records, res.get("margins")


def pool_folders(folders: list[Path], n_boot: int = 1000, seed: int = 0, versus=()) -> dict:
    """Pool compare folders of the same facts: per arm and filtering, each fact's outcome averaged over them.

    Args:
        folders: ``fidelity compare`` output folders of one run and one fact set (say one per
            ``--retrain-seed``).
        n_boot: Bootstrap resamples of the facts.
        seed: Resampling seed.
        versus: Arms every other arm is paired against, as against the floors.

    Returns:
        ``folders``, ``n_facts``, ``arms`` (those finished in every folder), ``seeds`` (arm -> its
        retrain seed per folder), ``refs`` (the floors and ``versus`` arms pooled) and ``summary``:
        arm -> per filtering ``hits@1`` and ``mrr`` after (means over facts of the per-fact means
        over folders), ``change_hits@1`` and ``change_mrr`` (after − before; every graded fact was
        first before) and ``beyond_NAME_hits@1`` for each
        floor (``noise``, ``far``) and ``versus`` arm, paired by fact, each with ``_ci95``; for the
        arms whose retrains recorded their margins in some folders, ``change_margin`` and
        ``beyond_NAME_margin`` under the original filter, from each fact's mean over those folders
        (``margin_folders``: how many, per arm).

    Raises:
        TracegraphError: If fewer than two folders are given.
        DataError: If a folder is not a compare output, or grades other facts than the first.
    """
    if len(folders) < 2:
        raise TracegraphError(f"give at least two compare folders to pool, not {len(folders)}")
    facts, first, before = read_folder(folders[0])
    runs = [first]
    for f in folders[1:]:
        other, records, margins = read_folder(f)
        if other != facts:
            raise DataError(f"it grades other facts than {folders[0]} (pool folders of one fact set)", f)
        runs.append(records)
        before = before if before is not None else margins  # the same run's: any folder that kept them
    arms = [a for a in first if all(a in r for r in runs)]
    out = {"folders": [str(f) for f in folders], "n_facts": len(facts), "arms": arms, "summary": {}}
    out["seeds"] = {a: [r[a]["seed"] for r in runs] for a in arms}
    hits = {  # arm -> filtering -> per fact, the share of folders where it stayed first
        a: {f: np.mean([np.asarray(r[a]["ranks"][f], np.float64) <= 1 for r in runs], axis=0) for f in FILTERINGS}
        for a in arms
    }
    refs = out["refs"] = [a for a in (*FLOORS, *versus) if a in arms]
    for a in arms:
        s = {}
        for f in FILTERINGS:
            rr = np.mean([1 / np.asarray(r[a]["ranks"][f], np.float64) for r in runs], axis=0)
            s[f] = {"hits@1": float(hits[a][f].mean()), "mrr": float(rr.mean())}
            pairs = [("change_hits@1", hits[a][f] - 1), ("change_mrr", rr - 1)]
            pairs += [(f"beyond_{ref}_hits@1", hits[a][f] - hits[ref][f]) for ref in refs if a not in (ref, *FLOORS)]
            for key, values in pairs:
                put_mean(s[f], key, values, n_boot, seed)
        out["summary"][a] = s
    _pool_margins(out, runs, before, refs, n_boot, seed)
    return out


def _pool_margins(out: dict, runs: list[dict], before, refs: list[str], n_boot: int, seed: int) -> None:
    """Margin figures per arm over the folders whose retrains of it recorded margins (each fact's mean over them).

    A pair of arms is compared over the folders where both recorded them; ``margin_folders`` says
    over how many folders each arm's figures are.
    """
    kept = {a: [r for r in runs if "margins" in r[a]] for a in out["arms"]}
    out["margin_folders"] = {a: len(rs) for a, rs in kept.items() if rs}

    def mean_over(rs, a, ref=None):  # per fact, over the folders rs: the arm's margin, or its excess over ref's
        return np.mean([np.subtract(r[a]["margins"], r[ref]["margins"] if ref else 0.0) for r in rs], axis=0)

    for a in out["margin_folders"]:
        pairs = (
            [("change_margin", mean_over(kept[a], a) - np.asarray(before, np.float64))] if before is not None else []
        )
        for ref in (r for r in refs if r in out["margin_folders"] and a not in (r, *FLOORS)):
            both = [r for r in kept[a] if "margins" in r[ref]]
            pairs += [(f"beyond_{ref}_margin", mean_over(both, a, ref))] if both else []
        for key, values in pairs:
            put_mean(out["summary"][a]["original"], key, values, n_boot, seed)


def margin_folders_sentence(res: dict) -> str:
    """Over how many of the pooled folders each arm's margins are (the retrains that recorded them)."""
    n = len(res["folders"])
    counts = ", ".join(f"{a} {k}" for a, k in res.get("margin_folders", {}).items())
    return f"Each fact's margin is its mean over the folders whose retrains recorded it, of {n}: {counts}."


def _row(*cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def pooled_markdown(res: dict) -> str:
    """``pooled.md``: one row per arm, both filterings, the floors (original) and ``versus`` arms (both) paired by fact."""
    refs = res["refs"]
    # a floor removes nothing, so pairing with it under the reduced filter says nothing more; another arm's does
    paired = [(r, "original") for r in refs] + [(r, "reduced") for r in refs if r not in FLOORS]

    lines = [
        "# Necessity, side by side, pooled over retrain seeds",
        "",
        f"{res['n_facts']} facts; {len(res['folders'])} compare folders: "
        + ", ".join(f"`{f}`" for f in res["folders"])
        + ". Each fact's outcome is averaged over the folders, then bootstrapped over the facts (95 % intervals); "
        "Δ = after − before (negative: the predictions fell).",
        "",
        _row(
            "arm",
            "retrain seeds",
            "ΔH@1 original",
            "ΔMRR original",
            "ΔH@1 reduced",
            "ΔMRR reduced",
            *(f"beyond {r} ({f})" for r, f in paired),
        ),
        _row(*["---"] * (6 + len(paired))),
    ]
    for a, s in res["summary"].items():
        o, r = s["original"], s["reduced"]
        seeds = ", ".join(str(x) for x in res["seeds"][a])
        cells = [
            ci_cell(o, "change_hits@1"),
            ci_cell(o, "change_mrr"),
            ci_cell(r, "change_hits@1"),
            ci_cell(r, "change_mrr"),
        ]
        lines.append(_row(a, seeds, *cells, *(ci_cell(s[f], f"beyond_{ref}_hits@1") for ref, f in paired)))
    if margins := margin_table(res["summary"], [r for r in refs if r not in FLOORS]):
        lines += ["", MARGIN_INTRO + " " + margin_folders_sentence(res), "", *margins]
    return "\n".join(lines) + "\n"
