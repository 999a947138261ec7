"""One run per run directory.

A run directory holds the files of exactly one training run: a fresh run refuses a directory
that already has files (unless ``--overwrite``, which clears it first, and only if it looks like
a run), ``--resume`` continues the run recorded there, and every checkpoint carries the run's id
(also in ``config.json``) so that a reader summing over checkpoints (TracIn) can refuse a mix.

Runs written before run ids existed have none; they are accepted as one run as long as none of
their checkpoints has an id either.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from tracegraph.errors import TracegraphError

#: what identifies a directory as a run directory (tracegraph train's outputs)
_RUN_MARKERS = ("config.json", "checkpoints", "final_model.pt", "best_model.pt", "training_history.json")


def new_run_id() -> str:
    """A fresh random run id (32 hexadecimal digits)."""
    return uuid.uuid4().hex


def recorded_run_id(out: Path) -> str | None:
    """The run id recorded in ``out/config.json``.

    Args:
        out: The run directory.

    Returns:
        The id, or None if there is no config or it records no id (a run from before run ids).
    """
    from tracegraph.runtime.checkpoints import read_json

    cfg = out / "config.json"
    if not cfg.is_file():
        return None
    rid = read_json(cfg).get("run_id")
    return rid if isinstance(rid, str) else None


def claim(out: Path, *, resume: bool, overwrite: bool) -> str:
    """Make ``out`` this run's directory and return the run id.

    Call it once the inputs are read, so a bad input stops the run before the directory is touched.
    A fresh run needs ``out`` absent or empty, or ``overwrite`` clears it (only if it looks like a run
    directory). A resumed run keeps the id in config.json (a new one for a run from before run ids).

    Args:
        out: The run directory.
        resume: Continue the run already in ``out``.
        overwrite: Delete the run in ``out`` and start afresh.

    Returns:
        The run id.

    Raises:
        TracegraphError: If both flags are given, ``out`` is not usable as asked, or is not empty
            and neither flag is given.
    """
    if resume and overwrite:
        raise TracegraphError("--resume and --overwrite contradict each other: continue the run, or replace it")
    if resume:
        if not out.is_dir():
            raise TracegraphError(f"--resume: {out} does not exist")
        return recorded_run_id(out) or new_run_id()
    if out.exists() and not out.is_dir():
        raise TracegraphError(f"{out} exists and is not a directory")
    entries = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if entries and not overwrite:
        shown = ", ".join(entries[:4]) + (", …" if len(entries) > 4 else "")
        raise TracegraphError(
            f"{out} is not empty ({shown}): pass --resume to continue the run in it, "
            f"--overwrite to delete it and start afresh, or choose another --output-dir"
        )
    if entries:
        if not any((out / m).exists() for m in _RUN_MARKERS):
            raise TracegraphError(
                f"--overwrite: {out} does not look like a run directory (no config.json or "
                f"checkpoints/); not deleting it — choose another --output-dir"
            )
        for p in out.iterdir():
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    out.mkdir(parents=True, exist_ok=True)
    return new_run_id()


def checkpoint_run_id(path: Path) -> str | None:
    """A checkpoint's run id, read without loading its tensors (memory-mapped).

    Args:
        path: The checkpoint file.

    Returns:
        The id, or None if the checkpoint records none.
    """
    import torch

    try:
        payload = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001 - not a zip-format file (mmap needs one): read it whole
        from tracegraph.runtime.checkpoints import load_checkpoint

        payload = load_checkpoint(path)
    rid = payload.get("run_id") if isinstance(payload, dict) else None
    return rid if isinstance(rid, str) else None


def check_one_run(model_dir: Path, checkpoints: list[Path]) -> None:
    """Refuse checkpoints that do not all belong to the run recorded in ``model_dir``.

    Args:
        model_dir: The run directory holding config.json.
        checkpoints: The checkpoint files about to be used together.

    Raises:
        TracegraphError: If any checkpoint's run id differs from the recorded one (or, with none
            recorded, from the others').
    """
    expected = recorded_run_id(model_dir)
    ids = {p: checkpoint_run_id(p) for p in checkpoints}
    found = set(ids.values())
    if expected is None and found <= {None}:
        return  # a run from before run ids, or an imported model: nothing to compare
    stray = [p for p, rid in ids.items() if rid != expected] if expected else []
    if expected is None and len(found) > 1:
        stray = [p for p, rid in ids.items() if rid != ids[checkpoints[0]]]
    if stray:
        theirs = ids[stray[0]] or "none"
        raise TracegraphError(
            f"{stray[0]} belongs to another run (run id {theirs}, {model_dir / 'config.json'} says "
            f"{expected or 'none'}; {len(stray)} of {len(checkpoints)} checkpoints differ): TracIn would sum over "
            f"two runs. Retrain into an empty --output-dir, or pass --checkpoints with one run's files"
        )
