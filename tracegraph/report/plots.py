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
