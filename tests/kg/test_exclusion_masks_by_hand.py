"""kg/data/exclusion.py without training: triple keys equal exactly when the triples are equal
(every triple of small grids, and ids whose products overflow 32 bits), the excluded-row mask
against set membership in a loop, and ``exclude_from_samples`` on tiny hand-written files
against label sets built here — 1vsAll rows and KvsAll targets, with and without reciprocal
relations, duplicates in both files, and the refusal of a triple that is not a training triple
naming its file and line."""

from itertools import product
from types import SimpleNamespace

import numpy as np
import pytest

from tracegraph.errors import DataError
from tracegraph.kg.data.exclusion import exclude_from_samples, excluded_mask, triple_keys
from tracegraph.kg.data.triples import KnownTails, read_triples, with_reciprocals

TRAIN = [
    ("a", "likes", "b"),
    ("a", "likes", "c"),
    ("a", "knows", "c"),
    ("b", "likes", "c"),
    ("c", "knows", "a"),
    ("d", "likes", "a"),
    ("a", "likes", "b"),  # a duplicate line
    ("c", "knows", "c"),  # a self-loop
]


def write(path, triples):
    path.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in triples), encoding="utf-8")
    return str(path)


def model_config(train, reciprocal):
    R = train.num_relations
    return SimpleNamespace(reciprocal=reciprocal, num_relation_rows=2 * R if reciprocal else R)


def label_rows(train, reciprocal):
    """The training rows as labels, inverses (relation name + '⁻¹') after the forward rows."""
    fwd = [train.labels(i) for i in range(len(train))]
    return fwd + ([(t, r + "⁻¹", h) for h, r, t in fwd] if reciprocal else [])


def relation_label(train, r):
    R = train.num_relations
    return train.relations.labels[r] if r < R else train.relations.labels[r - R] + "⁻¹"


# --------------------------------------------------------------------------- keys and masks


@pytest.mark.parametrize("E, R", [(3, 2), (2, 3), (4, 4), (5, 1), (1, 5)])
def test_triple_keys_are_equal_exactly_when_the_triples_are(E, R):
    grid = np.array(list(product(range(E), range(R), range(E))))
    keys = triple_keys(grid, E, R)
    assert keys.dtype == np.int64 and keys.shape == (len(grid),)
    assert len(set(keys.tolist())) == len(grid)  # every distinct triple its own key
    again = triple_keys(grid[::-1].copy(), E, R)[::-1]
    assert again.tolist() == keys.tolist()  # the same triple, the same key, wherever it stands


def test_triple_keys_read_flat_lists_and_int32_ids_without_overflow():
    grid = np.array(list(product(range(3), range(2), range(3))))
    assert triple_keys(grid.ravel().tolist(), 3, 2).tolist() == triple_keys(grid, 3, 2).tolist()
    # 2**16 entities and relations: head * R * E is 2**32 for head 1, which wraps to 0 in 32 bits
    big = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], np.int32)
    keys = triple_keys(big, 2**16, 2**16)
    assert len(set(keys.tolist())) == 5


def test_excluded_mask_marks_every_copy_of_each_excluded_triple():
    rng = np.random.default_rng(0)
    for _ in range(50):
        E, R = int(rng.integers(1, 5)), int(rng.integers(1, 4))
        rows = np.stack([rng.integers(0, E, 30), rng.integers(0, R, 30), rng.integers(0, E, 30)], 1)
        gone = np.stack([rng.integers(0, E, 4), rng.integers(0, R, 4), rng.integers(0, E, 4)], 1)
        gone_set = {tuple(x) for x in gone.tolist()}
        ref = [tuple(x) in gone_set for x in rows.tolist()]
        assert excluded_mask(rows, gone, E, R).tolist() == ref
    assert excluded_mask(np.zeros((0, 3), np.int64), np.array([[0, 0, 0]]), 1, 1).tolist() == []
    assert excluded_mask(np.array([[0, 0, 0]]), np.zeros((0, 3), np.int64), 1, 1).tolist() == [False]


# --------------------------------------------------------------------------- exclude_from_samples


EXCLUDED = [("a", "likes", "b"), ("c", "knows", "a"), ("a", "likes", "b")]  # listed twice: still one triple


@pytest.mark.parametrize("reciprocal", [False, True])
def test_one_vs_all_drops_every_copy_of_each_excluded_triple_and_with_reciprocals_its_inverse(tmp_path, reciprocal):
    train = read_triples(write(tmp_path / "train.txt", TRAIN))
    cfg = model_config(train, reciprocal)
    samples = with_reciprocals(train.ids, train.num_relations) if reciprocal else train.ids
    known, keep = exclude_from_samples(write(tmp_path / "ex.txt", EXCLUDED), train, samples, None, cfg)
    assert known is None
    gone = set(EXCLUDED) | ({(t, r + "⁻¹", h) for h, r, t in EXCLUDED} if reciprocal else set())
    rows = label_rows(train, reciprocal)
    assert len(rows) == len(samples)
    assert keep.dtype == bool and keep.tolist() == [row not in gone for row in rows]
    # by hand: rows 0 and 6 are (a likes b), row 4 is (c knows a); with inverses also rows 8, 14 and 12
    assert np.flatnonzero(~keep).tolist() == ([0, 4, 6, 8, 12, 14] if reciprocal else [0, 4, 6])


