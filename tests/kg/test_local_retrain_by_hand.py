"""kg/explain/local_retrain.py by hand and against naive references: the documented defaults; the
frozen model and the seeded start vector; an entity's training triples written with it first
(inverses for a reciprocal model, a self-loop once, the fact's rows left out) listed by hand; the
margins of batched mimic fits against one mimic at a time fitted in a plain loop, with the
filtered rival, an emptied relation, a mimic with no data left, and every rival filtered; the
search (greedy and single) with the refit replaced by a margin table written here, against a
brute-force greedy, and its sort keys and record worked by hand; and the refit's device honoured:
the model moved there, and mimics seeded and fitted there with the meta device as the caller's
default device, against the one-mimic loop."""

import numpy as np
import pytest
import torch

from tests.kg.references import one_mimic_margin
from tracegraph.kg.data.triples import KnownTails
from tracegraph.kg.explain.local_retrain import LocalRefit, LocalRetrainOptions
from tracegraph.kg.model.conve import ConvE, ConvEConfig

TINY = dict(embedding_dim=12, embedding_height=3, embedding_width=4, output_channels=4)
NONE = np.zeros(0, np.int64)


def tiny_model(num_entities=8, num_relations=2, reciprocal=True, seed=0, dtype=torch.float64):
    torch.manual_seed(seed)
    cfg = ConvEConfig(num_entities=num_entities, num_relations=num_relations, reciprocal=reciprocal, **TINY)
    return ConvE(cfg).to(dtype)


def refit_of(model, train_ids, known=None, eps=0.1, **opts):
    known = known if known is not None else KnownTails([np.zeros((0, 3), np.int64)], model.config.num_relation_rows)
    return LocalRefit(model, np.asarray(train_ids), known, eps, LocalRetrainOptions(**opts), torch.device("cpu"))


# --------------------------------------------------------------------------- options and set-up


def test_default_options_are_the_documented_ones():
    o = LocalRetrainOptions()
    assert (o.candidates, o.k, o.steps, o.learning_rate, o.search, o.seed) == (8, 4, 60, 0.05, "greedy", 0)


def test_the_model_is_frozen_in_eval_mode_and_the_start_is_seeded_at_the_entities_spread():
    for dtype in (torch.float64, torch.float32):
        model = tiny_model(dtype=dtype).train()
        refit = refit_of(model, [[0, 0, 1]], seed=7)
        assert not refit.model.training and not any(p.requires_grad for p in model.parameters())
        assert (refit.R, refit.N, refit.reciprocal) == (2, 8, True)
        w = model.entity.weight.detach()
        want = torch.randn(12, generator=torch.Generator().manual_seed(7), dtype=torch.float64) * float(w.std())
        assert refit.start.dtype == dtype
        torch.testing.assert_close(refit.start, want.to(dtype), rtol=0, atol=0)
    assert not torch.equal(refit_of(model, [[0, 0, 1]], seed=8).start, refit.start)
    assert refit.eps == 0.1 and refit.opts.seed == 7


# --------------------------------------------------------------------------- one side's triples


TRAIN = np.array(
    [
        [0, 0, 5],  # 0: the fact
        [0, 1, 2],  # 1
        [3, 0, 0],  # 2: 0 as the tail
        [5, 1, 4],  # 3
        [6, 0, 5],  # 4
        [0, 1, 5],  # 5: touches both ends
        [2, 1, 3],  # 6: touches neither
        [0, 0, 7],  # 7
        [0, 1, 0],  # 8: a self-loop
    ]
)


def test_side_writes_the_entity_first_with_inverses_and_leaves_the_fact_out():
    refit = refit_of(tiny_model(), TRAIN)
    oriented, rows = refit.side(0, np.array([0]))
    # head rows 1, 5, 7, 8 as they are; rows 2 as (0, 0 + R, 3); the self-loop once
    got = sorted(zip(rows.tolist(), map(tuple, oriented.tolist())))
    assert got == [(1, (0, 1, 2)), (2, (0, 2, 3)), (5, (0, 1, 5)), (7, (0, 0, 7)), (8, (0, 1, 0))]
    oriented, rows = refit.side(5, np.array([0]))
    got = sorted(zip(rows.tolist(), map(tuple, oriented.tolist())))
    assert got == [(3, (5, 1, 4)), (4, (5, 2, 6)), (5, (5, 3, 0))]
    oriented, rows = refit.side(5, NONE)  # without the fact's row, its inverse comes back
    assert sorted(rows.tolist()) == [0, 3, 4, 5] and (5, 2, 0) in map(tuple, oriented.tolist())


