"""Synthetic geometric trees of two classes that differ only in branching statistics (the demo's labels).

The trees are :class:`tracegraph.trees.data.Tree` objects, as read from SWC files.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from tracegraph.trees.data import Tree, _topological


# Two "phenotypes" that differ only in branching statistics, as healthy vs diseased vessels
# do: the diseased class has shorter, more tortuous branches that split at wider angles.
CLASS_PARAMS = [
    dict(branch_len=(7.0, 2.0), angle_deg=(40.0, 12.0), tortuosity=0.15, p_branch=0.9),
    dict(branch_len=(7.0, 2.0), angle_deg=(55.0, 12.0), tortuosity=0.15, p_branch=0.9),
]


def _orthonormal(d: np.ndarray, rng) -> np.ndarray:
    v = rng.normal(size=3)
    v -= v.dot(d) * d
    return v / np.linalg.norm(v)


def synthetic_tree(
    label: int,
    rng: np.random.Generator,
    max_nodes: int = 300,
    step: float = 1.0,
    max_depth: int = 9,
    params: list[dict] | None = None,
) -> Tree:
    """Grow a 3-D tree branch by branch (breadth first) until ``max_nodes`` points.

    Each branch is a chain of points ``step`` apart whose heading wanders by ``tortuosity`` radians
    per step; at its end it splits in two with a branching angle drawn per class, rotated about the
    parent heading by a random twist (so no handedness is built in).

    Args:
        label: The class, an index into ``params``.
        rng: The random generator.
        max_nodes: Points to grow.
        step: Distance between consecutive points.
        max_depth: Most branching generations.
        params: Per class, its growth parameters; None for the built-in two classes.

    Returns:
        The tree, labelled ``label``.
    """
    prm = (params or CLASS_PARAMS)[label]
    pos = [np.zeros(3)]
    parent = [0]
    q = deque([(0, np.array([0.0, 0.0, 1.0]), 0)])  # (start node, heading, branching depth)
    while q and len(pos) < max_nodes:
        start, heading, depth = q.popleft()
        length = max(2.0, rng.normal(*prm["branch_len"]))
        cur, h = start, heading
        for _ in range(int(round(length / step))):
            if len(pos) >= max_nodes:
                break
            h = h + prm["tortuosity"] * rng.normal(size=3)
            h /= np.linalg.norm(h)
            pos.append(pos[cur] + step * h)
            parent.append(cur)
            cur = len(pos) - 1
        if depth + 1 >= max_depth or rng.random() > prm["p_branch"]:
            continue
        half = np.deg2rad(max(5.0, rng.normal(*prm["angle_deg"]))) / 2
        u = _orthonormal(h, rng)
        # asymmetry a: the children leave the parent axis at half·(1+a) and half·(1−a); the
        # angle between the siblings stays 2·half whatever a is
        a = prm.get("asymmetry", 0.0)
        for sgn in (1.0, -1.0):
            t = half * (1 + sgn * a)
            q.append((cur, np.cos(t) * h + sgn * np.sin(t) * u, depth + 1))
    parent_arr = np.asarray(parent, dtype=np.int64)
    parent_arr[0] = -1
    return _topological(parent_arr, 0, np.asarray(pos), label=label, name=f"synthetic-{label}")[0]


def synthetic_trees(n_per_class: int, seed: int, max_nodes: int = 300, num_classes: int = 2, **kw) -> list[Tree]:
    """``n_per_class`` synthetic trees of each class, classes interleaved.

    Args:
        n_per_class: Trees per class.
        seed: The random seed.
        max_nodes: Points per tree.
        num_classes: Number of classes.
        **kw: Further arguments of :func:`synthetic_tree`.

    Returns:
        The trees.
    """
    rng = np.random.default_rng(seed)
    out = [synthetic_tree(c, rng, max_nodes=max_nodes, **kw) for _ in range(n_per_class) for c in range(num_classes)]
    return out
