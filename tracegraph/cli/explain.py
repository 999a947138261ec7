"""`tracegraph explain`: TracIn influence of training triples on test triples."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from tracegraph.cli.common import (
    METHODS_PLACEHOLDER,
    DatasetOpt,
    DeviceOpt,
    ThreadsOpt,
    dataset_splits,
    recorded_split,
    set_threads,
)

# chosen by the necessity and recovery results (docs/explaining.md, "How to choose"); a literal so that
# the CLI starts without importing the methods registry (tests/kg/test_necessity.py checks they agree)
DEFAULT_METHOD = "tracin-margin-path"
DEFAULT_LOSS = "logit"
from tracegraph.cli.filter import (
    EDGES_ONLY,
    MAX_PATH_LENGTH,
    MIN_DEGREE,
    PATH_FILTERING,
    PRESERVE_TEST_EDGES,
    STRICT_HOP,
    STRICT_PATH,
    filter_options_from_cli,
)


def explain_cmd(
    model_dir: Path = typer.Option(
        ...,
        "--model-dir",
        help="Run directory written by `tracegraph train` (or an imported model), or one checkpoint file of it (then TracIn uses that checkpoint alone).",
    ),
    train: Optional[Path] = typer.Option(
        None,
        "--train",
        help="Training triples whose influence is ranked (or --dataset: its train split). Default: the training file the run recorded. A file that differs from the recorded one (edited since training) is used as given, with a warning: the model was trained on the recorded one.",
    ),
    dataset: Optional[str] = DatasetOpt,
    test_triples: Path = typer.Option(
        ...,
        "--test-triples",
        help="Questions to explain, head<TAB>relation<TAB>tail: entities by label or by a name only one of them has, relations by label, readable name or predicate (biolink:treats). Questions that name no entity or relation of the run are all listed in one error (line, reason, closest labels), unless --skip-unresolved.",
    ),
    skip_unresolved: bool = typer.Option(
        False,
        "--skip-unresolved",
        help="Explain the questions that resolve; list the others in OUTPUT_DIR/unresolved.tsv (line<TAB>question<TAB>reason) instead of refusing the run.",
    ),
    output_dir: Path = typer.Option(..., "--output-dir", "-o"),
    checkpoints: Optional[List[str]] = typer.Option(
        None,
        "--checkpoints",
        help="Default: the epoch checkpoints up to the explained model's epoch (best_model.pt's when present; a single checkpoint file given to --model-dir: that one alone), listed in the log. Or all (every saved epoch), best, final, or checkpoint paths (repeat the option).",
    ),
    method: Optional[str] = typer.Option(
        None,
        help=f"Explanation method: {METHODS_PLACEHOLDER} (docs/explaining.md, 'How to choose'). Default: {DEFAULT_METHOD}; with --loss train-loss, tracin (the original research scripts' convention, one flag away). Rows are ordered by it; methods other than tracin add a MethodScore column, and tracin-margin-path a HeadTailWalk column (rows: shortest head–tail walk through the triple first, then MethodScore). exact, autograd or vmap here mean tracin with that --engine.",
    ),
    engine: str = typer.Option(
        "exact",
        help="How TracIn is computed: exact (per-layer factors, all parameters, about one forward pass), autograd (per-example loop, the reference), vmap (torch.func per-example gradients).",
    ),
    loss: str = typer.Option(
        DEFAULT_LOSS,
        help="logit: -s, the triple's own score (what removing a training triple changes in a KvsAll retrain, whatever its fit); score: softplus(-s); train-loss: the 1-N training BCE with the run's label smoothing (the original research scripts' convention; without --method it ranks by plain tracin, as they did).",
    ),
    layers: str = typer.Option(
        "all", help="all, last:N (N parameter tensors nearest the output), or comma-separated parameter names."
    ),
    side: str = typer.Option(
        "tail",
        "--side",
        help="The prediction the margin methods (tracin-margin, tracin-margin-path) explain: tail, the answer to (h, r, ?), or head, the answer to (?, r, t) (reciprocal models). Their rival, in each JSON's 'rival', is then a head.",
    ),
    top_k: Optional[int] = typer.Option(
        None,
        "--top-k",
        min=1,
        help="Keep the top-k proponents and top-k opponents per test triple (default: every training triple).",
    ),
    batch_size: int = typer.Option(
        0,
        min=0,
        help="Training triples per step; 0 = auto: 512 on CPU, up to 4096 on a GPU (under torchrun every process scores whole batches of its shard).",
    ),
    precision: str = typer.Option("fp32", help="fp32 (exact) or bf16 (faster on recent hardware; approximate)."),
    device: str = DeviceOpt,
    devices: Optional[str] = typer.Option(
        None,
        "--devices",
        help="One process, several devices, e.g. cuda:0,cuda:1: the test triples are split across them (cpu,cpu runs the same path on CPU). For several nodes, or to split the training triples, use torchrun (docs/scaling.md).",
    ),
    node_name_dict: Optional[Path] = typer.Option(
        None, "--node-name-dict", help="name<TAB>index file for the _label columns."
    ),
    edge_map: Optional[Path] = typer.Option(None, "--edge-map", help="edge_map.json for readable relation labels."),
    start_index: int = typer.Option(0, min=0, help="First test triple (0-based line among non-blank lines)."),
    max_triples: Optional[int] = typer.Option(None, min=1, help="Explain at most this many test triples."),
    skip_existing: bool = typer.Option(
        False,
        "--skip-existing",
        help="Add to a used -o: skip test triples whose CSV already exists (refused when the folder's summary.json names another method or settings).",
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace the explanation files already in -o (a non-empty -o is refused otherwise)."
    ),
    label_smoothing: Optional[float] = typer.Option(
        None, help="Override the run's label smoothing for --loss train-loss."
    ),
    n_hops: Optional[int] = typer.Option(
        None,
        "--n-hops",
        min=0,
        help="Rank only the training triples of the n-hop subgraph around each test triple (default: all training triples). The flags below refine it; see docs/filtering.md.",
    ),
    min_degree: int = MIN_DEGREE,
    preserve_test_edges: bool = PRESERVE_TEST_EDGES,
    strict_hop_constraint: bool = STRICT_HOP,
    path_filtering: bool = PATH_FILTERING,
    max_total_path_length: int = MAX_PATH_LENGTH,
    strict_path_filtering: bool = STRICT_PATH,
    save_edges_only: bool = EDGES_ONLY,
    num_threads: int = ThreadsOpt,
):
    """Rank training triples by TracIn influence on each test triple, summed over checkpoints.

    Several GPUs or nodes: `torchrun --nproc-per-node N -m tracegraph explain …` shards the training
    triples across processes and writes the same files (docs/scaling.md)."""
    from tracegraph.kg.explain.tracin.explain import ExplainConfig, explain_questions
    from tracegraph.kg.outputs import explain_files, prepare_output_dir
    from tracegraph.kg.run import Run
    from tracegraph.runtime.distributed import is_main_process, recorded
    from tracegraph.runtime.progress import setup_logging

    setup_logging()
    set_threads(num_threads)
    from tracegraph.kg.explain.methods import check_methods

    if method in ("exact", "autograd", "vmap"):  # engine names given as a method: tracin with that engine
        method, engine = "tracin", method
    if method is not None:
        check_methods([method])
    train = dataset_splits(dataset, (), train=train)["train"]
    # opened once: the filter and the engine share its id maps and checkpoint cache; a training file
    # given is the run's training file here (the filter's too), used as it is with a warning if edited
    run = Run(model_dir, data_files={"train": train})
    train = recorded_split(run, "train", train)
    cfg = ExplainConfig(
        model_dir=str(model_dir),
        train=str(train),
        test_triples=str(test_triples),
        output_dir=str(output_dir),
        checkpoints=checkpoints,
        engine=engine,
        method=method,
        loss=loss,
        layers=layers,
        top_k=top_k,
        batch_size=batch_size,
        precision=precision,
        device=device,
        node_name_dict=_s(node_name_dict),
        edge_map=_s(edge_map),
        start_index=start_index,
        max_triples=max_triples,
        skip_existing=skip_existing,
        label_smoothing=label_smoothing,
        devices=devices.split(",") if devices else None,
        side=side,
        skip_unresolved=skip_unresolved,
    )
    questions = explain_questions(cfg, run)  # all refused at once, before the folder is touched
    if is_main_process():
        prepare_output_dir(output_dir, cfg, overwrite)
    subsets = None
    if n_hops is not None:
        opts = filter_options_from_cli(
            n_hops,
            min_degree,
            preserve_test_edges,
            strict_hop_constraint,
            path_filtering,
            max_total_path_length,
            strict_path_filtering,
            save_edges_only,
        )
        subsets = run.training_subsets(train, opts)
    summary = recorded(explain_files)(cfg, subsets, run=run, questions=questions)
    if is_main_process():
        n_unresolved = len(summary["unresolved"])
        unresolved = f"{n_unresolved} unresolved in unresolved.tsv, " if n_unresolved else ""
        typer.echo(
            f"explained {summary['explained']} of {summary['requested']} test triples "
            f"({unresolved}{summary['failed']} failed, {summary['skipped_existing']} skipped) in "
            f"{summary['elapsed_seconds']:.1f}s -> {output_dir}"
        )


def _s(p):
    return str(p) if p is not None else None


def register(app: typer.Typer) -> None:
    from tracegraph.cli.common import explain_old_flags_command

    # the original research scripts' flags whose meaning is kept are hidden aliases (docs/coming-from-scripts.md)
    app.command("explain", cls=explain_old_flags_command())(explain_cmd)
