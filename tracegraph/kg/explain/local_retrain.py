"""``local-retrain``: explanations chosen by what a prediction *needs* (after Kelpie, Rossi et al.).

Influence scores estimate what removing a training triple would do; this method does it, locally.
Everything in the trained model is frozen except one vector: a *mimic* of the fact's head (and,
with reciprocal relations, of its tail) is fitted from scratch on that entity's own training
triples — for a subset X of candidates, on those triples minus X. The candidate set X is scored
by how much the prediction's margin falls::

    drop(X) = margin(mimic fitted on all its triples) − margin(mimic fitted without X)
    margin  = s(e, r, answer) − max over the filtered other entities s(e, r, ·)

Comparing two mimics (never a mimic with the original embedding) keeps the fit's own error out of
the difference; both start from the same seeded vector and take the same steps, so the data are
the only difference. Every mimic of a search round trains in one batch: Adam is elementwise, so S
mimics in one tensor are S independent fits.

The search: the top ``candidates`` of a cheap pre-ranking (TracIn) among the triples touching the
fact's head or tail are scored one by one, then a greedy search grows the set one triple at a
time up to k, each time adding the triple whose removal, together with those already chosen,
costs the margin most (redundant support — two triples each of which alone is not needed — is
what one-at-a-time scores miss).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F


@dataclass
class LocalRetrainOptions:
    """Settings of the local-retrain explanation method.

    Attributes:
        candidates: How many of the pre-ranking's top candidates the search looks at.
        k: The greedy search grows removal sets up to this size.
        steps: Adam steps per mimic fit.
        learning_rate: Adam's learning rate for the mimic.
        search: ``"greedy"``, or ``"single"`` for one-at-a-time removals only.
        seed: Seed of the search's tie-breaks.
    """

    candidates: int = 8  # top of the pre-ranking that the search looks at
    k: int = 4  # the greedy search grows subsets up to this size
    steps: int = 60  # Adam steps per mimic
    learning_rate: float = 0.05
    search: str = "greedy"  # greedy | single (one-at-a-time drops only)
    seed: int = 0


class LocalRefit:
    """Mimic fits for one trained model; see the module doc."""

    def __init__(
        self,
        model,
        train_ids: np.ndarray,
        known,
        label_smoothing: float,
        opts: LocalRetrainOptions,
        device: torch.device,
    ):
        self.model = model.to(device).eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.train_ids, self.known, self.eps, self.opts, self.device = train_ids, known, label_smoothing, opts, device
        c = model.config
        self.R, self.N, self.reciprocal = c.num_relations, c.num_entities, c.reciprocal
        with torch.no_grad():
            w = self.model.entity.weight
            g = torch.Generator().manual_seed(opts.seed)
            # a start like the trained entities' spread, the same for every mimic; drawn on the CPU
            # (the generator's device), whatever the caller's default device
            draw = torch.randn(w.shape[1], generator=g, dtype=torch.float64, device="cpu")
            self.start = (draw * float(w.std())).to(w)

    # ---- the data of one side: the entity's training triples, written with it as the head

    def side(self, entity: int, exclude_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The training triples of one entity, oriented with the entity first.

        For a reciprocal model, ``(a, r, entity)`` is included as ``(entity, r + R, a)``.

        Args:
            entity: The entity id.
            exclude_rows: Training rows to leave out (the fact itself).

        Returns:
            The oriented triples ``[n, 3]`` and their rows in ``train_ids``.
        """
        ids = self.train_ids
        rows_h = np.flatnonzero(ids[:, 0] == entity)
        out, rows = [ids[rows_h]], [rows_h]
        if self.reciprocal:  # (a, r, entity) is (entity, r⁻¹, a) for a reciprocal model
            rows_t = np.flatnonzero((ids[:, 2] == entity) & (ids[:, 0] != entity))
            inv = ids[rows_t][:, [2, 1, 0]].copy()
            inv[:, 1] += self.R
            out.append(inv)
            rows.append(rows_t)
        o, r = np.concatenate(out), np.concatenate(rows)
        keep = ~np.isin(r, exclude_rows)
        return o[keep], r[keep]

    # ---- fitting

    def margins(
        self, query: tuple[int, int, int], oriented: np.ndarray, rows: np.ndarray, removals: list[np.ndarray]
    ) -> np.ndarray:
        """The margin of ``query`` for a mimic of its entity fitted without each removal set.

        Args:
            query: ``(e, r, answer)``, with ``e`` the entity being refitted.
            oriented: ``e``'s oriented training triples ``[n, 3]`` (see :meth:`side`).
            rows: Their rows in ``train_ids``.
            removals: Row sets to leave out, one mimic each.

        Returns:
            ``[len(removals)]`` margins: the answer's score minus its best filtered rival's.
        """
        e, q_rel, answer = query
        data = self.removal_data(oriented, rows, removals)
        if data is None:  # no mimic to fit (torch cannot shape an empty batch of them)
            return np.zeros(0)
        mimic = self.start.expand(len(removals), -1).clone().requires_grad_(True)
        opt = torch.optim.Adam([mimic], lr=self.opts.learning_rate)
        for _ in range(self.opts.steps):
            loss = self.objective(mimic, data).sum()  # summed over mimics: independent fits
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return self.margin_at(mimic.detach(), e, q_rel, answer)

    def removal_data(self, oriented: np.ndarray, rows: np.ndarray, removals: list[np.ndarray]):
        """Per removal set, the smoothed 1-N targets of each of the entity's relations, and which are samples.

        Args:
            oriented: The entity's oriented training triples ``[n, 3]``.
            rows: Their rows in ``train_ids``.
            removals: Row sets to leave out, one objective each.

        Returns:
            ``(relation embeddings [P, d], smoothed targets [S, P, N], active [S, P])``, or None for no set.
        """
        pairs, pair_of = np.unique(oriented[:, 1], return_inverse=True)  # one sample per relation of e
        S, P = len(removals), len(pairs)
        if not S:
            return None
        dev = self.device
        targets = torch.zeros(S, P, self.N, device=dev, dtype=self.start.dtype)
        keep = np.stack([~np.isin(rows, np.asarray(x, np.int64)) for x in removals])
        s_idx, t_idx = np.nonzero(keep)
        targets[
            torch.as_tensor(s_idx, device=dev),
            torch.as_tensor(pair_of[t_idx], device=dev),
            torch.as_tensor(oriented[t_idx, 2], device=dev),
        ] = 1.0
        active = (targets.sum(-1) > 0).to(targets.dtype)  # a relation with no tail left is no sample (as in KvsAll)
        smoothed = (1 - self.eps) * targets + self.eps / self.N
        rel = self.model.relation.weight[torch.as_tensor(pairs, device=dev)]  # [P, d]
        return rel, smoothed, active

    def objective(self, mimic: torch.Tensor, data) -> torch.Tensor:
        """Each set's 1-N BCE of its entity vector ``mimic[s]`` over the set's samples: ``[S]``."""
        rel, smoothed, active = data
        S, P = active.shape
        x = self.model.encode(mimic[:, None, :].expand(S, P, -1).reshape(S * P, -1), rel.repeat(S, 1))
        logits = self.model.score_hidden(x).view(S, P, self.N)
        bce = F.binary_cross_entropy_with_logits(logits, smoothed, reduction="none").sum(-1)
        return (bce * active).sum(1) / active.sum(1).clamp_min(1)

    def margin_at(self, vectors: torch.Tensor, e: int, q_rel: int, answer: int) -> np.ndarray:
        """The answer's score minus its best filtered rival's, for each entity vector in ``vectors``."""
        with torch.no_grad():
            S = vectors.shape[0]
            x = self.model.encode(vectors, self.model.relation.weight[q_rel].expand(S, -1))
            s = self.model.score_hidden(x)  # [S, N]
            others = torch.ones(self.N, dtype=torch.bool, device=self.device)
            others[torch.as_tensor(self.known.tails_of(e, q_rel), device=self.device)] = False  # filtered
            others[answer] = False
            rival = s[:, others].max(1).values if bool(others.any()) else torch.zeros(S, device=self.device)
            return (s[:, answer] - rival).double().cpu().numpy()

    # ---- the search for one fact

    def explain(
        self, fact: tuple[int, int, int], candidates: np.ndarray, pre_rank: np.ndarray, fact_rows: np.ndarray
    ) -> tuple[np.ndarray, dict]:
        """Sort keys for one fact's candidates, and a record of the search.

        Args:
            fact: The fact ``(h, r, t)``.
            candidates: Candidate rows of ``train_ids``.
            pre_rank: The candidates' cheap pre-ranking scores (high first).
            fact_rows: Training rows equal to the fact: never candidates, never in a mimic's data.

        Returns:
            The sort keys (descending), and a record of the search for the report.
        """
        h, r, t = fact
        sides = [((h, r, t), *self.side(h, fact_rows))]
        if self.reciprocal:
            sides.append(((t, r + self.R, h), *self.side(t, fact_rows)))
        order = np.argsort(-np.asarray(pre_rank, np.float64), kind="stable")
        local = np.concatenate([s[2] for s in sides])
        searched = [i for i in order if candidates[i] in local][: self.opts.candidates]
        full: dict[int, float] = {}

        def drops(sets: list[list[int]]) -> np.ndarray:
            total = np.zeros(len(sets))
            for n, s in enumerate(sides):
                hit = [j for j, x in enumerate(sets) if np.isin(candidates[x], s[2]).any()]
                first = n not in full  # the first call also fits the mimic on all triples, in the same batch
                if not hit and not first:
                    continue
                m = self.margins(s[0], s[1], s[2], [np.zeros(0, np.int64)] * first + [candidates[sets[j]] for j in hit])
                if first:
                    full[n], m = float(m[0]), m[1:]
                total[hit] += full[n] - m
            return total

        single = drops([[i] for i in searched])
        chosen: list[int] = []
        if self.opts.search == "greedy" and searched:
            chosen, rest = [int(searched[int(np.argmax(single))])], list(searched)
            rest.remove(chosen[0])
            while len(chosen) < min(self.opts.k, len(searched)):
                d = drops([chosen + [i] for i in rest])
                best = rest[int(np.argmax(d))]
                chosen.append(int(best))
                rest.remove(best)
        # keys: the greedy picks in order, then the searched by their own drop, then the pre-ranking
        keys = np.full(len(candidates), -np.inf)
        span = float(np.ptp(single)) + 1.0 if len(single) else 1.0
        lo = float(single.min()) if len(single) else 0.0
        keys[searched] = single
        for pos, i in enumerate(chosen):
            keys[i] = float(single.max()) + span * (len(chosen) - pos)
        rest_idx = np.flatnonzero(~np.isfinite(keys))
        keys[rest_idx] = lo - span - _positions(order, rest_idx)
        record = {
            "margin_full": {("head" if n == 0 else "tail"): full[n] for n in full},
            "searched": len(searched),
            "chosen_rows": [int(candidates[i]) for i in chosen],
        }
        return keys, record


def _positions(order: np.ndarray, subset: np.ndarray) -> np.ndarray:
    """1-based position of each of ``subset`` within ``order`` restricted to ``subset``."""
    restricted = order[np.isin(order, subset)]
    pos = np.empty(len(order), np.int64)
    pos[restricted] = np.arange(1, len(restricted) + 1)
    return pos[subset].astype(np.float64)
