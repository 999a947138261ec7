"""One policy for text inputs: a UTF-8 byte-order mark is removed, with a note.

What some Windows editors put first is removed with a note naming the file, so it never becomes
part of the first label or field.
"""

from __future__ import annotations

from pathlib import Path

BOM = "\ufeff"


def strip_bom(text: str, path: str | Path) -> str:
    """``text`` without a leading byte-order mark; removing one logs ``PATH:1: removed a UTF-8 byte-order mark``.

    Args:
        text: the decoded text of a whole file (or its first line).
        path: the file, for the note.

    Returns:
        The text, BOM removed.
    """
    if not text.startswith(BOM):
        return text
    from tracegraph.runtime.progress import log

    log.info(f"{path}:1: removed a UTF-8 byte-order mark")
    return text[len(BOM) :]
