"""ConvE (Dettmers et al., 2018) with a per-entity bias and reciprocal relations.

    e_h, r  --reshape-->  two H×W images, stacked (along height, or width for the earlier
    codebase's layout)  -> BN0 -> dropout -> Conv2d(1->C, k×k) -> BN1 -> ReLU -> Dropout2d
    -> flatten -> Linear(->d) -> dropout -> BN2 -> ReLU -> x;   scores = x Eᵀ + b

E is the *same* table used for e_h (tied). The forward has no ``.item()`` and no data-dependent
Python branching, so ``torch.func.vmap``/``grad`` work on it (the TracIn engine relies on it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from tracegraph.errors import TracegraphError
from tracegraph.kg.model.cpu_kernels import BNReLUFeatureDropout, conv_as_bmm


@dataclass
class ConvEConfig:
    """ConvE's architecture and regularisation settings.

    Attributes:
        num_entities: Number of entities.
        num_relations: Number of base relations; with ``reciprocal`` the table holds twice as many.
        embedding_dim: Embedding size ``d``; must equal ``embedding_height * embedding_width``.
        embedding_height: Height of the reshaped embedding.
        embedding_width: Width of the reshaped embedding.
        output_channels: Convolution filters.
        kernel_size: Square convolution kernel size.
        input_dropout: Dropout on the stacked input image.
        feature_map_dropout: 2-D dropout on the convolution's feature maps.
        output_dropout: Dropout on the fully connected layer's output.
        entity_dropout: Dropout on the head entity's embedding before reshaping.
        relation_dropout: Dropout on the relation embedding.
        reciprocal: Learn an inverse relation per relation and score heads through it.
        entity_bias: Add a learned bias per entity to its score.
        concat_axis: ``"height"`` stacks the two embeddings into a ``2H x W`` image (the ConvE paper);
            ``"width"`` makes it ``H x 2W`` (the original research scripts).

    Raises:
        TracegraphError: If the shape settings are inconsistent.
    """

    num_entities: int
    num_relations: int  # base relations; with reciprocal=True the table holds 2× this many
    embedding_dim: int = 200
    embedding_height: int = 10
    embedding_width: int = 20
    output_channels: int = 32
    kernel_size: int = 3
    input_dropout: float = 0.2
    feature_map_dropout: float = 0.2
    output_dropout: float = 0.3
    entity_dropout: float = 0.0  # on the head entity's embedding before reshaping (LibKGE's embedder dropout)
    relation_dropout: float = 0.0  # on the relation embedding
    reciprocal: bool = True
    entity_bias: bool = True
    concat_axis: str = "height"  # "height": 2H×W image (ConvE paper); "width": H×2W (the original research scripts)

    def __post_init__(self):
        if self.embedding_height * self.embedding_width != self.embedding_dim:
            raise TracegraphError(
                f"embedding height×width ({self.embedding_height}×{self.embedding_width}) must equal "
                f"--embedding-dim {self.embedding_dim}"
            )
        if self.concat_axis not in ("height", "width"):
            raise TracegraphError("concat_axis must be 'height' or 'width'")
        h, w = self.image_shape
        if self.kernel_size > min(h, w):
            raise TracegraphError(f"kernel size {self.kernel_size} larger than the {h}×{w} input image")

    @property
    def image_shape(self) -> tuple[int, int]:
        """``(height, width)`` of the stacked input image."""
        if self.concat_axis == "height":
            return 2 * self.embedding_height, self.embedding_width
        return self.embedding_height, 2 * self.embedding_width

    @property
    def num_relation_rows(self) -> int:
        """Rows of the relation table: ``num_relations``, doubled for reciprocal models."""
        return self.num_relations * (2 if self.reciprocal else 1)

    @property
    def flat_size(self) -> int:
        """Length of the flattened feature maps that enter the fully connected layer."""
        h, w = self.image_shape
        k = self.kernel_size
        return self.output_channels * (h - k + 1) * (w - k + 1)

    def to_dict(self) -> dict:
        """The settings as a plain dictionary (for config.json and checkpoints)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ConvEConfig":
        """Build a config from a dictionary, ignoring keys that are not settings.

        Args:
            d: Settings by name.

        Returns:
            The config.

        Raises:
            TracegraphError: If the shape settings are inconsistent.
        """
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


