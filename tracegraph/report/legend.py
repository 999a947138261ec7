"""The explained section's legend: what each score, column, tag, colour and line on it means.

Built from what the section shows (its tables' headers, a competing answer, marked rows), so every
column of every table has its entry; the drawing's swatches use the drawing's own colours.
"""

from __future__ import annotations

from tracegraph.report.html import e
from tracegraph.report.plots import CONTEXT, HEAD, MARK, OPP, PREDICTION, PRO, TAIL

ROLE = "Its sign makes the row's role: positive, a proponent; negative, an opponent."
SCORES = {
    "margin score": "TracIn of the prediction's lead over the competing answer (the answer's logit minus the "
    "competitor's), summed over the checkpoints: positive, training on the triple widened the lead; negative, "
    "it narrowed it. " + ROLE,
    "cosine score": "TracIn with the gradients' lengths left out (the cosine of the training triple's and the "
    "prediction's gradients, summed over the checkpoints). " + ROLE,
    "RelatIF score": "TracIn divided by the square root of the training triple's influence on itself. " + ROLE,
    "retrain score": "how much the prediction's margin falls when the head's embedding is fitted again without "
    "the triple. " + ROLE,
}
TRACIN = (
    "how much training on the triple raised the prediction's logit (made it more likely), summed over the "
    "checkpoints: learning rate × the dot product of the two gradients."
)
ALONE = (
    "plain TracIn of this answer's own logit, the competing answer left out: positive, training on the triple "
    "raised this answer's score. An opponent can have a positive one: it raised this answer, but the competing "
    "answer more."
)
WALK = (
    "the edges of the shortest walk from the prediction's head to its tail through the triple, in the training "
    "graph; 2 for a direct edge or a two-edge walk, “none” without a walk. Proponents are listed by it first."
)


def _line(color: str, style: str = "solid", width: int = 3) -> str:
    return f'<span class="swatch" style="border-top:{width}px {style} {color}"></span>'


def _dot(color: str, diamond: bool = False) -> str:
    shape = ";border-radius:0;transform:rotate(45deg) scale(.8)" if diamond else ""
    return f'<span class="dot" style="background:{color}{shape}"></span>'


def _columns(triples, columns) -> list[tuple[str, str]]:
    """One entry per distinct table header, in the order they first appear."""
    role = {h for t in triples for c, h, _ in columns(t) if c == t.order_column}
    out = {
        "#": "the row's place in the table.",
        "head, relation, tail": "the training triple; grey text beside a name is its id.",
    }
    for t in triples:
        for _, h, _ in columns(t):
            if h in out:
                continue
            if h == "TracIn":
                out[h] = TRACIN + (" " + ROLE if h in role else "")
                if h in role and any(t.order_column != "TracInScore" for t in triples):
                    out[h] += " Beside another method's score it is shown for reference."
            elif h.startswith("TracIn,"):
                out[h] = ALONE
            elif h == "head–tail walk":
                out[h] = WALK
            else:
                out[h] = SCORES.get(h, f"the {h.removesuffix(' score')} method's score. " + ROLE)
    return list(out.items())


RANK = (
    "the answer's filtered rank among every entity the model could put there, the other known true answers left "
    "out (1: the model's top answer)."
)
SCORE = (
    "the model's logit passed through the sigmoid, between 0 and 1: higher, the model believes the triple more. "
    "A model score, not a standard deviation."
)
COMPETING = (
    "the best-scored answer, other than this one, that the model does not know to be true (in none of the run's "
    "data files). The margin is taken against it, and opponents are the training triples that favoured it."
)
HUB = (
    "tagged on the entity a top proponent shares with the prediction when that entity is a hub: in the top 10 % of "
    "the training graph by degree (hover: its training triples). When half or more of the top proponents are hub "
    "triples, the box says the explanation is mostly popularity."
)


def _drawing(rival: bool, marked: bool, mark_label: str) -> list[tuple[str, str]]:
    """The drawing's entries: a swatch in the drawing's colour and the words (HTML terms, text words)."""
    draw = [
        (_dot(HEAD) + "head", "the prediction's head, on the left."),
        (_dot(TAIL) + "tail", "the prediction's tail, on the right."),
        (_line(PREDICTION, "dotted", 2) + "prediction", "the explained prediction, head to tail."),
    ]
    if rival:
        draw.append(
            (_dot(OPP, diamond=True) + "competing answer", "below the tail; a red dotted line joins it to the head.")
        )
    draw += [
        (_line(PRO, width=4) + "proponent", "a proponent in the table: thicker, higher in the table."),
        (_line(OPP, "dashed", 2) + "opponent", "an opponent in the table."),
    ]
    if marked:
        draw.append((_line(MARK) + e(mark_label), f"a {mark_label} edge."))
    return draw + [
        (_line(CONTEXT, width=1) + "other", "the other ranked training triples (small grey dots: their entities).")
    ]


def _dl(items, escape: bool = True) -> str:
    return "<dl>" + "".join(f"<dt>{e(k) if escape else k}</dt><dd>{e(v)}</dd>" for k, v in items) + "</dl>"


def legend(triples, columns, *, marked: bool = False, mark_label: str = "marked") -> str:
    """The legend's HTML.

    Args:
        triples: the explained triples shown.
        columns: ``columns(t)``: a triple's score columns as (file column, header, format).
        marked: some rows are marked (tagged ``mark_label``, shaded amber, drawn amber).
        mark_label: the mark's words.

    Returns:
        A ``div.legend`` with three lists: scores, table columns and tags, the drawing.
    """
    rival = any(t.rival for t in triples)
    scores = [("rank", RANK), ("score", SCORE)] + ([("competing answer", COMPETING)] if rival else [])
    rows = _columns(triples, columns) + [("hub", HUB)]
    if any("HeadTailWalk" in t.rows.columns for t in triples):
        rows.append(("a line between rows", "a new head–tail walk length starts in the proponent table."))
    if marked:
        rows.append((mark_label, f"amber rows and the “{mark_label}” tag: the triples marked as {mark_label} edges."))
    return (
        "<div class='legend'><h4>How to read the boxes below</h4>"
        + _dl(scores)
        + "<h4>Table columns and tags</h4>"
        + _dl(rows)
        + "<h4>The drawing</h4>"
        + _dl(_drawing(rival, marked, mark_label), escape=False)
        + "</div>"
    )


__all__ = ["legend"]
