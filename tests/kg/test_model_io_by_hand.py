"""Saving and loading a trained model with its id maps, on a run folder written here by hand: what a
checkpoint carries, which checkpoint a folder means, the loaded record (maps, epoch, learning rate,
eval mode, the same scores), and one error naming the file for each way a folder can be wrong."""

import json

import numpy as np
import pytest
import torch

from tracegraph.errors import DataError
from tracegraph.kg.model.conve import ConvE, ConvEConfig
from tracegraph.kg.model.model_io import (
    build_model,
    check_maps,
    list_epoch_checkpoints,
    load_model,
    model_payload,
    read_id_maps,
    resolve_checkpoint,
    run_label_smoothing,
)
from tracegraph.kg.data.idmap import IdMap
from tracegraph.runtime.checkpoints import save_checkpoint

ENTS, RELS = ["aspirin", "headache", "water"], ["treats", "causes"]


def _model(seed=0):
    torch.manual_seed(seed)
    model = ConvE(
        ConvEConfig(
            num_entities=3,
            num_relations=2,
            embedding_dim=12,
            embedding_height=3,
            embedding_width=4,
            output_channels=2,
            reciprocal=True,
        )
    )
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.5)
    return model


def _run(tmp_path, names=("best_model.pt",), epoch=4, lr=0.01):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "node_dict.txt").write_text("".join(f"{e}\t{i}\n" for i, e in enumerate(ENTS)))
    (run / "rel_dict.txt").write_text("".join(f"{r}\t{i}\n" for i, r in enumerate(RELS)))
    model = _model()
    for name in names:
        save_checkpoint(run / name, model_payload(model, epoch, lr, {"mrr": 0.5}))
    return run, model


def test_a_checkpoint_carries_weights_config_epoch_lr_and_plain_metrics():
    model = _model()
    payload = model_payload(model, np.int64(3), np.float32(0.5), {"mrr": 0.25, "ranks": (1, 2)})
    assert set(payload) == {"model", "model_config", "epoch", "lr", "metrics"}
    assert type(payload["epoch"]) is int and payload["epoch"] == 3
    assert type(payload["lr"]) is float and payload["lr"] == 0.5
    assert payload["metrics"] == {"mrr": 0.25, "ranks": [1, 2]}  # as JSON holds it
    assert payload["model_config"]["num_entities"] == 3 and payload["model_config"]["embedding_dim"] == 12
    assert all(torch.equal(payload["model"][k], v) for k, v in model.state_dict().items())


def test_a_run_folder_loads_its_best_model_in_eval_mode_with_its_maps(tmp_path):
    run, model = _run(tmp_path, names=("best_model.pt", "final_model.pt", "checkpoints/epoch_0004.pt"))
    loaded = load_model(run, device="cpu")
    assert loaded.checkpoint == run / "best_model.pt" and loaded.model_dir == run
    assert loaded.entities.labels == ENTS and loaded.relations.labels == RELS
    assert loaded.epoch == 4 and type(loaded.lr) is float and loaded.lr == 0.01
    assert not loaded.model.training
    h, r = torch.tensor([0, 2]), torch.tensor([1, 3])
    with torch.no_grad():
        np.testing.assert_array_equal(loaded.model.score_all(h, r).numpy(), model.eval().score_all(h, r).numpy())


def test_an_epoch_checkpoint_loads_with_the_maps_of_its_run(tmp_path):
    run, _ = _run(tmp_path, names=("checkpoints/epoch_0002.pt",), epoch=2, lr=0.003)
    loaded = load_model(run / "checkpoints" / "epoch_0002.pt")
    assert loaded.model_dir == run and loaded.epoch == 2 and loaded.lr == 0.003
    ents, rels = read_id_maps(run / "checkpoints" / "epoch_0002.pt")
    assert ents.labels == ENTS and rels.labels == RELS


def test_a_checkpoint_without_epoch_or_lr_loads_with_none(tmp_path):
    run, model = _run(tmp_path, names=())
    save_checkpoint(run / "final_model.pt", {"model": model.state_dict(), "model_config": model.config.to_dict()})
    loaded = load_model(run)
    assert loaded.checkpoint == run / "final_model.pt" and loaded.epoch is None and loaded.lr is None


def test_maps_that_do_not_fit_the_model_are_one_error_naming_the_checkpoint(tmp_path):
    run, _ = _run(tmp_path)
    (run / "node_dict.txt").write_text("".join(f"e{i}\t{i}\n" for i in range(4)))
    with pytest.raises(DataError) as e:
        load_model(run)
    assert str(e.value) == f"{run / 'best_model.pt'}: id maps (4 entities, 2 relations) do not match the model (3, 2)"


