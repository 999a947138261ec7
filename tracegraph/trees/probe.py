"""Linear probing of frozen embeddings, and the pretrained-vs-random probe study.

The probe is a multinomial logistic regression (L-BFGS, L2) on standardised graph embeddings:
the same probe, data and architecture for a pretrained and a randomly initialised encoder, so
the difference in accuracy measures what pretraining put into the embeddings.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from tracegraph.runtime.seeding import seed_everything
from tracegraph.trees.inputs import DataConfig, labelled_split, make_loader
from tracegraph.trees.sgmp import SGMPEncoder
from tracegraph.trees.train import TrainConfig, load_encoder, make_encoder, pretrain


@torch.no_grad()
def embed(encoder: SGMPEncoder, data, batch_size: int = 64, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Graph embeddings of every item from a frozen encoder, with their labels.

    Args:
        encoder: The encoder (put in eval mode and moved to ``device``).
        data: The TreeData items.
        batch_size: Trees per batch.
        device: Where to compute.

    Returns:
        Embeddings ``[n, H]`` (float32, CPU) and labels ``[n]``.
    """
    encoder.eval().to(device)
    xs, ys = [], []
    for b in make_loader(data, batch_size, False):
        b = b.to(device)
        xs.append(encoder.encode(b)[1].float().cpu())
        ys.append(b.y.cpu())
    return torch.cat(xs), torch.cat(ys)


def linear_probe(xtr, ytr, xte, yte, l2: float = 1e-3, iters: int = 300) -> float:
    """Fit a linear probe on frozen training embeddings and return its test accuracy.

    Args:
        xtr: Training embeddings ``[n, H]``.
        ytr: Training labels ``[n]``.
        xte: Test embeddings ``[m, H]``.
        yte: Test labels ``[m]``.
        l2: L2 penalty.
        iters: L-BFGS iterations.

    Returns:
        Accuracy on the test embeddings.
    """
    c = int(max(ytr.max(), yte.max())) + 1
    return float((linear_probe_predict(xtr, ytr, xte, c, l2, iters) == yte).float().mean())