class ConvE(nn.Module):
    """The ConvE link prediction model (Dettmers et al., 2018).

    The head and relation embeddings are stacked into an image, convolved, projected back to ``d``
    dimensions, and scored against every entity embedding (plus a per-entity bias).

    Args:
        config: The architecture.
    """

    def __init__(self, config: ConvEConfig):
        super().__init__()
        self.config = c = config
        self.entity = nn.Embedding(c.num_entities, c.embedding_dim)
        self.relation = nn.Embedding(c.num_relation_rows, c.embedding_dim)
        self.bn0 = nn.BatchNorm2d(1)
        self.conv = nn.Conv2d(1, c.output_channels, c.kernel_size, bias=True)
        self.bn1 = nn.BatchNorm2d(c.output_channels)
        self.fc = nn.Linear(c.flat_size, c.embedding_dim)
        self.bn2 = nn.BatchNorm1d(c.embedding_dim)
        self.input_drop = nn.Dropout(c.input_dropout)
        self.feature_drop = nn.Dropout2d(c.feature_map_dropout)
        self.output_drop = nn.Dropout(c.output_dropout)
        self.entity_drop = nn.Dropout(c.entity_dropout)
        self.relation_drop = nn.Dropout(c.relation_dropout)
        if c.entity_bias:
            self.entity_bias = nn.Parameter(torch.zeros(c.num_entities))
        else:
            self.register_parameter("entity_bias", None)
        self.gradient_checkpointing = False
        nn.init.xavier_normal_(self.entity.weight)
        nn.init.xavier_normal_(self.relation.weight)

    # -- pieces (TracIn's factor engine hooks these) ------------------------------------

    def image(self, e_h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        """Stack head and relation embeddings into the input image.

        Args:
            e_h: Head embeddings ``[B, d]``.
            r: Relation embeddings ``[B, d]``.

        Returns:
            ``[B, 1, H', W']``, stacked along :attr:`ConvEConfig.concat_axis`.
        """
        c = self.config
        a = e_h.reshape(-1, 1, c.embedding_height, c.embedding_width)
        b = r.reshape(-1, 1, c.embedding_height, c.embedding_width)
        return torch.cat([a, b], dim=2 if c.concat_axis == "height" else 3)

    def encode(self, e_h: torch.Tensor, r: torch.Tensor, record: dict | None = None) -> torch.Tensor:
        """Map embeddings to the hidden vector ``x`` (everything before the scoring matmul).

        Args:
            e_h: Head embeddings ``[B, d]``.
            r: Relation embeddings ``[B, d]``.
            record: If a dict, every layer's input and output is stored in it under a fixed name;
                TracIn's factor engine takes per-example gradients at those points.

        Returns:
            ``x``, shape ``[B, d]``.
        """
        z = self.image(e_h, r)
        z0 = self.input_drop(self.bn0(z))
        z1 = conv_as_bmm(self.conv, z0) if record is None and self._conv_by_bmm(z0) else self.conv(z0)
        if record is None and self._one_buffer_block(z1):
            z3 = self._bn1_relu_feature_drop(z1)
        else:
            z2 = self.bn1(z1)
            z3 = self.feature_drop(F.relu(z2))
        f = z3.flatten(1)
        z4 = self.fc(f)
        z5 = self.bn2(self.output_drop(z4))
        x = F.relu(z5)
        if record is not None:
            record.update(image=z, conv_in=z0, conv_out=z1, bn1_out=z2, fc_in=f, fc_out=z4, bn2_out=z5, x=x)
        return x

    def _cpu_fp32_training(self, z: torch.Tensor) -> bool:
        """Whether this forward trains in fp32 on a CPU, eagerly: where the CPU-only kernels apply.

        CUDA (graph capture, autocast) and torch.compile keep the modules.
        """
        return (
            self.training
            and torch.is_grad_enabled()
            and z.device.type == "cpu"
            and not torch.is_autocast_enabled("cpu")
            and not torch.compiler.is_compiling()
        )

    def _conv_by_bmm(self, z0: torch.Tensor) -> bool:
        """Whether the convolution runs as :func:`conv_as_bmm` (a plain stride-1 Conv2d, CPU training)."""
        conv = self.conv
        return (
            self._cpu_fp32_training(z0)
            and type(conv) is nn.Conv2d
            and conv.in_channels == 1
            and conv.groups == 1
            and conv.stride == (1, 1)
            and conv.dilation == (1, 1)
            and conv.padding == (0, 0)
        )

    def _one_buffer_block(self, z1: torch.Tensor) -> bool:
        """Whether bn1 → ReLU → Dropout2d runs as :class:`BNReLUFeatureDropout`.

        It does when training in fp32 on a CPU, where each B×C×H×W temporary is a fresh allocation and a
        pass over memory. SyncBatchNorm under torchrun keeps the modules.
        """
        bn, drop = self.bn1, self.feature_drop
        return (
            self._cpu_fp32_training(z1)
            and type(bn) is nn.BatchNorm2d
            and bn.affine
            and bn.track_running_stats
            and type(drop) is nn.Dropout2d
            and 0.0 <= drop.p < 1.0
        )

    def _bn1_relu_feature_drop(self, z1: torch.Tensor) -> torch.Tensor:
        """``feature_drop(relu(bn1(z1)))`` in training, bit for bit.

        nn.BatchNorm's bookkeeping and Dropout2d's mask (drawn as ATen's feature dropout draws it), then
        one fused Function.
        """
        bn, p = self.bn1, self.feature_drop.p
        bn.num_batches_tracked.add_(1)
        momentum = 1.0 / float(bn.num_batches_tracked) if bn.momentum is None else bn.momentum
        mask = None
        if p > 0:
            mask = z1.new_empty((z1.shape[0], z1.shape[1], 1, 1)).bernoulli_(1 - p).div_(1 - p)
        return BNReLUFeatureDropout.apply(
            z1, bn.weight, bn.bias, bn.running_mean, bn.running_var, momentum, bn.eps, mask
        )

    def hidden(self, heads: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        """The hidden vectors of ``(head, relation)`` queries.

        Args:
            heads: Head ids ``[B]``.
            relations: Relation ids ``[B]`` (inverse ids score heads in reciprocal models).

        Returns:
            ``[B, d]``.

        Raises:
            TypeError: If labels are passed instead of id tensors.
        """
        if not (torch.is_tensor(heads) and torch.is_tensor(relations)):  # labels reach here from notebooks
            raise TypeError(
                "ConvE scores id tensors, not labels: use run.predict / run.score "
                "(tracegraph.open_run), or torch.as_tensor(run.entities.ids([...]))"
            )
        return self.encode_embeddings(self.entity(heads), self.relation(relations))

    def encode_embeddings(self, e_h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        """:meth:`encode` after embedding dropout, recomputed in backward when gradient checkpointing is on.

        Args:
            e_h: Head embeddings ``[B, d]``.
            r: Relation embeddings ``[B, d]``.

        Returns:
            ``x``, shape ``[B, d]``.
        """
        # embedding dropout (identity in eval mode, so TracIn never sees it); skipped at p = 0 so
        # runs without it draw the same random numbers as before it existed
        if self.config.entity_dropout:
            e_h = self.entity_drop(e_h)
        if self.config.relation_dropout:
            r = self.relation_drop(r)
        if self.gradient_checkpointing and self.training and torch.is_grad_enabled():
            # recompute the conv block in backward: its activations (B×C×H×W) dominate memory
            return checkpoint(self._encode_once, e_h, r, [], use_reentrant=False)
        return self.encode(e_h, r)

    def _encode_once(self, e_h: torch.Tensor, r: torch.Tensor, calls: list) -> torch.Tensor:
        """``encode`` for checkpointing, leaving BatchNorm's running statistics as one pass leaves them.

        The recomputation in backward must not move them a second time (they would count every batch
        twice, and the eval-mode model would differ from a run without checkpointing), so they are put
        back after it.
        """
        calls.append(1)
        if len(calls) == 1:
            return self.encode(e_h, r)
        saved = [(b, b.clone()) for m in (self.bn0, self.bn1, self.bn2) for b in m.buffers()]
        try:
            return self.encode(e_h, r)
        finally:
            for b, v in saved:
                b.copy_(v)

    def score_hidden(self, x: torch.Tensor, start: int = 0, end: int | None = None) -> torch.Tensor:
        """Score hidden vectors against the entities ``[start, end)``: ``x E[start:end]^T + b``.

        Args:
            x: Hidden vectors ``[B, d]``.
            start: First entity id.
            end: One past the last entity id; None for all.

        Returns:
            Logits ``[B, end - start]``.
        """
        w = self.entity.weight[start:end]
        s = x @ w.t().to(x.dtype)
        if self.entity_bias is not None:
            s = s + self.entity_bias[start:end].to(s.dtype)
        return s

    # -- public API ----------------------------------------------------------------------

    def score_all(self, heads: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        """Logits of every entity as the tail of each ``(head, relation)``.

        Args:
            heads: Head ids ``[B]``.
            relations: Relation ids ``[B]``.

        Returns:
            ``[B, num_entities]``.
        """
        return self.score_hidden(self.hidden(heads, relations))

    def score_triples(self, heads, relations, tails) -> torch.Tensor:
        """Logit of each given triple.

        Args:
            heads: Head ids ``[B]``.
            relations: Relation ids ``[B]``.
            tails: Tail ids ``[B]``.

        Returns:
            ``[B]``.
        """
        x = self.hidden(heads, relations)
        s = (x * self.entity(tails).to(x.dtype)).sum(-1)
        if self.entity_bias is not None:
            s = s + self.entity_bias[tails].to(s.dtype)
        return s

    def forward(self, heads: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        """Same as :meth:`score_all`.

        Args:
            heads: Head ids ``[B]``.
            relations: Relation ids ``[B]``.

        Returns:
            Logits ``[B, num_entities]``.
        """
        return self.score_all(heads, relations)

    def inverse_relation(self, relations: torch.Tensor) -> torch.Tensor:
        """The id of ``r``'s inverse relation (reciprocal models only).

        Args:
            relations: Base relation ids.

        Returns:
            ``relations + num_relations``.
        """
        return relations + self.config.num_relations
