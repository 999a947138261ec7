"""On-disk cache of 3rd-order paths: one .npz per tree set, keyed by a content hash, no pickle.

Paths depend only on the tree topology, so the key hashes every tree's parent array (and the
format version). Arrays are concatenated with offsets, so a whole data set is one file that
``np.load(allow_pickle=False)`` can read back — nothing in it can execute code.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from tracegraph.errors import DataError
from tracegraph.runtime.checkpoints import atomic_path
from tracegraph.trees.data import Tree, to_data
from tracegraph.trees.paths import enumerate_paths

FORMAT = b"tracegraph-trees-paths-v1"


def topology_key(trees: list[Tree]) -> str:
    """A short hash of the trees' shapes (node counts and parents), naming their path cache.

    Args:
        trees: The trees.

    Returns:
        24 hexadecimal digits.
    """
    h = hashlib.sha256(FORMAT)
    for t in trees:
        h.update(np.int64(t.num_nodes).tobytes())
        h.update(np.ascontiguousarray(t.parent, dtype=np.int64).tobytes())
    return h.hexdigest()[:24]


def all_tree_paths(trees: list[Tree]) -> list[np.ndarray]:
    """The chains of every tree, enumerated in one call on their disjoint union (then split).

    One vectorised call over 300k nodes is about 100 times faster than 1,000 calls over 300 nodes,
    where per-call overhead dominates.

    Args:
        trees: The trees.

    Returns:
        Per tree, its chains as a ``[4, P]`` array of node indices.
    """
    import torch

    if not trees:
        return []
    sizes = np.array([t.num_nodes for t in trees], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    child = np.concatenate([np.arange(1, t.num_nodes) + o for t, o in zip(trees, offsets)])
    par = np.concatenate([t.parent[1:] + o for t, o in zip(trees, offsets)])
    ei = torch.from_numpy(np.stack([child, par]).astype(np.int64))
    paths = enumerate_paths(ei, int(offsets[-1])).numpy()
    owner = np.searchsorted(offsets, paths[0], side="right") - 1
    order = np.argsort(owner, kind="stable")
    paths, owner = paths[:, order], owner[order]
    cuts = np.searchsorted(owner, np.arange(len(trees) + 1))
    return [paths[:, cuts[k] : cuts[k + 1]] - offsets[k] for k in range(len(trees))]


def cached_paths(trees: list[Tree], cache_dir: str | Path | None) -> tuple[list[np.ndarray], bool]:
    """The chains of every tree, read from ``cache_dir`` when cached there (and written there if not).

    Args:
        trees: The trees.
        cache_dir: The cache directory, or None for no cache.

    Returns:
        Per tree its ``[4, P]`` chains, and whether they came from the cache.

    Raises:
        DataError: If the cache file is unreadable or does not fit the trees.
    """
    if cache_dir is None:
        return all_tree_paths(trees), False
    path = Path(cache_dir) / f"paths-{topology_key(trees)}.npz"
    if path.exists():
        try:
            with np.load(path, allow_pickle=False) as z:
                flat, offsets = z["paths"], z["offsets"]
        except Exception as e:  # noqa: BLE001 - a corrupt cache file is the user's to delete
            raise DataError(f"unreadable path cache ({e}); delete it to rebuild", path) from None
        if len(offsets) != len(trees) + 1:
            raise DataError("path cache does not match the trees; delete it to rebuild", path)
        return [flat[:, offsets[k] : offsets[k + 1]] for k in range(len(trees))], True
    per = all_tree_paths(trees)
    offsets = np.zeros(len(per) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([p.shape[1] for p in per])
    flat = np.concatenate(per, axis=1) if per else np.zeros((4, 0), dtype=np.int64)
    with atomic_path(path, suffix=".npz") as tmp:
        with open(tmp, "wb") as f:  # a file object stops numpy from appending another ".npz"
            np.savez_compressed(f, paths=flat, offsets=offsets)
    return per, False


def build_dataset(trees: list[Tree], cache_dir: str | Path | None = None) -> list:
    """Convert trees to :class:`~tracegraph.trees.data.TreeData`, with chains computed once and cached.

    Args:
        trees: The trees.
        cache_dir: The path cache directory, or None for no cache.

    Returns:
        One TreeData per tree.
    """
    paths, _ = cached_paths(trees, cache_dir)
    return [to_data(t, p) for t, p in zip(trees, paths)]
