"""Atomic writes and safe loading.

Everything is written to a temporary file in the target directory and renamed into place, so an
interrupted run never leaves a half-written checkpoint, CSV or JSON. Checkpoints are loaded with
``weights_only=True``: only tensors and plain containers, never arbitrary pickled objects.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

import torch

from tracegraph.errors import DataError


@contextlib.contextmanager
def atomic_path(path: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to ``path`` and rename it onto ``path`` only on success.

    If the block raises, the temporary file is deleted and ``path`` is left as it was.

    Args:
        path: The final destination; its parent directories are created.
        suffix: Extension kept on the temporary name (some writers choose the format by it).

    Yields:
        The temporary path to write to.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix + ".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # mkstemp creates 0600 files; give the result the permissions a plain open() would
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)
        os.replace(tmp_path, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write UTF-8 text to ``path`` atomically (all of it or, on failure, nothing).

    Args:
        path: The destination file.
        text: The text to write.
    """
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON (with a final newline) to ``path`` atomically.

    Args:
        path: The destination file.
        obj: A JSON-serialisable value; NumPy and torch scalars and paths are converted too.
    """
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(o):
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def save_checkpoint(path: str | Path, payload: dict) -> None:
    """Save ``payload`` with ``torch.save`` to a temporary file, then rename it onto ``path``.

    Args:
        path: The checkpoint file to write.
        payload: Tensors and plain Python types only, so that it loads with ``weights_only=True``.
    """
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """Load a checkpoint without unpickling arbitrary objects (``weights_only=True``).

    Args:
        path: The checkpoint file.
        map_location: Device the tensors are loaded onto.

    Returns:
        The saved dictionary.

    Raises:
        DataError: If the file is missing or cannot be loaded safely.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError("checkpoint not found", p)
    try:
        return torch.load(p, map_location=map_location, weights_only=True)
    except Exception as e:  # noqa: BLE001 - any failure here is a bad file for the user
        raise DataError(f"cannot load checkpoint safely (weights_only): {e}", p) from None


def read_json(path: str | Path) -> Any:
    """Read a UTF-8 JSON file (a leading byte-order mark is tolerated).

    Args:
        path: The JSON file.

    Returns:
        The parsed value.

    Raises:
        DataError: If the file is missing, not UTF-8, or not valid JSON (with the line).
    """
    p = Path(path)
    if not p.is_file():
        raise DataError("file not found", p)
    try:
        from tracegraph.runtime.textfiles import strip_bom

        return json.loads(strip_bom(p.read_text(encoding="utf-8"), p))
    except json.JSONDecodeError as e:
        raise DataError(f"invalid JSON: {e.msg}", p, e.lineno) from None
    except UnicodeDecodeError as e:
        raise DataError(f"not UTF-8 text: {e.reason}", p) from None
