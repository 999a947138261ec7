"""The explained test triples' section: one box per prediction, under one legend.

Each box holds the prediction's rank and score, the competing answer of the margin methods, the
proponents and opponents in two tables (each saying how it is ordered and what its sign means),
whether the proponents are mostly hub triples (report/hubs.py), and a drawing (report/drawing.py).
"""

from __future__ import annotations

import math

import pandas as pd
from scipy.special import expit  # the logistic function without overflow

from tracegraph.report import drawing
from tracegraph.report.explanations import ExplainedTriple
from tracegraph.report.html import Section, breakable, e, img, num, sig, table
from tracegraph.report.hubs import HubGraph, Popularity, popularity
from tracegraph.report.legend import legend

MAX_CONTEXT = 300  # grey edges drawn around an explained triple
MARGIN_METHODS = ("tracin-margin", "tracin-margin-path")
SCORE_WORDS = {  # the header of a method's own score column (MethodScore)
    "tracin-margin": "margin score",
    "tracin-margin-path": "margin score",
    "tracin-cosine": "cosine score",
    "relatif": "RelatIF score",
    "local-retrain": "retrain score",
    "local-newton": "Newton-step score",
    "tracin-margin-query": "query-first order",
}
WALK = "head–tail walk"


def role_header(t: ExplainedTriple) -> str:
    """The header of the column whose sign makes a row a proponent or an opponent."""
    return SCORE_WORDS.get(t.method, f"{t.method} score") if t.order_column == "MethodScore" else "TracIn"


def tracin_header(t: ExplainedTriple) -> str:
    """The plain TracIn column's header: beside a margin it is the answer's own score alone."""
    return "TracIn, this answer alone" if t.method in MARGIN_METHODS and "MethodScore" in t.rows.columns else "TracIn"


def columns(t: ExplainedTriple) -> list[tuple[str, str, callable]]:
    """The score columns of a triple's tables: (file column, header, cell format), in page order."""
    cols = []
    if "MethodScore" in t.rows.columns:
        cols.append(("MethodScore", role_header(t), sig))
    if "HeadTailWalk" in t.rows.columns:
        cols.append(("HeadTailWalk", WALK, lambda w: "none" if not math.isfinite(float(w)) else str(int(w))))
    cols.append(("TracInScore", tracin_header(t), sig))
    return cols


def _name(name: str, label: str, tag: str = "") -> str:
    shown = breakable(name) if name == label else f'{breakable(name)} <span class="note">{breakable(label)}</span>'
    return shown + tag


def _tri(r) -> tuple[str, str, str]:
    return str(r["TrainHead"]), str(r["TrainRel"]), str(r["TrainTail"])


def _rows_html(
    frame: pd.DataFrame, t: ExplainedTriple, marked: set, mark_label: str, hubs=(), graph=None, groups=False
):
    """Table rows and their classes.

    ``hubs[k]``, a hub entity shared by row k, is tagged where it stands; with ``groups`` a row
    starting a new head–tail walk shell gets the class ``group`` (a line above it).
    """
    rows, classes = [], []
    walks = frame["HeadTailWalk"].tolist() if groups and "HeadTailWalk" in frame.columns else []
    for k, (_, r) in enumerate(frame.iterrows()):
        tri = _tri(r)
        hub = hubs[k] if k < len(hubs) else None
        tags = ["", ""]
        if hub is not None:
            tags[tri[0] != hub] = f' <span class="hub" title="in {graph.degree[hub]} training triples">hub</span>'
        mark = f' <span class="tag">{e(mark_label)}</span>' if tri in marked else ""
        rows.append(
            [
                str(k + 1),
                _name(str(r.get("TrainHead_label", tri[0])), tri[0], tags[0]),
                _name(str(r.get("TrainRel_label", tri[1])), tri[1], mark),
                _name(str(r.get("TrainTail_label", tri[2])), tri[2], tags[1]),
                *(fmt(r[c]) for c, _, fmt in columns(t)),
            ]
        )
        group = 0 < k and walks and _shell(walks[k]) != _shell(walks[k - 1])
        classes.append(" ".join(c for c, on in (("mark", tri in marked), ("group", group)) if on))
    return rows, classes