@pytest.mark.parametrize("reciprocal", [False, True])
def test_kvs_all_keeps_each_pair_s_other_tails_and_drops_a_pair_with_none_left(tmp_path, reciprocal):
    train = read_triples(write(tmp_path / "train.txt", TRAIN))
    cfg = model_config(train, reciprocal)
    R = cfg.num_relation_rows
    ids = with_reciprocals(train.ids, train.num_relations) if reciprocal else train.ids
    full = KnownTails([ids], R)
    samples = np.stack(full.pairs(), axis=1)
    known, keep = exclude_from_samples(write(tmp_path / "ex.txt", EXCLUDED), train, samples, full, cfg)
    # the reference: every (head, relation) -> its tails, from labels, minus the excluded triples
    gone = set(EXCLUDED) | ({(t, r + "⁻¹", h) for h, r, t in EXCLUDED} if reciprocal else set())
    tails: dict = {}
    for h, r, t in label_rows(train, reciprocal):
        tails.setdefault((h, r), set())
        if (h, r, t) not in gone:
            tails[(h, r)].add(t)
    ents = train.entities
    for (h, r), row in zip(samples.tolist(), keep.tolist()):
        pair = (ents.labels[h], relation_label(train, r))
        assert row == bool(tails[pair]), pair
        assert set(ents.decode(known.tails_of(h, r))) == tails[pair], pair
    assert known.num_relations == R
    assert len(known) == sum(bool(v) for v in tails.values())
    # by hand: (a likes) keeps c; (c knows) loses its only other tail a but keeps its self-loop c;
    # with inverses (b likes⁻¹) and (a knows⁻¹) lose their only tail and leave the batches
    a, b, c = (ents.id(x) for x in "abc")
    likes, knows = train.relations.id("likes"), train.relations.id("knows")
    assert known.tails_of(a, likes).tolist() == [c] and known.tails_of(c, knows).tolist() == [c]
    if reciprocal:
        assert known.tails_of(b, likes + 2).tolist() == []
        assert not keep[[i for i, p in enumerate(samples.tolist()) if p == [b, likes + 2]][0]]
    assert keep.sum() == (8 if reciprocal else 5)  # of 10 pairs with inverses, 5 without


def test_kvs_all_excluding_a_self_loop_drops_it_under_both_directions_and_keeps_the_pairs(tmp_path):
    train = read_triples(write(tmp_path / "train.txt", TRAIN))
    cfg = model_config(train, True)
    ids = with_reciprocals(train.ids, train.num_relations)
    full = KnownTails([ids], 4)
    samples = np.stack(full.pairs(), axis=1)
    # the self-loop (c knows c) and its inverse (c knows⁻¹ c) go; both pairs keep a
    known, keep = exclude_from_samples(write(tmp_path / "ex.txt", [("c", "knows", "c")]), train, samples, full, cfg)
    c, knows = train.entities.id("c"), train.relations.id("knows")
    assert known.tails_of(c, knows).tolist() == [train.entities.id("a")]
    assert known.tails_of(c, knows + 2).tolist() == [train.entities.id("a")]  # (a knows c) stays
    assert keep.all()


@pytest.mark.parametrize("mode", ["1vsall", "kvsall"])
def test_a_model_without_inverses_drops_only_the_listed_direction(tmp_path, mode):
    # ids a = 0, b = 1, c = 2 (sorted labels), one relation: (c r a) is where an inverse row of
    # (a r b), (b, r + 1, a), would land if a one-relation table held inverses
    train = read_triples(write(tmp_path / "train.txt", [("a", "r", "b"), ("c", "r", "a"), ("b", "r", "c")]))
    assert train.entities.labels == ["a", "b", "c"]
    cfg = model_config(train, False)
    full = KnownTails([train.ids], 1) if mode == "kvsall" else None
    samples = np.stack(full.pairs(), axis=1) if full is not None else train.ids
    known, keep = exclude_from_samples(write(tmp_path / "ex.txt", [("a", "r", "b")]), train, samples, full, cfg)
    if mode == "1vsall":
        assert keep.tolist() == [False, True, True]
    else:  # pairs (a r), (b r), (c r): only (a r) loses its one tail
        assert samples.tolist() == [[0, 0], [1, 0], [2, 0]] and keep.tolist() == [False, True, True]
        assert known.tails_of(2, 0).tolist() == [0] and known.tails_of(1, 0).tolist() == [2]


def test_a_triple_not_in_the_training_file_is_refused_naming_it_and_its_line(tmp_path):
    train = read_triples(write(tmp_path / "train.txt", TRAIN))
    cfg = model_config(train, True)
    # every label is known, but (b likes a) is the inverse of a training triple, not one itself
    path = write(
        tmp_path / "ex.txt", [("a", "likes", "c"), ("d", "likes", "a"), ("b", "likes", "a"), ("c", "likes", "d")]
    )
    with pytest.raises(DataError) as err:
        exclude_from_samples(path, train, train.ids, None, cfg)
    assert err.value.path == path and err.value.line == 3
    assert err.value.reason == "excluded triple b likes a is not a training triple"
    assert str(err.value) == f"{path}:3: excluded triple b likes a is not a training triple"
