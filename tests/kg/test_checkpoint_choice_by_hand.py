"""Which checkpoints TracIn sums, on run folders laid out by hand (empty files: only names and presence count)."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from tracegraph.errors import DataError
from tracegraph.kg.explain.tracin.checkpoints import explained_checkpoints, resolve_checkpoint_list


def _run(tmp_path: Path, epochs=(), best=False, final=True) -> Path:
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    for e in epochs:
        (run / "checkpoints" / f"epoch_{e:04d}.pt").write_bytes(b"")
    if best:
        (run / "best_model.pt").write_bytes(b"")
    if final:
        (run / "final_model.pt").write_bytes(b"")
    return run


def _ep(run, *epochs):
    return [run / "checkpoints" / f"epoch_{e:04d}.pt" for e in epochs]


def test_default_keeps_epochs_up_to_the_model_epoch_inclusive(tmp_path):
    run = _run(tmp_path, [1, 2, 3, 10, 12])
    assert resolve_checkpoint_list(run, None, 3) == _ep(run, 1, 2, 3)
    assert resolve_checkpoint_list(run, None, 10) == _ep(run, 1, 2, 3, 10)
    assert resolve_checkpoint_list(run, None, None) == _ep(run, 1, 2, 3, 10, 12)
    # an epoch before every checkpoint: the first checkpoint rather than nothing
    assert resolve_checkpoint_list(run, None, 0) == _ep(run, 1)
    # "all" ignores the model epoch
    assert resolve_checkpoint_list(run, ["all"], 2) == _ep(run, 1, 2, 3, 10, 12)
    assert resolve_checkpoint_list(str(run), None, 2) == _ep(run, 1, 2)


def test_no_epoch_checkpoints_falls_back_to_the_best_then_final_model(tmp_path, caplog):
    run = _run(tmp_path, [], best=True)
    with caplog.at_level(logging.WARNING, logger="tracegraph"):
        assert resolve_checkpoint_list(run, None, 5) == [run / "best_model.pt"]
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        "no checkpoints/epoch_*.pt: using the single final/best model"
    ]
    (run / "best_model.pt").unlink()
    assert resolve_checkpoint_list(run, ["all"]) == [run / "final_model.pt"]


def test_named_checkpoints_in_the_order_given(tmp_path):
    run = _run(tmp_path, [1, 2], best=True)
    e1 = _ep(run, 1)[0]
    got = resolve_checkpoint_list(run, ["best", str(e1), "final", "best"])
    assert got == [run / "best_model.pt", e1, run / "final_model.pt", run / "best_model.pt"]


def test_missing_named_checkpoints_are_refused_with_the_flag_and_file(tmp_path):
    run = _run(tmp_path, [1], best=False, final=False)
    with pytest.raises(DataError) as e:
        resolve_checkpoint_list(run, ["final"])
    assert str(e.value) == f"{run}: --checkpoints final: final_model.pt not found"
    with pytest.raises(DataError) as e:
        resolve_checkpoint_list(run, ["best"])
    assert str(e.value) == f"{run}: --checkpoints best: best_model.pt not found"
    (run / "best_model").mkdir()
    (run / "best_model.pt").mkdir()  # a folder is not a checkpoint
    with pytest.raises(DataError):
        resolve_checkpoint_list(run, ["best"])
    with pytest.raises(DataError) as e:
        resolve_checkpoint_list(run, [str(run / "checkpoints")])
    assert str(e.value) == f"{run / 'checkpoints'}: checkpoint not found"


class _Info:
    def __init__(self, epoch):
        self.epoch = epoch


def _store(run, opened_with, checkpoint, epoch):
    seen = []

    def info(path):
        seen.append(path)
        return _Info(epoch)

    return SimpleNamespace(path=run, opened_with=opened_with, checkpoint=checkpoint, checkpoint_info=info), seen


def test_a_store_opened_on_a_file_sums_that_checkpoint_alone(tmp_path):
    run = _run(tmp_path, [1, 2, 3])
    e2 = _ep(run, 2)[0]
    store, _ = _store(run, e2, e2, 2)
    assert explained_checkpoints(store, None) == (
        [e2],
        "TracIn sums 1 checkpoint(s), the checkpoint given as the model (epoch_0002.pt): epoch_0002.pt",
    )
    # a spec overrides the file it was opened on
    got, line = explained_checkpoints(store, ["all"])
    assert got == _ep(run, 1, 2, 3)
    assert line == ("TracIn sums 3 checkpoint(s), --checkpoints all: epoch_0001.pt, epoch_0002.pt, epoch_0003.pt")


def test_a_store_opened_on_a_run_sums_up_to_its_models_epoch(tmp_path):
    run = _run(tmp_path, [1, 2, 3, 4], best=True)
    store, seen = _store(run, run, run / "best_model.pt", 2)
    got, line = explained_checkpoints(store, None)
    assert seen == [run / "best_model.pt"]
    assert got == _ep(run, 1, 2)
    assert line == "TracIn sums 2 checkpoint(s), up to best_model.pt's epoch 2: epoch_0001.pt, epoch_0002.pt"
    store, seen = _store(run, run, run / "best_model.pt", None)  # no epoch recorded: every checkpoint
    got, line = explained_checkpoints(store, None)
    assert got == _ep(run, 1, 2, 3, 4)
    assert line.startswith("TracIn sums 4 checkpoint(s), --checkpoints all: ")
    got, line = explained_checkpoints(store, ["final", "best"])
    assert seen == [run / "best_model.pt"]  # a named spec does not read the model's epoch
    assert line == "TracIn sums 2 checkpoint(s), --checkpoints final best: final_model.pt, best_model.pt"


@pytest.mark.parametrize(
    "n,listed",
    [
        (6, "epoch_0001.pt, epoch_0002.pt, epoch_0003.pt, epoch_0004.pt, epoch_0005.pt, epoch_0006.pt"),
        (7, "epoch_0001.pt, epoch_0002.pt, epoch_0003.pt, …, epoch_0006.pt, epoch_0007.pt"),
        (9, "epoch_0001.pt, epoch_0002.pt, epoch_0003.pt, …, epoch_0008.pt, epoch_0009.pt"),
    ],
)
def test_a_long_list_names_the_first_three_and_the_last_two(tmp_path, n, listed):
    run = _run(tmp_path, range(1, n + 1))
    store, _ = _store(run, run, run / "final_model.pt", n)
    got, line = explained_checkpoints(store, None)
    assert len(got) == n
    assert line == f"TracIn sums {n} checkpoint(s), up to final_model.pt's epoch {n}: {listed}"
