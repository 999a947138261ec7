"""`tracegraph import …`: ConvE models trained elsewhere -> tracegraph model directories."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

TRUST_HELP = (
    "Allow unpickling (torch.load weights_only=False) ONLY for a file you made yourself: a pickle runs "
    "arbitrary code when loaded. Without it, only tensors and plain containers are read."
)

import_app = typer.Typer(
    help="Import ConvE models trained elsewhere (PyKEEN, the original research scripts' checkpoints) as model directories "
    "that evaluate, predict and explain accept. Files are never unpickled unless you pass --trust-pickle.",
    no_args_is_help=True,
)


def _echo(summary: dict, output_dir: Path) -> None:
    m = summary["model"]
    typer.echo(
        f"imported {summary['source']['format']}: {m['num_entities']} entities, {m['num_relations']} relations"
        f"{' (+ reciprocals)' if m['reciprocal'] else ''}, d={m['embedding_dim']}, lr {summary['lr']:g} -> {output_dir}"
    )
    for note in summary["source"].get("notes", []):
        typer.echo(f"note: {note}")


@import_app.command("pykeen")
def pykeen_cmd(
    model_file: Path = typer.Argument(
        ...,
        help="PyKEEN ConvE: trained_model.pkl (a whole pickled model: needs --trust-pickle "
        "and PyKEEN installed, pip install 'tracegraph[import]') or a state dict "
        "saved with torch.save(model.state_dict()) (loads safely).",
    ),
    output_dir: Path = typer.Option(..., "--output-dir", "-o", help="Model directory to write."),
    triples_factory_dir: Optional[Path] = typer.Option(
        None,
        "--triples-factory-dir",
        help="The training TriplesFactory saved with to_path_binary (a pipeline's training_triples/): id maps, inverse-triples flag, training triples (written as train.txt). Read without unpickling.",
    ),
    entity_to_id: Optional[Path] = typer.Option(
        None,
        "--entity-to-id",
        help="Instead of --triples-factory-dir: label<TAB>id entity map (node_dict.txt format) in PyKEEN's ids.",
    ),
    relation_to_id: Optional[Path] = typer.Option(
        None,
        "--relation-to-id",
        help="Instead of --triples-factory-dir: label<TAB>id relation map (base relations only).",
    ),
    hyperparameters: Optional[Path] = typer.Option(
        None,
        "--hyperparameters",
        help="JSON with embedding_height/embedding_width, dropouts, lr, label_smoothing, create_inverse_triples (e.g. the pipeline config); needed for a state dict whose image shape cannot be inferred.",
    ),
    lr: Optional[float] = typer.Option(
        None, "--lr", help="Learning rate recorded for TracIn (default: from --hyperparameters, else 1.0 with a note)."
    ),
    label_smoothing: Optional[float] = typer.Option(
        None, "--label-smoothing", help="Recorded for explain's train-loss (default: from --hyperparameters, else 0)."
    ),
    trust_pickle: bool = typer.Option(False, "--trust-pickle", help=TRUST_HELP),
):
    """Map a PyKEEN ConvE (entity/relation tables, tail bias, hr2d and hr1d blocks) onto tracegraph's ConvE, keeping PyKEEN's entity and relation ids; inverse relations (PyKEEN rows 2r+1) become reciprocals (rows R+r)."""
    from tracegraph.kg.api import import_pykeen

    run = import_pykeen(
        model_file,
        output_dir,
        triples_factory_dir=triples_factory_dir,
        entity_to_id=entity_to_id,
        relation_to_id=relation_to_id,
        hyperparameters=hyperparameters,
        trust_pickle=trust_pickle,
        lr=lr,
        label_smoothing=label_smoothing,
    )
    _echo(run.config, output_dir)  # config.json: what the import recorded


@import_app.command("checkpoint")
def checkpoint_cmd(
    file: Path = typer.Argument(
        ...,
        help="A checkpoint of the original research scripts: model_state_dict + model_config (num_entities, num_relations, embedding_dim, embedding_height, embedding_width).",
    ),
    output_dir: Path = typer.Option(..., "--output-dir", "-o", help="Model directory to write."),
    entity_to_id: Path = typer.Option(
        ..., "--entity-to-id", help="node_dict.txt (label<TAB>id) the model was trained with."
    ),
    relation_to_id: Path = typer.Option(
        ..., "--relation-to-id", help="rel_dict.txt (label<TAB>id) the model was trained with."
    ),
    lr: Optional[float] = typer.Option(
        None,
        "--lr",
        help="Learning rate recorded for TracIn (default: from the checkpoint if present, else 1.0 with a note).",
    ),
    label_smoothing: Optional[float] = typer.Option(
        None, "--label-smoothing", help="Recorded for explain's train-loss (default: from model_config, else 0)."
    ),
    trust_pickle: bool = typer.Option(False, "--trust-pickle", help=TRUST_HELP),
):
    """Import the original research scripts' ConvE format (head and relation concatenated along the width, no entity bias) exactly: the model keeps that layout (concat_axis=width, entity_bias off)."""
    from tracegraph.kg.api import import_checkpoint

    run = import_checkpoint(
        file,
        output_dir,
        entity_to_id,
        relation_to_id,
        trust_pickle=trust_pickle,
        lr=lr,
        label_smoothing=label_smoothing,
    )
    _echo(run.config, output_dir)


def register(app: typer.Typer) -> None:
    app.add_typer(import_app, name="import")
