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
    """name → "train" | "test"; every class with ≥ 2 files has ≥ 1 on each side."""
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
    """name → fold in 0..folds-1; each class is dealt round-robin, continuing where the last one stopped,
    so fold sizes differ by at most one and each class's count per fold by at most one."""
    if folds < 2:
        raise ValueError(f"folds must be >= 2, got {folds}")
    fold, start = {}, 0
    for members in _shuffled_classes(labels, seed):
        for k, name in enumerate(members):
            fold[name] = (start + k) % folds
        start = (start + len(members)) % folds
    return fold
