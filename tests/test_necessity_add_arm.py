"""benchmarks/necessity_add_arm.py: an arm added to a comparison whose run's weights are gone equals
the same arm run by `fidelity compare` while the weights were there (CPU retrains are deterministic)."""

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.kg.test_compare_by_hand import brute_first, explanations_file
from tests.kg.tiny_graph import TEST, TRIPLES, VALID, cfg, write_triples
from tracegraph.errors import DataError
from tracegraph.kg.explain import compare as cmp
from tracegraph.kg.model.model_io import load_model
from tracegraph.kg.model.train import train

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.append(str(BENCH))  # the script imports the ones beside it, as when run from the command line

import necessity_add_arm as add  # noqa: E402

SUMMARY_KEYS = ("facts", "margins", "groups", "finished", "summary", "same_explanation", "contents", "sizes", "joins")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A full comparison (arms a, b, noise) and a filed one with a and noise only, its run then deleted."""
    d = tmp_path_factory.mktemp("add_arm")
    for name, rows in (("train", TRIPLES), ("valid", VALID), ("test", TEST)):
        write_triples(d / f"{name}.txt", rows)
    run = d / "run"
    train(cfg(d, run, epochs=40, learning_rate=0.05, valid=str(d / "valid.txt"), test=str(d / "test.txt"), patience=0))
    facts = brute_first(load_model(run / "final_model.pt"), d, TRIPLES + TEST + VALID)
    explanations_file(d / "a.tsv", facts, lambda t: t[1] == "r0")
    explanations_file(d / "b.tsv", facts, lambda t: t[1] == "r1")
    files = {"a": str(d / "a.tsv"), "b": str(d / "b.tsv")}

    def compare(out, arms):
        c = cmp.CompareConfig(model_dir=str(run), output_dir=str(out), explanations=files, arms=arms, device="cpu")
        return cmp.run_compare(c)

    compare(d / "full", ["a", "b", "noise"])
    filed = d / "filed" / "kelpie-facts"
    compare(filed, ["a", "noise"])
    (d / "filed" / "run").mkdir()
    shutil.copy(run / "config.json", d / "filed" / "run" / "config.json")  # what a results folder keeps of the run
    maps = (run / "node_dict.txt").read_text(), (run / "rel_dict.txt").read_text()
    shutil.rmtree(run)
    shutil.rmtree(filed / "retrains")
    return d, maps


@pytest.fixture(scope="module")
def added(folders):
    d, _ = folders
    return add.add_arm(d / "filed" / "kelpie-facts", "b")


def test_an_arm_added_without_the_runs_weights_equals_the_arm_run_with_them(folders, added):
    d, maps = folders
    filed, new = d / "filed" / "kelpie-facts", added
    full = json.loads((d / "full" / "compare.json").read_text())
    assert ((d / "run" / "node_dict.txt").read_text(), (d / "run" / "rel_dict.txt").read_text()) == maps
    got, want = (json.loads((f / "arms" / "b.json").read_text()) for f in (filed, d / "full"))
    assert got["ranks"] == want["ranks"] and got["margins"] == want["margins"] and got["digest"] == want["digest"]
    assert got["retrain_seconds"] > 0
    assert new["finished"] == ["a", "b", "noise"]
    for s in (new["summary"], full["summary"]):  # the one thing a retrain does not repeat: its time
        for arm in s.values():
            arm.pop("retrain_seconds")
    assert {k: new[k] for k in SUMMARY_KEYS} == {k: full[k] for k in SUMMARY_KEYS}
    assert (filed / "compare.md").read_text() == (d / "full" / "compare.md").read_text()


def test_a_finished_or_unknown_arm_is_refused(folders, added):
    d, _ = folders
    for arm in ("a", "nope"):
        with pytest.raises(SystemExit, match=f"error: {arm} is not an unfinished arm"):
            add.add_arm(d / "filed" / "kelpie-facts", arm)


def filed_copy(folders, tmp_path, **config) -> Path:
    """The filed folder before b was added, copied, with ``config`` changed in its compare.json."""
    d, _ = folders
    copy = tmp_path / "filed" / "kelpie-facts"
    shutil.copytree(d / "filed", tmp_path / "filed", ignore=shutil.ignore_patterns("b.json", "retrains"))
    res = json.loads((copy / "compare.json").read_text())
    res["finished"].remove("b")
    res["config"].update(config)
    (copy / "compare.json").write_text(json.dumps(res))
    return copy


def test_a_changed_removal_of_a_finished_arm_stops_the_filing_before_the_retrain(folders, added, tmp_path):
    copy = filed_copy(folders, tmp_path)
    rec = json.loads((copy / "arms" / "a.json").read_text())
    (copy / "arms" / "a.json").write_text(json.dumps(rec | {"digest": "0" * 64}))
    before = (copy / "compare.json").read_text()
    with pytest.raises(SystemExit, match="error: the finished arms a no longer match"):
        add.add_arm(copy, "b")
    assert (copy / "compare.json").read_text() == before and not (copy / "arms" / "b.json").exists()


def test_a_methods_explanations_missing_from_the_folder_are_named_before_the_retrain(folders, added, tmp_path):
    copy = filed_copy(folders, tmp_path, methods=["tracin"])
    with pytest.raises(DataError, match=r"explanations/tracin\.tsv: missing, or made with other settings"):
        add.add_arm(copy, "b")
    assert not (copy / "arms" / "b.json").exists()


def test_a_data_file_changed_since_the_run_stops_the_filing(folders, added, tmp_path):
    copy = filed_copy(folders, tmp_path, model_dir=str(tmp_path / "recipe"))
    config = json.loads((copy.parent / "run" / "config.json").read_text())
    config["data_files"]["train"]["sha256"] = "0" * 64  # as if the training file were another one
    (copy.parent / "run" / "config.json").write_text(json.dumps(config))
    with pytest.raises(DataError, match="the run's train file changed since the run was trained"):
        add.add_arm(copy, "b")
    assert not (tmp_path / "recipe" / "node_dict.txt").exists()


def test_filing_an_added_arm_refreshes_its_fact_set_status_and_command(folders, added, tmp_path, monkeypatch):
    d, _ = folders
    dest = tmp_path / "results"
    shutil.copytree(d / "filed", dest / "necessity_kelpie" / "tiny")
    entry = {"command": "first", "status": {"tiny/train": "done"}, "fact_sets": {}}
    (dest / "necessity_kelpie.json").write_text(json.dumps({"datasets": {"tiny": entry}}))
    monkeypatch.setattr(add, "DEST", dest)
    add.file_arm("tiny", "kelpie-facts", "b", "python benchmarks/necessity_add_arm.py tiny b")
    got = json.loads((dest / "necessity_kelpie.json").read_text())["datasets"]["tiny"]
    assert got["fact_sets"]["kelpie-facts"]["finished"] == ["a", "b", "noise"]
    assert got["status"] == {"tiny/train": "done", "tiny/kelpie-facts/b": "done"}
    assert got["command"] == "first"  # the dataset's own command stays; the arm's is beside it
    (a,) = got["added_arms"]
    assert (a["fact_set"], a["arm"], a["command"]) == (
        "kelpie-facts",
        "b",
        "python benchmarks/necessity_add_arm.py tiny b",
    )
    assert a["commit"] == add.git_commit() and a["machine"] == add.machine()
    add.file_arm("tiny", "kelpie-facts", "b", "again")  # filed twice: the later filing replaces the earlier
    again = json.loads((dest / "necessity_kelpie.json").read_text())["datasets"]["tiny"]["added_arms"]
    assert [x["command"] for x in again] == ["again"]


def test_the_scripts_flags_reach_the_folder_device_and_filing(tmp_path, monkeypatch):
    (tmp_path / "necessity_kelpie" / "tiny" / "own-facts").mkdir(parents=True)
    (tmp_path / "necessity_kelpie" / "tiny" / "own-facts" / "compare.json").write_text("{}")
    monkeypatch.setattr(add, "DEST", tmp_path)
    calls = []
    monkeypatch.setattr(add, "add_arm", lambda *a: calls.append(("add", *a)))
    monkeypatch.setattr(add, "file_arm", lambda *a: calls.append(("file", *a)))
    monkeypatch.setitem(sys.modules, "necessity_kelpie_results", type(sys)("stub"))
    sys.modules["necessity_kelpie_results"].update_docs = lambda: calls.append(("docs",))
    argv = ["benchmarks/necessity_add_arm.py", "tiny", "b", "--fact-set", "own-facts", "--device", "cpu"]
    monkeypatch.setattr(sys, "argv", argv)
    add.main()
    folder = tmp_path / "necessity_kelpie" / "tiny" / "own-facts"
    command = "python benchmarks/necessity_add_arm.py tiny b --fact-set own-facts --device cpu"
    assert calls == [("add", folder, "b", "cpu"), ("file", "tiny", "own-facts", "b", command), ("docs",)]
    monkeypatch.setattr(sys, "argv", argv[:3])  # the default fact set, which this folder lacks
    with pytest.raises(SystemExit, match="kelpie-facts holds no compare.json"):
        add.main()


def test_a_data_error_reaches_the_user_as_one_error_line(tmp_path, monkeypatch):
    (tmp_path / "necessity_kelpie" / "tiny" / "kelpie-facts").mkdir(parents=True)
    (tmp_path / "necessity_kelpie" / "tiny" / "kelpie-facts" / "compare.json").write_text("{}")
    monkeypatch.setattr(add, "DEST", tmp_path)

    def failing(*a):
        raise DataError("the run's train file is missing", "data/train.txt")

    monkeypatch.setattr(add, "add_arm", failing)
    monkeypatch.setattr(sys, "argv", ["benchmarks/necessity_add_arm.py", "tiny", "b"])
    with pytest.raises(SystemExit) as e:
        add.main()
    assert str(e.value) == "error: data/train.txt: the run's train file is missing"
