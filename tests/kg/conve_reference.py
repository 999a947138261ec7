"""ConvE in eval mode and its two per-direction losses, written out in float64 from a state dict.

The independent reference the TracIn tests hold the engine to (`test_tracin_first_principles.py`,
`test_tracin_layers_against_float64.py`): the paper's layer order with `torch.nn.functional`, never the
package's own forward, so a bug there cannot hide in the reference too.
"""

import torch
import torch.nn.functional as F


def batch_norm(z, s, name):
    """Eval-mode BatchNorm from the state dict's running statistics and affine parameters."""
    shape = (1, -1) + (1,) * (z.dim() - 2)
    rm, rv = s[f"{name}.running_mean"].view(shape), s[f"{name}.running_var"].view(shape)
    return (z - rm) / torch.sqrt(rv + 1e-5) * s[f"{name}.weight"].view(shape) + s[f"{name}.bias"].view(shape)


def scores(s, h: int, r: int, height: int, width: int) -> torch.Tensor:
    """Scores of every tail for (h, r); the entity bias when the state dict has one."""
    img = torch.cat(
        [s["entity.weight"][h].view(1, 1, height, width), s["relation.weight"][r].view(1, 1, height, width)], dim=2
    )
    z = F.conv2d(batch_norm(img, s, "bn0"), s["conv.weight"], s["conv.bias"])
    z = F.relu(batch_norm(z, s, "bn1")).flatten(1)
    x = F.relu(batch_norm(z @ s["fc.weight"].t() + s["fc.bias"], s, "bn2"))
    out = x @ s["entity.weight"].t()
    return (out + s["entity_bias"] if "entity_bias" in s else out)[0]


def direction_loss(s, h, r, t, loss: str, eps: float, height: int, width: int) -> torch.Tensor:
    """``score``: softplus(−s_t); ``logit``: −s_t; ``train-loss``: the 1-N BCE with label
    smoothing ``eps``, averaged over the N entities."""
    sc = scores(s, h, r, height, width)
    if loss == "score":
        return torch.log1p(torch.exp(-sc[t]))
    if loss == "logit":
        return -sc[t]
    n = sc.numel()
    y = torch.full((n,), eps / n, dtype=torch.float64)
    y[t] += 1 - eps
    return (torch.log1p(torch.exp(sc)) - y * sc).mean()
