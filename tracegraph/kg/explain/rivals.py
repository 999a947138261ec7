"""Each fact's rival: the strongest answer the model gives to the fact's query that is not known true.

A rank-1 prediction holds while its logit beats the rival's, so the margin methods
(kg/explain/methods.py) explain the margin over the rival and the necessity test reports it.
On the tail side the query is (h, r, ?); on the head side of a reciprocal model (t, r⁻¹, ?).
"""

from __future__ import annotations

import numpy as np

from tracegraph.errors import TracegraphError
from tracegraph.kg.model.evaluate import rank_queries


def queries(facts: np.ndarray, head_side, num_relations: int) -> np.ndarray:
    """The query the model ranks for each fact (h, r, t): (h, r, t), or (t, r⁻¹, h) on the head side.

    Args:
        facts: ``[T, 3]`` facts as ids, base relations.
        head_side: ``[T]`` booleans, true for a head-side fact (reciprocal models); None: all tail side.
        num_relations: R, the number of base relations (r⁻¹ = r + R).

    Returns:
        ``[T, 3]`` int64 queries; the answer is the last column.
    """
    q = np.array(facts, dtype=np.int64).reshape(-1, 3)
    if head_side is not None:
        hs = np.asarray(head_side, bool)
        q[hs] = np.stack([q[hs, 2], q[hs, 1] + num_relations, q[hs, 0]], 1)
    return q


def rank_and_rival(model, facts: np.ndarray, known, head_side=None):
    """Per fact (h, r, t), on its side: its filtered rank (realistic), its logit, its rival and the rival's logit.

    The rival is (h, r, t*), t* the tail the model scores highest among those neither t nor known
    true for (h, r) in ``known``; on the head side, (h*, r, t) with h* the best filtered answer to
    (t, r⁻¹, ?). One filtered top-2 pass of :func:`rank_queries`: the rival is whichever is not the answer.

    Args:
        model: the ConvE model (on its device).
        facts: ``[T, 3]`` facts as ids, base relations.
        known: the filter index (a KnownTails, with reciprocals); None: only the fact's answer is left out.
        head_side: ``[T]`` booleans, true for a head-side fact; None: all tail side.

    Returns:
        ``(ranks, fact_logits, rivals, rival_logits)``: ``[T]`` float64 ranks, ``[T]`` logits,
        ``[T, 3]`` rival triples as ids, ``[T]`` logits.

    Raises:
        TracegraphError: a head-side fact and a model without reciprocal relations.
    """
    facts = np.asarray(facts, dtype=np.int64).reshape(-1, 3)
    hs = np.zeros(len(facts), bool) if head_side is None else np.asarray(head_side, bool)
    if hs.any() and not model.config.reciprocal:
        raise TracegraphError("head-side facts need a model with reciprocal relations")
    q = queries(facts, hs, model.config.num_relations)
    rk = rank_queries(model, q[:, 0], q[:, 1], q[:, 2], known, top_k=2, device=next(model.parameters()).device)
    top = rk.topk_ids
    best = np.where(top[:, 0] == q[:, 2], top[:, 1], top[:, 0])
    out = facts.copy()
    out[~hs, 2], out[hs, 0] = best[~hs], best[hs]
    s_fact, s_rival = side_logits(model, facts, out, hs)
    return np.asarray(rk.realistic, np.float64), s_fact, out, s_rival


def competitors(model, facts: np.ndarray, known, head_side=None) -> np.ndarray:
    """Per fact, its rival (see :func:`rank_and_rival`).

    Args:
        model: the ConvE model.
        facts: ``[T, 3]`` facts as ids.
        known: the filter index; None: only the fact's answer is left out.
        head_side: ``[T]`` booleans, true for a head-side fact; None: all tail side.

    Returns:
        ``[T, 3]`` rival triples as ids.
    """
    return rank_and_rival(model, facts, known, head_side)[2]


def triple_logits(model, triples: np.ndarray) -> np.ndarray:
    """s(h, r, t) of each triple, in eval mode (no dropout; BatchNorm's running statistics), float64.

    Args:
        model: the ConvE model (put in eval mode).
        triples: ``[T, 3]`` triples as ids (inverse relations allowed).

    Returns:
        ``[T]`` float64 logits.
    """
    import torch

    model.eval()
    dev = next(model.parameters()).device
    x = np.asarray(triples, np.int64)
    with torch.no_grad():
        return model.score_triples(*(torch.as_tensor(x[:, i], device=dev) for i in range(3))).double().cpu().numpy()


def side_logits(model, facts: np.ndarray, rivals: np.ndarray, head_side) -> tuple[np.ndarray, np.ndarray]:
    """The logits of each fact's query and of its rival's, on the fact's side.

    On the tail side s(h, r, t) and s(h, r, t*); on the head side s(t, r⁻¹, h) and s(t, r⁻¹, h*).

    Args:
        model: the ConvE model.
        facts: ``[T, 3]`` facts as ids.
        rivals: ``[T, 3]`` their rivals as ids.
        head_side: ``[T]`` booleans, true for a head-side fact; None: all tail side.

    Returns:
        ``(fact_logits, rival_logits)``, each ``[T]`` float64.
    """
    R = model.config.num_relations
    return triple_logits(model, queries(facts, head_side, R)), triple_logits(model, queries(rivals, head_side, R))