def test_side_of_a_model_without_inverses_is_the_entity_s_head_rows():
    refit = refit_of(tiny_model(reciprocal=False), TRAIN)
    oriented, rows = refit.side(0, np.array([0, 7]))
    assert rows.tolist() == [1, 5, 8] and oriented.tolist() == TRAIN[[1, 5, 8]].tolist()
    oriented, rows = refit.side(5, NONE)
    assert rows.tolist() == [3] and oriented.tolist() == [[5, 1, 4]]
    assert refit.side(9, NONE)[0].shape == (0, 3)


# --------------------------------------------------------------------------- margins


@pytest.mark.parametrize("eps", [0.0, 0.2])
def test_margins_of_batched_mimics_equal_one_mimic_at_a_time(eps):
    model = tiny_model()
    # the fact (0, 0, 5); (0, 0) also has the known tails 1 and 7, filtered out of the rivals
    known = KnownTails([np.array([[0, 0, 1], [0, 0, 7], [0, 0, 5]])], 4)
    refit = refit_of(model, TRAIN, known, eps=eps, steps=4, learning_rate=0.1, seed=2)
    oriented, rows = refit.side(0, np.array([0]))
    # nothing removed; one row; the only (0, r⁻¹) triple (its relation leaves the fit); all rows;
    # a row that is not the entity's (removes nothing); all but relation 0's one row (one relation left)
    removals = [NONE, np.array([1]), np.array([2]), np.array([1, 2, 5, 7, 8]), np.array([6]), np.array([1, 2, 5, 8])]
    got = refit.margins((0, 0, 5), oriented, rows, removals)
    assert got.dtype == np.float64 and got.shape == (6,)
    pairs = list(zip(map(tuple, oriented.tolist()), rows.tolist()))
    ref = [
        one_mimic_margin(model, pairs, (0, 0, 5), set(x.tolist()), known, eps, 4, 0.1, refit.start) for x in removals
    ]
    # float64 throughout, the same objective: equal to rounding (Adam's ε = 1e-8 against gradients
    # of order 0.1 would show a loss scaled by a constant at about 1e-7)
    np.testing.assert_allclose(got, ref, rtol=1e-11, atol=1e-12)
    assert got[0] == pytest.approx(got[4], abs=1e-12)  # removing a row the entity lacks changes nothing
    assert len(set(np.round(got[:4], 9).tolist()) | {round(got[5], 9)}) == 5  # the data matter


def test_margins_of_no_removal_set_are_an_empty_array():
    refit = refit_of(tiny_model(), TRAIN, steps=2)
    oriented, rows = refit.side(0, np.array([0]))
    got = refit.margins((0, 0, 5), oriented, rows, [])
    assert got.shape == (0,) and got.dtype == np.float64


def test_margin_against_no_rival_is_the_answer_s_score():
    model = tiny_model(num_entities=4)
    train = np.array([[0, 0, 1], [0, 1, 2], [3, 0, 0]])
    known = KnownTails([np.array([[0, 1, 0], [0, 1, 1], [0, 1, 3]])], 4)  # every entity but 2 is a known tail
    refit = refit_of(model, train, known, steps=3, seed=1)
    oriented, rows = refit.side(0, NONE)
    got = refit.margins((0, 1, 2), oriented, rows, [NONE, np.array([0])])
    pairs = list(zip(map(tuple, oriented.tolist()), rows.tolist()))
    ref = [one_mimic_margin(model, pairs, (0, 1, 2), x, known, 0.1, 3, 0.05, refit.start) for x in (set(), {0})]
    np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-9)


def test_margins_of_a_single_precision_model_follow_the_same_fit():
    model = tiny_model(dtype=torch.float32)
    known = KnownTails([np.array([[0, 0, 5]])], 4)
    refit = refit_of(model, TRAIN, known, steps=3, seed=3)
    oriented, rows = refit.side(0, np.array([0]))
    got = refit.margins((0, 0, 5), oriented, rows, [NONE, np.array([5, 8])])
    assert got.dtype == np.float64
    pairs = list(zip(map(tuple, oriented.tolist()), rows.tolist()))
    ref = [one_mimic_margin(model, pairs, (0, 0, 5), x, known, 0.1, 3, 0.05, refit.start) for x in (set(), {5, 8})]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


