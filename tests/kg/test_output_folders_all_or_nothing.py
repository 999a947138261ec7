"""`data import-kgx` and `data split` write their files into -o all at once or not at all: an -o that
is a file is one `error:` line naming the flag and path; a write that fails (a full disk, a folder
that cannot be written) leaves the output folder exactly as it was, old files and all."""

import errno
import json
import os

import pytest

from tests.conftest import run_cli, run_cli_error, snapshot
from tracegraph.errors import TracegraphError
from tracegraph.runtime.outfolder import staged_folder


def _kgx(tmp_path):
    (tmp_path / "nodes.jsonl").write_text(json.dumps({"id": "A:1", "name": "a"}) + "\n")
    edges = [{"subject": "A:1", "predicate": "p", "object": f"B:{i}"} for i in range(10)]
    (tmp_path / "edges.jsonl").write_text("".join(json.dumps(e) + "\n" for e in edges))
    return ["data", "import-kgx", tmp_path / "nodes.jsonl", tmp_path / "edges.jsonl", "-o"]


def _triples(tmp_path):
    p = tmp_path / "all.txt"
    p.write_text("".join(f"a\tr\tb{i % 3}\nb{i % 3}\ts\ta\n" for i in range(10)))
    return ["data", "split", p, "-o"]


COMMANDS = {"import-kgx": _kgx, "split": _triples}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_output_folder_that_is_a_file_is_one_error_line(tmp_path, command):
    args = COMMANDS[command](tmp_path)
    target = tmp_path / "taken"
    target.write_text("mine\n")
    run_cli_error([*args, target], tmp_path, contains=f"--output-dir {target}: exists and is a file, not a folder")
    run_cli_error([*args, target / "below"], tmp_path, contains=f"--output-dir {target / 'below'}: {target} is a file")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_name_taken_by_a_folder_is_refused_before_anything_moves(tmp_path, command):
    args = COMMANDS[command](tmp_path)
    out = tmp_path / "out"
    (out / ("rel_dict.txt" if command == "import-kgx" else "valid.txt")).mkdir(parents=True)
    run_cli_error([*args, out], tmp_path, contains="is a folder; it must be free for the file")


# the last file each command writes: failing there is the worst case for a half-written folder
LAST_WRITE = {
    "import-kgx": ("tracegraph.kg.data.kgx", "write_edge_map"),
    "split": ("tracegraph.kg.data.split", "write_triples"),
}


@pytest.mark.parametrize("fresh", [True, False], ids=["new-folder", "folder-with-old-files"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_full_disk_on_the_last_file_leaves_the_folder_as_it_was(tmp_path, monkeypatch, command, fresh):
    args = COMMANDS[command](tmp_path)
    out = tmp_path / "deep" / "out"
    if not fresh:
        out.mkdir(parents=True)
        for name in ("triples.txt", "node_dict.txt", "train.txt", "valid.txt", "notes.md"):
            (out / name).write_text(f"old {name}\n")
    module, name = LAST_WRITE[command]
    real = getattr(__import__(module, fromlist=[name]), name)
    calls = []

    def full_disk(path, *rest):
        calls.append(path)
        if command == "import-kgx" or path.name == "test.txt":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, *rest)

    monkeypatch.setattr(f"{module}.{name}", full_disk)
    res = run_cli_error([*args, out], tmp_path, contains=f"--output-dir {out}: cannot write there (No space left")
    assert calls, "the failure was never reached"
    assert "Traceback" not in res.output
    assert (
        not (tmp_path / "deep").exists()
        if fresh
        else sorted(p.name for p in out.iterdir())
        == sorted(["triples.txt", "node_dict.txt", "train.txt", "valid.txt", "notes.md"])
    )


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only folders")
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_read_only_folder_is_one_error_line_and_stays_empty(tmp_path, command):
    args = COMMANDS[command](tmp_path)
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o555)
    try:
        run_cli_error([*args, out], tmp_path, contains=f"--output-dir {out}: cannot write there (Permission denied)")
        assert list(out.iterdir()) == []
    finally:
        out.chmod(0o755)


def test_a_good_write_lands_whole_and_keeps_other_files(tmp_path):
    out = tmp_path / "a" / "b"
    out.mkdir(parents=True)
    (out / "keep.txt").write_text("keep\n")
    (out / "x.txt").write_text("old\n")
    with staged_folder(out) as stage:
        (stage / "x.txt").write_text("new\n")
        (stage / "y.bin").write_bytes(b"\x00\x01")
        assert not (out / "y.bin").exists()  # nothing lands before the block ends
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {
        "keep.txt": b"keep\n",
        "x.txt": b"new\n",
        "y.bin": b"\x00\x01",
    }
    assert oct((out / "y.bin").stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def test_an_error_in_the_block_is_re_raised_and_leaves_nothing(tmp_path):
    before = snapshot(tmp_path)
    with pytest.raises(TracegraphError, match="bad input"), staged_folder(tmp_path / "new" / "out") as stage:
        (stage / "x.txt").write_text("half")
        raise TracegraphError("bad input")
    assert snapshot(tmp_path) == before


def test_import_and_split_into_one_folder_still_work(tmp_path):
    kg = tmp_path / "kg"
    assert run_cli(_kgx(tmp_path) + [kg]).exit_code == 0
    res = run_cli(["data", "split", kg / "triples.txt", "-o", kg])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in kg.iterdir()) == sorted(
        [
            "triples.txt",
            "node_dict.txt",
            "rel_dict.txt",
            "node_name_dict.txt",
            "node_category.txt",
            "edge_map.json",
            "train.txt",
            "valid.txt",
            "test.txt",
        ]
    )


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask
