"""The report's pictures (matplotlib, Agg backend) as PNG bytes, and their colours.

The training curves are drawn here; the drawing of an explained prediction is report/drawing.py's.
"""

from __future__ import annotations

import io


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


def forest_rows(summary: dict[str, dict]) -> list[tuple[str, str, dict]]:
    """The rows of a necessity forest plot: ``(arm, label, {filtering: (ΔH@1, low, high)})``.

    Args:
        summary: A side-by-side summary, arm -> its figures (``compare.json``'s ``summary``).

    Returns:
        One row per arm in the faithfulness tables' order, labelled as there (without markdown).
    """
    from tracegraph.kg.explain.compare_cells import arm_title, in_table_order
    from tracegraph.kg.explain.compare_summary import FILTERINGS

    rows = []
    for arm in in_table_order(summary):
        s = summary[arm]
        cells = {f: (s[f]["change_hits@1"], *s[f]["change_hits@1_ci95"]) for f in FILTERINGS}
        rows.append((arm, arm_title(arm).replace("`", ""), cells))
    return rows


MARK_LABEL = "Kelpie's released figure on the same facts (its own retrain)"


def necessity_forest_figure(panels: dict[str, dict[str, dict]], marks: dict[str, dict[str, float]] | None = None):
    """Draw ΔHits@1 with 95 % intervals per arm, one panel per fact set (see :func:`necessity_forest`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from tracegraph.kg.explain.methods import DEFAULT_EXPLAINER

    marks = marks or {}
    heights = [max(len(s), 1) * 0.42 + 0.9 for s in panels.values()]
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(8.5, sum(heights)), sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights}
    )
    for ax, (title, summary) in zip(axes[:, 0], panels.items()):
        rows = forest_rows(summary)
        noise = summary.get("noise", {}).get("original")
        if noise:  # the floor: what a retrain with another seed and nothing removed loses
            ax.axvspan(*noise["change_hits@1_ci95"], color=CONTEXT, alpha=0.5, lw=0)
        ax.axvline(0, color=PREDICTION, lw=0.8)
        for i, (arm, _, cells) in enumerate(rows):
            y = len(rows) - 1 - i
            colour = HEAD if arm == DEFAULT_EXPLAINER else "#334155"
            for dy, f, face in ((0.12, "original", colour), (-0.12, "reduced", "white")):
                v, lo, hi = cells[f]
                ax.errorbar(
                    [v],
                    [y + dy],
                    xerr=[[v - lo], [hi - v]],
                    fmt="o",
                    ms=5,
                    color=colour,
                    mfc=face,
                    capsize=2,
                    lw=1.2,
                    label=f"{arm}/{f}",
                )
            if arm in marks.get(title, {}):  # right below the open dot, whose filtering it shares
                ax.plot([marks[title][arm]], [y - 0.34], marker="D", ms=5, ls="", color=MARK, label=f"{arm}/released")
        ax.set_yticks(range(len(rows)), [label for _, label, _ in reversed(rows)])
        for tick, (arm, _, _) in zip(ax.get_yticklabels(), reversed(rows)):
            tick.set_fontweight("bold" if arm == DEFAULT_EXPLAINER else "normal")
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.set_title(title, loc="left", fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
    axes[-1, 0].set_xlabel("ΔHits@1 after removing the explanations and retraining (negative: predictions fell)")
    key = [
        Line2D([], [], marker="o", ls="", color="#334155", label="original filtering"),
        Line2D([], [], marker="o", ls="", color="#334155", mfc="white", label="reduced filtering (Kelpie's)"),
    ]
    if any(marks.get(t) for t in panels):
        key.append(Line2D([], [], marker="D", ls="", color=MARK, label=MARK_LABEL))
    if any("noise" in s for s in panels.values()):
        key.append(matplotlib.patches.Patch(color=CONTEXT, alpha=0.5, label="noise floor (another seed), 95 %"))
    axes[0, 0].legend(
        handles=key,
        loc="lower left",
        bbox_to_anchor=(0, 1.12),
        ncol=2 if len(key) > 3 else 3,
        frameon=False,
        fontsize=8,
    )
    fig.tight_layout()
    return fig


def necessity_forest(panels: dict[str, dict[str, dict]], marks: dict[str, dict[str, float]] | None = None) -> bytes:
    """ΔHits@1 of every measured arm with its bootstrap 95 % interval, as PNG bytes.

    One row per arm (explain's default in bold), a filled dot for the original filtering and an
    open one for the reduced (Kelpie's); a grey band for the noise floor's interval where the
    panel has a noise arm.

    Args:
        panels: Panel title -> a side-by-side summary, arm -> its figures (``compare.json``'s
            ``summary``); one panel each, top to bottom.
        marks: Panel title -> arm -> a figure published for that arm on the panel's facts (Kelpie's
            released ΔH@1), drawn as a diamond on the arm's reduced-filtering row.

    Returns:
        The figure as PNG bytes.
    """
    return _png(necessity_forest_figure(panels, marks))
