"""Bring your own ConvE: turn PyKEEN models and the original research scripts' checkpoints into model dirs.

The result is a normal tracegraph model directory (``config.json`` with the model config and a
``source`` note, ``node_dict.txt``, ``rel_dict.txt``, ``final_model.pt`` and ``best_model.pt``,
all written atomically), so ``evaluate``, ``predict`` and ``explain`` work on it unchanged.

**PyKEEN** (``pykeen.models.ConvE``, 1.x). Key by key (PyKEEN → tracegraph)::

    entity_representations.0._embeddings.weight  [N, d]   -> entity.weight         (tied: heads and tails)
    entity_representations.1._embeddings.weight  [N, 1]   -> entity_bias  [N]      (the tail bias)
    relation_representations.0._embeddings.weight [R', d] -> relation.weight       (rows permuted, below)
    interaction.hr2d.0.*   BatchNorm2d(1)                 -> bn0.*
    interaction.hr2d.1     Dropout(p)                     -> input_dropout = p
    interaction.hr2d.2.*   Conv2d(1, C, k×k)              -> conv.*
    interaction.hr2d.3.*   BatchNorm2d(C)                 -> bn1.*
    interaction.hr2d.5     Dropout2d(p)                   -> feature_map_dropout = p
    interaction.hr1d.0.*   Linear(F, d)                   -> fc.*
    interaction.hr1d.1     Dropout(p)                     -> output_dropout = p
    interaction.hr1d.2.*   BatchNorm1d(d)                 -> bn2.*

PyKEEN's image: h and r each viewed as ``[input_channels=1, H, W]`` and concatenated along the
height (dim −2) into a 2H×W image: our ``concat_axis="height"`` with embedding_height=H,
embedding_width=W. Inverse relations (``create_inverse_triples=True``): PyKEEN's
``DefaultRelationInverter`` stores relation r (its ``relation_to_id``) at row 2r and r⁻¹ at row
2r+1; tracegraph stores r at row r and r⁻¹ at row R + r. So ``relation.weight[:R] = pk[0::2]``
and ``relation.weight[R:] = pk[1::2]``. Without inverse triples the rows map one to one and the
model is imported with ``reciprocal=False``.

PyKEEN saves whole models with ``torch.save(model)`` (a pickle of the module): loading that
runs arbitrary code from the file, so it needs ``trust_pickle=True`` and PyKEEN installed.
A PyKEEN *state dict* (``torch.save(model.state_dict())``) loads with ``weights_only=True``;
the image shape is read from a hyper-parameter JSON or inferred from the weight shapes.

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
from tracegraph.kg.data.triples import IdMap
from tracegraph.runtime.checkpoints import atomic_write_json, read_json, save_checkpoint
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


# --------------------------------------------------------------------------- PyKEEN


_PK = {
    "entity": "entity_representations.0._embeddings.weight",
    "bias": "entity_representations.1._embeddings.weight",
    "relation": "relation_representations.0._embeddings.weight",
}
_PK_LAYERS = {
    "interaction.hr2d.0.": "bn0.",
    "interaction.hr2d.2.": "conv.",
    "interaction.hr2d.3.": "bn1.",
    "interaction.hr1d.0.": "fc.",
    "interaction.hr1d.2.": "bn2.",
}


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


def _infer_image(d: int, C: int, kh: int, kw: int, flat: int) -> tuple[int, int]:
    cands = [
        (h, d // h)
        for h in range(1, d + 1)
        if d % h == 0 and 2 * h >= kh and d // h >= kw and C * (2 * h - kh + 1) * (d // h - kw + 1) == flat
    ]
    if len(cands) != 1:
        raise TracegraphError(
            f"cannot tell the ConvE image shape from the weights ({len(cands)} candidates {cands}); "
            f"give --hyperparameters JSON with embedding_height and embedding_width"
        )
    return cands[0]


def pykeen_state_to_tracegraph(
    state: dict, num_real_relations: int, hyper: dict | None = None, inverse: bool | None = None
) -> tuple[ConvEConfig, dict, list[str]]:
    """Map a PyKEEN ConvE state dict onto tracegraph's ConvE.

    Args:
        state: The PyKEEN state dict.
        num_real_relations: Base relations in the relation map.
        hyper: Known hyperparameters (embedding height/width, dropouts), if any.
        inverse: Whether the model has inverse relations; None to infer it from the table's rows.

    Returns:
        The model config, the tracegraph state dict, and notes on what was inferred.

    Raises:
        TracegraphError: If the state is not a supported PyKEEN ConvE or disagrees with the maps.
    """
    hyper = hyper or {}
    notes: list[str] = []
    missing = [k for k in (*_PK.values(), "interaction.hr2d.2.weight", "interaction.hr1d.0.weight") if k not in state]
    if missing:
        bn = "interaction.hr2d.1.weight" in state or "interaction.hr1d.1.weight" in state
        raise TracegraphError(
            "not a PyKEEN ConvE state (missing "
            + ", ".join(missing)
            + ")"
            + ("; ConvE with apply_batch_normalization=False is not supported" if bn else "")
        )
    E, Rrows = state[_PK["entity"]], state[_PK["relation"]]
    N, d = E.shape
    conv_w = state["interaction.hr2d.2.weight"]
    C, in_ch, kh, kw = conv_w.shape
    if in_ch != 1:
        raise TracegraphError(f"PyKEEN ConvE with input_channels={in_ch} is not supported (tracegraph uses 1)")
    if kh != kw:
        raise TracegraphError(f"PyKEEN ConvE kernel {kh}×{kw} is not square; tracegraph needs a k×k kernel")
    if inverse is None:
        if Rrows.shape[0] == 2 * num_real_relations:
            inverse = True
        elif Rrows.shape[0] == num_real_relations:
            inverse = False
        else:
            raise TracegraphError(
                f"relation table has {Rrows.shape[0]} rows; the relation map has "
                f"{num_real_relations} relations (expected R or 2R rows)"
            )
    expected_rows = num_real_relations * (2 if inverse else 1)
    if Rrows.shape[0] != expected_rows:
        raise TracegraphError(
            f"relation table has {Rrows.shape[0]} rows, expected {expected_rows} "
            f"({num_real_relations} relations, inverse triples {'on' if inverse else 'off'})"
        )
    H, W = hyper.get("embedding_height"), hyper.get("embedding_width")
    if H is None or W is None:
        if H is not None:
            W = d // int(H)
        elif W is not None:
            H = d // int(W)
        else:
            H, W = _infer_image(d, C, kh, kw, state["interaction.hr1d.0.weight"].shape[1])
            notes.append(f"image shape {H}×{W} per embedding inferred from the weight shapes")
    dropouts = {k: float(hyper[k]) for k in ("input_dropout", "feature_map_dropout", "output_dropout") if k in hyper}
    if len(dropouts) < 3:
        notes.append(
            "dropout rates not in the source: tracegraph defaults used (they do not change scores in eval mode)"
        )
    mcfg = ConvEConfig(
        num_entities=N,
        num_relations=num_real_relations,
        embedding_dim=d,
        embedding_height=int(H),
        embedding_width=int(W),
        output_channels=C,
        kernel_size=kh,
        reciprocal=bool(inverse),
        entity_bias=True,
        concat_axis="height",
        **dropouts,
    )
    out = {"entity.weight": E, "entity_bias": state[_PK["bias"]].reshape(N)}
    # PyKEEN (DefaultRelationInverter): r -> row 2r, r⁻¹ -> row 2r+1; tracegraph: r -> r, r⁻¹ -> R + r
    out["relation.weight"] = torch.cat([Rrows[0::2], Rrows[1::2]]) if inverse else Rrows
    for k, v in state.items():
        for src, dst in _PK_LAYERS.items():
            if k.startswith(src):
                out[dst + k[len(src) :]] = v
    unused = [k for k in state if k not in _PK.values() and not any(k.startswith(s) for s in _PK_LAYERS)]
    if unused:
        raise TracegraphError(f"unexpected PyKEEN weights {unused[:5]}: is this a plain ConvE?")
    return mcfg, out, notes


def _pykeen_module_info(module) -> tuple[dict, dict, bool | None]:
    """The state dict, hyper-parameters and inverse flag of an unpickled PyKEEN ConvE."""
    if type(module).__name__ != "ConvE" or not hasattr(module, "interaction"):
        raise TracegraphError(f"expected a PyKEEN ConvE model, got {type(module).__module__}.{type(module).__name__}")
    inter = module.interaction
    si = inter.shape_info
    hyper = {"embedding_height": si.image_height, "embedding_width": si.image_width}
    drops = [m.p for m in inter.hr2d if isinstance(m, (torch.nn.Dropout, torch.nn.Dropout2d))]
    drops1 = [m.p for m in inter.hr1d if isinstance(m, torch.nn.Dropout)]
    if len(drops) == 2 and len(drops1) == 1:
        hyper.update(input_dropout=drops[0], feature_map_dropout=drops[1], output_dropout=drops1[0])
    for m in list(inter.hr2d) + list(inter.hr1d):
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.eps != 1e-5:
            raise TracegraphError(f"BatchNorm eps {m.eps} differs from tracegraph's 1e-5")
    return module.state_dict(), hyper, getattr(module, "use_inverse_triples", None)


def import_pykeen(
    model_file: str | Path,
    output_dir: str | Path,
    triples_factory_dir: str | Path | None = None,
    entity_to_id: str | Path | None = None,
    relation_to_id: str | Path | None = None,
    hyperparameters: str | Path | None = None,
    trust_pickle: bool = False,
    lr: float | None = None,
    label_smoothing: float | None = None,
) -> dict:
    """Write a tracegraph model directory from a PyKEEN ConvE model and its id maps.

    Args:
        model_file: A whole pickled PyKEEN model, or its state dict.
        output_dir: The model directory to write.
        triples_factory_dir: The pipeline's ``training_triples/`` directory (id maps, inverse flag,
            training triples); otherwise give both id map files.
        entity_to_id: A ``label<TAB>index`` entity map.
        relation_to_id: A ``label<TAB>index`` relation map.
        hyperparameters: A JSON file with the training hyperparameters, if available.
        trust_pickle: Allow full unpickling of ``model_file``.
        lr: The learning rate to record (it weights TracIn scores); default from the hyperparameters.
        label_smoothing: The label smoothing to record; default from the hyperparameters.

    Returns:
        The written config.json content.

    Raises:
        TracegraphError: If the id maps are not given, or the model and maps disagree.
        DataError: If a file is missing or not a PyKEEN model.
    """
    if triples_factory_dir is None and (entity_to_id is None or relation_to_id is None):
        raise TracegraphError("give --triples-factory-dir, or both --entity-to-id and --relation-to-id")
    obj = load_torch_file(model_file, trust_pickle)
    hyper = read_json(hyperparameters) if hyperparameters else {}
    flat_hyper = {
        k: _find_key(hyper, names)
        for k, names in {
            "embedding_height": ("embedding_height",),
            "embedding_width": ("embedding_width",),
            "input_dropout": ("input_dropout",),
            "feature_map_dropout": ("feature_map_dropout",),
            "output_dropout": ("output_dropout",),
            "lr": ("lr", "learning_rate"),
            "label_smoothing": ("label_smoothing",),
            "create_inverse_triples": ("create_inverse_triples",),
            "epoch": ("num_epochs", "epochs"),
        }.items()
    }
    flat_hyper = {k: v for k, v in flat_hyper.items() if v is not None}
    inverse = flat_hyper.get("create_inverse_triples")
    if isinstance(obj, torch.nn.Module):
        state, mod_hyper, mod_inverse = _pykeen_module_info(obj)
        flat_hyper = {**mod_hyper, **{k: v for k, v in flat_hyper.items() if k not in mod_hyper}}
        inverse = mod_inverse if mod_inverse is not None else inverse
        kind = "pickled PyKEEN model (loaded with --trust-pickle)"
    elif isinstance(obj, dict) and all(isinstance(v, torch.Tensor) for v in obj.values()):
        state, kind = obj, "PyKEEN state dict (weights_only)"
    else:
        raise DataError("neither a PyKEEN model nor a state dict of tensors", Path(model_file))

    notes: list[str] = []
    train_ids = None
    if triples_factory_dir is not None:
        info = read_triples_factory_dir(triples_factory_dir)
        ents, rels, notes = info.entities, info.relations, list(info.notes)
        if info.create_inverse_triples is not None:
            if inverse is not None and bool(inverse) != info.create_inverse_triples:
                raise TracegraphError("the model and the triples factory disagree on create_inverse_triples")
            inverse = info.create_inverse_triples
        train_ids = info.train_ids
    else:
        ents, rels = IdMap.read(entity_to_id, "entity map"), IdMap.read(relation_to_id, "relation map")
    mcfg, tg_state, more = pykeen_state_to_tracegraph(state, len(rels), flat_hyper, inverse)
    notes += more
    if mcfg.num_entities != len(ents):
        raise TracegraphError(f"the model has {mcfg.num_entities} entities, the entity map {len(ents)}")
    source = {
        "format": "pykeen",
        "file": str(Path(model_file).resolve()),
        "loaded_as": kind,
        "pykeen_inverse_relation_rows": "2r (r), 2r+1 (r⁻¹) -> r, R+r" if mcfg.reciprocal else "none",
    }
    return write_model_dir(
        output_dir,
        mcfg,
        tg_state,
        ents,
        rels,
        source,
        notes,
        lr=lr if lr is not None else flat_hyper.get("lr"),
        label_smoothing=label_smoothing if label_smoothing is not None else flat_hyper.get("label_smoothing"),
        epoch=flat_hyper.get("epoch"),
        train_ids=train_ids,
    )


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
