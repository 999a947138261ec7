"""The classification report's edges (classes predicted or present once, 0/0 cells, integer
counts in the JSON) and the confusion-matrix PNG: its pixel size from the PNG header, and the
figure drawn (cell counts and their ink, axis labels, ticks, title), all worked out by hand."""

import json
import struct

import numpy as np
import pytest
from matplotlib.colors import to_rgba

from tracegraph.trees.metrics import classification_report, confusion_matrix, save_confusion_png


def test_classes_seen_once_and_never_count_as_the_formulas_say():
    # class a: 2 items, both right; b: 1 item, predicted c; c: 1 item, predicted b; d: never seen,
    # predicted once (wrongly, for an a)... so: a predicted 2x (P 1), b predicted 1x (P 0), c 1x (P 0)
    y_true = [0, 0, 0, 1, 2, 3]
    y_pred = [0, 0, 3, 2, 1, 3]
    r = classification_report(y_true, y_pred, ["a", "b", "c", "d"])
    pc = r["per_class"]
    assert pc["a"] == {"precision": 1.0, "recall": 2 / 3, "f1": 0.8, "support": 3}
    assert pc["b"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    # d: 1 item, predicted d twice (one right): P 1/2, R 1/1, F1 2/3
    assert pc["d"]["precision"] == 0.5 and pc["d"]["recall"] == 1.0 and pc["d"]["f1"] == pytest.approx(2 / 3)
    assert r["balanced_accuracy"] == pytest.approx((2 / 3 + 0 + 0 + 1) / 4)


def test_a_class_predicted_once_and_present_once():
    r = classification_report([0, 1, 0], [0, 1, 0], ["a", "b"])
    assert r["per_class"]["b"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1}


def test_absent_never_predicted_classes_are_zero_not_leftover_memory():
    for _ in range(20):
        # freed buffers of the report's own size (5 classes) hold 7.5: numpy hands small freed
        # buffers out again, so an uninitialised 0/0 cell would show 7.5
        junk = [np.full(5, 7.5) for _ in range(16)]
        del junk
        r = classification_report([0, 0, 1], [0, 1, 1], ["a", "b", "c", "d", "e"])
        for c in "cde":
            assert r["per_class"][c] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}


def test_confusion_counts_are_integers_in_the_json():
    cm = confusion_matrix([0, 1, 1], [1, 1, 0], 2)
    assert cm.dtype.kind == "i" and cm.tolist() == [[0, 1], [1, 1]]
    r = classification_report([0, 1, 1], [1, 1, 0], ["a", "b"])
    assert json.dumps(r["confusion_matrix"]) == "[[0, 1], [1, 1]]"


@pytest.fixture
def drawn(tmp_path, monkeypatch):
    """Draw the PNG, keeping the figure that save_confusion_png closes."""
    import matplotlib.pyplot as plt

    closed, real_close = [], plt.close
    # close() with no figure closes the current one: record that one
    monkeypatch.setattr(plt, "close", lambda fig=None: closed.append(plt.gcf() if fig is None else fig))

    def draw(report, title=""):
        path = tmp_path / "cm.png"
        save_confusion_png(report, path, title) if title else save_confusion_png(report, path)
        return path, closed[-1]

    yield draw
    for fig in closed:
        real_close(fig)


def _report():
    # confusion by hand: rows true a, b, c; columns predicted; max 6, half 3
    y_true = [0] * 6 + [0] * 3 + [1] * 3 + [1] * 1 + [2] * 2
    y_pred = [0] * 6 + [1] * 3 + [1] * 3 + [2] * 1 + [0] * 2
    return classification_report(y_true, y_pred, ["alpha", "beta", "gamma"])


def test_confusion_png_size_cells_labels_and_title(drawn):
    r = _report()
    assert r["confusion_matrix"] == [[6, 3, 0], [0, 3, 1], [2, 0, 0]]
    path, fig = drawn(r)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    size = 2.5 + 0.6 * 3  # inches per side for three classes, 1.5 more in width for the colour bar; 100 dpi
    assert (width, height) == (round((size + 1.5) * 100), round(size * 100))
    ax = fig.axes[0]
    cells = {(t.get_position(), t.get_text()): to_rgba(t.get_color()) for t in ax.texts}
    white, black = to_rgba("white"), to_rgba("black")
    want = {
        ((p, t), str(v)): (white if v > 3 else black)  # more than half the largest count: white ink
        for t, row in enumerate(r["confusion_matrix"])
        for p, v in enumerate(row)
    }
    assert cells == want
    assert all(t.get_ha() == "center" and t.get_va() == "center" for t in ax.texts)
    assert ax.get_xlabel() == "predicted" and ax.get_ylabel() == "true"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["alpha", "beta", "gamma"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["alpha", "beta", "gamma"]
    assert all(t.get_rotation() == 45 and t.get_ha() == "right" for t in ax.get_xticklabels())
    assert ax.images[0].get_cmap().name == "Blues"
    assert len(fig.axes) == 2  # the colour bar
    # 9 of 15 right (accuracy 0.60); recalls 6/9, 3/4, 0/2: balanced 0.47
    assert ax.get_title() == "accuracy 0.60, balanced 0.47" and ax.title.get_fontsize() == 9


def test_confusion_png_given_title_replaces_the_figures(drawn):
    _, fig = drawn(_report(), title="fold 2")
    assert fig.axes[0].get_title() == "fold 2"
