"""1-N softmax cross-entropy ("kl" in LibKGE), the loss of its tuned ConvE configurations.

A sample's target distribution puts (1-ε) uniformly on its k true tails and ε uniformly on all N
entities. Cross-entropy against it, without a label matrix:

    -Σ_j y_j log softmax(s)_j = logsumexp(s) - (ε/N)·Σ_j s_j - ((1-ε)/k)·Σ_{true t} s_t

It differs from the KL divergence only by the targets' entropy, a constant, so gradients agree.
Needs the B×N logits (no fused variant): 1024 × 40,943 entities is 168 MB in float32.
"""

from __future__ import annotations

import torch

from tracegraph.kg.model.loss import Targets, _reduce

LOSSES = ("bce", "ce")


def ce_1n(scores: torch.Tensor, targets: Targets, label_smoothing: float = 0.0, reduction: str = "mean"):
    """Softmax cross-entropy over all entities against sparse 1-N targets (LibKGE's "kl" loss).

    A sample with several true tails spreads the target mass evenly over them; label smoothing
    ``eps`` mixes in ``eps / N`` of a uniform target.

    Args:
        scores: Logits ``[B, N]``.
        targets: The true ``(sample, entity)`` pairs (padding has weight 0).
        label_smoothing: ``eps``.
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` over samples.

    Returns:
        The loss: a scalar, or ``[B]`` for ``"none"``.
    """
    B, N = scores.shape
    scores = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    eps = float(label_smoothing)
    bi = targets.batch_index
    # weights: 1 per true tail, 0 for the padding a CUDA-graph replay adds (see loss.Targets)
    w = (
        targets.weight.to(scores.dtype)
        if targets.weight is not None
        else torch.ones(len(bi), dtype=scores.dtype, device=scores.device)
    )
    k = torch.zeros(B, dtype=scores.dtype, device=scores.device).index_add(0, bi, w)
    pos_scores = scores.reshape(-1).gather(0, bi * N + targets.entity_index) * w  # flat gather: scatter-add backward
    pos = torch.zeros(B, dtype=scores.dtype, device=scores.device).index_add(0, bi, pos_scores)
    per = torch.logsumexp(scores, 1) - (eps / N) * scores.sum(1) - (1.0 - eps) * pos / k.clamp_min(1.0)
    return _reduce(per, reduction)
