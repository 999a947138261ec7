"""SGMP-style encoder: messages along 3rd-order chains, described by SE(3)-invariant geometry.

For a chain i→j→k→p the three bond lengths, the two bond angles and the signed torsion fix the
four points up to a rigid motion (rotation + translation), and the torsion's sign tells a chain
from its mirror image. Those six numbers, expanded in radial/Fourier bases, are the only way
positions enter the network, so the output is invariant to rigid motions by construction and
changes under reflection. Each chain's message is averaged at its first node i (as in SGMP)
and, separately, at its second node j (see InteractionBlock for why), with ``segment_reduce`` /
``index_add_`` — node order never matters, which makes the readout permutation invariant.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


@dataclass
class EncoderConfig:
    """Settings of the SGMP tree encoder.

    Attributes:
        in_channels: Node feature size.
        hidden_channels: Hidden size ``H``.
        num_interactions: Interaction blocks.
        num_rbf: Gaussian basis functions per distance and angle.
        cutoff: Longest edge length the distance basis resolves (data units).
        readout: ``"mean"`` or ``"sum"`` over a tree's nodes.
        second_node_messages: Also deliver each chain's message to its second node ``j``.
    """

    in_channels: int = 4
    hidden_channels: int = 64
    num_interactions: int = 3
    num_rbf: int = 20
    cutoff: float = 10.0  # longest edge length that the distance basis resolves (data units)
    readout: str = "mean"  # mean | sum
    # also deliver each chain's message to its second node j (see InteractionBlock)
    second_node_messages: bool = True

    def to_dict(self) -> dict:
        """The settings as a plain dictionary (for checkpoints)."""
        return asdict(self)


class GaussianBasis(nn.Module):
    """Gaussian radial basis on evenly spaced centres from ``start`` to ``stop``.

    Args:
        start: The first centre.
        stop: The last centre.
        num: Number of centres; their spacing sets the width.
    """

    def __init__(self, start: float, stop: float, num: int):
        super().__init__()
        self.register_buffer("centres", torch.linspace(start, stop, num))
        self.gamma = 1.0 / (((stop - start) / max(num - 1, 1)) ** 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Expand values on the basis.

        Args:
            x: Values ``[...]``.

        Returns:
            ``[..., num]``.
        """
        return torch.exp(-self.gamma * (x.unsqueeze(-1) - self.centres) ** 2)


def chain_geometry(pos: torch.Tensor, paths: torch.Tensor):
    """Distances, bond angles and signed torsion of each chain ``i -> j -> k -> p``.

    Args:
        pos: Node positions ``[N, 3]``.
        paths: Chains ``[4, P]``.

    Returns:
        Distances ``[P, 3]``, angles ``[P, 2]`` and torsions ``[P]`` (radians).
    """
    i, j, k, p = paths
    b1, b2, b3 = pos[j] - pos[i], pos[k] - pos[j], pos[p] - pos[k]
    d1, d2, d3 = b1.norm(dim=-1), b2.norm(dim=-1), b3.norm(dim=-1)
    # angle at j between j→i and j→k; atan2 is accurate near 0 and π where acos is not
    a1 = torch.atan2(torch.cross(-b1, b2, dim=-1).norm(dim=-1), (-b1 * b2).sum(-1))
    a2 = torch.atan2(torch.cross(-b2, b3, dim=-1).norm(dim=-1), (-b2 * b3).sum(-1))
    n1, n2 = torch.cross(b1, b2, dim=-1), torch.cross(b2, b3, dim=-1)
    # the triple product b1·(b2×b3) flips sign under reflection: this is what sees chirality
    tors = torch.atan2(d2 * (b1 * n2).sum(-1), (n1 * n2).sum(-1))
    return torch.stack([d1, d2, d3], -1), torch.stack([a1, a2], -1), tors


