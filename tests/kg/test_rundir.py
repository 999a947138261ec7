"""A run directory holds one run: refused when used, --overwrite replaces, explain refuses a mix."""

import json
import shutil

import pytest

from tests.conftest import run_cli, run_cli_error, snapshot
from tracegraph.runtime.rundir import checkpoint_run_id

TINY = [
    "--embedding-dim",
    "12",
    "--embedding-height",
    "3",
    "--embedding-width",
    "4",
    "--output-channels",
    "2",
    "--batch-size",
    "8",
    "--checkpoint-every",
    "1",
]


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    (d / "train.txt").write_text("".join(f"e{i}\tr{i % 2}\te{(i * 5 + 1) % 10}\n" for i in range(10)))
    (d / "test.txt").write_text("e1\tr0\te6\n")
    return d


def train(data, out, *extra):
    return run_cli(["train", "--train", data / "train.txt", "-o", out, *TINY, *extra])


def files_of(run):
    return sorted(str(p.relative_to(run)) for p in run.rglob("*"))


@pytest.mark.slow
def test_used_run_dir_is_refused_and_overwrite_gives_a_fresh_run(data, tmp_path):
    run = tmp_path / "run"
    assert train(data, run, "--epochs", "3").exit_code == 0
    first_id = json.loads((run / "config.json").read_text())["run_id"]
    assert {checkpoint_run_id(p) for p in (run / "checkpoints").iterdir()} == {first_id}
    run_cli_error(
        ["train", "--train", data / "train.txt", "-o", run, *TINY, "--epochs", "1", "--seed", "1"],
        run,
        data,
        contains="is not empty",
    )
    res = train(data, run, "--epochs", "1", "--seed", "1", "--overwrite")
    assert res.exit_code == 0, res.output
    fresh = tmp_path / "fresh"
    assert train(data, fresh, "--epochs", "1", "--seed", "1").exit_code == 0
    assert files_of(run) == files_of(fresh)  # exactly the fresh run's files: no epoch_0002/0003 left over
    assert (run / "checkpoints" / "epoch_0001.pt").read_bytes() != b""
    assert json.loads((run / "config.json").read_text())["run_id"] != first_id
    run_cli_error(
        ["train", "--train", data / "train.txt", "-o", run, *TINY, "--resume", "--overwrite"],
        run,
        contains="contradict",
    )


def test_overwrite_refuses_a_folder_that_is_not_a_run(data, tmp_path):
    precious = tmp_path / "home"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    run_cli_error(
        ["train", "--train", data / "train.txt", "-o", precious, *TINY, "--overwrite"],
        precious,
        contains="does not look like a run directory",
    )


def test_failed_resume_writes_nothing(data, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    run_cli_error(
        ["train", "--train", data / "train.txt", "-o", empty, *TINY, "--resume"],
        empty,
        contains="--resume: no checkpoints",
    )
    assert list(empty.iterdir()) == []  # no node_dict.txt / rel_dict.txt left behind
    run_cli_error(
        ["train", "--train", data / "train.txt", "-o", tmp_path / "absent", *TINY, "--resume"],
        tmp_path / "absent",
        contains="does not exist",
    )


@pytest.mark.slow
def test_explain_refuses_checkpoints_of_two_runs(data, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert train(data, a, "--epochs", "2").exit_code == 0
    assert train(data, b, "--epochs", "3", "--seed", "1").exit_code == 0
    explain = [
        "explain",
        "--model-dir",
        a,
        "--train",
        data / "train.txt",
        "--test-triples",
        data / "test.txt",
        "--top-k",
        "2",
    ]
    assert run_cli([*explain, "-o", tmp_path / "ok"]).exit_code == 0  # one run: fine
    shutil.copy(b / "checkpoints" / "epoch_0003.pt", a / "checkpoints" / "epoch_0003.pt")
    before = snapshot(a)
    # every checkpoint in the folder (the default stops at the model's epoch, 2, before the stranger)
    run_cli_error(
        [*explain, "-o", tmp_path / "mixed", "--checkpoints", "all"],
        tmp_path / "mixed",
        contains="belongs to another run",
    )
    run_cli_error(
        [
            *explain,
            "-o",
            tmp_path / "mixed",
            "--checkpoints",
            a / "checkpoints" / "epoch_0001.pt",
            "--checkpoints",
            b / "checkpoints" / "epoch_0002.pt",
        ],
        tmp_path / "mixed",
        contains="belongs to another run",
    )
    assert snapshot(a) == before
