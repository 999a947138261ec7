"""The original research scripts' flags: those whose meaning we keep do what ours do (checked by
their effect on the run, or against the same command spelled our way); the others are refused
with what replaces them, and no unknown flag is "corrected" to an unrelated option."""

import json

import pytest

from tests.conftest import run_cli, run_cli_error
from tracegraph.cli.common import EXPLAIN_OLD_FLAGS, translate_old_flags
from tracegraph.errors import TracegraphError

TRIPLES = "".join(f"e{i}\tr{i % 2}\te{(i * 5 + 1) % 10}\n" for i in range(10))
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
    "--device",
    "cpu",
]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("old")
    (d / "train.txt").write_text(TRIPLES)
    (d / "test.txt").write_text("e1\tr0\te6\n")
    return d


@pytest.fixture(scope="module")
def old_run(data):
    """train_pytorch.py's spelling: --num-epochs, --checkpoint-frequency, --disable-memory-cleanup,
    --use-gradient-checkpointing."""
    out = data / "old_run"
    res = run_cli(
        [
            "train",
            "--train",
            data / "train.txt",
            "--output-dir",
            out,
            *TINY,
            "--num-epochs",
            "3",
            "--checkpoint-frequency",
            "1",
            "--memory-cleanup",
            "--disable-memory-cleanup",
            "--use-gradient-checkpointing",
        ]
    )
    assert res.exit_code == 0, res.output
    return out


def test_train_accepts_the_training_scripts_flags_with_their_meaning(old_run):
    # every epoch checkpointed (our default, 10, would keep epoch 3 alone)
    assert sorted(p.name for p in (old_run / "checkpoints").glob("epoch_*.pt")) == [
        "epoch_0001.pt",
        "epoch_0002.pt",
        "epoch_0003.pt",
    ]
    cfg = json.loads((old_run / "config.json").read_text())["train"]
    assert cfg["checkpoint_every"] == 1 and cfg["epochs"] == 3 and cfg["gradient_checkpointing"] is True
    assert cfg["memory_cleanup"] is False  # --disable-memory-cleanup after --memory-cleanup: it switched it off


def test_model_path_is_model_dir_for_evaluate_and_predict(data, old_run, tmp_path):
    ours = run_cli(["evaluate", "--model-dir", old_run, "--test", data / "test.txt", "-o", tmp_path / "a"])
    theirs = run_cli(
        [
            "evaluate",
            "--model-path",
            old_run / "best_model.pt" if (old_run / "best_model.pt").exists() else old_run / "final_model.pt",
            "--test",
            data / "test.txt",
            "-o",
            tmp_path / "b",
        ]
    )
    assert ours.exit_code == 0 and theirs.exit_code == 0, (ours.output, theirs.output)
    a, b = (json.loads((tmp_path / x / "evaluation.json").read_text())["metrics"] for x in "ab")
    assert a == b
    p1 = run_cli(["predict", "--model-path", old_run, "--query", "e1", "r0", "--device", "cpu"])
    p2 = run_cli(["predict", "--model-dir", old_run, "--query", "e1", "r0", "--device", "cpu"])
    assert p1.exit_code == 0 and p1.stdout == p2.stdout


def test_filter_output_dir_is_its_output(data, tmp_path):
    (tmp_path / "tests.txt").write_text("e1\tr0\te6\ne2\tr1\te1\n")
    base = ["filter", "--train", data / "train.txt", "--test-triples", tmp_path / "tests.txt", "--no-cache"]
    assert run_cli([*base, "--output-dir", tmp_path / "old"]).exit_code == 0
    assert run_cli([*base, "-o", tmp_path / "new"]).exit_code == 0
    old = sorted(p.name for p in (tmp_path / "old").iterdir())
    assert old and old == sorted(p.name for p in (tmp_path / "new").iterdir())


