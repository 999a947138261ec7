"""ConvE's training forward on a CPU with fewer and cheaper temporaries.

Each B×C×H×W temporary is a fresh allocation on a CPU, and oneDNN's backward for a single input
channel is slow; these compute the same values (up to float rounding) as the layers they replace.
:class:`~tracegraph.kg.model.conve.ConvE` takes them when training in fp32 on a CPU, eagerly.
"""

from __future__ import annotations

import torch
from torch import nn


class BNReLUFeatureDropout(torch.autograd.Function):
    """relu(BatchNorm(x)) · mask (train mode) in one output buffer.

    The same ATen kernels as BatchNorm2d → F.relu → Dropout2d, with the ReLU and the mask applied in
    place, so forward makes one B×C×H×W tensor instead of three and backward two instead of three.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, momentum: float, eps: float, mask):
        """BatchNorm2d in training mode (updating the running statistics), ReLU, then the feature mask."""
        y, mean, invstd = torch.native_batch_norm(x, weight, bias, running_mean, running_var, True, momentum, eps)
        y.relu_()
        if mask is not None:
            y.mul_(mask)
        ctx.save_for_backward(x, weight, mean, invstd, y, mask)
        ctx.eps = eps
        return y

    @staticmethod
    def backward(ctx, grad):
        """The gradients of x, the BatchNorm weight and bias."""
        x, weight, mean, invstd, y, mask = ctx.saved_tensors
        # y > 0 exactly where the ReLU passed and the mask kept the map; elsewhere the gradient is 0
        g = torch.ops.aten.threshold_backward(grad, y, 0)
        if mask is not None:
            g.mul_(mask)
        need = [bool(n) for n in ctx.needs_input_grad[:3]]
        dx, dw, db = torch.ops.aten.native_batch_norm_backward(
            g, x, weight, None, None, mean, invstd, True, ctx.eps, need
        )
        return dx, dw, db, None, None, None, None, None


class ImagePatches(torch.autograd.Function):
    """The ``kh×kw`` patches of ``[B, 1, H, W]`` images as ``[B, kh·kw, Ho·Wo]`` (im2col).

    Backward adds each patch offset's gradient back onto its shifted window: kh·kw strided adds,
    a quarter of the time of ``unfold``'s generic backward.
    """

    @staticmethod
    def forward(ctx, x, kh: int, kw: int):
        """The patches of ``x``, ``[B, kh·kw, Ho·Wo]``."""
        ctx.shape, ctx.kernel = x.shape, (kh, kw)
        # [B, 1, Ho, Wo, kh, kw] (a view) -> [B, kh·kw, Ho·Wo]: one column per output position
        return x.unfold(2, kh, 1).unfold(3, kw, 1).permute(0, 1, 4, 5, 2, 3).reshape(x.shape[0], kh * kw, -1)

    @staticmethod
    def backward(ctx, grad):
        """The gradient of the images: each patch offset's gradient added onto its window."""
        (B, _, H, W), (kh, kw) = ctx.shape, ctx.kernel
        Ho, Wo = H - kh + 1, W - kw + 1
        grad = grad.view(B, kh, kw, Ho, Wo)
        gx = grad.new_zeros(B, 1, H, W)
        for i in range(kh):
            for j in range(kw):
                gx[:, 0, i : i + Ho, j : j + Wo] += grad[:, i, j]
        return gx, None, None


def conv_as_bmm(conv: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    """``conv(x)`` for a 1-channel input as one batched matmul over the image's patches (im2col).

    On a CPU oneDNN's backward for a single input channel is the step's slowest kernel after the
    GEMMs; as a matmul, backward is two more batched matmuls and the patches' scatter back, about a
    third of the time. The same values up to float rounding.
    """
    B, _, H, W = x.shape
    C, _, kh, kw = conv.weight.shape
    patches = ImagePatches.apply(x, kh, kw)
    filters = conv.weight.reshape(1, C, kh * kw).expand(B, -1, -1)
    if conv.bias is None:
        y = torch.bmm(filters, patches)
    else:
        y = torch.baddbmm(conv.bias[None, :, None], filters, patches)
    return y.view(B, C, H - kh + 1, W - kw + 1)
