"""TracIn, its cosine and RelatIF over each fact's candidates, from one exact engine pass per checkpoint.

The influence-based explanation methods (kg/explain/methods.py) read their scores from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tracegraph.errors import TracegraphError
from tracegraph.kg.explain.tracin.engine import InfluenceOptions
from tracegraph.kg.explain.tracin.influence import TracIn


@dataclass
class InfluenceParts:
    """Per fact, aligned with its candidates: the three influence-based scores."""

    tracin: list[np.ndarray]
    cosine: list[np.ndarray]
    relatif: list[np.ndarray]

    def of(self, method: str) -> list[np.ndarray]:
        """The per-fact scores of one influence-based method.

        Args:
            method: ``tracin``, ``tracin-cosine`` or ``relatif``.

        Returns:
            Per fact, one score per candidate.

        Raises:
            KeyError: another method name.
        """
        return {"tracin": self.tracin, "tracin-cosine": self.cosine, "relatif": self.relatif}[method]


def influence_parts(
    checkpoints: list[Path],
    train_ids: np.ndarray,
    facts: np.ndarray,
    subsets: list[np.ndarray],
    opts: Any,
    device,
    progress=None,
) -> InfluenceParts:
    """TracIn, cosine and RelatIF of each fact's candidates, from one engine pass per checkpoint.

    The pass runs over the union of the candidates; the per-checkpoint self-influences give the
    cosine (the learning rate cancels in it) and the RelatIF norm.

    Args:
        checkpoints: the checkpoint files summed over.
        train_ids: ``[M, 3]`` training triples as ids.
        facts: ``[T, 3]`` facts as ids.
        subsets: per fact, its candidate rows of ``train_ids``.
        opts: the loss, layers and label smoothing (``MethodOptions``; the exact engine, automatic batch size).
        device: where the gradients are computed.
        progress: a progress display to report to; None: silent.

    Returns:
        The :class:`InfluenceParts`, each fact's scores aligned with its subset.

    Raises:
        TracegraphError: no fact has a candidate.
    """
    union = np.unique(np.concatenate(subsets)) if subsets else np.zeros(0, np.int64)
    if union.size == 0:
        raise TracegraphError("no candidate training triples for any fact")
    iopts = InfluenceOptions(engine="exact", loss=opts.loss, layers=opts.layers, label_smoothing=opts.label_smoothing)
    T, U = len(facts), len(union)
    tracin, cosine, self_sum = np.zeros((T, U)), np.zeros((T, U)), np.zeros(U)
    for res in TracIn.from_parts(None, train_ids, checkpoints, iopts, device=device).per_checkpoint(
        facts, union, progress=progress
    ):
        lr = res.checkpoints[0].lr
        s = np.asarray(res.scores, np.float64)  # η_k ⟨g, g'⟩
        tracin += s
        norm = np.sqrt(np.outer(res.test_self, res.train_self))  # η_k ‖g‖ ‖g'‖
        cosine += lr * np.divide(s, norm, out=np.zeros_like(s), where=norm > 0)
        self_sum += res.train_self
    rel = tracin / np.sqrt(np.maximum(self_sum, 1e-300))[None, :]
    pos = [np.searchsorted(union, rows) for rows in subsets]
    return InfluenceParts(
        [tracin[j, p] for j, p in enumerate(pos)],
        [cosine[j, p] for j, p in enumerate(pos)],
        [rel[j, p] for j, p in enumerate(pos)],
    )
