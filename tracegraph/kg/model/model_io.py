"""Saving and loading trained ConvE models with their id maps.

A model directory (what ``tracegraph train --output-dir`` writes) holds ``config.json``,
``node_dict.txt``, ``rel_dict.txt``, ``best_model.pt``, ``final_model.pt`` and
``checkpoints/epoch_NNNN.pt``. Every checkpoint carries ``model`` (state dict), ``model_config``,
``epoch`` and ``lr`` (the learning rate used in that epoch, for TracIn).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from tracegraph.errors import DataError
from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.data.idmap import IdMap
from tracegraph.runtime.checkpoints import load_checkpoint, read_json

_EPOCH_RE = re.compile(r"epoch_(\d+)\.pt$")


@dataclass
class LoadedModel:
    """A model loaded from a run directory with its id maps.

    Attributes:
        model: The ConvE model.
        entities: The entity map.
        relations: The relation map.
        checkpoint: The checkpoint the weights came from.
        epoch: The checkpoint's epoch, if recorded.
        lr: The learning rate recorded with it, if any.
        model_dir: The run directory.
    """

    model: ConvE
    entities: IdMap
    relations: IdMap
    checkpoint: Path
    epoch: int | None
    lr: float | None
    model_dir: Path


def model_dir_of(path: Path) -> Path:
    """The run directory of a checkpoint path (``D/best_model.pt``, ``D/checkpoints/epoch_0001.pt``).

    Args:
        path: The checkpoint path.

    Returns:
        ``D``.
    """
    return path.parent.parent if path.parent.name == "checkpoints" else path.parent


def list_epoch_checkpoints(model_dir: str | Path) -> list[Path]:
    """A run's ``checkpoints/epoch_*.pt`` files in epoch order.

    Args:
        model_dir: The run directory.

    Returns:
        The files (empty when there are none).
    """
    d = Path(model_dir) / "checkpoints"
    found = [p for p in d.glob("epoch_*.pt") if _EPOCH_RE.search(p.name)] if d.is_dir() else []
    return sorted(found, key=lambda p: int(_EPOCH_RE.search(p.name).group(1)))


def resolve_checkpoint(path: str | Path) -> Path:
    """The checkpoint a path means: a file itself, or a run directory's best, final or last epoch model.

    Args:
        path: A checkpoint file or run directory.

    Returns:
        The checkpoint file.

    Raises:
        DataError: If the file or any checkpoint in the directory is missing.
    """
    p = Path(path)
    if p.is_dir():
        for name in ("best_model.pt", "final_model.pt"):
            if (p / name).is_file():
                return p / name
        ckpts = list_epoch_checkpoints(p)
        if ckpts:
            return ckpts[-1]
        raise DataError("no best_model.pt, final_model.pt or checkpoints/epoch_*.pt in model directory", p)
    if not p.is_file():
        raise DataError("model checkpoint not found", p)
    return p


def build_model(payload: dict, path: Path) -> ConvE:
    """Build a ConvE model from a checkpoint's payload.

    Args:
        payload: The loaded checkpoint (``model`` and ``model_config``).
        path: The checkpoint file, for error messages.

    Returns:
        The model with its weights.

    Raises:
        DataError: If the payload is not a tracegraph checkpoint or the weights do not fit.
    """
    if "model" not in payload or "model_config" not in payload:
        raise DataError(
            "not a tracegraph checkpoint (needs 'model' and 'model_config'); use `tracegraph import` for other formats",
            path,
        )
    model = ConvE(ConvEConfig.from_dict(payload["model_config"]))
    try:
        model.load_state_dict(payload["model"])
    except RuntimeError as e:
        raise DataError(f"weights do not match the model config: {e}", path) from None
    return model


def model_payload(model: ConvE, epoch: int, lr: float, metrics: dict) -> dict:
    """What every checkpoint carries (plain types only, so that it loads with weights_only).

    Args:
        model: The model.
        epoch: The epoch just finished.
        lr: The learning rate of that epoch.
        metrics: JSON-serialisable metrics.

    Returns:
        The payload for :func:`~tracegraph.runtime.checkpoints.save_checkpoint`.
    """
    return {
        "model": model.state_dict(),
        "model_config": model.config.to_dict(),
        "epoch": int(epoch),
        "lr": float(lr),
        "metrics": json.loads(json.dumps(metrics)),
    }


def read_id_maps(path: str | Path) -> tuple[IdMap, IdMap]:
    """The entity and relation maps of a model directory or checkpoint, without loading weights.

    Args:
        path: A run directory or checkpoint.

    Returns:
        The entity and relation maps.

    Raises:
        DataError: If there is no checkpoint or a map is missing or malformed.
    """
    mdir = model_dir_of(resolve_checkpoint(path))
    return IdMap.read(mdir / "node_dict.txt", "entity map"), IdMap.read(mdir / "rel_dict.txt", "relation map")


def run_label_smoothing(model_dir: str | Path) -> float:
    """The label smoothing a run trained with (its config.json), 0 when unrecorded.

    Args:
        model_dir: The run directory.

    Returns:
        The label smoothing.
    """
    cfg_path = Path(model_dir) / "config.json"
    run_cfg = read_json(cfg_path) if cfg_path.is_file() else {}
    return float(run_cfg.get("train", {}).get("label_smoothing", 0.0))


def check_maps(entities: IdMap, relations: IdMap, model_config: dict, path) -> None:
    """Check that a checkpoint's entity and relation counts agree with the run's id maps.

    Args:
        entities: The entity map.
        relations: The relation map.
        model_config: The checkpoint's model config.
        path: The checkpoint, for the error message.

    Raises:
        DataError: If the counts disagree.
    """
    n_ent, n_rel = model_config.get("num_entities"), model_config.get("num_relations")
    if (n_ent is not None and n_ent != len(entities)) or (n_rel is not None and n_rel != len(relations)):
        raise DataError(
            f"id maps ({len(entities)} entities, {len(relations)} relations) do not match the model ({n_ent}, {n_rel})",
            Path(path),
        )


def load_model(path: str | Path, device: str | torch.device = "cpu") -> LoadedModel:
    """A checkpoint file or a model directory -> ConvE in eval mode plus its id maps.

    Args:
        path: a run directory (its best, else final, else last checkpoint) or one checkpoint file.
        device: where the model is loaded.

    Returns:
        The plain record; :class:`tracegraph.kg.model.store.RunStore` is the cached, lazy view.
    """
    ckpt = resolve_checkpoint(path)
    entities, relations = read_id_maps(ckpt)
    payload = load_checkpoint(ckpt, map_location="cpu")
    check_maps(entities, relations, payload.get("model_config") or {}, ckpt)
    model = build_model(payload, ckpt).to(torch.device(device)).eval()
    lr = payload.get("lr")
    return LoadedModel(
        model,
        entities,
        relations,
        ckpt,
        payload.get("epoch"),
        float(lr) if lr is not None else None,
        model_dir_of(ckpt),
    )
