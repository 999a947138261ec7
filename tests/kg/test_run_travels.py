"""A run directory works from any working directory and after a move; --resume keeps the run's
settings; checkpoints are weights-only for TracIn plus one rolling resume state, and every layout
refuses a foreign checkpoint.

The reference metrics are the ones training itself wrote (test_results.json: the best model ranked
against train + valid + test, in the training process, with absolute paths at hand)."""

import json
import shutil
from pathlib import Path

import pytest
import torch

import tracegraph
from tests.conftest import UMLS, run_cli, run_cli_error
from tracegraph.errors import TracegraphError
from tracegraph.runtime.rundir import check_one_run

TINY = ["--embedding-dim", "12", "--embedding-height", "3", "--embedding-width", "4", "--output-channels", "4"]


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """proj/split/{train,valid,test}.txt and proj/run, trained from proj with relative paths."""
    root = tmp_path_factory.mktemp("travel") / "proj"
    (root / "split").mkdir(parents=True)
    for s in ("train", "valid", "test"):
        shutil.copy(UMLS / f"{s}.txt", root / "split" / f"{s}.txt")
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    try:
        res = run_cli(
            [
                "train",
                "--train",
                "split/train.txt",
                "--valid",
                "split/valid.txt",
                "--test",
                "split/test.txt",
                "-o",
                "run",
                "--epochs",
                "2",
                "--device",
                "cpu",
                "--num-threads",
                "1",
                *TINY,
            ]
        )
    finally:
        mp.undo()
    assert res.exit_code == 0, res.output
    return root


def _evaluate_mrr(run: Path, test: Path, out: Path) -> float:
    res = run_cli(["evaluate", "--model-dir", run, "--test", test, "-o", out, "--device", "cpu"])
    assert res.exit_code == 0, res.output
    return json.loads((out / "evaluation.json").read_text())["metrics"]["both"]["mrr"]


def test_evaluate_gives_the_trained_metrics_from_any_directory_and_after_a_move(project, tmp_path, monkeypatch):
    expected = json.loads((project / "run" / "test_results.json").read_text())["metrics"]["both"]["mrr"]
    test = (project / "split" / "test.txt").resolve()
    for k, cwd in enumerate([project, project.parent, project / "run" / "checkpoints"]):
        monkeypatch.chdir(cwd)
        assert _evaluate_mrr((project / "run").resolve(), test, tmp_path / f"ev{k}") == pytest.approx(
            expected, abs=1e-7
        )
        ev = json.loads((tmp_path / f"ev{k}" / "evaluation.json").read_text())
        # train, valid and test of the run, each once: --test is the run's own test file
        assert ev["filter"] == [str(project.resolve() / "split" / f"{s}.txt") for s in ("train", "valid", "test")]
    # a copy of the whole project elsewhere, the original gone: found through the paths relative to the run
    moved = tmp_path / "elsewhere" / "proj"
    shutil.copytree(project, moved)
    hidden = project.parent / "hidden"
    project.rename(hidden)
    try:
        monkeypatch.chdir(tmp_path)
        run = tracegraph.open_run(moved / "run")
        assert run.data_files == {s: (moved / "split" / f"{s}.txt").resolve() for s in ("train", "valid", "test")}
        assert _evaluate_mrr(moved / "run", moved / "split" / "test.txt", tmp_path / "ev_moved") == pytest.approx(
            expected, abs=1e-7
        )
    finally:
        hidden.rename(project)


def test_a_missing_or_changed_data_file_is_one_error_naming_it_and_the_override(project, tmp_path):
    copy = tmp_path / "proj"
    shutil.copytree(project, copy)
    hidden = project.parent / "hidden"
    project.rename(hidden)  # the recorded absolute paths lead nowhere: only the copy's relative ones count
    try:
        ev = tmp_path / "ev"
        (copy / "split" / "valid.txt").write_text("a\tb\tc\n")
        run_cli_error(
            ["evaluate", "--model-dir", copy / "run", "--test", copy / "split" / "test.txt", "-o", ev],
            copy,
            contains=f"{copy / 'split' / 'valid.txt'}: the run's valid file changed since the run "
            f"was trained (sha256 differs)",
        )
        run_cli_error(
            [
                "evaluate",
                "--model-dir",
                copy / "run",
                "--test",
                copy / "split" / "test.txt",
                "-o",
                ev,
                "--filter",
                copy / "split" / "valid.txt",
            ],
            copy,
            contains="the run's valid file changed",
        )  # --filter adds known triples: it does not stand in for a recorded file
        res = run_cli(
            [
                "evaluate",
                "--model-dir",
                copy / "run",
                "--test",
                copy / "split" / "test.txt",
                "-o",
                ev,
                "--valid",
                copy / "split" / "valid.txt",
            ]
        )  # the way the error names: the changed file given with --valid is used as it is
        assert res.exit_code == 0, res.output
        doc = json.loads((ev / "evaluation.json").read_text())
        assert doc["filter"] == [str(copy / "split" / f"{s}.txt") for s in ("train", "valid", "test")]
        (copy / "split" / "test.txt").write_text("a\tb\tc\n")  # the recorded test file changed too
        other = copy / "other_test.txt"
        shutil.copy(hidden / "split" / "test.txt", other)
        res = run_cli(
            ["evaluate", "--model-dir", copy / "run", "--test", other, "-o", tmp_path / "ev2"]
            + ["--valid", copy / "split" / "valid.txt"]
        )  # --test stands in for the recorded test file in the filter
        assert res.exit_code == 0, res.output
        doc = json.loads((tmp_path / "ev2" / "evaluation.json").read_text())
        assert doc["filter"] == [str(copy / "split" / f"{s}.txt") for s in ("train", "valid")] + [str(other)]
        (copy / "split" / "train.txt").unlink()
        with pytest.raises(TracegraphError, match=r"the run's train file is missing .*give the file with --train"):
            tracegraph.open_run(copy / "run").data_files
    finally:
        hidden.rename(project)


