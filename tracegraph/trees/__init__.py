"""Geometric trees: SWC/graph/image -> rooted trees, 3rd-order paths, the SGMP encoder, GT-SSL.

data.py (reading, synthetic classes, PyG Data) · skeleton.py (images) · resample.py (arc length) ·
files.py + labelled.py (the user's tree directories and labels; ``load_dataset``) · splits.py ·
paths.py · cache.py · sgmp.py (encoder) · gtssl.py (objectives) · inputs.py (data config, loaders) ·
train.py (pretrain / finetune loops) · probe.py · labelled_runs.py + metrics.py (runs on user labels).
"""

__all__ = ["load_dataset"]


def __getattr__(name):
    # lazy: ``import tracegraph.trees.x`` should not pay for torch_geometric unless x needs it
    if name == "load_dataset":
        from tracegraph.trees.labelled import load_dataset

        return load_dataset
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