def test_the_model_is_moved_to_the_refit_s_device():
    model = tiny_model()
    moved_to = []
    model_to = model.to

    def to(*args, **kwargs):  # records where the refit sends the model (a no-op move on a CPU)
        moved_to.append((args, kwargs))
        return model_to(*args, **kwargs)

    model.to = to
    refit = LocalRefit(model, TRAIN, None, 0.1, LocalRetrainOptions(), torch.device("cpu"))
    assert moved_to == [((torch.device("cpu"),), {})] and refit.model is model


# the fact (0, 0, 5) with known tails 1 and 7 filtered out of the rivals; and a query every rival of
# which is a known tail (the rival is then 0)
META_CASES = {
    "filtered rivals": (
        8,
        TRAIN,
        [[0, 0, 1], [0, 0, 7], [0, 0, 5]],
        (0, 0, 5),
        [0],
        [NONE, np.array([1]), np.array([2, 5])],
    ),
    "no rival": (
        4,
        [[0, 0, 1], [0, 1, 2], [3, 0, 0]],
        [[0, 1, 0], [0, 1, 1], [0, 1, 3]],
        (0, 1, 2),
        [],
        [NONE, np.array([0])],
    ),
}


@pytest.mark.parametrize("case", list(META_CASES))
def test_mimics_are_fitted_on_the_refit_s_device_whatever_the_default_device(case):
    """A caller who set another default device (torch.set_default_device) still gets mimics seeded
    and fitted on ``device``; the meta device stands in for that other device on a machine without
    a GPU (a tensor left on it has no data: reading it back fails)."""
    n, train, known_rows, query, fact_rows, removals = META_CASES[case]
    model = tiny_model(num_entities=n)
    known = KnownTails([np.array(known_rows)], 4)
    opts = LocalRetrainOptions(steps=3, learning_rate=0.1, seed=5)
    with torch.device("meta"):
        refit = LocalRefit(model, np.array(train), known, 0.1, opts, torch.device("cpu"))
        oriented, rows = refit.side(query[0], np.array(fact_rows, np.int64))
        got = refit.margins(query, oriented, rows, removals)
    # the start: the seeded CPU draw at the entities' spread, whatever the default device
    w = model.entity.weight.detach()
    want_start = torch.randn(12, generator=torch.Generator().manual_seed(5), dtype=torch.float64) * float(w.std())
    assert refit.start.device == torch.device("cpu")
    torch.testing.assert_close(refit.start, want_start, rtol=0, atol=0)
    pairs = list(zip(map(tuple, oriented.tolist()), rows.tolist()))
    ref = [one_mimic_margin(model, pairs, query, set(x.tolist()), known, 0.1, 3, 0.1, want_start) for x in removals]
    np.testing.assert_allclose(got, ref, rtol=1e-11, atol=1e-12)


# --------------------------------------------------------------------------- the search


FULL = {(0, 0, 5): 2.0, (5, 2, 0): 1.5}  # each side's margin fitted on all its triples
WEIGHT = {
    (0, 0, 5): {1: 0.05, 2: 1.0, 5: 0.5, 7: 0.3, 8: 0.0},  # the head side
    (5, 2, 0): {3: 0.1, 4: 0.4, 5: 0.6},  # the tail side
}


def table_drop(query, removed):
    """How much removing ``removed`` costs one side's margin: additive, plus 3 when rows 1 and 7
    go together (each alone is hardly needed: redundant support)."""
    w = WEIGHT[query]
    d = sum(w.get(int(x), 0.0) for x in removed)
    return d + (3.0 if query == (0, 0, 5) and {1, 7} <= {int(x) for x in removed} else 0.0)


def with_table_margins(refit):
    """Replace the mimic fits by the margin table; record every call's side and mimic count."""
    calls = []

    def margins(query, oriented, rows, removals):
        assert 0 not in rows.tolist()  # the fact's row is never in a mimic's data
        want_oriented, want_rows = refit.side(query[0], np.array([0]))
        assert rows.tolist() == want_rows.tolist() and oriented.tolist() == want_oriented.tolist()
        calls.append((query, [sorted(np.asarray(x).tolist()) for x in removals]))
        kept = lambda x: [r for r in np.asarray(x).tolist() if r in set(rows.tolist())]  # noqa: E731
        return np.array([FULL[query] - table_drop(query, kept(x)) for x in removals])

    refit.margins = margins
    return calls


def brute_force_greedy(searched_rows, k, sides):
    drop = lambda s: sum(table_drop(q, [r for r in s if r in rows]) for q, rows in sides)  # noqa: E731
    chosen = [max(searched_rows, key=lambda r: drop([r]))]
    while len(chosen) < min(k, len(searched_rows)):
        rest = [r for r in searched_rows if r not in chosen]
        chosen.append(max(rest, key=lambda r: drop(chosen + [r])))
    return chosen


