"""Per-example gradients the slow, obvious ways: the reference for the factor engine.

``autograd``: one backward per triple, the full flattened gradient of the selected parameters
(the original research scripts' method; ~one dense N×d gradient per triple). ``vmap``: the same
gradients from ``torch.func.vmap(grad(...))`` over chunks of triples. Both work for any model
whose forward is functional; both treat a reciprocal triple's loss as the sum of its two
directions.
"""

from __future__ import annotations

import torch

from tracegraph.kg.explain.tracin.factors import example_loss


def _directions(model, h, r, t):
    """A triple's directions: (h, r, t) and, with reciprocal relations, (t, r⁻¹, h)."""
    if model.config.reciprocal:
        return torch.cat([h, t]), torch.cat([r, model.inverse_relation(r)]), torch.cat([t, h])
    return h, r, t


def triple_loss(model, h, r, t, loss: str, label_smoothing: float) -> torch.Tensor:
    """Per-triple loss [M]: the sum over its directions.

    Args:
        model: the ConvE model (or a stand-in with ``score_all``, ``score_triples``, ``inverse_relation``).
        h: ``[M]`` head ids.
        r: ``[M]`` base relation ids.
        t: ``[M]`` tail ids.
        loss: ``train-loss``, ``score`` or ``logit`` (see :func:`~tracegraph.kg.explain.tracin.factors.example_loss`).
        label_smoothing: the label smoothing of ``train-loss`` (unused by the other losses).

    Returns:
        The ``[M]`` losses, (h, r, t)'s plus, with reciprocal relations, (t, r⁻¹, h)'s.
    """
    M = len(h)
    hh, rr, tt = _directions(model, h, r, t)
    per = example_loss(model, hh, rr, tt, loss, label_smoothing)
    return per.view(-1, M).sum(0)


def autograd_gradients(
    model, triples: torch.Tensor, loss: str, label_smoothing: float, layers: list[str]
) -> torch.Tensor:
    """[M, P] flattened gradients of the selected parameters, one backward per triple.

    Args:
        model: the ConvE model (put in eval mode).
        triples: ``[M, 3]`` triples as ids, on the model's device.
        loss: the loss convention (see :func:`triple_loss`).
        label_smoothing: the label smoothing of ``train-loss``.
        layers: the parameter names, in the order their gradients are concatenated.

    Returns:
        ``[M, P]``, P the layers' total number of values; a parameter the loss does not reach
        contributes zeros.
    """
    model.eval()
    params = dict(model.named_parameters())
    chosen = [params[n] for n in layers]
    rows = []
    for h, r, t in triples.tolist():
        ht, rt, tt = (torch.tensor([v], device=triples.device) for v in (h, r, t))
        with torch.enable_grad():
            value = triple_loss(model, ht, rt, tt, loss, label_smoothing).sum()
            grads = torch.autograd.grad(value, chosen, allow_unused=True)
        rows.append(
            torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, chosen)])
        )
    return torch.stack(rows) if rows else torch.zeros(0, sum(p.numel() for p in chosen), device=triples.device)


def vmap_gradients(
    model, triples: torch.Tensor, loss: str, label_smoothing: float, layers: list[str], chunk_size: int = 64
) -> torch.Tensor:
    """[M, P] flattened per-triple gradients from torch.func, ``chunk_size`` triples at a time.

    Args:
        model: the ConvE model (put in eval mode).
        triples: ``[M, 3]`` triples as ids, on the model's device.
        loss: the loss convention (see :func:`triple_loss`).
        label_smoothing: the label smoothing of ``train-loss``.
        layers: the parameter names, in the order their gradients are concatenated.
        chunk_size: triples per vectorised call (bounds the memory of the per-triple gradients).

    Returns:
        ``[M, P]``: :func:`autograd_gradients`'s values, up to floating-point rounding.
    """
    from torch.func import grad, vmap

    model.eval()
    params = {n: p.detach() for n, p in model.named_parameters()}
    fixed = {n: p for n, p in params.items() if n not in layers}
    fixed.update({n: b.detach() for n, b in model.named_buffers()})
    chosen = {n: params[n] for n in layers}

    def one(p, h, r, t):
        call = _FunctionalModel(model, {**fixed, **p})
        return triple_loss(call, h[None], r[None], t[None], loss, label_smoothing).sum()

    g = vmap(grad(one), in_dims=(None, 0, 0, 0))
    out = []
    for s in range(0, len(triples), chunk_size):
        c = triples[s : s + chunk_size]
        res = g(chosen, c[:, 0], c[:, 1], c[:, 2])
        out.append(torch.cat([res[n].reshape(len(c), -1) for n in layers], 1))
    return torch.cat(out) if out else torch.zeros(0, sum(p.numel() for p in chosen.values()))


class _FunctionalModel:
    """The model's methods evaluated with substituted parameters (for torch.func)."""

    def __init__(self, model, tensors: dict):
        self._model, self._tensors = model, tensors
        self.config = model.config

    def _call(self, method: str, *args):
        from torch.func import functional_call

        # functional_call substitutes parameters only during a module's forward: route the
        # method through a wrapper module whose forward calls it
        return functional_call(_MethodModule(self._model, method), _prefix(self._tensors), args)

    def score_all(self, h, r):
        return self._call("score_all", h, r)

    def score_triples(self, h, r, t):
        return self._call("score_triples", h, r, t)

    def inverse_relation(self, r):
        return self._model.inverse_relation(r)


class _MethodModule(torch.nn.Module):
    def __init__(self, model, method):
        super().__init__()
        self.m = model
        self.method = method

    def forward(self, *args):
        return getattr(self.m, self.method)(*args)


def _prefix(tensors: dict) -> dict:
    return {f"m.{k}": v for k, v in tensors.items()}
