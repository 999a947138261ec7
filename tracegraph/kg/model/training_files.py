"""A training run's directory: claiming it, ``config.json``, and resuming from its last checkpoint.

Kept apart from the loop in ``train.py`` so that reads top to bottom; everything here runs on rank 0
(or is broadcast from it) under torchrun.
"""

from __future__ import annotations

import json
import platform
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from tracegraph import __version__
from tracegraph.errors import TracegraphError
from tracegraph.kg.model.conve import ConvEConfig
from tracegraph.kg.model.evaluate import evaluation_record
from tracegraph.kg.model.model_io import list_epoch_checkpoints
from tracegraph.kg.model.train_config import TrainConfig
from tracegraph.kg.data.datafiles import record_data_files
from tracegraph.kg.data.labels import record_label_files
from tracegraph.runtime.checkpoints import load_checkpoint, read_json
from tracegraph.runtime.distributed import broadcast_object
from tracegraph.runtime.progress import log
from tracegraph.runtime.seeding import set_rng_state


def state_for_checkpoint(state: dict) -> dict:
    """The training loop's state in the plain types a weights_only checkpoint can hold.

    Args:
        state: The loop's state (history, best MRR, evaluations without gain, skipped steps).

    Returns:
        The state with the history as a JSON string.
    """
    return {
        "history_json": json.dumps(state["history"]),
        "best_mrr": state["best_mrr"],
        "bad_evals": state["bad_evals"],
        "skipped_steps": state["skipped_steps"],
    }


def claim_run_dir(ctx, out: Path, cfg: TrainConfig) -> str:
    """Claim the run directory on rank 0 and share the run id (or the refusal) with every rank.

    Args:
        ctx: The distributed context.
        out: The run directory.
        cfg: The training config (``resume``, ``overwrite``).

    Returns:
        The run id.

    Raises:
        TracegraphError: On every rank, if rank 0 could not claim the directory.
    """
    from tracegraph.runtime.rundir import claim

    run_id, refusal = None, None
    if ctx.is_main:
        try:
            run_id = claim(out, resume=cfg.resume, overwrite=cfg.overwrite)
        except TracegraphError as e:
            refusal = str(e)
    run_id, refusal = broadcast_object((run_id, refusal))  # one process: unchanged
    if refusal is not None:
        raise TracegraphError(refusal)
    return run_id


#: the one rolling checkpoint that resumes a run: weights, optimizer, scheduler, every RNG, the loop's state
RESUME_CHECKPOINT = "resume.pt"


def resume_payload(payload: dict, optimizer, scheduler, gen, state: dict) -> dict:
    """The rolling resume checkpoint: an epoch checkpoint plus everything a bit-identical resume reads.

    Args:
        payload: The epoch checkpoint's payload.
        optimizer: The optimiser.
        scheduler: The learning-rate schedule.
        gen: The batch sampler's NumPy generator.
        state: The training loop's state.

    Returns:
        The payload to save as ``checkpoints/resume.pt``.
    """
    from tracegraph.runtime.seeding import rng_state

    return dict(
        payload,
        optimizer=optimizer.state_dict(),
        scheduler=scheduler.state_dict(),
        rng=rng_state(),
        sampler_rng=gen.get_state(),
        state=state_for_checkpoint(state),
    )


