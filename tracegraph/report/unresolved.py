"""Questions ``tracegraph explain`` could not explain: its ``unresolved.tsv``, and the page's section.

The file sits in the explanations folder: a header line ``line<TAB>question<TAB>reason``, then one
row per question it could not explain (the question's line in the file given to explain, the
question as written, why). A question written with tabs keeps them: every field between the first
and the last is the question's.
"""

from __future__ import annotations

import csv
from pathlib import Path

from tracegraph.errors import DataError
from tracegraph.kg.data.questions import UNRESOLVED_FILE, UNRESOLVED_HEADER
from tracegraph.report.html import Section, breakable, e, table

UNRESOLVED = UNRESOLVED_FILE
HEADER = list(UNRESOLVED_HEADER)


def read_unresolved(directory: str | Path) -> list[tuple[str, str, str]]:
    """The questions an explanations folder records as not explained.

    Args:
        directory: a ``tracegraph explain -o`` folder.

    Returns:
        ``(line, question, reason)`` per row of its ``unresolved.tsv``, in the file's order; empty
        when there is no such file.

    Raises:
        DataError: the file cannot be read, its header is not ``line, question, reason``, or a row
            has fewer than three fields (naming the file and line).
    """
    path = Path(directory) / UNRESOLVED
    if not path.is_file():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"cannot read: {err}", path) from None
    rows = list(csv.reader(text.splitlines(), delimiter="\t"))
    if not rows or [f.strip().lower() for f in rows[0]] != HEADER:
        raise DataError("expected the header line `line<TAB>question<TAB>reason`", path, 1)
    out = []
    for n, fields in enumerate(rows[1:], start=2):
        if not any(f.strip() for f in fields):
            continue
        if len(fields) < 3:
            raise DataError(
                f"expected line, question and reason separated by tabs, got {len(fields)} field(s)", path, n
            )
        out.append((fields[0], "\t".join(fields[1:-1]), fields[-1]))
    return out


def unresolved_section(found: list[tuple[Path, list[tuple[str, str, str]]]]) -> Section | None:
    """The "Questions not explained" section, or None when no folder records any.

    Args:
        found: per explanations folder, its path and what :func:`read_unresolved` returned.

    Returns:
        The section (key ``unresolved``): per folder with rows, its file and a table of line,
        question and reason.
    """
    parts = [
        f"<p class='note'>From <code>{breakable(Path(d) / UNRESOLVED)}</code>.</p>"
        + table(
            HEADER, [[e(line), f"<code>{breakable(q)}</code>", breakable(why)] for line, q, why in rows], num_from=3
        )
        for d, rows in found
        if rows
    ]
    if not parts:
        return None
    n = sum(len(rows) for _, rows in found)
    return Section(
        "unresolved",
        f"<h2>Questions not explained</h2><p><code>tracegraph explain</code> could not explain {n} "
        f"question{'s' * (n != 1)}: each row gives its line in the questions file, the question as written and "
        "why.</p>" + "".join(parts),
    )


__all__ = ["UNRESOLVED", "read_unresolved", "unresolved_section"]
