"""The Python API's entry points, each returning a :class:`~tracegraph.kg.run.Run`.

``tracegraph.open_run``, ``tracegraph.train``, ``tracegraph.import_pykeen`` and
``tracegraph.import_checkpoint`` are these functions (imported lazily by ``tracegraph``).
"""

from __future__ import annotations

import dataclasses
from typing import Any
from pathlib import Path

import torch

from tracegraph.errors import TracegraphError
from tracegraph.kg.run import Run


def open_run(path: str | Path, device: str | torch.device = "cpu", *, data_files: dict | None = None) -> Run:
    """Open a run directory for scoring on ``device``.

    The directory is one written by ``tracegraph train`` or ``tracegraph import`` (or one of its
    checkpoint files). Nothing heavy is read until used; see :class:`Run`.

    >>> run = open_run(RUN_DIR)          # RUN_DIR: a 2-epoch UMLS run in tests/kg/test_run_api.py
    >>> len(run.entities), len(run.relations), run.checkpoint.name
    (135, 46, 'best_model.pt')

    Args:
        path: A run directory or one of its checkpoint files.
        device: Where the model is scored.
        data_files: ``{"train": path, ...}``: files to use in place of the ones the run recorded
            (a training file edited since training, say), as they are, with a warning when they
            differ from the recorded ones.

    Returns:
        The run.
    """
    return Run(path, device, data_files=data_files)


# ConvE's sizes and dropouts: flat keywords here and flags on the CLI, `model={...}` in TrainConfig
MODEL_SETTINGS = (
    "embedding_dim",
    "embedding_height",
    "embedding_width",
    "output_channels",
    "kernel_size",
    "input_dropout",
    "feature_map_dropout",
    "output_dropout",
    "entity_dropout",
    "relation_dropout",
    "reciprocal",
)


def train(config=None, *, quiet: bool = False, **settings) -> Run:
    """Train ConvE (what ``tracegraph train`` does) and return the finished run, opened.

    Args:
        config: a :class:`~tracegraph.kg.model.train.TrainConfig` or a dict of its fields (optional).
        quiet: no progress bar and no per-epoch log lines (warnings still show).
        **settings: ``tracegraph train``'s options with ``_`` (``train``, ``output_dir``, ``valid``,
            ``test``, ``epochs``, ``batch_size``, ``learning_rate``, ``label_smoothing``, …, and the
            model's ``embedding_dim``, ``embedding_height``, ``embedding_width``, ``output_channels``,
            ``kernel_size``, the dropouts and ``reciprocal``); ``model={...}`` is accepted too. The
            signature shown by ``help()`` lists every one.

    Returns:
        The trained run (a :class:`~tracegraph.kg.run.Run`).

    Raises:
        TracegraphError: an unknown setting (named).
    """
    from tracegraph.kg.model.train import TrainConfig, train as run_training
    from tracegraph.runtime.progress import quiet as silenced, setup_logging

    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(settings) - fields - set(MODEL_SETTINGS))
    if unknown:
        raise TracegraphError(
            f"train() got unknown setting(s) {', '.join(map(repr, unknown))}; see help(tracegraph.train)"
        )
    flat_model = {k: settings.pop(k) for k in MODEL_SETTINGS if k in settings}
    if isinstance(config, TrainConfig):
        base = dataclasses.asdict(config)
    else:
        base = dict(config) if config else {}
        bad = sorted(set(base) - fields)
        if bad:
            raise TracegraphError(f"train() got unknown setting(s) {', '.join(map(repr, bad))} in config")
    fields_given = {**base, **settings}
    fields_given["model"] = {**dict(fields_given.get("model") or {}), **flat_model}
    values: dict[str, Any] = {k: str(v) if isinstance(v, Path) else v for k, v in fields_given.items()}
    cfg = TrainConfig(**values)
    if quiet:
        with silenced():
            run_training(cfg)
    else:
        setup_logging()  # progress in Python by default, as on the command line
        run_training(cfg)
    return Run(cfg.output_dir, cfg.device)


def _train_signature():
    """``help(tracegraph.train)`` lists every setting with its default."""
    import inspect

    from tracegraph.kg.model.conve import ConvEConfig
    from tracegraph.kg.model.train_config import TrainConfig

    P = inspect.Parameter
    params = [P("config", P.POSITIONAL_OR_KEYWORD, default=None), P("quiet", P.KEYWORD_ONLY, default=False)]
    for f in dataclasses.fields(TrainConfig):
        default = (
            f.default
            if f.default is not dataclasses.MISSING
            else (f.default_factory() if f.default_factory is not dataclasses.MISSING else P.empty)
        )
        params.append(P(f.name, P.KEYWORD_ONLY, default=None if default is P.empty else default))
    model_defaults = {f.name: f.default for f in dataclasses.fields(ConvEConfig)}
    params += [P(k, P.KEYWORD_ONLY, default=model_defaults[k]) for k in MODEL_SETTINGS]
    return inspect.Signature(params, return_annotation="Run")


train.__signature__ = _train_signature()  # type: ignore[attr-defined]  # help() lists every setting


def import_pykeen(model_file, output_dir, **options) -> Run:
    """Import a PyKEEN ConvE into a run directory (``tracegraph import pykeen``).

    What was recorded (source, notes, learning rate) is ``run.config``.

    Args:
        model_file: A whole pickled PyKEEN model, or its state dict.
        output_dir: The run directory to write.
        **options: As :func:`tracegraph.kg.model.pykeen_import.import_pykeen` (``triples_factory_dir``,
            ``trust_pickle``, ``lr``...).

    Returns:
        The imported run.

    Raises:
        TracegraphError: If the id maps are not given, or the model and maps disagree.
        DataError: If a file is missing or not a PyKEEN model.
    """
    from tracegraph.kg.model.pykeen_import import import_pykeen as write

    write(model_file, output_dir, **options)
    return Run(output_dir)


def import_checkpoint(file, output_dir, entity_to_id, relation_to_id, **options) -> Run:
    """Import an original-research-scripts ConvE checkpoint into a run directory (``tracegraph import checkpoint``).

    Args:
        file: The checkpoint (``model_state_dict`` + ``model_config``).
        output_dir: The run directory to write.
        entity_to_id: A ``label<TAB>index`` entity map.
        relation_to_id: A ``label<TAB>index`` relation map.
        **options: As :func:`tracegraph.kg.model.importers.import_checkpoint` (``trust_pickle``,
            ``lr``, ``label_smoothing``).

    Returns:
        The imported run.

    Raises:
        TracegraphError: If the weights and maps disagree.
        DataError: If a file is missing or not such a checkpoint.
    """
    from tracegraph.kg.model.importers import import_checkpoint as write

    write(file, output_dir, entity_to_id, relation_to_id, **options)
    return Run(output_dir)


__all__ = ["open_run", "train", "import_pykeen", "import_checkpoint"]
