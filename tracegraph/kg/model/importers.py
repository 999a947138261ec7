"""Bring your own ConvE: turn PyKEEN models and the original research scripts' checkpoints into model dirs.

The result is a normal tracegraph model directory (``config.json`` with the model config and a
``source`` note, ``node_dict.txt``, ``rel_dict.txt``, ``final_model.pt`` and ``best_model.pt``,
all written atomically), so ``evaluate``, ``predict`` and ``explain`` work on it unchanged.

PyKEEN models: kg/model/pykeen_import.py.

**Earlier format**: ``{"model_state_dict": …, "model_config": {num_entities, num_relations,
embedding_dim, embedding_height, embedding_width, …}}`` of a ConvE that concatenates head and
relation along the *width* (an H×2W image) and has no entity bias::

    entity_embeddings.weight -> entity.weight      relation_embeddings.weight -> relation.weight
    conv1.*                  -> conv.*             fc.*                       -> fc.*
    bn0.* / bn1.* / bn2.*    -> bn0.* / bn1.* / bn2.*
    (b or bias [N], if present -> entity_bias; otherwise the model has entity_bias=False)

Its relation table has R rows (``reciprocal=False``) or 2R rows with r⁻¹ at row R + r
(``reciprocal=True``), R being the number of lines of the relation map.
"""

from __future__ import annotations

import gzip
import pathlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tracegraph import __version__
from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.model.model_io import model_payload
from tracegraph.kg.data.split import write_triples
from tracegraph.kg.data.idmap import IdMap
from tracegraph.runtime.checkpoints import atomic_write_json, save_checkpoint
from tracegraph.runtime.textfiles import strip_bom

PICKLE_HINT = (
    "it is a pickled Python object (e.g. a whole model saved with torch.save(model)); loading it runs "
    "code from the file. If you made this file yourself, pass --trust-pickle"
)

# --------------------------------------------------------------------------- loading files


def load_torch_file(path: str | Path, trust_pickle: bool = False) -> Any:
    """Load a torch file with ``weights_only=True``, or fully unpickled if the user trusts it.

    Args:
        path: The file.
        trust_pickle: Fall back to full unpickling (which can run code) when the safe load fails.

    Returns:
        The loaded object.

    Raises:
        DataError: If the file is missing or cannot be loaded; a refused safe load says why and
            what to do.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError("file not found", p)
    try:
        return torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001
        if not trust_pickle:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise DataError(f"cannot load safely (weights_only): {first} — {PICKLE_HINT}", p) from None
    try:
        return torch.load(p, map_location="cpu", weights_only=False)
    except ModuleNotFoundError as e:
        raise DataError(
            f"unpickling needs the module {e.name!r}: install it (for PyKEEN models: pip install 'tracegraph[import]')",
            p,
        ) from None
    except Exception as e:  # noqa: BLE001
        raise DataError(f"cannot load: {e}", p) from None


def _read_id_tsv_gz(path: Path, what: str) -> IdMap:
    """PyKEEN's ``entity_to_id.tsv.gz``: header ``id<TAB>label``, one row per id."""
    if not path.is_file():
        raise DataError(f"{what} not found", path)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = strip_bom(f.read(), path).splitlines()
    if not lines:
        raise DataError(f"empty {what}", path)
    header = lines[0].split("\t")
    if "id" not in header or "label" not in header:
        raise DataError(f"{what}: expected a header with 'id' and 'label', got {lines[0]!r}", path, 1)
    ci, cl = header.index("id"), header.index("label")
    labels: dict[int, str] = {}
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cols = line.split("\t")
        try:
            labels[int(cols[ci])] = cols[cl]
        except (ValueError, IndexError):
            raise DataError(f"{what}: bad row {line!r}", path, n) from None
    if sorted(labels) != list(range(len(labels))):
        raise DataError(f"{what}: ids are not 0..{len(labels) - 1}", path)
    return IdMap([labels[i] for i in range(len(labels))])


