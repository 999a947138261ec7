"""1-N binary cross-entropy with uniform label smoothing, without a batch×entities label matrix.

With smoothing ε over N entities a sample's targets are y = ε/N everywhere plus (1-ε) at its true
tails. Since BCE(s, y) = softplus(s) - y·s,

    Σ_j BCE(s_j, y_j) = Σ_j softplus(s_j) - (ε/N)·Σ_j s_j - (1-ε)·Σ_{true t} s_t

so only O(B) extra memory is needed. The per-sample loss is that sum divided by N (the mean over
entities, as ``binary_cross_entropy_with_logits(reduction="mean")`` over a B×N matrix gives after
averaging over the batch too).

Targets are *sparse*: ``Targets(batch_index, entity_index)`` lists each (sample, true tail) pair.
1vsAll training has one pair per sample; KvsAll has all known tails of (head, relation). An
optional 0/1 ``weight`` per pair lets a CUDA graph replay batches padded to a fixed number of
pairs (padding has weight 0 and contributes nothing, to the value or to any gradient).

:func:`fused_bce_1n` never stores the B×N logits either: a custom autograd Function computes the
whole loss over entity chunks, recomputes each chunk's scores in backward and accumulates dL/dx,
dL/dE, dL/db chunk by chunk into single buffers (peak memory O(B·chunk + N·d)).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class Targets:
    """Sparse 1-N targets.

    Sample ``batch_index[k]`` has true entity ``entity_index[k]`` (counted ``weight[k]`` times, 1
    when ``weight`` is None).
    """

    batch_index: torch.Tensor
    entity_index: torch.Tensor
    weight: torch.Tensor | None = None

    @classmethod
    def one_per_sample(cls, tails: torch.Tensor) -> "Targets":
        """One target per sample: sample ``k``'s true entity is ``tails[k]``.

        Args:
            tails: Tail ids ``[B]``.

        Returns:
            The targets.
        """
        return cls(torch.arange(len(tails), device=tails.device), tails)

    def to(self, device) -> "Targets":
        """The targets on ``device``.

        Args:
            device: The device.

        Returns:
            A copy on ``device``.
        """
        w = self.weight.to(device) if self.weight is not None else None
        return Targets(self.batch_index.to(device), self.entity_index.to(device), w)


def _reduce(per_sample: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return per_sample.mean()
    if reduction == "sum":
        return per_sample.sum()
    if reduction == "none":
        return per_sample
    raise ValueError(f"reduction must be mean, sum or none, not {reduction!r}")


def _positive_sum(batch_size: int, targets: Targets, pos_scores: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(batch_size, dtype=pos_scores.dtype, device=pos_scores.device)
    return out.index_add(0, targets.batch_index, pos_scores)


def bce_1n(scores: torch.Tensor, targets: Targets, label_smoothing: float = 0.0, reduction: str = "mean"):
    """Binary cross-entropy of full logits against sparse 1-N targets; no label matrix is built.

    With label smoothing ``eps``, every label is ``(1 - eps) * y + eps / N``.

    Args:
        scores: Logits ``[B, N]``.
        targets: The true ``(sample, entity)`` pairs.
        label_smoothing: ``eps``.
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` over samples (each the mean over N entities).

    Returns:
        The loss: a scalar, or ``[B]`` for ``"none"``.
    """
    B, N = scores.shape
    scores = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    eps = float(label_smoothing)
    # a flat gather: its backward is a scatter-add (advanced indexing's would sort the indices on CUDA)
    pos_scores = scores.reshape(-1).gather(0, targets.batch_index * N + targets.entity_index)
    if targets.weight is not None:
        pos_scores = pos_scores * targets.weight.to(pos_scores.dtype)
    pos = _positive_sum(B, targets, pos_scores)
    per = F.softplus(scores).sum(1) - (eps / N) * scores.sum(1) - (1.0 - eps) * pos
    return _reduce(per / N, reduction)


class _FusedBCE1N(torch.autograd.Function):
    """Per sample: Σ_j softplus(s_j) - c·Σ_j s_j - p·Σ_true s_t with s = x Eᵀ + b, over entity chunks.

    The true tails' term lives here too, so backward writes one dense dL/dE buffer (an autograd
    gather of E[t] would add a second N×d gradient).
    """

    @staticmethod
    def forward(
        ctx,
        x,
        weight,
        bias,
        batch_index,
        entity_index,
        target_weight,
        c: float,
        p: float,
        chunk: int,
        sink: dict | None,
    ):
        acc = torch.float64 if x.dtype == torch.float64 else torch.float32
        out = torch.zeros(x.shape[0], dtype=acc, device=x.device)
        for start in range(0, weight.shape[0], chunk):
            s = _chunk_scores(x, weight, bias, start, chunk, acc)
            out += F.softplus(s).sum(1)
            out -= c * s.sum(1)
        pos = (x[batch_index].to(acc) * weight[entity_index].to(acc)).sum(-1)
        if bias is not None:
            pos += bias[entity_index].to(acc)
        tw = target_weight.to(acc) if target_weight is not None else torch.ones_like(pos)
        out.index_add_(0, batch_index, pos * tw, alpha=-p)
        ctx.save_for_backward(x, weight, bias if bias is not None else torch.empty(0), batch_index, entity_index, tw)
        ctx.has_bias, ctx.c, ctx.p, ctx.chunk, ctx.sink = bias is not None, c, p, chunk, sink
        return out

    @staticmethod
    def backward(ctx, grad_out):
        x, weight, bias, bi, ei, tw = ctx.saved_tensors
        bias = bias if ctx.has_bias else None
        acc = grad_out.dtype
        xa = x.to(acc)
        need_w = ctx.needs_input_grad[1]
        need_b = ctx.has_bias and ctx.needs_input_grad[2]
        gx = torch.zeros_like(xa)
        gw = torch.zeros(weight.shape, dtype=acc, device=weight.device) if need_w else None
        gb = torch.zeros(weight.shape[0], dtype=acc, device=weight.device) if need_b else None
        for start in range(0, weight.shape[0], ctx.chunk):
            g = _chunk_scores(x, weight, bias, start, ctx.chunk, acc)
            g.sigmoid_().sub_(ctx.c).mul_(grad_out[:, None])  # d/ds [softplus(s) - c·s], in place
            w = weight[start : start + ctx.chunk].to(acc)
            gx.addmm_(g, w)
            if gw is not None:
                torch.mm(g.t(), xa, out=gw[start : start + ctx.chunk])
            if gb is not None:
                torch.sum(g, 0, out=gb[start : start + ctx.chunk])
        coef = -ctx.p * grad_out[bi] * tw  # the true tails' term: d/ds_t = -p (times its weight)
        gx.index_add_(0, bi, coef[:, None] * weight[ei].to(acc))
        if gw is not None:
            gw.index_add_(0, ei, coef[:, None] * xa[bi])
        if gb is not None:
            gb.index_add_(0, ei, coef)
        gx = gx.to(x.dtype) if ctx.needs_input_grad[0] else None
        gw = gw.to(weight.dtype) if gw is not None else None
        if ctx.sink is not None and gw is not None:
            ctx.sink["grad"] = gw  # tied_lookup's backward adds the head-lookup gradient into it
        return (gx, gw, gb.to(bias.dtype) if gb is not None else None, None, None, None, None, None, None, None)


_ROW_BLOCK_BYTES = 2**20  # about one core's L2


class _StoredBCE1N(torch.autograd.Function):
    """The fused loss's per-sample sums with the logits computed once and kept (one B×N buffer).

    Backward turns that buffer into σ(s) in place and folds the smoothing constant and the
    per-sample scale into the two products, so no other B×N tensor is made.

    On a CPU every B×N temporary is a fresh allocation and a pass over memory; the autograd
    composition of :func:`bce_1n` makes about six per step (bias add, softplus, its gradient, the
    sum's and the gather's gradients and their sums), this makes two.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, batch_index, entity_index, target_weight, c: float, p: float, sink: dict | None):
        N = weight.shape[0]
        s = torch.addmm(bias, x, weight.t()) if bias is not None else x @ weight.t()
        out = torch.empty(s.shape[0], dtype=s.dtype, device=s.device)
        rows = max(1, _ROW_BLOCK_BYTES // (s.element_size() * N))
        for r0 in range(0, s.shape[0], rows):  # softplus a cache-sized block at a time: no B×N temporary
            torch.sum(F.softplus(s[r0 : r0 + rows]), 1, out=out[r0 : r0 + rows])
        row_sums = x @ weight.sum(0) + (bias.sum() if bias is not None else 0)  # Σ_j s_j in O(B·d)
        out.sub_(row_sums, alpha=c)
        pos = s.reshape(-1).gather(0, batch_index * N + entity_index)
        tw = target_weight.to(s.dtype) if target_weight is not None else torch.ones_like(pos)
        out.index_add_(0, batch_index, pos * tw, alpha=-p)
        ctx.save_for_backward(x, weight, s, batch_index, entity_index, tw)
        ctx.has_bias, ctx.c, ctx.p, ctx.sink = bias is not None, c, p, sink
        return out

    @staticmethod
    def backward(ctx, grad_out):
        # dL/ds = g·(σ(s) - c) - p·g·w at the true tails, g the per-sample grad_out; σ(s) is
        # written over the saved logits (a second backward through this graph raises, as with
        # any in-place change of a saved tensor)
        x, weight, s, bi, ei, tw = ctx.saved_tensors
        B, N, d = x.shape[0], weight.shape[0], x.shape[1]
        sig = s.sigmoid_()
        g = grad_out.to(s.dtype)
        coef = -ctx.p * g[bi] * tw  # the true tails' term
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:  # g·(σ E - c ΣE) + the true tails' rows of E
            gx = torch.addmm((-ctx.c * weight.sum(0)).expand(B, d), sig, weight).mul_(g[:, None])
            gx.index_add_(0, bi, coef[:, None] * weight[ei])
        if ctx.needs_input_grad[1]:  # σᵀ(g·x) - c·Σ(g·x), then the true tails' rows
            xg = x * g[:, None]
            gw = torch.addmm((-ctx.c * xg.sum(0)).expand(N, d), sig.t(), xg)
            gw.index_add_(0, ei, coef[:, None] * x[bi])
            if ctx.sink is not None:
                ctx.sink["grad"] = gw  # tied_lookup's backward adds the head-lookup gradient into it
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = torch.addmv((-ctx.c * g.sum()).expand(N), sig.t(), g)
            gb.index_add_(0, ei, coef)
        return gx, gw, gb, None, None, None, None, None, None


def stored_bce_1n(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    targets: Targets,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
    sink: dict | None = None,
):
    """Same value and gradients as ``bce_1n(x @ weight.T + bias, …)``, with fewer B×N temporaries.

    The logits are kept (memory as :func:`bce_1n`); backward overwrites them with their gradient.
    The training step's loss on a CPU, where each large temporary costs a fresh allocation.

    Args:
        x: hidden vectors [B, d], the same dtype as ``weight``.
        weight: the entity table [N, d].
        bias: per-entity bias [N], or None.
        targets: the true tails (sparse).
        label_smoothing: ε of the uniform smoothing.
        reduction: mean, sum or none (per sample).
        sink: a dict shared with :func:`tied_lookup` when ``x`` came from rows of ``weight``.

    Returns:
        The loss (a scalar, or [B] with ``reduction="none"``).
    """
    N = weight.shape[0]
    eps = float(label_smoothing)
    per = _StoredBCE1N.apply(
        x, weight, bias, targets.batch_index, targets.entity_index, targets.weight, eps / N, 1.0 - eps, sink
    )
    return _reduce(per / N, reduction)


def _chunk_scores(x, weight, bias, start, chunk, acc_dtype):
    w = weight[start : start + chunk]
    s = x.to(acc_dtype) @ w.to(acc_dtype).t()
    if bias is not None:
        s += bias[start : start + chunk].to(acc_dtype)
    return s


def fused_bce_1n(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    targets: Targets,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
    chunk_size: int = 8192,
    sink: dict | None = None,
):
    """The same value and gradients as ``bce_1n(x @ weight.T + bias, ...)``, without the ``[B, N]`` logits.

    Entities are scored ``chunk_size`` at a time, in forward and in backward.

    Args:
        x: Hidden vectors ``[B, d]``.
        weight: Entity embeddings ``[N, d]``.
        bias: Entity biases ``[N]``, or None.
        targets: The true ``(sample, entity)`` pairs.
        label_smoothing: ``eps``, as in :func:`bce_1n`.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        chunk_size: Entities per chunk.
        sink: A dict shared with :func:`tied_lookup` when ``x`` was computed from rows of the same
            ``weight`` (ConvE's head embeddings), so both gradients land in one ``[N, d]`` buffer.

    Returns:
        The loss: a scalar, or ``[B]`` for ``"none"``.
    """
    N = weight.shape[0]
    eps = float(label_smoothing)
    per = _FusedBCE1N.apply(
        x,
        weight,
        bias,
        targets.batch_index,
        targets.entity_index,
        targets.weight,
        eps / N,
        1.0 - eps,
        int(chunk_size),
        sink,
    )
    return _reduce(per / N, reduction)


class _TiedLookup(torch.autograd.Function):
    """``weight[index]`` whose backward adds into the fused loss's dL/dE buffer (via ``sink``).

    Autograd would otherwise hold two dense N×d gradients of the tied entity table and sum them
    out of place (measured: +0.8 GB at 1M entities × 200). The loss's backward always runs first
    (this lookup feeds the loss), and the table's gradient is accumulated only after both
    backwards, so adding in place into the buffer the loss returned is exact.
    """

    @staticmethod
    def forward(ctx, weight, index, sink: dict):
        ctx.save_for_backward(index)
        ctx.sink, ctx.shape, ctx.dtype = sink, weight.shape, weight.dtype
        return weight[index]

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        buf = ctx.sink.pop("grad", None)  # drop our reference so autograd can steal the buffer
        if buf is None:  # the loss produced no table gradient: an ordinary dense one
            out = torch.zeros(ctx.shape, dtype=ctx.dtype, device=grad.device)
            return out.index_add_(0, index, grad.to(ctx.dtype)), None, None
        buf.index_add_(0, index, grad.to(buf.dtype))
        return None, None, None


def tied_lookup(weight: torch.Tensor, index: torch.Tensor, sink: dict) -> torch.Tensor:
    """``weight[index]``, whose gradient is added into the fused loss's entity-gradient buffer.

    Use it for the head embeddings when the loss is :func:`fused_bce_1n` with the same ``sink``, so
    autograd does not hold a second dense ``[N, d]`` gradient.

    Args:
        weight: Entity embeddings ``[N, d]``.
        index: Entity ids ``[B]``.
        sink: The dict passed to :func:`fused_bce_1n`.

    Returns:
        ``[B, d]`` rows of ``weight``.
    """
    return _TiedLookup.apply(weight, index, sink)


def auto_chunk_size(batch_size: int, budget_bytes: int = 64 * 2**20) -> int:
    """The entity chunk for which one ``[batch_size, chunk]`` fp32 block fits in ``budget_bytes``.

    Args:
        batch_size: Rows per block.
        budget_bytes: Memory budget for one block.

    Returns:
        The chunk size, at least 1024.
    """
    return max(1024, budget_bytes // (4 * max(batch_size, 1)))
