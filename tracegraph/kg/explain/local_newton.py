"""``local-newton``: local-retrain's search with each refit replaced by one Newton step.

local-retrain (kg/explain/local_retrain.py) fits a *mimic* of the fact's entity from scratch on its
own training triples, with and without each candidate set X, in Adam steps. Here the entity's
trained vector e₀ is moved by one Newton step on the same objective instead::

    e_X = e₀ − H⁻¹ ∇L_{−X}(e₀)      H = ∇²L(e₀), the objective on all the entity's triples

and the drop is ``margin(e_∅) − margin(e_X)`` as before. One gradient per set and one Hessian per
entity (d × d, by ``torch.func``) replace the refits' steps: the same search at a fraction of the
cost, where the objective is near-quadratic around e₀. A trained e₀ need not be a minimum of this
objective alone (it also serves as every query's candidate answer), so H is made positive definite
by raising its eigenvalues to at least 10⁻³ of the largest (a damped Newton step).
"""

from __future__ import annotations

import numpy as np
import torch

from tracegraph.kg.explain.local_retrain import LocalRefit

DAMPING = 1e-3  # smallest eigenvalue kept, relative to the largest


class LocalNewton(LocalRefit):
    """A :class:`LocalRefit` whose refits are damped Newton steps from the trained entity vector."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.hessians: dict = {}  # (entity, its data's rows) -> the damped Hessian

    def margins(
        self, query: tuple[int, int, int], oriented: np.ndarray, rows: np.ndarray, removals: list[np.ndarray]
    ) -> np.ndarray:
        """The margin of ``query`` for the entity moved by one Newton step without each removal set.

        Args:
            query: ``(e, r, answer)``, with ``e`` the entity being moved.
            oriented: ``e``'s oriented training triples ``[n, 3]`` (see :meth:`side`).
            rows: Their rows in ``train_ids``.
            removals: Row sets to leave out, one step each.

        Returns:
            ``[len(removals)]`` margins: the answer's score minus its best filtered rival's.
        """
        e, q_rel, answer = query
        data = self.removal_data(oriented, rows, removals)
        if data is None:
            return np.zeros(0)
        e0 = self.model.entity.weight[e].detach()
        vectors = e0.expand(len(removals), -1).clone().requires_grad_(True)
        (grads,) = torch.autograd.grad(self.objective(vectors, data).sum(), vectors)  # [S, d]: one per set
        steps = torch.linalg.solve(self.hessian(e, e0, oriented, rows), grads.T).T
        return self.margin_at((e0 - steps).detach(), e, q_rel, answer)

    def hessian(self, e: int, e0: torch.Tensor, oriented: np.ndarray, rows: np.ndarray) -> torch.Tensor:
        """∇²L(e₀) on all the entity's triples, its eigenvalues raised to ``DAMPING`` × the largest."""
        key = (e, rows.tobytes())  # the entity's data: all its triples but the explained fact
        if key not in self.hessians:
            data = self.removal_data(oriented, rows, [np.zeros(0, np.int64)])
            h = torch.func.hessian(lambda v: self.objective(v[None, :], data)[0])(e0)
            vals, vecs = torch.linalg.eigh((h + h.T) / 2)
            floor = DAMPING * vals.abs().max().clamp_min(1e-12)
            self.hessians[key] = (vecs * vals.clamp_min(floor)) @ vecs.T
        return self.hessians[key]