@dataclass
class FactoryInfo:
    """What a PyKEEN triples factory directory provides.

    Attributes:
        entities: The entity map.
        relations: The relation map (base relations).
        create_inverse_triples: Whether the factory made inverse triples; None when unknown.
        train_ids: The base (non-inverse) training triples as ids, ``[N, 3]``; None if unreadable.
        notes: What could not be read and what was inferred instead.
    """

    entities: IdMap
    relations: IdMap
    create_inverse_triples: bool | None = None
    train_ids: np.ndarray | None = None  # base (non-inverse) training triples, as ids
    notes: list[str] = field(default_factory=list)


def read_triples_factory_dir(d: str | Path) -> FactoryInfo:
    """Read a PyKEEN ``TriplesFactory.to_path_binary`` directory without unpickling.

    This is the ``training_triples/`` folder of a saved pipeline: the id maps come from its
    ``.tsv.gz`` files, the inverse-triples flag from ``base.pth`` when it loads with weights_only,
    the triples from ``numeric_triples.tsv.gz``.

    Args:
        d: The directory.

    Returns:
        What the directory provides.

    Raises:
        DataError: If the directory or an id map is missing or malformed.
    """
    d = Path(d)
    if not d.is_dir():
        raise DataError("triples factory directory not found", d)
    info = FactoryInfo(
        _read_id_tsv_gz(d / "entity_to_id.tsv.gz", "entity_to_id"),
        _read_id_tsv_gz(d / "relation_to_id.tsv.gz", "relation_to_id"),
    )
    base = d / "base.pth"
    if base.is_file():
        try:  # PyKEEN's metadata holds the source path as a pathlib.Path: allow that class, nothing else
            with torch.serialization.safe_globals(
                [pathlib.PosixPath, pathlib.PurePosixPath, pathlib.WindowsPath, pathlib.PureWindowsPath]
            ):
                meta = torch.load(base, map_location="cpu", weights_only=True)
            info.create_inverse_triples = bool(meta["create_inverse_triples"])
        except Exception:  # noqa: BLE001 - metadata holding other objects: infer from shapes instead
            info.notes.append(
                "base.pth did not load with weights_only; inverse triples inferred from the relation table"
            )
    trip = d / "numeric_triples.tsv.gz"
    if trip.is_file():
        with gzip.open(trip, "rt", encoding="utf-8") as f:
            rows = [line.split("\t") for line in strip_bom(f.read(), trip).splitlines()[1:] if line.strip()]
        try:
            info.train_ids = np.asarray(rows, dtype=np.int64).reshape(-1, 3)
        except ValueError:
            info.notes.append("numeric_triples.tsv.gz unreadable; no train.txt written")
    return info


def _find_key(obj: Any, names: tuple[str, ...]):
    """First value of any of ``names`` in a nested dict (PyKEEN configs nest model_kwargs etc.)."""
    if isinstance(obj, dict):
        for n in names:
            if n in obj and not isinstance(obj[n], dict):
                return obj[n]
        children = obj.values()
    elif isinstance(obj, (list, tuple)):
        children = obj
    else:
        return None
    for v in children:
        found = _find_key(v, names)
        if found is not None:
            return found
    return None


# --------------------------------------------------------------------------- earlier format

_OLD_LAYERS = {
    "entity_embeddings.weight": "entity.weight",
    "relation_embeddings.weight": "relation.weight",
    "conv1.": "conv.",
    "bn0.": "bn0.",
    "bn1.": "bn1.",
    "bn2.": "bn2.",
    "fc.": "fc.",
}


