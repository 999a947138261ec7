"""Runs remember their files: ``explain`` and ``evaluate`` default to the training and test files the
run recorded (as the Python API does), a run that recorded none says which option to give, and a
training file edited since training has a way forward that the error names.

References: the same command with the files given explicitly, and the files' lines counted by hand."""

import json
import shutil

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


# ------------------------------------------------------------------ a training file edited since training

ROWS = [(f"e{i}", f"r{i % 2}", f"e{(3 * i + 1) % 9}") for i in range(18)]
ADDED = ("e0", "r1", "e8")  # not a training triple of ROWS


@pytest.fixture(scope="module")
def edited(tmp_path_factory):
    """A 2-epoch run (a checkpoint each) whose recorded train.txt gained a line after training, and a copy
    of the edited file under another name."""
    d = tmp_path_factory.mktemp("edited")
    (d / "train.txt").write_text("".join("\t".join(r) + "\n" for r in ROWS))
    (d / "test.txt").write_text("e1\tr0\te5\ne2\tr1\te0\n")
    tracegraph.train(
        train=d / "train.txt",
        test=d / "test.txt",
        output_dir=d / "run",
        epochs=2,
        batch_size=8,
        checkpoint_every=1,
        device="cpu",
        model={"embedding_dim": 12, "embedding_height": 3, "embedding_width": 4, "output_channels": 2},
        quiet=True,
    )
    with open(d / "train.txt", "a") as f:
        f.write("\t".join(ADDED) + "\n")
    shutil.copy(d / "train.txt", d / "edited_copy.txt")
    return d


@pytest.mark.parametrize(
    "command",
    [
        ["explain", "--test-triples", "{d}/test.txt", "-o", "{d}/out"],
        ["evaluate", "-o", "{d}/ev"],
        ["predict", "--head", "e0", "--relation", "r1", "--exclude-train"],
    ],
)
def test_an_edited_training_file_is_refused_naming_the_flag_that_works(edited, command):
    args = [a.replace("{d}", str(edited)) for a in command]
    run_cli_error(
        [args[0], "--model-dir", edited / "run", *args[1:]],
        edited / "run",
        contains=f"{edited / 'train.txt'}: the run's train file changed since the run was trained (sha256 "
        "differs) (recorded in ",
    )
    res = run_cli([args[0], "--model-dir", edited / "run", *args[1:]])
    assert res.stderr.rstrip().endswith("give the file with --train (explain, evaluate, predict)")


WARNING = "not the train file the run recorded in {cfg} (sha256 differs); it is used as given, though the model was trained on the recorded one"


@pytest.mark.parametrize("name", ["train.txt", "edited_copy.txt"])
def test_explain_train_accepts_the_edited_file_and_warns_that_the_model_saw_the_recorded_one(
    edited, tmp_path, logs, name
):
    given = edited / name
    res = run_cli(
        ["explain", "--model-dir", edited / "run", "--train", given, "--test-triples", edited / "test.txt"]
        + ["-o", tmp_path / "out", "--method", "tracin"]
    )
    assert res.exit_code == 0, res.output
    assert f"{given}: " + WARNING.format(cfg=edited / "run" / "config.json") in logs()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["training_triples"] == len(ROWS) + 1  # the edited file's lines, counted by hand
    rows = (tmp_path / "out" / summary["triples"][0]["csv"]).read_text().splitlines()
    assert sum(line.split(",")[6:11:2] == list(ADDED) for line in rows) == 1  # the added triple is ranked
    frame = tracegraph.open_run(edited / "run").explain(edited / "test.txt", train=given, method="tracin", quiet=True)
    assert len(frame) == 2 * (len(ROWS) + 1)


def test_evaluate_and_predict_train_use_the_edited_file_in_place_of_the_recorded_one(edited, tmp_path, logs):
    given = edited / "edited_copy.txt"
    res = run_cli(["evaluate", "--model-dir", edited / "run", "--train", given, "-o", tmp_path / "ev"])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "ev" / "evaluation.json").read_text())
    assert doc["filter"] == [str(given), str(edited / "test.txt")]
    assert f"{given}: " + WARNING.format(cfg=edited / "run" / "config.json") in logs()
    n = len({x for h, _, t in ROWS for x in (h, t)})  # every entity: all answers but the left-out ones
    base = ["predict", "--model-dir", edited / "run", "--head", "e0", "--relation", "r1", "--top-k", n]
    res = run_cli([*base, "--exclude-train", "--train", given])
    assert res.exit_code == 0, res.output
    tails = {line.split(",")[3] for line in res.stdout.splitlines()[1:]}
    known = {t for h, r, t in [*ROWS, ADDED] if (h, r) == ("e0", "r1")}
    assert ADDED[2] in known and len(tails) == n - len(known) and not tails & known
    api = tracegraph.open_run(edited / "run", data_files={"train": given})
    assert api.evaluate(edited / "test.txt").metrics == doc["metrics"]
