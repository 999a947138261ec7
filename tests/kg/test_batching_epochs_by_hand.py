"""Device-built batches on a graph small enough to write out: an epoch's slicing and what
``keep`` leaves out, target counts without a device sync, and padded targets, against hand lists."""

import numpy as np
import torch

from tracegraph.kg.data.triples import KnownTails
from tracegraph.kg.model.batching import SampleStore

CPU = torch.device("cpu")
# (h, r, t): (0, 0) has tails 1, 2, 3; (1, 0) has 2; (2, 1) has 0, 4; (3, 1) has none
TRIPLES = np.array([[0, 0, 1], [0, 0, 2], [0, 0, 3], [1, 0, 2], [2, 1, 0], [2, 1, 4]])
SAMPLES = np.array([[0, 0], [1, 0], [2, 1], [3, 1]])  # (3, 1): a pair with no known tail
TAILS = {0: [1, 2, 3], 1: [2], 2: [0, 4], 3: []}


def store(keep=None) -> SampleStore:
    return SampleStore(SAMPLES, KnownTails([TRIPLES], 2), CPU, keep)


def test_an_epoch_is_its_order_sliced_into_numbered_batches():
    batches = store().epoch([[2, 0], [3], [1, 0, 2]])
    assert [b.number for b in batches] == [0, 1, 2]
    assert [b.host_index.tolist() for b in batches] == [[2, 0], [3], [1, 0, 2]]
    assert [b.index.tolist() for b in batches] == [[2, 0], [3], [1, 0, 2]]
    assert [len(b) for b in batches] == [2, 1, 3]


def test_keep_drops_samples_from_their_batches_and_leaves_the_others_in_place():
    keep = np.array([True, False, True, True])  # sample 1 excluded
    batches = store(keep).epoch([[1, 2], [1], [3, 0, 1]])
    assert [b.host_index.tolist() for b in batches] == [[2], [], [3, 0]]
    assert [b.number for b in batches] == [0, 1, 2]


def test_target_count_is_the_number_of_known_tails_and_one_per_triple_in_1vsall():
    s = store()
    for order in ([0], [1, 2], [3], [0, 1, 2, 3], [3, 3, 0]):
        (b,) = s.epoch([order])
        assert s.target_count(b) == sum(len(TAILS[i]) for i in order), order
    one = SampleStore(TRIPLES, None, CPU)
    (b,) = one.epoch([[5, 0, 4]])
    assert one.target_count(b) == 3


def test_targets_list_each_rows_tails_and_heads_relations_read_the_samples():
    s = store()
    (b,) = s.epoch([[2, 3, 0]])
    h, r = s.heads_relations(b.index)
    assert h.tolist() == [2, 3, 0] and r.tolist() == [1, 1, 0]
    t = s.targets(b.index, s.target_count(b))
    want = [(row, tail) for row, i in enumerate([2, 3, 0]) for tail in TAILS[i]]
    assert sorted(zip(t.batch_index.tolist(), t.entity_index.tolist())) == sorted(want)
    assert t.weight is None


def test_padded_targets_are_the_real_ones_then_weight_zero_rows_at_valid_entities():
    s = store()
    (b,) = s.epoch([[1, 0, 3]])
    exact = s.targets(b.index, s.target_count(b))
    padded = s.targets(b.index, 7, padded=True)
    n = s.target_count(b)  # 4: one tail of sample 1, three of sample 0
    assert n == 4 and len(padded.batch_index) == 7
    assert padded.weight.tolist() == [1.0] * n + [0.0] * 3 and padded.weight.dtype == torch.float32
    assert padded.batch_index[:n].tolist() == exact.batch_index.tolist()
    assert padded.entity_index[:n].tolist() == exact.entity_index.tolist()
    # padding points at the last row and at a real entity (a valid gather), never out of range
    assert padded.batch_index[n:].tolist() == [2, 2, 2]
    assert all(0 <= e <= 4 for e in padded.entity_index[n:].tolist())


def test_padding_to_the_exact_size_adds_nothing():
    s = store()
    (b,) = s.epoch([[0, 2]])
    padded = s.targets(b.index, 5, padded=True)
    assert padded.weight.tolist() == [1.0] * 5
    assert sorted(zip(padded.batch_index.tolist(), padded.entity_index.tolist())) == [
        (0, 1),
        (0, 2),
        (0, 3),
        (1, 0),
        (1, 4),
    ]


def test_ids_are_int64_whatever_the_samples_dtype():
    s = SampleStore(SAMPLES.astype(np.int32), KnownTails([TRIPLES], 2), CPU)
    (b,) = s.epoch([[0, 2]])
    h, r = s.heads_relations(b.index)
    t = s.targets(b.index, s.target_count(b))
    assert {h.dtype, r.dtype, t.batch_index.dtype, t.entity_index.dtype, b.index.dtype} == {torch.int64}
    one = SampleStore(TRIPLES.astype(np.int32), None, CPU)
    (b,) = one.epoch([[1, 2]])
    t = one.targets(b.index, 2)
    assert t.entity_index.dtype == torch.int64 and t.entity_index.tolist() == [2, 3]


def test_everything_a_batch_needs_lives_on_the_training_device():
    """On ``meta`` (standing in for CUDA) a tensor left on the host would fail the gathers."""
    meta = torch.device("meta")
    s = SampleStore(SAMPLES, KnownTails([TRIPLES], 2), meta)
    (b,) = s.epoch([[1, 0, 3]])
    assert b.index.device == meta and s.target_count(b) == 4
    for t in (s.targets(b.index, 4), s.targets(b.index, 7, padded=True)):
        assert {t.batch_index.device, t.entity_index.device} == {meta}
    assert {x.device for x in s.heads_relations(b.index)} == {meta}
    one = SampleStore(TRIPLES, None, meta)
    (b,) = one.epoch([[1, 2]])
    t = one.targets(b.index, 2)
    assert {t.batch_index.device, t.entity_index.device} == {meta}
