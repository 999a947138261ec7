"""report/drawing.py by hand: labels that tell nodes apart, and a prediction line no label covers.

References: labels cut by hand (both ends of each name kept); positions moved off a segment
worked out with pencil geometry; the real figure measured by matplotlib's own renderer (each
label's box against the pixels of the head–tail line), with a control drawn without the
clearance and the placement, in which a label does cover the line, so the check can fail.
"""

import math

import numpy as np
import pytest

from tracegraph.report import drawing as D


def test_a_long_name_keeps_both_ends():
    assert D.middle_cut("hepatic fibrosis type 2", 12) == "hepati…ype 2"  # 6 + the ellipsis + 5
    assert D.middle_cut("hepatic fibrosis type 2", 23) == "hepatic fibrosis type 2"
    assert D.middle_cut("abcdefghij", 3) == "a…j"


def test_labels_are_distinct_even_where_the_cut_texts_would_clash():
    names = {
        0: "hepatic fibrosis type 2",
        1: "hepatic fibrosis type 3",  # a prefix cut would make these two "hepatic fibrosis t…"
        2: "aaaaaaaaaaaaaaXaaaaaaaaaaaaaaa",  # 30 characters differing only in the middle
        3: "aaaaaaaaaaaaaaYaaaaaaaaaaaaaaa",
        4: "short",
        5: "a disease whose name is quite long indeed",
    }
    got = D.short_labels(names, 20, wide={5}, n_wide=30)
    assert got[0] == "hepatic fi…is type 2" and got[1] == "hepatic fi…is type 3"
    # cut to 20, 22, … the middle letter shows only once nothing is cut: both kept whole
    assert got[2] == names[2] and got[3] == names[3]
    assert got[4] == "short"
    assert got[5] == "a disease whose…e long indeed" or len(got[5]) == 30
    assert got[5] == D.middle_cut(names[5], 30)
    assert len(set(got.values())) == len(got)


def test_nodes_near_the_segment_move_off_it_along_its_normal():
    pos = {
        "h": (0, 0),
        "t": (10, 0),
        "on": (5, 0),
        "above": (5, 0.2),
        "below": (2, -0.5),
        "far": (5, 3),
        "past": (12, 0),
    }
    got = D.clear_of_segment(pos, "h", "t", 1.0, keep=["kept"])
    assert {k: tuple(np.round(v, 6)) for k, v in got.items()} == {
        "h": (0, 0),
        "t": (10, 0),
        "on": (5, 1),  # on the line: to the upper side
        "above": (5, 1),
        "below": (2, -1),
        "far": (5, 3),
        "past": (12, 0),  # beyond the segment's end
    }
    diag = D.clear_of_segment({"a": (0, 0), "b": (4, 4), "n": (2, 2.1), "kept": (2, 2)}, "a", "b", 1.0, keep=["kept"])
    # along (1, 1)/√2 at 4.1/√2, then 1 along the normal (-1, 1)/√2: (2.05 - 0.7071, 2.05 + 0.7071)
    assert np.allclose(diag["n"], (2.05 - 1 / math.sqrt(2), 2.05 + 1 / math.sqrt(2)))
    assert tuple(diag["kept"]) == (2, 2)


def chain():
    """Head 0 and tail 1 joined by a proponent walk 0–2–3–4–1 that a layout lays along their line."""
    edges = [(0, 2, 0, "proponent"), (2, 3, 1, "proponent"), (3, 4, 2, "proponent"), (4, 1, 3, "proponent")]
    edges += [(3, 5, 99, "opponent"), (5, 6, 99, "opponent")]
    labels = {0: "Velotinib", 1: "hepatic fibrosis", 2: "KRT17", 3: "Pathway: lipid", 4: "MAPK1", 5: "x5", 6: "x6"}
    return edges, labels


def covering(fig, notes, pos, head, tail):
    """The labels (but the head's and tail's) whose box holds a pixel of the head–tail line."""
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    a, b = ax.transData.transform([pos[head], pos[tail]])
    line = a + np.linspace(0, 1, 400)[:, None] * (b - a)
    return [
        n
        for n, note in notes.items()
        if n not in (head, tail) and note.get_window_extent(renderer).count_contains(line)
    ]


@pytest.fixture
def on_the_line(monkeypatch):
    """A layout that leaves the walk's nodes just under the head–tail line, where labels written above them
    would cover it (networkx's layouts replaced: the start positions are kept as they are)."""
    import networkx as nx

    start = {0: (-1, 0), 1: (1, 0), 2: (-0.3, -0.03), 3: (0, -0.05), 4: (0.3, -0.07), 5: (0, 0.8), 6: (0.5, -0.9)}
    monkeypatch.setattr(nx, "kamada_kawai_layout", lambda g, **k: {n: np.array(start[n], float) for n in g})
    monkeypatch.setattr(nx, "spring_layout", lambda g, pos=None, **k: pos)


def test_no_label_covers_the_prediction_line_and_without_the_clearance_one_does(monkeypatch, on_the_line):
    edges, labels = chain()
    fig, notes, pos = D.figure(0, 1, edges, labels, rival=6)
    assert covering(fig, notes, pos, 0, 1) == []
    band = D.CLEARANCE * np.ptp(np.array(list(pos.values()))[:, 1])
    assert all(abs(pos[n][1]) >= band * 0.999 for n in (2, 3, 4))  # every node moved off the line
    texts = [note.get_text() for note in notes.values()]
    assert len(set(texts)) == len(texts) and "competing answer: x6" in texts
    # the control: the same drawing with nodes left on the line and labels where they fall
    monkeypatch.setattr(D, "clear_of_segment", lambda pos, *a, **k: pos)
    monkeypatch.setattr(D, "place_labels", lambda *a, **k: None)
    fig, notes, pos = D.figure(0, 1, edges, labels, rival=6)
    assert covering(fig, notes, pos, 0, 1) != []


def test_a_force_layout_keeps_the_line_clear_too():
    edges, labels = chain()
    fig, notes, pos = D.figure(0, 1, edges, labels, rival=6)
    assert covering(fig, notes, pos, 0, 1) == []


def test_the_competing_answer_is_a_red_diamond_below_the_tail_labelled_as_such():
    edges, labels = chain()
    fig, notes, pos = D.figure(0, 1, edges, labels, rival=6)
    assert notes[6].get_text() == "competing answer: x6" and notes[6].get_color() == D.OPP
    assert pos[6][1] < pos[1][1] and pos[6][0] == pytest.approx(pos[1][0])  # below the tail
    ax = fig.axes[0]
    red = [c for c in ax.collections if len(c.get_offsets()) == 1 and np.allclose(c.get_offsets()[0], pos[6])]
    assert len(red) == 1
    # the head–competitor line is drawn red and dotted
    assert any(
        line.get_linestyle() == ":" and line.get_color() == D.OPP and np.allclose(line.get_xydata(), [pos[0], pos[6]])
        for line in ax.get_lines()
    )