def resume(out: Path, model, optimizer, scheduler, gen, mcfg: ConvEConfig, run_id: str, cfg: TrainConfig | None = None):
    """Restore a run from its resume checkpoint, in place.

    The source is ``checkpoints/resume.pt``, or for a run written before it existed, its last epoch
    checkpoint. Every checkpoint of the directory must be this run's, and ``cfg`` may change only
    what a resume may; the changes, with those recorded before, come back in the state's
    ``changes``.

    Args:
        out: The run directory.
        model: The model to load the weights into.
        optimizer: The optimiser to restore.
        scheduler: The learning-rate schedule to restore.
        gen: The batch sampler's generator to restore.
        mcfg: The model config, which must match the checkpoint's.
        run_id: This run's id.
        cfg: The new training config, to record changed settings; None to skip that check.

    Returns:
        The first epoch to train and the training loop's state.

    Raises:
        TracegraphError: If there is no usable checkpoint, one belongs to another run, or the model
            config differs.
    """
    from tracegraph.kg.model.resume_policy import settings_changed
    from tracegraph.runtime.rundir import checkpoint_run_id

    ckpts = list_epoch_checkpoints(out)
    rolling = out / "checkpoints" / RESUME_CHECKPOINT
    source = rolling if rolling.is_file() else (ckpts[-1] if ckpts else None)
    if source is None:
        raise TracegraphError(f"--resume: no checkpoints in {out / 'checkpoints'}")
    for p in [source, *ckpts]:
        if checkpoint_run_id(p) not in (None, run_id):
            raise TracegraphError(f"--resume: {p} belongs to another run than {out / 'config.json'} records")
    recorded = read_json(out / "config.json") if (out / "config.json").is_file() else {}
    changes = settings_changed(recorded, cfg) if cfg is not None and recorded else []
    payload = load_checkpoint(source)
    if "optimizer" not in payload:
        raise TracegraphError(
            f"--resume: {source} holds weights only (no optimizer state); the run cannot be continued exactly"
        )
    if payload["model_config"] != mcfg.to_dict():
        raise TracegraphError(f"--resume: {source} was trained with another model configuration")
    model.load_state_dict(payload["model"])
    optimizer.load_state_dict(payload["optimizer"])
    scheduler.load_state_dict(payload["scheduler"])
    set_rng_state(payload["rng"])
    gen.set_state(payload["sampler_rng"])
    s = payload["state"]
    start = int(payload["epoch"]) + 1
    state = {
        "history": json.loads(s["history_json"]),
        "best_mrr": s["best_mrr"],
        "bad_evals": s["bad_evals"],
        "skipped_steps": s["skipped_steps"],
        "changes": recorded.get("changes", []) + [dict(epoch=start, **c) for c in changes],
    }
    log.info(f"resuming after epoch {payload['epoch']} from {source}")
    for c in changes:
        log.info(f"--resume: {c['setting']} {c['old']!r} -> {c['new']!r} from epoch {start} (recorded in config.json)")
    return start, state


def run_config(cfg: TrainConfig, mcfg: ConvEConfig, device, precision: str, fused: bool, data, n_samples: int) -> dict:
    """The content of a run's config.json.

    Args:
        cfg: The training config.
        mcfg: The model config.
        device: The training device.
        precision: The precision used.
        fused: Whether the fused loss is used.
        data: The run's triples.
        n_samples: Number of training samples.

    Returns:
        The settings, resolved choices, sizes, data and label files, and versions.
    """
    return {
        "train": asdict(cfg),
        "model": mcfg.to_dict(),
        "resolved": {"device": str(device), "precision": precision, "loss_impl": "fused" if fused else "standard"},
        "sizes": {
            "entities": data.train.num_entities,
            "relations": data.train.num_relations,
            "train_triples": len(data.train),
            "valid_triples": len(data.valid),
            "test_triples": len(data.test),
            "training_samples": n_samples,
        },
        "unseen": data.unseen,
        "data_files": record_data_files({"train": cfg.train, "valid": cfg.valid, "test": cfg.test}, cfg.output_dir),
        **({"label_files": labels} if (labels := record_label_files(cfg.train, cfg.output_dir)) else {}),
        "versions": {
            "tracegraph": __version__,
            "torch": torch.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
    }


def test_results(cfg: TrainConfig, metrics: dict, model_file: Path, unseen: dict | None) -> dict:
    """``test_results.json``: the test metrics of the model kept, in ``evaluation.json``'s layout.

    Args:
        cfg: The run's settings (its data files and ``filter_triples``).
        metrics: The test metrics per side.
        model_file: The model ranked (best, else final).
        unseen: What the ``--unseen`` policy found and did.

    Returns:
        ``{"metrics", "checkpoint", "test", "filter", "unseen"}``; the filter names each file once.
    """
    files, seen = [], set()
    for f in (cfg.train, cfg.valid, cfg.test, *cfg.filter_triples):
        if f and str(Path(f).resolve()) not in seen:
            seen.add(str(Path(f).resolve()))
            files.append(Path(f).resolve())
    return evaluation_record(metrics, model_file, Path(cfg.test).resolve(), files, unseen)
