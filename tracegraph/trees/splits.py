"""Seeded, stratified train/test splits and k folds over *files*, never over trees.

A vessel image can yield several trees; they all follow their file, so no file is ever on both
sides of a split. Each class is shuffled on its own (one generator, classes in sorted order),
so the same seed and the same names give the same split whatever order the files were listed in.
"""

from __future__ import annotations

import numpy as np


def _shuffled_classes(labels: dict[str, int], seed: int) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    out = []
    for c in sorted(set(labels.values())):
        members = sorted(n for n, y in labels.items() if y == c)
        out.append([members[i] for i in rng.permutation(len(members))])
    return out


def stratified_split(labels: dict[str, int], test_fraction: float, seed: int) -> dict[str, str]:
    """Split files into train and test so that every class with two or more files has one on each side.

    Args:
        labels: File name to class.
        test_fraction: Share of each class for testing, in (0, 1).
        seed: Shuffling seed.

    Returns:
        File name to ``"train"`` or ``"test"``.

    Raises:
        ValueError: If ``test_fraction`` is not in (0, 1).
    """
    if not 0 < test_fraction < 1:
        raise ValueError(f"test fraction must be in (0, 1), got {test_fraction}")
    side = {}
    for members in _shuffled_classes(labels, seed):
        n_test = int(round(len(members) * test_fraction))
        if len(members) >= 2:
            n_test = min(max(n_test, 1), len(members) - 1)
        for k, name in enumerate(members):
            side[name] = "test" if k < n_test else "train"
    return side


def stratified_folds(labels: dict[str, int], folds: int, seed: int) -> dict[str, int]:
    """Assign files to folds, dealing each class round-robin where the last one stopped.

    Fold sizes differ by at most one, and so does each class's count per fold.

    Args:
        labels: File name to class.
        folds: Number of folds, at least 2.
        seed: Shuffling seed.

    Returns:
        File name to fold in ``0..folds-1``.

    Raises:
        ValueError: If ``folds`` is below 2.
    """
    if folds < 2:
        raise ValueError(f"folds must be >= 2, got {folds}")
    fold, start = {}, 0
    for members in _shuffled_classes(labels, seed):
        for k, name in enumerate(members):
            fold[name] = (start + k) % folds
        start = (start + len(members)) % folds
    return fold
