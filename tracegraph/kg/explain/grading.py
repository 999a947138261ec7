"""The facts a necessity protocol grades: drawn among those the run ranks first, ranked, and ahead of their rival.

Shared by ``fidelity necessity`` (kg/explain/necessity.py) and ``fidelity compare``
(kg/explain/compare.py): the same draw, the same filtered ranks and margins, and the same
tie-broken top-k of a method's ranking, so the two protocols grade facts alike.
"""

from __future__ import annotations

import numpy as np

from tracegraph.kg.explain.ranking import ranked_order
from tracegraph.kg.explain.removal import tail_ranks
from tracegraph.kg.explain.rivals import competitors, queries, side_logits


def choose_facts(ranks: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Pick up to ``n`` positions of triples ranked first, at random (seeded), in file order.

    Args:
        ranks: Filtered ranks, one per triple.
        n: Most positions to return.
        seed: Sampling seed.

    Returns:
        Sorted positions.
    """
    first = np.flatnonzero(np.asarray(ranks) <= 1.0)
    if len(first) > n:
        first = np.sort(np.random.default_rng(seed).choice(first, size=n, replace=False))
    return first


def fact_ranks(model, facts: np.ndarray, head_side: np.ndarray, known) -> np.ndarray:
    """The filtered realistic rank of each fact's answer on its side (the tail, or the head).

    Args:
        model: The ConvE model.
        facts: Fact triples ``[n, 3]``.
        head_side: Boolean ``[n]``: true where the head is the answer.
        known: The filter index (with reciprocals).

    Returns:
        ``[n]`` ranks.
    """
    return tail_ranks(model, queries(facts, head_side, model.config.num_relations), known)[0]


def top_rows(keys: list[np.ndarray], candidates: np.ndarray, k: int, seed: int, index: int) -> np.ndarray:
    """The ``k`` candidate rows a method ranks first (ties broken at random, seeded per fact).

    Args:
        keys: The method's sort keys, most significant first; ``-inf`` in the first marks the fact.
        candidates: The fact's candidate rows.
        k: Rows to take.
        seed: Tie-break seed.
        index: The fact's position (part of the seed).

    Returns:
        Up to ``k`` rows.
    """
    tiebreak = np.random.default_rng([seed, index, 2]).permutation(len(candidates))
    order = ranked_order(keys, tiebreak)
    order = order[np.isfinite(np.asarray(keys[0], np.float64)[order])]  # -inf: the fact itself
    return candidates[order[:k]]


def fact_margins(model, facts: np.ndarray, known, head_side=None) -> np.ndarray:
    """How far ahead of its strongest rival the model puts each fact's answer.

    For ``(h, r, t)``: ``s(h, r, t) - s(h, r, t*)``, with ``t*`` the best-scored tail that is
    neither ``t`` nor known true; on the head side ``s(t, r^-1, h) - s(t, r^-1, h*)``.

    Args:
        model: The ConvE model (put in eval mode).
        facts: Fact triples ``[n, 3]``.
        known: The filter index (with reciprocals).
        head_side: Boolean ``[n]``: true where the head is the answer; None for all tails.

    Returns:
        ``[n]`` margins.
    """
    model.eval()  # competitors ranks with the model as it is
    s_fact, s_rival = side_logits(model, facts, competitors(model, facts, known, head_side), head_side)
    return s_fact - s_rival