def earlier_state_to_tracegraph(
    state: dict, model_config: dict, num_relations: int
) -> tuple[ConvEConfig, dict, list[str]]:
    """Map the original research scripts' ConvE (width concatenation, no entity bias) onto tracegraph's.

    Args:
        state: The old state dict.
        model_config: The checkpoint's ``model_config``.
        num_relations: Base relations in the relation map.

    Returns:
        The model config, the tracegraph state dict, and notes on what was inferred.

    Raises:
        TracegraphError: If the state or config is incomplete or disagrees with the maps.
    """
    notes: list[str] = []
    need = ["entity_embeddings.weight", "relation_embeddings.weight", "conv1.weight", "fc.weight"]
    missing = [k for k in need if k not in state]
    if missing:
        raise TracegraphError(f"not an earlier-format ConvE state (missing {', '.join(missing)})")
    try:
        N, d = int(model_config["num_entities"]), int(model_config["embedding_dim"])
        H, W = int(model_config["embedding_height"]), int(model_config["embedding_width"])
    except (KeyError, TypeError, ValueError) as e:
        raise TracegraphError(
            f"model_config lacks {e} (needs num_entities, num_relations, embedding_dim, "
            f"embedding_height, embedding_width)"
        ) from None
    E, Rw = state["entity_embeddings.weight"], state["relation_embeddings.weight"]
    if tuple(E.shape) != (N, d):
        raise TracegraphError(f"entity table {tuple(E.shape)} does not match model_config ({N}, {d})")
    rows = Rw.shape[0]
    if rows == 2 * num_relations:
        reciprocal = True
        notes.append(f"relation table has 2×{num_relations} rows: rows R..2R-1 taken as the inverses r⁻¹ = r + R")
    elif rows == num_relations:
        reciprocal = False
    else:
        raise TracegraphError(
            f"relation table has {rows} rows; the relation map has {num_relations} relations (expected R or 2R rows)"
        )
    C, in_ch, kh, kw = state["conv1.weight"].shape
    if in_ch != 1 or kh != kw:
        raise TracegraphError(f"conv1 {tuple(state['conv1.weight'].shape)}: need 1 input channel and a square kernel")
    bias_key = next((k for k in ("b", "bias", "entity_bias") if k in state), None)
    drop = {
        k: float(model_config[k])
        for k in ("input_dropout", "feature_map_dropout", "output_dropout")
        if k in model_config
    }
    if "hidden_drop" in model_config:
        drop.setdefault("output_dropout", float(model_config["hidden_drop"]))
    if "feat_drop" in model_config:
        drop.setdefault("feature_map_dropout", float(model_config["feat_drop"]))
    mcfg = ConvEConfig(
        num_entities=N,
        num_relations=num_relations,
        embedding_dim=d,
        embedding_height=H,
        embedding_width=W,
        output_channels=C,
        kernel_size=kh,
        reciprocal=reciprocal,
        entity_bias=bias_key is not None,
        concat_axis="width",
        **drop,
    )
    out = {}
    for k, v in state.items():
        if k == bias_key:
            out["entity_bias"] = v.reshape(N)
            continue
        for src, dst in _OLD_LAYERS.items():
            if k == src or (src.endswith(".") and k.startswith(src)):
                out[dst + k[len(src) :] if src.endswith(".") else dst] = v
                break
        else:
            raise TracegraphError(f"unexpected weight {k!r} in the earlier-format state dict")
    if mcfg.flat_size != state["fc.weight"].shape[1]:
        raise TracegraphError(
            f"fc expects {state['fc.weight'].shape[1]} inputs; a width-concatenated "
            f"{H}×{2 * W} image gives {mcfg.flat_size}: check embedding_height/width"
        )
    return mcfg, out, notes


def import_checkpoint(
    file: str | Path,
    output_dir: str | Path,
    entity_to_id: str | Path,
    relation_to_id: str | Path,
    trust_pickle: bool = False,
    lr: float | None = None,
    label_smoothing: float | None = None,
) -> dict:
    """Write a tracegraph model directory from an original-research-scripts checkpoint and id maps.

    Args:
        file: The checkpoint (``model_state_dict`` + ``model_config``).
        output_dir: The model directory to write.
        entity_to_id: A ``label<TAB>index`` entity map.
        relation_to_id: A ``label<TAB>index`` relation map.
        trust_pickle: Allow full unpickling of ``file``.
        lr: The learning rate to record; default from the checkpoint.
        label_smoothing: The label smoothing to record; default from the checkpoint.

    Returns:
        The written config.json content.

    Raises:
        TracegraphError: If the weights and maps disagree.
        DataError: If a file is missing or not such a checkpoint.
    """
    payload = load_torch_file(file, trust_pickle)
    if not isinstance(payload, dict) or "model_state_dict" not in payload or "model_config" not in payload:
        raise DataError("not an earlier-format checkpoint (needs 'model_state_dict' and 'model_config')", Path(file))
    ents, rels = IdMap.read(entity_to_id, "entity map"), IdMap.read(relation_to_id, "relation map")
    mc = dict(payload["model_config"])
    mcfg, state, notes = earlier_state_to_tracegraph(payload["model_state_dict"], mc, len(rels))
    if mcfg.num_entities != len(ents):
        raise TracegraphError(f"the model has {mcfg.num_entities} entities, the entity map {len(ents)}")
    if "num_relations" in mc and int(mc["num_relations"]) not in (len(rels), mcfg.num_relation_rows):
        raise TracegraphError(f"model_config num_relations={mc['num_relations']} but the relation map has {len(rels)}")
    if lr is None:
        lr = _find_key({k: v for k, v in payload.items() if k != "model_state_dict"}, ("lr", "learning_rate"))
    if label_smoothing is None:
        label_smoothing = _find_key(mc, ("label_smoothing",))
    source = {
        "format": "earlier checkpoint",
        "file": str(Path(file).resolve()),
        "layout": "head and relation concatenated along the width (H×2W image), "
        + ("entity bias" if mcfg.entity_bias else "no entity bias"),
    }
    epoch = payload.get("epoch") if isinstance(payload.get("epoch"), int) else None
    return write_model_dir(
        output_dir, mcfg, state, ents, rels, source, notes, lr=lr, label_smoothing=label_smoothing, epoch=epoch
    )


