"""The demo's ``report.html``.

The report every run gets (tracegraph/report), plus what only the demo has — headline cards, the
recovery of the planted mechanisms, and the demo's own settings and timing.

The explained edges are those ``explain`` wrote with its default method, each row tagged when it is
a planted mechanism edge; the necessity section is the general one, headline sentence included.
"""

from __future__ import annotations

from pathlib import Path

from tracegraph.kg.explain.methods import DEFAULT_EXPLAINER
from tracegraph.kg.run import Run
from tracegraph.report import Section, report_sections, write_page
from tracegraph.report.html import cards, e, num, table
from tracegraph.report.necessity import headline, necessity_card

RECOVERY_LABELS = {
    "tracin": "TracIn",
    "tracin-cosine": "TracIn-cosine",
    "relatif": "RelatIF",
    "tracin-margin": "TracIn margin against the rival",
    "tracin-path": "TracIn within path shells",
    "tracin-margin-path": "margin within path shells (explain's default)",
    "local-retrain": "local retrain (Kelpie-style)",
    "local-newton": "local retrain by one Newton step",
    "random": "random order",
    "degree": "degree",
    "path": "short head–tail paths",
}
BASELINES = ("path", "degree", "random")
ORDER = ["cards", "training", "metrics", "recovery", "necessity", "explanations", "unresolved", "demo", "settings"]


def _mrr_map(rec: dict, m: str) -> tuple[float, float]:
    return rec[m]["mrr"]["mean"] or 0.0, rec[m]["map"]["mean"] or 0.0


def recovery_section(fid: dict) -> Section:
    """The report section on how well each method ranks the planted mechanism edges among each test edge's candidates.

    Args:
        fid: The fidelity report (``recovery``, optionally ``recovery_other_loss``).

    Returns:
        The section.
    """
    rec, other = fid["recovery"], fid.get("recovery_other_loss")
    s = rec["summary"]
    cols = list(next(iter(s.values())).keys())
    loss = rec.get("influence", {}).get("loss", "")
    best = max(s, key=lambda m: _mrr_map(s, m))
    rows, classes = [], []
    for m, v in s.items():
        words = RECOVERY_LABELS.get(m, m) + (
            f" (--loss {loss})" if m.startswith(("tracin", "relatif")) and loss else ""
        )
        rows.append([e(words)] + [f"{num(v[c]['mean'])} ± {num(v[c]['std'], 2)}" for c in cols])
        classes.append("default" if m == DEFAULT_EXPLAINER else "best" if m == best else "")
    if other:
        o = other["summary"]["tracin"]
        rows.append(
            [e(f"TracIn (--loss {other['influence']['loss']}), for comparison")]
            + [f"{num(o[c]['mean'])} ± {num(o[c]['std'], 2)}" for c in cols]
        )
        classes.append("")
    d = rec["definition"]
    return Section(
        "recovery",
        (
            f"<h2>Explanation quality: recovery of the planted mechanisms</h2><p>For each of the {rec['graded']} test "
            f"edges, the candidates are the {e(d['candidates'])} ({num(rec['mean_candidates'], 0)} on average); the "
            f"relevant ones are {e(d['relevant'])}. {num(100 * rec['mechanism_edge_coverage'], 1)} % of the mechanism "
            f"edges lie among the candidates. Mean ± std over test edges; ties {e(d['ties'])}. Green: explain's default; "
            f"bold: the highest MRR.</p>"
            + table(["ranking", "MRR", "MAP", "Hits@1", "Hits@3", "Hits@10", "Recall@10"], rows, classes)
            + f"<p class='note'>MRR: 1/rank of the first mechanism edge. Hits@k: a mechanism edge in the top k. "
            f"Baselines: degree = {e(d['baselines']['degree'])}; paths = {e(d['baselines']['path'])}.</p>"
        ),
    )


