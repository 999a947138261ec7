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
    """Skeletonise a binary mask into a pixel graph.

    Args:
        mask: A 2-D or 3-D binary image.

    Returns:
        Skeleton pixel coordinates ``[N, D]`` and undirected neighbour pairs ``[E, 2]``.

    Raises:
        DataError: If the image is not 2-D or 3-D.
    """
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


def _components(coords: np.ndarray, edges: np.ndarray) -> list[np.ndarray]:
    """Node indices of each connected component of the skeleton graph, largest first."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(coords)
    a = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    _, comp = connected_components(a, directed=False)
    sizes = np.bincount(comp)
    order = np.argsort(-sizes, kind="stable")
    by_comp = np.argsort(comp, kind="stable")
    cuts = np.concatenate([[0], np.cumsum(sizes)])
    return [by_comp[cuts[c] : cuts[c + 1]] for c in order]


def _component_tree(coords: np.ndarray, edges: np.ndarray, members: np.ndarray, root_pos) -> Tree:
    """MST of one component, rooted at its pixel nearest ``root_pos``."""
    remap = -np.ones(len(coords), dtype=np.int64)
    remap[members] = np.arange(len(members))
    e = remap[edges]
    e = e[(e >= 0).all(1)]
    sub = coords[members]
    r = int(np.argmin(np.linalg.norm(sub - np.asarray(root_pos, float), axis=1)))
    return tree_from_graph(e, sub, root=r, method="mst")


def tree_from_image(mask: np.ndarray, root=None, keep_every: int = 3) -> Tree:
    """The rooted tree of the largest connected skeleton component, thinned.

    Args:
        mask: A binary image.
        root: The root's pixel position; None for the component's first pixel.
        keep_every: Thinning factor (see :func:`~tracegraph.trees.data.simplify`).

    Returns:
        The tree, in pixel units.
    """
    coords, edges = skeleton_graph(mask)
    big = _components(coords, edges)[0]
    root_pos = coords[big[0]] if root is None else root
    return simplify(_component_tree(coords, edges, big, root_pos), keep_every)


def optic_disc_position(mask: np.ndarray, width: np.ndarray | None = None) -> np.ndarray:
    """Where the thickest vessels concentrate: the peak of vessel width averaged over a window.

    Retinal vessels are widest where they leave the optic disc, so the window (1/8 of the image's
    shorter side, about a disc diameter) with the most vessel width is the disc. A heuristic for
    binary masks, which carry no brightness to find the disc by.

    Args:
        mask: A binary vessel mask.
        width: Its distance transform (vessel half-width per pixel), or None to compute it.

    Returns:
        The disc's ``(row, col)`` position.
    """
    from scipy.ndimage import distance_transform_edt, uniform_filter

    mask = np.asarray(mask).astype(bool)
    width = distance_transform_edt(mask) if width is None else width
    size = max(3, min(mask.shape) // 8)
    density = uniform_filter(width * width, size=size)  # squared: thick trunks outweigh many capillaries
    return np.asarray(np.unravel_index(int(np.argmax(density)), mask.shape), dtype=np.float64)


def trees_from_mask(mask: np.ndarray, max_trees: int = 1, root: str = "widest", min_nodes: int = 10) -> list[Tree]:
    """One tree per connected vessel component (the ``max_trees`` largest), pixel units.

    ``root``: "widest" roots each component at its widest point (largest distance to the
    background); "disc" roots it at its pixel nearest the optic disc (:func:`optic_disc_position`).
    Components with fewer than ``min_nodes`` skeleton pixels (specks, noise) are skipped. Each
    tree's ``meta`` records its component rank, pixel count and root rule.

    Args:
        mask: A binary vessel mask.
        max_trees: Most trees, from the largest component down.
        root: ``"widest"`` or ``"disc"``.
        min_nodes: The least skeleton pixels a component needs.

    Returns:
        The trees, largest component first.

    Raises:
        DataError: If ``root`` is unknown, or no component is large enough.
    """
    from scipy.ndimage import distance_transform_edt

    if root not in ("widest", "disc"):
        raise DataError(f"image root must be 'widest' or 'disc', not {root!r}")
    mask = np.asarray(mask).astype(bool)
    coords, edges = skeleton_graph(mask)
    width = distance_transform_edt(mask)
    disc = optic_disc_position(mask, width) if root == "disc" else None
    out = []
    for rank, members in enumerate(_components(coords, edges)[:max_trees]):
        if len(members) < min_nodes:
            break
        if disc is None:
            w = width[tuple(coords[members].astype(np.int64).T)]
            root_pos = coords[members[int(np.argmax(w))]]
        else:
            root_pos = disc
        t = _component_tree(coords, edges, members, root_pos)
        t.meta.update(component=rank, skeleton_pixels=int(len(members)), root=root)
        out.append(t)
    if not out:
        raise DataError(f"no vessel component has {min_nodes} or more skeleton pixels")
    return out


def read_mask(path) -> np.ndarray:
    """Read a binary vessel mask from an image file: foreground is brighter than half the maximum.

    Args:
        path: The image file.

    Returns:
        The 2-D boolean mask.

    Raises:
        DataError: If the file cannot be decoded, is not a 2-D image, or is blank.
    """
    from skimage.io import imread

    try:
        img = np.asarray(imread(str(path)))
    except Exception as e:  # noqa: BLE001 - any decoder failure is the file's problem
        raise DataError(f"cannot read image ({type(e).__name__}: {e})", path) from None
    if img.ndim == 3 and img.shape[-1] in (3, 4):  # colour or alpha: vessels are bright in any channel
        img = img[..., :3].max(axis=-1)
    if img.ndim != 2:
        raise DataError(f"expected a 2-D (grey or colour) image, got shape {img.shape}", path)
    img = img.astype(np.float64)
    top = img.max()
    if top <= img.min():
        raise DataError("the image is blank (one grey value): no vessels", path)
    return img > (img.min() + top) / 2


def draw_tree(tree: Tree, shape: tuple[int, int], radius: int = 1) -> np.ndarray:
    """Rasterise a 2-D tree (positions in pixels) as a binary image with lines ``radius`` thick.

    Args:
        tree: The tree.
        shape: The image's ``(rows, cols)``.
        radius: Line half-thickness in pixels.

    Returns:
        The boolean image.
    """
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


def planar_tree(
    rng: np.random.Generator, size: int = 128, depth: int = 4, length: float = 30.0, angle_deg: float = 60.0
) -> Tree:
    """A random 2-D binary tree in pixel units (for drawing), growing upwards from the bottom centre.

    Branches are straight; each generation is 60 to 80 % as long as its parent and splits by about
    ``angle_deg``.

    Args:
        rng: The random generator.
        size: The image size the tree is placed in.
        depth: Branching generations.
        length: The trunk's length in pixels.
        angle_deg: The angle between sibling branches, in degrees.

    Returns:
        The tree, positions as ``(row, col)``.
    """
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


def retina_like_mask(
    shape: tuple[int, int] = (2336, 3504),
    rng: np.random.Generator | None = None,
    arcades: int = 4,
    depth: int = 7,
    width: float = 11.0,
) -> np.ndarray:
    """A synthetic binary vessel mask at fundus/OCTA scale (tests and benchmarks only).

    Vessel trees leave an "optic disc" a third of the way across, wiggle, branch in two and thin
    by 0.75 per generation, like retinal arcades. Segments are drawn as filled quadrilaterals
    plus round joints, so no whole-image morphology is needed at 8 megapixels.

    Args:
        shape: The image's ``(rows, cols)``.
        rng: The random generator; None for a fixed seed 0.
        arcades: Vessel trees leaving the disc.
        depth: Branching generations per tree.
        width: The trunks' width in pixels.

    Returns:
        The boolean mask.
    """
    from skimage.draw import disk as draw_disk
    from skimage.draw import polygon

    rng = rng or np.random.default_rng(0)
    h, w = shape
    img = np.zeros(shape, dtype=bool)
    disc = np.array([h / 2, w * 0.3])

    def stroke(a, b, r):
        d = b - a
        n = np.array([-d[1], d[0]]) / (np.linalg.norm(d) + 1e-9) * r
        corners = np.stack([a + n, b + n, b - n, a - n])
        img[polygon(corners[:, 0], corners[:, 1], shape)] = True
        img[draw_disk(tuple(b), max(r, 1.0), shape=shape)] = True

    stack = []
    for k in range(arcades):
        ang = 2 * np.pi * (k + 0.5) / arcades + rng.normal(0, 0.2)
        stack.append((disc, np.array([np.sin(ang), np.cos(ang)]), h / 4, width / 2, 0))
    while stack:
        start, head, length, r, gen = stack.pop()
        p = start
        for _ in range(6):  # a wiggling branch: six pieces with a drifting heading
            head = head + rng.normal(0, 0.15, 2)
            head /= np.linalg.norm(head)
            q = p + head * length / 6
            stroke(p, q, r)
            p = q
        if gen + 1 < depth and 0 <= p[0] < h and 0 <= p[1] < w:
            for s in (-1, 1):
                a = s * np.deg2rad(rng.normal(35, 8))
                rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
                stack.append((p, rot @ head, length * rng.uniform(0.6, 0.8), max(r * 0.75, 1.0), gen + 1))
    return img
