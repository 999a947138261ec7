"""The necessity section: what ``tracegraph fidelity necessity`` wrote (``necessity.json``).

A table with each arm's 95 % interval and its paired excess over the far arm, and one headline
sentence.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tracegraph.errors import DataError
from tracegraph.kg.explain.methods import DEFAULT_EXPLAINER
from tracegraph.kg.explain.necessity import RANDOM_ARMS
from tracegraph.report.html import Section, e, num, table

PROTOCOL = (
    "Per arm, every fact's top-k training triples are removed <em>at once</em> and the model is retrained "
    "<em>once</em> with the run's configuration and seed; removed triples are masked out of their batches, so "
    "every other batch stays as it was. Arms: each explanation method's top-k; <b>neighbour</b>: k random "
    "triples touching the fact's head or tail; <b>far</b>: k random triples touching neither (the noise floor). "
    "ΔH@1 = Hits@1 of the facts before − after (positive: the facts got worse), with its 95 % bootstrap "
    "interval over the facts. <b>Above far</b>: the arm's ΔH@1 minus far's, paired by fact — what the removal "
    "did beyond the floor. <b>Above neighbour</b>: the same against neighbour — whether the method chose better "
    "than as many random triples at the same entities. <b>At each fact</b>: how many of the removed triples touch a fact's head or tail, on "
    "average — every fact's removals go at once, so on a small graph one fact's far draws are another's "
    "neighbours."
)


def read_necessity(source) -> dict:
    """Read ``necessity.json`` from the file, the directory holding it, or a dict already read.

    Args:
        source: A path, or the dict itself.

    Returns:
        The document.

    Raises:
        DataError: If there is no such file, it is not JSON, or it is not what the necessity test writes.
    """
    if isinstance(source, dict):
        return source
    p = Path(source)
    if p.is_dir():
        p = p / "necessity.json"
    if not p.is_file():
        raise DataError(
            "--necessity: necessity.json not found (give the -o directory of `tracegraph fidelity "
            "necessity` or its necessity.json)",
            p,
        )
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DataError(f"--necessity: not valid JSON ({err.msg})", p, err.lineno) from None
    if not isinstance(doc, dict) or "summary" not in doc:
        raise DataError("--necessity: no 'summary': not a necessity.json", p)
    return doc


def arm_of(name: str) -> tuple[str, int]:
    """Split an arm name such as ``"tracin-margin@4"`` into the arm and k.

    Args:
        name: The arm name.

    Returns:
        ``(arm, k)``.
    """
    arm, k = name.rsplit("@", 1)
    return arm, int(k)


def headline_arm(nec: dict) -> str | None:
    """The arm the headline speaks of: the default method at its largest k, else the first method arm.

    Args:
        nec: The necessity document.

    Returns:
        The arm name (``arm@k``), or None when no method arm was graded.
    """
    arms = [arm_of(n) for n in nec.get("summary", {})]
    methods = [a for a in arms if a[0] not in RANDOM_ARMS]
    if not methods:
        return None
    default = [a for a in methods if a[0] == DEFAULT_EXPLAINER]
    arm, k = max(default, key=lambda a: a[1]) if default else methods[0]
    return f"{arm}@{k}"


def flips(nec: dict, name: str) -> int | None:
    """How many facts the arm's retrain no longer ranks first that the reference did (first seed).

    Args:
        nec: The necessity document.
        name: The arm name (``arm@k``).

    Returns:
        The count, or None when the document has no per-fact ranks.
    """
    seeds = nec.get("seeds") or {}
    if not seeds:
        return None
    first = next(iter(seeds.values()))
    if name not in first or "reference" not in first:
        return None
    ref, after = np.asarray(first["reference"]["ranks"], float), np.asarray(first[name]["ranks"], float)
    return int(np.sum((ref <= 1) & (after > 1)))


def verdict(arm: dict) -> str:
    """What the paired excess over random triples at the same entities says, in words ("" without it).

    Flipping many predictions is not enough: removing any few triples at a fact's entities can
    flip it. The explanation earns its place only where it flips more than those, fact by fact.
    """
    ci = arm.get("above_neighbour_hits@1_ci95_first_seed")
    if not ci:
        return ""
    lo, hi = ci
    if lo > 0:
        return (
            " That is more than the random triples at the same entities, paired fact by fact beyond the 95 % "
            "interval: the explanations name triples these predictions rest on."
        )
    if hi < 0:
        return (
            " That is fewer than the random triples at the same entities, paired fact by fact beyond the 95 % "
            "interval: on this graph the test shows no sign that the explanations chose the right triples."
        )
    return (
        " That is not clearly more than the random triples at the same entities (paired fact by fact, the 95 % "
        "interval of the difference includes zero): removing triples there breaks these predictions, but the "
        "test does not show that the explanations chose the right ones."
    )


def headline(nec: dict) -> str | None:
    """One sentence a reader outside machine learning can follow, in plain HTML.

    Args:
        nec: The necessity document.

    Returns:
        The sentence, or None when nothing was graded.
    """
    name = headline_arm(nec)
    if name is None:
        return None
    arm, k = arm_of(name)
    n = nec.get("n_facts")
    x = flips(nec, name)
    if x is None or n is None:
        return None
    y, z = flips(nec, f"neighbour@{k}"), flips(nec, f"far@{k}")
    t = "triple" if k == 1 else "triples"
    text = (
        f"Removing the {k} training {t} that <b>{e(arm)}</b> names for each of the {n} predictions (all at once, "
        f"then retraining) flips <b>{x} of {n}</b>: the model no longer ranks them first."
    )
    if y is not None:
        text += f" Removing {k} random {t} at the same entities flips <b>{y}</b>"
        text += f"; {k} random {t} elsewhere in the graph flip <b>{z}</b>." if z is not None else "."
    text += verdict(nec["summary"].get(name, {}))
    if len(nec.get("seeds") or {}) > 1:
        text += " (First training seed.)"
    return text


def with_ci(v: dict, key: str) -> str:
    """A summary figure with its first-seed interval, "mean (lo to hi)"; "—" when the summary has none."""
    lo_hi = v.get(f"{key}_ci95_first_seed")
    mean = v[key]["mean"] if isinstance(v.get(key), dict) else v.get(key)
    if mean is None:
        return "—"
    return f"{num(mean)} ({num(lo_hi[0])} to {num(lo_hi[1])})" if lo_hi else num(mean)


def necessity_card(nec: dict) -> tuple[str, str] | None:
    """The headline card: the default method's ΔH@1 beside the neighbour and far arms' at its k.

    Its figure is green when the method broke predictions and its paired excess over the
    neighbour arm clears zero (it chose better than as many random triples at the same
    entities), red otherwise; the excess with its interval follows.

    Args:
        nec: The necessity document.

    Returns:
        ``(title, value HTML)``, or None when no method arm was graded.
    """
    name = headline_arm(nec) if nec.get("summary") else None
    if name is None:
        return None
    arm_name, k = arm_of(name)
    dh1 = {a: (nec["summary"].get(f"{a}@{k}") or {}).get("delta_hits@1", {}).get("mean") for a in ("neighbour", "far")}
    arm = nec["summary"][name]
    ours = arm["delta_hits@1"]["mean"]
    ok = ours > 0 and (arm.get("above_neighbour_hits@1_ci95_first_seed") or [0.0])[0] > 0
    above = ""
    if "above_neighbour_hits@1" in arm:
        above = f" <span class='note'>{with_ci(arm, 'above_neighbour_hits@1')} above neighbour</span>"
    facts = f" ({nec['n_facts']} facts)" if "n_facts" in nec else ""
    return (
        f"necessity ΔH@1{facts}: {arm_name} / neighbour / far",
        f"<span class='{'ok' if ok else 'bad'}'>{num(ours)}</span> / {num(dh1['neighbour'])} / {num(dh1['far'])}{above}",
    )


def necessity_section(nec: dict, files: str = "") -> Section:
    """The necessity table (every arm, its interval, its excess over far and over neighbour) with the headline sentence.

    Args:
        nec: what :func:`read_necessity` returns (or ``{"note": …, "summary": {}}`` when nothing was graded).
        files: where the files are, said under the table (text).
    """
    facts = e((nec.get("protocol") or {}).get("facts", "the test triples the model ranks first"))
    head = f"<h2>Necessity of the explanations</h2><p>Facts: {facts}. {PROTOCOL}</p>"
    if not nec.get("summary"):
        return Section("necessity", head + f"<p class='bad'>{e(nec.get('note', 'nothing graded'))}</p>")
    sentence = headline(nec)
    rows, classes = [], []
    default = headline_arm(nec)
    for name, v in nec["summary"].items():
        arm, k = arm_of(name)
        rows.append(
            [
                e(arm),
                str(k),
                with_ci(v, "delta_hits@1"),
                with_ci(v, "above_far_hits@1"),
                with_ci(v, "above_neighbour_hits@1"),
                num(v["delta_mrr"]["mean"]),
                num(v["hits@1"]["mean"]),
                num(v["mrr"]["mean"]),
                num(v["mean_rank"]["mean"], 1),
                e(v.get("triples_removed", "—")),
                num(v.get("removed_at_fact"), 1),
            ]
        )
        classes.append("default" if name == default else "")
    seconds = f"; explanations {num(nec['explain_seconds'], 0)} s" if "explain_seconds" in nec else ""
    seconds += f", whole test {num(nec['seconds'], 0)} s" if "seconds" in nec else ""
    where = f" Files: <code>{e(files)}</code>." if files else ""
    return Section(
        "necessity",
        head
        + (f"<p class='headline'>{sentence}</p>" if sentence else "")
        + table(
            [
                "arm",
                "k",
                "ΔH@1 (95 % CI)",
                "above far (95 % CI)",
                "above neighbour (95 % CI)",
                "ΔMRR",
                "H@1 after",
                "MRR after",
                "mean rank after",
                "triples removed",
                "at each fact",
            ],
            rows,
            classes,
            num_from=1,
        )
        + f"<p class='note'>{e(nec.get('n_facts', '?'))} facts{seconds}.{where}</p>",
    )


__all__ = ["flips", "headline", "headline_arm", "necessity_card", "necessity_section", "read_necessity", "verdict"]
