"""Which checkpoints TracIn sums over: the ``--checkpoints`` / ``--model-dir`` rules in one place.

* no ``--checkpoints`` and ``--model-dir`` naming one checkpoint file: that checkpoint alone;
* no ``--checkpoints`` and a run directory: the epoch checkpoints up to the epoch of the model
  being explained (``best_model.pt``'s when present, else ``final_model.pt``'s), so an
  early-stopped run does not sum checkpoints written after its best model;
* ``all``: every ``checkpoints/epoch_NNNN.pt``; ``best``, ``final`` or paths: those files.
"""

from __future__ import annotations

import re
from pathlib import Path

from tracegraph.errors import DataError
from tracegraph.kg.model.model_io import list_epoch_checkpoints, resolve_checkpoint
from tracegraph.runtime.progress import log

_EPOCH = re.compile(r"epoch_(\d+)\.pt$")


def resolve_checkpoint_list(model_dir: Path, spec: list[str] | None, model_epoch: int | None = None) -> list[Path]:
    """The checkpoint files of ``spec`` (see the module doc).

    Args:
        model_dir: the run directory.
        spec: ``None``, ``["all"]``, ``["best"]``, ``["final"]`` or checkpoint paths.
        model_epoch: with ``spec=None``, keep only the epoch checkpoints up to this epoch.

    Returns:
        The checkpoint paths, in the order given (epochs ascending for the defaults).

    Raises:
        DataError: a named checkpoint is missing.
    """
    model_dir = Path(model_dir)
    if spec is None or spec == ["all"]:
        found = list_epoch_checkpoints(model_dir)
        if not found:
            log.warning("no checkpoints/epoch_*.pt: using the single final/best model")
            return [resolve_checkpoint(model_dir)]
        if spec is None and model_epoch is not None:
            kept = [p for p in found if int(_EPOCH.search(p.name).group(1)) <= model_epoch]
            return kept or found[:1]
        return found
    out = []
    for s in spec:
        if s in ("best", "final"):
            p = model_dir / f"{s}_model.pt"
            if not p.is_file():
                raise DataError(f"--checkpoints {s}: {p.name} not found", model_dir)
            out.append(p)
        else:
            p = Path(s)
            if not p.is_file():
                raise DataError("checkpoint not found", p)
            out.append(p)
    return out


def explained_checkpoints(store, spec: list[str] | None) -> tuple[list[Path], str]:
    """The checkpoints ``explain`` sums over for the run ``store`` was opened on, and the line that says so.

    The line is logged by the caller once the inputs are checked, so an input error stays one line.

    Args:
        store: the run's :class:`~tracegraph.kg.model.store.RunStore`; when it was opened on one
            checkpoint file and ``spec`` is None, that checkpoint alone is summed.
        spec: ``None`` (the epoch checkpoints up to the explained model's epoch), ``["all"]``,
            ``["best"]``, ``["final"]`` or checkpoint paths (see :func:`resolve_checkpoint_list`).

    Returns:
        ``(checkpoint paths, log line)``: the line names how many checkpoints, why, and which.

    Raises:
        DataError: a named checkpoint is missing.
    """
    if spec is None and store.opened_with.is_file():
        chosen = [store.opened_with]
        why = f"the checkpoint given as the model ({store.opened_with.name})"
    else:
        epoch = store.checkpoint_info(store.checkpoint).epoch if spec is None else None
        chosen = resolve_checkpoint_list(store.path, spec, epoch)
        why = (
            f"up to {store.checkpoint.name}'s epoch {epoch}"
            if spec is None and epoch is not None
            else f"--checkpoints {' '.join(spec or ['all'])}"
        )
    names = [p.name for p in chosen]
    listed = ", ".join(names) if len(names) <= 6 else f"{', '.join(names[:3])}, …, {', '.join(names[-2:])}"
    return chosen, f"TracIn sums {len(chosen)} checkpoint(s), {why}: {listed}"


def single_checkpoint_warning(store, spec: list[str] | None, chosen: list[Path]) -> str | None:
    """The warning when TracIn would sum one checkpoint that the user did not name, else None.

    One checkpoint makes TracIn a single gradient product at one point of training rather than a
    sum along it; more checkpoints come from training with a smaller ``--checkpoint-every``.

    Args:
        store: the run's store (was it opened on one checkpoint file?).
        spec: the ``--checkpoints`` given, or None.
        chosen: the checkpoints :func:`explained_checkpoints` chose.

    Returns:
        The warning, or None when more than one is summed or the one was asked for by name.
    """
    named = (spec is None and store.opened_with.is_file()) or (spec not in (None, ["all"]))
    if len(chosen) != 1 or named:
        return None
    return (
        f"TracIn sums a single checkpoint ({chosen[0].name}): the influence is one gradient product at that "
        f"point of training, not a sum along it. Train with --checkpoint-every K (K below the explained "
        f"model's epoch) to save more checkpoints"
    )


__all__ = ["resolve_checkpoint_list", "explained_checkpoints", "single_checkpoint_warning"]
