"""Bring your own PyKEEN ConvE: its weights, key by key, into a tracegraph model directory.

(``pykeen.models.ConvE``, 1.x). Key by key (PyKEEN → tracegraph)::

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

The files are read and the directory written by kg/model/importers.py, as for the other formats.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.model.conve import ConvEConfig
from tracegraph.kg.data.idmap import IdMap
from tracegraph.kg.model.importers import _find_key, load_torch_file, read_triples_factory_dir, write_model_dir
from tracegraph.runtime.checkpoints import read_json


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