def test_explain_flags_of_run_tracin_translate_to_ours():
    args = [
        "--model-path",
        "run/best_model.pt",
        "--test",
        "t.txt",
        "--use-last-layers-only",
        "--num-last-layers=2",
        "--use-mixed-precision",
        "--disable-memory-cleanup",
        "--train",
        "train.txt",
    ]
    assert translate_old_flags(args, EXPLAIN_OLD_FLAGS) == [
        "--model-dir",
        "run/best_model.pt",
        "--test-triples",
        "t.txt",
        "--precision",
        "bf16",
        "--train",
        "train.txt",
        "--layers",
        "last:2",
    ]
    with pytest.raises(TracegraphError, match="go together"):
        translate_old_flags(["--use-last-layers-only"], EXPLAIN_OLD_FLAGS)
    with pytest.raises(TracegraphError, match="--entity-to-id .*carries its own id maps"):
        translate_old_flags(["--entity-to-id", "node_dict.txt"], EXPLAIN_OLD_FLAGS)


def test_explain_takes_the_original_flags_and_writes_the_same_ranking(data, old_run, tmp_path):
    """`tracegraph explain` with the original scripts' spelling writes the same ranking as with ours."""
    from typer.testing import CliRunner

    from tracegraph.cli import app

    common = ["--train", data / "train.txt", "--device", "cpu", "--method", "tracin"]
    runs = {
        "ours": ["--model-dir", old_run, "--test-triples", data / "test.txt", "--layers", "last:2"],
        "old": [
            "--model-path",
            old_run,
            "--test",
            data / "test.txt",
            "--use-last-layers-only",
            "--num-last-layers",
            "2",
            "--disable-memory-cleanup",
        ],
    }
    rows = {}
    for name, args in runs.items():
        res = CliRunner().invoke(app, ["explain", *map(str, args), *map(str, common), "-o", str(tmp_path / name)])
        assert res.exit_code == 0, res.output
        rows[name] = sorted(p.read_text() for p in (tmp_path / name).glob("triple_*.csv"))
    assert rows["old"] and rows["old"] == rows["ours"]
    full = CliRunner().invoke(
        app,
        [
            "explain",
            "--model-dir",
            str(old_run),
            "--test-triples",
            str(data / "test.txt"),
            *map(str, common),
            "-o",
            str(tmp_path / "all"),
        ],
    )
    assert (
        full.exit_code == 0 and sorted(p.read_text() for p in (tmp_path / "all").glob("triple_*.csv")) != rows["ours"]
    )


@pytest.mark.parametrize("flag", ["--use-last-layers-only", "--num-last-layers", "--enable-multi-gpu"])
def test_an_old_flag_a_command_does_not_take_is_never_corrected_to_an_unrelated_one(data, tmp_path, flag):
    res = run_cli_error(
        ["filter", "--train", data / "train.txt", "--test-triples", data / "test.txt", "-o", tmp_path / "f", flag],
        tmp_path,
        contains=f"No such option: {flag}",
    )
    line = res.stderr.strip()
    assert "original research scripts" in line and "--save-edges-only" not in line and "Possible options" not in line


def test_a_misspelt_option_is_still_suggested_its_near_twin(data, tmp_path):
    res = run_cli_error(
        ["train", "--train", data / "train.txt", "-o", tmp_path / "r", "--learning-rat", "0.1"],
        tmp_path,
        contains="--learning-rat",
    )
    assert "--learning-rate" in res.stderr


def test_the_docs_page_maps_every_old_flag_the_cli_knows():
    from pathlib import Path

    from tracegraph.cli.common import FILTER_OLD_FLAGS, OLD_FLAG_HINTS, RUN_OLD_FLAGS, TRAIN_OLD_FLAGS

    page = (Path(__file__).resolve().parents[1] / "docs" / "coming-from-scripts.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `--")]
    for flag in {*TRAIN_OLD_FLAGS, *RUN_OLD_FLAGS, *FILTER_OLD_FLAGS, *EXPLAIN_OLD_FLAGS, *OLD_FLAG_HINTS}:
        assert any(flag in line.split("|")[1].replace("`", " ").split() for line in rows), flag
