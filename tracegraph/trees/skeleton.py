"""Binary vessel image -> rooted tree, by skeletonisation.

The skeleton (scikit-image) is one pixel wide; its pixels become nodes joined to their 8- (or,
in 3-D, 26-) neighbours. That pixel graph has tiny cycles at junctions (diagonal + straight
neighbours), so the tree is its Euclidean minimum spanning tree, rooted at the skeleton pixel
nearest the requested root, and finally thinned like an SWC neuron.
"""

from __future__ import annotations

import itertools

import numpy as np

from tracegraph.errors import DataError
from tracegraph.trees.data import Tree, simplify, tree_from_graph


def skeleton_graph(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Skeleton pixel coordinates (N, D) and undirected neighbour pairs (E, 2)."""
    from skimage.morphology import skeletonize

    mask = np.asarray(mask).astype(bool)
    if mask.ndim not in (2, 3):
        raise DataError(f"image must be 2-D or 3-D, got {mask.ndim}-D")
    skel = skeletonize(mask)
    coords = np.argwhere(skel)
    if len(coords) == 0:
        raise DataError("the image has no foreground to skeletonise")
    index = -np.ones(skel.shape, dtype=np.int64)
    index[tuple(coords.T)] = np.arange(len(coords))
    pairs = []
    # half of the neighbourhood offsets: each undirected pair is found once
    for off in itertools.product((-1, 0, 1), repeat=mask.ndim):
        if off <= (0,) * mask.ndim:
            continue
        nb = coords + np.asarray(off)
        inside = np.all((nb >= 0) & (nb < np.asarray(skel.shape)), axis=1)
        j = np.full(len(coords), -1)
        j[inside] = index[tuple(nb[inside].T)]
        ok = j >= 0
        pairs.append(np.stack([np.flatnonzero(ok), j[ok]], 1))
    return coords.astype(np.float64), np.concatenate(pairs)


def tree_from_image(mask: np.ndarray, root=None, keep_every: int = 3) -> Tree:
    """Rooted tree of the largest connected skeleton component; ``root`` is a pixel position."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    coords, edges = skeleton_graph(mask)
    n = len(coords)
    a = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    _, comp = connected_components(a, directed=False)
    big = np.flatnonzero(comp == np.bincount(comp).argmax())
    remap = -np.ones(n, dtype=np.int64)
    remap[big] = np.arange(len(big))
    e = remap[edges]
    e = e[(e >= 0).all(1)]
    coords = coords[big]
    r = 0 if root is None else int(np.argmin(np.linalg.norm(coords - np.asarray(root, float), axis=1)))
    return simplify(tree_from_graph(e, coords, root=r, method="mst"), keep_every)


def draw_tree(tree: Tree, shape: tuple[int, int], radius: int = 1) -> np.ndarray:
    """Rasterise a 2-D tree (positions in pixels) as a binary image with lines ``radius`` thick."""
    from scipy.ndimage import binary_dilation
    from skimage.draw import line
    from skimage.morphology import disk

    img = np.zeros(shape, dtype=bool)
    p = np.rint(tree.pos[:, :2]).astype(int)
    for c in range(1, tree.num_nodes):
        rr, cc = line(*p[tree.parent[c]], *p[c])
        ok = (rr >= 0) & (rr < shape[0]) & (cc >= 0) & (cc < shape[1])
        img[rr[ok], cc[ok]] = True
    return binary_dilation(img, structure=disk(radius)) if radius > 0 else img


def planar_tree(rng: np.random.Generator, size: int = 128, depth: int = 4, length: float = 30.0,
                angle_deg: float = 60.0) -> Tree:
    """A 2-D binary tree in pixel units (for drawing): straight branches that halve in length."""
    pos, parent = [np.array([size - 4.0, size / 2])], [-1]  # (row, col): grows upwards
    stack = [(0, np.array([-1.0, 0.0]), length, 0)]
    while stack:
        start, h, ln, d = stack.pop()
        end = pos[start] + ln * h
        pos.append(end), parent.append(start)
        k = len(pos) - 1
        if d + 1 < depth:
            for s in (-1, 1):
                a = np.deg2rad(s * angle_deg / 2 + rng.normal(0, 5))
                rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
                stack.append((k, rot @ h, ln * rng.uniform(0.6, 0.8), d + 1))
    from tracegraph.trees.data import _topological

    return _topological(np.asarray(parent), 0, np.asarray(pos))[0]
