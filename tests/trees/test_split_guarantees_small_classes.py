"""Stratified splits and folds over files (trees/splits.py): what they guarantee, also for the
smallest classes — checked as properties over many class sizes, fractions and seeds, and the
draw within a class checked for uniformity by simulation."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tracegraph.trees.splits import stratified_folds, stratified_split


def _labels(sizes):
    return {f"c{c}_f{k}": c for c, n in enumerate(sizes) for k in range(n)}


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 7), min_size=1, max_size=5),
    frac=st.sampled_from([0.01, 0.1, 0.3, 0.5, 0.9, 0.99]),
    seed=st.integers(0, 1000),
)
def test_every_class_of_two_or_more_has_a_file_on_each_side(sizes, frac, seed):
    labels = _labels(sizes)
    side = stratified_split(labels, frac, seed)
    assert set(side) == set(labels) and set(side.values()) <= {"train", "test"}
    for c, n in enumerate(sizes):
        n_test = sum(side[f"c{c}_f{k}"] == "test" for k in range(n))
        if n >= 2:
            assert 1 <= n_test <= n - 1
            want = min(max(round(n * frac), 1), n - 1)  # the fraction, clipped to keep both sides
            assert n_test == want
        else:
            assert n_test == round(frac)  # a single file: where the fraction rounds it


def test_which_files_of_a_small_class_go_to_test_is_uniform():
    labels = _labels([3, 2])  # class 0: 3 files, 1 to test; class 1: 2 files, 1 to test
    seeds = 3000
    counts = {n: 0 for n in labels}
    for seed in range(seeds):
        for n, s in stratified_split(labels, 0.3, seed).items():
            counts[n] += s == "test"
    for n, p in [("c0_f0", 1 / 3), ("c0_f1", 1 / 3), ("c0_f2", 1 / 3), ("c1_f0", 0.5), ("c1_f1", 0.5)]:
        assert abs(counts[n] / seeds - p) < 5 * np.sqrt(p * (1 - p) / seeds), counts


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(1, 9), min_size=1, max_size=5), folds=st.integers(2, 6), seed=st.integers(0, 1000))
def test_folds_balance_sizes_and_each_class_within_one(sizes, folds, seed):
    labels = _labels(sizes)
    fold = stratified_folds(labels, folds, seed)
    assert set(fold) == set(labels) and set(fold.values()) <= set(range(folds))
    total = np.bincount(list(fold.values()), minlength=folds)
    assert total.max() - total.min() <= 1
    for c, n in enumerate(sizes):
        per = np.bincount([fold[f"c{c}_f{k}"] for k in range(n)], minlength=folds)
        assert per.max() - per.min() <= 1


def test_listing_order_does_not_change_the_split():
    labels = _labels([4, 1, 3, 2])
    rev = dict(reversed(list(labels.items())))
    assert stratified_split(rev, 0.4, 5) == stratified_split(labels, 0.4, 5)
    assert stratified_folds(rev, 3, 5) == stratified_folds(labels, 3, 5)


def test_bad_fraction_and_fold_count():
    import pytest

    for f in (0.0, 1.0, -0.2):
        with pytest.raises(ValueError, match="test fraction"):
            stratified_split({"a": 0}, f, 0)
    with pytest.raises(ValueError, match="folds"):
        stratified_folds({"a": 0}, 1, 0)