def linear_probe_predict(xtr, ytr, xte, num_classes: int, l2: float = 1e-3, iters: int = 300) -> torch.Tensor:
    """Fit multinomial logistic regression (L-BFGS, L2) on standardised embeddings; predict the test classes.

    Features constant in training are zeroed everywhere.

    Args:
        xtr: Training embeddings ``[n, H]``.
        ytr: Training labels ``[n]``.
        xte: Test embeddings ``[m, H]``.
        num_classes: Number of classes.
        l2: L2 penalty.
        iters: L-BFGS iterations.

    Returns:
        ``[m]`` predicted classes.
    """
    mu, sd = xtr.mean(0), xtr.std(0)
    # a feature constant in training says nothing the probe could fit: zero it everywhere, or its
    # untrained weight times (test value - mu) / tiny spread would decide the test predictions
    informative = sd > 1e-6
    scale = torch.where(informative, sd, torch.ones_like(sd))
    xtr, xte = (xtr - mu) / scale * informative, (xte - mu) / scale * informative
    lin = nn.Linear(xtr.shape[1], num_classes).double()
    xtr, xte = xtr.double(), xte.double()
    opt = torch.optim.LBFGS(lin.parameters(), max_iter=iters, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(lin(xtr), ytr) + l2 * lin.weight.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return lin(xte).argmax(-1)


def probe(encoder: SGMPEncoder, train, test, device="cpu") -> float:
    """Linear-probe accuracy of an encoder's embeddings: fit on ``train``, score on ``test``.

    Args:
        encoder: The frozen encoder.
        train: Training TreeData items.
        test: Test TreeData items.
        device: Where to embed.

    Returns:
        Test accuracy.
    """
    xtr, ytr = embed(encoder, train, device=device)
    xte, yte = embed(encoder, test, device=device)
    return linear_probe(xtr, ytr, xte, yte)


def probe_study(
    seeds,
    output_dir,
    pretrain_trees: int = 100,
    labelled_trees: int = 150,
    max_nodes: int = 150,
    epochs: int = 6,
    batch_size: int = 16,
    encoder: dict | None = None,
    cache_dir: str | None = None,
    **train_kw,
) -> dict:
    """Per seed: pretrain on unlabelled synthetic trees, then probe pretrained against random initialisation.

    Seeds change the pretraining pool, the labelled trees, the split and both initialisations; the
    random encoder shares the pretrained one's configuration (cutoff included).

    Args:
        seeds: The seeds.
        output_dir: Where the pretraining runs go.
        pretrain_trees: Synthetic trees per class for pretraining.
        labelled_trees: Labelled synthetic trees per class.
        max_nodes: Nodes per tree.
        epochs: Pretraining epochs.
        batch_size: Trees per batch.
        encoder: Encoder settings; None for the defaults.
        cache_dir: Where the trees' 3rd-order paths are cached; None for no cache.
        **train_kw: Further :class:`~tracegraph.trees.train.TrainConfig` fields.

    Returns:
        Per-seed accuracies and their means and standard deviations, and the gain in points.
    """
    rows = []
    for seed in seeds:
        dc = DataConfig(None, pretrain_trees, max_nodes, seed=1000 + seed, cache_dir=cache_dir)
        cfg = TrainConfig(
            data=dc, encoder=dict(encoder or {}), epochs=epochs, batch_size=batch_size, seed=seed, **train_kw
        )
        out = Path(output_dir) / f"seed-{seed}"
        pretrain(cfg, out)
        train, test = labelled_split(DataConfig(None, labelled_trees, max_nodes, seed=2000 + seed, cache_dir=cache_dir))
        acc_pre = probe(load_encoder(out / "encoder.pt"), train, test)
        seed_everything(seed)
        acc_rand = probe(make_encoder(cfg.encoder), train, test)
        rows.append({"seed": seed, "pretrained": acc_pre, "random": acc_rand})
    pre = np.array([r["pretrained"] for r in rows])
    rnd = np.array([r["random"] for r in rows])
    return {
        "seeds": rows,
        "pretrained_mean": float(pre.mean()),
        "pretrained_std": float(pre.std()),
        "random_mean": float(rnd.mean()),
        "random_std": float(rnd.std()),
        "gain_points_mean": float(100 * (pre - rnd).mean()),
        "gain_points_std": float(100 * (pre - rnd).std()),
    }


def probe_synthetic(
    encoder_path, seeds, labelled_trees: int = 150, max_nodes: int = 150, compare_random: bool = True, cache_dir=None
) -> dict:
    """Per seed: probe a pretrained encoder (and, if asked, its architecture randomly initialised) on synthetic classes.

    Args:
        encoder_path: ``encoder.pt`` from pretraining.
        seeds: The seeds: each draws its own labelled trees and split (seed 2000 + s) and random initialisation.
        labelled_trees: Labelled synthetic trees per class.
        max_nodes: Nodes per tree.
        compare_random: Also probe the randomly initialised encoder.
        cache_dir: Where the trees' 3rd-order paths are cached; None for no cache.

    Returns:
        Per-seed accuracies, and per arm (``pretrained``, ``random``) their mean and standard deviation.
    """
    rows = []
    for s in seeds:
        train, test = labelled_split(DataConfig(None, labelled_trees, max_nodes, seed=2000 + s, cache_dir=cache_dir))
        enc = load_encoder(encoder_path)
        row = {"seed": s, "pretrained": probe(enc, train, test)}
        if compare_random:
            seed_everything(s)
            row["random"] = probe(make_encoder(enc.cfg.to_dict()), train, test)
        rows.append(row)
    res: dict = {"seeds": rows}
    for k in ("pretrained", "random"):
        vals = np.array([r[k] for r in rows if k in r])
        if len(vals):
            res[f"{k}_mean"], res[f"{k}_std"] = float(vals.mean()), float(vals.std())
    return res
