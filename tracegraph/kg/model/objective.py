"""ConvE's training loss as one module: the loss implementation a batch takes, chosen per call."""

from __future__ import annotations

import torch

from tracegraph.kg.model.conve import ConvE
from tracegraph.kg.model.loss import Targets, bce_1n, fused_bce_1n, stored_bce_1n, tied_lookup
from tracegraph.kg.model.softmax_loss import ce_1n


class TrainingObjective(torch.nn.Module):
    """The training loss as one module, so DistributedDataParallel wraps the whole forward."""

    def __init__(self, model: ConvE, fused: bool, chunk: int, label_smoothing: float, loss: str = "bce"):
        super().__init__()
        self.model, self.fused, self.chunk, self.eps = model, fused, chunk, label_smoothing
        self.loss, self.loss_name = (ce_1n if loss == "ce" else bce_1n), loss

    def forward(self, h, r, batch_index, tails, weight=None):
        """The training loss of one batch.

        Args:
            h: Head ids ``[B]``.
            r: Relation ids ``[B]``.
            batch_index: Target rows into the batch, ``[T]``.
            tails: Target entity ids, ``[T]``.
            weight: Target weights ``[T]`` (0 for padding), or None for all 1.

        Returns:
            The scalar loss.
        """
        targets = Targets(batch_index, tails, weight)
        stored = self._stored_logits(h)
        if self.fused or stored:
            m, sink = self.model, {}
            # head embeddings via tied_lookup: their gradient joins the loss's one dE buffer
            x = m.encode_embeddings(tied_lookup(m.entity.weight, h, sink), m.relation(r))
            if stored:
                return stored_bce_1n(x, m.entity.weight, m.entity_bias, targets, self.eps, sink=sink)
            return fused_bce_1n(x, m.entity.weight, m.entity_bias, targets, self.eps, chunk_size=self.chunk, sink=sink)
        return self.loss(self.model(h, r), targets, self.eps)

    def _stored_logits(self, h) -> bool:
        """Whether the standard BCE on a CPU in fp32 takes stored_bce_1n.

        It makes fewer B×N temporaries, each a fresh allocation there; elsewhere — CUDA (graph capture,
        autocast), bf16, torch.compile — the bce_1n composition stays.
        """
        return (
            not self.fused
            and self.loss_name == "bce"
            and h.device.type == "cpu"
            and not torch.is_autocast_enabled("cpu")
            and not torch.compiler.is_compiling()
        )
