"""A set of files written into an output folder all at once, or not at all.

Commands that write several files that belong together (an import's triples and id maps, a split's
train/valid/test) stage them in a hidden folder inside the output folder and rename them into place
only when every one is written: a full disk or a folder that cannot be written leaves the output
folder as it was, never a ``triples.txt`` without its ``node_dict.txt``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from tracegraph.errors import TracegraphError


def check_output_folder(out: str | Path) -> Path:
    """Refuse an output folder that names an existing file (before any work is done).

    The message starts with ``output_dir``, which the CLI shows as ``--output-dir``.

    Args:
        out: The output folder.

    Returns:
        ``out`` as a Path.

    Raises:
        TracegraphError: If ``out`` or one of its parents exists and is not a folder.
    """
    out = Path(out)
    for p in (out, *out.parents):
        if p.exists():
            if not p.is_dir():
                what = "exists and is a file" if p == out else f"{p} is a file"
                raise TracegraphError(f"output_dir {out}: {what}, not a folder")
            break
    return out


@contextlib.contextmanager
def staged_folder(out: str | Path) -> Iterator[Path]:
    """Yield a hidden staging folder inside ``out``; its files move into ``out`` when the block ends.

    If the block fails, nothing moves and the staging folder is removed.

    Files already in ``out`` under other names are kept; those under the same names are replaced.
    Folders that did not exist are created, and removed again if the write fails.

    Args:
        out: The output folder.

    Yields:
        The staging folder: write the files there (plain files, no subfolders).

    Raises:
        TracegraphError: If ``out`` is a file, a file's name is taken by a folder in ``out``, or the
            files cannot be written (the reason, such as a permission or a full disk, is named).
    """
    out = check_output_folder(out)
    created = [p for p in (out, *out.parents) if not p.exists()]
    stage = None
    try:
        out.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=".staging-", dir=out))
        yield stage
        names = sorted(p.name for p in stage.iterdir())
        taken = [name for name in names if (out / name).is_dir()]
        if taken:
            raise TracegraphError(f"output_dir {out}: {out / taken[0]} is a folder; it must be free for the file")
        for name in names:  # only renames from here: within one folder they need no space
            os.replace(stage / name, out / name)
        stage.rmdir()
    except OSError as e:
        _remove(stage, created)
        raise TracegraphError(f"output_dir {out}: cannot write there ({e.strerror or e})") from None
    except BaseException:
        _remove(stage, created)
        raise


def _remove(stage: Path | None, created: list[Path]) -> None:
    if stage is not None:
        shutil.rmtree(stage, ignore_errors=True)
    for p in created:  # deepest first: each is empty once its child is gone
        with contextlib.suppress(OSError):
            p.rmdir()
