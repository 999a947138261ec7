"""What pretraining, fine-tuning and probing all need: the data config, tree loading, loaders.

It lives below ``train.py`` and ``probe.py`` so that both import it and neither imports the
other for data (issue #16: the two modules used to import each other).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from tracegraph.trees.cache import build_dataset
from tracegraph.trees.data import neuron_subtrees
from tracegraph.trees.synthetic import synthetic_trees


@dataclass
class DataConfig:
    """Where the trees come from and how they are read; each field is the CLI option of the same name.

    Attributes:
        swc_dir: Neurons: subtrees sampled from every ``*.swc`` here.
        num_trees: SWC: subtrees in total; synthetic: trees per class.
        max_nodes: Most nodes per tree.
        keep_every: SWC thinning: keep every k-th point along unbranched segments.
        seed: Seed of the sampling or generation.
        cache_dir: Path and tree cache directory, or None for no cache.
        trees_dir: The user's own directory of trees (SWC, vessel images, graph files); wins over
            ``swc_dir``.
        labels: CSV ``name,label[,split]`` (fine-tuning and probing only).
        node_spacing: Arc-length resampling of ``trees_dir`` trees (0: only the ``max_nodes`` cap).
        trees_per_image: Vessel images: the largest components, one tree each.
        image_root: Vessel images: ``"widest"`` point of a component or ``"disc"`` (optic disc).
    """

    swc_dir: str | None = None  # neurons: subtrees sampled from every *.swc here
    num_trees: int = 200  # SWC: subtrees in total; synthetic: trees per class
    max_nodes: int = 300
    keep_every: int = 4  # SWC thinning: keep every k-th point along unbranched segments
    seed: int = 0
    cache_dir: str | None = None
    # the user's own directory of trees (SWC, vessel images, graph files); wins over swc_dir
    trees_dir: str | None = None
    labels: str | None = None  # CSV name,label[,split] (fine-tuning and probing only)
    node_spacing: float = 0.0  # arc-length resampling of trees_dir trees (0: only the max_nodes cap)
    trees_per_image: int = 1  # vessel images: the largest components, one tree each
    image_root: str = "widest"  # vessel images: "widest" point of a component or "disc" (optic disc)


def load_trees(dc: DataConfig):
    """The unlabelled training set a config describes, as TreeData (chains cached).

    Without ``trees_dir`` or ``swc_dir``, synthetic trees are generated.

    Args:
        dc: The data config.

    Returns:
        The TreeData list (or dataset, for ``trees_dir``).

    Raises:
        DataError: If a tree file is missing or malformed.
    """
    if dc.trees_dir:
        from tracegraph.trees.labelled import load_dataset

        return load_dataset(dc.trees_dir, labels=None, **tree_dir_options(dc))
    if dc.swc_dir:
        trees = neuron_subtrees(dc.swc_dir, dc.num_trees, dc.max_nodes, dc.keep_every, dc.seed)
    else:
        trees = synthetic_trees(dc.num_trees, dc.seed, max_nodes=dc.max_nodes)
    return build_dataset(trees, dc.cache_dir)


def tree_dir_options(dc: DataConfig) -> dict:
    """The keyword arguments of ``load_dataset`` that a config fixes.

    Args:
        dc: The data config.

    Returns:
        ``node_spacing``, ``max_nodes``, ``trees_per_image``, ``image_root`` and ``cache_dir``.
    """
    return dict(
        node_spacing=dc.node_spacing,
        max_nodes=dc.max_nodes,
        trees_per_image=dc.trees_per_image,
        image_root=dc.image_root,
        cache_dir=dc.cache_dir,
    )


def make_loader(data, batch_size, shuffle, seed=0):
    """A PyTorch Geometric data loader, shuffling with its own seeded generator.

    Args:
        data: The TreeData items.
        batch_size: Trees per batch.
        shuffle: Shuffle each epoch.
        seed: Seed of the shuffling.

    Returns:
        The loader.
    """
    from torch_geometric.loader import DataLoader

    g = torch.Generator().manual_seed(seed)
    return DataLoader(data, batch_size=batch_size, shuffle=shuffle, generator=g if shuffle else None)


def labelled_split(dc: DataConfig, test_fraction: float = 0.3):
    """Synthetic labelled trees, split into train and test in seed-shuffled order.

    Args:
        dc: The data config (``num_trees``, ``max_nodes``, ``seed``, ``cache_dir``).
        test_fraction: Share of trees for testing.

    Returns:
        ``(train, test)`` lists of TreeData.
    """
    data = load_trees(DataConfig(None, dc.num_trees, dc.max_nodes, dc.keep_every, dc.seed, dc.cache_dir))
    rng = np.random.default_rng(dc.seed + 1)
    idx = rng.permutation(len(data))
    n_test = int(round(len(data) * test_fraction))
    return [data[i] for i in idx[n_test:]], [data[i] for i in idx[:n_test]]
