"""Atomic writes (runtime/checkpoints.py): a write that fails leaves the old file untouched and no
temporary file behind; a successful one replaces the file whole, with a plain file's permissions;
the temporary is a hidden file beside the destination named `.<name>.<8 random characters><suffix>.tmp`
(mkstemp's documented name alphabet, written out here); a block that removes its own temporary and
then fails re-raises its own error; checkpoints load with weights_only (a pickled object is refused as a DataError)."""

import os
import re

import pytest
import torch

from tracegraph.errors import DataError
from tracegraph.runtime.checkpoints import (
    atomic_path,
    atomic_write_json,
    atomic_write_text,
    load_checkpoint,
    read_json,
    save_checkpoint,
)


def test_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    p = tmp_path / "out.json"
    atomic_write_text(p, "old\n")
    with pytest.raises(RuntimeError), atomic_path(p) as tmp:
        tmp.write_text("half")
        raise RuntimeError("interrupted")
    assert p.read_text() == "old\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out.json"]


def test_successful_write_replaces_whole_with_plain_permissions(tmp_path):
    p = tmp_path / "sub" / "dir" / "a.txt"  # parents are created
    atomic_write_text(p, "first version, longer\n")
    atomic_write_text(p, "second\n")
    assert p.read_text() == "second\n"
    umask = os.umask(0)
    os.umask(umask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~umask
    assert sorted(x.name for x in p.parent.iterdir()) == ["a.txt"]


def test_json_round_trip_with_paths(tmp_path):
    p = tmp_path / "c.json"
    atomic_write_json(p, {"path": tmp_path / "x", "n": [1, 2.5], "s": "é"})
    assert read_json(p) == {"path": str(tmp_path / "x"), "n": [1, 2.5], "s": "é"}
    with pytest.raises(TypeError):
        atomic_write_json(tmp_path / "bad.json", {"x": object()})
    assert not (tmp_path / "bad.json").exists() and [x.name for x in tmp_path.iterdir()] == ["c.json"]


class Evil:
    def __reduce__(self):
        return (print, ("unpickled!",))


def test_checkpoints_hold_tensors_and_refuse_pickled_objects(tmp_path):
    save_checkpoint(tmp_path / "ok.pt", {"w": torch.arange(3.0), "epoch": 2, "lr": 0.5})
    back = load_checkpoint(tmp_path / "ok.pt")
    assert torch.equal(back["w"], torch.arange(3.0)) and back["epoch"] == 2
    torch.save({"x": Evil()}, tmp_path / "evil.pt")
    with pytest.raises(DataError, match="weights_only"):
        load_checkpoint(tmp_path / "evil.pt")
    with pytest.raises(DataError, match="not found"):
        load_checkpoint(tmp_path / "absent.pt")


# tempfile's documented random part: 8 characters of lower-case letters, digits and "_"
_RANDOM = "[a-z0-9_]{8}"


def test_the_temporary_is_hidden_beside_the_destination_and_keeps_the_suffix(tmp_path):
    p = tmp_path / "deep" / "out.json"
    with atomic_path(p) as tmp:
        assert tmp.parent == p.parent
        assert re.fullmatch(r"\.out\.json\." + _RANDOM + r"\.tmp", tmp.name), tmp.name
        assert tmp.exists()
        tmp.write_text("x")
    with atomic_path(p, suffix=".pt") as tmp:
        assert tmp.parent == p.parent
        assert re.fullmatch(r"\.out\.json\." + _RANDOM + r"\.pt\.tmp", tmp.name), tmp.name
        tmp.write_text("y")
    assert p.read_text() == "y"
    assert sorted(x.name for x in p.parent.iterdir()) == ["out.json"]


def test_a_block_that_removed_its_temporary_re_raises_its_own_error(tmp_path):
    p = tmp_path / "out.txt"
    with pytest.raises(ValueError, match="the block's own"), atomic_path(p) as tmp:
        tmp.unlink()
        raise ValueError("the block's own error")
    assert list(tmp_path.iterdir()) == []
