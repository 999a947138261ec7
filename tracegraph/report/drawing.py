"""The drawing of one explained prediction: its ranked training triples around head and tail.

Head on the left, tail on the right, the competing answer (when the method has one) below the
tail; proponents green, opponents red and dashed, marked triples amber, the rest light grey.
Labels are cut in the middle to distinct texts, and no node sits on the prediction's line, so
the line never runs through a label.
"""

from __future__ import annotations

import numpy as np

from tracegraph.report.plots import CONTEXT, HEAD, MARK, OPP, PREDICTION, PRO, TAIL, _png

LABEL_CHARS = 20  # a node's label is cut to this many characters (report/explained.py lists the full names)
END_CHARS = 36  # the head's, the tail's and the competing answer's, written larger
CLEARANCE = 0.05  # no node closer to the prediction's line than this share of the drawing's height


def middle_cut(name: str, n: int) -> str:
    """``name`` in at most ``n`` characters, cut in the middle: both ends are what tells names apart.

    Args:
        name: The text.
        n: The most characters kept (at least 3).

    Returns:
        The text, or its first and last characters around "…".
    """
    if len(name) <= n:
        return name
    head = n // 2
    return name[:head] + "…" + name[len(name) - (n - 1 - head) :]


def short_labels(names: dict[int, str], n: int = LABEL_CHARS, wide=(), n_wide: int = END_CHARS) -> dict[int, str]:
    """Drawing labels cut in the middle, all distinct.

    Names that would still be cut to the same text keep more characters, up to their full length,
    until they differ.

    Args:
        names: node -> full name.
        n: The length a label is cut to.
        wide: Nodes whose labels may be longer (the prediction's ends, written larger).
        n_wide: Their length.

    Returns:
        node -> label.
    """
    width = {k: n_wide if k in wide else n for k in names}
    out = {k: middle_cut(v, width[k]) for k, v in names.items()}
    while True:
        seen: dict[str, list[int]] = {}
        for k, v in out.items():
            seen.setdefault(v, []).append(k)
        clash = [k for ks in seen.values() if len(ks) > 1 for k in ks if out[k] != names[k]]
        if not clash:
            return out
        for k in clash:
            width[k] += 2
            out[k] = middle_cut(names[k], width[k])


def clear_of_segment(pos: dict, a, b, band: float, keep=()) -> dict:
    """Positions with every node but ``keep`` moved off the segment from ``pos[a]`` to ``pos[b]``.

    A node closer than ``band`` to the segment (its projection between the ends) is moved along
    the segment's normal to distance ``band``, on the side it was on (the upper one when on it),
    so the line and the label written beside the node stay apart.

    Args:
        pos: node -> (x, y).
        a: The segment's first end (a node).
        b: The other end.
        band: The distance kept, in the positions' units.
        keep: Nodes left where they are (the ends always are).

    Returns:
        A new dict of positions.
    """
    p, q = np.asarray(pos[a], float), np.asarray(pos[b], float)
    d = q - p
    length = float(np.hypot(*d))
    out = {k: np.asarray(v, float) for k, v in pos.items()}
    if length == 0:
        return out
    u = d / length
    normal = np.array([-u[1], u[0]])
    for k, v in out.items():
        if k in (a, b) or k in keep:
            continue
        along, off = float((v - p) @ u), float((v - p) @ normal)
        if 0 <= along <= length and abs(off) < band:
            out[k] = p + along * u + (band if off >= 0 else -band) * normal
    return out


def _layout(head: int, tail: int, rival, g) -> dict:
    """Kamada–Kawai, then head left, tail right, the rival below the tail, the rest relaxed around them."""
    import networkx as nx

    try:
        pos = nx.kamada_kawai_layout(g)
    except Exception:  # noqa: BLE001 - degenerate graph: start from a spring layout
        pos = nx.spring_layout(g, seed=0)
    # head left, tail right (they are often adjacent and would cover each other); relax the rest
    span = max(np.ptp(np.array(list(pos.values())), axis=0).max(), 1e-9)
    pos[head], pos[tail] = np.array([-0.3 * span, 0.0]), np.array([0.3 * span, 0.0])
    fixed = [head, tail]
    if rival is not None:
        pos[rival] = np.array([0.3 * span, -0.35 * span])
        fixed.append(rival)
    if len(g) > len(fixed):
        pos = nx.spring_layout(g, pos=pos, fixed=fixed, seed=0, iterations=30, k=span / np.sqrt(len(g)))
    height = max(float(np.ptp(np.array(list(pos.values()))[:, 1])), 0.3 * span)
    if rival is not None:  # the competing answer's line too; the prediction's last, so it wins where they meet
        pos = clear_of_segment(pos, head, rival, CLEARANCE * height, keep=fixed)
    return clear_of_segment(pos, head, tail, CLEARANCE * height, keep=fixed)


