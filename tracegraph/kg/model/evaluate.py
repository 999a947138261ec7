"""Filtered rank evaluation, chunked over entities so memory stays bounded whatever N is.

For a query (h, r, ?) with answer t, the *filtered* rank ignores every other known true tail of
(h, r) in train + valid + test. Ties: optimistic = 1 + #greater, pessimistic = 1 + #greater +
#equal, realistic = their mean (what we report by default). With reciprocal relations the head
side is the tail query (t, r⁻¹, ?).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from tracegraph.kg.data.triples import KnownTails

HITS_AT = (1, 3, 5, 10)


@dataclass
class Ranks:
    """Ranks of one side (tail or head) for M test triples."""

    side: str
    optimistic: np.ndarray
    pessimistic: np.ndarray
    score: np.ndarray
    topk_ids: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    topk_scores: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))

    @property
    def realistic(self) -> np.ndarray:
        """The mean of optimistic and pessimistic ranks (ties split evenly), shape ``[M]``."""
        return (self.optimistic + self.pessimistic) / 2.0


def metrics(ranks: np.ndarray) -> dict:
    """Ranking metrics of a set of ranks.

    Args:
        ranks: Ranks, 1 = best.

    Returns:
        ``count``, ``mrr``, ``mr`` and ``hits@1/3/5/10``; just ``{"count": 0}`` when empty.
    """
    ranks = np.asarray(ranks, dtype=np.float64)
    if ranks.size == 0:
        return {"count": 0}
    out = {"count": int(ranks.size), "mrr": float(np.mean(1.0 / ranks)), "mr": float(np.mean(ranks))}
    for k in HITS_AT:
        out[f"hits@{k}"] = float(np.mean(ranks <= k))
    return out


@torch.no_grad()
def rank_queries(
    model,
    heads: np.ndarray,
    relations: np.ndarray,
    answers: np.ndarray,
    known: KnownTails | None,
    *,
    side: str = "tail",
    batch_size: int = 256,
    entity_chunk: int = 65536,
    top_k: int = 0,
    device: torch.device | str = "cpu",
) -> Ranks:
    """Rank each answer among all entities for its ``(head, relation)`` query, filtered by ``known``.

    Other known answers of a query are removed from its list; ties with the answer give the
    optimistic and pessimistic ranks.

    Args:
        model: A :class:`~tracegraph.kg.model.conve.ConvE` model (put in eval mode).
        heads: Query head ids ``[M]``.
        relations: Query relation ids ``[M]``.
        answers: The answer (tail) ids ``[M]``.
        known: Every known true answer per query, or None for unfiltered ranks.
        side: ``"tail"`` or ``"head"``, recorded in the result.
        batch_size: Queries per batch.
        entity_chunk: Entities scored at a time (bounds memory for large graphs).
        top_k: Also keep the ``k`` best-scored filtered entities per query (0: none).
        device: Where to compute.

    Returns:
        The ranks, the answers' scores and, with ``top_k``, the top entities and their scores.
    """
    model.eval()
    N = model.config.num_entities
    M = len(answers)
    opt = np.zeros(M, np.float64)
    pes = np.zeros(M, np.float64)
    true_score = np.zeros(M, np.float32)
    k = min(top_k, N)
    topk_ids = np.zeros((M, k), np.int64)
    topk_sc = np.zeros((M, k), np.float32)
    chunks = [(s, min(s + entity_chunk, N)) for s in range(0, N, entity_chunk)]
    for b0 in range(0, M, batch_size):
        sl = slice(b0, min(b0 + batch_size, M))
        h = torch.as_tensor(heads[sl], device=device)
        r = torch.as_tensor(relations[sl], device=device)
        t = torch.as_tensor(answers[sl], device=device)
        B = len(t)
        x = model.hidden(h, r)
        if known is not None:
            fb, fe = known.batch(heads[sl], relations[sl])
            fb, fe = torch.as_tensor(fb, device=device), torch.as_tensor(fe, device=device)
        else:
            fb = fe = torch.zeros(0, dtype=torch.long, device=device)
        # the answer's score, taken from the same chunk matmul that the comparisons use, so a
        # bitwise-different recomputation cannot turn a tie into a win or a loss
        st = torch.empty(B, device=device)
        for s0, s1 in chunks:
            inside = (t >= s0) & (t < s1)
            if inside.any():
                sc = model.score_hidden(x, s0, s1).float()
                rows = inside.nonzero(as_tuple=True)[0]
                st[rows] = sc[rows, t[rows] - s0]
        greater = torch.zeros(B, dtype=torch.long, device=device)
        equal = torch.zeros(B, dtype=torch.long, device=device)
        run_ids = torch.zeros((B, 0), dtype=torch.long, device=device)
        run_sc = torch.zeros((B, 0), device=device)
        arangeB = torch.arange(B, device=device)
        for s0, s1 in chunks:
            sc = model.score_hidden(x, s0, s1).float()
            sel = (fe >= s0) & (fe < s1)
            sc[fb[sel], fe[sel] - s0] = float("-inf")  # other known true answers
            inside = (t >= s0) & (t < s1)
            sc[arangeB[inside], t[inside] - s0] = st[inside]  # the answer itself stays in the list
            greater += (sc > st[:, None]).sum(1)
            equal += (sc == st[:, None]).sum(1)
            if k:
                cv, ci = sc.topk(min(k, s1 - s0), dim=1)
                run_sc, pos = torch.cat([run_sc, cv], 1).topk(min(k, run_sc.shape[1] + cv.shape[1]), dim=1)
                run_ids = torch.cat([run_ids, ci + s0], 1).gather(1, pos)
        equal -= 1  # the answer equals itself
        opt[sl] = (1 + greater).cpu().numpy()
        pes[sl] = (1 + greater + equal).cpu().numpy()
        true_score[sl] = st.cpu().numpy()
        if k:
            topk_ids[sl] = run_ids.cpu().numpy()
            topk_sc[sl] = run_sc.cpu().numpy()
    return Ranks(side, opt, pes, true_score, topk_ids, topk_sc)


def evaluate(
    model,
    triples: np.ndarray,
    known: KnownTails | None,
    *,
    batch_size: int = 256,
    entity_chunk: int = 65536,
    top_k: int = 0,
    device="cpu",
) -> tuple[dict, list[Ranks]]:
    """Filtered ranking metrics for tails and, for reciprocal models, heads.

    Args:
        model: A :class:`~tracegraph.kg.model.conve.ConvE` model.
        triples: Test triples ``[M, 3]`` as ids.
        known: The filter triples' index; it must include the reciprocals when the model is
            reciprocal. None for unfiltered ranks.
        batch_size: Queries per batch.
        entity_chunk: Entities scored at a time.
        top_k: Also keep the ``k`` best-scored entities per query (0: none).
        device: Where to compute.

    Returns:
        The metrics (see :func:`summarize`) and the ranks of each side.
    """
    triples = np.asarray(triples, np.int64).reshape(-1, 3)
    kw = dict(batch_size=batch_size, entity_chunk=entity_chunk, top_k=top_k, device=device)
    sides = [rank_queries(model, triples[:, 0], triples[:, 1], triples[:, 2], known, side="tail", **kw)]
    if model.config.reciprocal:
        inv = triples[:, 1] + model.config.num_relations
        sides.append(rank_queries(model, triples[:, 2], inv, triples[:, 0], known, side="head", **kw))
    return summarize(sides), sides


def summarize(sides: list[Ranks]) -> dict:
    """Metrics per side (realistic ranks, plus optimistic and pessimistic MRR) and for both sides.

    Args:
        sides: Ranks of the tail side and, optionally, the head side.

    Returns:
        ``{"tail": ..., "head": ..., "both": ...}`` of :func:`metrics` dictionaries.
    """
    result = {}
    for rk in sides:
        result[rk.side] = metrics(rk.realistic)
        result[rk.side]["mrr_optimistic"] = metrics(rk.optimistic).get("mrr")
        result[rk.side]["mrr_pessimistic"] = metrics(rk.pessimistic).get("mrr")
    result["both"] = metrics(np.concatenate([rk.realistic for rk in sides]))
    return result


def evaluation_record(metrics: dict, checkpoint, test, filter_files, unseen: dict | None) -> dict:
    """The layout of ``evaluation.json`` (``tracegraph evaluate``) and ``test_results.json`` (``train``).

    Args:
        metrics: :func:`summarize`'s ``{"tail", "head", "both"}`` metrics.
        checkpoint: The model ranked (its file).
        test: The triples ranked (their file).
        filter_files: The files of known true triples filtered, each once.
        unseen: What the ``--unseen`` policy found and did (``UnseenReport.to_json``), or None.

    Returns:
        ``{"metrics", "checkpoint", "test", "filter", "unseen"}``.
    """
    return {
        "metrics": metrics,
        "checkpoint": str(checkpoint),
        "test": str(test),
        "filter": [str(f) for f in filter_files],
        "unseen": unseen,
    }
