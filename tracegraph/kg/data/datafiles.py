"""The data files a run was trained on, recorded so the run works from any directory and after a move.

``config.json``'s ``data_files`` holds, per split (train, valid, test), the file's resolved absolute
path, its path relative to the run directory, and the sha256 of its bytes. Reading them back
(:func:`resolve_data_files`) tries the absolute path, then the relative one from wherever the run
directory now is (a run copied together with its data); a file found at neither place, or whose bytes
changed, is an error naming it and the option that gives another file instead; a file given that
way is used as it is (with a warning when its bytes are not the recorded ones).

Runs that record no hashes are read as before: each path as written, from the working directory or
the run directory, with a warning that nothing checks it is the same file.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from tracegraph.errors import DataError

SPLITS = ("train", "valid", "test")

#: the option that gives a file in place of a recorded one, named in the error when the file is gone or changed
OVERRIDE = {
    "train": "--train (explain, evaluate, predict)",
    "valid": "--valid (evaluate)",
    "test": "--test (evaluate)",
}


def sha256_of(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, read in 1 MiB blocks.

    Args:
        path: The file.

    Returns:
        The digest as 64 hexadecimal digits.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def record_data_files(files: dict[str, str | Path | None], run_dir: str | Path) -> dict:
    """What ``config.json`` records of each given file.

    That is its absolute path, its path relative to the run directory, and its sha256.

    Args:
        files: split name -> file (None: not given, left out).
        run_dir: the run directory the relative paths start from.

    Returns:
        ``{split: {"path": ..., "relative": ..., "sha256": ...}}``.
    """
    run_dir = Path(run_dir).resolve()
    out = {}
    for name, p in files.items():
        if p is None:
            continue
        absolute = Path(p).resolve()
        out[name] = {
            "path": str(absolute),
            "relative": os.path.relpath(absolute, run_dir),
            "sha256": sha256_of(absolute),
        }
    return out


def resolve_data_files(
    run_dir: str | Path, config: dict, given: dict | None = None, stand_in: dict | None = None
) -> dict[str, Path]:
    """The run's data files as they are now, each checked against its recorded hash.

    A file given for a split is used in place of the recorded one, as it is: with a warning when
    its bytes differ from what the run recorded (the model was trained on the recorded file). A
    ``stand_in`` file is used only when the recorded one is missing or changed, with a warning.

    Args:
        run_dir: the run directory (where it is now).
        config: its ``config.json``.
        given: split name -> file to use instead of the recorded one (``--train``, ``--valid``).
        stand_in: split name -> file to use when the recorded one is missing or changed.

    Returns:
        split name -> existing file, for every split the run was trained with or given.

    Raises:
        DataError: a recorded file, not given, is at neither its absolute nor its relative place,
            or its bytes changed; the message names the file and the option that gives another.
    """
    run_dir = Path(run_dir)
    given = {k: Path(v) for k, v in (given or {}).items() if v is not None}
    stand_in = {k: Path(v) for k, v in (stand_in or {}).items() if v is not None}
    recorded = config.get("data_files")
    if not isinstance(recorded, dict):
        found = _unhashed(run_dir, config.get("train", {}), set(given))
        return {n: given.get(n) or found[n] for n in SPLITS if n in given or n in found}
    out = {}
    for name in SPLITS:
        entry = recorded.get(name)
        if name in given:
            out[name] = _given(given[name], name, entry, run_dir)
            continue
        if not entry:
            continue
        candidates = [Path(entry["path"]), (run_dir / entry["relative"]).resolve()]
        existing = [c for c in candidates if c.is_file()]
        match = next((c for c in existing if sha256_of(c) == entry["sha256"]), None)
        if match is None:
            shown = existing[0] if existing else candidates[0]
            what = "changed since the run was trained (sha256 differs)" if existing else "is missing"
            if name in stand_in:
                _warn(f"{shown}: the run's {name} file {what}; {stand_in[name]} stands in for it")
                out[name] = stand_in[name]
                continue
            raise DataError(
                f"the run's {name} file {what} (recorded in {run_dir / 'config.json'}); "
                f"give the file with {OVERRIDE[name]}",
                shown,
            )
        out[name] = match
    return out


def _given(path: Path, name: str, entry: dict | None, run_dir: Path) -> Path:
    """A file given for a split: used as it is, with a warning when it is not the file the run recorded."""
    if not path.is_file():
        raise DataError(f"the {name} file given is not found", path)
    if entry and sha256_of(path) != entry["sha256"]:
        _warn(
            f"{path}: not the {name} file the run recorded in {run_dir / 'config.json'} (sha256 differs); "
            f"it is used as given, though the model was trained on the recorded one"
        )
    return path


def _warn(message: str) -> None:
    from tracegraph.runtime.progress import log

    log.warning(message)


def _unhashed(run_dir: Path, train_cfg: dict, given: set = frozenset()) -> dict[str, Path]:
    """A run from before hashes: each path from the working directory, else from the run directory."""
    from tracegraph.runtime.progress import log

    out = {}
    for name in SPLITS:
        p = train_cfg.get(name)
        if not p or name in given:
            continue
        found = next((c for c in (Path(p), run_dir / p) if c.is_file()), None)
        if found is None:
            log.warning(
                f"{run_dir / 'config.json'}: the run's {name} file {p} is not found and left out "
                f"(the run records no hashes; give it with {OVERRIDE[name]})"
            )
            continue
        log.warning(f"{run_dir / 'config.json'}: the run records no hash of its {name} file; using {found} unchecked")
        out[name] = found
    return out