def _edges(ax, pos, edges, context, head, tail, rival) -> None:
    from matplotlib.collections import LineCollection

    if context:  # hundreds of thin lines: one collection draws them many times faster than one plot each
        segments = [(pos[u], pos[v]) for u, v in context]
        ax.add_collection(LineCollection(segments, colors=CONTEXT, linewidths=0.6, zorder=0))
    ax.plot(*zip(pos[head], pos[tail]), ls=":", color=PREDICTION, lw=1.5, zorder=0)
    if rival is not None:
        ax.plot(*zip(pos[head], pos[rival]), ls=":", color=OPP, lw=1.2, zorder=0)
    for u, v, rank, kind in sorted(edges, key=lambda x: -x[2]):
        color = MARK if kind.startswith("marked") else PRO if kind == "proponent" else OPP
        width = 1.2 + (3.5 * (10 - rank) / 10 if "proponent" in kind and rank < 10 else 0.6 * kind.startswith("marked"))
        ax.plot(
            *zip(pos[u], pos[v]),
            color=color,
            lw=width,
            ls="--" if kind == "opponent" else "-",
            alpha=0.9,
            zorder=1,
            solid_capstyle="round",
        )


def _nodes(ax, pos, g, named, ends: dict, labels) -> dict:
    """Draw the nodes and write their labels; returns node -> its label (a matplotlib Annotation)."""
    head, tail, rival = ends["head"], ends["tail"], ends.get("rival")
    rest = [n for n in g if n not in named and n not in ends.values()]
    xy = np.array([pos[n] for n in rest]).reshape(-1, 2)
    ax.scatter(xy[:, 0], xy[:, 1], s=10, color="#e2e8f0", edgecolor="#94a3b8", lw=0.5, zorder=2)
    xy = np.array([pos[n] for n in named]).reshape(-1, 2)
    ax.scatter(xy[:, 0], xy[:, 1], s=45, color="#f8fafc", edgecolor="#475569", zorder=2)
    ax.scatter(*pos[head], s=200, color=HEAD, zorder=3)
    ax.scatter(*pos[tail], s=200, color=TAIL, zorder=3)
    if rival is not None:
        ax.scatter(*pos[rival], s=150, marker="D", color=OPP, zorder=3)
    colour = {head: HEAD, tail: TAIL, rival: OPP}
    out = {}
    for n in [head, tail, *([rival] if rival is not None else []), *sorted(named)]:
        bold = n in colour
        text = labels.get(n, str(n))
        out[n] = ax.annotate(
            f"competing answer: {text}" if n == rival else text,
            pos[n],
            xytext=(0, 10 if n == head else -16 if bold else 7),  # head above, tail and rival below
            textcoords="offset points",
            ha="center",
            fontsize=8.5 if bold else 6.5,
            weight="bold" if bold else "normal",
            zorder=4,
            color=colour.get(n, "#1e293b"),
            bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.75},
        )
    return out


def place_labels(fig, ax, notes: dict, pos: dict, line: tuple, fixed=()) -> None:
    """Move each label (but ``fixed``'s) to the first spot that covers no placed label and not ``line``.

    The spots tried: above the node, then below, then further up and down; a label that finds none
    keeps the first spot clear of the line.

    Args:
        fig: The figure (its renderer measures the labels).
        ax: The axes.
        notes: node -> its label (Annotation), placed in this order.
        pos: node -> (x, y) in data coordinates.
        line: The prediction's two ends (nodes): no label may cover the line between them.
        fixed: Nodes whose labels stay where they are (they still count as placed).
    """
    renderer = fig.canvas.get_renderer()
    a, b = ax.transData.transform([pos[line[0]], pos[line[1]]])
    on_line = a + np.linspace(0, 1, 200)[:, None] * (b - a)
    placed = [notes[n].get_window_extent(renderer) for n in fixed]
    for n, note in notes.items():
        if n in fixed:
            continue
        h = note.get_window_extent(renderer).height * 72 / fig.dpi + 1
        spots = [7, -16, 7 + h, -16 - h, 7 + 2 * h, -16 - 2 * h]
        clear = None
        for dy in spots:
            note.xyann = (0, dy)
            box = note.get_window_extent(renderer)
            if box.count_contains(on_line):
                continue
            clear = dy if clear is None else clear
            if not any(box.overlaps(p) for p in placed):
                break
        else:
            note.xyann = (0, spots[0] if clear is None else clear)
        placed.append(note.get_window_extent(renderer))


