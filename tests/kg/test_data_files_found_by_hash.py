"""A run's data files: config.json records each file's absolute path, its path from the run
directory and the sha256 of its bytes; reading them back takes the first place whose bytes match,
and a file found nowhere, or only with other bytes, is one error naming it and the option that
replaces it. Runs that record no hashes read each path as written, with a warning.

Expected values are worked by hand: hashlib over the bytes, relative paths counted by directory."""

import hashlib
import logging
import os

import numpy as np
import pytest

from tracegraph.errors import DataError
from tracegraph.kg.data.datafiles import record_data_files, resolve_data_files, sha256_of


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write(path, data: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("size", [0, 5, (1 << 20) - 1, 1 << 20, (5 << 19) + 3])
def test_sha256_of_a_file_equals_hashlib_over_its_bytes(tmp_path, size):
    i = np.arange(size, dtype=np.int64)
    data = ((i * 7 + i // 251) % 256).astype(np.uint8).tobytes()
    assert sha256_of(_write(tmp_path / "f.bin", data)) == _digest(data)
    assert sha256_of(str(tmp_path / "f.bin")) == _digest(data)


def test_record_holds_absolute_and_run_relative_paths_and_hashes(tmp_path, monkeypatch):
    train = _write(tmp_path / "data" / "train.txt", b"h\tr\tt\n")
    test = _write(tmp_path / "proj" / "run" / "test.txt", b"x\tr\ty\n")
    monkeypatch.chdir(tmp_path / "data")
    rec = record_data_files({"train": "train.txt", "valid": None, "test": test}, tmp_path / "proj" / "run")
    assert rec == {
        "train": {
            "path": str(train.resolve()),
            "relative": os.path.join("..", "..", "data", "train.txt"),
            "sha256": _digest(b"h\tr\tt\n"),
        },
        "test": {"path": str(test.resolve()), "relative": "test.txt", "sha256": _digest(b"x\tr\ty\n")},
    }


def _config(entries):
    return {"data_files": entries, "train": {"train": "ignored.txt"}}


def test_files_at_their_recorded_absolute_place_are_used(tmp_path):
    tr = _write(tmp_path / "d" / "train.txt", b"a\tr\tb\n")
    te = _write(tmp_path / "d" / "test.txt", b"c\tr\td\n")
    rec = record_data_files({"train": tr, "test": te}, tmp_path / "run")
    assert resolve_data_files(tmp_path / "run", _config(rec)) == {"train": tr, "test": te}


def test_a_moved_run_finds_its_files_from_where_the_run_now_is(tmp_path):
    tr = _write(tmp_path / "old" / "split" / "train.txt", b"a\tr\tb\n")
    rec = record_data_files({"train": tr}, tmp_path / "old" / "run")
    moved = _write(tmp_path / "new" / "split" / "train.txt", b"a\tr\tb\n")
    tr.unlink()  # the absolute path leads nowhere now
    assert resolve_data_files(tmp_path / "new" / "run", _config(rec)) == {"train": moved.resolve()}


def test_the_place_whose_bytes_match_wins_over_an_earlier_changed_one(tmp_path):
    tr = _write(tmp_path / "old" / "split" / "train.txt", b"a\tr\tb\n")
    rec = record_data_files({"train": tr}, tmp_path / "old" / "run")
    copy = _write(tmp_path / "new" / "split" / "train.txt", b"a\tr\tb\n")
    tr.write_bytes(b"a\tr\tc\n")  # the absolute place exists but holds other bytes
    assert resolve_data_files(tmp_path / "new" / "run", _config(rec)) == {"train": copy.resolve()}


def test_a_missing_file_is_one_error_naming_its_recorded_path_the_config_and_the_override(tmp_path):
    va = _write(tmp_path / "split" / "valid.txt", b"a\tr\tb\n")
    rec = record_data_files({"valid": va}, tmp_path / "run")
    va.unlink()
    run = tmp_path / "moved" / "run"  # neither the recorded path nor the one beside the moved run exists
    with pytest.raises(DataError) as e:
        resolve_data_files(run, _config(rec))
    assert str(e.value) == (
        f"{va.resolve()}: the run's valid file is missing (recorded in {run / 'config.json'}); "
        "give the file with --valid (evaluate)"
    )


@pytest.mark.parametrize(
    "split, override",
    [("train", "--train (explain, evaluate, predict)"), ("test", "--test (evaluate)")],
)
def test_a_changed_file_is_one_error_naming_the_place_it_was_found(tmp_path, split, override):
    old = _write(tmp_path / "old" / f"{split}.txt", b"a\tr\tb\n")
    run = tmp_path / "a" / "run"
    rec = record_data_files({split: old}, run)
    old.unlink()
    found = _write(tmp_path / "old" / f"{split}.txt", b"changed\n")  # only its own place, other bytes
    with pytest.raises(DataError) as e:
        resolve_data_files(run, _config(rec))
    assert str(e.value) == (
        f"{found.resolve()}: the run's {split} file changed since the run was trained (sha256 "
        f"differs) (recorded in {run / 'config.json'}); give the file with {override}"
    )
    relative_only = {split: dict(rec[split], path=str(tmp_path / "nowhere.txt"))}
    _write(run / rec[split]["relative"], b"other\n")  # found only at its run-relative place, other bytes
    with pytest.raises(DataError) as e:
        resolve_data_files(run, _config(relative_only))
    assert str(e.value).startswith(f"{(run / rec[split]['relative']).resolve()}: the run's {split} file changed")


def test_splits_not_recorded_or_empty_are_left_out(tmp_path):
    tr = _write(tmp_path / "train.txt", b"a\tr\tb\n")
    rec = record_data_files({"train": tr}, tmp_path / "run")
    rec["valid"] = {}
    rec["extra"] = {"path": "x", "relative": "x", "sha256": "0"}  # not a split: not read
    assert resolve_data_files(tmp_path / "run", _config(rec)) == {"train": tr}


def test_a_run_without_hashes_reads_paths_as_written_with_warnings(tmp_path, monkeypatch, caplog):
    run = tmp_path / "run"
    here = _write(tmp_path / "cwd" / "split" / "train.txt", b"a\n")
    beside = _write(run / "split" / "test.txt", b"b\n")  # only from the run directory
    monkeypatch.chdir(tmp_path / "cwd")
    config = {"train": {"train": "split/train.txt", "valid": "split/valid.txt", "test": "split/test.txt"}}
    with caplog.at_level(logging.WARNING):
        files = resolve_data_files(run, config)
    assert files == {"train": here.relative_to(tmp_path / "cwd"), "test": beside}  # valid: found nowhere
    cfg = run / "config.json"
    assert caplog.messages == [
        f"{cfg}: the run records no hash of its train file; using split/train.txt unchecked",
        f"{cfg}: the run's valid file split/valid.txt is not found and left out (the run records no hashes; "
        "give it with --valid (evaluate))",
        f"{cfg}: the run records no hash of its test file; using {beside} unchecked",
    ]
    unhashed = {"data_files": None, "train": {"train": "split/train.txt", "valid": None, "test": "split/test.txt"}}
    assert resolve_data_files(run, unhashed) == {"train": here.relative_to(tmp_path / "cwd"), "test": beside}
    assert resolve_data_files(run, {}) == {}  # nothing recorded at all


def test_a_file_given_for_a_split_is_used_as_it_is_with_a_warning_when_it_is_not_the_recorded_one(tmp_path, caplog):
    tr = _write(tmp_path / "d" / "train.txt", b"a\tr\tb\n")
    va = _write(tmp_path / "d" / "valid.txt", b"c\tr\td\n")
    run = tmp_path / "run"
    rec = record_data_files({"train": tr, "valid": va}, run)
    tr.write_bytes(b"a\tr\tb\nedited\tr\tline\n")  # edited in place after training
    copy = _write(tmp_path / "copy.txt", b"a\tr\tb\n")  # the recorded bytes, under another name
    test = _write(tmp_path / "t.txt", b"x\tr\ty\n")  # given for a split the run did not record
    with caplog.at_level(logging.WARNING):
        assert resolve_data_files(run, _config(rec), {"train": tr}) == {"train": tr, "valid": va}
        assert resolve_data_files(run, _config(rec), {"train": copy, "test": test}) == {
            "train": copy,
            "valid": va,
            "test": test,
        }
    assert caplog.messages == [
        f"{tr}: not the train file the run recorded in {run / 'config.json'} (sha256 differs); it is used as "
        "given, though the model was trained on the recorded one"
    ]  # the copy holds the recorded bytes: no warning
    with pytest.raises(DataError, match="the train file given is not found"):
        resolve_data_files(run, _config(rec), {"train": tmp_path / "nowhere.txt"})


def test_a_stand_in_is_used_only_when_the_recorded_file_is_missing_or_changed(tmp_path, caplog):
    te = _write(tmp_path / "d" / "test.txt", b"a\tr\tb\n")
    other = _write(tmp_path / "other.txt", b"c\tr\td\n")
    run = tmp_path / "run"
    rec = record_data_files({"test": te}, run)
    assert resolve_data_files(run, _config(rec), stand_in={"test": other}) == {"test": te}  # unchanged: kept
    te.write_bytes(b"changed\n")
    with caplog.at_level(logging.WARNING):
        assert resolve_data_files(run, _config(rec), stand_in={"test": other}) == {"test": other}
    assert caplog.messages == [
        f"{te.resolve()}: the run's test file changed since the run was trained (sha256 differs); "
        f"{other} stands in for it"
    ]
