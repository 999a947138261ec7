"""The necessity forest plot draws each arm's ΔHits@1 and interval from the summary it is given."""

from __future__ import annotations

import pytest

from tracegraph.kg.explain.methods import DEFAULT_EXPLAINER
from tracegraph.report.plots import forest_rows, necessity_forest, necessity_forest_figure


def arm(orig, reduced):
    def cell(v, lo, hi):
        return {"change_hits@1": v, "change_hits@1_ci95": [lo, hi]}

    return {"original": cell(*orig), "reduced": cell(*reduced)}


SUMMARY = {
    "noise": arm((-0.2, -0.3, -0.1), (-0.2, -0.3, -0.1)),
    "kelpie": arm((-0.25, -0.35, -0.15), (-0.4, -0.5, -0.3)),
    DEFAULT_EXPLAINER: arm((-0.3, -0.4, -0.2), (-0.5, -0.6, -0.4)),
    "my-file": arm((-0.05, -0.1, 0.0), (-0.1, -0.2, 0.0)),
}


def test_rows_follow_the_page_order_with_plain_labels_and_the_given_cells():
    rows = forest_rows(SUMMARY)
    assert [a for a, _, _ in rows] == [DEFAULT_EXPLAINER, "kelpie", "noise", "my-file"]  # unknown arms last
    assert rows[0][1] == f"tracegraph {DEFAULT_EXPLAINER}, explain's default" and "`" not in "".join(r[1] for r in rows)
    assert rows[1][2] == {"original": (-0.25, -0.35, -0.15), "reduced": (-0.4, -0.5, -0.3)}


def points(ax):
    """label -> (x, y, low, high) of every error bar drawn on ``ax``."""
    out = {}
    for c in ax.containers:
        line, _, (bars,) = c.lines[0], c.lines[1], c.lines[2]
        x, y = line.get_xdata()[0], line.get_ydata()[0]
        (lo, _), (hi, _) = bars.get_segments()[0]
        out[c.get_label()] = (x, y, lo, hi)
    return out


def test_each_arm_is_drawn_at_its_value_and_interval_under_both_filterings():
    import matplotlib.pyplot as plt

    fig = necessity_forest_figure({"with noise": SUMMARY, "without": {"kelpie": SUMMARY["kelpie"]}})
    top, bottom = fig.axes
    got = points(top)
    assert len(got) == 2 * len(SUMMARY)
    for a, _, cells in forest_rows(SUMMARY):
        for f, (v, lo, hi) in cells.items():
            x, _, glo, ghi = got[f"{a}/{f}"]
            assert (x, glo, ghi) == pytest.approx((v, lo, hi))
    # rows top to bottom in the page's order, the original filtering just above the reduced
    assert got[f"{DEFAULT_EXPLAINER}/original"][1] > got[f"{DEFAULT_EXPLAINER}/reduced"][1] > got["kelpie/original"][1]
    assert [t.get_text() for t in top.get_yticklabels()][-1].startswith("tracegraph")
    # the noise floor's band spans its original interval; a panel without a noise arm has none
    (band,) = top.patches
    xs = band.get_patch_transform().transform(band.get_path().vertices)[:, 0]
    assert (xs.min(), xs.max()) == pytest.approx((-0.3, -0.1))
    assert not bottom.patches and len(points(bottom)) == 2
    assert top.get_title(loc="left") == "with noise"
    plt.close(fig)


def test_the_figure_comes_back_as_png_bytes():
    assert necessity_forest({"x": SUMMARY})[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_released_figure_is_marked_below_its_arms_reduced_dot_and_named_in_the_legend():
    import matplotlib.pyplot as plt

    from tracegraph.report.plots import MARK_LABEL

    marks = {"with noise": {"kelpie": -0.45, "not-drawn": -1.0}}
    fig = necessity_forest_figure({"with noise": SUMMARY, "without": {"kelpie": SUMMARY["kelpie"]}}, marks)
    top, bottom = fig.axes
    (mark,) = [ln for ln in top.lines if ln.get_label() == "kelpie/released"]
    assert mark.get_xdata()[0] == -0.45 and mark.get_marker() == "D"
    reduced = points(top)["kelpie/reduced"][1]
    assert reduced - 0.5 < mark.get_ydata()[0] < reduced  # below the arm's open dot, above the next arm's row
    assert not [ln for ln in bottom.lines if ln.get_label().endswith("/released")]  # the panel without marks
    assert not [ln for ln in top.lines if ln.get_label().startswith("not-drawn")]  # an arm the panel lacks
    assert MARK_LABEL in [t.get_text() for t in top.get_legend().get_texts()]
    plt.close(fig)
    unmarked = necessity_forest_figure({"with noise": SUMMARY})
    assert MARK_LABEL not in [t.get_text() for t in unmarked.axes[0].get_legend().get_texts()]
    plt.close(unmarked)