class InteractionBlock(nn.Module):
    """One interaction: each node's state is updated from the chains around it.

    h_n += MLP([h_n, mean over chains from n, mean over chains through n as j]) where each chain
    i→j→k→p carries σ(A h_j + B h_k + C h_p) ⊙ W g_chain.
    """

    def __init__(self, hidden: int, second_node: bool = True):
        super().__init__()
        self.second_node = second_node
        self.norm = nn.LayerNorm(hidden)
        self.node_proj = nn.Linear(hidden, 3 * hidden)  # A, B, C at once: per node, not per chain
        self.filter = nn.Linear(hidden, hidden)
        width = (3 if second_node else 2) * hidden
        self.update = nn.Sequential(nn.Linear(width, hidden), nn.SiLU(), nn.Linear(hidden, hidden))

    def forward(
        self,
        h: torch.Tensor,
        geom: torch.Tensor,
        paths: torch.Tensor,
        count: torch.Tensor,
        count_j: torch.Tensor,
        sorted_by_source: bool,
    ):
        """One message-passing update of the node states over the chains.

        Args:
            h: Node states ``[N, H]``.
            geom: Chain geometry features ``[P, H]``.
            paths: Chains ``[4, P]``.
            count: Chains starting at each node ``[N]``.
            count_j: Chains with each node second ``[N]``.
            sorted_by_source: Whether the chains are grouped by their first node (faster sums).

        Returns:
            The new node states ``[N, H]``.
        """
        u = self.norm(h)
        a, b, c = self.node_proj(u).chunk(3, dim=-1)
        i, j, k, p = paths
        msg = (nn.functional.silu(a[j] + b[k] + c[p]) * self.filter(geom)).to(u.dtype)
        if sorted_by_source:  # contiguous runs per receiver: a segment sum is ~2x faster on CPU
            agg = torch.segment_reduce(msg, "sum", lengths=count, unsafe=True)
        else:
            agg = torch.zeros_like(u).index_add_(0, i, msg)
        agg = agg / count.clamp(min=1).unsqueeze(-1).to(u.dtype)  # mean over the chains from i
        parts = [u, agg]
        if self.second_node:
            # A chain's angles sit at j and k, never at i: node n's own branching angle (between
            # its parent and child segments) lives only in chains where n is j. Messages to i
            # alone reach it two blocks late and, in practice, never linearly (measured R² ≈ 0).
            agg_j = torch.zeros_like(u).index_add_(0, j, msg) / count_j.clamp(min=1).unsqueeze(-1).to(u.dtype)
            parts.append(agg_j)
        return h + self.update(torch.cat(parts, dim=-1))


