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
    """Yield a temporary path next to ``path``; rename it onto ``path`` only on success."""
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
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(o):
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def save_checkpoint(path: str | Path, payload: dict) -> None:
    """torch.save to a temp file, then rename. ``payload`` must hold tensors and plain types."""
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """Load a checkpoint without unpickling arbitrary objects."""
    p = Path(path)
    if not p.is_file():
        raise DataError("checkpoint not found", p)
    try:
        return torch.load(p, map_location=map_location, weights_only=True)
    except Exception as e:  # noqa: BLE001 - any failure here is a bad file for the user
        raise DataError(f"cannot load checkpoint safely (weights_only): {e}", p) from None


def read_json(path: str | Path) -> Any:
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
