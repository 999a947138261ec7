"""Exact per-example gradient inner products for ConvE from per-layer factors.

One forward and one backward of the *summed* loss of a batch give, at every layer, the layer's
input activation and the gradient at its output for every example (in eval mode examples do not
interact, so ∂(Σℓ)/∂a_i = ∂ℓ_i/∂a_i). Every parameter's per-example gradient is a function of
those, and inner products of per-example gradients become products of small Gram matrices
(docs/design.md, "Exact TracIn")::

  Linear W            δ xᵀ              ⟨·,·⟩ = (δ_i·δ_j)(x_i·x_j)
  entity bias         g                 g_i·g_j
  entity table E      g xᵀ + 1_h uᵀ     (g_i·g_j)(x_i·x_j) + g_j[h_i](u_i·x_j) + g_i[h_j](x_i·u_j)
                                        + [h_i=h_j](u_i·u_j)
  relation table R    1_r wᵀ            [r_i=r_j](w_i·w_j)
  conv, BatchNorm     materialised per example (a few hundred numbers), plain dot products

g = ∂ℓ/∂s (scores), x the hidden vector, u = ∂ℓ/∂e_h, w = ∂ℓ/∂r. No per-example gradient of a
large tensor is ever built. Loss conventions: "train-loss" (1-N BCE with label smoothing, the
triple's tail as the positive), "score" (softplus(-s_t)) and "logit" (-s_t); for the last two g is
one-hot and g_i·g_j needs no N-wide product.

Why "logit" is the default of the explanation methods: in KvsAll training a training triple
(h, r, t') is the label 1-ε+ε/N at column t' of the sample (h, r). A retrain without it (or with
it masked out, kg/data/exclusion.py) sets that label to ε/N, so every step's loss gradient changes
by -(1-ε)∇s_t' — whatever the model's current fit σ(s_t'). To first order the fact's score then
moves by -(1-ε) Σ_steps η ⟨∇s_t', ∇s_fact⟩: TracIn with ℓ = -s on both sides. softplus(-s) weights
each checkpoint's term by σ(-s_train)·σ(-s_fact), which vanishes for the well-fitted triples whose
removal matters most.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F

from tracegraph.errors import TracegraphError
from tracegraph.kg.model.loss import Targets, bce_1n

# forward order (input side first); entity.weight counts as the scoring (output) layer, so
# "last:2" means the whole scoring layer: entity table and entity bias
PARAM_ORDER = [
    "relation.weight",
    "bn0.weight",
    "bn0.bias",
    "conv.weight",
    "conv.bias",
    "bn1.weight",
    "bn1.bias",
    "fc.weight",
    "fc.bias",
    "bn2.weight",
    "bn2.bias",
    "entity.weight",
    "entity_bias",
]
SMALL = [
    "bn0.weight",
    "bn0.bias",
    "conv.weight",
    "conv.bias",
    "bn1.weight",
    "bn1.bias",
    "fc.bias",
    "bn2.weight",
    "bn2.bias",
]
LOSSES = ("train-loss", "score", "logit")


def select_layers(model, spec) -> list[str]:
    """The parameters whose gradients count: ``all``, ``last:N``, or parameter names.

    Args:
        model: the ConvE model.
        spec: ``"all"``; ``"last:N"``, the last N parameters in forward order (``last:2``: the
            entity table and entity bias); or parameter names, a list or a comma-separated string.

    Returns:
        The chosen names among the model's parameters, in forward order (:data:`PARAM_ORDER`).

    Raises:
        TracegraphError: N out of range, an unknown name, or no name.
    """
    present = [n for n in PARAM_ORDER if n in dict(model.named_parameters())]
    if isinstance(spec, str):
        if spec == "all":
            return present
        if spec.startswith("last:"):
            try:
                n = int(spec[5:])
            except ValueError:
                n = 0
            if not 1 <= n <= len(present):
                raise TracegraphError(f"layers last:N needs 1 <= N <= {len(present)}, got {spec!r}")
            return present[-n:]
        spec = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [s for s in spec if s not in present]
    if unknown or not spec:
        raise TracegraphError(f"layers: unknown {unknown or spec}; choose from: all, last:N, {', '.join(present)}")
    return [n for n in present if n in spec]


@dataclass
class ScoreGrad:
    """g = ∂ℓ/∂s for a batch: dense [B, N], or one-hot (coef [B] at column index [B])."""

    dense: torch.Tensor | None = None
    coef: torch.Tensor | None = None
    index: torch.Tensor | None = None

    def __getitem__(self, sl):
        if self.dense is not None:
            return ScoreGrad(dense=self.dense[sl])
        return ScoreGrad(coef=self.coef[sl], index=self.index[sl])


@dataclass
class Factors:
    """Per-example factors of a batch of examples (triple directions)."""

    h: torch.Tensor
    r: torch.Tensor
    g: ScoreGrad
    x: torch.Tensor
    u: torch.Tensor
    w: torch.Tensor
    fc_delta: torch.Tensor
    fc_in: torch.Tensor
    small: torch.Tensor
    loss: torch.Tensor

    def __getitem__(self, sl) -> "Factors":
        return Factors(**{f.name: getattr(self, f.name)[sl] for f in fields(self)})

    def __len__(self) -> int:
        return len(self.h)


def example_loss(model, h, r, t, loss: str, label_smoothing: float) -> torch.Tensor:
    """Per-example loss [B] of triple directions (h, r, t); the definition all methods share.

    Args:
        model: the ConvE model (or a stand-in with ``score_all`` and ``score_triples``).
        h: ``[B]`` head ids.
        r: ``[B]`` relation ids (inverse relations included).
        t: ``[B]`` tail ids.
        loss: ``train-loss`` (1-N BCE, ``t`` the positive), ``score`` (softplus(−s)) or ``logit`` (−s).
        label_smoothing: the label smoothing of ``train-loss`` (unused by the other losses).

    Returns:
        The ``[B]`` losses.

    Raises:
        TracegraphError: an unknown loss.
    """
    if loss == "train-loss":
        return bce_1n(model.score_all(h, r), Targets.one_per_sample(t), label_smoothing, reduction="none")
    if loss == "score":
        return F.softplus(-model.score_triples(h, r, t))
    if loss == "logit":
        return -model.score_triples(h, r, t)
    raise TracegraphError(f"loss must be one of {', '.join(LOSSES)}, not {loss!r}")


def _bn_weight_grad(bn, z, delta, reduce_dims):
    """Σ δ ⊙ (z - μ)/σ over ``reduce_dims``: BatchNorm's weight gradient in eval mode.

    Written as (Σ δ⊙z - μ Σ δ)/σ so the normalised tensor is never built.
    """
    shape = (1, -1) + (1,) * (z.dim() - 2)
    sd = torch.sqrt(bn.running_var + bn.eps)
    dz = (delta * z).sum(reduce_dims) if reduce_dims else delta * z
    dsum = delta.sum(reduce_dims) if reduce_dims else delta
    return (dz - bn.running_mean.view(shape[:2]) * dsum) / sd.view(shape[:2])


def _conv_weight_grad(conv_in, delta, k):
    """Per-example Conv2d(1→C) weight gradient [B, C·k·k] from a strided view of the input (no im2col copy)."""
    B, C = delta.shape[:2]
    win = conv_in[:, 0].unfold(1, k, 1).unfold(2, k, 1)  # [B, Ho, Wo, k, k], a view
    return torch.einsum("bchw,bhwij->bcij", delta, win).reshape(B, C * k * k)


def compute_factors(model, h, r, t, loss: str, label_smoothing: float, layers: list[str]) -> Factors:
    """Per-example factors of a batch of directions from one forward and one backward of Σℓ.

    The model is put in eval mode (examples then do not interact).

    Args:
        model: the ConvE model.
        h: ``[B]`` head ids.
        r: ``[B]`` relation ids (inverse relations included).
        t: ``[B]`` tail ids.
        loss: ``train-loss``, ``score`` or ``logit`` (see :func:`example_loss`).
        label_smoothing: the label smoothing of ``train-loss`` (unused by the other losses).
        layers: the selected parameter names (:func:`select_layers`); only the small parameters
            among them are materialised in ``Factors.small``, the other factors are always computed.

    Returns:
        The detached :class:`Factors` of the B examples.

    Raises:
        TracegraphError: an unknown loss.
    """
    model.eval()
    with torch.enable_grad():
        e = model.entity(h)
        rv = model.relation(r)
        rec: dict = {}
        x = model.encode(e, rv, record=rec)
        if loss == "train-loss":
            s = model.score_hidden(x)
            per = bce_1n(s, Targets.one_per_sample(t), label_smoothing, reduction="none")
        elif loss in ("score", "logit"):
            s = (x * model.entity(t)).sum(-1)
            if model.entity_bias is not None:
                s = s + model.entity_bias[t]
            per = F.softplus(-s) if loss == "score" else -s
        else:
            raise TracegraphError(f"loss must be one of {', '.join(LOSSES)}, not {loss!r}")
        at = [e, rv, rec["conv_in"], rec["conv_out"], rec["bn1_out"], rec["fc_out"], rec["bn2_out"], s]
        u, w, d0, d1, d2, d4, d5, gs = torch.autograd.grad(per.sum(), at)
    g = ScoreGrad(dense=gs) if loss == "train-loss" else ScoreGrad(coef=gs, index=t)
    B = len(h)
    small = []
    for name in (n for n in SMALL if n in layers):
        if name == "bn0.weight":
            small.append(_bn_weight_grad(model.bn0, rec["image"], d0, (2, 3)))
        elif name == "bn0.bias":
            small.append(d0.reshape(B, -1).sum(1, keepdim=True))
        elif name == "conv.weight":
            small.append(_conv_weight_grad(rec["conv_in"], d1, model.conv.kernel_size[0]))
        elif name == "conv.bias":
            small.append(d1.sum((2, 3)))
        elif name == "bn1.weight":
            small.append(_bn_weight_grad(model.bn1, rec["conv_out"], d2, (2, 3)))
        elif name == "bn1.bias":
            small.append(d2.sum((2, 3)))
        elif name == "fc.bias":
            small.append(d4)
        elif name == "bn2.weight":
            small.append(_bn_weight_grad(model.bn2, rec["fc_out"], d5, None))
        elif name == "bn2.bias":
            small.append(d5)
    small_t = torch.cat(small, 1) if small else x.new_zeros(B, 0)
    return Factors(
        h, r, g, x.detach(), u.detach(), w.detach(), d4.detach(), rec["fc_in"].detach(), small_t.detach(), per.detach()
    )


# ------------------------------------------------------------------------ Gram assembly


def _mm(a, b, pairwise):
    # aligned rows: a batched dot product, without the a*b temporary
    return a @ b.t() if pairwise else torch.einsum("nk,nk->n", a, b)


def _eq(a, b, pairwise):
    return (a[:, None] == b[None, :]) if pairwise else (a == b)


def _gdot(ga: ScoreGrad, gb: ScoreGrad, pairwise: bool):
    if ga.dense is not None:
        return _mm(ga.dense, gb.dense, pairwise)
    same = _eq(ga.index, gb.index, pairwise)
    coef = ga.coef[:, None] * gb.coef[None, :] if pairwise else ga.coef * gb.coef
    return coef * same


def _gat(g: ScoreGrad, idx: torch.Tensor, pairwise: bool):
    """g[:, idx] ([len(g), len(idx)]) when pairwise, else g[i, idx[i]]."""
    if g.dense is not None:
        return g.dense[:, idx] if pairwise else g.dense.gather(1, idx[:, None]).squeeze(1)
    hit = _eq(g.index, idx, pairwise)
    return (g.coef[:, None] if pairwise else g.coef) * hit


def influence(A: Factors, B: Factors, layers: list[str], pairwise: bool = True) -> torch.Tensor:
    """⟨∇ℓ(a), ∇ℓ(b)⟩ restricted to ``layers``, from two batches' factors.

    Args:
        A: the first batch's factors.
        B: the second batch's factors.
        layers: the parameter names counted; both batches' factors must have been computed with
            this list (the small parameters' part is whatever ``Factors.small`` holds).
        pairwise: every pair (a_i, b_j); False: only the aligned pairs (a_i, b_i), ``len(A) == len(B)``.

    Returns:
        ``[len(A), len(B)]`` when pairwise, else ``[len(A)]``.
    """
    total = _mm(A.small, B.small, pairwise)
    if "fc.weight" in layers:
        total = total + _mm(A.fc_delta, B.fc_delta, pairwise) * _mm(A.fc_in, B.fc_in, pairwise)
    if "relation.weight" in layers:
        total = total + _eq(A.r, B.r, pairwise) * _mm(A.w, B.w, pairwise)
    if "entity.weight" in layers or "entity_bias" in layers:
        gg = _gdot(A.g, B.g, pairwise)
        if "entity_bias" in layers:
            total = total + gg
        if "entity.weight" in layers:
            gb_at_ha = _gat(B.g, A.h, pairwise)  # g_j[h_i]
            ga_at_hb = _gat(A.g, B.h, pairwise)  # g_i[h_j]
            if pairwise:
                gb_at_ha = gb_at_ha.t()
            total = (
                total
                + gg * _mm(A.x, B.x, pairwise)
                + gb_at_ha * _mm(A.u, B.x, pairwise)
                + ga_at_hb * _mm(A.x, B.u, pairwise)
                + _eq(A.h, B.h, pairwise) * _mm(A.u, B.u, pairwise)
            )
    return total
