"""A run folder's checkpoints are one run's: ``check_one_run`` refuses any mix, in every layout a
run folder can have — a run with ids, a run from before run ids (no id anywhere), a folder with
no config.json, and checkpoints in the legacy (non-zip) torch format."""

import json
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.model.model_io import list_epoch_checkpoints, model_dir_of, resolve_checkpoint
from tracegraph.runtime.rundir import check_one_run, checkpoint_run_id, claim, recorded_run_id

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


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    config_id=st.sampled_from([None, A]),
    ids=st.lists(st.sampled_from([None, A, B]), min_size=1, max_size=4),
    legacy=st.booleans(),
)
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
    for name in (
        "epoch_10.pt",
        "epoch_9.pt",
        "epoch_0011.pt",
        "epoch_2.pt",
        "epoch_x.pt",
        "notes.txt",
        "epoch_3.pt.tmp",
    ):
        (d / name).write_bytes(b"")
    assert [p.name for p in list_epoch_checkpoints(tmp_path)] == [
        "epoch_2.pt",
        "epoch_9.pt",
        "epoch_10.pt",
        "epoch_0011.pt",
    ]
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


def _refusal(d, paths):
    with pytest.raises(TracegraphError) as e:
        check_one_run(d, paths)
    return str(e.value)


def test_the_refusal_names_the_stray_file_both_ids_and_the_count(tmp_path):
    paths = _folder(tmp_path / "a", A, [B, A, A])
    msg = _refusal(tmp_path / "a", paths)
    assert msg.startswith(
        f"{paths[0]} belongs to another run (run id {B}, {tmp_path / 'a' / 'config.json'} says {A}; "
        "1 of 3 checkpoints differ)"
    )
    paths = _folder(tmp_path / "b", A, [A, None])
    assert f"{paths[1]} belongs to another run (run id none," in _refusal(tmp_path / "b", paths)
    # no recorded id: the checkpoints that differ from the first are named
    paths = _folder(tmp_path / "c", None, [None, B, None])
    msg = _refusal(tmp_path / "c", paths)
    assert msg.startswith(f"{paths[1]} belongs to another run (run id {B},") and "says none; 1 of 3" in msg


class _Flag:
    hit = False


def _set_flag():
    _Flag.hit = True


class _Evil:
    def __reduce__(self):
        return (_set_flag, ())


def test_reading_a_run_id_never_unpickles_and_odd_payloads_have_none(tmp_path):
    torch.save({"run_id": A, "x": _Evil()}, tmp_path / "evil.pt")
    with pytest.raises(DataError, match="weights_only"):
        checkpoint_run_id(tmp_path / "evil.pt")
    assert not _Flag.hit
    torch.save(torch.zeros(2), tmp_path / "tensor.pt")
    torch.save({"run_id": 7}, tmp_path / "int.pt")
    assert checkpoint_run_id(tmp_path / "tensor.pt") is None and checkpoint_run_id(tmp_path / "int.pt") is None
    (tmp_path / "config.json").write_text(json.dumps({"run_id": 7}))
    assert recorded_run_id(tmp_path) is None


def test_claim_gives_a_fresh_run_its_folder_and_a_resumed_run_its_recorded_id(tmp_path):
    out = tmp_path / "deep" / "er" / "run"
    rid = claim(out, resume=False, overwrite=False)
    assert out.is_dir() and len(rid) == 32 and int(rid, 16) >= 0
    (out / "config.json").write_text(json.dumps({"run_id": A}))
    assert claim(out, resume=True, overwrite=False) == A
    (out / "config.json").write_text("{}")  # a run from before run ids: a new id
    assert claim(out, resume=True, overwrite=False) not in (A, None)
    with pytest.raises(TracegraphError, match="^--resume and --overwrite contradict each other"):
        claim(out, resume=True, overwrite=True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(TracegraphError, match=f"^{tmp_path / 'file'} exists and is not a directory$"):
        claim(tmp_path / "file", resume=False, overwrite=False)


@pytest.mark.parametrize("n, shown", [(4, "a0, a1, a2, a3)"), (5, "a0, a1, a2, a3, …)")])
def test_a_used_folder_is_refused_naming_its_first_entries(tmp_path, n, shown):
    for i in range(n):
        (tmp_path / f"a{i}").write_text("")
    with pytest.raises(TracegraphError) as e:
        claim(tmp_path, resume=False, overwrite=False)
    assert f"is not empty ({shown}: pass --resume" in str(e.value)
