"""A run folder's checkpoints are one run's: ``check_one_run`` refuses any mix, in every layout a
run folder can have — a run with ids, a run from before run ids (no id anywhere), a folder with
no config.json, and checkpoints in the legacy (non-zip) torch format."""

import json
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracegraph.errors import TracegraphError
from tracegraph.kg.model.model_io import list_epoch_checkpoints, model_dir_of, resolve_checkpoint
from tracegraph.runtime.rundir import check_one_run, checkpoint_run_id, recorded_run_id

A, B = "a" * 32, "b" * 32


def _folder(root: Path, config_id, ckpt_ids, *, config=True, legacy=False) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    if config:
        cfg = {"train": {}} if config_id is None else {"train": {}, "run_id": config_id}
        (root / "config.json").write_text(json.dumps(cfg))
    (root / "checkpoints").mkdir(exist_ok=True)
    paths = []
    for e, rid in enumerate(ckpt_ids, start=1):
        payload = {"epoch": e, "lr": 0.1, "model": {"w": torch.zeros(2)}}
        if rid is not None:
            payload["run_id"] = rid
        p = root / "checkpoints" / f"epoch_{e:04d}.pt"
        torch.save(payload, p, _use_new_zipfile_serialization=not legacy)
        paths.append(p)
    return paths


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy-pickle"])
def test_checkpoint_ids_are_read_in_both_torch_formats(tmp_path, legacy):
    p1, p2 = _folder(tmp_path, A, [A, None], legacy=legacy)
    assert checkpoint_run_id(p1) == A and checkpoint_run_id(p2) is None
    assert recorded_run_id(tmp_path) == A
    assert recorded_run_id(tmp_path / "nowhere") is None


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy-pickle"])
def test_a_run_with_an_id_accepts_its_own_and_refuses_any_other(tmp_path, legacy):
    own = _folder(tmp_path / "own", A, [A, A, A], legacy=legacy)
    check_one_run(tmp_path / "own", own)
    for i, (cfg, ids) in enumerate([(A, [A, B, A]), (A, [A, A, None]), (A, [B, B]), (A, [None])]):
        d = tmp_path / f"mix{i}"
        paths = _folder(d, cfg, ids, legacy=legacy)
        stray = next(p for p, rid in zip(paths, ids) if rid != cfg)
        with pytest.raises(TracegraphError, match="belongs to another run") as e:
            check_one_run(d, paths)
        assert str(stray) in str(e.value) and A in str(e.value)


@pytest.mark.parametrize("config", [True, False], ids=["old-config", "no-config"])
@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy-pickle"])
def test_a_run_from_before_run_ids_is_one_run_until_an_id_appears(tmp_path, config, legacy):
    old = _folder(tmp_path / "old", None, [None, None, None], config=config, legacy=legacy)
    check_one_run(tmp_path / "old", old)  # no id anywhere: accepted as one run
    for i, ids in enumerate([[None, B, None], [B, None], [A, B]]):
        d = tmp_path / f"mix{i}"
        paths = _folder(d, None, ids, config=config, legacy=legacy)
        with pytest.raises(TracegraphError, match="belongs to another run"):
            check_one_run(d, paths)


def test_checkpoints_named_from_another_folder_are_checked_against_this_folder(tmp_path):
    mine = _folder(tmp_path / "mine", A, [A, A])
    theirs = _folder(tmp_path / "theirs", B, [B])
    with pytest.raises(TracegraphError, match="belongs to another run") as e:
        check_one_run(tmp_path / "mine", [*mine, *theirs])
    assert str(theirs[0]) in str(e.value) and "1 of 3" in str(e.value)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config_id=st.sampled_from([None, A]), ids=st.lists(st.sampled_from([None, A, B]), min_size=1, max_size=4),
       legacy=st.booleans())
def test_refused_exactly_when_the_checkpoints_are_not_one_run(tmp_path_factory, config_id, ids, legacy):
    d = tmp_path_factory.mktemp("run")
    paths = _folder(d, config_id, ids, legacy=legacy)
    if config_id is not None:
        foreign = any(rid != config_id for rid in ids)  # every checkpoint must carry the recorded id
    else:
        foreign = len(set(ids)) > 1  # no recorded id: at least they must agree with each other
    if foreign:
        with pytest.raises(TracegraphError, match="belongs to another run"):
            check_one_run(d, paths)
    else:
        check_one_run(d, paths)


def test_epoch_checkpoints_are_listed_in_epoch_order_padded_or_not(tmp_path):
    d = tmp_path / "checkpoints"
    d.mkdir()
    for name in ("epoch_10.pt", "epoch_9.pt", "epoch_0011.pt", "epoch_2.pt", "epoch_x.pt", "notes.txt",
                 "epoch_3.pt.tmp"):
        (d / name).write_bytes(b"")
    assert [p.name for p in list_epoch_checkpoints(tmp_path)] == ["epoch_2.pt", "epoch_9.pt", "epoch_10.pt",
                                                                  "epoch_0011.pt"]
    assert list_epoch_checkpoints(tmp_path / "absent") == []


def test_a_checkpoint_path_leads_back_to_its_run_folder(tmp_path):
    assert model_dir_of(tmp_path / "run" / "checkpoints" / "epoch_0001.pt") == tmp_path / "run"
    assert model_dir_of(tmp_path / "run" / "best_model.pt") == tmp_path / "run"
    run = tmp_path / "run"
    ck = _folder(run, A, [A, A])
    assert resolve_checkpoint(run) == ck[-1]  # no best/final: the last epoch
    (run / "final_model.pt").write_bytes(b"")
    assert resolve_checkpoint(run) == run / "final_model.pt"
    (run / "best_model.pt").write_bytes(b"")
    assert resolve_checkpoint(run) == run / "best_model.pt"  # best before final
