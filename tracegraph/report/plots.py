"""The report's pictures (matplotlib, Agg backend) as PNG bytes: training curves and subgraphs."""

from __future__ import annotations

import io

import numpy as np

MARK = "#d97706"  # marked edges, e.g. the demo's planted mechanisms (amber)
PRO = "#15803d"  # proponents (green)
OPP = "#b91c1c"  # opponents, and the competing answer they favour (red)
HEAD, TAIL = "#2563eb", "#7c3aed"  # the explained prediction's head (blue) and tail (purple)
CONTEXT = "#cbd5e1"  # the other ranked training triples (light grey)
PREDICTION = "#64748b"  # the explained prediction's line (slate, dotted)


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def training_curves(history: list[dict], loss_name: str = "training loss") -> bytes:
    """Plot training loss (log scale) and valid MRR per epoch side by side.

    Args:
        history: The rows of ``training_history.json``.
        loss_name: The loss axis label.

    Returns:
        The figure as PNG bytes.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.0))
    loss = [(r["epoch"], r["loss"]) for r in history if "epoch" in r and r.get("loss") is not None]
    if loss:
        a.plot(*zip(*loss), color="#334155")
        if min(v for _, v in loss) > 0:
            a.set_yscale("log")
    a.set_xlabel("epoch")
    a.set_ylabel(loss_name)
    v = [(r["epoch"], r["valid"]["mrr"]) for r in history if "epoch" in r and "mrr" in (r.get("valid") or {})]
    if v:
        b.plot(*zip(*v), marker="o", ms=3, color=HEAD)
    b.set_xlabel("epoch")
    b.set_ylabel("valid MRR (filtered)")
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return _png(fig)


def _short(name: str, n: int = 18) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def subgraph(
    head: int,
    tail: int,
    edges: list[tuple[int, int, int, str]],
    labels: dict[int, str],
    context: list[tuple[int, int]] = (),
    mark_label: str = "marked edge",
    n_pro: int = 10,
    n_opp: int = 5,
) -> bytes:
    """The training triples around one explained prediction, drawn as an undirected graph.

    Args:
        head: the prediction's head entity (drawn large, on the left).
        tail: the prediction's tail entity (drawn large, on the right).
        edges: (u, v, rank, kind), kind proponent / opponent / marked / marked+proponent; rank 0 is
            the strongest proponent (drawn thickest).
        labels: node -> the name written beside it.
        context: the other ranked edges (thin grey); they also hold the picture together, since
            highlighted edges need not touch the head or the tail.
        mark_label: the legend's words for marked edges (shown only when there are some).
        n_pro: how many proponents the tables show (for the legend).
        n_opp: how many opponents the tables show (for the legend).

    Returns:
        PNG bytes.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    g = nx.Graph()
    g.add_nodes_from([head, tail])
    g.add_edges_from((u, v) for u, v in context if u != v)
    g.add_edges_from((u, v) for u, v, _, _ in edges if u != v)
    try:
        pos = nx.kamada_kawai_layout(g)
    except Exception:  # noqa: BLE001 - degenerate graph: start from a spring layout
        pos = nx.spring_layout(g, seed=0)
    # head left, tail right (they are often adjacent and would cover each other); relax the rest
    span = max(np.ptp(np.array(list(pos.values())), axis=0).max(), 1e-9)
    pos[head], pos[tail] = np.array([-0.3 * span, 0.0]), np.array([0.3 * span, 0.0])
    if len(g) > 2:
        pos = nx.spring_layout(g, pos=pos, fixed=[head, tail], seed=0, iterations=30, k=span / np.sqrt(len(g)))
    fig, ax = plt.subplots(figsize=(8, 5.2))
    if context:  # hundreds of thin lines: one collection draws them many times faster than one plot each
        segments = [(pos[u], pos[v]) for u, v in context]
        ax.add_collection(LineCollection(segments, colors="#cbd5e1", linewidths=0.6, zorder=0))
    ax.plot(*zip(pos[head], pos[tail]), ls=":", color="#64748b", lw=1.5, zorder=0)
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
    named = {n for u, v, _, _ in edges for n in (u, v)} - {head, tail}
    rest = [n for n in g if n not in named and n not in (head, tail)]
    ax.scatter(
        [pos[n][0] for n in rest],
        [pos[n][1] for n in rest],
        s=10,
        color="#e2e8f0",
        edgecolor="#94a3b8",
        lw=0.5,
        zorder=2,
    )
    ax.scatter(
        [pos[n][0] for n in named], [pos[n][1] for n in named], s=45, color="#f8fafc", edgecolor="#475569", zorder=2
    )
    ax.scatter(*pos[head], s=200, color=HEAD, zorder=3)
    ax.scatter(*pos[tail], s=200, color=TAIL, zorder=3)
    for n in [*named, head, tail]:
        bold = n in (head, tail)
        dy = 10 if n == head else -16 if n == tail else 7  # head above, tail below: they often sit close
        ax.annotate(
            _short(labels.get(n, str(n)), 26 if bold else 18),
            pos[n],
            xytext=(0, dy),
            textcoords="offset points",
            ha="center",
            fontsize=8.5 if bold else 6.5,
            weight="bold" if bold else "normal",
            zorder=4,
            color=HEAD if n == head else TAIL if n == tail else "#1e293b",
        )
    kinds = {k for _, _, _, k in edges}
    legend = [
        (any(k.startswith("marked") for k in kinds), Line2D([], [], color=MARK, lw=2.5, label=mark_label)),
        (
            "proponent" in kinds or "marked+proponent" in kinds,
            Line2D([], [], color=PRO, lw=3, label=f"top-{n_pro} proponent (thicker = stronger)"),
        ),
        ("opponent" in kinds, Line2D([], [], color=OPP, lw=1.2, ls="--", label=f"top-{n_opp} opponent")),
        (True, Line2D([], [], color="#64748b", lw=1.5, ls=":", label="the explained prediction")),
        (bool(context), Line2D([], [], color="#cbd5e1", lw=1, label="other ranked training triples")),
    ]
    ax.legend(
        handles=[h for shown, h in legend if shown],
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=3,
        fontsize=7,
        frameon=False,
    )
    ax.set_axis_off()
    ax.margins(0.06)
    fig.tight_layout()
    return _png(fig)