class SGMPEncoder(nn.Module):
    """Geometric tree encoder: message passing over non-backtracking 4-node chains (SGMP).

    Its features are invariant to rotation and translation but see reflections (signed torsion).

    Args:
        cfg: The encoder's settings.
    """

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.cfg = cfg
        hid, r = cfg.hidden_channels, cfg.num_rbf
        self.embed = nn.Linear(cfg.in_channels, hid)
        self.dist_basis = GaussianBasis(0.0, cfg.cutoff, r)
        self.angle_basis = GaussianBasis(0.0, math.pi, r)
        self.register_buffer("harmonics", torch.arange(1, r // 2 + 1, dtype=torch.float32))
        geom_dim = 3 * r + 2 * r + 2 * (r // 2)
        self.geom_mlp = nn.Sequential(nn.Linear(geom_dim, hid), nn.SiLU(), nn.Linear(hid, hid))
        self.blocks = nn.ModuleList(
            InteractionBlock(hid, cfg.second_node_messages) for _ in range(cfg.num_interactions)
        )
        self.out_norm = nn.LayerNorm(hid)
        self.gradient_checkpointing = False

    def chain_features(self, pos: torch.Tensor, paths: torch.Tensor) -> torch.Tensor:
        """Geometry features of each chain, computed in fp32.

        Args:
            pos: Node positions ``[N, 3]``.
            paths: Chains ``[4, P]``.

        Returns:
            ``[P, H]``.
        """
        with torch.autocast(pos.device.type, enabled=False):  # geometry in fp32 always
            dist, ang, tors = chain_geometry(pos.float(), paths)
            dist = dist.clamp(max=self.cfg.cutoff)
            m = tors.unsqueeze(-1) * self.harmonics
            feats = torch.cat(
                [self.dist_basis(dist).flatten(1), self.angle_basis(ang).flatten(1), torch.sin(m), torch.cos(m)], dim=-1
            )
        return self.geom_mlp(feats)

    def forward(self, x, pos, paths, batch=None, num_graphs: int | None = None):
        """Encode a (batched) set of trees.

        Args:
            x: Node features ``[N, in_channels]``.
            pos: Node positions ``[N, 3]``.
            paths: Chains ``[4, P]``.
            batch: Tree index of every node ``[N]``; None for one tree.
            num_graphs: Number of trees; None to infer it from ``batch``.

        Returns:
            Node embeddings ``[N, H]`` and graph embeddings ``[G, H]``.
        """
        n = x.shape[0]
        h = self.embed(x)
        geom = self.chain_features(pos, paths)
        count = torch.bincount(paths[0], minlength=n)
        count_j = torch.bincount(paths[1], minlength=n)
        # enumerate_paths emits chains grouped by their first node, and batching keeps that order
        is_sorted = paths.shape[1] > 0 and bool((paths[0, 1:] >= paths[0, :-1]).all())
        for block in self.blocks:
            if self.gradient_checkpointing and self.training and torch.is_grad_enabled():
                # recompute this block's per-chain activations in backward instead of storing them
                h = checkpoint(block, h, geom, paths, count, count_j, is_sorted, use_reentrant=False)
            else:
                h = block(h, geom, paths, count, count_j, is_sorted)
        h = self.out_norm(h)
        return h, self.readout(h, batch, num_graphs)

    def readout(self, h, batch=None, num_graphs=None):
        """Pool node states per tree (mean or sum, as configured).

        Args:
            h: Node states ``[N, H]``.
            batch: Tree index of every node; None for one tree.
            num_graphs: Number of trees; None to infer it from ``batch``.

        Returns:
            ``[G, H]``.
        """
        if batch is None:
            batch = torch.zeros(h.shape[0], dtype=torch.long, device=h.device)
            num_graphs = 1
        if num_graphs is None:
            num_graphs = int(batch.max()) + 1
        out = torch.zeros(num_graphs, h.shape[1], device=h.device, dtype=h.dtype).index_add_(0, batch, h)
        if self.cfg.readout == "mean":
            cnt = torch.zeros(num_graphs, device=h.device, dtype=h.dtype).index_add_(
                0, batch, torch.ones_like(batch, dtype=h.dtype)
            )
            out = out / cnt.clamp(min=1).unsqueeze(-1)
        return out

    def encode(self, data):
        """:meth:`forward` on a (batched) TreeData.

        Args:
            data: The TreeData or batch.

        Returns:
            Node embeddings ``[N, H]`` and graph embeddings ``[G, H]``.
        """
        return self.forward(
            data.x, data.pos, data.paths, getattr(data, "batch", None), getattr(data, "num_graphs", None)
        )


def suggest_cutoff(datasets, quantile: float = 0.99) -> float:
    """A distance cutoff from the data's scale: 1.25 times a high quantile of the edge lengths.

    Args:
        datasets: TreeData items.
        quantile: The edge-length quantile (over at most a million edges).

    Returns:
        The cutoff, in the data's units.
    """
    lengths = torch.cat([(d.pos[1:] - d.pos[d.parent[1:]]).norm(dim=-1) for d in datasets if d.num_nodes > 1])
    return float(torch.quantile(lengths[:1_000_000], quantile)) * 1.25