def _shell(walk) -> float:
    w = float(walk)
    return max(w, 2.0) if math.isfinite(w) else math.inf


def _score(logit) -> str:
    return "—" if logit is None else f"{expit(float(logit)):.3f}"


def _summary_line(t: ExplainedTriple) -> str:
    rank = "—" if t.rank is None else str(int(t.rank)) if float(t.rank).is_integer() else num(t.rank, 1)
    where = {"explain": "", "ranks.csv": " (from the test metrics)", "computed": " (computed now)"}.get(
        t.rank_source, ""
    )
    score = (
        "score —" if t.score is None else f"score {_score(t.score)} (sigmoid of the model's logit {num(t.score, 2)})"
    )
    parts = [f"filtered {e(t.side)} rank <b>{rank}</b>{where}", score]
    if t.rival:
        other = t.rival.get(t.side) or "?"
        name = t.rival.get(f"{t.side}_name") or other
        parts.append(
            f"competing answer <b>{_name(str(name), str(other))}</b>, the best-scored {e(t.side)} the model does "
            f"not know to be true: score {_score(t.rival.get('logit'))} (logit {num(t.rival.get('logit'), 2)}), "
            f"lead over it {num(t.rival.get('logit_margin'), 2)} in logits"
        )
    n_ckpt = len(t.meta.get("checkpoints") or [])
    ranked = t.meta.get("training_triples_ranked")
    how = (
        f"{e(t.method)}"
        + (f", --loss {e(t.loss)}" if t.loss else "")
        + (f", {n_ckpt} checkpoint{'s' * (n_ckpt != 1)}" if n_ckpt else "")
        + (f", {ranked} training triples ranked" if ranked is not None else "")
        + (f", top {t.meta['top_k']} kept each way" if t.meta.get("top_k") else "")
    )
    return f"<p class='sub'>{'; '.join(parts)}.<br>Explained by {how}.</p>"


def order_note(t: ExplainedTriple) -> str:
    """How the proponent table is ordered, said beside it."""
    key = e(role_header(t))
    if "HeadTailWalk" in t.rows.columns:
        return (
            f"<p class='note'>Listed by head–tail walk first (shorter first; 2 counts a direct edge with the "
            f"two-edge walks), then by {key} within each walk length, so the {key} falls within each group "
            "(a line marks where a group starts), not down the whole table.</p>"
        )
    return f"<p class='note'>Largest {key} first.</p>"


def opponents_note(t: ExplainedTriple, shown: pd.DataFrame) -> str:
    """What an opponent is here: which score is negative and what that means."""
    key = e(role_header(t))
    if t.method in MARGIN_METHODS and t.order_column == "MethodScore":
        rival = (t.rival or {}).get(f"{t.side}_name") or (t.rival or {}).get(t.side) or "the competing answer"
        what = f"training on each narrowed the lead of {e(t.names[2 if t.side == 'tail' else 0])} over {e(rival)}"
        if (shown["TracInScore"].astype(float) > 0).any():
            what += (
                ". Their plain TracIn (the last column) can still be positive: training on them raised this "
                "answer's own score, but the competing answer's more"
            )
    elif t.order_column == "TracInScore":
        what = "training on each lowered the prediction's score"
    else:
        what = f"{e(t.method)} counts each against the prediction"
    return f"<p class='note'>Negative {key}: {what}. Most negative first.</p>"


def _entity_names(t: ExplainedTriple) -> dict[str, str]:
    """Entity label -> display name, from the triple and its rows' label columns."""
    out = {}
    for c in ("TrainHead", "TrainTail"):
        if c in t.rows.columns:
            names = t.rows[f"{c}_label"] if f"{c}_label" in t.rows.columns else t.rows[c]
            out.update(zip(t.rows[c].astype(str), names.astype(str)))
    return out | {t.head: t.names[0], t.tail: t.names[2]}


