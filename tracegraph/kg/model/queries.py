"""The best answers of link-prediction queries, either way: tails of (h, r, ?) or heads of (?, r, t).

Heads come from the reciprocal relation r⁻¹ when the model was trained with it (the query
(t, r⁻¹, ?), as evaluation ranks heads); a model without reciprocals scores every (e, r, t).
"""

from __future__ import annotations

import numpy as np
import torch

from tracegraph.kg.data.triples import KnownTails


@torch.no_grad()
def top_answers(
    model,
    anchors: np.ndarray,
    relations: np.ndarray,
    side: str,
    k: int,
    known: KnownTails | None = None,
    device: str | torch.device = "cpu",
    batch_size: int = 256,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best answer entities of each query and their scores (logits).

    Args:
        model: a ConvE in eval mode, on ``device``.
        anchors: the given entity of each query: heads (``side="tail"``) or tails (``side="head"``).
        relations: the base relation of each query.
        side: ``"tail"`` ranks tails of (anchor, r, ?); ``"head"`` ranks heads of (?, r, anchor).
        k: answers per query (at most the number of entities).
        known: answers to leave out, keyed by (anchor, relation row): with reciprocals, the head side's
            row is r + R; without, an index of the inverted triples (t, r, h).
        device: where to score.
        batch_size: queries scored at once.

    Returns:
        ``(ids [M, k], scores [M, k])``, best first; where ``known`` leaves fewer than ``k`` answers, the
        slots past them score ``-inf``.
    """
    c = model.config
    k = min(k, c.num_entities)
    rows = np.asarray(relations, np.int64) + (c.num_relations if side == "head" and c.reciprocal else 0)
    anchors = np.asarray(anchors, np.int64)
    ids, scores = [], []
    for b0 in range(0, len(anchors), batch_size):
        a = torch.as_tensor(anchors[b0 : b0 + batch_size], device=device)
        r = torch.as_tensor(rows[b0 : b0 + batch_size], device=device)
        s = model.score_all(a, r).float() if side == "tail" or c.reciprocal else _every_head(model, a, r)
        if known is not None:
            bi, ti = known.batch(anchors[b0 : b0 + batch_size], rows[b0 : b0 + batch_size])
            s[torch.as_tensor(bi, device=s.device), torch.as_tensor(ti, device=s.device)] = float("-inf")
        vals, idx = s.topk(k, dim=1)
        ids.append(idx.cpu().numpy())
        scores.append(vals.cpu().numpy())
    empty = np.zeros((0, k))
    return (np.concatenate(ids) if ids else empty.astype(np.int64)), (np.concatenate(scores) if scores else empty)


def _every_head(model, tails: torch.Tensor, relations: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
    """Scores of (e, r, t) for every entity e: a model without reciprocal relations ranks heads so."""
    n = model.config.num_entities
    out = torch.empty(len(tails), n, device=tails.device)
    for j in range(len(tails)):
        for e0 in range(0, n, chunk):
            e = torch.arange(e0, min(n, e0 + chunk), device=tails.device)
            out[j, e0 : e0 + len(e)] = model.score_triples(
                e, relations[j].expand(len(e)), tails[j].expand(len(e))
            ).float()
    return out