def test_check_maps_compares_each_count_it_is_given():
    ents, rels = IdMap(ENTS), IdMap(RELS)
    check_maps(ents, rels, {"num_entities": 3, "num_relations": 2}, "ck.pt")
    check_maps(ents, rels, {}, "ck.pt")  # counts not recorded: nothing to compare
    for cfg, shown in (({"num_relations": 3}, "(None, 3)"), ({"num_entities": 2, "num_relations": 2}, "(2, 2)")):
        with pytest.raises(DataError) as e:
            check_maps(ents, rels, cfg, "ck.pt")
        assert str(e.value) == f"ck.pt: id maps (3 entities, 2 relations) do not match the model {shown}"


@pytest.mark.parametrize("missing", ["model", "model_config"])
def test_a_payload_without_weights_or_config_is_not_a_tracegraph_checkpoint(tmp_path, missing):
    payload = model_payload(_model(), 1, 0.1, {})
    del payload[missing]
    with pytest.raises(DataError) as e:
        build_model(payload, tmp_path / "x.pt")
    assert str(e.value) == (
        f"{tmp_path / 'x.pt'}: not a tracegraph checkpoint (needs 'model' and 'model_config'); "
        "use `tracegraph import` for other formats"
    )


def test_weights_of_another_shape_are_one_error_naming_the_checkpoint(tmp_path):
    payload = model_payload(_model(), 1, 0.1, {})
    payload["model_config"] = dict(payload["model_config"], num_entities=5)
    with pytest.raises(DataError) as e:
        build_model(payload, tmp_path / "x.pt")
    assert str(e.value).startswith(f"{tmp_path / 'x.pt'}: weights do not match the model config: ")
    assert e.value.__cause__ is None and e.value.__suppress_context__


def test_a_folder_without_checkpoints_or_a_missing_file_is_one_error(tmp_path):
    with pytest.raises(DataError) as e:
        resolve_checkpoint(tmp_path)
    assert str(e.value) == (
        f"{tmp_path}: no best_model.pt, final_model.pt or checkpoints/epoch_*.pt in model directory"
    )
    with pytest.raises(DataError) as e:
        resolve_checkpoint(tmp_path / "gone.pt")
    assert str(e.value) == f"{tmp_path / 'gone.pt'}: model checkpoint not found"
    (tmp_path / "checkpoints").write_text("a file, not a folder")
    assert list_epoch_checkpoints(tmp_path) == []


@pytest.mark.parametrize("name, what", [("node_dict.txt", "entity map"), ("rel_dict.txt", "relation map")])
def test_an_unreadable_id_map_is_an_error_naming_it(tmp_path, name, what):
    run, _ = _run(tmp_path)
    (run / name).write_text("")
    with pytest.raises(DataError) as e:
        read_id_maps(run)
    assert str(e.value) == f"{run / name}: {what} is empty"


def test_label_smoothing_comes_from_the_run_config_else_zero(tmp_path):
    assert run_label_smoothing(tmp_path) == 0.0  # no config.json
    (tmp_path / "config.json").write_text(json.dumps({"train": {"label_smoothing": 0.2}}))
    assert run_label_smoothing(str(tmp_path)) == 0.2
    (tmp_path / "config.json").write_text(json.dumps({"train": {"label_smoothing": 1}}))
    assert type(run_label_smoothing(tmp_path)) is float and run_label_smoothing(tmp_path) == 1.0
    (tmp_path / "config.json").write_text(json.dumps({"train": {"epochs": 3}}))
    assert run_label_smoothing(tmp_path) == 0.0
    (tmp_path / "config.json").write_text(json.dumps({"model": {}}))
    assert run_label_smoothing(tmp_path) == 0.0


def test_a_folder_with_only_epoch_checkpoints_means_its_last_epoch(tmp_path):
    run, _ = _run(
        tmp_path, names=("checkpoints/epoch_0001.pt", "checkpoints/epoch_0002.pt", "checkpoints/epoch_0003.pt")
    )
    assert resolve_checkpoint(run) == run / "checkpoints" / "epoch_0003.pt"


def test_the_model_is_moved_to_the_device_asked_for(tmp_path):
    run, _ = _run(tmp_path)
    loaded = load_model(run, device="meta")  # a device every machine has, unlike the default cpu
    assert {p.device.type for p in loaded.model.parameters()} == {"meta"}


def test_a_folder_whose_model_file_is_not_a_checkpoint_names_that_file(tmp_path):
    run, _ = _run(tmp_path, names=())
    save_checkpoint(run / "best_model.pt", {"weights": torch.zeros(2)})
    with pytest.raises(DataError) as e:
        load_model(run)
    assert str(e.value).startswith(f"{run / 'best_model.pt'}: not a tracegraph checkpoint")