def test_runs_without_hashes_resolve_paths_as_before_with_a_warning(project, tmp_path, monkeypatch, caplog):
    copy = tmp_path / "old"
    shutil.copytree(project / "run", copy)
    cfg = json.loads((copy / "config.json").read_text())
    del cfg["data_files"]
    (copy / "config.json").write_text(json.dumps(cfg))
    monkeypatch.chdir(project)  # the relative paths were written from here
    files = tracegraph.open_run(copy).data_files
    assert files == {s: Path(f"split/{s}.txt") for s in ("train", "valid", "test")}
    assert "records no hash" in caplog.text


# ---------------------------------------------------------------- --resume keeps the run's settings


def _train_args(data, out, *extra):
    """``train`` of the 10-triple graph into ``out`` with a small model, then ``extra``."""
    small = ["--embedding-dim", "12", "--embedding-height", "3", "--embedding-width", "4", "--output-channels", "2"]
    return ["train", "--train", data / "train.txt", "-o", out, "--batch-size", "8", "--device", "cpu", *small, *extra]


def _train_cli(data, out, *extra):
    return run_cli(_train_args(data, out, *extra))


def test_resume_refuses_a_changed_learning_rate_and_records_a_changed_epoch_count(data, tmp_path):
    out = tmp_path / "run"
    assert _train_cli(data, out, "--epochs", "1", "--learning-rate", "0.003").exit_code == 0
    run_cli_error(
        _train_args(data, out, "--epochs", "2", "--resume", "--learning-rate", "0.01"),
        out,
        contains="--resume: --learning-rate was 0.003 in this run, now 0.01",
    )
    res = _train_cli(data, out, "--epochs", "3", "--learning-rate", "0.003", "--resume")
    assert res.exit_code == 0, res.output
    conf = json.loads((out / "config.json").read_text())
    assert conf["changes"] == [{"epoch": 2, "setting": "epochs", "old": 1, "new": 3}]
    assert conf["train"]["epochs"] == 3 and conf["train"]["learning_rate"] == 0.003
    history = json.loads((out / "training_history.json").read_text())
    assert [h["epoch"] for h in history] == [1, 2, 3] and {h["lr"] for h in history} == {0.003}


def test_resume_under_a_cosine_schedule_keeps_its_epoch_count(data, tmp_path):
    out = tmp_path / "cos"
    assert _train_cli(data, out, "--epochs", "2", "--lr-scheduler", "cosine").exit_code == 0
    run_cli_error(
        _train_args(data, out, "--epochs", "4", "--lr-scheduler", "cosine", "--resume"),
        out,
        contains="--epochs was 2 in this run, now 4 (the cosine schedule spans the recorded epochs)",
    )


# ---------------------------------------------------------------- checkpoints: one run's, in every layout


def _to_old_layout(run: Path) -> None:
    """The layout runs had before resume.pt: every epoch checkpoint held the full training state."""
    full = torch.load(run / "checkpoints" / "resume.pt", weights_only=True)
    for p in run.glob("checkpoints/epoch_*.pt"):
        torch.save(dict(full, **{k: v for k, v in torch.load(p, weights_only=True).items()}), p)
    (run / "checkpoints" / "resume.pt").unlink()


@pytest.mark.parametrize("layout", ["weights-only epochs + resume.pt", "full epoch checkpoints"])
def test_a_foreign_checkpoint_is_refused_in_every_layout(data, tmp_path, layout):
    a, b = tmp_path / "a", tmp_path / "b"
    for run in (a, b):
        assert _train_cli(data, run, "--epochs", "2", "--checkpoint-every", "1").exit_code == 0
    epochs = sorted((a / "checkpoints").glob("epoch_*.pt"))
    assert [p.name for p in epochs] == ["epoch_0001.pt", "epoch_0002.pt"]
    if layout == "full epoch checkpoints":
        _to_old_layout(a)
        _to_old_layout(b)
    else:  # TracIn's checkpoints carry weights and lr only; the training state is in resume.pt alone
        assert set(torch.load(epochs[0], weights_only=True)) == {
            "model",
            "model_config",
            "epoch",
            "lr",
            "metrics",
            "run_id",
        }
        assert "optimizer" in torch.load(a / "checkpoints" / "resume.pt", weights_only=True)
    check_one_run(a, epochs)  # its own checkpoints pass
    shutil.copy(b / "checkpoints" / "epoch_0002.pt", a / "checkpoints" / "epoch_0002.pt")
    with pytest.raises(TracegraphError, match="epoch_0002.pt belongs to another run"):
        check_one_run(a, epochs)
    with pytest.raises(TracegraphError, match="epoch_0002.pt belongs to another run than"):
        tracegraph.train(
            train=data / "train.txt",
            output_dir=a,
            epochs=3,
            resume=True,
            batch_size=8,
            device="cpu",
            model=dict(embedding_dim=12, embedding_height=3, embedding_width=4, output_channels=2),
        )
