"""errors.py and runtime/cachedir.py by hand: how a data error names its file and line, what
``require_file`` accepts and refuses, and where the user cache lives.

References: the messages written out here; the XDG rule for Linux cache folders.
"""

import os
import sys
from pathlib import Path

import pytest

from tracegraph.errors import DataError, TracegraphError, require_file
from tracegraph.runtime.cachedir import cache_dir


def test_a_data_error_names_the_file_then_the_line():
    e = DataError("bad triple", Path("data/train.txt"), 3)
    assert str(e) == "data/train.txt:3: bad triple" and isinstance(e, TracegraphError)
    assert (e.path, e.line, e.reason) == ("data/train.txt", 3, "bad triple")
    assert str(DataError("empty", "t.txt")) == "t.txt: empty"
    assert str(DataError("empty", "t.txt", 0)) == "t.txt:0: empty"  # a line 0 is still a line
    plain = DataError("no file involved")
    assert str(plain) == "no file involved" and (plain.path, plain.line) == (None, None)


def test_require_file_refuses_missing_files_and_folders_and_takes_pipes(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("a\tr\tb\n")
    assert require_file(str(f)) == f and isinstance(require_file(str(f)), Path)
    with pytest.raises(DataError) as e:
        require_file(tmp_path / "nope.txt", "training file")
    assert str(e.value) == f"{tmp_path / 'nope.txt'}: training file not found"
    with pytest.raises(DataError) as e:
        require_file(tmp_path)
    assert str(e.value) == f"{tmp_path}: file is a directory, not a file"
    if sys.platform != "win32":
        fifo = tmp_path / "pipe"
        os.mkfifo(fifo)
        assert require_file(fifo) == fifo


def test_the_cache_is_the_variables_folder_else_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TRACEGRAPH_CACHE_DIR", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRACEGRAPH_CACHE_DIR", "~/cache")
    assert cache_dir() == tmp_path / "home" / "cache"  # ~ expanded
    monkeypatch.setenv("TRACEGRAPH_CACHE_DIR", "")  # empty counts as unset
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert cache_dir() == tmp_path / "xdg" / "tracegraph"
        monkeypatch.delenv("XDG_CACHE_HOME")
        assert cache_dir() == tmp_path / "home" / ".cache" / "tracegraph"


def test_on_windows_the_cache_has_no_author_folder(monkeypatch, tmp_path):
    """platformdirs' Windows layout, with the Windows folder lookup stood in for: the cache is
    %LOCALAPPDATA%\\tracegraph\\Cache, not ...\\tracegraph\\tracegraph\\Cache (the author is not asked)."""
    import platformdirs
    import platformdirs.windows

    monkeypatch.delenv("TRACEGRAPH_CACHE_DIR", raising=False)
    monkeypatch.setattr(platformdirs, "PlatformDirs", platformdirs.windows.Windows)
    monkeypatch.setattr(platformdirs.windows, "get_win_folder", lambda csidl: str(tmp_path / csidl))
    assert cache_dir() == tmp_path / "CSIDL_LOCAL_APPDATA" / "tracegraph" / "Cache"