def _legend(ax, kinds, context, rival, mark_label, n_pro, n_opp) -> None:
    from matplotlib.lines import Line2D

    legend = [
        (any(k.startswith("marked") for k in kinds), Line2D([], [], color=MARK, lw=2.5, label=mark_label)),
        (
            "proponent" in kinds or "marked+proponent" in kinds,
            Line2D([], [], color=PRO, lw=3, label=f"top-{n_pro} proponent (thicker = higher in the table)"),
        ),
        ("opponent" in kinds, Line2D([], [], color=OPP, lw=1.2, ls="--", label=f"top-{n_opp} opponent")),
        (True, Line2D([], [], color=PREDICTION, lw=1.5, ls=":", label="the explained prediction")),
        (
            rival is not None,
            Line2D([], [], color=OPP, lw=1.2, ls=":", marker="D", ms=5, label="the competing answer"),
        ),
        (bool(context), Line2D([], [], color=CONTEXT, lw=1, label="other ranked training triples")),
    ]
    ax.legend(
        handles=[h for shown, h in legend if shown],
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=3,
        fontsize=7,
        frameon=False,
    )


def figure(
    head: int,
    tail: int,
    edges: list[tuple[int, int, int, str]],
    labels: dict[int, str],
    context: list[tuple[int, int]] = (),
    mark_label: str = "marked edge",
    n_pro: int = 10,
    n_opp: int = 5,
    rival: int | None = None,
):
    """The training triples around one explained prediction, drawn as an undirected graph.

    Args:
        head: the prediction's head entity (drawn large, on the left).
        tail: the prediction's tail entity (drawn large, on the right).
        edges: (u, v, rank, kind), kind proponent / opponent / marked / marked+proponent; rank 0 is
            the strongest proponent (drawn thickest).
        labels: node -> the label written beside it, as given (see :func:`short_labels`).
        context: the other ranked edges (thin grey); they also hold the picture together, since
            highlighted edges need not touch the head or the tail.
        mark_label: the legend's words for marked edges (shown only when there are some).
        n_pro: how many proponents the tables show (for the legend).
        n_opp: how many opponents the tables show (for the legend).
        rival: the competing answer (a red diamond below the tail, joined to the head by a red
            dotted line), or None.

    Returns:
        ``(figure, labels, positions)``: the matplotlib figure, node -> its label (Annotation), and
        node -> its (x, y).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from([head, tail, *([rival] if rival is not None else [])])
    g.add_edges_from((u, v) for u, v in context if u != v)
    g.add_edges_from((u, v) for u, v, _, _ in edges if u != v)
    pos = _layout(head, tail, rival, g)
    fig, ax = plt.subplots(figsize=(8, 5.2))
    _edges(ax, pos, edges, context, head, tail, rival)
    named = {n for u, v, _, _ in edges for n in (u, v)} - {head, tail, rival}
    ends = {"head": head, "tail": tail, **({"rival": rival} if rival is not None else {})}
    notes = _nodes(ax, pos, g, named, ends, labels)
    _legend(ax, {k for _, _, _, k in edges}, context, rival, mark_label, n_pro, n_opp)
    ax.set_axis_off()
    ax.margins(0.06)
    fig.tight_layout()
    place_labels(fig, ax, notes, pos, (head, tail), fixed=list(ends.values()))
    return fig, notes, pos


def subgraph(*args, **kwargs) -> bytes:
    """:func:`figure` as PNG bytes (what the report embeds).

    Args:
        *args: :func:`figure`'s arguments.
        **kwargs: :func:`figure`'s keyword arguments.

    Returns:
        PNG bytes.
    """
    return _png(figure(*args, **kwargs)[0])


__all__ = ["clear_of_segment", "figure", "middle_cut", "place_labels", "short_labels", "subgraph"]
