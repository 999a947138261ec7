"""A TracIn object you can hold: ``tracegraph.TracIn(run, ...)``.

>>> tracin = tracegraph.TracIn(run, loss="logit")              # doctest: +SKIP
>>> tracin.influence([("steroid", "interacts_with", "eicosanoid")]).shape   # [tests, training triples]
>>> tracin.top_k(("steroid", "interacts_with", "eicosanoid"), k=5)        # proponents, then opponents
>>> tracin.self_influence()                                  # Σ_k η_k ‖∇ℓ_k(train)‖², one per training triple

Influence is Σ_k η_k ⟨∇ℓ(θ_k, train), ∇ℓ(θ_k, test)⟩ over the checkpoints, exactly as ``explain``
computes it (same engine, same checkpoint rule, same loss conventions).
"""

from __future__ import annotations


import numpy as np
import pandas as pd

from tracegraph.errors import TracegraphError
from tracegraph.kg.explain.tracin.checkpoints import explained_checkpoints
from tracegraph.kg.explain.tracin.engine import DEFAULT_LOSS, InfluenceOptions, check_influence_options, compute_influence
from tracegraph.kg.explain.tracin.rows import pick
from tracegraph.kg.model.store import RunStore
from tracegraph.runtime.progress import log, make_progress


class TracIn:
    """TracIn influence of a run's training triples on any test triples.

    Args:
        run: a :class:`~tracegraph.kg.model.store.RunStore` (``tracegraph.open_run(...)``) or a run path.
        train: the training triples ranked (a file or label triples); default the run's training file.
        checkpoints: as ``explain``: default the epoch checkpoints up to the model's epoch; or
            ["all"], ["best"], ["final"], paths.
        loss: logit (default), score or train-loss.
        layers: all, last:N, or comma-separated parameter names.
        engine: exact (default), autograd or vmap.
        label_smoothing: for loss="train-loss"; default the run's.
        batch_size: training triples per step (0: automatic).
        progress: show a progress bar (on a terminal).
    """

    def __init__(self, run, train=None, checkpoints: list[str] | None = None, loss: str = DEFAULT_LOSS,
                 layers: str = "all", engine: str = "exact", label_smoothing: float | None = None,
                 batch_size: int = 0, progress: bool = True):
        self.run = run if isinstance(run, RunStore) else RunStore(run)
        train = train if train is not None else self.run.data_files.get("train")
        if train is None:
            raise TracegraphError(f"{self.run.path}: the run records no training file that still exists; pass train=")
        self.train_ids = self.run.encode(train)
        self.checkpoints, note = explained_checkpoints(self.run, checkpoints)
        log.info(note)
        eps = label_smoothing if label_smoothing is not None else self.run.label_smoothing
        self.options = InfluenceOptions(engine=engine, loss=loss, layers=layers, label_smoothing=eps,
                                        batch_size=batch_size)
        check_influence_options(self.options)
        self.progress = progress
        self._train_self: np.ndarray | None = None

    def __repr__(self) -> str:
        o = self.options
        return (f"TracIn({self.run!r}, {len(self.train_ids)} training triples, {len(self.checkpoints)} checkpoints, "
                f"loss={o.loss!r}, layers={o.layers!r}, engine={o.engine!r})")

    def _compute(self, test_ids: np.ndarray):
        with make_progress() if self.progress else _no_progress() as progress:
            res = compute_influence(self.checkpoints, self.train_ids, test_ids, self.options, self.run.device,
                                    progress, read=self.run.read_checkpoint)
        self._train_self = np.asarray(res.train_self, np.float64)
        return res

    def _test_ids(self, test) -> np.ndarray:
        if isinstance(test, tuple) and len(test) == 3 and all(isinstance(x, str) for x in test):
            test = [test]
        return self.run.encode(test)

    def influence(self, test) -> np.ndarray:
        """``[T, M]``: the influence of each of the M training triples on each of the T test triples
        (label triples, a DataFrame or a file)."""
        return np.asarray(self._compute(self._test_ids(test)).scores, np.float64)

    def self_influence(self) -> np.ndarray:
        """``[M]``: each training triple's Σ_k η_k ‖∇ℓ_k‖² (computed with the first influence call)."""
        if self._train_self is None:
            self._compute(self.train_ids[:1])
        return self._train_self

    def top_k(self, test, k: int = 10) -> pd.DataFrame:
        """One test triple's k proponents (positive influence, strongest first) and k opponents
        (negative, most negative first): columns head, relation, tail, influence, self_influence, role."""
        ids = self._test_ids(test)
        if len(ids) != 1:
            raise TracegraphError(f"top_k explains one test triple, got {len(ids)}")
        if k < 1:
            raise TracegraphError(f"k must be at least 1, not {k}")
        scores = np.asarray(self._compute(ids).scores, np.float64)[0]
        order, roles = pick(scores, None, k)
        ent, rel = self.run.entities.labels, self.run.relations.labels
        rows = [(ent[h], rel[r], ent[t], float(scores[i]), float(self._train_self[i]), role)
                for i, role in zip(order, roles) for h, r, t in [self.train_ids[i]]]
        return pd.DataFrame(rows, columns=["head", "relation", "tail", "influence", "self_influence", "role"])


class _no_progress:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


__all__ = ["TracIn"]
