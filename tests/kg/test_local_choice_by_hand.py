"""local-choice against its definition worked one proposal at a time: each proposal's top-k set by a
plain sort that skips the fact, its drop from refits of that set alone on each side (local-retrain's
refit, tested by hand in test_local_retrain_by_hand.py), the largest drop chosen, the first on ties."""

import numpy as np
import pytest

from tests.kg.test_explanation_methods_by_hand import CPU, R, TRAIN, tiny_model, write_checkpoints
from tracegraph.kg.data.triples import KnownTails, with_reciprocals
from tracegraph.kg.explain import methods as M
from tracegraph.kg.explain.local_choice import LocalChoice
from tracegraph.kg.explain.local_retrain import LocalRefit, LocalRetrainOptions

FACT, FACT_ROW = (0, 0, 3), np.array([8])  # TRAIN's row 8 is the fact itself
CANDIDATES = np.array([3, 8, 0, 2, 6, 4])
KNOWN = KnownTails([with_reciprocals(TRAIN, R)], 2 * R)


def top_set(scores, k):
    ranked = sorted(range(len(scores)), key=lambda i: -scores[i])
    return sorted([int(CANDIDATES[i]) for i in ranked if CANDIDATES[i] not in FACT_ROW][:k])


def drop_alone(refit, rows):
    """Σ over the head's and the tail's mimic: margin fitted on all its triples − margin without ``rows``."""
    h, r, t = FACT
    total = 0.0
    for query, entity in (((h, r, t), h), ((t, r + R, h), t)):
        oriented, own = refit.side(entity, FACT_ROW)
        m = refit.margins(query, oriented, own, [np.zeros(0, np.int64), np.array(rows, np.int64)])
        total += float(m[0] - m[1])
    return total


@pytest.mark.parametrize("seed", [1, 5, 9])
def test_the_proposal_whose_top_k_removal_costs_the_margin_most_is_chosen(seed):
    opts = LocalRetrainOptions(k=2, steps=5, learning_rate=0.1)
    rng = np.random.default_rng(seed)
    proposals = [rng.permutation(len(CANDIDATES)).astype(np.float64) for _ in range(3)]
    proposals[0][1] = 99.0  # the fact's own row on top of one proposal: skipped, never removed
    want_sets = [top_set(p, 2) for p in proposals]
    assert len({tuple(s) for s in want_sets}) > 1
    refit = LocalRefit(tiny_model(seed), TRAIN, KNOWN, 0.2, opts, CPU)
    want_drops = [drop_alone(refit, s) for s in want_sets]
    keys, rec = LocalChoice(tiny_model(seed), TRAIN, KNOWN, 0.2, opts, CPU).explain(
        FACT, CANDIDATES, proposals, FACT_ROW
    )
    np.testing.assert_allclose(rec["drops"], want_drops, rtol=1e-5, atol=1e-7)
    best = max(range(3), key=lambda i: (round(want_drops[i], 6), -i))
    assert rec["chosen"] == best and keys.tolist() == proposals[best].tolist()


def test_proposals_that_agree_on_their_top_k_need_no_refit_and_the_first_wins(monkeypatch):
    def no_refit(*a, **k):
        raise AssertionError("a refit where every proposal removes the same set")

    choice = LocalChoice(tiny_model(3), TRAIN, KNOWN, 0.2, LocalRetrainOptions(k=2), CPU)
    monkeypatch.setattr(choice, "margins", no_refit)
    first = np.array([6.0, 5.0, 4.0, 3.0, 2.0, 1.0])  # top two without the fact: rows 3 and 0
    second = np.array([5.0, 0.0, 6.0, 1.0, 2.0, 3.0])  # the same two, another order below them
    keys, rec = choice.explain(FACT, CANDIDATES, [first, second], FACT_ROW)
    assert rec == {"drops": [None, None], "chosen": 0} and keys.tolist() == first.tolist()


def test_equal_drops_choose_the_earlier_proposal(monkeypatch):
    choice = LocalChoice(tiny_model(3), TRAIN, KNOWN, 0.2, LocalRetrainOptions(k=1), CPU)
    monkeypatch.setattr(choice, "margins", lambda q, o, rows, removals: np.array([1.0] + [0.5] * (len(removals) - 1)))
    a = np.array([6.0, 5.0, 4.0, 3.0, 2.0, 1.0])  # row 3
    b = np.array([1.0, 2.0, 6.0, 3.0, 4.0, 5.0])  # row 0
    for order in ([a, b], [b, a]):
        keys, rec = choice.explain(FACT, CANDIDATES, order, FACT_ROW)
        assert rec == {"drops": [1.0, 1.0], "chosen": 0} and keys.tolist() == order[0].tolist()


def test_local_choice_chooses_between_the_default_and_the_query_first_ranking(tmp_path):
    paths = write_checkpoints(tmp_path, [(8, 0.2), (4, 0.1)])
    facts, subsets = np.array([[0, 0, 3]]), [CANDIDATES]
    local = LocalRetrainOptions(k=2, steps=4, learning_rate=0.1, seed=2)
    kw = dict(
        model=tiny_model(8),
        checkpoints=paths,
        train_ids=TRAIN,
        facts=facts,
        subsets=subsets,
        known=KNOWN,
        opts=M.MethodOptions(label_smoothing=0.25, local=local),
        device=CPU,
    )
    assert M.CHOICE_PROPOSALS == ("tracin-margin-path", "tracin-margin-query")
    both = M.method_keys_all(list(M.CHOICE_PROPOSALS), **kw)
    proposals = [M.single_score(both[p][0], seed=0) for p in M.CHOICE_PROPOSALS]
    want, _ = LocalChoice(tiny_model(8), TRAIN, KNOWN, 0.25, local, CPU).explain(FACT, CANDIDATES, proposals, FACT_ROW)
    got = M.method_keys_all(["local-choice"], **kw)
    assert list(got) == ["local-choice"] and len(got["local-choice"][0]) == 1
    keys = got["local-choice"][0][0]
    assert keys[CANDIDATES == 8].tolist() == [-np.inf]  # the fact never on top

    def order(scores):
        return [int(CANDIDATES[i]) for i in np.argsort(-np.asarray(scores), kind="stable") if CANDIDATES[i] != 8]

    assert order(keys) == order(want) and order(want) in [order(p) for p in proposals]
