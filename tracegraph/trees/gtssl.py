"""The two GT-SSL objectives: partial order and subtree growth.

Both heads read the encoder's node embeddings, so both losses send gradient into the encoder
(the earlier implementation fed the growth head zeros: its loss moved, the encoder did not).

Partial order (order embeddings, Vendrov et al. 2016): node u is "above" v when v is in u's
subtree. With z = σ(W h) ∈ (0, 1)^D, the violation E(u, v) = ‖max(0, z_v − z_u)‖² is 0 exactly
when z_v ≤ z_u coordinatewise. Ancestor pairs minimise E; non-ancestor pairs of the same tree
pay max(0, margin − E). The sigmoid keeps every E ≤ D, so the loss cannot run away (the
earlier unbounded embeddings drove it to 1.5e5).

Subtree growth: for each node with children, a soft histogram of its children's branch
lengths (relative to the cutoff) and of their branching angles relative to the parent segment;
a head predicts both histograms from the node's embedding; the loss is the 1-D earth mover's
distance, which for histograms on a shared grid is the L1 distance between their CDFs.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def emd_1d(p: torch.Tensor, q: torch.Tensor, bin_width: float = 1.0) -> torch.Tensor:
    """Earth mover's distance between histograms on the same uniform grid: ``sum |CDF_p - CDF_q| * width``.

    Args:
        p: Histograms ``[..., B]``.
        q: Histograms ``[..., B]``.
        bin_width: Width of one bin.

    Returns:
        ``[...]`` distances.
    """
    return (torch.cumsum(p, -1) - torch.cumsum(q, -1))[..., :-1].abs().sum(-1) * bin_width


def soft_histogram(values: torch.Tensor, num_bins: int) -> torch.Tensor:
    """Spread each value in ``[0, 1]`` over bin centres by a Gaussian one bin wide.

    Args:
        values: Values ``[...]`` (clamped to ``[0, 1]``).
        num_bins: Number of bins.

    Returns:
        ``[..., num_bins]`` rows summing to 1.
    """
    centres = (torch.arange(num_bins, device=values.device, dtype=torch.float32) + 0.5) / num_bins
    w = torch.exp(-0.5 * ((values.float().clamp(0, 1).unsqueeze(-1) - centres) * num_bins) ** 2)
    return w / w.sum(-1, keepdim=True)


# ---------------------------------------------------------------------------- order pairs


def ancestor_table(parent: torch.Tensor, max_depth: int) -> list[torch.Tensor]:
    """Binary lifting table: ``table[l][v]`` is v's ``2**l``-th ancestor (roots point to themselves).

    Args:
        parent: Parent index of every node ``[N]`` (roots their own parent).
        max_depth: The deepest node's depth.

    Returns:
        The levels, each ``[N]``.
    """
    table = [parent]
    while (1 << len(table)) <= max_depth:
        table.append(table[-1][table[-1]])
    return table


def lift(table: list[torch.Tensor], nodes: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
    """Move each node ``steps`` levels up, using the binary lifting table.

    Args:
        table: From :func:`ancestor_table`.
        nodes: Node indices.
        steps: Levels to climb per node (at most the node's depth).

    Returns:
        The ancestors.
    """
    for level, up in enumerate(table):
        go = ((steps >> level) & 1).bool()
        nodes = torch.where(go, up[nodes], nodes)
    return nodes


def sample_order_pairs(parent, depth, batch, num_samples: int = 2, generator=None):
    """Sample ancestor pairs and non-ancestor pairs for the order loss (vectorised).

    Ancestors: for every non-root v and each sample, ``k ~ U{1..depth(v)}`` steps up. Negatives: u
    uniform in v's own tree; kept only if u is neither v nor an ancestor of v (u is v's ancestor iff
    lifting v by ``depth(v) - depth(u)`` lands on u).

    Args:
        parent: Parent index of every node ``[N]`` (batched trees, roots their own parent).
        depth: Depth of every node ``[N]``.
        batch: Tree index of every node ``[N]``.
        num_samples: Samples per node.
        generator: Torch random generator, or None.

    Returns:
        ``(anc, desc, u, v)``: ancestor/descendant pairs and non-ancestor pairs.
    """
    dev = parent.device
    n = parent.shape[0]
    table = ancestor_table(parent, int(depth.max()) if n else 0)
    nodes = torch.arange(n, device=dev).repeat(num_samples)
    d = depth[nodes]
    rnd = torch.rand(nodes.shape, generator=generator, device=dev)
    desc_mask = d > 0
    desc = nodes[desc_mask]
    steps = (rnd[desc_mask] * d[desc_mask]).long().clamp(max=d[desc_mask] - 1) + 1
    anc = lift(table, desc, steps)

    sizes = torch.bincount(batch, minlength=int(batch.max()) + 1 if n else 0)
    start = torch.cumsum(sizes, 0) - sizes
    g = batch[nodes]
    u = start[g] + (torch.rand(nodes.shape, generator=generator, device=dev) * sizes[g]).long().clamp(max=sizes[g] - 1)
    v = nodes
    gap = depth[v] - depth[u]
    is_anc = (gap > 0) & (lift(table, v, gap.clamp(min=0)) == u)
    ok = (u != v) & ~is_anc
    return anc, desc, u[ok], v[ok]


def order_violation(z_upper: torch.Tensor, z_lower: torch.Tensor) -> torch.Tensor:
    """How much ``z_lower`` exceeds ``z_upper`` anywhere: ``sum(relu(z_lower - z_upper) ** 2)`` per row.

    Args:
        z_upper: Order embeddings of the would-be ancestors ``[M, K]``.
        z_lower: Order embeddings of the would-be descendants ``[M, K]``.

    Returns:
        ``[M]`` violations.
    """
    return torch.relu(z_lower - z_upper).pow(2).sum(-1)


# -------------------------------------------------------------------------- growth targets


def growth_targets(pos, parent, cutoff: float, num_bins: int):
    """Per node: soft histograms of its children's lengths and branching angles, and which nodes have them.

    Args:
        pos: Node positions ``[N, 3]``.
        parent: Parent index of every node ``[N]``.
        cutoff: Length mapped to the last bin.
        num_bins: Bins per histogram.

    Returns:
        Length histograms ``[N, num_bins]``, a mask of nodes with children, angle histograms, and a
        mask of nodes with branching angles.
    """
    n = pos.shape[0]
    child = torch.nonzero(parent != torch.arange(n, device=pos.device)).squeeze(-1)
    node = parent[child]
    seg = pos[child] - pos[node]
    length = seg.norm(dim=-1)
    ones = torch.ones_like(length)
    count = torch.zeros(n, device=pos.device).index_add_(0, node, ones)
    len_hist = torch.zeros(n, num_bins, device=pos.device).index_add_(
        0, node, soft_histogram(length / cutoff, num_bins)
    )
    len_hist = len_hist / count.clamp(min=1).unsqueeze(-1)

    # angle between the parent segment (grandparent → node) and the child segment (node → child)
    has_gp = parent[node] != node
    c2, n2 = child[has_gp], node[has_gp]
    a, b = pos[n2] - pos[parent[n2]], pos[c2] - pos[n2]
    ang = torch.atan2(torch.cross(a, b, dim=-1).norm(dim=-1), (a * b).sum(-1))
    acount = torch.zeros(n, device=pos.device).index_add_(0, n2, torch.ones_like(ang))
    ang_hist = torch.zeros(n, num_bins, device=pos.device).index_add_(0, n2, soft_histogram(ang / math.pi, num_bins))
    ang_hist = ang_hist / acount.clamp(min=1).unsqueeze(-1)
    return len_hist, count > 0, ang_hist, acount > 0


# ---------------------------------------------------------------------------------- model


class GTSSL(nn.Module):
    """GT-SSL pretraining objective around an encoder: an order loss and a growth loss.

    The order loss embeds nodes so that ancestors dominate descendants; the growth loss predicts
    each node's children's length and angle histograms.

    Args:
        encoder: An :class:`~tracegraph.trees.sgmp.SGMPEncoder`.
        order_dim: Size of the order embedding; None for the encoder's hidden size.
        num_bins: Bins of the growth histograms.
        margin: Margin of the order loss's negative pairs.
        num_samples: Pairs sampled per node.
    """

    def __init__(
        self,
        encoder: nn.Module,
        order_dim: int | None = None,
        num_bins: int = 16,
        margin: float = 1.0,
        num_samples: int = 2,
    ):
        super().__init__()
        hid = encoder.cfg.hidden_channels
        self.encoder = encoder
        self.num_bins, self.margin, self.num_samples = num_bins, margin, num_samples
        self.order_head = nn.Linear(hid, order_dim or hid)
        self.growth_head = nn.Sequential(nn.Linear(hid, hid), nn.SiLU(), nn.Linear(hid, 2 * num_bins))

    def losses(self, data, generator=None) -> dict[str, torch.Tensor]:
        """The pretraining losses of one (batched) TreeData.

        Args:
            data: The batch.
            generator: Torch random generator for the pair sampling, or None.

        Returns:
            ``order`` and ``growth`` (the terms to weight and sum), plus the detached diagnostics
            ``order_pos``, ``order_neg`` and ``order_z_max``.
        """
        batch = getattr(data, "batch", None)
        if batch is None:
            batch = torch.zeros(data.num_nodes, dtype=torch.long, device=data.x.device)
        h, _ = self.encoder(data.x, data.pos, data.paths, batch, getattr(data, "num_graphs", 1))
        h = h.float()

        z = torch.sigmoid(self.order_head(h))
        anc, desc, u, v = sample_order_pairs(data.parent, data.depth, batch, self.num_samples, generator)
        pos_term = order_violation(z[anc], z[desc]).mean() if len(anc) else z.sum() * 0
        neg_term = torch.relu(self.margin - order_violation(z[u], z[v])).mean() if len(u) else z.sum() * 0
        order = pos_term + neg_term

        with torch.no_grad():
            len_t, len_m, ang_t, ang_m = growth_targets(
                data.pos.float(), data.parent, self.encoder.cfg.cutoff, self.num_bins
            )
        logits = self.growth_head(h).float()
        pl = torch.softmax(logits[:, : self.num_bins], -1)
        pa = torch.softmax(logits[:, self.num_bins :], -1)
        w = 1.0 / self.num_bins
        # branch points are ~1/7 of the nodes but carry the branching statistics; a plain mean
        # lets the head ignore them (it did: their angles were not decodable from the
        # embeddings). Average within "one child" and "several children" nodes, then sum.
        nkids = (
            torch.bincount(data.parent, minlength=data.num_nodes)
            - (data.parent == torch.arange(data.num_nodes, device=data.parent.device)).long()
        )
        growth = z.sum() * 0
        for mask, pred, target in ((len_m, pl, len_t), (ang_m, pa, ang_t)):
            for group in (mask & (nkids == 1), mask & (nkids >= 2)):
                if group.any():
                    growth = growth + emd_1d(pred[group], target[group], w).mean()
        return {
            "order": order,
            "order_pos": pos_term.detach(),
            "order_neg": neg_term.detach(),
            "growth": growth,
            "order_z_max": z.detach().abs().max(),
        }
