"""Arc-length resampling: trees of any resolution brought to a node spacing and a node budget.

A skeletonised 3504×2336 vessel mask has one node per pixel (~10⁵); the encoder needs a few
hundred. Keeping the root, every branch point and every leaf, and one point per ``spacing`` of
arc length in between, keeps the branching structure exactly and the geometry to within the
spacing, while the node count falls with the total length / spacing.
"""

from __future__ import annotations


from tracegraph.trees.data import Tree, subtree, thin_chains


def resample_by_arc_length(tree: Tree, spacing: float) -> Tree:
    """Keep the root, branch points, leaves, and a point whenever ``spacing`` of arc length has passed.

    Args:
        tree: The tree.
        spacing: Arc length between kept chain points; 0 or less returns ``tree`` unchanged.

    Returns:
        The resampled tree (``meta["node_spacing"]`` records the spacing).
    """
    if spacing <= 0 or tree.num_nodes <= 2:
        return tree
    out = thin_chains(tree, tree.edge_lengths(), spacing)
    out.meta["node_spacing"] = float(spacing)
    return out


def fit_to_budget(tree: Tree, max_nodes: int, spacing: float = 0.0) -> Tree:
    """Resample at ``spacing`` and, while the tree has more than ``max_nodes`` nodes, at a wider one.

    The spacing used is in ``meta["node_spacing"]``. When the branch points and leaves alone exceed
    the budget (no spacing can help), the first ``max_nodes`` nodes in breadth-first order from the
    root are kept and ``meta["truncated"]`` says so.

    Args:
        tree: The tree.
        max_nodes: Most nodes; 0 or less for no cap.
        spacing: The first spacing to try; 0 for none.

    Returns:
        The fitted tree.
    """
    out = resample_by_arc_length(tree, spacing) if spacing > 0 else tree
    if max_nodes <= 0 or out.num_nodes <= max_nodes:
        return out
    total = tree.total_length()
    s = max(spacing, total / max_nodes)
    while True:
        out = resample_by_arc_length(tree, s)
        if out.num_nodes <= max_nodes:
            return out
        if s > total:  # only structural nodes left
            cut = subtree(out, 0, max_nodes)
            cut.meta = dict(out.meta, truncated=True)
            return cut
        s *= 1.25
