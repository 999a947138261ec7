"""Fine-tuning and linear probing on the user's labelled trees, with folds and a random-init arm.

Both write into the output directory: ``split.csv`` (each file's side or fold, so the split can be
audited and reproduced), ``metrics.json`` (per arm: accuracy, balanced accuracy, macro-F1,
per-class report and confusion matrix, pooled over the folds' test sets, plus each fold's
figures) and ``confusion.png`` (``confusion-random.png`` for the random-init arm).
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import torch

from tracegraph.errors import TracegraphError
from tracegraph.runtime.checkpoints import atomic_write_json, atomic_write_text
from tracegraph.runtime.seeding import seed_everything
from tracegraph.trees.inputs import tree_dir_options
from tracegraph.trees.labelled import TreeDataset, load_dataset
from tracegraph.trees.metrics import classification_report, save_confusion_png

FOLD_KEYS = ("accuracy", "balanced_accuracy", "macro_f1")


def load_labelled(dc) -> TreeDataset:
    """The labelled dataset a data config names.

    Args:
        dc: The data config (``trees_dir``, ``labels`` and the reading options).

    Returns:
        The dataset.

    Raises:
        TracegraphError: If ``trees_dir`` or ``labels`` is missing.
        DataError: If a file is missing or malformed.
    """
    if not dc.trees_dir or not dc.labels:
        raise TracegraphError("give both --trees DIR and --labels FILE")
    return load_dataset(dc.trees_dir, dc.labels, **tree_dir_options(dc))


def write_split(out: Path, ds: TreeDataset, splits) -> None:
    """Write ``split.csv``: ``name,label,split`` (one split) or ``name,label,fold`` (k folds), one row per file.

    Args:
        out: The output directory.
        ds: The dataset.
        splits: ``(train_files, test_files)`` per fold.
    """
    labels = ds.file_labels()
    rows = ["name,label,fold" if len(splits) > 1 else "name,label,split"]
    for k, (_, test) in enumerate(splits):
        side = {n: "test" for n in test}
        for n in labels if len(splits) == 1 else test:
            rows.append(f"{n},{ds.classes[labels[n]]},{k if len(splits) > 1 else side.get(n, 'train')}")
    atomic_write_text(out / "split.csv", "\n".join(rows) + "\n")


def _summary(ds: TreeDataset, per_fold: list[tuple[np.ndarray, np.ndarray]]) -> dict:
    """Pooled report over every fold's test items, plus each fold's headline figures."""
    y_true = np.concatenate([t for t, _ in per_fold])
    y_pred = np.concatenate([p for _, p in per_fold])
    rep = classification_report(y_true, y_pred, ds.classes)
    if len(per_fold) > 1:
        folds = [{k: classification_report(t, p, ds.classes)[k] for k in FOLD_KEYS} for t, p in per_fold]
        rep["folds"] = folds
        for k in FOLD_KEYS:
            vals = np.array([f[k] for f in folds])
            rep[f"{k}_fold_mean"], rep[f"{k}_fold_std"] = float(vals.mean()), float(vals.std())
    return rep


def _finish(out: Path | None, ds: TreeDataset, splits, arms: dict[str, dict], task: str, seed: int) -> dict:
    res = {
        "task": task,
        "classes": ds.classes,
        "files": len(ds.file_labels()),
        "trees": len(ds),
        "split": f"{len(splits)} folds"
        if len(splits) > 1
        else ("from the labels file" if any(r.split for r in ds.rows.values()) else "stratified"),
        "seed": seed,
        "arms": arms,
    }
    if "pretrained" in arms and "random" in arms:
        res["gain_points"] = {k: 100 * (arms["pretrained"][k] - arms["random"][k]) for k in FOLD_KEYS}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_split(out, ds, splits)
        atomic_write_json(out / "metrics.json", res)
        for arm, rep in arms.items():
            save_confusion_png(
                rep,
                out / ("confusion-random.png" if arm == "random" else "confusion.png"),
                title=f"{task}, {arm} encoder\naccuracy {rep['accuracy']:.2f}, balanced {rep['balanced_accuracy']:.2f}",
            )
    return res


def finetune_on_labels(
    cfg,
    encoder_path,
    output_dir,
    folds: int = 0,
    test_fraction: float = 0.3,
    compare_random: bool = False,
    resume: bool = False,
    data: TreeDataset | None = None,
) -> dict:
    """Fine-tune per fold (and, optionally, a randomly initialised twin); metrics on each fold's held-out files.

    Args:
        cfg: The training config.
        encoder_path: The pretrained encoder, or None to start from a fresh one.
        output_dir: Where the runs and reports go.
        folds: Number of cross-validation folds; 0 for one split.
        test_fraction: Share of files held out when ``folds`` is 0.
        compare_random: Also fine-tune a randomly initialised encoder.
        resume: Continue interrupted folds.
        data: The dataset, or None to read ``cfg.data``.

    Returns:
        ``metrics.json``'s content: the classification report per arm and, with both arms, the
        gain in points.
    """
    from tracegraph.runtime.precision import resolve_device
    from tracegraph.trees.train import finetune, load_classifier, load_encoder, predict

    out = Path(output_dir)
    device = resolve_device(cfg.device)
    ds = data if data is not None else load_labelled(cfg.data)
    splits = ds.splits(folds, test_fraction, cfg.data.seed)
    arms = {"pretrained" if encoder_path else "fresh": encoder_path}
    if compare_random:
        if not encoder_path:
            raise TracegraphError("--compare-random needs --encoder (the pretrained encoder to compare with)")
        arms["random"] = None
    reports = {}
    for arm, enc in arms.items():
        arm_cfg = copy.deepcopy(cfg)
        if arm == "random":  # same architecture and cutoff as the pretrained encoder, fresh weights
            arm_cfg.encoder = load_encoder(encoder_path).cfg.to_dict()
        per_fold = []
        for k, (train_files, test_files) in enumerate(splits):
            run = out / ("random" if arm == "random" else "") / (f"fold-{k}" if len(splits) > 1 else "")
            train, test = ds.select(train_files), ds.select(test_files)
            # --resume continues the folds that started and starts the ones an interruption never reached
            finetune(
                copy.deepcopy(arm_cfg),
                enc,
                run,
                resume=resume and (run / "last.pt").exists(),
                data=(list(train), list(test)),
                num_classes=len(ds.classes),
            )
            y_pred = predict(load_classifier(run / "last.pt", device), test, device=device)
            per_fold.append((np.array([int(d.y) for d in test]), y_pred))
        reports[arm] = _summary(ds, per_fold)
    return _finish(out, ds, splits, reports, "finetune", cfg.data.seed)


def probe_on_labels(
    encoder_path,
    ds: TreeDataset,
    output_dir=None,
    folds: int = 0,
    test_fraction: float = 0.3,
    seed: int = 0,
    compare_random: bool = True,
    device="cpu",
) -> dict:
    """Linear probe of frozen embeddings per fold, for the pretrained and (optionally) a random encoder.

    Args:
        encoder_path: The pretrained encoder.
        ds: The labelled dataset.
        output_dir: Where the reports go, or None to write nothing.
        folds: Number of cross-validation folds; 0 for one split.
        test_fraction: Share of files held out when ``folds`` is 0.
        seed: Seed of the split and the random encoder.
        compare_random: Also probe a randomly initialised encoder.
        device: Where to embed.

    Returns:
        The classification report per encoder and, with both, the gain in points (also written as
        ``metrics.json`` when ``output_dir`` is given).
    """
    from tracegraph.trees.probe import embed, linear_probe_predict
    from tracegraph.trees.train import load_encoder, make_encoder

    splits = ds.splits(folds, test_fraction, seed)
    pretrained = load_encoder(encoder_path)
    encoders = {"pretrained": pretrained}
    if compare_random:
        seed_everything(seed)
        encoders["random"] = make_encoder(pretrained.cfg.to_dict())
    position = {}
    for i, n in enumerate(ds.names):
        position.setdefault(n, []).append(i)
    reports = {}
    for arm, enc in encoders.items():
        x, y = embed(enc, list(ds), device=device)  # every tree once; folds index into it
        per_fold = []
        for train_files, test_files in splits:
            tr = torch.tensor([i for n in train_files for i in position[n]])
            te = torch.tensor([i for n in test_files for i in position[n]])
            pred = linear_probe_predict(x[tr], y[tr], x[te], len(ds.classes))
            per_fold.append((y[te].numpy(), pred.numpy()))
        reports[arm] = _summary(ds, per_fold)
    return _finish(Path(output_dir) if output_dir is not None else None, ds, splits, reports, "probe", seed)