# --------------------------------------------------------------------------- writing


def write_model_dir(
    output_dir,
    mcfg: ConvEConfig,
    state: dict,
    entities: IdMap,
    relations: IdMap,
    source: dict,
    notes: list[str],
    lr: float | None = None,
    label_smoothing: float | None = None,
    epoch: int | None = None,
    train_ids: np.ndarray | None = None,
) -> dict:
    """Check that the weights load into ConvE, then write the model directory, each file atomically.

    Writes the id maps, ``final_model.pt`` and ``best_model.pt`` (the same weights), config.json and,
    when known, ``train.txt``.

    Args:
        output_dir: The model directory.
        mcfg: The model config.
        state: The ConvE state dict.
        entities: The entity map.
        relations: The relation map.
        source: Where the weights came from, recorded in config.json.
        notes: What was inferred, recorded in config.json.
        lr: The learning rate; None records 1.0 with a note.
        label_smoothing: The label smoothing; None records 0.0 with a note.
        epoch: The epoch to record; None records 1.
        train_ids: The training triples as ids, written as ``train.txt``; None for none.

    Returns:
        The written config.json content.

    Raises:
        TracegraphError: If the weights do not fit the config.
    """
    model = ConvE(mcfg)
    for name, buf in model.state_dict().items():  # old BatchNorms may lack num_batches_tracked
        if name.endswith("num_batches_tracked") and name not in state:
            state[name] = torch.zeros_like(buf)
    try:
        model.load_state_dict(
            {k: v.detach().to(torch.float32) if v.is_floating_point() else v for k, v in state.items()}
        )
    except RuntimeError as e:
        raise TracegraphError(f"the mapped weights do not fit the ConvE config: {e}") from None
    notes = list(notes)
    if lr is None:
        notes.append(
            "learning rate unknown in the source: lr set to 1.0 (TracIn scores are then unscaled; "
            "re-import with --lr to weight them)"
        )
        lr = 1.0
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    entities.write(out / "node_dict.txt")
    relations.write(out / "rel_dict.txt")
    train_cfg: dict = {"label_smoothing": float(label_smoothing) if label_smoothing is not None else 0.0}
    if label_smoothing is None:
        notes.append("label smoothing unknown in the source: 0.0 recorded (explain --label-smoothing overrides)")
    if train_ids is not None and len(train_ids):
        e, r = entities.labels, relations.labels
        write_triples(out / "train.txt", ((e[h], r[k], e[t]) for h, k, t in train_ids.tolist()))
        train_cfg["train"] = str((out / "train.txt").resolve())
    payload = model_payload(model, epoch or 1, lr, {"imported": True})
    save_checkpoint(out / "final_model.pt", payload)
    save_checkpoint(out / "best_model.pt", payload)
    summary = {
        "model": mcfg.to_dict(),
        "train": train_cfg,
        "source": dict(source, notes=notes),
        "imported": True,
        "lr": float(lr),
        "versions": {"tracegraph": __version__, "torch": torch.__version__},
    }
    atomic_write_json(out / "config.json", summary)
    return summary
