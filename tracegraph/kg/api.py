"""The Python API's entry points, each returning a :class:`~tracegraph.kg.run.Run`.

``tracegraph.open_run``, ``tracegraph.train``, ``tracegraph.import_pykeen`` and
``tracegraph.import_checkpoint`` are these functions (imported lazily by ``tracegraph``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch

from tracegraph.errors import TracegraphError
from tracegraph.kg.run import Run


def open_run(path: str | Path, device: str | torch.device = "cpu") -> Run:
    """Open a trained run for predicting, evaluating and explaining.

    Nothing heavy is read until it is used: the id maps on first access, each checkpoint once.

    Args:
        path: A run directory written by ``tracegraph train`` or ``tracegraph import``, or one
            of its checkpoint files (that checkpoint is then the one scored).
        device: Where the model scores: ``"cpu"``, ``"cuda"``, ``"cuda:N"``.

    Returns:
        The run, a :class:`~tracegraph.kg.run.Run`.

    Raises:
        TracegraphError: The path is not a run directory or a checkpoint of one.

    Example:

    >>> run = open_run(RUN_DIR)          # RUN_DIR: a run trained on the bundled UMLS
    >>> len(run.entities), len(run.relations), run.checkpoint.name
    (135, 46, 'best_model.pt')
    """
    return Run(path, device)


def train(config=None, **settings) -> Run:
    """Train ConvE, as ``tracegraph train`` does, and return the finished run, opened.

    ``tracegraph.train(train="train.txt", valid="valid.txt", output_dir="runs/x", epochs=5)``
    is the whole call; a saved configuration can be passed as ``config`` and adjusted by keywords.

    Args:
        config: A ``TrainConfig`` (``tracegraph.kg.model.train``) or a dict of its fields.
        **settings: Fields that override ``config``: the ``tracegraph train`` option names with
            ``_`` for ``-`` (``train``, ``valid``, ``test``, ``output_dir``, ``epochs``,
            ``learning_rate``, ``device``, …); ``model`` is a dict of ConvE sizes and dropouts
            (``embedding_dim``, ``embedding_height``, ``embedding_width``, ``output_channels``, …).

    Returns:
        The trained run (:class:`~tracegraph.kg.run.Run`) on the training device.

    Raises:
        TracegraphError: An unknown setting, unreadable data, or an output directory that
            already holds another run (pass ``resume=True`` or ``overwrite=True``).
    """
    from tracegraph.kg.model.train import TrainConfig, train as run_training

    if isinstance(config, TrainConfig):
        cfg = dataclasses.replace(config, **settings)
    else:
        fields = {**(dict(config) if config else {}), **settings}
        unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(TrainConfig)})
        if unknown:
            raise TracegraphError(f"unknown training setting(s) {', '.join(unknown)}; see tracegraph.kg.model.train.TrainConfig")
        values: dict[str, Any] = {k: str(v) if isinstance(v, Path) else v for k, v in fields.items()}
        cfg = TrainConfig(**values)
    run_training(cfg)
    return Run(cfg.output_dir, cfg.device)


def import_pykeen(model_file, output_dir, **options) -> Run:
    """Turn a trained PyKEEN ConvE into a run directory (``tracegraph import pykeen``).

    Args:
        model_file: PyKEEN's ``trained_model.pkl`` (needs ``trust_pickle=True``) or a saved
            state dict.
        output_dir: The run directory to write.
        **options: ``triples_factory_dir`` (PyKEEN's saved training triples, for the id maps)
            or both ``entity_to_id`` and ``relation_to_id``; ``hyperparameters`` (PyKEEN's
            JSON, for the model sizes); ``trust_pickle`` (unpickle a whole model: only for files
            you made); ``lr`` and ``label_smoothing`` (what TracIn uses, when the file does not
            record them).

    Returns:
        The imported run (:class:`~tracegraph.kg.run.Run`); ``run.config`` records the
        source, the learning rate and any conversion notes.

    Raises:
        TracegraphError: The file is not a ConvE PyKEEN can describe, or needs ``trust_pickle``.
    """
    from tracegraph.kg.model.importers import import_pykeen as write

    write(model_file, output_dir, **options)
    return Run(output_dir)


def import_checkpoint(file, output_dir, entity_to_id, relation_to_id, **options) -> Run:
    """Turn a ConvE checkpoint of the original research scripts into a run directory.

    The same as ``tracegraph import checkpoint``; the model keeps that format's layout (head and
    relation concatenated along the width, no entity bias).

    Args:
        file: The checkpoint (``model_state_dict`` and ``model_config``).
        output_dir: The run directory to write.
        entity_to_id: The ``node_dict.txt`` id map the checkpoint was trained with.
        relation_to_id: The ``rel_dict.txt`` id map.
        **options: ``trust_pickle`` (unpickle a whole file: only for files you made); ``lr``
            and ``label_smoothing`` (what TracIn uses, when the file does not record them).

    Returns:
        The imported run (:class:`~tracegraph.kg.run.Run`).

    Raises:
        TracegraphError: A file that is missing, unreadable, or does not match the id maps.
    """
    from tracegraph.kg.model.importers import import_checkpoint as write

    write(file, output_dir, entity_to_id, relation_to_id, **options)
    return Run(output_dir)


__all__ = ["open_run", "train", "import_pykeen", "import_checkpoint"]