def popularity_note(pop: Popularity | None, t: ExplainedTriple) -> str:
    """Whether the top proponents are mostly hub triples (report/hubs.py), in words."""
    if pop is None:
        return ""
    names = _entity_names(t)
    k, x = len(pop.shared), pop.hub_triples
    hubs = list(dict.fromkeys(s for s in pop.shared if s is not None))
    which = f" ({', '.join(e(names.get(s, s)) for s in hubs)})" if hubs else ""
    ends = " ".join(
        f"The {side} {e(names[label])} is itself a hub, in {deg} training triples."
        for side, label, deg in (("head", t.head, pop.head_hub), ("tail", t.tail, pop.tail_hub))
        if deg is not None and label not in hubs
    )
    rule = (
        f"{x} of the top {k} proponents reach this prediction through a hub{which}: an entity in the top 10 % of "
        f"the training graph by degree, in {pop.threshold} or more training triples."
    )
    if pop.mostly:
        return (
            f"<p class='popular'><b>Mostly popularity, not a mechanism.</b> {rule} Many other entities share such "
            "a neighbour, so these rows say more about how connected it is than about why this prediction holds."
            f"{' ' + ends if ends else ''}</p>"
        )
    return f"<p class='note'>{rule}{' ' + ends if ends else ''}</p>"


def _marks_line(t: ExplainedTriple, marked: set, mark_label: str) -> str:
    if not marked:
        return ""
    found = [
        f"{what} #{', #'.join(pos)}"
        for what, frame in (("proponents", t.proponents), ("opponents", t.opponents))
        if (pos := [str(i + 1) for i, (_, r) in enumerate(frame.iterrows()) if _tri(r) in marked])
    ]
    return f"<p class='note'>{len(marked)} {e(mark_label)} edges: {e('; '.join(found) or 'none listed')}.</p>"


def _opponents_html(t, header, orow, ocls, n_opp) -> str:
    opp = t.opponents
    if opp.empty:
        return (
            f"<p class='note'>None of the {len(t.rows)} training triples listed works against this prediction: "
            f"its {e(role_header(t))} is positive for every one.</p>"
        )
    few = (
        f"<p class='note'>Only {len(opp)} of the {len(t.rows)} training triples listed have a negative "
        f"{e(role_header(t))}.</p>"
        if len(opp) < n_opp
        else ""
    )
    return opponents_note(t, opp.head(n_opp)) + table(header, orow, ocls, num_from=4) + few


def _triple_block(t: ExplainedTriple, marked: set, mark_label: str, n_pro: int, n_opp: int, graph) -> str:
    pro, opp = t.proponents.head(n_pro), t.opponents.head(n_opp)
    header = ["#", "head", "relation", "tail", *(h for _, h, _ in columns(t))]
    pop = popularity([_tri(r) for _, r in pro.iterrows()], t.head, t.tail, graph)
    prow, pcls = _rows_html(pro, t, marked, mark_label, pop.shared if pop else (), graph, groups=True)
    orow, ocls = _rows_html(opp, t, marked, mark_label)
    h, r, tl = t.names
    return (
        f'<div class="pred"><h3>{_name(h, t.head)} — {_name(r, t.relation)} → {_name(tl, t.tail)}</h3>'
        + _summary_line(t)
        + _marks_line(t, marked, mark_label)
        + f"<p class='note'>File: <code>{e(t.source.with_suffix('.csv').name)}</code></p>"
        + f"<h4>Top {len(pro)} proponents</h4>"
        + (
            order_note(t) + table(header, prow, pcls, num_from=4)
            if len(pro)
            else "<p class='note'>No proponent listed.</p>"
        )
        + popularity_note(pop, t)
        + f"<h4>Top {len(opp)} opponents</h4>"
        + _opponents_html(t, header, orow, ocls, n_opp)
        + _drawing(t, marked, mark_label, n_pro, n_opp)
        + "</div>"
    )


