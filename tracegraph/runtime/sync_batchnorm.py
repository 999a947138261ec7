"""BatchNorm with the statistics of the global batch, on every rank of ``torch.distributed``.

``torch.nn.SyncBatchNorm`` on CUDA; on CPU, where PyTorch has no kernels for it (and DDP refuses
it), :class:`CPUSyncBatchNorm` computes the same statistics from autograd-aware all-reduces.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn


class _AllReduceSum(torch.autograd.Function):
    """all_reduce(SUM) whose backward is all_reduce(SUM) of the gradient.

    The same rule as ``torch.distributed.nn.functional.all_reduce``, which is deprecated.
    """

    @staticmethod
    def forward(ctx, t):
        t = t.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t

    @staticmethod
    def backward(ctx, g):
        g = g.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(g, op=dist.ReduceOp.SUM)
        return g


class CPUSyncBatchNorm(nn.modules.batchnorm._BatchNorm):
    """What ``torch.nn.SyncBatchNorm`` computes, for CPU (Gloo), where PyTorch has no kernels for it.

    In training, normalise with the statistics of the *global* batch (all ranks), so N ranks with
    B/N samples each compute what one process computes on B.

    Forward and backward come from two autograd-aware all-reduces per layer (Σx with the count,
    then Σ(x-μ)²). The backward of an all-reduce all-reduces the gradient, which gives each rank
    the gradient of the sum of all ranks' losses through the shared statistics — exactly what
    SyncBatchNorm does. Eval mode is plain BatchNorm. Same parameters and buffers as BatchNorm,
    so state dicts load into plain BatchNorm layers.
    """

    def _check_input_dim(self, input: torch.Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """Normalise ``input`` with the statistics of the global batch (in training, across ranks).

        Args:
            input: A batch shaped ``[B, C, ...]``.

        Returns:
            The normalised batch, in ``input``'s dtype.

        Raises:
            ValueError: If all ranks together hold fewer than two values per channel.
        """
        if not (self.training and dist.is_initialized() and dist.get_world_size() > 1):
            return super().forward(input)
        self._check_input_dim(input)
        C = input.shape[1]
        dims = [0] + list(range(2, input.dim()))
        shape = [1, C] + [1] * (input.dim() - 2)
        x = input.float()
        local_n = torch.tensor([x.numel() // C], dtype=x.dtype, device=x.device)
        s = _AllReduceSum.apply(torch.cat([x.sum(dims), local_n]))
        n = s[C].detach()
        if float(n) < 2:
            raise ValueError(f"Expected more than 1 value per channel when training, got {int(n)} over all ranks")
        mean = s[:C] / n
        xc = x - mean.view(shape)
        var = _AllReduceSum.apply((xc * xc).sum(dims)) / n  # biased: what BatchNorm normalises with
        y = xc * torch.rsqrt(var + self.eps).view(shape)
        if self.affine:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        if self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                m = (1.0 / float(self.num_batches_tracked)) if self.momentum is None else self.momentum
                self.running_mean.mul_(1 - m).add_(mean.detach().to(self.running_mean.dtype), alpha=m)
                unbiased = var.detach() * (n / (n - 1))
                self.running_var.mul_(1 - m).add_(unbiased.to(self.running_var.dtype), alpha=m)
        return y.to(input.dtype)


def convert_sync_batchnorm(module: nn.Module, device: torch.device) -> nn.Module:
    """Replace every BatchNorm layer by one that normalises with global-batch statistics.

    The new layers share the old ones' parameters and buffers, so an optimiser built on the old
    parameters stays valid: PyTorch's ``nn.SyncBatchNorm`` on CUDA, :class:`CPUSyncBatchNorm` on CPU.

    Args:
        module: The model (or a single layer).
        device: The device the model runs on.

    Returns:
        The converted module (a new object when ``module`` itself is a BatchNorm layer).
    """
    if device.type != "cpu":
        return nn.SyncBatchNorm.convert_sync_batchnorm(module)
    out = module
    if isinstance(module, nn.modules.batchnorm._BatchNorm) and not isinstance(module, CPUSyncBatchNorm):
        out = CPUSyncBatchNorm(
            module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats
        )
        if module.affine:
            out.weight, out.bias = module.weight, module.bias
        out.running_mean, out.running_var = module.running_mean, module.running_var
        out.num_batches_tracked = module.num_batches_tracked
        out.training = module.training
    for name, child in module.named_children():
        out.add_module(name, convert_sync_batchnorm(child, device))
    return out
