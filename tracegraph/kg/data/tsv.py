r"""Reading text and tab-separated files, with errors that name the file and line.

A ``.gz`` file is decompressed first; a byte-order mark is removed with a note; blank lines are
skipped and a trailing ``\r`` (Windows line ends) is removed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tracegraph.errors import DataError, require_file
from tracegraph.runtime.textfiles import strip_bom


def read_text(path: str | Path, what: str = "file") -> str:
    """A file's UTF-8 text; a ``.gz`` file is decompressed first, a byte-order mark removed with a note.

    Args:
        path: The file.
        what: What the file is, for error messages.

    Returns:
        The text.

    Raises:
        DataError: If the file is missing, not valid gzip, or not UTF-8 (naming the line).
    """
    p = require_file(path, what)
    data = p.read_bytes()
    if p.name.endswith(".gz"):
        import gzip
        import zlib

        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise DataError(f"not a readable gzip file ({e})", p) from None
    try:
        return strip_bom(data.decode("utf-8"), p)
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise DataError(f"not valid UTF-8 ({e.reason})", p, line) from None


def read_tsv(path: str | Path, ncols: int, what: str, header_hint: str) -> tuple[list[list[str]], np.ndarray]:
    """Split a tab-separated file into ``ncols`` non-empty fields per line; blank lines are skipped.

    Args:
        path: The file.
        ncols: Fields per line.
        what: What the file is, for error messages.
        header_hint: The expected layout, for error messages (e.g. ``"label<TAB>index"``).

    Returns:
        The ``ncols`` columns as lists of strings, and the 1-based line number of every row.

    Raises:
        DataError: If a line has another number of fields or an empty field, or the file is empty.
    """
    text = read_text(path, what)
    cols: list[list[str]] = [[] for _ in range(ncols)]
    lines: list[int] = []
    for no, line in enumerate(text.split("\n"), start=1):
        if line.endswith("\r"):
            line = line[:-1]
        if not line:
            continue
        parts = line.split("\t")
        if len(parts) != ncols:
            raise DataError(f"expected {ncols} tab-separated fields ({header_hint}), found {len(parts)}", path, no)
        for j, part in enumerate(parts):
            if not part.strip():
                raise DataError(f"field {j + 1} is empty ({header_hint})", path, no)
            cols[j].append(part)
        lines.append(no)
    if not lines:
        raise DataError(f"{what} is empty", path)
    return cols, np.asarray(lines, dtype=np.int64)
