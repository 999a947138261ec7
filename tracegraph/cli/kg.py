"""`tracegraph train | evaluate | predict`: ConvE link prediction."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple

import typer

from tracegraph.cli.common import (
    DEVICE_HELP,
    RUN_OLD_FLAGS,
    TRAIN_OLD_FLAGS,
    DatasetOpt,
    DeviceOpt,
    PrecisionOpt,
    ThreadsOpt,
    UnseenOpt,
    dataset_splits,
    old_flags_command,
    recorded_split,
    set_threads,
)


def train_cmd(
    ctx: typer.Context,
    train: Optional[Path] = typer.Option(
        None, "--train", help="Training triples (head<TAB>relation<TAB>tail); or --dataset."
    ),
    output_dir: Path = typer.Option(
        ..., "--output-dir", "-o", help="Run directory: config.json, checkpoints/, models, history."
    ),
    valid: Optional[Path] = typer.Option(
        None, "--valid", help="Validation triples: best_model.pt and early stopping use filtered MRR on them."
    ),
    test: Optional[Path] = typer.Option(None, "--test", help="Test triples, evaluated with the best model at the end."),
    dataset: Optional[str] = DatasetOpt,
    unseen: str = UnseenOpt,
    entity_to_id: Optional[Path] = typer.Option(
        None,
        "--entity-to-id",
        "--node-dict",
        help="Existing node_dict.txt (label<TAB>index); built from --train when absent.",
    ),
    relation_to_id: Optional[Path] = typer.Option(
        None, "--relation-to-id", "--rel-dict", help="Existing rel_dict.txt."
    ),
    epochs: int = typer.Option(100, "--epochs", "--num-epochs", min=1),
    batch_size: int = typer.Option(
        128,
        min=2,
        help="Samples per optimiser step (a sample is one (head, relation) query in kvsall, one triple direction in 1vsall). Global: under torchrun with N processes each takes about batch_size/N of every step, and the loss curve is the single-process one (docs/scaling.md).",
    ),
    learning_rate: float = typer.Option(0.003, min=0.0, help="Adam learning rate (ConvE paper: 0.003)."),
    lr_decay: float = typer.Option(1.0, help="Multiply the learning rate by this after every epoch (1.0 = constant)."),
    label_smoothing: float = typer.Option(0.1, min=0.0, max=1.0),
    training_mode: str = typer.Option(
        "kvsall", help="kvsall: all known tails of (h, r) are targets (ConvE paper); 1vsall: one triple per sample."
    ),
    loss_impl: str = typer.Option(
        "auto",
        help="standard: B×N logits, no label matrix; fused: chunked, never stores the B×N logits; auto: fused when the logits would exceed 512 MiB.",
    ),
    embedding_dim: int = typer.Option(200),
    embedding_height: int = typer.Option(10),
    embedding_width: int = typer.Option(20),
    output_channels: int = typer.Option(32),
    kernel_size: int = typer.Option(3),
    input_dropout: float = typer.Option(0.2),
    feature_map_dropout: float = typer.Option(0.2),
    output_dropout: float = typer.Option(0.3),
    reciprocal: bool = typer.Option(
        True, "--reciprocal/--no-reciprocal", help="Train (t, r⁻¹, h) too, so one model ranks heads and tails."
    ),
    seed: int = typer.Option(0),
    device: str = DeviceOpt,
    precision: str = PrecisionOpt,
    use_mixed_precision: bool = typer.Option(
        False,
        "--use-mixed-precision",
        help="Alias: the best half precision for the device (bf16 on CPU and recent GPUs, else fp16).",
    ),
    gradient_checkpointing: bool = typer.Option(
        False,
        "--gradient-checkpointing",
        help="Recompute the conv block in backward: less activation memory, more time.",
    ),
    memory_cleanup: bool = typer.Option(
        False,
        "--memory-cleanup/--no-memory-cleanup",
        help="gc + CUDA empty_cache every 8 batches. Off by default: measured on CPU it only costs time (benchmarks/memory_cleanup.py); on CUDA it returns cached blocks to other processes, it does not lower the peak.",
    ),
    compile: bool = typer.Option(
        False,
        "--compile",
        help="torch.compile the model (needs a C++ compiler on CPU); on CUDA it composes with --cuda-graphs.",
    ),
    cuda_graphs: bool = typer.Option(
        True,
        "--cuda-graphs/--no-cuda-graphs",
        help="CUDA: capture the whole training step (forward, backward, Adam) once and replay it for every full-size batch. Off for fp16, torchrun and --gradient-checkpointing.",
    ),
    tf32: bool = typer.Option(
        True,
        "--tf32/--no-tf32",
        help="CUDA: TF32 matmuls while training (Ampere or newer). Exactness claims (TracIn, loss tests) always run without.",
    ),
    deterministic: bool = typer.Option(
        False,
        "--deterministic",
        help="CUDA: deterministic kernels, so a rerun or --resume is bit-identical (slower). On CPU runs are bit-identical anyway.",
    ),
    num_workers: int = typer.Option(
        0,
        min=0,
        help="Kept for compatibility: batches are now built on the training device and need no loader workers.",
    ),
    checkpoint_every: int = typer.Option(
        10,
        "--checkpoint-every",
        min=1,
        help="Save checkpoints/epoch_NNNN.pt (weights and learning rate: what TracIn sums over) every k epochs and after the last. Default 10: a 100-epoch UMLS run with the default model keeps 10 of 8.5 MB each. The full optimizer and RNG state for --resume is one rolling checkpoints/resume.pt (25 MB there), rewritten every epoch.",
    ),
    eval_every: int = typer.Option(1, min=1, help="Evaluate valid MRR every k epochs."),
    patience: Optional[int] = typer.Option(
        None,
        min=0,
        help="Stop after this many evaluations without valid-MRR improvement (0 = never). Default: 10 when --valid is given, else never.",
    ),
    min_epochs: int = typer.Option(0, min=0, help="Never stop early before this epoch."),
    lr_scheduler: str = typer.Option(
        "none",
        help="none (constant, or --lr-decay per epoch) | step | cosine | plateau (lower the rate when valid MRR stalls, as LibKGE).",
    ),
    lr_factor: float = typer.Option(0.5, help="step, plateau: multiply the rate by this."),
    lr_patience: int = typer.Option(
        5, min=0, help="plateau: evaluations without valid-MRR gain before lowering the rate."
    ),
    lr_step_size: int = typer.Option(50, min=1, help="step: epochs between reductions."),
    lr_min: float = typer.Option(
        0.0, min=0.0, help="cosine: the final rate (reached at --epochs); plateau: the lowest rate."
    ),
    lr_threshold: float = typer.Option(
        1e-4, min=0.0, help="plateau: relative valid-MRR gain that counts as improvement."
    ),
    optimizer: str = typer.Option("adam", help="adam (ConvE paper) | adagrad."),
    weight_decay: float = typer.Option(0.0, min=0.0, help="L2 penalty on all parameters, applied by the optimizer."),
    loss: str = typer.Option(
        "bce",
        help="bce: 1-N binary cross-entropy (ConvE paper) | ce: softmax cross-entropy over all entities (LibKGE's tuned ConvE).",
    ),
    entity_dropout: float = typer.Option(0.0, min=0.0, max=1.0, help="Dropout on the head entity's embedding."),
    relation_dropout: float = typer.Option(0.0, min=0.0, max=1.0, help="Dropout on the relation embedding."),
    preset: Optional[str] = typer.Option(
        None,
        "--preset",
        help="Start from a shipped preset (conve-paper, fb15k-237, wn18rr, umls) or a preset .json file; options given on the command line override it; config.json records its name and sha256.",
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Continue the run in --output-dir from checkpoints/resume.pt, bit-identically, with the same settings. Only --epochs (not with --lr-scheduler cosine), --patience, --min-epochs, --eval-every, --checkpoint-every, --device, --num-workers, --memory-cleanup, --compile, --cuda-graphs, --tf32, --deterministic and --gradient-checkpointing may change; config.json's 'changes' records each change with the first epoch it applies to. Any other change is refused.",
    ),
    overwrite: bool = typer.Option(
        False,
        "--overwrite",
        help="Delete the run already in --output-dir first (a used run directory is refused otherwise).",
    ),
    num_threads: int = ThreadsOpt,
):
    """Train ConvE with 1-N scoring and label-matrix-free BCE.

    Several GPUs or nodes: `torchrun --nproc-per-node N -m tracegraph train …` (DistributedDataParallel,
    --batch-size stays global; see docs/scaling.md)."""
    from tracegraph.kg.model.train import TrainConfig, train as run_train
    from tracegraph.kg.data.unseen import check_policy
    from tracegraph.runtime.distributed import is_main_process, recorded
    from tracegraph.runtime.progress import setup_logging

    setup_logging()
    set_threads(num_threads)
    files = dataset_splits(dataset, ("train",), train=train, valid=valid, test=test)
    train, valid, test = files["train"], files["valid"], files["test"]
    model = dict(
        embedding_dim=embedding_dim,
        embedding_height=embedding_height,
        embedding_width=embedding_width,
        output_channels=output_channels,
        kernel_size=kernel_size,
        input_dropout=input_dropout,
        feature_map_dropout=feature_map_dropout,
        output_dropout=output_dropout,
        reciprocal=reciprocal,
        entity_dropout=entity_dropout,
        relation_dropout=relation_dropout,
    )
    if loss_impl not in ("auto", "standard", "fused"):
        raise typer.BadParameter("must be auto, standard or fused", param_hint="--loss-impl")
    cfg = TrainConfig(
        train=str(train),
        output_dir=str(output_dir),
        valid=_s(valid),
        test=_s(test),
        entity_map=_s(entity_to_id),
        relation_map=_s(relation_to_id),
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        lr_decay=lr_decay,
        label_smoothing=label_smoothing,
        training_mode=training_mode,
        loss_impl=loss_impl,
        seed=seed,
        device=device,
        precision=precision,
        use_mixed_precision=use_mixed_precision,
        gradient_checkpointing=gradient_checkpointing,
        memory_cleanup=memory_cleanup,
        compile=compile,
        cuda_graphs=cuda_graphs,
        tf32=tf32,
        deterministic=deterministic,
        num_workers=num_workers,
        checkpoint_every=checkpoint_every,
        eval_every=eval_every,
        patience=patience,
        resume=resume,
        overwrite=overwrite,
        model=model,
        unseen=check_policy(unseen),
        min_epochs=min_epochs,
        lr_scheduler=lr_scheduler,
        lr_factor=lr_factor,
        lr_patience=lr_patience,
        lr_step_size=lr_step_size,
        lr_min=lr_min,
        lr_threshold=lr_threshold,
        optimizer=optimizer,
        weight_decay=weight_decay,
        loss=loss,
    )
    if preset is not None:
        from tracegraph.kg.model.presets import apply_preset, explicit_options, load_preset

        cfg = apply_preset(cfg, load_preset(preset), explicit_options(ctx))
    summary = recorded(run_train)(cfg)
    if "test" in summary and is_main_process():
        b = summary["test"]["both"]
        typer.echo(f"test MRR {b['mrr']:.4f}  Hits@1 {b['hits@1']:.4f}  Hits@10 {b['hits@10']:.4f}  -> {output_dir}")


def evaluate_cmd(
    model_dir: Path = typer.Option(..., "--model-dir", help="Run directory or checkpoint file."),
    test: Optional[Path] = typer.Option(
        None,
        "--test",
        help="Triples to rank (or --dataset: its test split), filtered too. Default: the test file the run recorded; when that one is missing or changed, this file stands in for it in the filter.",
    ),
    dataset: Optional[str] = DatasetOpt,
    unseen: str = UnseenOpt,
    train: Optional[Path] = typer.Option(
        None,
        "--train",
        help="The run's training file, in place of the recorded one (filtered, and what --unseen judges by): for a file edited or moved since training; used as given, with a warning when it differs from the recorded one.",
    ),
    valid: Optional[Path] = typer.Option(
        None,
        "--valid",
        help="The run's validation file, in place of the recorded one (filtered), as --train.",
    ),
    filter_files: Optional[List[Path]] = typer.Option(
        None,
        "--filter",
        help="More known true triples to filter, added to the run's train, valid and test files and --test (repeat the option). The filter is never replaced: with or without --filter the run's own files are filtered.",
    ),
    output_dir: Optional[Path] = typer.Option(
        None, "--output-dir", "-o", help="Writes evaluation.json and ranks.csv (default: MODEL_DIR/evaluation)."
    ),
    top_k: int = typer.Option(10, min=0, help="Top predicted entities listed per triple in ranks.csv."),
    batch_size: int = typer.Option(256, min=1),
    entity_chunk: int = typer.Option(65536, min=1, help="Entities scored at a time: bounds memory to batch×chunk."),
    device: str = DeviceOpt,
):
    """Filtered ranks (realistic, optimistic, pessimistic), MRR, MR, Hits@1/3/5/10 per side and both."""
    from tracegraph.kg.outputs import evaluate_files
    from tracegraph.kg.run import Run

    files = dataset_splits(dataset, (), train=train, valid=valid, test=test)
    run = Run(
        model_dir,
        device,
        data_files={"train": files["train"], "valid": files["valid"]},
        stand_in={"test": files["test"]},
    )
    test = recorded_split(run, "test", files["test"])
    res = evaluate_files(run, test, filter_files, output_dir, top_k, batch_size, entity_chunk, device, unseen)
    for side in ("tail", "head", "both"):
        if side in res["metrics"]:
            m = res["metrics"][side]
            typer.echo(
                f"{side:5s} MRR {m['mrr']:.4f}  MR {m['mr']:.2f}  Hits@1 {m['hits@1']:.4f}  Hits@3 {m['hits@3']:.4f}  Hits@10 {m['hits@10']:.4f}"
            )
    typer.echo(f"-> {res['output_dir']}")


def predict_cmd(
    model_dir: Path = typer.Option(..., "--model-dir", help="Run directory or checkpoint file."),
    head: Optional[str] = typer.Option(None, "--head", help="With --relation: rank every tail of (HEAD, RELATION, ?)."),
    tail: Optional[str] = typer.Option(
        None,
        "--tail",
        help="With --relation: rank every head of (?, RELATION, TAIL) (through the reciprocal relation when the model has them, else by scoring every head).",
    ),
    relation: Optional[str] = typer.Option(
        None,
        "--relation",
        help="The query's relation: its label, or the name the run's label files give it (a KGX run's biolink:treats for predicate:4). Entities too may be given by a name only one of them has.",
    ),
    query: Optional[Tuple[str, str]] = typer.Option(
        None, "--query", help="HEAD RELATION: the same as --head HEAD --relation RELATION."
    ),
    query_file: Optional[Path] = typer.Option(
        None, "--query-file", help="Lines head<TAB>relation: rank all tails of each."
    ),
    triples: Optional[Path] = typer.Option(None, "--triples", help="Score every triple of this file."),
    top_k: int = typer.Option(10, min=1),
    exclude_train: bool = typer.Option(
        False,
        "--exclude-train",
        help="Leave out answers already known in the run's training file (a query may then get fewer than --top-k).",
    ),
    train: Optional[Path] = typer.Option(
        None,
        "--train",
        help="The training file whose answers --exclude-train leaves out, in place of the recorded one (for a file edited or moved since training; used as given, with a warning when it differs).",
    ),
    output: Optional[Path] = typer.Option(
        None,
        "--output",
        "-o",
        help="Write .csv, .tsv or .json here (by the extension; any other is refused) instead of printing CSV.",
    ),
    device: str = DeviceOpt,
):
    """Labels in, labels + scores out: the best tails of --head H --relation R, the best heads of
    --tail T --relation R, or the score of every triple of --triples. Columns head, relation, rank,
    tail, score, probability, and head_name, relation_name, tail_name when the run has names."""
    from tracegraph.kg.predictions import check_output, predict_command
    from tracegraph.kg.run import Run

    check_output(output)
    run = Run(model_dir, device, data_files={"train": train})
    predict_command(run, head, tail, relation, query, query_file, triples, top_k, exclude_train, output)


def _s(p):
    return str(p) if p is not None else None


def register(app: typer.Typer) -> None:
    # the original research scripts' flags whose meaning we keep are hidden aliases (cli/common.py)
    app.command("train", cls=old_flags_command(TRAIN_OLD_FLAGS))(train_cmd)
    app.command("evaluate", cls=old_flags_command(RUN_OLD_FLAGS))(evaluate_cmd)
    app.command("predict", cls=old_flags_command(RUN_OLD_FLAGS))(predict_cmd)


__all__ = ["register", "DEVICE_HELP"]
