"""The report's general sections.

Settings, training, metrics (overall and per relation) and the explained test triples
(proponents, opponents, a drawing). Each returns a :class:`Section`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.special import expit  # the logistic function without overflow

from tracegraph.report.explanations import ExplainedTriple
from tracegraph.report.html import Section, breakable, clip, e, img, num, sig, table
from tracegraph.report.plots import subgraph, training_curves

METHOD_WORDS = {
    "tracin": "TracIn",
    "tracin-margin": "TracIn margin",
    "tracin-margin-path": "margin (path shells)",
    "tracin-cosine": "TracIn-cosine",
    "relatif": "RelatIF",
    "tracin-path": "TracIn (path shells)",
    "local-retrain": "local retrain",
    "degree": "degree",
    "path": "path",
    "random": "random",
}
MAX_CONTEXT = 300  # grey edges drawn around an explained triple
SETTING_CHARS = 140  # a longer setting is cut in the middle, whole in its title
PER_RELATION_ROWS = 60  # a graph with more relations lists the most frequent; ranks.csv has them all


def settings_section(config: dict, extra: dict | None = None) -> Section:
    """The section listing every recorded setting of the run (``config.json``, nested keys joined by dots).

    Args:
        config: The run's config.json content.
        extra: More settings to list, or None.

    Returns:
        The section.
    """
    # train.model repeats model (the built model's full configuration) less the sizes: shown once
    flat = _flatten(
        {
            k: ({kk: vv for kk, vv in v.items() if kk != "model"} if k == "train" and isinstance(v, dict) else v)
            for k, v in config.items()
        }
    )
    if extra:
        flat.update(_flatten(extra))
    if not flat:
        return Section("settings", "<h2>Settings</h2><p class='note'>This run has no config.json.</p>")
    # long values (hashes, paths) wrap; past SETTING_CHARS they are cut in the middle, whole on hover
    items = "".join(f"<div><span>{breakable(k)}</span> {clip(v, SETTING_CHARS)}</div>" for k, v in flat.items())
    return Section(
        "settings",
        f"<h2>Settings</h2><p class='note'>From the run's <code>config.json</code>.</p>"
        f"<div class='settings'>{items}</div>",
    )


def _flatten(d: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = "—" if v is None else v
    return out


def training_section(history: list[dict], loss_name: str = "training loss", config: dict | None = None) -> Section:
    """The section with training loss and valid MRR per epoch, under a line of the main settings.

    Args:
        history: The rows of ``training_history.json``.
        loss_name: The loss axis label.
        config: The run's config.json content, for the settings line.

    Returns:
        The section.
    """
    line = _key_settings(config or {})
    if not history:
        return Section(
            "training",
            f"<h2>Training</h2>{line}<p class='note'>This run records no training history "
            "(an imported model, or one trained elsewhere).</p>",
        )
    valid = [r["valid"]["mrr"] for r in history if "mrr" in (r.get("valid") or {})]
    best = f"; best valid MRR {num(max(valid))}" if valid else "; no validation recorded"
    secs = sum(r.get("seconds") or 0 for r in history)
    return Section(
        "training",
        f"<h2>Training</h2>{line}{img(training_curves(history, loss_name), 'training curves')}"
        f"<p>{len(history)} epochs recorded, {num(secs, 0)} s of training{best}.</p>",
    )


def _key_settings(config: dict) -> str:
    """One line of the settings a reader asks for first.

    Every setting is in the Settings section; an imported run records few, and only those recorded
    are named.
    """
    t, m = config.get("train") or {}, config.get("model") or {}

    def phrase(fmt: str, *keys, src=t) -> str:
        return fmt.format(*(src[k] for k in keys)) if all(src.get(k) is not None for k in keys) else ""

    model = [
        phrase("ConvE, embeddings {} ({}×{})", "embedding_dim", "embedding_height", "embedding_width", src=m),
        phrase("{} channels", "output_channels", src=m),
        "reciprocal relations" if m.get("reciprocal") else "",
    ]
    train = [
        phrase("{} epochs", "epochs"),
        phrase("batch {}", "batch_size"),
        phrase("{} at learning rate {}", "optimizer", "learning_rate"),
        phrase("loss {}", "loss"),
        phrase("{}", "training_mode"),
        phrase("label smoothing {}", "label_smoothing"),
        phrase("seed {}", "seed"),
    ]
    source = (config.get("source") or {}).get("format")
    parts = [
        ", ".join(p for p in model if p),
        ", ".join(p for p in train if p),
        f"imported from {source}" if source else "",
    ]
    text = "; ".join(p for p in parts if p)
    return f"<p class='note'>{e(text)}.</p>" if text else ""


def side_metrics(ranks: pd.DataFrame) -> dict[str, dict]:
    """MRR, MR and Hits@1/3/10 per side (tail, head) and over both, from realistic filtered ranks.

    Args:
        ranks: ``ranks.csv`` rows (``side`` and ``rank`` columns).

    Returns:
        Side to its metrics; sides without ranks are left out.
    """
    out = {}
    for side in ("tail", "head", "both"):
        r = (
            ranks["rank"].to_numpy(float)
            if side == "both"
            else ranks.loc[ranks["side"] == side, "rank"].to_numpy(float)
        )
        if len(r):
            out[side] = {
                "count": len(r),
                "mrr": float(np.mean(1 / r)),
                "mr": float(np.mean(r)),
                **{f"hits@{k}": float(np.mean(r <= k)) for k in (1, 3, 10)},
            }
    return out


def metrics_section(ranks: pd.DataFrame | None, source: str, relation_names: dict | None = None) -> Section:
    """The section with filtered-rank metrics overall (per side) and per relation.

    Args:
        ranks: ``ranks.csv`` rows, or None.
        source: Where the ranks came from (HTML).
        relation_names: A relation label's readable name (a KGX run's ``biolink:treats``), shown
            beside it; None for none.

    Returns:
        The section.
    """
    if ranks is None or ranks.empty:
        return Section("metrics", f"<h2>Test metrics</h2><p class='note'>{source}</p>")
    m = side_metrics(ranks)
    rows = [
        [e(s), str(v["count"]), num(v["mrr"]), num(v["mr"], 1), num(v["hits@1"]), num(v["hits@3"]), num(v["hits@10"])]
        for s, v in m.items()
    ]
    overall = table(["side", "ranks", "MRR", "MR", "Hits@1", "Hits@3", "Hits@10"], rows)
    per = []
    groups = sorted(ranks.groupby("relation", sort=False), key=lambda g: (-len(g[1]), str(g[0])))
    for rel, g in groups[:PER_RELATION_ROWS]:
        r = g["rank"].to_numpy(float)
        side = {s: g.loc[g["side"] == s, "rank"].to_numpy(float) for s in ("tail", "head")}
        name = (relation_names or {}).get(rel)
        per.append(
            [
                e(f"{name} ({rel})" if name and name != rel else rel),
                str(int((g["side"] == "tail").sum()) or len(g)),
                *(num(np.mean(1 / side[s])) if len(side[s]) else "—" for s in ("tail", "head")),
                num(np.mean(r <= 1)),
                num(np.mean(r <= 10)),
            ]
        )
    more = (
        f"<p class='note'>The {PER_RELATION_ROWS} most frequent of {len(groups)} relations; ranks.csv has them all.</p>"
        if len(groups) > PER_RELATION_ROWS
        else ""
    )
    return Section(
        "metrics",
        f"<h2>Test metrics</h2><p>Filtered ranks (ties: mean rank), {source}.</p>{overall}"
        f"<h3>Per relation</h3>"
        + table(["relation", "test triples", "MRR tail", "MRR head", "Hits@1", "Hits@10"], per)
        + more,
    )


def _name(name: str, label: str) -> str:
    return e(name) if name == label else f'{e(name)} <span class="note">{e(label)}</span>'


def explained_section(
    triples: list[ExplainedTriple],
    *,
    marks: dict | None = None,
    mark_label: str = "marked",
    n_pro: int = 10,
    n_opp: int = 5,
    title: str = "Explained test triples",
    intro: str = "",
) -> Section:
    """The section on each explained test triple.

    Its rank, score and rival, its proponents and opponents in two tables, and a drawing of its
    ranked training triples around head and tail.

    Args:
        triples: what :func:`~tracegraph.report.explanations.read_explanations` returned.
        marks: test triple (labels) -> the set of its training triples (labels) to tag with ``mark_label``.
        mark_label: the tag's words.
        n_pro: rows shown in the proponent table.
        n_opp: rows shown in the opponent table.
        title: the section's heading (text).
        intro: the section's first paragraph (HTML); empty for the general one.

    Returns:
        The section.
    """
    methods = sorted({t.method for t in triples})
    text = intro or (
        f"Ranked by {e(', '.join(methods))} (<code>tracegraph explain</code>). <b>Proponents</b> support "
        "the prediction (positive score: training on them made it more likely); <b>opponents</b> work "
        "against it (negative score)."
    )
    blocks = "".join(_triple_block(t, (marks or {}).get(t.triple, set()), mark_label, n_pro, n_opp) for t in triples)
    return Section("explanations", f"<h2>{e(title)}</h2><p>{text}</p>{blocks}")


def _columns(t: ExplainedTriple) -> list[tuple[str, str, callable]]:
    cols = []
    if "MethodScore" in t.rows.columns:
        cols.append(("MethodScore", f"{t.method} score", sig))
    if "HeadTailWalk" in t.rows.columns:
        cols.append(
            ("HeadTailWalk", "head–tail walk", lambda w: "none" if not math.isfinite(float(w)) else str(int(w)))
        )
    cols.append(("TracInScore", "TracIn", sig))
    return cols


def _rows_html(frame: pd.DataFrame, t: ExplainedTriple, marked: set, mark_label: str):
    rows, classes = [], []
    for k, (_, r) in enumerate(frame.iterrows(), start=1):
        tri = (str(r["TrainHead"]), str(r["TrainRel"]), str(r["TrainTail"]))
        tag = f' <span class="tag">{e(mark_label)}</span>' if tri in marked else ""
        rows.append(
            [
                str(k),
                _name(str(r.get("TrainHead_label", tri[0])), tri[0]),
                _name(str(r.get("TrainRel_label", tri[1])), tri[1]) + tag,
                _name(str(r.get("TrainTail_label", tri[2])), tri[2]),
                *(fmt(r[c]) for c, _, fmt in _columns(t)),
            ]
        )
        classes.append("mark" if tri in marked else "")
    return rows, classes


def _summary_line(t: ExplainedTriple) -> str:
    rank = "—" if t.rank is None else str(int(t.rank)) if float(t.rank).is_integer() else num(t.rank, 1)
    where = {"explain": "", "ranks.csv": " (from the test metrics)", "computed": " (computed now)"}.get(
        t.rank_source, ""
    )
    score = "—" if t.score is None else f"{num(t.score, 2)} (σ = {expit(t.score):.3f})"
    parts = [f"filtered {e(t.side)} rank <b>{rank}</b>{where}", f"score {score}"]
    if t.rival:
        other = t.rival.get(t.side) or "?"
        name = t.rival.get(f"{t.side}_name") or other
        parts.append(
            f"rival {_name(str(name), str(other))} (score {num(t.rival.get('logit'), 2)}, margin "
            f"{num(t.rival.get('logit_margin'), 2)})"
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


def _triple_block(t: ExplainedTriple, marked: set, mark_label: str, n_pro: int, n_opp: int) -> str:
    pro, opp = t.proponents, t.opponents
    header = ["#", "head", "relation", "tail", *(h for _, h, _ in _columns(t))]
    nf = 4
    prow, pcls = _rows_html(pro.head(n_pro), t, marked, mark_label)
    orow, ocls = _rows_html(opp.head(n_opp), t, marked, mark_label)
    key = "its score" if t.order_column == "MethodScore" else "TracIn"
    if opp.empty:
        opp_html = (
            f"<p class='note'>None of the {len(t.rows)} training triples listed works against this prediction: "
            f"{key} is positive for every one.</p>"
        )
    else:
        few = (
            f"<p class='note'>Only {len(opp)} of the {len(t.rows)} training triples listed have a negative "
            f"{f'{e(t.method)} score' if t.order_column == 'MethodScore' else 'TracIn'}.</p>"
            if len(opp) < n_opp
            else ""
        )
        opp_html = table(header, orow, ocls, num_from=nf) + few
    marks_line = ""
    if marked:

        def where(frame):
            return [
                str(i + 1)
                for i, (_, r) in enumerate(frame.iterrows())
                if (str(r["TrainHead"]), str(r["TrainRel"]), str(r["TrainTail"])) in marked
            ]

        found = [
            f"{what} #{', #'.join(pos)}" for what, pos in (("proponents", where(pro)), ("opponents", where(opp))) if pos
        ]
        marks_line = f"<p class='note'>{len(marked)} {e(mark_label)} edges: {e('; '.join(found) or 'none listed')}.</p>"
    h, r, tl = t.names
    return (
        f'<div class="pred"><h3>{_name(h, t.head)} — {_name(r, t.relation)} → {_name(tl, t.tail)}</h3>'
        + _summary_line(t)
        + marks_line
        + f"<p class='note'>File: <code>{e(t.source.with_suffix('.csv').name)}</code></p>"
        + f"<h4>Top {min(n_pro, len(pro))} proponents</h4>"
        + (table(header, prow, pcls, num_from=nf) if len(pro) else "<p class='note'>No proponent listed.</p>")
        + f"<h4>Top {min(n_opp, len(opp))} opponents</h4>"
        + opp_html
        + _drawing(t, marked, mark_label, n_pro, n_opp)
        + "</div>"
    )


def _drawing(t: ExplainedTriple, marked: set, mark_label: str, n_pro: int, n_opp: int) -> str:
    """The ranked training triples around head and tail: proponents green, opponents red, the rest grey."""
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
            (str(r["TrainHead"]), str(r["TrainRel"]), str(r["TrainTail"])) in marked,
        )
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
    png = subgraph(head, tail, edges, names, context, mark_label=f"{mark_label} edge", n_pro=n_pro, n_opp=n_opp)
    return img(png, f"training triples around {t.names[0]} and {t.names[2]}")


__all__ = ["explained_section", "metrics_section", "settings_section", "side_metrics", "training_section"]