CANDS = np.array([1, 2, 3, 4, 5, 6, 7])
PRE = np.array([0.9, 0.1, 0.5, 0.3, 0.8, 0.95, 0.7])  # pre-rank order: rows 6, 1, 5, 7, 3, 4, 2


def test_greedy_search_grows_the_costliest_set_and_keys_rank_picks_then_drops_then_the_pre_ranking():
    refit = refit_of(tiny_model(), TRAIN, candidates=5, k=4)
    calls = with_table_margins(refit)
    keys, record = refit.explain((0, 0, 5), CANDS, PRE, np.array([0]))
    # searched: the first 5 touching an end in pre-rank order (row 6 touches neither; row 2 is 6th)
    searched = [1, 5, 7, 3, 4]
    sides = [((0, 0, 5), {1, 2, 5, 7, 8}), ((5, 2, 0), {3, 4, 5})]
    # by hand: row 5 drops 1.1 alone; then 4 (+0.4), then 7 (+0.3), then 1 (+0.05 + 3 with 7)
    assert record["chosen_rows"] == [5, 4, 7, 1] == brute_force_greedy(searched, 4, sides)
    assert record["searched"] == 5 and record["margin_full"] == {"head": 2.0, "tail": 1.5}
    # single drops: 1: 0.05, 5: 1.1, 7: 0.3, 3: 0.1, 4: 0.4; span = 1.1 - 0.05 + 1 = 2.05
    # picks: 1.1 + 2.05 × 4, 3, 2, 1; row 3 its own drop; rows 6 then 2 at 0.05 - 2.05 - 1, - 2
    want = [1.1 + 2.05, -4.0, 0.1, 1.1 + 3 * 2.05, 1.1 + 4 * 2.05, -3.0, 1.1 + 2 * 2.05]
    np.testing.assert_allclose(keys, want, rtol=1e-12, atol=1e-12)
    # each side's full mimic once, in its first batch; a side is refitted only for sets touching it
    head, tail = (0, 0, 5), (5, 2, 0)
    assert calls[0] == (head, [[], [1], [5], [7]]) and calls[1] == (tail, [[], [5], [3], [4]])
    assert sum(x == [] for _, sets in calls for x in sets) == 2
    for q, sets in calls[2:]:
        own = {1, 2, 5, 7, 8} if q == head else {3, 4, 5}
        assert all(set(x) & own for x in sets)


def test_single_search_keys_the_searched_by_their_own_drop():
    refit = refit_of(tiny_model(), TRAIN, candidates=8, search="single")
    calls = with_table_margins(refit)
    keys, record = refit.explain((0, 0, 5), CANDS, PRE, np.array([0]))
    # every candidate but row 6 is searched: drops 1: 0.05, 2: 1.0, 3: 0.1, 4: 0.4, 5: 1.1, 7: 0.3
    assert record["chosen_rows"] == [] and record["searched"] == 6 and len(calls) == 2
    np.testing.assert_allclose(keys, [0.05, 1.0, 0.1, 0.4, 1.1, 0.05 - 2.05 - 1, 0.3], rtol=1e-12)


def test_greedy_stops_at_the_searched_and_ties_in_the_pre_ranking_keep_the_candidates_order():
    refit = refit_of(tiny_model(), TRAIN, candidates=2, k=10)
    with_table_margins(refit)
    keys, record = refit.explain((0, 0, 5), CANDS, np.zeros(7), np.array([0]))
    # all tied: searched are the first two candidates touching an end, rows 1 and 2
    assert record["searched"] == 2 and record["chosen_rows"] == [2, 1]
    # picks at 1.0 + span × 2, 1; span = 1.0 - 0.05 + 1; the rest, in candidate order, below 0.05 - span
    span = 1.95
    rest = [0.05 - span - p for p in (1, 2, 3, 4, 5)]
    np.testing.assert_allclose(keys, [1.0 + span, 1.0 + 2 * span, *rest], rtol=1e-12)


def test_a_model_without_inverses_searches_the_head_side_only():
    refit = refit_of(tiny_model(reciprocal=False), TRAIN, candidates=8, k=2)
    with_table_margins(refit)
    keys, record = refit.explain((0, 0, 5), CANDS, PRE, np.array([0]))
    # the head's rows 1, 5, 7 (and 8, not a candidate); 2 (0 as its tail), 3 and 4 are not searched
    assert record["margin_full"] == {"head": 2.0} and record["searched"] == 3
    assert record["chosen_rows"] == [5, 7]  # 0.5 alone (its tail side not counted), then 7 (+0.3)
    # single drops 1: 0.05, 5: 0.5, 7: 0.3; span 1.45; the rest in pre-rank order: 6, 3, 4, 2
    want = [0.05, -5.4, -3.4, -4.4, 0.5 + 2 * 1.45, -2.4, 0.5 + 1.45]
    np.testing.assert_allclose(keys, want, rtol=1e-12)


