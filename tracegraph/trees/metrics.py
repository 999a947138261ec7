"""Classification metrics for the user's labels, and the confusion matrix as a PNG.

Balanced accuracy and macro-F1 sit beside plain accuracy because disease grades are rarely
balanced: a classifier that always answers "healthy" can score a high accuracy on them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tracegraph.runtime.checkpoints import atomic_path


def confusion_matrix(y_true, y_pred, num_classes: int) -> np.ndarray:
    """The confusion matrix: ``cm[t, p]`` counts items of true class t predicted as p.

    Args:
        y_true: True classes.
        y_pred: Predicted classes.
        num_classes: Number of classes.

    Returns:
        ``[num_classes, num_classes]`` int64 counts.
    """
    cm = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(cm, (np.asarray(y_true, dtype=np.int64), np.asarray(y_pred, dtype=np.int64)), 1)
    return cm


def classification_report(y_true, y_pred, classes: list[str]) -> dict:
    """Accuracy, balanced accuracy (mean recall over classes present), macro-F1, per-class P/R/F1 and the confusion matrix.

    Args:
        y_true: True classes.
        y_pred: Predicted classes.
        classes: Class names, by index.

    Returns:
        The report as JSON-ready values.
    """
    cm = confusion_matrix(y_true, y_pred, len(classes))
    support = cm.sum(1)
    predicted = cm.sum(0)
    tp = np.diag(cm).astype(np.float64)
    # 0/0 (a class never predicted, or absent) counts as 0, as is usual for macro averages
    precision = np.divide(tp, predicted, out=np.zeros_like(tp), where=predicted > 0)
    recall = np.divide(tp, support, out=np.zeros_like(tp), where=support > 0)
    pr = precision + recall
    f1 = np.divide(2 * precision * recall, pr, out=np.zeros_like(tp), where=pr > 0)
    present = support > 0
    n = int(support.sum())
    return {
        "n": n,
        "accuracy": float(tp.sum() / n) if n else 0.0,
        "balanced_accuracy": float(recall[present].mean()) if present.any() else 0.0,
        "macro_f1": float(f1[present].mean()) if present.any() else 0.0,
        "per_class": {
            c: {
                "precision": float(precision[k]),
                "recall": float(recall[k]),
                "f1": float(f1[k]),
                "support": int(support[k]),
            }
            for k, c in enumerate(classes)
        },
        "classes": list(classes),
        "confusion_matrix": cm.tolist(),
    }


def save_confusion_png(report: dict, path: str | Path, title: str = "") -> None:
    """Plot a confusion matrix (counts per cell, rows true, columns predicted) as PNG, atomically.

    Args:
        report: A :func:`classification_report`.
        path: The PNG file.
        title: The plot's title.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cm = np.asarray(report["confusion_matrix"])
    classes = report["classes"]
    size = 2.5 + 0.6 * len(classes)
    fig, ax = plt.subplots(figsize=(size + 1.5, size))
    im = ax.imshow(cm, cmap="Blues")
    ax.set_xticks(range(len(classes)), classes, rotation=45, ha="right")
    ax.set_yticks(range(len(classes)), classes)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    for (t, p), v in np.ndenumerate(cm):
        ax.text(p, t, str(v), ha="center", va="center", color="white" if v > cm.max() / 2 else "black")
    ax.set_title(title or f"accuracy {report['accuracy']:.2f}, balanced {report['balanced_accuracy']:.2f}", fontsize=9)
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
