"""Runs remember their files: ``explain`` and ``evaluate`` default to the training and test files the
run recorded (as the Python API does), a run that recorded none says which option to give, and a
training file edited since training has a way forward that the error names.

References: the same command with the files given explicitly, and the files' lines counted by hand."""

import json

import pytest

import tracegraph
from tests.conftest import UMLS, run_cli, run_cli_error
from tests.kg.earlier_conve import earlier_checkpoint

QUESTION = "steroid\tinteracts_with\teicosanoid\n"


def test_explain_without_train_ranks_the_recorded_training_file(run_dir, tmp_path):
    q = tmp_path / "q.tsv"
    q.write_text(QUESTION)
    base = ["explain", "--model-dir", run_dir, "--test-triples", q, "--top-k", "3", "--method", "tracin"]
    assert run_cli([*base, "-o", tmp_path / "recorded"]).exit_code == 0
    assert run_cli([*base, "--train", UMLS / "train.txt", "-o", tmp_path / "given"]).exit_code == 0
    recorded, given = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("recorded", "given"))
    n_train = sum(1 for line in (UMLS / "train.txt").read_text().splitlines() if line)
    assert recorded["training_triples"] == n_train == given["training_triples"]
    name = recorded["triples"][0]["csv"]
    assert (tmp_path / "recorded" / name).read_text() == (tmp_path / "given" / name).read_text()


def test_evaluate_without_test_ranks_the_recorded_test_file(run_dir, tmp_path):
    assert run_cli(["evaluate", "--model-dir", run_dir, "-o", tmp_path / "recorded"]).exit_code == 0
    given = ["evaluate", "--model-dir", run_dir, "--test", UMLS / "test.txt", "-o", tmp_path / "given"]
    assert run_cli(given).exit_code == 0
    recorded, explicit = (json.loads((tmp_path / d / "evaluation.json").read_text()) for d in ("recorded", "given"))
    assert recorded["test"] == str(UMLS / "test.txt") and recorded["metrics"] == explicit["metrics"]
    n_test = sum(1 for line in (UMLS / "test.txt").read_text().splitlines() if line)
    assert recorded["metrics"]["tail"]["count"] == n_test


@pytest.mark.parametrize("command, split", [("explain", "train"), ("evaluate", "test")])
def test_a_run_that_recorded_no_file_names_the_options_that_give_one(tmp_path, command, split):
    _, f = earlier_checkpoint(tmp_path, n_ent=6, n_rel=2)  # an imported model records no data files
    tracegraph.import_checkpoint(f, tmp_path / "imported", tmp_path / "node_dict.txt", tmp_path / "rel_dict.txt")
    q = tmp_path / "q.tsv"
    q.write_text("E1\tR0\tE2\n")
    args = ["--test-triples", q, "-o", tmp_path / "x"] if command == "explain" else []
    run_cli_error(
        [command, "--model-dir", tmp_path / "imported", *args],
        tmp_path / "imported",
        contains=f"give --{split} FILE or --dataset NAME: the run in {tmp_path / 'imported'} records no {split} file",
    )
