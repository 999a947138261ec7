"""Rooted geometric trees: SWC reading, trees from graphs, synthetic classes, PyG ``Data``.

A :class:`Tree` is stored in *topological order*: node 0 is the root and every parent index is
smaller than its child's. Most algorithms here (depths, subtree sizes, resampling) then become
one forward or backward sweep instead of a recursion, and a cycle or a missing parent in the
input shows up as a node that cannot be placed in that order.

The root's parent is itself (not -1): PyG's batching adds a node offset to every index
attribute, and a self-pointer survives that while a -1 sentinel would not.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from torch_geometric.data import Data

from tracegraph.errors import DataError, require_file
from tracegraph.runtime.textfiles import strip_bom


@dataclass
class Tree:
    """A rooted tree with node positions; node 0 is the root and parents come before children.

    Attributes:
        pos: Node positions ``[N, D]`` (float64, D is 2 or 3).
        parent: ``[N]`` int64 parent indices, ``parent[0] == 0`` and ``parent[i] < i`` for ``i > 0``.
        label: Class index, -1 when unlabelled.
        name: The tree's name (usually its file's stem).
        meta: Notes on how it was read (dropped fragments, spacing, truncation...).
    """

    pos: np.ndarray  # (N, D) float64, D in {2, 3}
    parent: np.ndarray  # (N,) int64, parent[0] == 0, parent[i] < i for i > 0
    label: int = -1
    name: str = ""
    meta: dict = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        """Number of nodes."""
        return int(self.pos.shape[0])

    def children_count(self) -> np.ndarray:
        """The number of children of every node, ``[N]``."""
        return np.bincount(self.parent[1:], minlength=self.num_nodes)

    def depth(self) -> np.ndarray:
        """The depth of every node (root 0), ``[N]``."""
        d = np.zeros(self.num_nodes, dtype=np.int64)
        for i in range(1, self.num_nodes):  # parents come first, so one sweep suffices
            d[i] = d[self.parent[i]] + 1
        return d

    def edge_lengths(self) -> np.ndarray:
        """The length of every edge from node ``i`` to its parent, ``[N - 1]`` for ``i = 1..N-1``."""
        return np.linalg.norm(self.pos[1:] - self.pos[self.parent[1:]], axis=1)

    def total_length(self) -> float:
        """The total length of all edges."""
        return float(self.edge_lengths().sum())


def _topological(parent_of: np.ndarray, root: int, pos: np.ndarray, **kw) -> Tree:
    """Re-index a parent array (root's parent = -1) into BFS order from ``root``."""
    n = len(parent_of)
    children: list[list[int]] = [[] for _ in range(n)]
    for c, p in enumerate(parent_of):
        if p >= 0:
            children[p].append(c)
    order = [root]
    q = deque([root])
    while q:
        u = q.popleft()
        order.extend(children[u])
        q.extend(children[u])
    new_index = np.full(n, -1, dtype=np.int64)
    new_index[order] = np.arange(len(order))
    new_parent = np.zeros(len(order), dtype=np.int64)
    old = np.asarray(order)
    par = parent_of[old]
    new_parent[1:] = new_index[par[1:]]
    return Tree(pos=np.asarray(pos, dtype=np.float64)[old], parent=new_parent, **kw), new_index


# ----------------------------------------------------------------------------------------- SWC


def read_swc(path: str | Path, multiple_roots: str = "largest") -> Tree:
    """Read an SWC file (``id type x y z radius parent`` per line).

    Real reconstructions sometimes hold several disconnected fragments (several parent -1 lines).

    Args:
        path: The SWC file.
        multiple_roots: ``"largest"`` keeps the biggest fragment and records how many nodes were
            dropped in ``tree.meta``; ``"error"`` refuses the file.

    Returns:
        The tree, named by the file's stem.

    Raises:
        DataError: For any bad line (with its line number), or several roots under ``"error"``.
    """
    p = require_file(path, "SWC file")
    ids, pars, xyz, lines = [], [], [], []
    seen: dict[int, int] = {}
    with open(p, encoding="utf-8", errors="strict") as f:
        try:
            for lineno, raw in enumerate(f, start=1):
                s = (strip_bom(raw, p) if lineno == 1 else raw).split("#", 1)[0].strip()
                if not s:
                    continue
                parts = s.split()
                if len(parts) != 7:
                    raise DataError(f"expected 7 fields (id type x y z radius parent), got {len(parts)}", p, lineno)
                try:
                    nid, par = int(parts[0]), int(parts[6])
                    coords = [float(v) for v in parts[2:5]]
                    float(parts[5])
                except ValueError:
                    raise DataError(f"non-numeric field in {s!r}", p, lineno) from None
                if not np.all(np.isfinite(coords)):
                    raise DataError("non-finite coordinate", p, lineno)
                if nid in seen:
                    raise DataError(f"duplicate node id {nid} (first on line {lines[seen[nid]]})", p, lineno)
                if par == nid:
                    raise DataError(f"node {nid} is its own parent", p, lineno)
                seen[nid] = len(ids)
                ids.append(nid), pars.append(par), xyz.append(coords), lines.append(lineno)
        except UnicodeDecodeError as e:
            raise DataError(f"not UTF-8 text: {e.reason}", p) from None
    if not ids:
        raise DataError("no nodes", p)
    parent_of = np.full(len(ids), -1, dtype=np.int64)
    roots = []
    for k, par in enumerate(pars):
        if par < 0:
            roots.append(k)
        elif par not in seen:
            raise DataError(f"parent {par} of node {ids[k]} is not in the file", p, lines[k])
        else:
            parent_of[k] = seen[par]
    if not roots:
        raise DataError("no root (parent -1): the parent pointers form a cycle", p, lines[0])
    if len(roots) > 1 and multiple_roots == "error":
        raise DataError(
            f"{len(roots)} roots (lines {', '.join(str(lines[r]) for r in roots[:5])}); a tree needs exactly one",
            p,
            lines[roots[1]],
        )
    best = None
    reached = np.zeros(len(ids), dtype=bool)
    for r in roots:
        t, idx = _topological(parent_of, r, np.asarray(xyz), name=p.stem)
        reached |= idx >= 0
        if best is None or t.num_nodes > best.num_nodes:
            best = t
    tree = best
    tree.meta["dropped_nodes"] = len(ids) - tree.num_nodes
    tree.meta["fragments"] = len(roots)
    if not reached.all():  # unreachable from every root: only a cycle does that
        k = int(np.flatnonzero(~reached)[0])
        raise DataError(f"node {ids[k]} is on a cycle of parent pointers (not reachable from a root)", p, lines[k])
    return tree


# ------------------------------------------------------------------------ graphs -> trees


def tree_from_graph(edges, pos, root: int = 0, method: str = "bfs") -> Tree:
    """A rooted spanning tree of an undirected graph with node positions.

    Args:
        edges: ``[E, 2]`` or ``[2, E]`` array-like of node pairs.
        pos: Node positions ``[N, D]``.
        root: The root node.
        method: ``"bfs"`` (fewest hops from the root) or ``"mst"`` (Euclidean minimum spanning tree,
            then oriented away from the root).

    Returns:
        The spanning tree, rooted at ``root``.

    Raises:
        DataError: If the edges or root are malformed, the method is unknown, or the graph is not
            connected.
    """
    import scipy.sparse as sp
    from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree

    pos = np.asarray(pos, dtype=np.float64)
    n = len(pos)
    e = np.asarray(edges, dtype=np.int64)
    if e.size == 0:
        e = e.reshape(0, 2)
    if e.ndim != 2 or 2 not in e.shape:
        raise DataError(f"edges must have shape (E, 2) or (2, E), got {e.shape}")
    if e.shape[0] == 2 and e.shape[1] != 2:
        e = e.T
    if not 0 <= root < n:
        raise DataError(f"root {root} is not a node (graph has {n})")
    if len(e) and (e.min() < 0 or e.max() >= n):
        raise DataError("edge refers to a node outside 0..N-1")
    e = e[e[:, 0] != e[:, 1]]
    w = np.linalg.norm(pos[e[:, 0]] - pos[e[:, 1]], axis=1) + 1e-12  # 0 would vanish in sparse
    a = sp.coo_matrix((w, (e[:, 0], e[:, 1])), shape=(n, n)).tocsr()
    a = a.maximum(a.T)
    if method == "mst":
        m = minimum_spanning_tree(a)
        a = m.maximum(m.T)
    elif method != "bfs":
        raise DataError(f"method must be 'bfs' or 'mst', not {method!r}")
    order, pred = breadth_first_order(a, root, directed=False, return_predecessors=True)
    if len(order) < n:
        raise DataError(f"graph is not connected: {n - len(order)} of {n} nodes unreachable from root {root}")
    parent_of = pred.astype(np.int64)
    parent_of[root] = -1
    return _topological(parent_of, root, pos)[0]


# --------------------------------------------------------------------- resampling / subtrees


def simplify(tree: Tree, keep_every: int = 4) -> Tree:
    """Keep the root, branch points, leaves and every k-th point along unbranched segments.

    Real neurons have thousands of closely spaced points; the geometry that matters (branch lengths,
    angles, tortuosity) survives this thinning while the node count drops about k-fold.

    Args:
        tree: The tree.
        keep_every: k.

    Returns:
        The thinned tree.
    """
    return thin_chains(tree, np.ones(max(tree.num_nodes - 1, 0)), keep_every)


def thin_chains(tree: Tree, edge_weight: np.ndarray, threshold: float) -> Tree:
    """Keep the root, branch points, leaves, and a chain point once ``threshold`` of weight has passed.

    Args:
        tree: The tree.
        edge_weight: ``edge_weight[i - 1]`` weighs the edge from node ``i`` to its parent: 1 per edge
            thins by point count (:func:`simplify`), the edge length by arc length
            (:func:`~tracegraph.trees.resample.resample_by_arc_length`).
        threshold: Weight between kept chain points.

    Returns:
        The thinned tree.
    """
    n = tree.num_nodes
    keep = tree.children_count() != 1
    keep[0] = True
    since = np.zeros(n)  # weight since the nearest kept ancestor
    kept_anc = np.zeros(n, dtype=np.int64)  # nearest kept ancestor (old index)
    parent = tree.parent
    for i in range(1, n):  # parents come first: one forward sweep
        p = parent[i]
        kept_anc[i] = p if keep[p] else kept_anc[p]
        since[i] = (0.0 if keep[p] else since[p]) + edge_weight[i - 1]
        if since[i] >= threshold:
            keep[i] = True
    old = np.flatnonzero(keep)
    idx = np.full(n, -1, dtype=np.int64)
    idx[old] = np.arange(len(old))
    par = idx[kept_anc[old]]
    par[0] = 0
    return Tree(tree.pos[old].copy(), par, tree.label, tree.name, dict(tree.meta))


def subtree(tree: Tree, node: int, max_nodes: int) -> Tree:
    """The first ``max_nodes`` nodes (breadth-first order) of the subtree rooted at ``node``.

    Args:
        tree: The tree.
        node: The subtree's root.
        max_nodes: Most nodes to keep.

    Returns:
        The subtree, re-indexed from 0.
    """
    children: list[list[int]] = [[] for _ in range(tree.num_nodes)]
    for c in range(1, tree.num_nodes):
        children[tree.parent[c]].append(c)
    order = [node]
    q = deque([node])
    while q and len(order) < max_nodes:
        for c in children[q.popleft()]:
            if len(order) >= max_nodes:
                break
            order.append(c)
            q.append(c)
    old = np.asarray(order)
    idx = {o: k for k, o in enumerate(order)}
    par = np.array([0] + [idx[tree.parent[o]] for o in order[1:]], dtype=np.int64)
    return Tree(tree.pos[old].copy(), par, tree.label, tree.name, dict(tree.meta))


def sample_subtrees(tree: Tree, count: int, max_nodes: int, min_nodes: int, rng: np.random.Generator) -> list[Tree]:
    """Random subtrees with at least ``min_nodes`` nodes (roots drawn among nodes with subtrees that large).

    Args:
        tree: The tree.
        count: Number of subtrees.
        max_nodes: Most nodes per subtree.
        min_nodes: Least nodes below a subtree's root.
        rng: The random generator.

    Returns:
        ``count`` subtrees, or ``[tree]`` when no node has a subtree that large.
    """
    size = np.ones(tree.num_nodes, dtype=np.int64)
    for i in range(tree.num_nodes - 1, 0, -1):  # children after parents: sweep backwards
        size[tree.parent[i]] += size[i]
    candidates = np.flatnonzero(size >= min_nodes)
    if len(candidates) == 0:
        return [tree]
    picks = rng.choice(candidates, size=count, replace=len(candidates) < count)
    return [subtree(tree, int(v), max_nodes) for v in picks]


def neuron_subtrees(
    swc_dir: str | Path, count: int, max_nodes: int = 300, keep_every: int = 4, seed: int = 0
) -> list[Tree]:
    """Subtrees sampled from every ``*.swc`` in a folder (thinned first), ``count`` in total.

    Args:
        swc_dir: The folder.
        count: Subtrees in total, spread evenly over the files.
        max_nodes: Most nodes per subtree.
        keep_every: Thinning factor (see :func:`simplify`).
        seed: The random seed.

    Returns:
        The subtrees.

    Raises:
        DataError: If the folder has no SWC file, or one is malformed.
    """
    files = sorted(Path(swc_dir).glob("*.swc"))
    if not files:
        raise DataError("no *.swc files", swc_dir)
    rng = np.random.default_rng(seed)
    trees = [simplify(read_swc(f), keep_every) for f in files]
    per = [count // len(trees) + (k < count % len(trees)) for k in range(len(trees))]
    out: list[Tree] = []
    for t, k in zip(trees, per):
        out.extend(sample_subtrees(t, k, max_nodes, min(max_nodes // 2, t.num_nodes), rng))
    return out


# ----------------------------------------------------------------------------------- to PyG

NODE_FEATURES = 4  # is_root, is_leaf, is_branch_point, is_chain


def node_features(tree: Tree) -> np.ndarray:
    """One-hot topological role of every node (root, leaf, branch point, chain point), ``[N, 4]``.

    All geometry reaches the encoder through invariant path features.

    Args:
        tree: The tree.

    Returns:
        float32 features.
    """
    nch = tree.children_count()
    x = np.zeros((tree.num_nodes, NODE_FEATURES), dtype=np.float32)
    x[0, 0] = 1
    x[nch == 0, 1] = 1
    x[nch >= 2, 2] = 1
    x[nch == 1, 3] = 1
    return x


def to_data(tree: Tree, paths: np.ndarray | None = None):
    """Convert a tree to a :class:`TreeData` with x, pos, parent, depth, undirected edge_index, paths, y.

    Args:
        tree: The tree (2-D positions are padded to 3-D).
        paths: Its ``[4, P]`` chains, or None to enumerate them.

    Returns:
        The TreeData.
    """
    import torch

    from tracegraph.trees.paths import enumerate_paths

    child = np.arange(1, tree.num_nodes)
    und = np.stack([np.concatenate([child, tree.parent[1:]]), np.concatenate([tree.parent[1:], child])])
    ei = torch.from_numpy(und.astype(np.int64))
    if paths is None:
        paths = enumerate_paths(ei, tree.num_nodes).numpy()
    pos = tree.pos if tree.pos.shape[1] == 3 else np.pad(tree.pos, ((0, 0), (0, 3 - tree.pos.shape[1])))
    return TreeData(
        x=torch.from_numpy(node_features(tree)),
        pos=torch.from_numpy(pos.astype(np.float32)),
        parent=torch.from_numpy(tree.parent.astype(np.int64)),
        depth=torch.from_numpy(tree.depth()),
        edge_index=ei,
        paths=torch.from_numpy(np.asarray(paths, dtype=np.int64)).reshape(4, -1),
        y=torch.tensor([tree.label], dtype=torch.long),
        num_nodes=tree.num_nodes,
    )


class TreeData(Data):
    """Data whose ``parent`` and ``paths`` are node indices, shifted when batched."""

    def __inc__(self, key, value, *args, **kwargs):
        if key in ("parent", "paths"):
            return self.num_nodes
        return super().__inc__(key, value, *args, **kwargs)

    def __cat_dim__(self, key, value, *args, **kwargs):
        if key == "paths":
            return 1
        return super().__cat_dim__(key, value, *args, **kwargs)
