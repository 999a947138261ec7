"""The Python API's entry points, each returning a :class:`~tracegraph.kg.run.Run`.

``tracegraph.open_run``, ``tracegraph.train``, ``tracegraph.import_pykeen`` and
``tracegraph.import_checkpoint`` are these functions (imported lazily by ``tracegraph``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from tracegraph.errors import TracegraphError
from tracegraph.kg.run import Run


def open_run(path: str | Path, device: str | torch.device = "cpu") -> Run:
    """Open a run directory written by ``tracegraph train`` or ``tracegraph import`` (or one of its
    checkpoint files) for scoring on ``device``. Nothing heavy is read until used; see :class:`Run`.

    >>> run = open_run(RUN_DIR)          # RUN_DIR: a 2-epoch UMLS run in tests/kg/test_run_api.py
    >>> len(run.entities), len(run.relations), run.checkpoint.name
    (135, 46, 'best_model.pt')
    """
    return Run(path, device)


def train(config=None, **settings) -> Run:
    """Train ConvE (what ``tracegraph train`` does) and return the finished run, opened.

    ``config``: a :class:`~tracegraph.kg.model.train.TrainConfig` or a dict of its fields; ``settings``
    override it (``tracegraph.train(train="train.txt", output_dir="runs/x", epochs=5)`` works too).
    Field names are the CLI's option names with ``_``; ``model`` holds ConvE sizes and dropouts."""
    from tracegraph.kg.model.train import TrainConfig, train as run_training

    if isinstance(config, TrainConfig):
        cfg = dataclasses.replace(config, **settings)
    else:
        fields = {**(dict(config) if config else {}), **settings}
        unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(TrainConfig)})
        if unknown:
            raise TracegraphError(f"unknown training setting(s) {', '.join(unknown)}; see tracegraph.kg.model.train.TrainConfig")
        cfg = TrainConfig(**{k: str(v) if isinstance(v, Path) else v for k, v in fields.items()})
    run_training(cfg)
    return Run(cfg.output_dir, cfg.device)


def import_pykeen(model_file, output_dir, **options) -> Run:
    """A PyKEEN ConvE -> a run directory (``tracegraph import pykeen``); ``options`` as
    :func:`tracegraph.kg.model.importers.import_pykeen` (``triples_factory_dir``, ``trust_pickle``, ``lr``, …).
    What was recorded (source, notes, learning rate) is ``run.config``."""
    from tracegraph.kg.model.importers import import_pykeen as write

    write(model_file, output_dir, **options)
    return Run(output_dir)


def import_checkpoint(file, output_dir, entity_to_id, relation_to_id, **options) -> Run:
    """An earlier-format ConvE checkpoint -> a run directory (``tracegraph import checkpoint``)."""
    from tracegraph.kg.model.importers import import_checkpoint as write

    write(file, output_dir, entity_to_id, relation_to_id, **options)
    return Run(output_dir)


__all__ = ["open_run", "train", "import_pykeen", "import_checkpoint"]