def explained_section(
    triples: list[ExplainedTriple],
    *,
    marks: dict | None = None,
    mark_label: str = "marked",
    n_pro: int = 10,
    n_opp: int = 5,
    title: str = "Explained test triples",
    intro: str = "",
    graph: HubGraph | None = None,
) -> Section:
    """The section on each explained test triple, under a legend of its columns, colours and lines.

    Per triple: its rank and score, the competing answer, its proponents and opponents in two
    tables, whether the proponents are mostly hub triples, and a drawing of its ranked training
    triples around head and tail.

    Args:
        triples: what :func:`~tracegraph.report.explanations.read_explanations` returned.
        marks: test triple (labels) -> the set of its training triples (labels) to tag with ``mark_label``.
        mark_label: the tag's words.
        n_pro: rows shown in the proponent table.
        n_opp: rows shown in the opponent table.
        title: the section's heading (text).
        intro: the section's first paragraph (HTML); empty for the general one.
        graph: the training graph's degrees for the hub check (report/hubs.py); None: not checked.

    Returns:
        The section.
    """
    methods = sorted({t.method for t in triples})
    text = intro or (
        f"Ranked by {e(', '.join(methods))} (<code>tracegraph explain</code>). <b>Proponents</b> support the "
        "prediction and <b>opponents</b> work against it: the sign of the first score column decides (positive: "
        "proponent, negative: opponent). The legend says what each score, colour and line is."
    )
    marks = marks or {}
    key = legend(triples, columns, marked=any(marks.get(t.triple) for t in triples), mark_label=mark_label)
    blocks = "".join(_triple_block(t, marks.get(t.triple, set()), mark_label, n_pro, n_opp, graph) for t in triples)
    hubs = "" if graph is not None else "<p class='note'>Hubs not checked: the run's training file is not at hand.</p>"
    return Section("explanations", f"<h2>{e(title)}</h2><p>{text}</p>{key}{hubs}{blocks}")


def _drawing(t: ExplainedTriple, marked: set, mark_label: str, n_pro: int, n_opp: int) -> str:
    """The ranked training triples around head and tail, and the full names of labels cut short."""
    if t.rows.empty:
        return ""
    ids: dict[str, int] = {}
    names: dict[int, str] = {}

    def node(label, name):
        if label not in ids:
            ids[label] = len(ids)
            names[ids[label]] = name
        return ids[label]

    head, tail = node(t.head, t.names[0]), node(t.tail, t.names[2])
    ends = {}
    for i, r in t.rows.iterrows():
        ends[i] = (
            node(str(r["TrainHead"]), str(r.get("TrainHead_label", r["TrainHead"]))),
            node(str(r["TrainTail"]), str(r.get("TrainTail_label", r["TrainTail"]))),
            _tri(r) in marked,
        )
    other = (t.rival or {}).get(t.side)
    rival = node(str(other), str(t.rival.get(f"{t.side}_name") or other)) if other else None
    edges, shown = [], set()
    for k, i in enumerate(t.proponents.index[:n_pro]):
        edges.append((*ends[i][:2], k, "marked+proponent" if ends[i][2] else "proponent"))
        shown.add(i)
    for i in t.opponents.index[:n_opp]:
        edges.append((*ends[i][:2], 99, "opponent"))
        shown.add(i)
    for i, (u, v, m) in ends.items():
        if m and i not in shown:
            edges.append((u, v, 99, "marked"))
            shown.add(i)
    # the best-ranked of the rest (an explanation of every training triple would be an unreadable hairball)
    context = [ends[i][:2] for i in ends if i not in shown][:MAX_CONTEXT]
    drawn = {n for u, v, _, _ in edges for n in (u, v)} | {head, tail} | ({rival} if rival is not None else set())
    labels = drawing.short_labels({n: names[n] for n in sorted(drawn)}, wide={head, tail, rival})
    # the legend names the tables' counts: an explanation kept with --top-k 5 has 5 proponents, not n_pro
    n_pro, n_opp = min(n_pro, len(t.proponents)), min(n_opp, len(t.opponents))
    png = drawing.subgraph(
        head, tail, edges, labels, context, mark_label=f"{mark_label} edge", n_pro=n_pro, n_opp=n_opp, rival=rival
    )
    cut = [(labels[n], names[n]) for n in sorted(drawn) if labels[n] != names[n]]
    key = (
        "<p class='note'>Names cut short in the drawing:</p><ul class='keys'>"
        + "".join(f"<li><b>{e(a)}</b>: {e(b)}</li>" for a, b in cut)
        + "</ul>"
        if cut
        else ""
    )
    return img(png, f"training triples around {t.names[0]} and {t.names[2]}") + key


__all__ = ["columns", "explained_section", "opponents_note", "order_note", "popularity_note", "role_header"]
