"""What pretraining, fine-tuning and probing all need: the data config, tree loading, loaders.

It lives below ``train.py`` and ``probe.py`` so that both import it and neither imports the
other for data (issue #16: the two modules used to import each other).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from tracegraph.trees.cache import build_dataset
from tracegraph.trees.data import neuron_subtrees, synthetic_trees


@dataclass
class DataConfig:
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
    """The unlabelled training set a config describes, as TreeData (paths cached)."""
    if dc.trees_dir:
        from tracegraph.trees.labelled import load_dataset

        return load_dataset(dc.trees_dir, labels=None, **tree_dir_options(dc))
    if dc.swc_dir:
        trees = neuron_subtrees(dc.swc_dir, dc.num_trees, dc.max_nodes, dc.keep_every, dc.seed)
    else:
        trees = synthetic_trees(dc.num_trees, dc.seed, max_nodes=dc.max_nodes)
    return build_dataset(trees, dc.cache_dir)


def tree_dir_options(dc: DataConfig) -> dict:
    """The keyword arguments of ``load_dataset`` that a config fixes."""
    return dict(node_spacing=dc.node_spacing, max_nodes=dc.max_nodes, trees_per_image=dc.trees_per_image,
                image_root=dc.image_root, cache_dir=dc.cache_dir)


def make_loader(data, batch_size, shuffle, seed=0):
    from torch_geometric.loader import DataLoader

    g = torch.Generator().manual_seed(seed)
    return DataLoader(data, batch_size=batch_size, shuffle=shuffle, generator=g if shuffle else None)


def labelled_split(dc: DataConfig, test_fraction: float = 0.3):
    """Synthetic labelled trees, split into (train, test), stratified by seed-shuffled order."""
    data = load_trees(DataConfig(None, dc.num_trees, dc.max_nodes, dc.keep_every, dc.seed, dc.cache_dir))
    rng = np.random.default_rng(dc.seed + 1)
    idx = rng.permutation(len(data))
    n_test = int(round(len(data) * test_fraction))
    return [data[i] for i in idx[n_test:]], [data[i] for i in idx[:n_test]]
