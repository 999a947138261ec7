"""Classification metrics for the user's labels, worked by hand on an unbalanced example where
accuracy, balanced accuracy and macro-F1 all differ, with a class never predicted and one absent."""

import pytest

from tracegraph.trees.metrics import classification_report, confusion_matrix


def test_unbalanced_example_by_hand():
    # true: 6 healthy (0), 3 mild (1), 1 severe (2); class 3 absent from the data
    y = [0, 0, 0, 0, 0, 0, 1, 1, 1, 2]
    p = [0, 0, 0, 0, 0, 1, 0, 0, 1, 0]  # "severe" never predicted
    rep = classification_report(y, p, ["healthy", "mild", "severe", "unused"])
    assert rep["confusion_matrix"] == [[5, 1, 0, 0], [2, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]]
    assert rep["n"] == 10 and rep["accuracy"] == pytest.approx(0.6)
    # recalls 5/6, 1/3, 0 over the three present classes
    assert rep["balanced_accuracy"] == pytest.approx((5 / 6 + 1 / 3 + 0) / 3)
    # precisions 5/8, 1/2, 0 (never predicted: 0); F1 = 2PR/(P+R)
    f_healthy = 2 * (5 / 8) * (5 / 6) / (5 / 8 + 5 / 6)
    f_mild = 2 * 0.5 * (1 / 3) / (0.5 + 1 / 3)
    assert rep["per_class"]["healthy"]["f1"] == pytest.approx(f_healthy)
    assert rep["per_class"]["mild"]["precision"] == pytest.approx(0.5)
    assert rep["per_class"]["severe"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert rep["macro_f1"] == pytest.approx((f_healthy + f_mild + 0) / 3)  # the absent class is not averaged


def test_confusion_rows_are_true_columns_predicted():
    assert confusion_matrix([0, 1, 1], [1, 1, 0], 2).tolist() == [[0, 1], [1, 1]]


def test_no_items():
    rep = classification_report([], [], ["a", "b"])
    assert rep["n"] == 0 and rep["accuracy"] == 0.0 and rep["balanced_accuracy"] == 0.0 and rep["macro_f1"] == 0.0