def headline_cards(metrics: dict, counts: dict, fidelity: dict) -> Section:
    """The report's headline: explain's default method against the baselines, and the necessity result.

    Args:
        metrics: The test metrics per side.
        counts: The synthetic graph's counts.
        fidelity: The fidelity report (``recovery``, optionally ``necessity``).

    Returns:
        The section.
    """
    rec, nec = fidelity["recovery"]["summary"], fidelity.get("necessity") or {}
    baselines = [m for m in BASELINES[:2] if m in rec]
    items = []
    side = "tail" if "tail" in metrics else "both"
    items.append(
        (
            f"test MRR, {side} side (drug treats ?)",
            f"{num(metrics[side]['mrr'])} <span class='note'>Hits@10 {num(metrics[side]['hits@10'])}</span>",
        )
    )
    if DEFAULT_EXPLAINER in rec:
        d = _mrr_map(rec, DEFAULT_EXPLAINER)
        wins = all(d[0] > _mrr_map(rec, m)[0] and d[1] > _mrr_map(rec, m)[1] for m in baselines)
        items.append(
            (
                f"explain's default, {DEFAULT_EXPLAINER}: mechanism recovery MRR / MAP",
                f"<span class='{'ok' if wins else 'bad'}'>{num(d[0])} / {num(d[1])}</span>",
            )
        )
    items += [
        (f"baseline {m}: recovery MRR / MAP", f"{num(_mrr_map(rec, m)[0])} / {num(_mrr_map(rec, m)[1])}")
        for m in baselines
    ]
    card = necessity_card(nec)
    if card:
        items.append(card)
    elif nec.get("note"):  # nothing to test (no prediction ranked first): said here, explained in its section
        items.append(("necessity ΔH@1", "— <span class='note'>no fact to test (below)</span>"))
    sentence = headline(nec) if card else None
    graph = (
        f"<p>{counts.get('entities')} entities, {counts.get('relations')} relations, {counts.get('train')} training "
        f"triples; {counts.get('test')} held-out <code>treats</code> edges, each planted by a mechanism path of 2–4 "
        f"edges that stays in the training graph.</p>"
    )
    return Section("cards", cards(items) + (f"<p class='headline'>{sentence}</p>" if sentence else "") + graph)


def demo_section(settings: dict, stage_seconds: dict) -> Section:
    """The report section listing the demo's settings and the seconds per stage.

    Args:
        settings: Setting name to value.
        stage_seconds: Stage name to seconds (None for a stage not run).

    Returns:
        The section.
    """
    total = sum(v for v in stage_seconds.values() if v)
    timing = table(
        ["stage", "seconds"],
        [[e(k), num(v, 1)] for k, v in stage_seconds.items()] + [["total (before report)", num(total, 1)]],
    )
    rows = [[e(k), e(str(v))] for k, v in settings.items()]
    return Section(
        "demo",
        "<h2>The demo's settings and timing</h2><div class='two'><div>"
        + table(["setting", "value"], rows, num_from=9)
        + "</div><div>"
        + timing
        + "</div></div>",
    )


def write_report(
    path,
    *,
    run,
    explanations,
    metrics,
    counts,
    fidelity,
    marks,
    settings,
    stage_seconds,
    n_checkpoints: int | None = None,
    device: str = "cpu",
) -> Path:
    """Write the demo's page with the general report writer.

    Args:
        path: ``report.html``.
        run: the demo's :class:`~tracegraph.kg.run.Run`, or the model file to open one on (on ``device``).
        explanations: the directory ``explain`` wrote for the best-predicted test edges.
        metrics: the test metrics per side (the cards').
        counts: the synthetic graph's sizes.
        fidelity: ``fidelity.json``'s content (recovery, necessity).
        marks: test edge (labels) -> its planted mechanism edges (labels).
        settings: the demo's own settings.
        stage_seconds: each stage's wall time.
        n_checkpoints: checkpoints TracIn summed over (said in the explained section).
        device: where to open ``run`` when it is a path.

    Returns:
        The path written.
    """
    if isinstance(run, (str, Path)):
        run = Run(run, device)
    nec = fidelity.get("necessity") or {"note": "no necessity test", "summary": {}}
    ck = f", {n_checkpoints} checkpoints" if n_checkpoints else ""
    intro = (
        f"Each edge is explained by <code>tracegraph explain</code>'s default method, <b>{e(DEFAULT_EXPLAINER)}"
        f"</b> (--loss {e(fidelity['recovery']['influence']['loss'])}, all layers{ck}), over its filtered "
        "subgraph: rows are ordered by the shortest drug–disease walk through the triple (its shell: 2 for a direct "
        "edge or a two-edge walk, then 3, 4, …), then by the margin score against the competing answer (the "
        "best-scored disease the model does not know to be true). "
        "Plain TracIn is the last column. Rows tagged <span class='tag'>mechanism</span> are planted ground-truth "
        "edges."
    )
    general = report_sections(
        run,
        explanations=[explanations],
        necessity=nec,
        marks=marks,
        mark_label="mechanism",
        explained_title="The best-predicted test edges, explained",
        explained_intro=intro,
    )
    mine = [
        headline_cards(metrics, counts, fidelity),
        recovery_section(fidelity),
        demo_section(settings, stage_seconds),
    ]
    by_key = {s.key: s for s in general} | {s.key: s for s in mine}
    sections = [by_key[k] for k in ORDER if k in by_key]
    return write_page(
        path,
        sections,
        title="tracegraph demo",
        subtitle="ConvE link prediction on a synthetic biomedical graph with planted drug mechanisms, "
        "explained with exact TracIn and graded against the ground truth.",
    )


__all__ = ["write_report", "recovery_section", "headline_cards", "demo_section"]
