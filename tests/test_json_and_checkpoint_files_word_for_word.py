"""The run folder's JSON and checkpoint files, byte for byte and message for message: JSON
indented by two in the caller's key order with numpy scalars as plain numbers, and every refusal
naming its file (and line) as the user will read it."""

import numpy as np
import pytest
import torch

from tests.conftest import log_lines
from tracegraph.errors import DataError
from tracegraph.runtime.checkpoints import atomic_write_json, load_checkpoint, read_json, save_checkpoint
from tracegraph.runtime.progress import log


def test_json_is_indented_by_two_in_the_given_key_order(tmp_path):
    atomic_write_json(tmp_path / "a.json", {"b": np.int64(3), "a": [np.float32(0.5), 2]})
    assert (tmp_path / "a.json").read_text(encoding="utf-8") == '{\n  "b": 3,\n  "a": [\n    0.5,\n    2\n  ]\n}\n'


def test_json_refuses_what_it_cannot_write_by_type_name(tmp_path):
    with pytest.raises(TypeError, match=r"^not JSON serialisable: object$"):
        atomic_write_json(tmp_path / "a.json", {"x": object()})
    assert not (tmp_path / "a.json").exists()


def test_missing_files_are_named(tmp_path):
    p = tmp_path / "nope.json"
    with pytest.raises(DataError) as e:
        read_json(p)
    assert str(e.value) == f"{p}: file not found"
    with pytest.raises(DataError) as e:
        load_checkpoint(tmp_path / "nope.pt")
    assert str(e.value) == f"{tmp_path / 'nope.pt'}: checkpoint not found"


def test_bad_json_is_named_with_its_line_and_bad_bytes_with_the_file(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{\n  "a": 1,\n  oops\n}\n')
    with pytest.raises(DataError) as e:
        read_json(p)
    assert str(e.value).startswith(f"{p}:3: invalid JSON: ") and e.value.line == 3
    p.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(DataError) as e:
        read_json(p)
    assert str(e.value) == f"{p}: not UTF-8 text: invalid start byte"


def test_a_byte_order_mark_is_removed_with_a_note_naming_the_file(tmp_path):
    p = tmp_path / "bom.json"
    p.write_bytes(b'\xef\xbb\xbf{"a": 1}')
    with log_lines(log) as lines:
        assert read_json(p) == {"a": 1}
    assert any(x.startswith(f"{p}:1:") for x in lines), lines


class _Foreign:
    pass


def test_an_unsafe_checkpoint_is_refused_naming_the_file(tmp_path):
    p = tmp_path / "evil.pt"
    torch.save({"x": _Foreign()}, p)
    with pytest.raises(DataError) as e:
        load_checkpoint(p)
    assert str(e.value).startswith(f"{p}: cannot load checkpoint safely (weights_only): ")
    save_checkpoint(tmp_path / "ok.pt", {"w": torch.ones(2)})
    assert torch.equal(load_checkpoint(tmp_path / "ok.pt")["w"], torch.ones(2))
