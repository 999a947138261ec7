"""``local-choice``: of the explanations cheap methods propose, the one the prediction needs most.

Influence methods disagree about *what kind* of fact a prediction rests on. On some graphs the
margin's top facts are what a retrain needs (UMLS: relation patterns around the head); on others
the other answers of the fact's own query are (FB15k-237: a film's other release regions), and
the margin ranks them low. Which holds differs from fact to fact, so this method asks the model:
each proposal's top-k set is removed in a local refit (kg/explain/local_retrain.py: a mimic of
the fact's head, and with reciprocal relations its tail, fitted from the same seeded start on the
entity's own triples without the set), and the proposal whose set costs the prediction's margin
most is the explanation — in that proposal's own order. Proposals that agree on their top-k cost
no refit. One batched fit per side scores every proposal: a search over two or three sets
rather than local-retrain's greedy search over single facts.
"""

from __future__ import annotations

import numpy as np

from tracegraph.kg.explain.local_retrain import LocalRefit


class LocalChoice(LocalRefit):
    """A :class:`LocalRefit` that chooses among whole proposed rankings instead of searching facts."""

    def explain(
        self, fact: tuple[int, int, int], candidates: np.ndarray, proposals: list[np.ndarray], fact_rows: np.ndarray
    ) -> tuple[np.ndarray, dict]:
        """Sort keys for one fact's candidates: the proposal whose top-k removal costs the margin most.

        Args:
            fact: The fact ``(h, r, t)``.
            candidates: Candidate rows of ``train_ids``.
            proposals: One score per candidate for each proposed ranking (larger first, no ties).
            fact_rows: Training rows equal to the fact: never in a set, never in a mimic's data.

        Returns:
            The chosen proposal's scores, and a record: each proposal's drop (None where it
            needed no refit) and the chosen proposal's position.
        """
        usable = ~np.isin(candidates, fact_rows)
        tops = []
        for p in proposals:
            order = [i for i in np.argsort(-np.asarray(p, np.float64), kind="stable") if usable[i]]
            tops.append(tuple(sorted(int(candidates[i]) for i in order[: self.opts.k])))
        distinct = list(dict.fromkeys(tops))
        drops = dict.fromkeys(distinct, 0.0)
        if len(distinct) > 1:  # the sets differ: one refit per distinct set, all sides
            h, r, t = fact
            sides = [((h, r, t), *self.side(h, fact_rows))]
            if self.reciprocal:
                sides.append(((t, r + self.R, h), *self.side(t, fact_rows)))
            sets = [np.array(s, np.int64) for s in distinct]
            for query, oriented, rows in sides:
                m = self.margins(query, oriented, rows, [np.zeros(0, np.int64), *sets])
                for s, after in zip(distinct, m[1:]):
                    drops[s] += float(m[0] - after)
        chosen = max(range(len(proposals)), key=lambda i: (drops[tops[i]], -i))  # ties: the first proposal
        record = {
            "drops": [drops[s] if len(distinct) > 1 else None for s in tops],
            "chosen": chosen,
        }
        return np.asarray(proposals[chosen], np.float64), record
