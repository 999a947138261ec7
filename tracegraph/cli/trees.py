"""`tracegraph trees …`: GT-SSL pretraining, fine-tuning and linear probing on geometric trees."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from tracegraph.cli.common import ThreadsOpt, set_threads

trees_app = typer.Typer(
    help="Self-supervised pretraining (GT-SSL) of an SGMP encoder on geometric trees.", no_args_is_help=True
)

# options shared by every command, declared once
SWC = typer.Option(None, "--swc-dir", help="Folder of *.swc neurons (subtrees are sampled); default: synthetic trees.")
NUM_TREES = typer.Option(200, "--num-trees", help="SWC: subtrees in total. Synthetic: trees per class.")
MAX_NODES = typer.Option(300, "--max-nodes", help="Nodes per tree (subtree size / growth limit).")
KEEP_EVERY = typer.Option(4, "--keep-every", help="SWC thinning: keep every k-th point along unbranched segments.")
DATA_SEED = typer.Option(0, "--data-seed", help="Seed of tree sampling/generation.")
CACHE = typer.Option(
    None,
    "--cache-dir",
    help="Cache 3rd-order paths (and the trees of --trees files) here (.npz keyed by content hash).",
)
HIDDEN = typer.Option(64, "--hidden-channels")
INTER = typer.Option(3, "--num-interactions")
RBF = typer.Option(20, "--num-rbf")
CUTOFF = typer.Option(None, "--cutoff", help="Longest resolved edge length (data units); default: from the data.")
READOUT = typer.Option("mean", "--readout", help="mean | sum")
EPOCHS = typer.Option(10, "--epochs")
BATCH = typer.Option(32, "--batch-size")
LR = typer.Option(1e-3, "--lr")
PRECISION = typer.Option("fp32", "--precision", help="fp32 | bf16 | fp16 (fp16: CUDA only).")
DEVICE = typer.Option("auto", "--device")
ACCUM = typer.Option(1, "--gradient-accumulation-steps")
GCKPT = typer.Option(
    False, "--gradient-checkpointing/--no-gradient-checkpointing", help="Recompute each interaction block in backward."
)
CLEANUP = typer.Option(
    False, "--memory-cleanup/--no-memory-cleanup", help="gc + empty the CUDA cache after every batch."
)
SEED = typer.Option(0, "--seed")
OUT = typer.Option(..., "--output-dir", "-o")
RESUME = typer.Option(False, "--resume", help="Continue from OUTPUT_DIR/last.pt.")
THREADS = ThreadsOpt
# the user's own trees
TREES = typer.Option(
    None,
    "--trees",
    help="Folder of your trees: *.swc, binary vessel images (*.png, *.tif, …) "
    "and graph files (*.json/*.npz with pos, edges[, root]). Wins over --swc-dir.",
)
LABELS = typer.Option(
    None,
    "--labels",
    help="CSV name,label[,split]; name = file stem. Without a split column: "
    "a stratified split over files, seeded by --data-seed (finetune) or the first --seed (probe), "
    "written to OUTPUT_DIR/split.csv.",
)
NODE_SPACING = typer.Option(
    0.0,
    "--node-spacing",
    min=0.0,
    help="--trees: resample every tree to one node per this "
    "much arc length (file units: pixels, µm); wider where a tree would exceed --max-nodes.",
)
TREES_PER_IMAGE = typer.Option(
    1, "--trees-per-image", min=1, help="Vessel images: the largest N components, one tree each."
)
IMAGE_ROOT = typer.Option(
    "widest",
    "--image-root",
    help="Vessel images: root each component at its widest point "
    "(widest) or nearest the optic disc (disc: where the thickest vessels concentrate).",
)
FOLDS = typer.Option(0, "--folds", min=0, help="k-fold cross-validation over files (k >= 2; for tens of images).")
TEST_FRACTION = typer.Option(0.3, "--test-fraction", min=0.01, max=0.99, help="Held-out files without --folds.")


def _config(
    swc_dir,
    num_trees,
    max_nodes,
    keep_every,
    data_seed,
    cache_dir,
    hidden,
    inter,
    rbf,
    cutoff,
    readout,
    epochs,
    batch,
    lr,
    precision,
    device,
    accum,
    gckpt,
    cleanup,
    seed,
    freeze=False,
    order_weight=0.2,
    growth_weight=1.0,
    user_trees: dict | None = None,
):
    from tracegraph.trees.train import DataConfig, TrainConfig

    if readout not in ("mean", "sum"):
        from tracegraph.errors import TracegraphError

        raise TracegraphError(f"--readout must be mean or sum, not {readout!r}")
    return TrainConfig(
        data=DataConfig(
            str(swc_dir) if swc_dir else None,
            num_trees,
            max_nodes,
            keep_every,
            data_seed,
            str(cache_dir) if cache_dir else None,
            **(user_trees or {}),
        ),
        encoder=dict(hidden_channels=hidden, num_interactions=inter, num_rbf=rbf, cutoff=cutoff, readout=readout),
        epochs=epochs,
        batch_size=batch,
        lr=lr,
        precision=precision,
        device=device,
        gradient_accumulation_steps=accum,
        gradient_checkpointing=gckpt,
        memory_cleanup=cleanup,
        seed=seed,
        freeze_encoder=freeze,
        order_weight=order_weight,
        growth_weight=growth_weight,
    )


def _user_trees(trees, labels, node_spacing, trees_per_image, image_root) -> dict:
    """The DataConfig fields of --trees/--labels and the image options."""
    if image_root not in ("widest", "disc"):
        from tracegraph.errors import TracegraphError

        raise TracegraphError(f"--image-root must be widest or disc, not {image_root!r}")
    return dict(
        trees_dir=str(trees) if trees else None,
        labels=str(labels) if labels else None,
        node_spacing=node_spacing,
        trees_per_image=trees_per_image,
        image_root=image_root,
    )


def _headline(res: dict) -> None:
    """One line per arm on stderr; the whole result as JSON on stdout."""
    for arm, rep in res["arms"].items():
        typer.echo(
            f"{arm:>10}: accuracy {rep['accuracy']:.3f}  balanced {rep['balanced_accuracy']:.3f}  "
            f"macro-F1 {rep['macro_f1']:.3f}  ({rep['n']} held-out trees, {res['split']})",
            err=True,
        )
    typer.echo(
        json.dumps(
            {k: v for k, v in res.items() if k != "arms"}
            | {
                arm: {k: round(rep[k], 4) for k in ("accuracy", "balanced_accuracy", "macro_f1")}
                for arm, rep in res["arms"].items()
            }
        )
    )


def _summary(history: list[dict], out: Path) -> None:
    if history:
        last = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in history[-1].items()}
        typer.echo(json.dumps({"output_dir": str(out), **last}))


@trees_app.command("pretrain")
def pretrain_cmd(
    swc_dir: Optional[Path] = SWC,
    num_trees: int = NUM_TREES,
    max_nodes: int = MAX_NODES,
    keep_every: int = KEEP_EVERY,
    data_seed: int = DATA_SEED,
    cache_dir: Optional[Path] = CACHE,
    hidden_channels: int = HIDDEN,
    num_interactions: int = INTER,
    num_rbf: int = RBF,
    cutoff: Optional[float] = CUTOFF,
    readout: str = READOUT,
    epochs: int = EPOCHS,
    batch_size: int = BATCH,
    lr: float = LR,
    precision: str = PRECISION,
    device: str = DEVICE,
    gradient_accumulation_steps: int = ACCUM,
    gradient_checkpointing: bool = GCKPT,
    memory_cleanup: bool = CLEANUP,
    seed: int = SEED,
    output_dir: Path = OUT,
    resume: bool = RESUME,
    order_weight: float = typer.Option(0.2, "--order-weight", help="Weight of the partial-order loss."),
    growth_weight: float = typer.Option(1.0, "--growth-weight", help="Weight of the subtree-growth loss."),
    trees: Optional[Path] = TREES,
    node_spacing: float = NODE_SPACING,
    trees_per_image: int = TREES_PER_IMAGE,
    image_root: str = IMAGE_ROOT,
    num_threads: int = THREADS,
):
    """GT-SSL pretraining (partial order + subtree growth). Writes config.json, history.json, last.pt, encoder.pt."""
    from tracegraph.runtime.progress import setup_logging
    from tracegraph.trees.train import pretrain

    setup_logging()
    set_threads(num_threads)
    cfg = _config(
        swc_dir,
        num_trees,
        max_nodes,
        keep_every,
        data_seed,
        cache_dir,
        hidden_channels,
        num_interactions,
        num_rbf,
        cutoff,
        readout,
        epochs,
        batch_size,
        lr,
        precision,
        device,
        gradient_accumulation_steps,
        gradient_checkpointing,
        memory_cleanup,
        seed,
        order_weight=order_weight,
        growth_weight=growth_weight,
        user_trees=_user_trees(trees, None, node_spacing, trees_per_image, image_root),
    )
    _summary(pretrain(cfg, output_dir, resume=resume), output_dir)


@trees_app.command("finetune")
def finetune_cmd(
    encoder: Optional[Path] = typer.Option(
        None, "--encoder", help="encoder.pt from pretrain; omit for a fresh encoder."
    ),
    freeze_encoder: bool = typer.Option(False, "--freeze-encoder", help="Train the new head only."),
    num_trees: int = typer.Option(100, "--num-trees", help="Labelled synthetic trees per class."),
    max_nodes: int = MAX_NODES,
    data_seed: int = DATA_SEED,
    cache_dir: Optional[Path] = CACHE,
    hidden_channels: int = HIDDEN,
    num_interactions: int = INTER,
    num_rbf: int = RBF,
    cutoff: Optional[float] = CUTOFF,
    readout: str = READOUT,
    epochs: int = EPOCHS,
    batch_size: int = BATCH,
    lr: float = LR,
    precision: str = PRECISION,
    device: str = DEVICE,
    gradient_accumulation_steps: int = ACCUM,
    gradient_checkpointing: bool = GCKPT,
    memory_cleanup: bool = CLEANUP,
    seed: int = SEED,
    output_dir: Path = OUT,
    resume: bool = RESUME,
    trees: Optional[Path] = TREES,
    labels: Optional[Path] = LABELS,
    node_spacing: float = NODE_SPACING,
    trees_per_image: int = TREES_PER_IMAGE,
    image_root: str = IMAGE_ROOT,
    folds: int = FOLDS,
    test_fraction: float = TEST_FRACTION,
    compare_random: bool = typer.Option(
        False,
        "--compare-random/--no-compare-random",
        help="--trees: also fine-tune the same encoder randomly initialised.",
    ),
    num_threads: int = THREADS,
):
    """New classification head on the (pretrained) encoder: your labelled --trees, or synthetic classes.

    With --trees/--labels: writes split.csv, metrics.json (accuracy, balanced accuracy, macro-F1,
    per class, confusion matrix) and confusion.png; without: reports synthetic test accuracy per epoch.
    """
    from tracegraph.runtime.progress import setup_logging
    from tracegraph.trees.labelled_runs import finetune_on_labels
    from tracegraph.trees.train import finetune

    setup_logging()
    set_threads(num_threads)
    cfg = _config(
        None,
        num_trees,
        max_nodes,
        1,
        data_seed,
        cache_dir,
        hidden_channels,
        num_interactions,
        num_rbf,
        cutoff,
        readout,
        epochs,
        batch_size,
        lr,
        precision,
        device,
        gradient_accumulation_steps,
        gradient_checkpointing,
        memory_cleanup,
        seed,
        freeze=freeze_encoder,
        user_trees=_user_trees(trees, labels, node_spacing, trees_per_image, image_root),
    )
    if trees or labels:
        _headline(finetune_on_labels(cfg, encoder, output_dir, folds, test_fraction, compare_random, resume))
        return
    _summary(finetune(cfg, encoder, output_dir, resume=resume), output_dir)


@trees_app.command("probe")
def probe_cmd(
    encoder: Optional[Path] = typer.Option(None, "--encoder", help="encoder.pt from pretrain."),
    compare_random: bool = typer.Option(
        True, "--compare-random/--no-compare-random", help="Also probe the same architecture randomly initialised."
    ),
    seeds: List[int] = typer.Option([0, 1, 2], "--seed", help="Repeat per seed (labelled data + random init)."),
    num_trees: int = typer.Option(150, "--num-trees", help="Labelled synthetic trees per class (30 % held out)."),
    max_nodes: int = typer.Option(
        150, "--max-nodes", help="Nodes per tree (--trees: the budget each tree is resampled to)."
    ),
    study: bool = typer.Option(False, "--study", help="Pretrain a fresh encoder per seed too (the full study)."),
    pretrain_trees: int = typer.Option(100, "--pretrain-trees", help="--study: unlabelled trees per class."),
    epochs: int = typer.Option(6, "--epochs", help="--study: pretraining epochs."),
    output_dir: Optional[Path] = typer.Option(None, "--output-dir", "-o", help="Writes probe.json (and --study runs)."),
    trees: Optional[Path] = TREES,
    labels: Optional[Path] = LABELS,
    node_spacing: float = NODE_SPACING,
    trees_per_image: int = TREES_PER_IMAGE,
    image_root: str = IMAGE_ROOT,
    folds: int = FOLDS,
    test_fraction: float = TEST_FRACTION,
    cache_dir: Optional[Path] = CACHE,
    num_threads: int = THREADS,
):
    """Linear probe of frozen graph embeddings on held-out trees: your labelled --trees, or synthetic classes.

    With --trees/--labels (first --seed fixes the split and the random init): metrics.json,
    confusion.png (and confusion-random.png) and split.csv in --output-dir. Otherwise mean ± std over seeds.
    """
    from tracegraph.errors import TracegraphError
    from tracegraph.runtime.checkpoints import atomic_write_json
    from tracegraph.runtime.progress import setup_logging
    from tracegraph.trees.probe import probe_study, probe_synthetic
    from tracegraph.trees.train import DataConfig

    setup_logging()
    set_threads(num_threads)
    cache = str(cache_dir) if cache_dir else None
    if study:  # the study pretrains its own encoders on synthetic trees and always probes random weights beside them
        given = [f for f, on in (("--trees", trees), ("--labels", labels), ("--encoder", encoder)) if on]
        given += [] if compare_random else ["--no-compare-random"]
        if given:
            raise TracegraphError(
                f"--study pretrains and compares its own encoders on synthetic trees: leave out {', '.join(given)}"
            )
    if trees or labels:
        from tracegraph.trees.labelled_runs import load_labelled, probe_on_labels

        if encoder is None:
            raise TracegraphError("give --encoder PATH (the pretrained encoder to probe)")
        dc = DataConfig(
            None,
            0,
            max_nodes,
            cache_dir=cache,
            **_user_trees(trees, labels, node_spacing, trees_per_image, image_root),
        )
        res = probe_on_labels(encoder, load_labelled(dc), output_dir, folds, test_fraction, seeds[0], compare_random)
        _headline(res)
        return
    if study:
        if output_dir is None:
            raise TracegraphError("--study needs --output-dir for its pretraining runs")
        res = probe_study(seeds, output_dir, pretrain_trees, num_trees, max_nodes, epochs, cache_dir=cache)
    else:
        if encoder is None:
            raise TracegraphError("give --encoder PATH (or --study)")
        res = probe_synthetic(encoder, seeds, num_trees, max_nodes, compare_random, cache)
    for k in ("pretrained", "random"):
        if f"{k}_mean" in res:
            typer.echo(
                f"{k:>10}: {100 * res[f'{k}_mean']:.1f} ± {100 * res[f'{k}_std']:.1f} % ({len(seeds)} seeds)", err=True
            )
    if output_dir is not None:
        atomic_write_json(Path(output_dir) / "probe.json", res)
    typer.echo(json.dumps(res))


def register(app: typer.Typer) -> None:
    app.add_typer(trees_app, name="trees")
