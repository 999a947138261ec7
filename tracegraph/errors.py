"""The error types users see. The CLI turns these into one red line and exit code 2."""

from __future__ import annotations

from pathlib import Path


class TracegraphError(Exception):
    """A problem the user can fix (bad input, missing file, wrong option)."""


class DataError(TracegraphError):
    """Bad input data. The message names the file and, where there is one, the line."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.path = str(path) if path is not None else None
        self.line = line
        self.reason = message
        where = ""
        if self.path is not None:
            where = f"{self.path}:{line}: " if line is not None else f"{self.path}: "
        super().__init__(where + message)


def require_file(path: str | Path, what: str = "file") -> Path:
    """Return ``path`` as a Path after checking that it names an existing file.

    Args:
        path: The file to check.
        what: What the file is, for the error message (e.g. ``"training file"``).

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        DataError: If ``path`` does not exist or is a directory.
    """
    p = Path(path)
    if not p.exists():
        raise DataError(f"{what} not found", p)
    if p.is_dir():  # pipes and process substitutions (<(...)) are fine
        raise DataError(f"{what} is a directory, not a file", p)
    return p