def test_no_candidate_touching_the_fact_leaves_the_pre_ranking():
    refit = refit_of(tiny_model(), TRAIN)
    with_table_margins(refit)
    keys, record = refit.explain((0, 0, 5), np.array([6]), np.array([0.3]), np.array([0]))
    assert record == {"margin_full": {"head": 2.0, "tail": 1.5}, "searched": 0, "chosen_rows": []}
    assert keys.tolist() == [-2.0]  # 0 - 1 - its position


def test_the_pre_ranking_is_read_by_value_and_long_ties_keep_the_candidates_order():
    # 40 triples of the fact's head, pre-ranked 1, 0, 1, 0, …: the first 6 ones given are searched
    train = np.array([[0, 0, 5]] + [[0, 1, 10 + i] for i in range(40)])
    model = tiny_model(num_entities=50)
    refit = refit_of(model, train, candidates=6, search="single")
    refit.margins = lambda query, oriented, rows, removals: np.zeros(len(removals))
    cands = np.arange(40, 0, -1)  # rows 40, 39, …, 1
    keys, record = refit.explain((0, 0, 5), cands, np.tile([1.0, 0.0], 20), np.array([0]))
    assert record["searched"] == 6
    assert np.flatnonzero(keys == 0.0).tolist() == [0, 2, 4, 6, 8, 10]
    # the rest below, in the pre-ranking with ties in the order given: keys -2, -3, …
    rest = [*range(12, 40, 2), *range(1, 40, 2)]
    assert keys[rest].tolist() == [-1.0 - p for p in range(1, 35)]
    # unsigned scores (counts, say) high first: negating them in their own type would wrap
    pre = np.array([3, 200, 0, 7] + [1] * 36, np.uint8)
    keys, record = refit.explain((0, 0, 5), cands, pre, np.array([0]))
    top = np.argsort(-keys, kind="stable")[:6]
    assert sorted(top.tolist()) == [0, 1, 3, 4, 5, 6]  # 200, 7, 3, then the first three of the 1s


def test_a_greedy_round_touching_only_the_tail_still_refits_the_tail():
    # the fact (0, 0, 5); rows 1-3 are the tail's alone, row 4 the head's
    train = np.array([[0, 0, 5], [5, 1, 1], [5, 1, 2], [5, 1, 3], [0, 1, 4]])
    refit = refit_of(tiny_model(), train, candidates=3, k=3)
    weight = {1: 0.5, 2: 0.1, 3: 0.3}  # each removed tail row costs the tail's margin this much

    def margins(query, oriented, rows, removals):
        side = weight if query == (5, 2, 0) else {}
        return np.array([1.0 - sum(side.get(int(x), 0.0) for x in r) for r in removals])

    refit.margins = margins
    keys, record = refit.explain((0, 0, 5), np.array([1, 2, 3]), np.array([0.9, 0.8, 0.7]), np.array([0]))
    # row 1 alone costs most; then {1, 3} (0.8) beats {1, 2} (0.6), though row 2 is pre-ranked higher
    assert record["chosen_rows"] == [1, 3, 2]
    span = 0.4 + 1.0
    np.testing.assert_allclose(keys, [0.5 + 3 * span, 0.5 + span, 0.5 + 2 * span], rtol=1e-12)


def test_the_fit_is_in_the_model_s_precision():
    # label smoothing eps / N = 0.1 / 7 has no exact float32 value: float32 targets would move the
    # float64 fit by about 1e-9
    model = tiny_model(num_entities=7)
    train = np.array([[0, 0, 1], [0, 1, 2], [0, 1, 3], [4, 0, 0]])
    known = KnownTails([np.array([[0, 0, 1]])], 4)
    refit = refit_of(model, train, known, eps=0.1, steps=5, learning_rate=0.1, seed=4)
    oriented, rows = refit.side(0, NONE)
    got = refit.margins((0, 0, 1), oriented, rows, [NONE, np.array([1])])
    pairs = list(zip(map(tuple, oriented.tolist()), rows.tolist()))
    ref = [one_mimic_margin(model, pairs, (0, 0, 1), x, known, 0.1, 5, 0.1, refit.start) for x in (set(), {1})]
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-13)
